/*
 * comm.h - send and receive comms, their requests, and the slot protocol.
 *
 * The data path is receiver-driven. For every irecv the receiver writes a
 * clear-to-send (CTS) entry, one 32-byte element per buffer of the (grouped) receive,
 * into the sender's CTS ring at slot seq % MCP_SLOTS; each element carries the sequence
 * number, so the sender knows it is whole and current. isend finds its element by tag
 * and RDMA-writes the data straight into the receiver's buffer; the last write on each
 * QP used carries an immediate {seq, completions to expect, record flag}. The receiver
 * counts those completions per slot and keeps a completion record per slot (sizes,
 * seq): what a recovery replays from. Grouped receives (n > 1) ride one QP and end
 * with a write of the sizes record itself; a single receive may be striped over all
 * QPs, its size being the sum of the byte counts. See docs/architecture.md.
 */
#ifndef MCPNET_COMM_H
#define MCPNET_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "mcpnet/devctx.h"
#include "mcpnet/fabric_counters.h"
#include "mcpnet/net.h"
#include "mcpnet/oob.h"
#include "mcpnet/wire.h"

#define MCP_SLOTS 64                      /* CTS ring entries; >= NCCL_NET_MAX_REQUESTS */
/* QPs per connection: NCCL's own bound (NCCL_IB_MAX_QPS), so any NCCL_IB_QPS_PER_CONNECTION
 * NCCL runs runs here too. The arrays below cost 24 bytes per QP in every comm. */
#define MCP_MAX_QPS 128
#define MCP_SEND_REQS (NCCL_NET_MAX_REQUESTS * MCP_MAX_RECVS)
#define MCP_RECV_REQS (MCP_SLOTS + NCCL_NET_MAX_REQUESTS) /* slots plus flushes */
#define MCP_STRIPE_MIN (64 * 1024)        /* smallest chunk worth a QP of its own */
#define MCP_CQ_BATCH 16
/* Receive WRs per QP: every slot can have its immediate in flight while up to a batch of
 * consumed WRs waits to be reposted. */
#define MCP_RQ_DEPTH (MCP_SLOTS + MCP_CQ_BATCH)

/* One element of a CTS entry: 32 bytes, written by the receiver's NIC. */
struct mcp_cts_elem {
  uint64_t addr;
  uint64_t size;
  uint32_t rkey;
  int32_t tag;
  uint16_t n;     /* buffers in this receive */
  uint16_t idx;   /* this element's position */
  uint32_t seq;   /* written with the rest; equal to the expected seq when current */
};
_Static_assert(sizeof(struct mcp_cts_elem) == 32, "CTS element is 32 bytes on the wire");

struct mcp_cts_slot {
  struct mcp_cts_elem e[MCP_MAX_RECVS];
};

/* The completion record of a slot (grouped receives: written by the sender). */
struct mcp_record {
  uint32_t seq;
  uint32_t n;
  uint32_t sizes[MCP_MAX_RECVS];
  uint8_t pad[24];
};
_Static_assert(sizeof(struct mcp_record) == 64, "record is one cache line");

/* Immediate data: seq low 16 bits | completions expected << 16 | record flag << 24. */
#define MCP_IMM(seq, k, rec) (((uint32_t)(seq) & 0xffffu) | ((uint32_t)(k) << 16) | ((uint32_t)(rec) << 24))
#define MCP_IMM_SEQ(imm) ((imm) & 0xffffu)
#define MCP_IMM_K(imm) (((imm) >> 16) & 0xffu)
#define MCP_IMM_REC(imm) (((imm) >> 24) & 1u)

enum mcp_req_kind { MCP_REQ_SEND = 1, MCP_REQ_RECV = 2, MCP_REQ_FLUSH = 3 };

/* wr_id: kind in the top byte, the comm's QP epoch in the next, then an index. A
 * recovery bumps the epoch, so completions of the QPs it replaced are recognised and
 * dropped (their work is replayed). */
#define MCP_WR(kind, epoch, idx) (((uint64_t)(kind) << 56) | ((uint64_t)(uint8_t)(epoch) << 48) | (uint64_t)(idx))
#define MCP_WR_KIND(wr) ((unsigned)((wr) >> 56))
#define MCP_WR_EPOCH(wr) ((uint8_t)((wr) >> 48))
#define MCP_WR_IDX(wr) ((uint32_t)(wr))
enum { MCP_WR_SEND = 1, MCP_WR_GROUP = 2, MCP_WR_CTS = 3, MCP_WR_RECV = 4, MCP_WR_FLUSH = 5 };
/* What messages call each kind: one table, so that every message names a WR alike.
 * Any other value reads as a data write, as the messages always did. */
static inline const char *mcp_wr_kind_name(unsigned kind)
{
  static const char *const names[] = {
      [MCP_WR_SEND] = "data write",         [MCP_WR_GROUP] = "data write",
      [MCP_WR_CTS] = "clear-to-send write", [MCP_WR_RECV] = "receive",
      [MCP_WR_FLUSH] = "flush read",
  };

  return kind < sizeof(names) / sizeof(names[0]) && names[kind] != NULL ? names[kind] : "data write";
}

struct mcp_comm;

struct mcp_request {
  uint8_t kind;       /* enum mcp_req_kind */
  uint8_t in_use;
  uint8_t done;
  int pending;        /* completions still expected */
  uint32_t seq;
  int n;
  int size;           /* send: bytes */
  int sizes[MCP_MAX_RECVS];
  int16_t group_next;  /* grouped sends: the next request completed by the same write */
  uint16_t index;
  uint8_t elem;        /* send: the CTS element it matched */
  uint8_t repost;      /* flush: its read was lost with the flush QP; post it again */
  void *data;          /* send: what a recovery replays; flush: the buffer read */
  const struct mcp_mr *mh;
  struct mcp_comm *comm;
};

/* Per-slot receive state. */
struct mcp_recv_slot {
  struct mcp_request *req;
  uint32_t seq;
  int expected;       /* 0 until the first immediate says */
  int got;
  uint64_t bytes;
};

/* Per-slot send state for grouped receives: which elements were matched so far. */
struct mcp_send_slot {
  uint32_t seq;
  int n, matched;
  uint8_t used[MCP_MAX_RECVS];
  struct mcp_request *reqs[MCP_MAX_RECVS];
};

enum { MCP_QP_THREAD_NONE = 0, MCP_QP_THREAD_RUNNING, MCP_QP_THREAD_OK, MCP_QP_THREAD_FAILED };

/* One RTR/RTS walk on a detached thread (mcp_conn_qp.c). ibv_modify_qp to RTR resolves the
 * peer's neighbour on RoCE and can block while the link is down, so nobody ever joins
 * or waits for it: the walk works on its own copy of what it needs, holds a reference
 * on the comm (its CQ must outlive the QPs), and when the comm moves on without it (a
 * new recovery round, close) it takes the QPs along and destroys them when it returns. */
struct mcp_qp_job;

/* Recovery phases (mcp_conn_recover.c). */
enum { MCP_REC_NONE = 0, MCP_REC_WAIT_PEER, MCP_REC_CONNECTING, MCP_REC_WAIT_READY,
       MCP_REC_VERDICT /* a failed completion waits (200 ms at most) to learn whether the peer died */ };

struct mcp_recovery {
  int phase;
  uint32_t round;              /* rounds started on this connection */
  uint64_t start_ns, deadline_ns, next_try_ns;
  uint64_t next_gid_ns;        /* WAIT_PEER: when to look for our GID again */
  int peer_ready;              /* the peer's CONN_READY of this round arrived */
  int count;                   /* recoveries completed */
  char cause[256];
  struct mcp_wire_recover peer;
  struct ibv_wc verdict_wc;    /* MCP_REC_VERDICT: the completion that failed */
  uint64_t verdict_ns;         /* ... and when it fails the comm if the peer still lives */
};

enum mcp_comm_kind { MCP_COMM_SEND = 1, MCP_COMM_RECV = 2, MCP_COMM_LISTEN = 3 };

struct mcp_comm {
  int kind;
  int dev;
  struct mcp_devctx *dc;
  struct mcp_oob_stream *stream;
  int traffic_class;
  int sl, tc;
  int mtu;                         /* negotiated ibv_mtu */
  int nqps;
  struct ibv_cq *cq;
  struct ibv_qp *qp[MCP_MAX_QPS];
  uint32_t psn[MCP_MAX_QPS];
  int max_inline;
  int data_inline;                 /* data writes up to this size go inline: min(max_inline, MCPNET_INLINE_BYTES) */
  int cts_batch;                   /* MCPNET_CTS_BATCH, read once per comm */
  struct mcp_wire_endpoint local, remote;
  char peer_name[160];

  /* Connection setup (connect or accept); RTR/RTS runs on a job's thread (may block). */
  int state;
  struct mcp_qp_job *qp_job;        /* the walk in progress or not yet collected; NULL: none */
  atomic_int refs;                  /* holders besides the owner (qp jobs): freed when -1 */
  uint64_t listen_token;
  uint64_t deadline_ns;             /* local work only (the setup thread); a peer is waited for */
  uint64_t wait_since_ms;           /* a wait on the peer: when it began (mcp_clock_coarse_ms) */
  unsigned wait_notices;            /* INFO/WARNs said about that wait (mcp_oob_wait_notice) */

  /* Fatal error: every later call fails with it. */
  int error;
  char errmsg[512];

  /* The ring the peer writes (send: CTS ring; recv: records) and its MR. */
  union {
    void *ring;
    struct mcp_cts_slot *ring_elems;  /* send */
    struct mcp_record *ring_records;  /* recv */
  };
  size_t ring_bytes;
  struct ibv_mr *ring_mr;
  uint64_t remote_ring;
  uint32_t remote_rkey;

  uint32_t seq;                    /* send: next CTS to consume; recv: next irecv */
  int inflight;                    /* recv: slots in use */
  int free_top;
  uint16_t free_list[MCP_SEND_REQS];
  struct mcp_request *reqs;        /* pool: MCP_SEND_REQS or MCP_RECV_REQS */
  int nreqs;

  /* Send side. */
  struct mcp_send_slot *sslots;    /* MCP_SLOTS */
  int next_qp;
  int32_t tag_refused;             /* the last isend whose tag had no free buffer in the head */
  uint32_t tag_refused_seq;        /* receive, and that receive's seq (0: none; seqs start at 1) */

  /* Receive side. */
  struct mcp_recv_slot *rslots;    /* MCP_SLOTS */
  struct mcp_cts_slot *staging;    /* local copy of CTS entries when too big to inline */
  struct ibv_mr *staging_mr;
  int cts_unsignaled;
  int cts_pending;                 /* staged CTS entries not yet written (the newest seqs) */
  uint32_t cts_published;          /* CTS entries written to the peer, all time */
  uint32_t recv_landed;            /* receives whose data arrived, all time */
  int recv_posted[MCP_MAX_QPS];
  int recv_consumed[MCP_MAX_QPS];

  /* Send side: completion records of grouped sends, when too big to inline. */
  struct mcp_record *records;
  struct ibv_mr *records_mr;

  /* Flush (loopback RDMA read) for GPU buffers; created on first use, and again when
   * its port failed it (mcp_xfer_flush_retry): a new QP, a new generation in wr_id. */
  struct ibv_qp *flush_qp;
  uint64_t *flush_buf;
  struct ibv_mr *flush_mr;
  uint8_t flush_gen;
  int flush_reposts;                /* reads waiting to be posted on a new flush QP */
  uint64_t flush_lost_ns;           /* when reads were first lost; 0: the flush QP works */
  uint64_t flush_next_try_ns;

  uint64_t next_alive_check_ns;

  /* Recovery: QPs are re-created with the same depths and a new epoch. */
  uint8_t epoch;
  int sq_depth, rq_depth;
  unsigned port_err_seen, gid_seen; /* the devctx event generations this comm has handled */
  atomic_int qp_event;              /* an async event on one of its QPs (type + 1), 0: none */
  int sgid_index;                  /* our GID's index, looked up again by recovery */
  struct mcp_recovery rec;

  /* Watchdog (mcp_xfer_health.c): calls that made progress (a post or a completion;
   * counted, never timed, on the data path) and the stall being watched. */
  uint64_t wd_progress, wd_seen;
  uint64_t wd_since_ns, wd_last_ns;
  int wd_warned;

  /* The port's error counters when the comm connected, for a failed completion's WARN. */
  int cnt_base_ok;
  struct mcp_cnt_snapshot cnt_base;
};

struct mcp_listen_comm {
  int kind;                 /* MCP_COMM_LISTEN */
  int dev;
  int traffic_class;
  struct mcp_oob_listener *listener;
  struct mcp_comm *accepting;
};

/* The per-communicator context init returns (mcp_net.c); NULL for the v8-v10 shims. */
struct mcp_ctx;
int mcp_ctx_traffic_class(const void *ctx);

/* The process-wide state the comms use (mcp_net.c). */
const struct mcp_fabric *mcp_net_fabric(void);
const struct mcp_config *mcp_net_config(void);
void mcp_net_comm_ref(void);
void mcp_net_comm_unref(void);

/* Queue pair bring-up (mcp_conn_qp.c). */
int mcp_qp_create_all(struct mcp_comm *c, int nqps, int sq_depth, int rq_depth);
int mcp_qp_create_qps(struct mcp_comm *c);
/* RTR/RTS of every QP toward c->remote on a short-lived thread (may block on address
 * resolution); poll returns 0 while running, 1 when at RTS, -1 on failure. */
int mcp_qp_connect_start(struct mcp_comm *c);
int mcp_qp_connect_poll(struct mcp_comm *c);
/* Lets go of the comm's walk without waiting: one still running keeps the QPs it walks
 * (c->qp[] entries become NULL) and destroys them when it returns; 1 if it was running. */
int mcp_qp_connect_abandon(struct mcp_comm *c);
int mcp_qp_to_rts(struct mcp_comm *c, struct ibv_qp *qp, uint32_t my_psn, uint32_t dqpn,
                  uint32_t dpsn, const uint8_t *dgid, uint16_t dlid);
int mcp_qp_post_recvs(struct mcp_comm *c, int qp, int count);
/* NCCL's close: tells the peer, lets go of a running walk and drops the owner's
 * reference; the verbs resources go with the last reference. Never waits. */
void mcp_comm_destroy(struct mcp_comm *c);
void mcp_comm_fail(struct mcp_comm *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void mcp_comm_fill_endpoint(struct mcp_comm *c);
uint32_t mcp_version_number(void);

/* Recovery (mcp_conn_recover.c). recoverable says whether a completion status can be
 * survived by re-creating the QPs; start begins a round (callers check that
 * MCPNET_RECOVERY_TIMEOUT > 0 and that the peer's connection is alive); progress drives
 * it from every call on the comm and returns 0 while it runs, 1 once the comm works
 * again, -1 when it failed; poll_stream handles the peer's RECOVER frames outside a call
 * that is already recovering. */
int mcp_recover_status_recoverable(int wc_status);
void mcp_recover_start(struct mcp_comm *c, const char *cause);
int mcp_recover_progress(struct mcp_comm *c);
void mcp_recover_poll_stream(struct mcp_comm *c);
/* Async events (mcp_devctx_poll_events notes a QP's event for its comm): from the 100 ms
 * liveness check, starts a recovery for a port error, a QP event or a GID that moved. */
void mcp_recover_check_events(struct mcp_comm *c);
/* A failed completion that may mean the peer process died: isend/irecv/test route to
 * mcp_recover_progress, which fails the comm as soon as the out-of-band connection says
 * the peer is gone, or with the completion's diagnosis after 200 ms (mcp_xfer_fail_wc). */
void mcp_recover_await_verdict(struct mcp_comm *c, const struct ibv_wc *wc);
void mcp_xfer_fail_wc(struct mcp_comm *c, const struct ibv_wc *wc, int peer_gone);

/* Replay after recovery (mcp_xfer_send.c, mcp_xfer_recv.c). */
int mcp_xfer_send_replay(struct mcp_comm *c, const uint32_t *done);
int mcp_xfer_recv_replay(struct mcp_comm *c);
void mcp_xfer_recv_done_table(const struct mcp_comm *c, uint32_t *done);
/* A receive's data arrived; may write held clear-to-send entries. -1: comm failed. */
int mcp_xfer_recv_landed(struct mcp_comm *c);
/* The flush QP failed a read (its port went down): every read in flight on it is lost.
 * flush_lost drops the QP and marks them; flush_retry, from test, makes a new QP and
 * posts them again, at most every 100 ms, and fails the comm once
 * MCPNET_RECOVERY_TIMEOUT has passed since the loss. */
void mcp_xfer_flush_lost(struct mcp_comm *c, uint64_t now_ns);
int mcp_xfer_flush_retry(struct mcp_comm *c, uint64_t now_ns);

/* Requests (mcp_xfer_req.c). */
int mcp_req_pool_init(struct mcp_comm *c, int n, int kind);
struct mcp_request *mcp_req_get(struct mcp_comm *c);
void mcp_req_put(struct mcp_request *r);

/* Data path (mcp_xfer_send.c, mcp_xfer_recv.c, mcp_xfer_poll.c). */
int mcp_xfer_poll(struct mcp_comm *c);
int mcp_xfer_check_alive(struct mcp_comm *c);

/* Health (mcp_xfer_health.c). counters_base snapshots the port's error counters (the
 * setup thread calls it); wc_diagnose writes the port state, what moved since and the
 * likely cause of a failed completion; watchdog runs from the 100 ms liveness check and
 * returns 1 when it reported a stall. */
void mcp_xfer_counters_base(struct mcp_comm *c);
enum mcp_cnt_cause mcp_xfer_wc_diagnose(struct mcp_comm *c, int wc_status, char *buf, size_t len);
int mcp_xfer_watchdog(struct mcp_comm *c, uint64_t now_ns, int seconds);
size_t mcp_xfer_watchdog_describe(const struct mcp_comm *c, char *buf, size_t len);

#endif
