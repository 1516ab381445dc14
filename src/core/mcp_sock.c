/*
 * mcp_sock.c - the out-of-band TCP layer: address formatting, the nonblocking listener
 * with its port range, the resumable connect with classified failures, and the framed
 * send queue / receive buffer. Every call returns without waiting on a peer (connect
 * progress polls with a zero timeout; send and recv use MSG_DONTWAIT), because NCCL's
 * proxy thread drives listen, connect and accept from one loop and a blocking call
 * there would deadlock two ranks that connect to each other. Interface choice lives in
 * mcp_sock_ifname.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/sock.h"

/* ---- Addresses ------------------------------------------------------------------ */

socklen_t mcp_sockaddr_len(const union mcp_sockaddr *a)
{
  switch (a->sa.sa_family) {
  case AF_INET: return sizeof(a->sin);
  case AF_INET6: return sizeof(a->sin6);
  default: return 0;
  }
}

uint16_t mcp_sockaddr_port(const union mcp_sockaddr *a)
{
  switch (a->sa.sa_family) {
  case AF_INET: return ntohs(a->sin.sin_port);
  case AF_INET6: return ntohs(a->sin6.sin6_port);
  default: return 0;
  }
}

void mcp_sockaddr_set_port(union mcp_sockaddr *a, uint16_t port)
{
  if (a->sa.sa_family == AF_INET)
    a->sin.sin_port = htons(port);
  else if (a->sa.sa_family == AF_INET6)
    a->sin6.sin6_port = htons(port);
}

int mcp_sockaddr_equal(const union mcp_sockaddr *a, const union mcp_sockaddr *b)
{
  if (a->sa.sa_family != b->sa.sa_family)
    return 0;
  switch (a->sa.sa_family) {
  case AF_INET: return a->sin.sin_port == b->sin.sin_port && a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr;
  case AF_INET6:
    return a->sin6.sin6_port == b->sin6.sin6_port && a->sin6.sin6_scope_id == b->sin6.sin6_scope_id &&
      memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, sizeof(a->sin6.sin6_addr)) == 0;
  default: return 0;
  }
}

const char *mcp_sockaddr_format_host(const union mcp_sockaddr *a, char *buf, size_t len)
{
  char host[INET6_ADDRSTRLEN];

  if (len == 0)
    return buf;
  switch (a->sa.sa_family) {
  case AF_INET:
    inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof(host));
    snprintf(buf, len, "%s", host);
    break;
  case AF_INET6:
    inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof(host));
    if (a->sin6.sin6_scope_id != 0)
      snprintf(buf, len, "%s%%%u", host, (unsigned)a->sin6.sin6_scope_id);
    else
      snprintf(buf, len, "%s", host);
    break;
  default: snprintf(buf, len, "(family %d)", (int)a->sa.sa_family); break;
  }
  return buf;
}

const char *mcp_sockaddr_format(const union mcp_sockaddr *a, char *buf, size_t len)
{
  char host[MCP_SOCKADDR_STRLEN];

  mcp_sockaddr_format_host(a, host, sizeof(host));
  if (len == 0)
    return buf;
  if (a->sa.sa_family == AF_INET)
    snprintf(buf, len, "%s:%u", host, (unsigned)mcp_sockaddr_port(a));
  else if (a->sa.sa_family == AF_INET6)
    snprintf(buf, len, "[%s]:%u", host, (unsigned)mcp_sockaddr_port(a));
  else
    snprintf(buf, len, "%s", host);
  return buf;
}

/* Decimal 0..max, digits only: strtoul would accept signs and spaces. */
static int sock_parse_uint(const char *s, size_t n, unsigned long max, unsigned long *out)
{
  unsigned long v = 0;

  if (n == 0 || n > 10)
    return -EINVAL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -EINVAL;
    v = v * 10 + (unsigned long)(s[i] - '0');
    if (v > max)
      return -EINVAL;
  }
  *out = v;
  return 0;
}

static int sock_parse_v6(const char *s, size_t n, union mcp_sockaddr *out)
{
  char host[INET6_ADDRSTRLEN + 16];
  char *pct;
  unsigned long scope = 0;

  if (n == 0 || n >= sizeof(host))
    return -EINVAL;
  memcpy(host, s, n);
  host[n] = '\0';
  pct = strchr(host, '%');
  if (pct != NULL) {
    *pct = '\0';
    if (sock_parse_uint(pct + 1, strlen(pct + 1), UINT32_MAX, &scope) != 0)
      return -EINVAL;
  }
  out->sin6.sin6_family = AF_INET6;
  out->sin6.sin6_scope_id = (uint32_t)scope;
  return inet_pton(AF_INET6, host, &out->sin6.sin6_addr) == 1 ? 0 : -EINVAL;
}

int mcp_sockaddr_parse(const char *str, union mcp_sockaddr *out)
{
  const char *colon, *host = str, *port = NULL;
  size_t hostlen;
  unsigned long portval = 0;
  char v4[INET_ADDRSTRLEN];

  memset(out, 0, sizeof(*out));
  if (str == NULL || *str == '\0')
    return -EINVAL;
  if (str[0] == '[') {
    const char *close = strchr(str, ']');

    if (close == NULL || (close[1] != '\0' && close[1] != ':'))
      return -EINVAL;
    host = str + 1;
    hostlen = (size_t)(close - host);
    port = close[1] == ':' ? close + 2 : NULL;
    if (sock_parse_v6(host, hostlen, out) != 0)
      goto bad;
  } else if ((colon = strchr(str, ':')) != NULL && strchr(colon + 1, ':') != NULL) {
    /* Two colons and no brackets: a bare IPv6 address, which cannot carry a port. */
    if (sock_parse_v6(str, strlen(str), out) != 0)
      goto bad;
  } else {
    hostlen = colon != NULL ? (size_t)(colon - str) : strlen(str);
    port = colon != NULL ? colon + 1 : NULL;
    if (hostlen == 0 || hostlen >= sizeof(v4))
      goto bad;
    memcpy(v4, str, hostlen);
    v4[hostlen] = '\0';
    out->sin.sin_family = AF_INET;
    if (inet_pton(AF_INET, v4, &out->sin.sin_addr) != 1)
      goto bad;
  }
  if (port != NULL && sock_parse_uint(port, strlen(port), 65535, &portval) != 0)
    goto bad;
  mcp_sockaddr_set_port(out, (uint16_t)portval);
  return 0;
bad:
  memset(out, 0, sizeof(*out));
  return -EINVAL;
}

/* ---- Listening -------------------------------------------------------------------- */

int mcp_sock_port_range_parse(const char *str, struct mcp_sock_port_range *range, char *msg, size_t msglen)
{
  const char *dash;
  unsigned long lo, hi;

  range->lo = range->hi = 0;
  if (str == NULL || *str == '\0' || strcmp(str, "0") == 0)
    return 0;
  dash = strchr(str, '-');
  if (dash == NULL) {
    if (sock_parse_uint(str, strlen(str), 65535, &lo) != 0 || lo == 0)
      goto bad;
    hi = lo;
  } else if (sock_parse_uint(str, (size_t)(dash - str), 65535, &lo) != 0 ||
             sock_parse_uint(dash + 1, strlen(dash + 1), 65535, &hi) != 0 || lo == 0 || hi < lo) {
    goto bad;
  }
  range->lo = (uint16_t)lo;
  range->hi = (uint16_t)hi;
  return 0;
bad:
  snprintf(msg, msglen, "port range \"%s\" is not \"lo-hi\" with 1 <= lo <= hi <= 65535 (or one port)", str);
  return -EINVAL;
}

int mcp_sock_listen_backlog(void)
{
  char buf[32];
  long v = 0;
  ssize_t n;
  int fd = open("/proc/sys/net/core/somaxconn", O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return MCP_SOCK_LISTEN_BACKLOG;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return MCP_SOCK_LISTEN_BACKLOG;
  buf[n] = '\0';
  v = strtol(buf, NULL, 10);
  /* Below the old fixed 128 is a misreading, not a limit worth honouring; listen()
   * takes an int. */
  if (v < 128 || v > INT_MAX)
    return MCP_SOCK_LISTEN_BACKLOG;
  return (int)v;
}

/* One bind + listen on one port; returns 0 or a negative errno, leaves no fd behind. */
static int sock_listen_one(const union mcp_sockaddr *addr, uint16_t port, int *fd_out)
{
  union mcp_sockaddr a = *addr;
  int one = 1, fd, err;

  mcp_sockaddr_set_port(&a, port);
  fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  /* SO_REUSEADDR lets a restarted job rebind a port whose old connections linger in
   * TIME_WAIT; it does not let two live listeners share a port. */
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
    goto fail;
  if (bind(fd, &a.sa, mcp_sockaddr_len(&a)) != 0)
    goto fail;
  if (listen(fd, mcp_sock_listen_backlog()) != 0)
    goto fail;
  *fd_out = fd;
  return 0;
fail:
  err = -errno;
  close(fd);
  return err;
}

int mcp_sock_listen(const union mcp_sockaddr *addr, const struct mcp_sock_port_range *range, int *fd,
                    union mcp_sockaddr *bound, char *msg, size_t msglen)
{
  char host[MCP_SOCKADDR_STRLEN];
  unsigned lo, hi, port;
  socklen_t len;
  int rc = -EINVAL;

  *fd = -1;
  mcp_sockaddr_format_host(addr, host, sizeof(host));
  if (mcp_sockaddr_len(addr) == 0) {
    snprintf(msg, msglen, "cannot listen on an address of family %d", (int)addr->sa.sa_family);
    return -EAFNOSUPPORT;
  }
  if (range == NULL || (range->lo == 0 && range->hi == 0)) {
    lo = hi = mcp_sockaddr_port(addr);
  } else {
    lo = range->lo;
    hi = range->hi;
    if (lo == 0 || hi < lo) {
      snprintf(msg, msglen, "invalid port range %u-%u", lo, hi);
      return -EINVAL;
    }
  }
  for (port = lo; port <= hi; port++) {
    rc = sock_listen_one(addr, (uint16_t)port, fd);
    if (rc != -EADDRINUSE)
      break;
  }
  if (rc == -EADDRINUSE) {
    if (lo == hi)
      snprintf(msg, msglen, "port %u on %s is already in use", lo, host);
    else
      snprintf(msg, msglen,
               "every port of the range %u-%u on %s is in use (%u tried): widen "
               "MCPNET_OOB_PORT_RANGE or free a port",
               lo, hi, host, hi - lo + 1);
    return rc;
  }
  if (rc != 0) {
    snprintf(msg, msglen, "cannot listen on %s port %u: %s%s", host, port, strerror(-rc),
             rc == -EADDRNOTAVAIL ? " (the address is not on this host)"
               : rc == -EACCES    ? " (ports below 1024 need privileges)"
                                  : "");
    return rc;
  }
  len = sizeof(*bound);
  if (getsockname(*fd, &bound->sa, &len) != 0) {
    rc = -errno;
    snprintf(msg, msglen, "getsockname on the listener for %s: %s", host, strerror(-rc));
    close(*fd);
    *fd = -1;
    return rc;
  }
  return 0;
}

int mcp_sock_set_nodelay(int fd)
{
  int one = 1;

  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0 ? 0 : -errno;
}

int mcp_sock_accept(int listen_fd, int *fd, union mcp_sockaddr *peer)
{
  union mcp_sockaddr a;
  socklen_t len = sizeof(a);
  int s;

  *fd = -1;
  memset(&a, 0, sizeof(a));
  s = accept4(listen_fd, &a.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (s < 0) {
    switch (errno) {
    /* accept(2): a connection that died before we took it leaves these behind;
     * the listener is fine, so the caller just tries again later. */
    case EAGAIN:
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH: return -EAGAIN;
    default: return -errno;
    }
  }
  /* Small control frames must not wait for Nagle's coalescing. */
  (void)mcp_sock_set_nodelay(s);
  *fd = s;
  if (peer != NULL)
    *peer = a;
  return 0;
}

int mcp_sock_set_keepalive(int fd, unsigned dead_after_s)
{
  int one = 1, idle = (int)MCP_SOCK_KEEPIDLE_S, intvl = (int)MCP_SOCK_KEEPINTVL_S, cnt;
  unsigned user_ms;

  if (dead_after_s < MCP_SOCK_KEEPIDLE_S + MCP_SOCK_KEEPINTVL_S)
    dead_after_s = MCP_SOCK_KEEPIDLE_S + MCP_SOCK_KEEPINTVL_S;
  if (dead_after_s > 24u * 3600u)
    dead_after_s = 24u * 3600u;
  cnt = (int)((dead_after_s - MCP_SOCK_KEEPIDLE_S + MCP_SOCK_KEEPINTVL_S - 1) / MCP_SOCK_KEEPINTVL_S);
  if (cnt > 127) /* the kernel's ceiling for TCP_KEEPCNT */
    cnt = 127;
  user_ms = dead_after_s * 1000u;
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms)) != 0)
    return -errno;
  return 0;
}

int mcp_sock_set_abortive(int fd)
{
  struct linger now = {.l_onoff = 1, .l_linger = 0};

  return setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now)) == 0 ? 0 : -errno;
}

/* ---- Resumable connect ------------------------------------------------------------ */

static uint64_t sock_elapsed_ms(const struct mcp_sock_connect *c, uint64_t now)
{
  return (now - c->start_ns) / 1000000ull;
}

const char *mcp_sock_connect_fail_name(enum mcp_sock_connect_fail fail)
{
  switch (fail) {
  case MCP_SOCK_FAIL_NONE: return "none";
  case MCP_SOCK_FAIL_REFUSED: return "refused";
  case MCP_SOCK_FAIL_UNREACHABLE: return "unreachable";
  case MCP_SOCK_FAIL_TIMEOUT: return "timeout";
  case MCP_SOCK_FAIL_OTHER: return "error";
  }
  return "?";
}

static void sock_connect_close(struct mcp_sock_connect *c)
{
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

/* Records the final failure and its explanation; the message is what a user sees. */
static enum mcp_sock_connect_state sock_connect_fail(struct mcp_sock_connect *c,
                                                     enum mcp_sock_connect_fail fail, int err, uint64_t now)
{
  char peer[MCP_SOCKADDR_STRLEN];
  unsigned long long ms = (unsigned long long)sock_elapsed_ms(c, now);

  sock_connect_close(c);
  mcp_sockaddr_format(&c->peer, peer, sizeof(peer));
  c->state = MCP_SOCK_CONNECT_FAILED;
  c->fail = fail;
  c->err = err;
  switch (fail) {
  case MCP_SOCK_FAIL_REFUSED:
    snprintf(c->msg, sizeof(c->msg),
             "connection to %s refused (%u attempt%s in %llu ms): nothing listens on %s; "
             "the peer process may have exited or listen on another address",
             peer, c->attempts, c->attempts == 1 ? "" : "s", ms, peer);
    break;
  case MCP_SOCK_FAIL_UNREACHABLE:
    snprintf(c->msg, sizeof(c->msg),
             "%s is unreachable (%s): no route from this host to %s; check "
             "NCCL_SOCKET_IFNAME on both hosts and the routing table",
             peer, strerror(err), peer);
    break;
  case MCP_SOCK_FAIL_TIMEOUT:
    snprintf(c->msg, sizeof(c->msg),
             "no answer from %s within %llu ms: a firewall or routing problem drops "
             "traffic to %s (is MCPNET_OOB_PORT_RANGE open in the firewall?)",
             peer, ms, peer);
    break;
  default:
    snprintf(c->msg, sizeof(c->msg), "connect to %s failed: %s (errno %d)", peer, strerror(err), err);
    break;
  }
  return c->state;
}

static enum mcp_sock_connect_state sock_connect_error(struct mcp_sock_connect *c, int err, uint64_t now)
{
  sock_connect_close(c);
  switch (err) {
  case ECONNREFUSED:
    /* A refusal is an answer, so retrying is cheap; it only helps when the listener
     * is about to appear, hence few retries. Give up at once when the next try could
     * not start before the deadline. */
    if (c->attempts <= c->opts.max_retries &&
        now + (uint64_t)c->next_backoff_ms * 1000000ull < c->deadline_ns) {
      c->retry_at_ns = now + (uint64_t)c->next_backoff_ms * 1000000ull;
      c->next_backoff_ms =
        c->next_backoff_ms >= c->opts.backoff_max_ms / 2 ? c->opts.backoff_max_ms : c->next_backoff_ms * 2;
      return c->state;
    }
    return sock_connect_fail(c, MCP_SOCK_FAIL_REFUSED, err, now);
  case EHOSTUNREACH:
  case ENETUNREACH: return sock_connect_fail(c, MCP_SOCK_FAIL_UNREACHABLE, err, now);
  case ETIMEDOUT: return sock_connect_fail(c, MCP_SOCK_FAIL_TIMEOUT, err, now);
  default: return sock_connect_fail(c, MCP_SOCK_FAIL_OTHER, err, now);
  }
}

/* One connect() call on a fresh socket. */
static enum mcp_sock_connect_state sock_connect_attempt(struct mcp_sock_connect *c, uint64_t now)
{
  c->fd = socket(c->peer.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    return sock_connect_fail(c, MCP_SOCK_FAIL_OTHER, errno, now);
  (void)mcp_sock_set_nodelay(c->fd);
  if (c->local.sa.sa_family != 0) {
    union mcp_sockaddr src = c->local;

    mcp_sockaddr_set_port(&src, 0);
    if (bind(c->fd, &src.sa, mcp_sockaddr_len(&src)) != 0)
      return sock_connect_fail(c, MCP_SOCK_FAIL_OTHER, errno, now);
  }
  c->attempts++;
  if (connect(c->fd, &c->peer.sa, mcp_sockaddr_len(&c->peer)) == 0) {
    c->state = MCP_SOCK_CONNECT_DONE;
    return c->state;
  }
  if (errno == EINPROGRESS || errno == EINTR)
    return c->state;
  return sock_connect_error(c, errno, now);
}

enum mcp_sock_connect_state mcp_sock_connect_start(struct mcp_sock_connect *c, const union mcp_sockaddr *peer,
                                                   const union mcp_sockaddr *local,
                                                   const struct mcp_sock_connect_opts *opts)
{
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  c->peer = *peer;
  if (local != NULL)
    c->local = *local;
  if (opts != NULL)
    c->opts = *opts;
  if (c->opts.timeout_ms == 0)
    c->opts.timeout_ms = MCP_SOCK_CONNECT_DEFAULT_TIMEOUT_MS;
  if (c->opts.backoff_ms == 0)
    c->opts.backoff_ms = 10;
  if (c->opts.backoff_max_ms == 0)
    c->opts.backoff_max_ms = 1000;
  c->next_backoff_ms = c->opts.backoff_ms;
  c->state = MCP_SOCK_CONNECT_IN_PROGRESS;
  c->start_ns = mcp_clock_ns();
  c->deadline_ns = c->start_ns + (uint64_t)c->opts.timeout_ms * 1000000ull;
  if (mcp_sockaddr_len(peer) == 0 || mcp_sockaddr_port(peer) == 0)
    return sock_connect_fail(c, MCP_SOCK_FAIL_OTHER, EINVAL, c->start_ns);
  return sock_connect_attempt(c, c->start_ns);
}

enum mcp_sock_connect_state mcp_sock_connect_progress(struct mcp_sock_connect *c)
{
  struct pollfd pfd;
  uint64_t now;
  socklen_t len = sizeof(int);
  int err = 0, n;

  if (c->state != MCP_SOCK_CONNECT_IN_PROGRESS)
    return c->state;
  now = mcp_clock_ns();
  if (c->fd < 0) {
    /* Waiting out the backoff after a refusal. */
    if (now >= c->retry_at_ns)
      return sock_connect_attempt(c, now);
    if (now >= c->deadline_ns)
      return sock_connect_fail(c, MCP_SOCK_FAIL_REFUSED, ECONNREFUSED, now);
    return c->state;
  }
  pfd.fd = c->fd;
  pfd.events = POLLOUT;
  pfd.revents = 0;
  n = poll(&pfd, 1, 0);
  if (n < 0 && errno != EINTR)
    return sock_connect_fail(c, MCP_SOCK_FAIL_OTHER, errno, now);
  if (n <= 0) {
    if (now >= c->deadline_ns)
      return sock_connect_fail(c, MCP_SOCK_FAIL_TIMEOUT, ETIMEDOUT, now);
    return c->state;
  }
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
    err = errno;
  if (err != 0)
    return sock_connect_error(c, err, now);
  c->state = MCP_SOCK_CONNECT_DONE;
  return c->state;
}

int mcp_sock_connect_take_fd(struct mcp_sock_connect *c)
{
  int fd;

  if (c->state != MCP_SOCK_CONNECT_DONE || c->fd < 0)
    return -ENOTCONN;
  fd = c->fd;
  c->fd = -1;
  return fd;
}

void mcp_sock_connect_cancel(struct mcp_sock_connect *c) { sock_connect_close(c); }

/* ---- Framed send and receive ------------------------------------------------------ */

int mcp_sock_sendq_init(struct mcp_sock_sendq *q, size_t max)
{
  memset(q, 0, sizeof(*q));
  q->max = max;
  return 0;
}

void mcp_sock_sendq_free(struct mcp_sock_sendq *q)
{
  free(q->buf);
  memset(q, 0, sizeof(*q));
}

size_t mcp_sock_sendq_pending(const struct mcp_sock_sendq *q) { return q->tail - q->head; }

/* Makes room for len more bytes at the tail: compact first, grow only if needed. */
static int sock_sendq_reserve(struct mcp_sock_sendq *q, size_t len)
{
  size_t pending = q->tail - q->head, need = pending + len, cap;
  uint8_t *nb;

  if (q->tail + len <= q->cap)
    return 0;
  if (q->head > 0) {
    memmove(q->buf, q->buf + q->head, pending);
    q->head = 0;
    q->tail = pending;
  }
  if (need <= q->cap)
    return 0;
  cap = q->cap != 0 ? q->cap : 4096;
  while (cap < need)
    cap *= 2;
  if (cap > q->max)
    cap = q->max;
  nb = realloc(q->buf, cap);
  if (nb == NULL)
    return -ENOMEM;
  q->buf = nb;
  q->cap = cap;
  return 0;
}

int mcp_sock_sendq_push(struct mcp_sock_sendq *q, const void *data, size_t len)
{
  int rc;

  if (len > q->max || q->tail - q->head > q->max - len)
    return -ENOBUFS;
  rc = sock_sendq_reserve(q, len);
  if (rc != 0)
    return rc;
  memcpy(q->buf + q->tail, data, len);
  q->tail += len;
  return 0;
}

long mcp_sock_sendq_flush(struct mcp_sock_sendq *q, int fd)
{
  while (q->head < q->tail) {
    ssize_t n = send(fd, q->buf + q->head, q->tail - q->head, MSG_NOSIGNAL | MSG_DONTWAIT);

    if (n > 0) {
      q->head += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    return n < 0 ? -errno : -EPIPE;
  }
  if (q->head == q->tail)
    q->head = q->tail = 0;
  return (long)(q->tail - q->head);
}

int mcp_sock_rbuf_init(struct mcp_sock_rbuf *rb, size_t max, mcp_sock_frame_len_fn frame_len)
{
  memset(rb, 0, sizeof(*rb));
  rb->max = max;
  rb->frame_len = frame_len;
  return 0;
}

void mcp_sock_rbuf_set_max(struct mcp_sock_rbuf *rb, size_t max) { rb->max = max; }

void mcp_sock_rbuf_free(struct mcp_sock_rbuf *rb)
{
  free(rb->buf);
  memset(rb, 0, sizeof(*rb));
}

size_t mcp_sock_rbuf_pending(const struct mcp_sock_rbuf *rb) { return rb->end - rb->start; }

size_t mcp_sock_rbuf_allocated(const struct mcp_sock_rbuf *rb) { return rb->alloc; }

/* Room for more bytes at the end: the buffer doubles from MCP_SOCK_RBUF_FIRST up to max.
 * 0, -ENOBUFS when it is at max and full, -ENOMEM. */
static int sock_rbuf_room(struct mcp_sock_rbuf *rb)
{
  size_t want;
  uint8_t *nb;

  if (rb->end < rb->alloc)
    return 0;
  if (rb->alloc >= rb->max)
    return -ENOBUFS;
  want = rb->alloc != 0 ? 2 * rb->alloc : MCP_SOCK_RBUF_FIRST;
  if (want > rb->max)
    want = rb->max;
  nb = realloc(rb->buf, want);
  if (nb == NULL)
    return -ENOMEM;
  rb->buf = nb;
  rb->alloc = want;
  return 0;
}

/* The first recv while no buffer is allocated goes to the stack, so a connection with
 * nothing to say costs no allocation. >0 bytes (now in rb->buf), 0 EOF, -errno. */
static ssize_t sock_rbuf_recv(struct mcp_sock_rbuf *rb, int fd)
{
  uint8_t first[MCP_SOCK_RBUF_FIRST];
  ssize_t n;

  n = recv(fd, first, rb->max < sizeof(first) ? rb->max : sizeof(first), MSG_DONTWAIT);
  if (n <= 0)
    return n < 0 ? -errno : 0;
  if (sock_rbuf_room(rb) != 0)
    return -ENOMEM;
  memcpy(rb->buf, first, (size_t)n);
  return n;
}

long mcp_sock_rbuf_fill(struct mcp_sock_rbuf *rb, int fd)
{
  long total = 0;

  /* Frames already taken may be dropped now (documented): an empty buffer is given back,
   * else the rest slides down so the largest frame always fits behind it. */
  if (rb->start == rb->end) {
    free(rb->buf);
    rb->buf = NULL;
    rb->alloc = rb->start = rb->end = 0;
  } else if (rb->start > 0) {
    memmove(rb->buf, rb->buf + rb->start, rb->end - rb->start);
    rb->end -= rb->start;
    rb->start = 0;
  }
  while (!rb->eof) {
    ssize_t n;

    if (rb->buf == NULL) {
      n = sock_rbuf_recv(rb, fd);
    } else {
      int rc = sock_rbuf_room(rb);

      if (rc == -ENOBUFS)
        break; /* full: the caller takes frames first */
      if (rc != 0)
        return rc;
      n = recv(fd, rb->buf + rb->end, rb->alloc - rb->end, MSG_DONTWAIT);
      if (n < 0)
        n = -errno;
    }
    if (n > 0) {
      rb->end += (size_t)n;
      total += n;
    } else if (n == 0) {
      rb->eof = 1;
    } else if (n == -EINTR) {
      continue;
    } else if (n == -EAGAIN || n == -EWOULDBLOCK) {
      break;
    } else {
      return (long)n;
    }
  }
  return total;
}

int mcp_sock_rbuf_next(struct mcp_sock_rbuf *rb, const uint8_t **frame, size_t *len, char *msg, size_t msglen)
{
  size_t have = rb->end - rb->start, flen = 0;
  int rc;

  if (have == 0)
    return 0;
  rc = rb->frame_len(rb->buf + rb->start, have, &flen, msg, msglen);
  if (rc < 0)
    return -EBADMSG;
  if (rc == 0)
    return 0;
  if (flen == 0 || flen > rb->max) {
    snprintf(msg, msglen, "a frame of %zu bytes is larger than the %zu bytes this connection accepts now",
             flen, rb->max);
    return -EBADMSG;
  }
  if (have < flen)
    return 0;
  *frame = rb->buf + rb->start;
  *len = flen;
  rb->start += flen;
  if (rb->start == rb->end)
    rb->start = rb->end = 0;
  return 1;
}
