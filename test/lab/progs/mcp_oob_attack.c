/*
 * mcp_oob_attack.c - a hostile tenant against one mcpnet process's out-of-band listener,
 * for the lab (hub_hostile.sh): it speaks the wire format (mcpnet_core's encoder) with
 * everything but a listen's key.
 *
 *   mcp-oob-attack --handle FILE [--replay-handle FILE] [--seconds S] [--flood N]
 *
 * FILE is the victim's published handle: the attacker takes its address and port, as a
 * port scan would find them, and its listen id, as if that had leaked; never its key.
 * --replay-handle names another process's handle, whose nonce the attacker claims as its
 * own (the hijack of issue 35). For S seconds (default 20) it keeps N connections (default
 * 300) open and silent, opening new ones as the victim closes them, and meanwhile, round
 * after round: HTTP and random bytes; PINGs before any HELLO; a HELLO whose host name
 * carries a newline and a forged log line; HELLOs for listens that do not exist; HELLOs
 * for the leaked listen id claiming the other process's nonce, each followed by a request
 * with a guessed MAC; and requests a peer would send only after proving itself. Output:
 * one "attack:" line with the counts, and exit 0 (the verdict is the victim's).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn/wire.h"

static double now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static union mcp_sockaddr victim;
static long made, refused_or_closed, sent_frames;

static int dial(void)
{
  int fd = socket(victim.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return -1;
  if (connect(fd, &victim.sa, mcp_sockaddr_len(&victim)) != 0) {
    close(fd);
    return -1;
  }
  made++;
  return fd;
}

static void send_bytes(int fd, const void *p, size_t n)
{
  if (send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n)
    sent_frames++;
}

static void send_msg(int fd, const struct mcp_wire_msg *m)
{
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len;

  if (mcp_wire_encode(m, buf, sizeof(buf), &len, err, sizeof(err)) == 0)
    send_bytes(fd, buf, len);
}

/* Waits up to ms for the victim to close fd (EOF or reset), reading what it says. */
static int closed_by_victim(int fd, int ms)
{
  double end = now_s() + ms / 1000.0;
  char buf[4096];

  while (now_s() < end) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t n;

    if (poll(&p, 1, 50) <= 0)
      continue;
    n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      refused_or_closed++;
      return 1;
    }
  }
  return 0;
}

static struct mcp_wire_msg hello(uint64_t nonce, uint32_t listen_id, const char *host)
{
  struct mcp_wire_msg m;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_HELLO;
  m.u.hello.nonce = nonce;
  m.u.hello.pid = 1;
  snprintf(m.u.hello.hostname, sizeof(m.u.hello.hostname), "%s", host);
  snprintf(m.u.hello.plugin_version, sizeof(m.u.hello.plugin_version), "0.1.0");
  m.u.hello.local_rank = -1;
  m.u.hello.challenge = rnd() | 1;
  m.u.hello.listen_id = listen_id;
  return m;
}

static void request_guess(int fd, uint32_t listen_id)
{
  struct mcp_wire_msg m;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REQ;
  m.u.conn_req.listen_id = listen_id;
  m.u.conn_req.mac = rnd();
  m.u.conn_req.ep.stream_id = (uint32_t)rnd() | 1;
  snprintf(m.u.conn_req.ep.dev_name, sizeof(m.u.conn_req.ep.dev_name), "mlx5_0");
  m.u.conn_req.ep.port = 1;
  m.u.conn_req.ep.link_layer = MCP_WIRE_LINK_ETHERNET;
  m.u.conn_req.ep.active_mtu = 3;
  m.u.conn_req.ep.nqps = 1;
  m.u.conn_req.ep.ring_slots = 64;
  m.u.conn_req.ep.fp.gid_type = MCP_WIRE_GID_ROCE_V2;
  m.u.conn_req.ep.fp.gid_family = 4;
  m.u.conn_req.ep.fp.qps_per_conn = 1;
  send_msg(fd, &m);
}

/* One round of everything but the flood. */
static void round_once(uint32_t listen_id, uint64_t replay_nonce)
{
  static const char http[] = "GET / HTTP/1.0\r\n\r\n";
  struct mcp_wire_msg m;
  uint8_t junk[512], buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len;
  int fd;

  if ((fd = dial()) >= 0) { /* a web client */
    send_bytes(fd, http, sizeof(http) - 1);
    closed_by_victim(fd, 2000);
    close(fd);
  }
  if ((fd = dial()) >= 0) { /* noise */
    for (size_t i = 0; i < sizeof(junk); i++)
      junk[i] = (uint8_t)rnd();
    send_bytes(fd, junk, sizeof(junk));
    closed_by_victim(fd, 2000);
    close(fd);
  }
  if ((fd = dial()) >= 0) { /* PINGs before any HELLO */
    memset(&m, 0, sizeof(m));
    m.type = MCP_WIRE_PING;
    for (int i = 0; i < 100; i++)
      send_msg(fd, &m);
    closed_by_victim(fd, 2000);
    close(fd);
  }
  if ((fd = dial()) >= 0) { /* a newline in the host name: a forged log line */
    static const char evil[] = "c\nNCCL WARN forged by c";
    m = hello(replay_nonce, listen_id, "placeholder-placeholder-");
    if (mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)) == 0) {
      memcpy(buf + MCP_WIRE_HDR_SIZE + 8 + 4 + 2, evil, sizeof(evil) - 1);
      send_bytes(fd, buf, len);
    }
    closed_by_victim(fd, 2000);
    close(fd);
  }
  for (int i = 0; i < 20; i++) { /* listens that do not exist */
    if ((fd = dial()) < 0)
      break;
    m = hello(rnd(), (uint32_t)rnd(), "c");
    send_msg(fd, &m);
    closed_by_victim(fd, 2000);
    close(fd);
  }
  for (int i = 0; i < 20; i++) { /* the leaked listen id, another's nonce, a guessed MAC */
    if ((fd = dial()) < 0)
      break;
    m = hello(replay_nonce, listen_id, "c");
    send_msg(fd, &m);
    request_guess(fd, listen_id);
    closed_by_victim(fd, 2000);
    close(fd);
  }
  if ((fd = dial()) >= 0) { /* a request before any HELLO */
    request_guess(fd, listen_id);
    closed_by_victim(fd, 2000);
    close(fd);
  }
}

static int read_handle(const char *path, struct mcp_wire_handle *h)
{
  uint8_t buf[MCP_WIRE_HANDLE_SIZE];
  char err[MCP_WIRE_ERRLEN];
  FILE *f = fopen(path, "rb");
  size_t n;

  if (f == NULL)
    return -1;
  n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  if (n != sizeof(buf) || mcp_wire_handle_decode(buf, h, err, sizeof(err)) != 0) {
    fprintf(stderr, "mcp-oob-attack: %s: %s\n", path, n != sizeof(buf) ? "short" : err);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv)
{
  const char *handle = NULL, *replay = NULL;
  struct mcp_wire_handle h, other;
  double seconds = 20, end;
  int flood = 300, *held, rounds = 0, open_now = 0, most = 0;
  struct rlimit rl;
  char addr[MCP_SOCKADDR_STRLEN];

  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--handle") && i + 1 < argc)
      handle = argv[++i];
    else if (!strcmp(argv[i], "--replay-handle") && i + 1 < argc)
      replay = argv[++i];
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--flood") && i + 1 < argc)
      flood = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s --handle FILE [--replay-handle FILE] [--seconds S] [--flood N]\n", argv[0]);
      return 2;
    }
  }
  if (handle == NULL || flood < 0 || read_handle(handle, &h) != 0)
    return 2;
  memset(&other, 0, sizeof(other));
  if (replay != NULL && read_handle(replay, &other) != 0)
    return 2;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)flood + 64) {
    rl.rlim_cur = (rlim_t)flood + 64;
    if (rl.rlim_max < rl.rlim_cur)
      rl.rlim_max = rl.rlim_cur;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  mcp_wire_handle_get_sockaddr(&h, &victim);
  held = calloc((size_t)(flood > 0 ? flood : 1), sizeof(int));
  if (held == NULL)
    return 2;
  for (int i = 0; i < flood; i++)
    held[i] = -1;
  end = now_s() + seconds;
  while (now_s() < end) {
    /* Keep the flood at its size: the victim closes strangers, new ones come. */
    open_now = 0;
    for (int i = 0; i < flood; i++) {
      char c;

      if (held[i] >= 0 && recv(held[i], &c, 1, MSG_DONTWAIT) == 0) {
        close(held[i]);
        held[i] = -1;
        refused_or_closed++;
      }
      if (held[i] < 0)
        held[i] = dial();
      open_now += held[i] >= 0;
    }
    most = open_now > most ? open_now : most;
    round_once(h.listen_id, replay != NULL ? other.nonce : rnd());
    rounds++;
  }
  for (int i = 0; i < flood; i++)
    if (held[i] >= 0)
      close(held[i]);
  printf("attack: %.0f s against %s: %ld connections made (%d flooding at most at once), %ld closed by the "
         "victim, %ld frames or byte runs sent, %d rounds\n",
         seconds, mcp_sockaddr_format(&victim, addr, sizeof(addr)), made, most, refused_or_closed,
         sent_frames, rounds);
  free(held);
  return 0;
}
