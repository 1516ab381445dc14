/*
 * oob.h - the out-of-band channel: one TCP listener per process and one TCP connection
 * per peer process, shared by every connection between the two.
 *
 * NCCL's handle travels one way (receiver to sender), so QP numbers, GIDs and keys go
 * both ways over this channel. Frames (wire.h) are multiplexed by stream id; a stream
 * belongs to one send or receive comm (or to a connect/accept in progress). There is no
 * thread: mcp_oob_progress() moves bytes whenever a caller needs them (connect, accept,
 * and now and then test), never blocking. A peer whose connection closes marks all its
 * streams dead, which is how a dead peer process is noticed within a poll interval.
 */
#ifndef MCPNET_OOB_H
#define MCPNET_OOB_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/list.h"
#include "core/sock.h"
#include "conn/wire.h"

struct mcp_config;
struct mcp_oob_peer;

/* One comm's stream on the channel; opaque outside mcp_oob.c (its fields change under
 * the channel's lock), read through the functions below. */
struct mcp_oob_stream;

/*
 * Trust. The listener is reachable by every tenant on the network, so a connection
 * carries requests only once it has proved knowledge of a listen's key, which only the
 * handle carries (NCCL hands it to the connecting rank; it never crosses this channel):
 * the dialler sends a fresh challenge and names a listen; the acceptor, which speaks
 * second, answers with its own challenge and a MAC under that listen's key over both
 * (the dialler now knows it reached the process that published the handle); each
 * CONN_REQ carries a MAC under its listen's key over both challenges (the acceptor now
 * knows the dialler was given the handle). A recorded exchange replays on no other
 * connection. Connections that have not proved themselves are capped, per process and
 * per remote address, and closed MCP_OOB_AUTH_TIMEOUT_MS after accept; a request is only
 * ever sent on a connection this process dialled to the handle's address.
 */
struct mcp_oob_cred {
  uint32_t listen_id; /* public: names the listen (nonzero, unique among live listens) */
  uint64_t key[2];    /* secret: the SipHash key of the MACs */
};

/* The two MACs (SipHash-2-4 under cred's key): the acceptor's proof in its HELLO, over
 * both challenges and its process nonce; a request's, over both challenges, the listen id
 * and the dialler's stream id. Public so that tests and the lab's attacker can build
 * genuine frames. */
uint64_t mcp_oob_mac_acceptor(const struct mcp_oob_cred *cred, uint64_t chal_acc, uint64_t chal_dial,
                              uint64_t nonce);
uint64_t mcp_oob_mac_request(const struct mcp_oob_cred *cred, uint64_t chal_acc, uint64_t chal_dial,
                             uint32_t stream_id);

#define MCP_OOB_AUTH_TIMEOUT_MS 10000u /* from accept to a valid CONN_REQ */
#define MCP_OOB_MAX_UNAUTH 64          /* incoming connections not yet proved, per process */
#define MCP_OOB_MAX_UNAUTH_PER_HOST 16 /* ... and from one remote address */
#define MCP_OOB_MAX_PENDING 64         /* requests queued on one listen */

/* A connection request waiting for accept. */
struct mcp_oob_request {
  struct mcp_oob_peer *peer;
  struct mcp_wire_conn_req req;
  struct mcp_list link; /* on its listener's pending FIFO */
};

struct mcp_oob_listener {
  struct mcp_oob_cred cred;
  struct mcp_list pending; /* requests, oldest first */
  unsigned npending;
  struct mcp_list link; /* on the channel's listeners */
};

/* Takes a reference on the process-wide channel, creating the listening socket on first
 * use. 0, or a negative errno with a WARN that names the interface and port range (or the kernel's
 * random generator, when it cannot give the process nonce yet). */
int mcp_oob_acquire(const struct mcp_config *cfg);
void mcp_oob_release(void);

/* The address our listener publishes, and this process's random nonce. */
void mcp_oob_local(union mcp_sockaddr *addr, uint64_t *nonce);

/* Moves bytes on every connection without blocking. */
void mcp_oob_progress(void);
/* As progress, but at most every interval_ms and only when no other thread is in it:
 * cheap enough to call from test(). */
void mcp_oob_poll(unsigned interval_ms);

/* Listeners: a fresh id and key for one listen comm (NULL with a WARN when no random key
 * can be had); requests queue until taken. */
struct mcp_oob_listener *mcp_oob_listener_add(void);
void mcp_oob_listener_remove(struct mcp_oob_listener *l);
/* Pops one request (1) or none (0). The request's peer is referenced; give it to
 * mcp_oob_stream_open_for or drop it with mcp_oob_request_free. */
int mcp_oob_listener_take(struct mcp_oob_listener *l, struct mcp_oob_request **req);
/* Requests queued and not yet taken. */
unsigned mcp_oob_listener_pending(struct mcp_oob_listener *l);
void mcp_oob_request_free(struct mcp_oob_request *req);
/* Tells the connecting side why its request cannot be served. */
int mcp_oob_request_reject(struct mcp_oob_request *req, uint32_t code, const char *why);

/* Streams. open_to finds or starts the connection to a listener (sharing a connection
 * this process dialled to the same address and process), for the listen cred names;
 * open_for answers a request on the request's connection. */
struct mcp_oob_stream *mcp_oob_stream_open_to(const union mcp_sockaddr *addr, uint64_t nonce,
                                              const struct mcp_oob_cred *cred);
struct mcp_oob_stream *mcp_oob_stream_open_for(struct mcp_oob_request *req);
/* 1 when the peer's connection is up (HELLO exchanged), 0 while connecting, -ENOTCONN dead. */
int mcp_oob_stream_ready(struct mcp_oob_stream *s);
/* Queues a frame; the header's stream id is remote_id (0 for CONN_REQ, whose listen id
 * and MAC the channel fills in from the stream's cred). 0 or a negative errno (-ENOTCONN: the
 * stream or its connection is dead, or not yet trusted for a request; -ENOBUFS: the queue is full). */
int mcp_oob_stream_send(struct mcp_oob_stream *s, const struct mcp_wire_msg *m);
/* 1 with *m when a frame for this stream arrived, 0 when none. */
int mcp_oob_stream_recv(struct mcp_oob_stream *s, struct mcp_wire_msg *m);
/* Closes our end; notify sends CLOSE to the peer when the connection is up. */
void mcp_oob_stream_close(struct mcp_oob_stream *s, int notify);
/* "host pid N (addr)" of the peer, for messages. */
const char *mcp_oob_stream_peer_name(struct mcp_oob_stream *s, char *buf, size_t len);
/* Who the peer is, for the status mcpnet-top reads: its address (no port) always; its
 * host name, pid and local rank once its HELLO proved it holds the key (pid 0, rank -1
 * until then). */
struct mcp_oob_ident {
  char host[MCP_WIRE_HOSTNAME_MAX + 1];
  char addr[MCP_SOCKADDR_STRLEN];
  uint32_t pid;
  int32_t local_rank;
};
void mcp_oob_stream_peer_ident(struct mcp_oob_stream *s, struct mcp_oob_ident *id);
/* Our id for the stream (the peer puts it in frame headers to reach us). */
uint32_t mcp_oob_stream_id(const struct mcp_oob_stream *s);
/* The peer's id for the same connection, once its answer named it (0: not yet); set
 * under the channel's lock, since the progress of other comms reads it. */
uint32_t mcp_oob_stream_remote_id(struct mcp_oob_stream *s);
void mcp_oob_stream_set_remote_id(struct mcp_oob_stream *s, uint32_t remote_id);
/* Lock-free reads for any thread: the peer connection is gone (why: dead_reason, set
 * before dead), or the peer closed this stream (CLOSE). */
int mcp_oob_stream_dead(const struct mcp_oob_stream *s);
const char *mcp_oob_stream_dead_reason(const struct mcp_oob_stream *s);
int mcp_oob_stream_closed_by_peer(const struct mcp_oob_stream *s);
/* Either: nobody is left at the other end to receive or answer. */
static inline int mcp_oob_stream_gone(const struct mcp_oob_stream *s)
{
  return mcp_oob_stream_dead(s) || mcp_oob_stream_closed_by_peer(s);
}
/* Unit tests: a stream on no connection, and its end as the channel would mark it. */
struct mcp_oob_stream *mcp_oob_test_stream_new(void);
void mcp_oob_test_stream_end(struct mcp_oob_stream *s, int dead, int closed_by_peer, const char *reason);
/* Tests and fuzzers: fd (a connected socket, e.g. one end of a socketpair) joins the
 * channel as if the listener had accepted it from `from` (0, or -ENOTCONN when the channel is
 * not acquired). Counts the channel's connections: all of them, and incoming ones that
 * have not proved themselves yet. */
int mcp_oob_test_adopt(int fd, const union mcp_sockaddr *from);
/* The same for a connection this process dialled to `to` for cred's listen of process
 * nonce, its TCP connect done: our HELLO is sent; the stream on it is returned. */
struct mcp_oob_stream *mcp_oob_test_dial(int fd, const union mcp_sockaddr *to, uint64_t nonce,
                                         const struct mcp_oob_cred *cred);
void mcp_oob_test_count(unsigned *peers, unsigned *unauth);

/* ---- Late peers ------------------------------------------------------------------
 * A peer process only answers while NCCL calls into it, and at scale one may reach its
 * accept or connect minutes after ours. Only what cannot be reached has a deadline
 * (the TCP connect: MCPNET_CONNECT_TIMEOUT); once the peer's kernel holds the TCP
 * connection we wait as long as it stands (FIN/RST: the process is gone; keepalive: the
 * host is gone) and say who waits for whom instead of failing. */
enum mcp_oob_phase {
  MCP_OOB_DIALLING = 0, /* no TCP connection yet: the connect deadline applies */
  MCP_OOB_TCP_UP = 1,   /* the peer's kernel holds the connection; no HELLO from its process yet */
  MCP_OOB_UP = 2,       /* HELLO received: its process has called into mcpnet since */
  MCP_OOB_DEAD = 3
};
enum mcp_oob_phase mcp_oob_stream_phase(struct mcp_oob_stream *s);
/* "host pid N local rank R (addr)" of this process, for the same messages. */
const char *mcp_oob_self_name(char *buf, size_t len);
/* Waits here are measured in ms of mcp_clock_coarse_ms (clock.h; tests replace it). */
#define MCP_OOB_WAIT_INFO_MS 10000u /* the first word about a wait: INFO */
#define MCP_OOB_WAIT_WARN_MS 60000u /* then a WARN every this long */
/* Which notice a wait that began at since_ms is due at now_ms: 0 none, 1 INFO, 2 WARN.
 * *count is the caller's notices-said counter (0 at the start of the wait). A clock that
 * jumps gives one notice, not a burst. */
int mcp_oob_wait_notice(uint64_t since_ms, uint64_t now_ms, unsigned *count);

#endif
