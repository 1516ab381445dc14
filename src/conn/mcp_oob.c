/*
 * mcp_oob.c - the process-wide out-of-band channel (see oob.h for the why).
 *
 * State: one listening socket, a list of peer connections (each a nonblocking TCP
 * socket with a send queue and a frame buffer), the streams multiplexed over them and
 * the listen tokens connection requests are routed by. All of it is guarded by one
 * mutex; nobody holds it across a blocking call because there is none. The channel is
 * reference-counted by the comms and listens using it and torn down with the last one,
 * so no socket outlives the last communicator (NCCL may dlclose us then).
 *
 * Late peers: the process we dial may not call into mcpnet (accept, or anything) for
 * minutes, so an outgoing connection that its kernel accepted waits for the HELLO as
 * long as TCP holds it up; keepalive (mcp_sock_set_keepalive) ends the wait when the
 * host dies, FIN/RST when the process does. Only incoming connections are held to a
 * HELLO deadline (the stray-client defence): the dialler is by construction inside its
 * connect loop. If it was not (it dialled, then made no call for 10 s), we tell it so
 * with CONN_REJECT code SILENT before closing, and it dials again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "mcpnet/clock.h"
#include "mcpnet/link.h"
#include "mcpnet/fabric.h"
#include "mcpnet/log.h"
#include "mcpnet/oob.h"
#include "mcpnet/param.h"

enum peer_state { PEER_CONNECTING, PEER_HELLO, PEER_UP, PEER_DEAD };

#define MCP_OOB_INBOX 8

struct mcp_oob_stream {
  uint32_t id;        /* ours: the peer puts it in frame headers to reach us */
  uint32_t remote_id; /* the peer's id for the same connection, once known */
  struct mcp_oob_peer *peer;
  atomic_int dead; /* the peer connection is gone; reason in dead_reason */
  atomic_int closed_by_peer;
  char dead_reason[MCP_WIRE_REASON_MAX];
  int inbox_head, inbox_count;
  /* Frames waiting to be read: on the heap only while some wait (a handshake, a
   * recovery), so an idle comm does not carry 8 x 1.7 KB (issue 16: memory per comm). */
  struct mcp_wire_msg *inbox;
  struct mcp_list link; /* on the channel's streams */
};

struct mcp_oob_peer {
  enum peer_state state;
  int fd;
  int outgoing;
  struct mcp_sock_connect conn;
  union mcp_sockaddr addr; /* the listener we dialled, or the address that dialled us */
  uint64_t expect_nonce;   /* outgoing: the nonce in the handle */
  struct mcp_wire_hello hello;
  int have_hello;
  struct mcp_sock_sendq sq;
  struct mcp_sock_rbuf rb;
  int refs;                   /* streams and queued requests */
  uint64_t hello_deadline_ms; /* an incoming connection must say HELLO by then */
  int sent_frames;            /* anything but HELLO queued on this TCP connection */
  int told_silent;            /* outgoing: the acceptor closed us for a late HELLO */
  unsigned redials;           /* outgoing: new TCP connections after told_silent */
  char dead_reason[MCP_WIRE_REASON_MAX];
  struct mcp_list link; /* on oob.peers */
};

static struct {
  pthread_mutex_t lock;
  int users;
  int listen_fd;
  union mcp_sockaddr local;
  uint64_t nonce;
  uint32_t next_stream_id;
  struct mcp_list peers;     /* newest first */
  struct mcp_list streams;   /* newest first */
  struct mcp_list listeners; /* newest first */
  int connect_timeout_ms;
  unsigned keepalive_s; /* a host silent this long is dead */
  int local_rank;
  atomic_ullong last_poll_ms; /* read before trylock by every waiting test() */
  /* One drained inbox kept for the next stream that gets a frame. Handshakes follow one
   * another, each filling and draining a stream's inbox once or twice: they reuse this
   * one instead of allocating and freeing 14 KB per frame, while an idle connected
   * stream still holds none (issue 16: memory per comm). */
  struct mcp_wire_msg *spare_inbox;
} oob = {.lock = PTHREAD_MUTEX_INITIALIZER,
         .listen_fd = -1,
         .peers = MCP_LIST_INIT(oob.peers),
         .streams = MCP_LIST_INIT(oob.streams),
         .listeners = MCP_LIST_INIT(oob.listeners)};

static void listener_unlink(struct mcp_oob_listener *l);

#define HELLO_TIMEOUT_MS 10000
#define MAX_REDIALS 8 /* a dialler told SILENT this often is not merely late */

static uint64_t now_ms(void) { return mcp_clock_coarse_ms(); }

int mcp_oob_wait_notice(uint64_t since_ms, uint64_t now, unsigned *count)
{
  uint64_t waited = now > since_ms ? now - since_ms : 0;

  if (*count == 0) {
    if (waited < MCP_OOB_WAIT_INFO_MS)
      return 0;
    /* Someone who first looks after minutes gets the WARN at once. */
    if (waited < MCP_OOB_WAIT_WARN_MS) {
      *count = 1;
      return 1;
    }
  } else if (waited < (uint64_t)MCP_OOB_WAIT_WARN_MS * *count) {
    return 0;
  }
  *count = (unsigned)(waited / MCP_OOB_WAIT_WARN_MS) + 1;
  return 2;
}

/* Tokens and nonces only need to differ between processes and listens, so never wait
 * for the kernel's entropy at boot: mix in time, pid and a counter when it is not ready. */
static uint64_t random_u64(void)
{
  static atomic_ullong counter;
  uint64_t v = 0;

  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v)) {
    uint64_t t = mcp_clock_ns();

    v = ((t % MCP_NS_PER_S) << 20) ^ (t / MCP_NS_PER_S) ^ ((uint64_t)getpid() << 40) ^
      (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
  }
  return v != 0 ? v : 1;
}

static const char *peer_name(const struct mcp_oob_peer *p, char *buf, size_t len)
{
  char addr[MCP_SOCKADDR_STRLEN];

  mcp_sockaddr_format(&p->addr, addr, sizeof(addr));
  if (p->have_hello && p->hello.local_rank >= 0)
    snprintf(buf, len, "%s pid %u local rank %d (%s)", p->hello.hostname, p->hello.pid, p->hello.local_rank,
             addr);
  else if (p->have_hello)
    snprintf(buf, len, "%s pid %u (%s)", p->hello.hostname, p->hello.pid, addr);
  else
    snprintf(buf, len, "%s", addr);
  return buf;
}

static int peer_queue(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN], name[160];
  size_t len;

  if (mcp_wire_encode(m, buf, sizeof(buf), &len, err, sizeof(err)) != 0) {
    MCP_WARN("cannot encode a %s frame: %s", mcp_wire_type_name(m->type), err);
    return -1;
  }
  if (m->type != MCP_WIRE_HELLO)
    p->sent_frames = 1;
  if (mcp_sock_sendq_push(&p->sq, buf, len) != 0) {
    MCP_WARN("out-of-band send queue to %s is full: the peer does not read",
             peer_name(p, name, sizeof(name)));
    return -1;
  }
  return 0;
}

static void peer_kill(struct mcp_oob_peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void peer_kill(struct mcp_oob_peer *p, const char *fmt, ...)
{
  struct mcp_oob_stream *s;
  struct mcp_list *it;
  va_list ap;

  if (p->state == PEER_DEAD)
    return;
  va_start(ap, fmt);
  vsnprintf(p->dead_reason, sizeof(p->dead_reason), fmt, ap);
  va_end(ap);
  p->state = PEER_DEAD;
  if (p->fd >= 0) {
    close(p->fd);
    p->fd = -1;
  }
  mcp_sock_connect_cancel(&p->conn);
  mcp_list_each(it, &oob.streams)
  {
    s = mcp_list_entry(it, struct mcp_oob_stream, link);
    if (s->peer == p && !atomic_load(&s->dead)) {
      snprintf(s->dead_reason, sizeof(s->dead_reason), "%s", p->dead_reason);
      atomic_store(&s->dead, 1);
    }
  }
}

/* An outgoing connection the acceptor closed because our HELLO came late: our process
 * made no call into mcpnet for 10 s after dialling, it is not gone. Dial again on the
 * same peer, so the streams waiting on it keep waiting. 1 when redialled. */
static int peer_redial(struct mcp_oob_peer *p)
{
  struct mcp_sock_connect_opts opts = {.timeout_ms = (uint32_t)oob.connect_timeout_ms,
                                       .max_retries = 1000,
                                       .backoff_ms = 10,
                                       .backoff_max_ms = 1000};
  char addr[MCP_SOCKADDR_STRLEN];

  if (!p->outgoing || !p->told_silent || p->sent_frames || p->redials >= MAX_REDIALS || p->state == PEER_DEAD)
    return 0;
  p->redials++;
  MCP_INFO(NCCL_NET,
           "out-of-band: %s closed our connection because this process sent its HELLO "
           "more than %d s after dialling (it made no call into mcpnet meanwhile); dialling again",
           mcp_sockaddr_format(&p->addr, addr, sizeof(addr)), HELLO_TIMEOUT_MS / 1000);
  if (p->fd >= 0)
    close(p->fd);
  p->fd = -1;
  mcp_sock_connect_cancel(&p->conn);
  p->sq.head = p->sq.tail = 0;
  p->rb.start = p->rb.end = 0;
  p->rb.eof = 0;
  p->have_hello = 0;
  p->told_silent = 0;
  p->state = PEER_CONNECTING;
  if (mcp_sock_connect_start(&p->conn, &p->addr, NULL, &opts) == MCP_SOCK_CONNECT_FAILED)
    peer_kill(p, "%s", p->conn.msg);
  return 1;
}

static struct mcp_oob_peer *peer_new(void)
{
  struct mcp_oob_peer *p = calloc(1, sizeof(*p));

  if (p == NULL)
    return NULL;
  p->fd = -1;
  p->conn.fd = -1;
  if (mcp_sock_sendq_init(&p->sq, 1 << 20) != 0 ||
      mcp_sock_rbuf_init(&p->rb, MCP_WIRE_MAX_FRAME, mcp_wire_frame_len) != 0) {
    mcp_sock_sendq_free(&p->sq);
    free(p);
    return NULL;
  }
  mcp_list_push(&oob.peers, &p->link);
  return p;
}

static void peer_free(struct mcp_oob_peer *p)
{
  mcp_list_del(&p->link);
  if (p->fd >= 0)
    close(p->fd);
  mcp_sock_connect_cancel(&p->conn);
  mcp_sock_sendq_free(&p->sq);
  mcp_sock_rbuf_free(&p->rb);
  free(p);
}

/* An idle connection stays open while the process has comms: the peer may be sending a
 * new request on it right now. Dead and unreferenced ones are freed by progress. */
static void peer_unref(struct mcp_oob_peer *p)
{
  p->refs--;
  if (p->fd >= 0 && mcp_sock_sendq_pending(&p->sq) > 0)
    (void)mcp_sock_sendq_flush(&p->sq, p->fd);
}

static void send_hello(struct mcp_oob_peer *p)
{
  struct mcp_wire_msg m;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_HELLO;
  m.u.hello.nonce = oob.nonce;
  m.u.hello.pid = (uint32_t)getpid();
  gethostname(m.u.hello.hostname, sizeof(m.u.hello.hostname) - 1);
  snprintf(m.u.hello.plugin_version, sizeof(m.u.hello.plugin_version), "%s", MCPNET_VERSION);
  m.u.hello.local_rank = oob.local_rank;
  (void)peer_queue(p, &m);
}

static struct mcp_oob_stream *stream_find(uint32_t id)
{
  struct mcp_list *it;

  mcp_list_each(it, &oob.streams)
  {
    struct mcp_oob_stream *s = mcp_list_entry(it, struct mcp_oob_stream, link);

    if (s->id == id)
      return s;
  }
  return NULL;
}

static struct mcp_oob_listener *listener_find(uint64_t token)
{
  struct mcp_list *it;

  mcp_list_each(it, &oob.listeners)
  {
    struct mcp_oob_listener *l = mcp_list_entry(it, struct mcp_oob_listener, link);

    if (l->token == token)
      return l;
  }
  return NULL;
}

static void reject(struct mcp_oob_peer *p, uint32_t stream_id, uint32_t code, const char *why)
{
  struct mcp_wire_msg m;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REJECT;
  m.stream_id = stream_id;
  m.u.reject.code = code;
  snprintf(m.u.reject.reason, sizeof(m.u.reject.reason), "%s", why);
  (void)peer_queue(p, &m);
}

static void on_hello(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  char name[160];

  if (p->outgoing && p->expect_nonce != 0 && m->u.hello.nonce != p->expect_nonce) {
    MCP_WARN("out-of-band: %s answered for process %016llx, but the handle names %016llx "
             "(a restarted peer, or another job on the same port?)",
             peer_name(p, name, sizeof(name)), (unsigned long long)m->u.hello.nonce,
             (unsigned long long)p->expect_nonce);
    peer_kill(p, "the process at %s is not the one that published the handle", name);
    return;
  }
  p->hello = m->u.hello;
  p->have_hello = 1;
  p->state = PEER_UP;
}

static void on_conn_req(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  struct mcp_oob_listener *l = listener_find(m->u.conn_req.listen_token);
  struct mcp_oob_request *r;
  char name[160];

  if (l == NULL) {
    MCP_WARN("out-of-band: connection request from %s for an unknown listen token %016llx "
             "(closed listen, or a handle from another process); refused",
             peer_name(p, name, sizeof(name)), (unsigned long long)m->u.conn_req.listen_token);
    reject(p, m->u.conn_req.ep.stream_id, MCP_WIRE_REJECT_NO_LISTENER, "no listen with that token");
    return;
  }
  r = calloc(1, sizeof(*r));
  if (r == NULL) {
    reject(p, m->u.conn_req.ep.stream_id, MCP_WIRE_REJECT_RESOURCES, "out of memory");
    return;
  }
  r->peer = p;
  r->req = m->u.conn_req;
  p->refs++;
  mcp_list_append(&l->pending, &r->link);
}

/* A stream's inbox: the spare if there is one (oob.lock held). */
static struct mcp_wire_msg *inbox_get(void)
{
  struct mcp_wire_msg *in = oob.spare_inbox;

  if (in != NULL) {
    oob.spare_inbox = NULL;
    return in;
  }
  return malloc(MCP_OOB_INBOX * sizeof(*in));
}

/* A drained or closed stream gives its inbox back (oob.lock held). */
static void inbox_put(struct mcp_oob_stream *s)
{
  if (s->inbox != NULL && oob.spare_inbox == NULL)
    oob.spare_inbox = s->inbox;
  else
    free(s->inbox);
  s->inbox = NULL;
  s->inbox_head = 0;
  s->inbox_count = 0;
}

static void on_stream_frame(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  struct mcp_oob_stream *s = stream_find(m->stream_id);
  char name[160];

  if (s == NULL || s->peer != p)
    return; /* a frame for a stream we closed already */
  if (m->type == MCP_WIRE_CLOSE) {
    atomic_store(&s->closed_by_peer, 1);
    return;
  }
  if (s->inbox_count == MCP_OOB_INBOX) {
    MCP_WARN("out-of-band: stream %u from %s overflows; frame %s dropped", s->id,
             peer_name(p, name, sizeof(name)), mcp_wire_type_name(m->type));
    return;
  }
  if (s->inbox == NULL && (s->inbox = inbox_get()) == NULL) {
    MCP_WARN("out-of-band: no memory for the frames of stream %u from %s; frame %s dropped", s->id,
             peer_name(p, name, sizeof(name)), mcp_wire_type_name(m->type));
    return;
  }
  s->inbox[(s->inbox_head + s->inbox_count) % MCP_OOB_INBOX] = *m;
  s->inbox_count++;
}

static void dispatch(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  char name[160];

  if (!p->have_hello && m->type != MCP_WIRE_HELLO) {
    MCP_WARN("out-of-band: refused a connection from %s: %s before HELLO (not an mcpnet peer?)",
             peer_name(p, name, sizeof(name)), mcp_wire_type_name(m->type));
    peer_kill(p, "%s sent %s before HELLO", name, mcp_wire_type_name(m->type));
    return;
  }
  switch (m->type) {
  case MCP_WIRE_HELLO: on_hello(p, m); return;
  case MCP_WIRE_CONN_REQ: on_conn_req(p, m); return;
  case MCP_WIRE_PING: {
    struct mcp_wire_msg pong = *m;
    pong.type = MCP_WIRE_PONG;
    (void)peer_queue(p, &pong);
    return;
  }
  case MCP_WIRE_PONG: return;
  case MCP_WIRE_CONN_REJECT:
    if (m->stream_id == 0 && m->u.reject.code == MCP_WIRE_REJECT_SILENT) {
      p->told_silent = p->outgoing;
      return;
    }
    on_stream_frame(p, m);
    return;
  default: on_stream_frame(p, m);
  }
}

static void peer_read(struct mcp_oob_peer *p)
{
  char name[160], err[MCP_WIRE_ERRLEN];
  const uint8_t *frame;
  size_t len;
  long n;

  do {
    int r;
    /* Frames that arrived before a reset are still read: the acceptor's SILENT notice
     * travels just ahead of its close. */
    n = mcp_sock_rbuf_fill(&p->rb, p->fd);
    while ((r = mcp_sock_rbuf_next(&p->rb, &frame, &len, err, sizeof(err))) == 1) {
      struct mcp_wire_msg m;
      if (mcp_wire_decode(frame, len, &m, err, sizeof(err)) != 0) {
        MCP_WARN("out-of-band: malformed frame from %s: %s; connection closed",
                 peer_name(p, name, sizeof(name)), err);
        peer_kill(p, "malformed frame from %s: %s", name, err);
        return;
      }
      dispatch(p, &m);
      if (p->state == PEER_DEAD)
        return;
    }
    if (r < 0) {
      MCP_WARN("out-of-band: refused bytes from %s: %s; connection closed", peer_name(p, name, sizeof(name)),
               err);
      peer_kill(p, "garbage from %s: %s", name, err);
      return;
    }
    if (n < 0) {
      if (!peer_redial(p))
        peer_kill(p, "the out-of-band connection to %s failed: %s", peer_name(p, name, sizeof(name)),
                  strerror((int)-n));
      return;
    }
  } while (n > 0 && !p->rb.eof);
  if (p->rb.eof && peer_redial(p))
    return;
  if (p->rb.eof) {
    if (!p->have_hello)
      MCP_INFO(NCCL_NET, "out-of-band: %s closed before HELLO (a port probe?)",
               peer_name(p, name, sizeof(name)));
    else if (mcp_sock_rbuf_pending(&p->rb) > 0)
      MCP_WARN("out-of-band: %s closed in the middle of a frame (%zu bytes left)",
               peer_name(p, name, sizeof(name)), mcp_sock_rbuf_pending(&p->rb));
    peer_kill(p,
              "%s closed the out-of-band connection: the peer process exited or closed its "
              "communicator",
              peer_name(p, name, sizeof(name)));
  }
}

static void accept_new(void)
{
  for (;;) {
    union mcp_sockaddr from;
    struct mcp_oob_peer *p;
    int fd;

    if (mcp_sock_accept(oob.listen_fd, &fd, &from) != 0)
      return;
    p = peer_new();
    if (p == NULL) {
      close(fd);
      return;
    }
    p->fd = fd;
    p->addr = from;
    p->state = PEER_HELLO;
    p->hello_deadline_ms = now_ms() + HELLO_TIMEOUT_MS;
    (void)mcp_sock_set_keepalive(fd, oob.keepalive_s);
    send_hello(p);
  }
}

static void progress_peer(struct mcp_oob_peer *p)
{
  char name[160];
  long left;

  if (p->state == PEER_CONNECTING) {
    enum mcp_sock_connect_state st = mcp_sock_connect_progress(&p->conn);
    if (st == MCP_SOCK_CONNECT_FAILED) {
      peer_kill(p, "%s", p->conn.msg);
      return;
    }
    if (st != MCP_SOCK_CONNECT_DONE)
      return;
    p->fd = mcp_sock_connect_take_fd(&p->conn);
    p->state = PEER_HELLO;
    /* The acceptor's process may answer minutes from now: from here on only TCP says
     * whether it is still there, and keepalive makes TCP say it about its host too. */
    (void)mcp_sock_set_keepalive(p->fd, oob.keepalive_s);
    send_hello(p);
  }
  if (p->state != PEER_HELLO && p->state != PEER_UP)
    return;
  if (p->state == PEER_HELLO && !p->outgoing && now_ms() > p->hello_deadline_ms) {
    struct mcp_wire_msg m;

    MCP_WARN("out-of-band: %s connected but sent no HELLO within %d s (not an mcpnet peer?); closed",
             peer_name(p, name, sizeof(name)), HELLO_TIMEOUT_MS / 1000);
    /* An mcpnet dialler that was merely late learns why and dials again. */
    memset(&m, 0, sizeof(m));
    m.type = MCP_WIRE_CONN_REJECT;
    m.u.reject.code = MCP_WIRE_REJECT_SILENT;
    snprintf(m.u.reject.reason, sizeof(m.u.reject.reason),
             "no HELLO within %d s of accept: closed as a silent client", HELLO_TIMEOUT_MS / 1000);
    if (peer_queue(p, &m) == 0)
      (void)mcp_sock_sendq_flush(&p->sq, p->fd);
    peer_kill(p, "no HELLO from %s", name);
    return;
  }
  left = mcp_sock_sendq_flush(&p->sq, p->fd);
  if (left < 0) {
    /* Read first: a SILENT notice may be waiting behind the reset. */
    peer_read(p);
    if (p->state == PEER_CONNECTING || p->state == PEER_DEAD)
      return;
    if (!peer_redial(p))
      peer_kill(p, "sending to %s failed: %s", peer_name(p, name, sizeof(name)), strerror((int)-left));
    return;
  }
  peer_read(p);
  if (p->state != PEER_DEAD && mcp_sock_sendq_pending(&p->sq) > 0)
    (void)mcp_sock_sendq_flush(&p->sq, p->fd);
}

static void progress_locked(void)
{
  struct mcp_list *it, *tmp;

  if (oob.listen_fd >= 0)
    accept_new();
  mcp_list_each_safe(it, tmp, &oob.peers)
  {
    struct mcp_oob_peer *p = mcp_list_entry(it, struct mcp_oob_peer, link);

    progress_peer(p);
    /* A dead connection nobody refers to (a stray client) is dropped at once. */
    if (p->state == PEER_DEAD && p->refs == 0)
      peer_free(p);
  }
}

void mcp_oob_progress(void)
{
  pthread_mutex_lock(&oob.lock);
  progress_locked();
  pthread_mutex_unlock(&oob.lock);
}

void mcp_oob_poll(unsigned interval_ms)
{
  unsigned long long now_ms = mcp_clock_coarse_ms();

  if (now_ms - atomic_load_explicit(&oob.last_poll_ms, memory_order_relaxed) < interval_ms)
    return;
  if (pthread_mutex_trylock(&oob.lock) != 0)
    return;
  atomic_store_explicit(&oob.last_poll_ms, now_ms, memory_order_relaxed);
  progress_locked();
  pthread_mutex_unlock(&oob.lock);
}

int mcp_oob_acquire(const struct mcp_config *cfg)
{
  struct mcp_sock_iface_choice choice;
  struct mcp_sock_port_range range = {0, 0};
  char msg[MCP_SOCK_MSGLEN], addr[MCP_SOCKADDR_STRLEN];
  int rc = 0;

  pthread_mutex_lock(&oob.lock);
  if (oob.users++ > 0)
    goto out;
  if (mcp_sock_iface_find(cfg->socket_ifname, cfg->socket_af, &choice) != 0) {
    MCP_WARN("no interface for the out-of-band channel%s%s: %s",
             cfg->socket_ifname ? " matching NCCL_SOCKET_IFNAME=" : "",
             cfg->socket_ifname ? cfg->socket_ifname : "", choice.reason);
    goto fail;
  }
  range.lo = (uint16_t)cfg->oob_port_lo;
  range.hi = (uint16_t)cfg->oob_port_hi;
  if (mcp_sock_listen(&choice.addr, &range, &oob.listen_fd, &oob.local, msg, sizeof(msg)) != 0) {
    MCP_WARN("out-of-band listener on %s: %s", choice.name, msg);
    goto fail;
  }
  oob.nonce = random_u64();
  oob.next_stream_id = 1;
  oob.connect_timeout_ms = cfg->connect_timeout_s * 1000;
  /* Dead-host detection on the channel: about a minute, but never before recovery has had
   * its MCPNET_RECOVERY_TIMEOUT to ride out a link outage. */
  oob.keepalive_s = cfg->recovery_timeout_s + 30 > 60 ? (unsigned)cfg->recovery_timeout_s + 30 : 60;
  /* The rank discovery resolved (MCPNET_LOCAL_RANK, LOCAL_RANK, ...), for the peer's messages. */
  oob.local_rank = mcp_fabric_process() != NULL ? mcp_fabric_process()->local_rank : cfg->local_rank;
  MCP_INFO(NCCL_INIT | NCCL_NET, "out-of-band channel listens on %s (%s: %s), backlog %d",
           mcp_sockaddr_format(&oob.local, addr, sizeof(addr)), choice.name, choice.reason,
           mcp_sock_listen_backlog());
  goto out;
fail:
  oob.users--;
  rc = -1;
out:
  pthread_mutex_unlock(&oob.lock);
  return rc;
}

void mcp_oob_release(void)
{
  pthread_mutex_lock(&oob.lock);
  if (--oob.users == 0) {
    struct mcp_oob_listener *l;
    struct mcp_oob_stream *s;
    struct mcp_oob_peer *p;

    while ((l = mcp_list_first(&oob.listeners, struct mcp_oob_listener, link)) != NULL)
      listener_unlink(l);
    while ((s = mcp_list_first(&oob.streams, struct mcp_oob_stream, link)) != NULL) {
      mcp_list_del(&s->link);
      free(s->inbox);
      free(s);
    }
    free(oob.spare_inbox);
    oob.spare_inbox = NULL;
    while ((p = mcp_list_first(&oob.peers, struct mcp_oob_peer, link)) != NULL)
      peer_free(p);
    if (oob.listen_fd >= 0)
      close(oob.listen_fd);
    oob.listen_fd = -1;
  }
  pthread_mutex_unlock(&oob.lock);
}

void mcp_oob_local(union mcp_sockaddr *addr, uint64_t *nonce)
{
  pthread_mutex_lock(&oob.lock);
  *addr = oob.local;
  *nonce = oob.nonce;
  pthread_mutex_unlock(&oob.lock);
}

struct mcp_oob_listener *mcp_oob_listener_add(void)
{
  struct mcp_oob_listener *l = calloc(1, sizeof(*l));

  if (l == NULL)
    return NULL;
  pthread_mutex_lock(&oob.lock);
  do
    l->token = random_u64();
  while (listener_find(l->token) != NULL);
  mcp_list_init(&l->pending);
  mcp_list_push(&oob.listeners, &l->link);
  pthread_mutex_unlock(&oob.lock);
  return l;
}

/* With the lock held: unlink, refuse what still waits, free. */
static void listener_unlink(struct mcp_oob_listener *l)
{
  struct mcp_oob_request *r;

  mcp_list_del(&l->link);
  while ((r = mcp_list_first(&l->pending, struct mcp_oob_request, link)) != NULL) {
    mcp_list_del(&r->link);
    reject(r->peer, r->req.ep.stream_id, MCP_WIRE_REJECT_NO_LISTENER, "the listen was closed");
    peer_unref(r->peer);
    free(r);
  }
  free(l);
}

void mcp_oob_listener_remove(struct mcp_oob_listener *l)
{
  pthread_mutex_lock(&oob.lock);
  listener_unlink(l);
  pthread_mutex_unlock(&oob.lock);
}

int mcp_oob_listener_take(struct mcp_oob_listener *l, struct mcp_oob_request **req)
{
  int got = 0;

  pthread_mutex_lock(&oob.lock);
  progress_locked();
  *req = mcp_list_first(&l->pending, struct mcp_oob_request, link);
  if (*req != NULL) {
    mcp_list_del(&(*req)->link);
    got = 1;
  }
  pthread_mutex_unlock(&oob.lock);
  return got;
}

int mcp_oob_request_reject(struct mcp_oob_request *req, uint32_t code, const char *why)
{
  pthread_mutex_lock(&oob.lock);
  reject(req->peer, req->req.ep.stream_id, code, why);
  if (req->peer->fd >= 0)
    (void)mcp_sock_sendq_flush(&req->peer->sq, req->peer->fd);
  pthread_mutex_unlock(&oob.lock);
  return 0;
}

void mcp_oob_request_free(struct mcp_oob_request *req)
{
  pthread_mutex_lock(&oob.lock);
  peer_unref(req->peer);
  pthread_mutex_unlock(&oob.lock);
  free(req);
}

static struct mcp_oob_stream *stream_new(struct mcp_oob_peer *p)
{
  struct mcp_oob_stream *s = calloc(1, sizeof(*s));

  if (s == NULL)
    return NULL;
  s->id = oob.next_stream_id++;
  if (oob.next_stream_id == 0)
    oob.next_stream_id = 1;
  s->peer = p;
  p->refs++;
  if (p->state == PEER_DEAD) {
    snprintf(s->dead_reason, sizeof(s->dead_reason), "%s", p->dead_reason);
    atomic_store(&s->dead, 1);
  }
  mcp_list_push(&oob.streams, &s->link);
  return s;
}

struct mcp_oob_stream *mcp_oob_stream_open_to(const union mcp_sockaddr *addr, uint64_t nonce)
{
  struct mcp_oob_stream *s = NULL;
  struct mcp_oob_peer *p = NULL, *q;
  struct mcp_list *it;

  pthread_mutex_lock(&oob.lock);
  /* Share a live connection to the same process, whichever side opened it. */
  mcp_list_each(it, &oob.peers)
  {
    q = mcp_list_entry(it, struct mcp_oob_peer, link);
    if (q->state == PEER_DEAD)
      continue;
    if ((q->have_hello && q->hello.nonce == nonce) ||
        (q->outgoing && q->expect_nonce == nonce && mcp_sockaddr_equal(&q->addr, addr))) {
      p = q;
      break;
    }
  }
  if (p == NULL) {
    struct mcp_sock_connect_opts opts = {.timeout_ms = (uint32_t)oob.connect_timeout_ms,
                                         .max_retries = 1000,
                                         .backoff_ms = 10,
                                         .backoff_max_ms = 1000};
    p = peer_new();
    if (p == NULL)
      goto out;
    p->outgoing = 1;
    p->addr = *addr;
    p->expect_nonce = nonce;
    p->state = PEER_CONNECTING;
    if (mcp_sock_connect_start(&p->conn, addr, NULL, &opts) == MCP_SOCK_CONNECT_FAILED)
      peer_kill(p, "%s", p->conn.msg);
  }
  s = stream_new(p);
out:
  pthread_mutex_unlock(&oob.lock);
  return s;
}

struct mcp_oob_stream *mcp_oob_stream_open_for(struct mcp_oob_request *req)
{
  struct mcp_oob_stream *s;

  pthread_mutex_lock(&oob.lock);
  s = stream_new(req->peer);
  if (s != NULL)
    s->remote_id = req->req.ep.stream_id;
  pthread_mutex_unlock(&oob.lock);
  return s;
}

int mcp_oob_stream_ready(struct mcp_oob_stream *s)
{
  int ready;

  pthread_mutex_lock(&oob.lock);
  progress_locked();
  ready = atomic_load(&s->dead) ? -1 : s->peer->state == PEER_UP;
  pthread_mutex_unlock(&oob.lock);
  return ready;
}

int mcp_oob_stream_send(struct mcp_oob_stream *s, const struct mcp_wire_msg *m)
{
  struct mcp_wire_msg out = *m;
  int rc = -1;

  pthread_mutex_lock(&oob.lock);
  if (!atomic_load(&s->dead) && s->peer->state != PEER_DEAD) {
    out.stream_id = m->type == MCP_WIRE_CONN_REQ ? 0 : s->remote_id;
    rc = peer_queue(s->peer, &out);
    if (rc == 0 && s->peer->fd >= 0)
      (void)mcp_sock_sendq_flush(&s->peer->sq, s->peer->fd);
  }
  pthread_mutex_unlock(&oob.lock);
  return rc;
}

int mcp_oob_stream_recv(struct mcp_oob_stream *s, struct mcp_wire_msg *m)
{
  int got = 0;

  pthread_mutex_lock(&oob.lock);
  progress_locked();
  if (s->inbox_count > 0) {
    *m = s->inbox[s->inbox_head];
    s->inbox_head = (s->inbox_head + 1) % MCP_OOB_INBOX;
    s->inbox_count--;
    got = 1;
    if (s->inbox_count == 0)
      inbox_put(s);
  }
  pthread_mutex_unlock(&oob.lock);
  return got;
}

void mcp_oob_stream_close(struct mcp_oob_stream *s, int notify)
{
  pthread_mutex_lock(&oob.lock);
  if (notify && s->remote_id != 0 && s->peer->state == PEER_UP) {
    struct mcp_wire_msg m;
    memset(&m, 0, sizeof(m));
    m.type = MCP_WIRE_CLOSE;
    m.stream_id = s->remote_id;
    m.u.close_stream_id = s->id;
    (void)peer_queue(s->peer, &m);
  }
  mcp_list_del(&s->link);
  peer_unref(s->peer);
  inbox_put(s);
  pthread_mutex_unlock(&oob.lock);
  free(s);
}

const char *mcp_oob_stream_peer_name(struct mcp_oob_stream *s, char *buf, size_t len)
{
  pthread_mutex_lock(&oob.lock);
  peer_name(s->peer, buf, len);
  pthread_mutex_unlock(&oob.lock);
  return buf;
}

uint32_t mcp_oob_stream_id(const struct mcp_oob_stream *s) { return s->id; }

uint32_t mcp_oob_stream_remote_id(struct mcp_oob_stream *s)
{
  uint32_t id;

  pthread_mutex_lock(&oob.lock);
  id = s->remote_id;
  pthread_mutex_unlock(&oob.lock);
  return id;
}

void mcp_oob_stream_set_remote_id(struct mcp_oob_stream *s, uint32_t remote_id)
{
  pthread_mutex_lock(&oob.lock);
  s->remote_id = remote_id;
  pthread_mutex_unlock(&oob.lock);
}

int mcp_oob_stream_dead(const struct mcp_oob_stream *s) { return atomic_load(&s->dead); }
const char *mcp_oob_stream_dead_reason(const struct mcp_oob_stream *s) { return s->dead_reason; }
int mcp_oob_stream_closed_by_peer(const struct mcp_oob_stream *s) { return atomic_load(&s->closed_by_peer); }

struct mcp_oob_stream *mcp_oob_test_stream_new(void)
{
  struct mcp_oob_stream *s = calloc(1, sizeof(*s));

  if (s != NULL)
    mcp_list_init(&s->link); /* on no channel's list: a close unlinks nothing */
  return s;
}

void mcp_oob_test_stream_end(struct mcp_oob_stream *s, int dead, int closed_by_peer, const char *reason)
{
  if (reason != NULL)
    snprintf(s->dead_reason, sizeof(s->dead_reason), "%s", reason);
  if (closed_by_peer)
    atomic_store(&s->closed_by_peer, 1);
  if (dead)
    atomic_store(&s->dead, 1);
}

enum mcp_oob_phase mcp_oob_stream_phase(struct mcp_oob_stream *s)
{
  enum mcp_oob_phase ph;

  pthread_mutex_lock(&oob.lock);
  if (atomic_load(&s->dead) || s->peer->state == PEER_DEAD)
    ph = MCP_OOB_DEAD;
  else if (s->peer->state == PEER_CONNECTING)
    ph = MCP_OOB_DIALLING;
  else if (s->peer->state == PEER_HELLO)
    ph = MCP_OOB_TCP_UP;
  else
    ph = MCP_OOB_UP;
  pthread_mutex_unlock(&oob.lock);
  return ph;
}

const char *mcp_oob_self_name(char *buf, size_t len)
{
  char host[64] = "", addr[MCP_SOCKADDR_STRLEN];

  gethostname(host, sizeof(host) - 1);
  pthread_mutex_lock(&oob.lock);
  mcp_sockaddr_format(&oob.local, addr, sizeof(addr));
  if (oob.local_rank >= 0)
    snprintf(buf, len, "%s pid %u local rank %d (%s)", host, (unsigned)getpid(), oob.local_rank, addr);
  else
    snprintf(buf, len, "%s pid %u (%s)", host, (unsigned)getpid(), addr);
  pthread_mutex_unlock(&oob.lock);
  return buf;
}
