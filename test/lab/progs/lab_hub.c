/*
 * lab_hub.c - the one Ethernet segment of the lab's hub topology (test/lab/lab hub).
 *
 *   lab-hub SOCKET...   (3 to 16 paths; one port per path)
 *
 * A QEMU `stream` netdev joins exactly two guests, so N guests on one segment need a
 * switch between them. This program is that switch, on the host: it serves one UNIX
 * stream socket per guest (QEMU connects to it with server=off) and forwards Ethernet
 * frames among them in QEMU's stream framing, a 4-byte big-endian length followed by
 * the frame. It only ever touches the UNIX sockets it was given, so no lab frame can
 * leave this machine.
 *
 * Forwarding: the source MAC of every frame is learnt per port; a frame to a learnt
 * unicast MAC goes to that port only, any other (broadcast, multicast, unknown) to all
 * other connected ports. A port whose guest does not read fast enough has its frames
 * dropped once its queue is full, as a real switch drops them, so that one slow guest
 * never stalls the others. A guest that disconnects (its QEMU ended) frees its port
 * for the next connection, so a rebooted guest joins again.
 *
 * Lifetime: it dies with its parent (the lab script), by PR_SET_PDEATHSIG, so that no
 * hub outlives a run, whichever way the run ends. "lab-hub: ready" on stdout says that
 * every socket listens; errors go to stderr with a non-zero exit status, which the lab
 * reports as a setup failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_PORTS 16
/* QEMU's largest frame (NET_BUFSIZE: 4096 + 65536) plus room; longer is a broken peer. */
#define MAX_FRAME (4096 + 65536)
#define IN_SIZE (4 + MAX_FRAME)
/* Frames queued for one slow guest before the hub drops more (a switch's buffer). */
#define OUT_SIZE (4u << 20)
#define MAX_MACS 64

struct port {
  const char *path;
  int lfd, fd;
  unsigned char *in, *out;
  size_t in_len, out_off, out_len;
  unsigned long frames_in, dropped;
};

static struct port ports[MAX_PORTS];
static int nports;
static struct {
  unsigned char mac[6];
  int port;
} macs[MAX_MACS];
static int nmacs;

static int listen_on(const char *path)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd;

  if (strlen(path) >= sizeof(sa.sun_path)) {
    fprintf(stderr, "lab-hub: socket path too long (%zu bytes, at most %zu): %s\n", strlen(path),
            sizeof(sa.sun_path) - 1, path);
    return -1;
  }
  strcpy(sa.sun_path, path);
  unlink(path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1) != 0) {
    fprintf(stderr, "lab-hub: cannot listen on %s: %s\n", path, strerror(errno));
    return -1;
  }
  return fd;
}

static void port_close(struct port *p)
{
  int i;

  close(p->fd);
  p->fd = -1;
  p->in_len = p->out_off = p->out_len = 0;
  /* Its MACs may come back on another port after a reboot: unlearn them. */
  for (i = 0; i < nmacs;)
    if (macs[i].port == (int)(p - ports))
      macs[i] = macs[--nmacs];
    else
      i++;
}

static int mac_port(const unsigned char *mac)
{
  int i;

  for (i = 0; i < nmacs; i++)
    if (!memcmp(macs[i].mac, mac, 6))
      return macs[i].port;
  return -1;
}

static void mac_learn(const unsigned char *mac, int port)
{
  int i;

  if (mac[0] & 1)
    return; /* a group address is never a source */
  for (i = 0; i < nmacs; i++)
    if (!memcmp(macs[i].mac, mac, 6)) {
      macs[i].port = port;
      return;
    }
  if (nmacs < MAX_MACS) {
    memcpy(macs[nmacs].mac, mac, 6);
    macs[nmacs++].port = port;
  }
}

/* Write what is queued for p; 0, or -1 when its guest is gone. */
static int port_flush(struct port *p)
{
  while (p->out_len > 0) {
    ssize_t n = write(p->fd, p->out + p->out_off, p->out_len);
    if (n < 0)
      return errno == EAGAIN || errno == EINTR ? 0 : -1;
    p->out_off += (size_t)n;
    p->out_len -= (size_t)n;
  }
  p->out_off = 0;
  return 0;
}

/* Queue one framed record (length prefix included) for port p, or drop it when full. */
static void port_queue(struct port *p, const unsigned char *rec, size_t len)
{
  if (p->out_off + p->out_len + len > OUT_SIZE) {
    memmove(p->out, p->out + p->out_off, p->out_len);
    p->out_off = 0;
  }
  if (p->out_len + len > OUT_SIZE) {
    p->dropped++;
    return;
  }
  memcpy(p->out + p->out_off + p->out_len, rec, len);
  p->out_len += len;
}

static void forward(int from, const unsigned char *rec, size_t len)
{
  const unsigned char *frame = rec + 4;
  int to = -1, i;

  if (len >= 4 + 14) {
    mac_learn(frame + 6, from);
    if (!(frame[0] & 1))
      to = mac_port(frame);
  }
  for (i = 0; i < nports; i++)
    if (i != from && ports[i].fd >= 0 && (to < 0 || to == i))
      port_queue(&ports[i], rec, len);
}

/* Read what port p has sent and forward each complete frame; -1 when it is gone. */
static int port_read(int idx)
{
  struct port *p = &ports[idx];
  size_t off = 0;
  ssize_t n;

  n = read(p->fd, p->in + p->in_len, IN_SIZE - p->in_len);
  if (n == 0)
    return -1;
  if (n < 0)
    return errno == EAGAIN || errno == EINTR ? 0 : -1;
  p->in_len += (size_t)n;
  while (p->in_len - off >= 4) {
    const unsigned char *h = p->in + off;
    uint32_t flen = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    if (flen > MAX_FRAME) {
      fprintf(
        stderr,
        "lab-hub: port %d (%s) sent a frame length of %u bytes (at most %d): not QEMU's stream framing\n",
        idx, p->path, flen, MAX_FRAME);
      exit(1);
    }
    if (p->in_len - off < 4 + flen)
      break;
    p->frames_in++;
    forward(idx, h, 4 + flen);
    off += 4 + flen;
  }
  memmove(p->in, p->in + off, p->in_len - off);
  p->in_len -= off;
  return 0;
}

static void on_term(int sig)
{
  (void)sig;
  _exit(0);
}

int main(int argc, char **argv)
{
  struct pollfd pfd[MAX_PORTS];
  int i;

  if (argc < 4 || argc - 1 > MAX_PORTS) {
    fprintf(stderr, "usage: lab-hub SOCKET... (3 to %d UNIX socket paths, one per guest)\n", MAX_PORTS);
    return 2;
  }
  /* Die with the lab script, even when it is killed outright. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1)
    return 1;
  signal(SIGTERM, on_term);
  signal(SIGPIPE, SIG_IGN);
  nports = argc - 1;
  for (i = 0; i < nports; i++) {
    struct port *p = &ports[i];
    p->path = argv[i + 1];
    p->fd = -1;
    p->in = malloc(IN_SIZE);
    p->out = malloc(OUT_SIZE);
    if (!p->in || !p->out) {
      fprintf(stderr, "lab-hub: out of memory\n");
      return 1;
    }
    p->lfd = listen_on(p->path);
    if (p->lfd < 0)
      return 1;
  }
  printf("lab-hub: ready: %d ports\n", nports);
  fflush(stdout);

  for (;;) {
    for (i = 0; i < nports; i++) {
      struct port *p = &ports[i];
      if (p->fd < 0) {
        pfd[i].fd = p->lfd;
        pfd[i].events = POLLIN;
      } else {
        pfd[i].fd = p->fd;
        pfd[i].events = POLLIN | (p->out_len ? POLLOUT : 0);
      }
      pfd[i].revents = 0;
    }
    if (poll(pfd, (nfds_t)nports, -1) < 0) {
      if (errno == EINTR)
        continue;
      fprintf(stderr, "lab-hub: poll: %s\n", strerror(errno));
      return 1;
    }
    for (i = 0; i < nports; i++) {
      struct port *p = &ports[i];
      if (!pfd[i].revents)
        continue;
      if (p->fd < 0) {
        p->fd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (p->fd >= 0)
          printf("lab-hub: port %d (%s) connected\n", i, p->path);
        fflush(stdout);
        continue;
      }
      if ((pfd[i].revents & POLLERR) || ((pfd[i].revents & POLLOUT) && port_flush(p) != 0)) {
        printf("lab-hub: port %d (%s) closed after %lu frames in, %lu dropped\n", i, p->path, p->frames_in,
               p->dropped);
        fflush(stdout);
        port_close(p);
        continue;
      }
      if ((pfd[i].revents & (POLLIN | POLLHUP)) && port_read(i) != 0) {
        printf("lab-hub: port %d (%s) closed after %lu frames in, %lu dropped\n", i, p->path, p->frames_in,
               p->dropped);
        fflush(stdout);
        port_close(p);
      }
    }
    /* Write what this round queued without waiting for another poll. */
    for (i = 0; i < nports; i++)
      if (ports[i].fd >= 0 && ports[i].out_len && port_flush(&ports[i]) != 0) {
        printf("lab-hub: port %d (%s) closed\n", i, ports[i].path);
        fflush(stdout);
        port_close(&ports[i]);
      }
  }
}
