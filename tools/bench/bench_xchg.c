/*
 * bench_xchg.c - how the two processes of a pair swap their listen handles before any
 * plugin connection exists: files in a shared folder (--xchg, as the lab's guests
 * share one) or one TCP connection (--server/--client, for real hosts). It carries
 * one fixed-size blob each way and nothing else; everything later travels over the
 * plugin itself. It binds and connects only to the addresses the user named.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

static const char *role_name(enum bench_role r) { return r == BENCH_ROLE_A ? "a" : "b"; }

/* Splits "HOST:PORT", "[V6]:PORT" or "PORT" (host NULL) into host and port. */
static int split_hostport(const char *s, char *host, size_t hlen, char *port, size_t plen, int need_host)
{
  const char *colon = strrchr(s, ':');

  host[0] = '\0';
  if (colon == NULL) {
    if (need_host)
      return -1;
    snprintf(port, plen, "%s", s);
    return 0;
  }
  if (s[0] == '[') {
    const char *end = strchr(s, ']');
    if (end == NULL || end + 1 != colon)
      return -1;
    snprintf(host, hlen, "%.*s", (int)(end - s - 1), s + 1);
  } else {
    snprintf(host, hlen, "%.*s", (int)(colon - s), s);
  }
  snprintf(port, plen, "%s", colon + 1);
  return port[0] == '\0' ? -1 : 0;
}

/* Binds the first address that works; without HOST the IPv6 wildcard comes first,
 * since a dual-stack socket also takes IPv4 peers, then the IPv4 wildcard. */
static int tcp_bind(const char *spec, const char *host, const char *port)
{
  struct addrinfo hints, *ai = NULL, *p;
  int fd = -1, one = 1, pass, rc;

  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "mcpnet-bench: --server %s: %s\n", spec, gai_strerror(rc));
    return -1;
  }
  for (pass = 0; pass < 2 && fd < 0; pass++) {
    for (p = ai; p != NULL && fd < 0; p = p->ai_next) {
      if ((pass == 0) != (p->ai_family == AF_INET6))
        continue;
      fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
      if (fd < 0)
        continue;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (bind(fd, p->ai_addr, p->ai_addrlen) != 0 || listen(fd, 1) != 0) {
        rc = errno;
        close(fd);
        fd = -1;
        errno = rc;
      }
    }
  }
  if (fd < 0)
    fprintf(stderr, "mcpnet-bench: cannot listen on %s: %s\n", spec, strerror(errno));
  freeaddrinfo(ai);
  return fd;
}

static int tcp_listen_accept(const char *spec, int timeout_s)
{
  char host[256], port[32];
  struct pollfd pfd;
  int fd, cfd;

  if (split_hostport(spec, host, sizeof(host), port, sizeof(port), 0) != 0) {
    fprintf(stderr, "mcpnet-bench: --server wants [HOST:]PORT, got '%s'\n", spec);
    return -1;
  }
  fd = tcp_bind(spec, host, port);
  if (fd < 0)
    return -1;
  fprintf(stderr, "mcpnet-bench: role a waiting for role b on %s\n", spec);
  pfd.fd = fd;
  pfd.events = POLLIN;
  if (poll(&pfd, 1, timeout_s * 1000) != 1) {
    fprintf(stderr, "mcpnet-bench: no peer connected to %s within %d s\n", spec, timeout_s);
    close(fd);
    return -1;
  }
  cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
  close(fd);
  if (cfd < 0)
    perror("mcpnet-bench: accept");
  return cfd;
}

/* The server may start later than the client: retry until timeout_s. */
static int tcp_connect(const char *spec, int timeout_s)
{
  char host[256], port[32];
  struct addrinfo hints, *ai = NULL, *p;
  double deadline = drv_now() + timeout_s;
  int fd = -1, rc, err = 0;

  if (split_hostport(spec, host, sizeof(host), port, sizeof(port), 1) != 0) {
    fprintf(stderr, "mcpnet-bench: --client wants HOST:PORT, got '%s'\n", spec);
    return -1;
  }
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(host, port, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "mcpnet-bench: --client %s: %s\n", spec, gai_strerror(rc));
    return -1;
  }
  while (fd < 0 && drv_now() < deadline) {
    for (p = ai; p != NULL && fd < 0; p = p->ai_next) {
      fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
      if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen) != 0) {
        err = errno;
        close(fd);
        fd = -1;
      }
    }
    if (fd < 0)
      usleep(100000);
  }
  freeaddrinfo(ai);
  if (fd < 0)
    fprintf(stderr, "mcpnet-bench: cannot connect to %s within %d s: %s\n", spec, timeout_s, strerror(err));
  return fd;
}

int bench_xchg_open(struct bench_xchg *x, const struct bench_opts *o)
{
  int one = 1;

  memset(x, 0, sizeof(*x));
  x->fd = -1;
  x->dir = o->xchg;
  if (o->server != NULL)
    x->fd = tcp_listen_accept(o->server, o->timeout_s);
  else if (o->client != NULL)
    x->fd = tcp_connect(o->client, o->timeout_s);
  else
    return 0;
  if (x->fd < 0)
    return -1;
  setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
  const char *p = buf;

  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_all(int fd, void *buf, size_t len, int timeout_s)
{
  char *p = buf;
  double deadline = drv_now() + timeout_s;

  while (len > 0) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ssize_t n;
    if (poll(&pfd, 1, 200) == 0) {
      if (drv_now() > deadline)
        return -1;
      continue;
    }
    n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int bench_xchg_swap(struct bench_xchg *x, const struct bench_opts *o, const void *mine, void *peer,
                    size_t len, int timeout_s)
{
  char name[64];

  if (x->fd >= 0) {
    if (write_all(x->fd, mine, len) != 0 || read_all(x->fd, peer, len, timeout_s) != 0) {
      fprintf(stderr, "mcpnet-bench: the handle exchange over TCP failed (peer gone or timed out)\n");
      return -1;
    }
    return 0;
  }
  snprintf(name, sizeof(name), "mcpnet-bench.%s.hello", role_name(o->role));
  if (drv_file_put(x->dir, name, mine, len, x->own_file, sizeof(x->own_file)) != 0)
    return -1;
  snprintf(name, sizeof(name), "mcpnet-bench.%s.hello",
           role_name(o->role == BENCH_ROLE_A ? BENCH_ROLE_B : BENCH_ROLE_A));
  return drv_file_get(x->dir, name, peer, len, timeout_s);
}

/* Once connected, the peer has read our handles: removing them keeps a later run in
 * the same folder from finding stale ones. */
void bench_xchg_tidy(struct bench_xchg *x)
{
  if (x->own_file[0] != '\0')
    unlink(x->own_file);
  x->own_file[0] = '\0';
}

void bench_xchg_close(struct bench_xchg *x)
{
  bench_xchg_tidy(x);
  if (x->fd >= 0)
    close(x->fd);
  x->fd = -1;
}
