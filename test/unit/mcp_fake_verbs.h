/*
 * mcp_fake_verbs.h - a fake verbs provider and a connected comm pair, for unit tests of
 * the data path without a VM.
 *
 * Why: the protocol (CTS ring, sequence numbers, immediates, records, replay) used to
 * be testable only on soft-RoCE in QEMU guests. Every verb mcpnet calls goes through
 * the mcp_ibv table or through the context's ops (post_send, post_recv, poll_cq), so
 * an in-memory model of a pair of connected RC QPs can stand behind them: an RDMA
 * write copies the bytes into the peer's registered memory (rkey and range checked),
 * a write with immediate consumes one of the peer's receive WRs and queues its
 * completion, a read copies back. Work is executed in the order it was posted, when a
 * CQ is polled (or fake_progress is called), so completion order is deterministic; a
 * QP can be held (its work waits) or broken (its work fails or lands unacknowledged).
 *
 * This header and mcp_fake_verbs.c are the only test code that knows how a comm is
 * laid out: tests build comms with the builders here and read them through the
 * accessors here, so a change of struct mcp_comm changes this one helper.
 */
#ifndef MCPNET_FAKE_VERBS_H
#define MCPNET_FAKE_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "fabric/devctx.h"
#include "conn/wire.h"
#include "net/net.h"

struct mcp_comm;
struct mcp_link;
struct mcp_oob_stream;
struct mcp_status_comm;

/* One posted send WR, as the fake saw it (for checks on what was posted). */
struct fake_post {
  int side;   /* FAKE_SEND_SIDE or FAKE_RECV_SIDE (or -1: a QP of neither) */
  int qp;     /* index of the QP in its comm, -1 for the flush QP */
  int member; /* a flush QP's member (QPs of the link: their member is qp % ndevs) */
  uint32_t qp_num;
  enum ibv_wr_opcode opcode;
  unsigned send_flags;
  uint32_t imm; /* host order */
  uint32_t len;
  uint64_t wr_id;
  uint64_t remote_addr;
};

enum { FAKE_SEND_SIDE = 0, FAKE_RECV_SIDE = 1 };

struct fake_pair_opts {
  int nqps;        /* QPs of the connection (default 1) */
  int max_inline;  /* the provider's inline limit (default 256) */
  int data_inline; /* MCPNET_INLINE_BYTES (default 64) */
  /* Physical devices (members) of each side's fused device (default 1 each): member k
   * of a side is a fake device of its own (context, PD, registrations), so a key of
   * another member is refused as a real adapter refuses it. With members, nqps is QPs
   * per member (NCCL_IB_QPS_PER_CONNECTION) and the pair has nqps x the larger count. */
  int ndevs[2];
  /* Each comm gets a slot in the process's status segment (status.h; the test acquires
   * the segment first), as conn's comm_new gives a real one: its counters go there. */
  int publish;
};

struct fake_pair {
  struct mcp_comm *send, *recv;                 /* pass these to mcp_net_isend / mcp_net_irecv */
  struct fake_side *side[2];                    /* member 0 of each side */
  struct fake_side *member[2][MCP_MAX_MEMBERS]; /* limits.h: a link's most */
  int ndevs[2];
  struct mcp_oob_stream *stub[2]; /* the stand-in streams the pair made (freed with it) */
};

/* Installs the fakes in mcp_ibv (once per program) and resets the fake's counters. */
void fake_verbs_install(void);

/* A connected send/receive comm pair over fake QPs, built as connect/accept build it
 * (rings, registrations and QPs through the verbs table, receive WRs posted). */
struct fake_pair *fake_pair_make(const struct fake_pair_opts *opts);
void fake_pair_free(struct fake_pair *p);
/* Copies the process's configuration into both comms' settings again (struct
 * mcp_link_cfg), as a comm made now would take it: after a test changed a field of
 * mcp_param_process() for a pair that already exists. */
void fake_pair_configure(struct fake_pair *p);

/* Registers a test buffer on one side's device through the registration cache. */
struct mcp_mr *fake_pair_reg(struct fake_pair *p, int side, void *buf, size_t len, int type);
/* The same through a DMA-BUF registration (the fake takes any fd). */
struct mcp_mr *fake_pair_reg_dmabuf(struct fake_pair *p, int side, void *buf, size_t len, int type);
void fake_pair_dereg(struct mcp_mr *mh);

/* Registers a buffer for a side's comm as regMr does: the cache's struct mcp_mr on a
 * one-member side, a set of one per member on a fused side. Deregister with
 * fake_pair_dereg_mh. */
void *fake_pair_reg_mh(struct fake_pair *p, int side, void *buf, size_t len, int type);
void fake_pair_dereg_mh(struct fake_pair *p, int side, void *mh);
/* Member k of a side's comm: the QP count of the link, the member QP qp is on, the peer's
 * member it lands on, and whether the flush QP of member k exists. */
int fake_comm_nqps(const struct mcp_comm *c);
int fake_comm_qp_member(const struct mcp_comm *c, int qp);
int fake_comm_qp_remote_member(const struct mcp_comm *c, int qp);
/* The comm's failover masks (link.h): its members whose port was up at its last rebuild,
 * and those its QPs are on (bit k: member k). */
int fake_comm_members_up(const struct mcp_comm *c);
int fake_comm_members_live(const struct mcp_comm *c);
/* Posted send WRs in the log on QPs of member k of a side (data, records, CTS, reads). */
int fake_count_posts_on_member(int side, int k, enum ibv_wr_opcode opcode);
/* Breaks / restores every QP of member k of a side (its port went down; came back). */
void fake_pair_break_member(struct fake_pair *p, int side, int k, int land);
/* Member k of a side stays down (1) or is back (0): moving one of its QPs to RTR fails
 * as an address that does not resolve (ETIMEDOUT), so a recovery cannot connect it. */
void fake_pair_member_down(struct fake_pair *p, int side, int k, int down);
/* The device description of member k of a side (to change what it supports). */
struct mcp_net_dev *fake_pair_member_info(struct fake_pair *p, int side, int k);
/* Corrupts the rkey table a fused receiver wrote for the sender (every member k >= 1 key
 * of every slot becomes member 0's), as a sender that used one rkey for all would. */
void fake_pair_smash_member_rkeys(struct fake_pair *p);

/* The fake device of a side, for tests of the registration cache. */
struct mcp_devctx *fake_pair_devctx(struct fake_pair *p, int side);
/* What a peer's NIC can write into our memory, written here as a hostile peer would:
 * element elem of the clear-to-send entry for seq in the sender's ring gets idx (idx >= 0)
 * and size (size >= 0); the sizes record of seq in the receiver's ring gets sizes[i]. */
void fake_pair_poke_cts(struct fake_pair *p, uint32_t seq, int elem, int idx, int64_t size);
void fake_pair_poke_record_size(struct fake_pair *p, uint32_t seq, int i, uint32_t size);

/* Work: fake_progress executes every posted WR of QPs that are not held (poll_cq calls
 * it); returns how many it executed. */
int fake_progress(void);
/* Holds (1) or releases (0) the work of QP qp of a side's comm. */
void fake_pair_hold(struct fake_pair *p, int side, int qp, int hold);
/* Breaks QP qp of a side (the link went down). land=0: its pending work never lands
 * and completes with errors; land=1: it lands at the peer but its acknowledgements are
 * lost (the sender sees errors). Receive WRs posted on it are flushed. */
void fake_pair_break(struct fake_pair *p, int side, int qp, int land);
/* Executes the first n pending WRs of a held QP now (a held QP's work lands in parts). */
void fake_pair_release_n(struct fake_pair *p, int side, int qp, int n);
/* Executes only the first nbytes of the payload of the first pending WR of a held QP:
 * the rest of that write has not arrived yet (no completion). The WR stays pending and
 * lands whole when released. */
void fake_pair_release_bytes(struct fake_pair *p, int side, int qp, uint32_t nbytes);
/* Starts both comms of a fresh pair at sequence number seq (wrap tests). */
void fake_pair_set_seq(struct fake_pair *p, uint32_t seq);
/* Breaks the receive comm's loopback flush QP (its port went down): its pending reads
 * complete with an error. */
void fake_pair_break_flush(struct fake_pair *p);
/* Holds (1) or releases (0) the work of the receive comm's flush QP. */
void fake_pair_hold_flush(struct fake_pair *p, int hold);
/* Queues a completion on a side's CQ as if its adapter had written it (a stale one of a
 * replaced QP, a signalled CTS write, ...). */
void fake_pair_inject_wc(struct fake_pair *p, int side, uint64_t wr_id, enum ibv_wc_status status,
                         enum ibv_wc_opcode opcode);
/* Every registration asked of the fake since the last reset (all sides; the first 256),
 * with the access flags it was given: what relaxed ordering applies to. */
struct fake_reg {
  void *addr;
  size_t len;
  unsigned access;
  int dmabuf;
};
int fake_regs(const struct fake_reg **log);
void fake_regs_reset(void);
/* A comm of a side's kind on that side's device whose rings, records and requests come
 * from xfer's own link allocation (mcp_xfer_link_ops.alloc, as connect and accept make
 * them), not the pair builder's; no QPs. fake_comm_release gives them back. */
struct mcp_comm *fake_comm_alloc(struct fake_pair *p, int side);
void fake_comm_release(struct mcp_comm *c);
/* Memory registrations the fake holds now (all sides, rings included). */
int fake_mrs_live(void);
/* The next registration fails with err (once). */
void fake_fail_next_reg(int err);
/* QPs the fake created and destroyed, all time. */
int fake_qps_created(void);
/* The CQ a fake QP was created with for its send queue. */
struct ibv_cq *fake_qp_send_cq(struct ibv_qp *qp);
int fake_qps_destroyed(void);
/* The next post_send fails with err (once). */
void fake_fail_next_post(int err);
/* The next n RTR transitions (ibv_modify_qp naming a destination QP) fail with err; 0
 * clears. Returns how many RTR transitions were tried since the last call. */
int fake_fail_next_rtr(int n, int err);

/* Simulated recovery: both comms re-create their QPs with a new epoch (the old QPs'
 * completions are drained and dropped, as mcp_conn_recover.c does), connect them, and
 * replay: the receiver writes its waiting CTS entries again, the sender completes what
 * the receiver's done table says arrived and writes the rest again. 0 on success. */
int fake_pair_recover(struct fake_pair *p);

/* What was posted so far (all sides), and resetting that log. */
int fake_posts(const struct fake_post **log);
void fake_posts_reset(void);
/* Counts in the log: CTS writes (RDMA writes from the receive side), data writes of the
 * send side (with or without immediate, not records), records (immediate with the
 * record flag). */
int fake_count_cts_writes(void);
int fake_count_data_writes(void);
int fake_count_records(void);
/* Receive completions the fake refused for want of a posted receive WR (RNR). */
int fake_rnr_count(void);
/* Send queue of QP qp of a side: its depth (max_send_wr), the most entries it held at
 * once (posted, not yet retired by a polled signalled completion), and the posts it
 * refused with ENOMEM for want of room. */
struct fake_sq_use {
  int depth, high, refused;
};
struct fake_sq_use fake_pair_sq_use(struct fake_pair *p, int side, int qp);

/* Observable state of a comm, for checks (through accessors, not fields). */
int fake_comm_error(const struct mcp_comm *c); /* ncclResult_t of a failed comm, 0 */
const char *fake_comm_errmsg(const struct mcp_comm *c);
uint32_t fake_comm_seq(const struct mcp_comm *c); /* send: next CTS; recv: next irecv */
int fake_comm_inflight(const struct mcp_comm *c); /* recv: receives not yet tested done */
int fake_req_seq(const void *request);            /* the sequence number of a request */
/* Flush reads lost with a flush QP and not yet posted again; whether the comm still
 * counts the flush QP as lost. */
int fake_comm_flush_reposts(const struct mcp_comm *c);
int fake_comm_flush_lost(const struct mcp_comm *c);
/* The peer closed its end of the out-of-band connection, and the comm's 100 ms liveness
 * check is due at its next wait (call again to make it due again). */
void fake_comm_peer_closed(struct mcp_comm *c);

/* A send comm in a recovery round's CONNECTING phase, as mcp_conn_recover.c leaves it
 * before the QP walk: round 1, deadline 6 s after now_ns, one QP from mcp_ibv.create_qp
 * (the caller's verbs), a plain CQ on ctx, on the caller's devctx and stream. It holds
 * a reference on the library's comm count as a connected comm does; mcp_comm_destroy
 * frees it. For tests of the recovery's threads with their own fake verbs. */
struct mcp_comm *fake_comm_connecting(struct mcp_devctx *dc, struct ibv_context *ctx,
                                      struct mcp_oob_stream *stream, uint64_t now_ns);
struct ibv_qp *fake_comm_qp(const struct mcp_comm *c, int i);
int fake_comm_rec_phase(const struct mcp_comm *c);
uint32_t fake_comm_rec_round(const struct mcp_comm *c);
void fake_comm_set_rec_phase(struct mcp_comm *c, int phase);
/* Lets go of the comm's stream (a fake the test frees; close then sends nothing). */
void fake_comm_detach_stream(struct mcp_comm *c);

/* Real out-of-band streams for the pair's comms (the test opens and closes them), in
 * place of the stand-ins: the recovery's RECOVER frames then travel between them. */
void fake_pair_attach_streams(struct fake_pair *p, struct mcp_oob_stream *send_stream,
                              struct mcp_oob_stream *recv_stream);
/* The endpoint a comm would publish (CONN_REQ, CONN_ACK, RECOVER). */
void fake_comm_endpoint(struct mcp_comm *c, struct mcp_wire_endpoint *ep);
/* The comm's 100 ms liveness check is due at its next wait. */
void fake_comm_check_due(struct mcp_comm *c);
/* Recoveries the comm completed. */
int fake_comm_recoveries(const struct mcp_comm *c);
/* The comm's status slot (NULL unless the pair was made with publish), and its link (for
 * conn's functions that publish). */
struct mcp_status_comm *fake_comm_status(struct mcp_comm *c);
struct mcp_link *fake_comm_link(struct mcp_comm *c);

/* The WARNs the library says, for tests that check them: fake_warn_capture is a logger
 * (mcp_log_set_logger) that counts WARNs in fake_warns and keeps the latest text. */
extern int fake_warns;
extern char fake_lastwarn[4096];
void fake_warn_capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Test data: fake_pattern fills n bytes from a seed; fake_same is 1 when b holds exactly
 * that pattern. fake_wait_done calls mcp_net_test up to polls times (a count, never a
 * time): 1 when the request is done (sizes filled), 0 if it is not, -1 on an error. */
void fake_pattern(unsigned char *b, size_t n, unsigned seed);
int fake_same(const unsigned char *b, size_t n, unsigned seed);
int fake_wait_done(void *req, int *sizes, int polls);

#endif
