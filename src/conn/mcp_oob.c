/*
 * mcp_oob.c - the process-wide out-of-band channel (see oob.h for the why).
 *
 * State: one listening socket, a list of peer connections (each a nonblocking TCP
 * socket with a send queue and a frame buffer), the streams multiplexed over them and
 * the listens connection requests are routed to. All of it is guarded by one mutex;
 * nobody holds it across a blocking call because there is none. The channel is
 * reference-counted by the comms and listens using it and torn down with the last one,
 * so no socket outlives the last communicator (NCCL may dlclose us then).
 *
 * Trust (oob.h): every byte from an incoming connection is a stranger's until that
 * connection has sent a CONN_REQ whose MAC proves it holds a listen's key. Until then it
 * may send one HELLO and CONN_REQs, nothing else; it gets nothing from us but our HELLO
 * (once its own named a live listen) and refusals; its frames are capped at
 * MCP_WIRE_MSG_MAX; it is closed MCP_OOB_AUTH_TIMEOUT_MS after accept, or to make room
 * when MCP_OOB_MAX_UNAUTH (or MCP_OOB_MAX_UNAUTH_PER_HOST from its address) are waiting,
 * oldest first, or at once on any wrong word. An outgoing connection is trusted once the
 * acceptor's HELLO carried a valid proof; requests ride only on connections this process
 * dialled. WARNs a stranger can cause are rate-limited per address (MCP_WARN_LIMITED).
 *
 * Late peers: the process we dial may not call into mcpnet (accept, or anything) for
 * minutes, so an outgoing connection that its kernel accepted waits for the acceptor's
 * HELLO as long as TCP holds it up; keepalive (mcp_sock_set_keepalive) ends the wait when
 * the host dies, FIN/RST when the process does. Only incoming connections have a
 * deadline (the stranger defence): the dialler is by construction inside its connect
 * loop. If it was not (it dialled, then made no call for 10 s), we tell it so with
 * CONN_REJECT code SILENT before closing, and it dials again. An authenticated peer
 * that is merely slow is never cut off.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "core/random.h"
#include "core/siphash.h"
#include "core/text.h"
#include "fabric/fabric.h"
#include "conn/link.h"
#include "conn/oob.h"

enum peer_state { PEER_CONNECTING, PEER_HELLO, PEER_UP, PEER_DEAD };

#define MCP_OOB_INBOX 8
/* Bytes a connection may queue toward its peer: one that has proved itself may carry
 * the recovery frames of many comms at once; a stranger gets a HELLO or a refusal. */
#define SENDQ_MAX (4u << 20)
#define SENDQ_MAX_UNAUTH (16u << 10)

struct mcp_oob_stream {
  uint32_t id;        /* ours: the peer puts it in frame headers to reach us */
  uint32_t remote_id; /* the peer's id for the same connection, once known */
  struct mcp_oob_peer *peer;
  struct mcp_oob_cred cred; /* open_to: the listen its CONN_REQ asks for */
  atomic_int dead;          /* the peer connection is gone; reason in dead_reason */
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
  union mcp_sockaddr addr;        /* the listener we dialled, or the address that dialled us */
  char host[MCP_SOCKADDR_STRLEN]; /* addr without the port: the source of rate-limited WARNs */
  uint64_t expect_nonce;          /* outgoing: the nonce in the handle */
  struct mcp_wire_hello hello;
  int have_hello;
  /* Authentication: outgoing, the listen our HELLO named (the first stream's); incoming,
   * the one the dialler's HELLO named. The acceptor's and the dialler's challenges. */
  struct mcp_oob_cred cred;
  uint64_t chal_acc, chal_dial;
  int authed;    /* outgoing: the acceptor's proof held; incoming: a valid CONN_REQ came */
  int listen_ok; /* incoming: its HELLO named a live listen (kept longer when room is short) */
  struct mcp_sock_sendq sq;
  struct mcp_sock_rbuf rb;
  int refs;                  /* streams and queued requests */
  uint64_t auth_deadline_ms; /* incoming: must prove itself by then */
  uint64_t accepted_ms;
  int sent_frames;  /* anything but HELLO queued on this TCP connection */
  int told_silent;  /* outgoing: the acceptor closed us for a late HELLO */
  unsigned redials; /* outgoing: new TCP connections after told_silent */
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

#define MAX_REDIALS 8 /* a dialler told SILENT this often is not merely late */

/* What each MAC is over, so one can never stand for another. */
#define MAC_ACCEPTOR 0x666f6f72702d6361ull /* "ac-proof" */
#define MAC_REQUEST 0x2d74736575716572ull  /* "request-" */

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

/* SipHash-2-4 under the listen's key over {what, the acceptor's challenge, the dialler's
 * challenge, x}: the acceptor's proof binds its process nonce, a request's MAC its
 * listen id and stream id. */
static uint64_t oob_mac(const struct mcp_oob_cred *cred, uint64_t what, uint64_t chal_acc, uint64_t chal_dial,
                        uint64_t x)
{
  const uint64_t words[4] = {what, chal_acc, chal_dial, x};
  uint8_t msg[32];

  for (int i = 0; i < 32; i++)
    msg[i] = (uint8_t)(words[i / 8] >> (8 * (i % 8)));
  return mcp_siphash24(cred->key, msg, sizeof(msg));
}

uint64_t mcp_oob_mac_acceptor(const struct mcp_oob_cred *cred, uint64_t chal_acc, uint64_t chal_dial,
                              uint64_t nonce)
{
  return oob_mac(cred, MAC_ACCEPTOR, chal_acc, chal_dial, nonce);
}

uint64_t mcp_oob_mac_request(const struct mcp_oob_cred *cred, uint64_t chal_acc, uint64_t chal_dial,
                             uint32_t stream_id)
{
  return oob_mac(cred, MAC_REQUEST, chal_acc, chal_dial, (uint64_t)cred->listen_id << 32 | stream_id);
}

/* Without an early exit, so the time taken says nothing about where they differ. */
static int mac_equal(uint64_t a, uint64_t b) { return (a ^ b) == 0; }

static uint64_t request_mac(const struct mcp_oob_cred *cred, const struct mcp_oob_peer *p, uint32_t stream_id)
{
  return mcp_oob_mac_request(cred, p->chal_acc, p->chal_dial, stream_id);
}

/* An incoming connection's claims (host name, pid) are a stranger's until it proved
 * itself: only its address names it until then. */
static const char *peer_name(const struct mcp_oob_peer *p, char *buf, size_t len)
{
  char addr[MCP_SOCKADDR_STRLEN];

  mcp_sockaddr_format(&p->addr, addr, sizeof(addr));
  if (p->have_hello && p->authed && p->hello.local_rank >= 0)
    snprintf(buf, len, "%s pid %u local rank %d (%s)", p->hello.hostname, p->hello.pid, p->hello.local_rank,
             addr);
  else if (p->have_hello && p->authed)
    snprintf(buf, len, "%s pid %u (%s)", p->hello.hostname, p->hello.pid, addr);
  else
    snprintf(buf, len, "%s", addr);
  return buf;
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
  /* What a dead connection buffered is of no use: give it back now, not at free. */
  mcp_sock_sendq_free(&p->sq);
  mcp_sock_rbuf_free(&p->rb);
  mcp_list_each(it, &oob.streams)
  {
    s = mcp_list_entry(it, struct mcp_oob_stream, link);
    if (s->peer == p && !atomic_load(&s->dead)) {
      snprintf(s->dead_reason, sizeof(s->dead_reason), "%s", p->dead_reason);
      atomic_store(&s->dead, 1);
    }
  }
}

/* Queues one frame. A peer that lets its queue fill does not read: the connection is
 * closed (a stranger cannot make us hold more than its queue's limit). */
static int peer_queue(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN], name[160];
  size_t len;
  int rc;

  if (p->state == PEER_DEAD)
    return -ENOTCONN;
  rc = mcp_wire_encode(m, buf, sizeof(buf), &len, err, sizeof(err));
  if (rc != 0) {
    MCP_WARN("cannot encode a %s frame: %s", mcp_wire_type_name(m->type), err);
    return rc;
  }
  if (m->type != MCP_WIRE_HELLO)
    p->sent_frames = 1;
  if (mcp_sock_sendq_push(&p->sq, buf, len) != 0) {
    MCP_WARN_LIMITED(p->host,
                     "out-of-band: the send queue to %s is full (%zu bytes): the peer does not read; "
                     "connection closed",
                     peer_name(p, name, sizeof(name)), mcp_sock_sendq_pending(&p->sq));
    if (p->fd >= 0)
      (void)mcp_sock_set_abortive(p->fd);
    peer_kill(p, "the out-of-band connection to %s was closed: the peer read nothing while %zu bytes waited",
              name, mcp_sock_sendq_pending(&p->sq));
    return -ENOBUFS;
  }
  return 0;
}

static int peer_redial(struct mcp_oob_peer *p);
static int evict_unauth(const char *host, const char *why);

static struct mcp_oob_peer *peer_new(int outgoing)
{
  struct mcp_oob_peer *p = calloc(1, sizeof(*p));

  if (p == NULL)
    return NULL;
  p->fd = -1;
  p->conn.fd = -1;
  p->outgoing = outgoing;
  /* A dialler trusts its peer from the acceptor's proof on, so only incoming connections
   * start small; both hold no buffer until a byte needs one. */
  mcp_sock_sendq_init(&p->sq, outgoing ? SENDQ_MAX : SENDQ_MAX_UNAUTH);
  mcp_sock_rbuf_init(&p->rb, outgoing ? MCP_WIRE_MAX_FRAME : MCP_WIRE_MSG_MAX, mcp_wire_frame_len);
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

/* Our HELLO: the dialler's names the listen it will prove (listen_id, no proof); the
 * acceptor's proves it holds that listen's key. */
static int send_hello(struct mcp_oob_peer *p)
{
  struct mcp_wire_msg m;
  uint64_t chal;
  int rc = mcp_random_u64(&chal);

  if (rc != 0) {
    peer_kill(p, "no random challenge for the out-of-band connection to %s (getrandom failed)", p->host);
    return rc;
  }
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_HELLO;
  m.u.hello.nonce = oob.nonce;
  m.u.hello.pid = (uint32_t)getpid();
  gethostname(m.u.hello.hostname, sizeof(m.u.hello.hostname) - 1);
  mcp_text_make_printable(m.u.hello.hostname);
  snprintf(m.u.hello.plugin_version, sizeof(m.u.hello.plugin_version), "%s", MCPNET_VERSION);
  mcp_text_make_printable(m.u.hello.plugin_version);
  m.u.hello.local_rank = oob.local_rank;
  m.u.hello.challenge = chal;
  if (p->outgoing) {
    p->chal_dial = chal;
    m.u.hello.listen_id = p->cred.listen_id;
  } else {
    p->chal_acc = chal;
    m.u.hello.proof = mcp_oob_mac_acceptor(&p->cred, p->chal_acc, p->chal_dial, oob.nonce);
  }
  return peer_queue(p, &m);
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

static struct mcp_oob_listener *listener_find(uint32_t id)
{
  struct mcp_list *it;

  mcp_list_each(it, &oob.listeners)
  {
    struct mcp_oob_listener *l = mcp_list_entry(it, struct mcp_oob_listener, link);

    if (l->cred.listen_id == id)
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
  mcp_text_make_printable(m.u.reject.reason);
  (void)peer_queue(p, &m);
}

/* A refusal the stranger may read, then the close. */
static void refuse_and_close(struct mcp_oob_peer *p, uint32_t stream_id, uint32_t code, const char *why)
{
  reject(p, stream_id, code, why);
  if (p->fd >= 0)
    (void)mcp_sock_sendq_flush(&p->sq, p->fd);
  peer_kill(p, "%s", why);
}

static void on_hello_from_acceptor(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  char name[160];

  if (p->expect_nonce != 0 && m->u.hello.nonce != p->expect_nonce) {
    MCP_WARN_LIMITED(p->host,
                     "out-of-band: %s answered for process %016llx, but the handle names %016llx "
                     "(a restarted peer, or another job on the same port?)",
                     peer_name(p, name, sizeof(name)), (unsigned long long)m->u.hello.nonce,
                     (unsigned long long)p->expect_nonce);
    peer_kill(p, "the process at %s is not the one that published the handle", name);
    return;
  }
  if (!mac_equal(m->u.hello.proof,
                 mcp_oob_mac_acceptor(&p->cred, m->u.hello.challenge, p->chal_dial, m->u.hello.nonce))) {
    MCP_WARN_LIMITED(p->host,
                     "out-of-band: %s could not prove it holds the key of listen %u in the handle: it is "
                     "not the process that published the handle (another process on its port?); closed",
                     peer_name(p, name, sizeof(name)), p->cred.listen_id);
    peer_kill(p, "the process at %s could not prove it published the handle", name);
    return;
  }
  p->chal_acc = m->u.hello.challenge;
  p->hello = m->u.hello;
  p->have_hello = 1;
  p->authed = 1;
  p->state = PEER_UP;
}

static void on_hello_from_dialler(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  struct mcp_oob_listener *l = listener_find(m->u.hello.listen_id);

  if (l == NULL) {
    MCP_WARN_LIMITED(p->host,
                     "out-of-band: a connection from %s names listen %u, which this process does not have "
                     "(closed already, a handle from another process, or a stranger guessing); closed",
                     p->host, m->u.hello.listen_id);
    refuse_and_close(p, 0, MCP_WIRE_REJECT_NO_LISTENER, "no listen with that id in this process");
    return;
  }
  p->cred = l->cred;
  p->listen_ok = 1;
  p->chal_dial = m->u.hello.challenge;
  p->hello = m->u.hello;
  p->have_hello = 1;
  p->state = PEER_UP; /* HELLOs exchanged; requests still have to prove themselves */
  (void)send_hello(p);
}

static void on_hello(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  char name[160];

  if (m->version < MCP_WIRE_VERSION_AUTH) {
    MCP_WARN_LIMITED(p->host,
                     "out-of-band: %s speaks mcpnet wire version %u, which cannot authenticate its "
                     "connections (this build needs %d); closed. Run one mcpnet version on every host",
                     peer_name(p, name, sizeof(name)), m->version, MCP_WIRE_VERSION_AUTH);
    peer_kill(p,
              "%s runs an older mcpnet (wire version %u) that cannot authenticate; run one mcpnet version "
              "on every host",
              name, m->version);
    return;
  }
  if (p->have_hello) {
    MCP_WARN_LIMITED(p->host, "out-of-band: %s sent a second HELLO; connection closed",
                     peer_name(p, name, sizeof(name)));
    peer_kill(p, "%s sent a second HELLO", name);
    return;
  }
  if (p->outgoing)
    on_hello_from_acceptor(p, m);
  else
    on_hello_from_dialler(p, m);
}

static void on_conn_req(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  const struct mcp_wire_conn_req *cr = &m->u.conn_req;
  struct mcp_oob_listener *l = listener_find(cr->listen_id);
  struct mcp_oob_request *r;
  char name[160];

  if (p->outgoing) {
    /* Requests go from dialler to acceptor only. */
    MCP_WARN_LIMITED(p->host, "out-of-band: %s sent a connection request on a connection we dialled; closed",
                     peer_name(p, name, sizeof(name)));
    peer_kill(p, "%s sent a connection request the wrong way", name);
    return;
  }
  if (l == NULL) {
    MCP_WARN_LIMITED(
      p->host,
      "out-of-band: connection request from %s for listen %u, which this process does not have "
      "(closed listen, or a handle from another process); refused",
      peer_name(p, name, sizeof(name)), cr->listen_id);
    if (p->authed)
      reject(p, cr->ep.stream_id, MCP_WIRE_REJECT_NO_LISTENER, "no listen with that id");
    else
      refuse_and_close(p, cr->ep.stream_id, MCP_WIRE_REJECT_NO_LISTENER, "no listen with that id");
    return;
  }
  if (!mac_equal(cr->mac, request_mac(&l->cred, p, cr->ep.stream_id))) {
    MCP_WARN_LIMITED(p->host,
                     "out-of-band: connection request from %s for listen %u with a wrong proof of its key (a "
                     "stranger guessing, or a handle from another job); refused and connection closed",
                     peer_name(p, name, sizeof(name)), cr->listen_id);
    refuse_and_close(p, cr->ep.stream_id, MCP_WIRE_REJECT_NO_LISTENER, "wrong proof of the listen key");
    return;
  }
  if (!p->authed) {
    p->authed = 1;
    p->sq.max = SENDQ_MAX;
    mcp_sock_rbuf_set_max(&p->rb, MCP_WIRE_MAX_FRAME);
  }
  if (l->npending >= MCP_OOB_MAX_PENDING) {
    MCP_WARN_LIMITED(
      p->host,
      "out-of-band: %u connection requests already wait on listen %u; one more from %s refused "
      "(a peer that connects again and again?)",
      l->npending, cr->listen_id, peer_name(p, name, sizeof(name)));
    reject(p, cr->ep.stream_id, MCP_WIRE_REJECT_RESOURCES,
           "too many connection requests wait on this listen");
    return;
  }
  r = calloc(1, sizeof(*r));
  if (r == NULL) {
    reject(p, cr->ep.stream_id, MCP_WIRE_REJECT_RESOURCES, "out of memory");
    return;
  }
  r->peer = p;
  r->req = *cr;
  p->refs++;
  l->npending++;
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
    MCP_WARN_LIMITED(p->host, "out-of-band: stream %u from %s overflows; frame %s dropped", s->id,
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

/* What a connection may say before it is trusted: the first HELLO; then, incoming, only
 * requests (which prove it); outgoing, only the acceptor's stream-0 refusals. */
static int frame_allowed(const struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  if (m->type == MCP_WIRE_HELLO)
    return 1;
  if (!p->have_hello || !p->authed) {
    if (p->outgoing)
      return m->type == MCP_WIRE_CONN_REJECT && m->stream_id == 0;
    return p->have_hello && m->type == MCP_WIRE_CONN_REQ;
  }
  return 1;
}

static void dispatch(struct mcp_oob_peer *p, const struct mcp_wire_msg *m)
{
  char name[160];

  if (!frame_allowed(p, m)) {
    MCP_WARN_LIMITED(p->host,
                     "out-of-band: refused a connection from %s: %s before it proved itself (not an mcpnet "
                     "peer of this job?)",
                     peer_name(p, name, sizeof(name)), mcp_wire_type_name(m->type));
    peer_kill(p, "%s sent %s before it proved itself", name, mcp_wire_type_name(m->type));
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
    if (m->stream_id == 0 && p->outgoing && m->u.reject.code == MCP_WIRE_REJECT_SILENT) {
      p->told_silent = 1;
      return;
    }
    if (m->stream_id == 0 && p->outgoing && !p->authed) {
      /* The acceptor refused our HELLO (no such listen): our streams learn why. */
      peer_kill(p, "%s refused the connection: %s", peer_name(p, name, sizeof(name)), m->u.reject.reason);
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
        MCP_WARN_LIMITED(p->host, "out-of-band: malformed frame from %s: %s; connection closed",
                         peer_name(p, name, sizeof(name)), err);
        peer_kill(p, "malformed frame from %s: %s", name, err);
        return;
      }
      dispatch(p, &m);
      if (p->state == PEER_DEAD)
        return;
    }
    if (r < 0) {
      MCP_WARN_LIMITED(p->host, "out-of-band: refused bytes from %s: %s; connection closed",
                       peer_name(p, name, sizeof(name)), err);
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
      MCP_WARN_LIMITED(p->host, "out-of-band: %s closed in the middle of a frame (%zu bytes left)",
                       peer_name(p, name, sizeof(name)), mcp_sock_rbuf_pending(&p->rb));
    peer_kill(p,
              "%s closed the out-of-band connection: the peer process exited or closed its "
              "communicator",
              peer_name(p, name, sizeof(name)));
  }
}

/* An outgoing connection the acceptor closed because our HELLO came late: our process
 * made no call into mcpnet for 10 s after dialling, it is not gone. Dial again on the
 * same peer, so the streams waiting on it keep waiting. 1 when redialled. */
/* Starts p's TCP connect (MCPNET_CONNECT_TIMEOUT, refusals retried with a backoff: the
 * peer may not have its listener yet). A process out of descriptors first takes one
 * back from a stranger: its own dial must not fail for a flood of them. */
static void peer_dial(struct mcp_oob_peer *p)
{
  struct mcp_sock_connect_opts opts = {.timeout_ms = (uint32_t)oob.connect_timeout_ms,
                                       .max_retries = 1000,
                                       .backoff_ms = 10,
                                       .backoff_max_ms = 1000};
  enum mcp_sock_connect_state st = mcp_sock_connect_start(&p->conn, &p->addr, NULL, &opts);

  if (st == MCP_SOCK_CONNECT_FAILED && (p->conn.err == EMFILE || p->conn.err == ENFILE) &&
      evict_unauth(NULL, "no file descriptor is left for this process's own connection"))
    st = mcp_sock_connect_start(&p->conn, &p->addr, NULL, &opts);
  if (st == MCP_SOCK_CONNECT_FAILED)
    peer_kill(p, "%s", p->conn.msg);
}

static int peer_redial(struct mcp_oob_peer *p)
{
  char addr[MCP_SOCKADDR_STRLEN];

  if (!p->outgoing || !p->told_silent || p->sent_frames || p->redials >= MAX_REDIALS || p->state == PEER_DEAD)
    return 0;
  p->redials++;
  MCP_INFO(NCCL_NET,
           "out-of-band: %s closed our connection because this process answered its HELLO "
           "more than %u s after dialling (it made no call into mcpnet meanwhile); dialling again",
           mcp_sockaddr_format(&p->addr, addr, sizeof(addr)), MCP_OOB_AUTH_TIMEOUT_MS / 1000);
  if (p->fd >= 0)
    close(p->fd);
  p->fd = -1;
  mcp_sock_connect_cancel(&p->conn);
  mcp_sock_sendq_free(&p->sq);
  mcp_sock_sendq_init(&p->sq, SENDQ_MAX);
  mcp_sock_rbuf_free(&p->rb);
  mcp_sock_rbuf_init(&p->rb, MCP_WIRE_MAX_FRAME, mcp_wire_frame_len);
  p->have_hello = 0;
  p->authed = 0;
  p->told_silent = 0;
  p->state = PEER_CONNECTING;
  peer_dial(p);
  return 1;
}

/* Incoming connections that have not proved themselves, from host (NULL: any). */
static unsigned unauth_count(const char *host)
{
  struct mcp_list *it;
  unsigned n = 0;

  mcp_list_each(it, &oob.peers)
  {
    const struct mcp_oob_peer *p = mcp_list_entry(it, struct mcp_oob_peer, link);

    if (!p->outgoing && !p->authed && p->state != PEER_DEAD && (host == NULL || strcmp(p->host, host) == 0))
      n++;
  }
  return n;
}

/* Closes the oldest incoming connection from host (NULL: any) that has not proved itself,
 * one whose HELLO named no live listen first. 1 when one was closed. */
static int evict_unauth(const char *host, const char *why)
{
  struct mcp_oob_peer *victim = NULL;
  struct mcp_list *it;

  /* The list is newest first: the last match is the oldest. */
  mcp_list_each(it, &oob.peers)
  {
    struct mcp_oob_peer *p = mcp_list_entry(it, struct mcp_oob_peer, link);

    if (p->outgoing || p->authed || p->state == PEER_DEAD || (host != NULL && strcmp(p->host, host) != 0))
      continue;
    if (victim == NULL || !p->listen_ok || victim->listen_ok)
      victim = p;
  }
  if (victim == NULL)
    return 0;
  MCP_WARN_LIMITED(
    victim->host,
    "out-of-band: closed a connection from %s that had not proved itself after %llu ms, to make "
    "room: %s",
    victim->host, (unsigned long long)(now_ms() - victim->accepted_ms), why);
  peer_kill(victim, "closed to make room for other connections");
  return 1;
}

static void accept_failed(int err)
{
  struct rlimit rl = {0, 0};
  char addr[MCP_SOCKADDR_STRLEN];

  (void)getrlimit(RLIMIT_NOFILE, &rl);
  MCP_WARN_LIMITED("listener",
                   "out-of-band: accept on %s failed: %s (open files limit %llu); connections wait in the "
                   "kernel's queue. Raise the limit (ulimit -n) if this process has many connections",
                   mcp_sockaddr_format(&oob.local, addr, sizeof(addr)), strerror(err),
                   (unsigned long long)rl.rlim_cur);
}

/* One accepted connection joins the channel as a stranger (oob.lock held); NULL when
 * no memory was left (the connection is closed). */
static struct mcp_oob_peer *adopt(int fd, const union mcp_sockaddr *from)
{
  char host[MCP_SOCKADDR_STRLEN];
  struct mcp_oob_peer *p;

  mcp_sockaddr_format_host(from, host, sizeof(host));
  if (unauth_count(host) >= MCP_OOB_MAX_UNAUTH_PER_HOST)
    evict_unauth(host, "too many connections from one address have not proved themselves");
  if (unauth_count(NULL) >= MCP_OOB_MAX_UNAUTH)
    evict_unauth(NULL, "too many connections have not proved themselves");
  p = peer_new(0);
  if (p == NULL) {
    close(fd);
    return NULL;
  }
  p->fd = fd;
  p->addr = *from;
  snprintf(p->host, sizeof(p->host), "%s", host);
  p->state = PEER_HELLO;
  p->accepted_ms = now_ms();
  p->auth_deadline_ms = p->accepted_ms + MCP_OOB_AUTH_TIMEOUT_MS;
  (void)mcp_sock_set_keepalive(fd, oob.keepalive_s);
  return p;
}

static void progress_peer(struct mcp_oob_peer *p);

static void accept_new(void)
{
  for (;;) {
    union mcp_sockaddr from;
    struct mcp_oob_peer *p;
    int fd, rc;

    rc = mcp_sock_accept(oob.listen_fd, &fd, &from);
    if (rc == -EMFILE || rc == -ENFILE || rc == -ENOBUFS || rc == -ENOMEM) {
      /* Out of descriptors: a stranger's connection gives its own back first. */
      if (evict_unauth(NULL, "no file descriptor is left for a new connection")) {
        /* Its descriptor closed with it; try again. */
        continue;
      }
      accept_failed(-rc);
      return;
    }
    if (rc != 0)
      return;
    p = adopt(fd, &from);
    /* Read it at once: a genuine dialler's HELLO is usually there already, and naming a
     * live listen keeps its connection when strangers crowd the rest out. */
    if (p != NULL)
      progress_peer(p);
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
    if (send_hello(p) != 0)
      return;
  }
  if (p->state != PEER_HELLO && p->state != PEER_UP)
    return;
  if (!p->outgoing && !p->authed && now_ms() > p->auth_deadline_ms) {
    struct mcp_wire_msg m;

    MCP_WARN_LIMITED(p->host, "out-of-band: %s connected but did not prove itself within %u s (%s); closed",
                     peer_name(p, name, sizeof(name)), MCP_OOB_AUTH_TIMEOUT_MS / 1000,
                     p->have_hello ? "HELLO, but no connection request" : "no HELLO: not an mcpnet peer?");
    /* An mcpnet dialler that was merely late learns why and dials again. */
    memset(&m, 0, sizeof(m));
    m.type = MCP_WIRE_CONN_REJECT;
    m.u.reject.code = MCP_WIRE_REJECT_SILENT;
    snprintf(m.u.reject.reason, sizeof(m.u.reject.reason),
             "no connection request within %u s of accept: closed as a silent client",
             MCP_OOB_AUTH_TIMEOUT_MS / 1000);
    if (peer_queue(p, &m) == 0)
      (void)mcp_sock_sendq_flush(&p->sq, p->fd);
    peer_kill(p, "%s did not prove itself in time", name);
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
  if (p->state != PEER_DEAD && p->fd >= 0 && mcp_sock_sendq_pending(&p->sq) > 0)
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
    /* A dead connection nobody refers to (a stranger) is dropped at once. */
    if (p->state == PEER_DEAD && p->refs == 0)
      peer_free(p);
  }
  mcp_log_limited_flush(0);
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
  int rc = 0, err, waited = 0;

  pthread_mutex_lock(&oob.lock);
  if (oob.users++ > 0)
    goto out;
  do
    err = mcp_random_fill_wait(&oob.nonce, sizeof(oob.nonce), &waited);
  while (err == 0 && oob.nonce == 0);
  if (waited)
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "out-of-band channel: waited for the kernel's random generator, which was "
             "not initialised yet (early in the host's boot)");
  if (err != 0) {
    MCP_WARN("out-of-band channel: the kernel's random generator cannot give a nonce (getrandom: %s): "
             "mcpnet will not use guessable keys. Allow getrandom in the container's seccomp profile",
             strerror(-err));
    rc = err;
    goto fail;
  }
  if (mcp_sock_iface_find(cfg->socket_ifname, &cfg->socket_ifname_list, cfg->socket_af, &choice) != 0) {
    MCP_WARN("no interface for the out-of-band channel%s%s: %s",
             cfg->socket_ifname ? " matching NCCL_SOCKET_IFNAME=" : "",
             cfg->socket_ifname ? cfg->socket_ifname : "", choice.reason);
    rc = -ENODEV;
    goto fail;
  }
  range.lo = (uint16_t)cfg->oob_port_lo;
  range.hi = (uint16_t)cfg->oob_port_hi;
  rc = mcp_sock_listen(&choice.addr, &range, &oob.listen_fd, &oob.local, msg, sizeof(msg));
  if (rc != 0) {
    MCP_WARN("out-of-band listener on %s: %s", choice.name, msg);
    goto fail;
  }
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
    mcp_log_limited_flush(1);
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
  uint64_t id = 0;
  int err = 0;

  if (l == NULL)
    return NULL;
  pthread_mutex_lock(&oob.lock);
  /* A random id, so that a stranger cannot name a live listen by counting. */
  do {
    err = mcp_random_fill(&id, sizeof(id));
    l->cred.listen_id = (uint32_t)id;
  } while (err == 0 && (l->cred.listen_id == 0 || listener_find(l->cred.listen_id) != NULL));
  if (err == 0)
    err = mcp_random_fill(l->cred.key, sizeof(l->cred.key));
  if (err == 0) {
    mcp_list_init(&l->pending);
    mcp_list_push(&oob.listeners, &l->link);
  }
  pthread_mutex_unlock(&oob.lock);
  if (err != 0) {
    MCP_WARN("listen: no random key from the kernel (getrandom: %s); mcpnet will not publish a guessable one",
             strerror(-err));
    free(l);
    return NULL;
  }
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
    l->npending--;
    got = 1;
  }
  pthread_mutex_unlock(&oob.lock);
  return got;
}

unsigned mcp_oob_listener_pending(struct mcp_oob_listener *l)
{
  unsigned n;

  pthread_mutex_lock(&oob.lock);
  n = l->npending;
  pthread_mutex_unlock(&oob.lock);
  return n;
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

struct mcp_oob_stream *mcp_oob_stream_open_to(const union mcp_sockaddr *addr, uint64_t nonce,
                                              const struct mcp_oob_cred *cred)
{
  struct mcp_oob_stream *s = NULL;
  struct mcp_oob_peer *p = NULL, *q;
  struct mcp_list *it;

  pthread_mutex_lock(&oob.lock);
  /* Share a live connection this process dialled to the same listener and process. An
   * incoming one never carries our requests: whoever dialled us may claim any nonce. */
  mcp_list_each(it, &oob.peers)
  {
    q = mcp_list_entry(it, struct mcp_oob_peer, link);
    if (q->state != PEER_DEAD && q->outgoing && q->expect_nonce == nonce &&
        mcp_sockaddr_equal(&q->addr, addr)) {
      p = q;
      break;
    }
  }
  if (p == NULL) {
    p = peer_new(1);
    if (p == NULL)
      goto out;
    p->addr = *addr;
    mcp_sockaddr_format_host(addr, p->host, sizeof(p->host));
    p->expect_nonce = nonce;
    p->cred = *cred;
    p->state = PEER_CONNECTING;
    peer_dial(p);
  }
  s = stream_new(p);
  if (s != NULL)
    s->cred = *cred;
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
  ready = atomic_load(&s->dead) ? -ENOTCONN : s->peer->state == PEER_UP;
  pthread_mutex_unlock(&oob.lock);
  return ready;
}

int mcp_oob_stream_send(struct mcp_oob_stream *s, const struct mcp_wire_msg *m)
{
  struct mcp_wire_msg out = *m;
  struct mcp_oob_peer *p = s->peer;
  int rc = -ENOTCONN;

  pthread_mutex_lock(&oob.lock);
  if (!atomic_load(&s->dead) && p->state != PEER_DEAD) {
    out.stream_id = m->type == MCP_WIRE_CONN_REQ ? 0 : s->remote_id;
    if (m->type == MCP_WIRE_CONN_REQ) {
      /* Only on a connection we dialled whose acceptor proved itself. */
      if (!p->outgoing || !p->authed)
        goto out;
      out.u.conn_req.listen_id = s->cred.listen_id;
      out.u.conn_req.mac = request_mac(&s->cred, p, out.u.conn_req.ep.stream_id);
    }
    rc = peer_queue(p, &out);
    if (rc == 0 && p->fd >= 0)
      (void)mcp_sock_sendq_flush(&p->sq, p->fd);
  }
out:
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

void mcp_oob_stream_peer_ident(struct mcp_oob_stream *s, struct mcp_oob_ident *id)
{
  const struct mcp_oob_peer *p;

  memset(id, 0, sizeof(*id));
  id->local_rank = -1;
  pthread_mutex_lock(&oob.lock);
  p = s->peer;
  if (p != NULL) {
    snprintf(id->addr, sizeof(id->addr), "%s", p->host);
    /* A stranger's claims are not repeated: only a peer that proved itself is named. */
    if (p->have_hello && p->authed) {
      snprintf(id->host, sizeof(id->host), "%s", p->hello.hostname);
      id->pid = p->hello.pid;
      id->local_rank = p->hello.local_rank;
    }
  }
  pthread_mutex_unlock(&oob.lock);
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

int mcp_oob_test_adopt(int fd, const union mcp_sockaddr *from)
{
  int rc = -ENOTCONN;

  pthread_mutex_lock(&oob.lock);
  if (oob.users > 0 && adopt(fd, from) != NULL)
    rc = 0;
  pthread_mutex_unlock(&oob.lock);
  return rc;
}

struct mcp_oob_stream *mcp_oob_test_dial(int fd, const union mcp_sockaddr *to, uint64_t nonce,
                                         const struct mcp_oob_cred *cred)
{
  struct mcp_oob_stream *s = NULL;
  struct mcp_oob_peer *p;

  pthread_mutex_lock(&oob.lock);
  p = oob.users > 0 ? peer_new(1) : NULL;
  if (p != NULL) {
    p->fd = fd;
    p->addr = *to;
    mcp_sockaddr_format_host(to, p->host, sizeof(p->host));
    p->expect_nonce = nonce;
    p->cred = *cred;
    p->state = PEER_HELLO;
    if (send_hello(p) == 0)
      (void)mcp_sock_sendq_flush(&p->sq, p->fd);
    s = stream_new(p);
    if (s != NULL)
      s->cred = *cred;
  }
  pthread_mutex_unlock(&oob.lock);
  return s;
}

void mcp_oob_test_count(unsigned *peers, unsigned *unauth)
{
  struct mcp_list *it;

  pthread_mutex_lock(&oob.lock);
  *peers = 0;
  mcp_list_each(it, &oob.peers)(*peers)++;
  *unauth = unauth_count(NULL);
  pthread_mutex_unlock(&oob.lock);
}
