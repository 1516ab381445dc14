/*
 * doctor_ctl.c - the control connection between `mcpnet-doctor --listen` and
 * `mcpnet-doctor --peer`: one TCP stream of small framed messages (summaries, the
 * plugin's listen handle, step results) that keeps the two sides in step. It is built
 * on the plugin's own socket layer, so a failed connect is classified the same way the
 * plugin classifies its out-of-band connects: refused (nothing listens), unreachable
 * (no route) or no answer within the deadline (a firewall drops it). Every wait here
 * has a deadline; nothing blocks forever. Both ends prove they know the run's token
 * before anything else travels (doctor_ctl.h).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "doctor_ctl.h"
#include "core/clock.h"
#include "core/random.h"
#include "core/siphash.h"
#include "core/sock.h"

#define CTL_MAGIC 0x4d435044u /* "MCPD" */
#define CTL_HDR 12
#define AUTH_TIMEOUT_S 5 /* a stranger on the port holds the listener no longer */

static double now_s(void) { return (double)mcp_clock_ns() * 1e-9; }

static uint64_t run_key[2];
static int have_run_key;

int doctor_ctl_set_token(const char *token)
{
  /* Two fixed keys turn the text into a 128-bit one; the token must be hard to guess,
   * not the derivation. */
  static const uint64_t k0[2] = {0x6d63706e65742d64ull, 0x6f63746f722d6b30ull};
  static const uint64_t k1[2] = {0x6d63706e65742d64ull, 0x6f63746f722d6b31ull};

  if (token == NULL || strlen(token) < DOCTOR_TOKEN_MIN)
    return -1;
  run_key[0] = mcp_siphash24(k0, token, strlen(token));
  run_key[1] = mcp_siphash24(k1, token, strlen(token));
  have_run_key = 1;
  return 0;
}

int doctor_ctl_random_token(char *buf, size_t len)
{
  uint64_t v[2];
  int waited;

  if (len < 33 || mcp_random_fill_wait(v, sizeof(v), &waited) != 0)
    return -1;
  snprintf(buf, len, "%016llx%016llx", (unsigned long long)v[0], (unsigned long long)v[1]);
  return 0;
}

int doctor_ctl_run_token(const char *tool, const char *mode, char *drawn, size_t len)
{
  const char *token = getenv(DOCTOR_TOKEN_ENV);

  if (token != NULL && *token != '\0') {
    if (doctor_ctl_set_token(token) == 0)
      return 0;
    fprintf(stderr,
            "%s: %s is shorter than %d characters: use a long random value, e.g. "
            "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')\n",
            tool, DOCTOR_TOKEN_ENV, DOCTOR_TOKEN_MIN);
    return -1;
  }
  if (drawn != NULL && doctor_ctl_random_token(drawn, len) == 0)
    return doctor_ctl_set_token(drawn);
  fprintf(
    stderr, "%s: %s needs the run's token in %s, the same on every node: %s\n", tool, mode, DOCTOR_TOKEN_ENV,
    strcmp(mode, "--fleet") == 0
      ? "set it in the job, e.g. export MCPNET_DOCTOR_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n') "
        "before srun, or from a Kubernetes Secret"
      : "the one mcpnet-doctor --listen printed on the other host");
  return -1;
}

static uint64_t auth_mac(uint64_t what, uint64_t chal_conn, uint64_t chal_listen)
{
  uint8_t msg[24];
  const uint64_t w[3] = {what, chal_conn, chal_listen};

  for (int i = 0; i < 24; i++)
    msg[i] = (uint8_t)(w[i / 8] >> (8 * (i % 8)));
  return mcp_siphash24(run_key, msg, sizeof(msg));
}
#define AUTH_LISTENER 0x72656e657473696cull  /* "listener" */
#define AUTH_CONNECTOR 0x726f7463656e6e6full /* "onnector" */

static void put_u64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
  uint64_t v = 0;

  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static int auth_connector(struct doctor_ctl *c, int timeout_s);
static int auth_listener(struct doctor_ctl *c);

/* "HOST", "HOST:PORT", "[V6]:PORT", "V6" (more than one colon, no brackets). */
static int split_hostport(const char *s, char *host, size_t hlen, int *port)
{
  const char *colon = strrchr(s, ':');

  if (s[0] == '[') {
    const char *end = strchr(s, ']');
    if (end == NULL)
      return -1;
    snprintf(host, hlen, "%.*s", (int)(end - s - 1), s + 1);
    if (end[1] == ':')
      *port = atoi(end + 2);
    else if (end[1] != '\0')
      return -1;
  } else if (colon != NULL && strchr(s, ':') == colon) {
    snprintf(host, hlen, "%.*s", (int)(colon - s), s);
    *port = atoi(colon + 1);
  } else {
    snprintf(host, hlen, "%s", s);
  }
  return host[0] != '\0' && *port > 0 && *port < 65536 ? 0 : -1;
}

static int resolve(const char *host, int port, union mcp_sockaddr *out, char *msg, size_t len)
{
  struct addrinfo hints, *ai = NULL;
  int rc;

  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(host, NULL, &hints, &ai);
  if (rc != 0 || ai == NULL) {
    snprintf(msg, len, "cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  memset(out, 0, sizeof(*out));
  memcpy(out, ai->ai_addr, ai->ai_addrlen <= sizeof(*out) ? ai->ai_addrlen : sizeof(*out));
  mcp_sockaddr_set_port(out, (uint16_t)port);
  freeaddrinfo(ai);
  return 0;
}

int doctor_ctl_connect(struct doctor_ctl *c, const char *spec, int default_port, int timeout_s)
{
  struct mcp_sock_connect_opts opts = {.timeout_ms = (uint32_t)timeout_s * 1000u};
  struct mcp_sock_connect sc;
  char host[256];
  int port = default_port;

  memset(c, 0, sizeof(*c));
  c->fd = -1;
  if (split_hostport(spec, host, sizeof(host), &port) != 0) {
    c->fail = DOCTOR_CTL_BAD_ADDRESS;
    snprintf(c->msg, sizeof(c->msg), "--peer wants HOST or HOST:PORT, got '%s'", spec);
    return -1;
  }
  if (resolve(host, port, &c->addr, c->msg, sizeof(c->msg)) != 0) {
    c->fail = DOCTOR_CTL_BAD_ADDRESS;
    return -1;
  }
  mcp_sockaddr_format(&c->addr, c->peer, sizeof(c->peer));
  c->port = port;
  c->start = now_s();
  mcp_sock_connect_start(&sc, &c->addr, NULL, &opts);
  while (mcp_sock_connect_progress(&sc) == MCP_SOCK_CONNECT_IN_PROGRESS)
    usleep(5000);
  c->elapsed = now_s() - c->start;
  if (sc.state == MCP_SOCK_CONNECT_DONE) {
    c->fd = mcp_sock_connect_take_fd(&sc);
    if (auth_connector(c, timeout_s) == 0)
      return 0;
    doctor_ctl_close(c);
    c->fail = DOCTOR_CTL_AUTH;
    snprintf(c->msg, sizeof(c->msg),
             "the doctor at %s does not know this run's token (or did not answer its challenge within %d s)",
             c->peer, timeout_s);
    return -1;
  }
  c->fail = sc.fail == MCP_SOCK_FAIL_REFUSED ? DOCTOR_CTL_REFUSED
    : sc.fail == MCP_SOCK_FAIL_UNREACHABLE   ? DOCTOR_CTL_UNREACHABLE
    : sc.fail == MCP_SOCK_FAIL_TIMEOUT       ? DOCTOR_CTL_NO_ANSWER
                                             : DOCTOR_CTL_OTHER;
  snprintf(c->msg, sizeof(c->msg), "%s", sc.msg);
  mcp_sock_connect_cancel(&sc);
  return -1;
}

static int listen_on(const char *bind_addr, int port, int *fd, union mcp_sockaddr *bound, char *msg,
                     size_t len)
{
  static const char *wild[] = {"[::]", "0.0.0.0"};
  union mcp_sockaddr a;
  char spec[128];

  for (unsigned i = 0; i < (bind_addr ? 1u : 2u); i++) {
    if (bind_addr != NULL && strchr(bind_addr, ':') != NULL && bind_addr[0] != '[')
      snprintf(spec, sizeof(spec), "[%s]:%d", bind_addr, port);
    else
      snprintf(spec, sizeof(spec), "%s:%d", bind_addr ? bind_addr : wild[i], port);
    if (mcp_sockaddr_parse(spec, &a) != 0) {
      snprintf(msg, len, "--bind wants a numeric address, got '%s'", bind_addr ? bind_addr : "");
      return -1;
    }
    if (mcp_sock_listen(&a, NULL, fd, bound, msg, len) == 0)
      return 0;
  }
  return -1;
}

/* A frame header from something that is not a doctor (a scanner, a browser). */
static int looks_like_doctor(int fd, double deadline)
{
  struct pollfd p = {.fd = fd, .events = POLLIN};
  uint8_t hdr[4];
  ssize_t n;

  while (now_s() < deadline) {
    if (poll(&p, 1, 100) <= 0)
      continue;
    n = recv(fd, hdr, sizeof(hdr), MSG_PEEK);
    if (n <= 0)
      return 0;
    if (n == (ssize_t)sizeof(hdr))
      return ((uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3]) == CTL_MAGIC;
  }
  return 0;
}

int doctor_ctl_listen(const char *bind_addr, int port, int *lfd, char *bound, size_t blen, int *bound_port,
                      char *msg, size_t mlen)
{
  union mcp_sockaddr a;

  *lfd = -1;
  if (listen_on(bind_addr, port, lfd, &a, msg, mlen) != 0)
    return -1;
  mcp_sockaddr_format(&a, bound, blen);
  *bound_port = mcp_sockaddr_port(&a);
  return 0;
}

int doctor_ctl_accept_on(struct doctor_ctl *c, int lfd, double deadline)
{
  union mcp_sockaddr peer;

  memset(c, 0, sizeof(*c));
  c->fd = -1;
  while (now_s() < deadline) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int fd;

    if (poll(&p, 1, 200) <= 0)
      continue;
    if (mcp_sock_accept(lfd, &fd, &peer) != 0)
      continue;
    if (looks_like_doctor(fd, now_s() + AUTH_TIMEOUT_S)) {
      if (peer.sa.sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&peer.sin6.sin6_addr)) {
        /* A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d; name them as IPv4. */
        union mcp_sockaddr v4;

        memset(&v4, 0, sizeof(v4));
        v4.sin.sin_family = AF_INET;
        v4.sin.sin_port = peer.sin6.sin6_port;
        memcpy(&v4.sin.sin_addr, &peer.sin6.sin6_addr.s6_addr[12], 4);
        peer = v4;
      }
      c->fd = fd;
      c->addr = peer;
      mcp_sockaddr_format(&peer, c->peer, sizeof(c->peer));
      if (auth_listener(c) == 0)
        return 0;
      c->strangers++;
      c->fd = -1;
    }
    close(fd); /* not ours: keep waiting for the real peer */
  }
  c->fail = DOCTOR_CTL_NO_ANSWER;
  return -1;
}

/* The connecting side speaks first: its challenge; then it checks the listener's proof
 * over both challenges and sends its own. */
static int auth_connector(struct doctor_ctl *c, int timeout_s)
{
  uint8_t out[8], in[16];
  uint64_t mine, theirs;
  size_t n = 0;
  int waited;

  if (!have_run_key || mcp_random_fill_wait(&mine, sizeof(mine), &waited) != 0)
    return -1;
  put_u64(out, mine);
  if (doctor_ctl_send(c, DOCTOR_MSG_AUTH, out, 8, timeout_s) != 0 ||
      doctor_ctl_recv(c, DOCTOR_MSG_AUTH, in, sizeof(in), &n, timeout_s) != 0 || n != 16)
    return -1;
  theirs = get_u64(in);
  if ((get_u64(in + 8) ^ auth_mac(AUTH_LISTENER, mine, theirs)) != 0)
    return -1;
  put_u64(out, auth_mac(AUTH_CONNECTOR, mine, theirs));
  return doctor_ctl_send(c, DOCTOR_MSG_AUTH, out, 8, timeout_s);
}

/* The listener answers a challenge with its own and a proof, then wants the connector's. */
static int auth_listener(struct doctor_ctl *c)
{
  uint8_t in[8], out[16];
  uint64_t theirs, mine;
  size_t n = 0;
  int waited;

  if (!have_run_key || doctor_ctl_recv(c, DOCTOR_MSG_AUTH, in, sizeof(in), &n, AUTH_TIMEOUT_S) != 0 ||
      n != 8 || mcp_random_fill_wait(&mine, sizeof(mine), &waited) != 0)
    return -1;
  theirs = get_u64(in);
  put_u64(out, mine);
  put_u64(out + 8, auth_mac(AUTH_LISTENER, theirs, mine));
  if (doctor_ctl_send(c, DOCTOR_MSG_AUTH, out, 16, AUTH_TIMEOUT_S) != 0 ||
      doctor_ctl_recv(c, DOCTOR_MSG_AUTH, in, sizeof(in), &n, AUTH_TIMEOUT_S) != 0 || n != 8)
    return -1;
  return (get_u64(in) ^ auth_mac(AUTH_CONNECTOR, theirs, mine)) == 0 ? 0 : -1;
}

double doctor_ctl_now(void) { return now_s(); }

int doctor_ctl_accept(struct doctor_ctl *c, const char *bind_addr, int port, int wait_s,
                      void (*on_listening)(const char *addr, void *arg), void *arg)
{
  char bound[MCP_SOCKADDR_STRLEN], msg[MCP_SOCK_MSGLEN];
  int lfd = -1, bport = 0;

  memset(c, 0, sizeof(*c));
  c->fd = -1;
  if (doctor_ctl_listen(bind_addr, port, &lfd, bound, sizeof(bound), &bport, msg, sizeof(msg)) != 0) {
    c->fail = DOCTOR_CTL_OTHER;
    snprintf(c->msg, sizeof(c->msg), "%s", msg);
    return -1;
  }
  if (on_listening != NULL)
    on_listening(bound, arg);
  if (doctor_ctl_accept_on(c, lfd, now_s() + wait_s) == 0) {
    c->port = bport;
    close(lfd);
    return 0;
  }
  close(lfd);
  c->port = bport;
  snprintf(c->peer, sizeof(c->peer), "%s", bound);
  snprintf(c->msg, sizeof(c->msg), "no mcpnet-doctor --peer connected to port %d within %d s", c->port,
           wait_s);
  return -1;
}

void doctor_ctl_close(struct doctor_ctl *c)
{
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

static int send_all(int fd, const uint8_t *p, size_t len, double deadline)
{
  while (len > 0) {
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    ssize_t n;

    if (now_s() > deadline)
      return -ETIMEDOUT;
    if (poll(&pf, 1, 100) <= 0)
      continue;
    n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      return -EPIPE;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int recv_all(int fd, uint8_t *p, size_t len, double deadline)
{
  while (len > 0) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ssize_t n;

    if (now_s() > deadline)
      return -ETIMEDOUT;
    if (poll(&pf, 1, 100) <= 0)
      continue;
    n = recv(fd, p, len, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n == 0)
      return -ECONNRESET;
    if (n < 0)
      return -errno;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static void put_u32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int doctor_ctl_send(struct doctor_ctl *c, uint32_t type, const void *data, size_t len, int timeout_s)
{
  uint8_t hdr[CTL_HDR];
  double deadline = now_s() + timeout_s;
  int rc;

  if (c->fd < 0 || len > DOCTOR_CTL_MAX)
    return -EINVAL;
  put_u32(hdr, CTL_MAGIC);
  put_u32(hdr + 4, type);
  put_u32(hdr + 8, (uint32_t)len);
  rc = send_all(c->fd, hdr, sizeof(hdr), deadline);
  if (rc == 0 && len > 0)
    rc = send_all(c->fd, data, len, deadline);
  return rc;
}

int doctor_ctl_recv(struct doctor_ctl *c, uint32_t type, void *data, size_t cap, size_t *len, int timeout_s)
{
  uint8_t hdr[CTL_HDR];
  double deadline = now_s() + timeout_s;
  uint32_t n;
  int rc;

  if (c->fd < 0)
    return -EINVAL;
  rc = recv_all(c->fd, hdr, sizeof(hdr), deadline);
  if (rc != 0)
    return rc;
  n = get_u32(hdr + 8);
  if (get_u32(hdr) != CTL_MAGIC || n > DOCTOR_CTL_MAX || n > cap)
    return -EBADMSG;
  rc = recv_all(c->fd, data, n, deadline);
  if (rc != 0)
    return rc;
  if (len != NULL)
    *len = n;
  if (get_u32(hdr + 4) != type)
    return -EPROTO;
  return 0;
}
