/*
 * comm.h - send and receive comms, their requests, and the slot protocol (xfer's header;
 * the link they embed, and conn's functions, are in link.h).
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
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "core/limits.h"
#include "core/status.h"
#include "fabric/devctx.h"
#include "fabric/fabric_counters.h"
#include "fabric/fabric_process.h"
#include "conn/link.h"
#include "conn/oob.h"
#include "conn/wire.h"
#include "nccl/net_common.h"

/* Send requests: NCCL keeps at most NCCL_STEPS (8) sends outstanding per rank and
 * connection, and a comm carries NCCL_NET_MAX_REQUESTS receives, so 32 cover every
 * receive in flight with one buffer. Beyond, isend returns a NULL request and NCCL calls
 * again (legal; 32 x maxRecvs is what a sender must accept, not hold at once): a pool
 * of at least MCP_MAX_RECVS always lets the head group complete. The send queue is
 * sized by it (mcp_xfer_link.c), so this is most of a send comm's memory. */
#define MCP_SEND_REQS NCCL_NET_MAX_REQUESTS
#define MCP_RECV_REQS (MCP_RECV_INFLIGHT + NCCL_NET_MAX_REQUESTS) /* receives in flight plus flushes */
_Static_assert(MCP_SEND_REQS >= MCP_MAX_RECVS, "a group's sends always find requests");
_Static_assert(MCP_RECV_INFLIGHT <= MCP_SLOTS, "receives in flight fit the ring");
#define MCP_STRIPE_MIN (64 * 1024) /* smallest chunk worth a QP of its own */
/* A send's WRs on one QP: a request's at most MCP_SEND_REQS * 3 / 2 (mcp_xfer_link.c);
 * a landing is a request's one WR like any other. */
#define MCP_SEND_SQ_DEPTH (MCP_SEND_REQS + MCP_SEND_REQS / 2)
/* The CQ holds every WR of the send queue and the one receive WR (a QP in error flushes
 * all, unsignalled ones too): rxe rounds depth + 1 up to a power of two, so 63 keeps it
 * at 64 entries, 64 would double it (issue 16's memory per pair). */
_Static_assert(MCP_SEND_SQ_DEPTH + 1 <= 63, "a send comm's CQ stays at 64 entries in rxe");

/* One element of a CTS entry: 32 bytes, written by the receiver's NIC. */
struct mcp_cts_elem {
  uint64_t addr;
  uint64_t size;
  uint32_t rkey;
  int32_t tag;
  uint16_t n;    /* buffers in this receive */
  uint8_t idx;   /* this element's position */
  uint8_t flags; /* MCP_CTS_LAND; was idx's high byte, always 0 (read only for a fused receiver) */
  uint32_t seq;  /* written with the rest; equal to the expected seq when current */
};
_Static_assert(sizeof(struct mcp_cts_elem) == 32, "CTS element is 32 bytes on the wire");

/* The receive may complete by a landing (struct mcp_landing): one buffer, in host memory
 * the receiver's CPU may write, a receiver of one member and a connection of one QP
 * (mcp_xfer_land_setup). A sender that does not
 * know the flag never reads it: it reads idx only from a fused receiver, which never
 * sets it. */
#define MCP_CTS_LAND 0x01

struct mcp_cts_slot {
  struct mcp_cts_elem e[MCP_MAX_RECVS];
};

/* A fused receiver's buffers have one rkey per member (each member its own protection
 * domain). The element keeps member 0's; the others travel in a table per slot, which the
 * receiver writes into the sender's ring area after the CTS slots, on QP 0 just before
 * the entries themselves, so an element whose seq is current has its table in place. A
 * slot's table is MCP_MAX_RECVS rows of one rkey per receiver member (buffer i's key on
 * member k at [i * ndevs + k]), so it is as large as the receiver's members need: 64
 * bytes for 2 members, 256 for 8. The sender knows the receiver's member count from the
 * listener's handle before it allocates its ring (mcp_xfer_link.c), and a one-member
 * receiver has no table at all, nor room for one in the sender's ring. */
#define MCP_CTS_RKEYS_OFFSET (MCP_SLOTS * sizeof(struct mcp_cts_slot))
static inline size_t mcp_cts_rkeys_bytes(int ndevs)
{
  return ndevs > 1 ? (size_t)MCP_MAX_RECVS * (size_t)ndevs * sizeof(uint32_t) : 0;
}
/* Slot slot's table in a ring (the sender's) or the staging copy (the receiver's). */
static inline uint32_t *mcp_cts_rkeys_of(void *ring, int ndevs, int slot)
{
  return (uint32_t *)(void *)((char *)ring + MCP_CTS_RKEYS_OFFSET +
                              (size_t)slot * mcp_cts_rkeys_bytes(ndevs));
}

/* What regMr hands NCCL for a fused comm: one registration per member (the cache's
 * entries of each member's device), and their keys, so the data path reads a key with no
 * indirection. A one-member comm hands out the cache's struct mcp_mr itself, as before
 * fusion. Both begin with struct mcp_mh_head (devctx.h): member 0's keys, whether the CPU
 * may read the memory, and which of the two the handle is, read from the handle alone
 * (deregMr has no comm to ask: NCCL may have closed it first). */
struct mcp_mr_set {
  struct mcp_mh_head head; /* first, as in struct mcp_mr; head.set = 1 */
  int n;
  int type, dmabuf;
  struct mcp_mr *mr[MCP_LINK_MAX_DEVS];
  uint32_t lkey[MCP_LINK_MAX_DEVS], rkey[MCP_LINK_MAX_DEVS];
};

static inline const struct mcp_mh_head *mcp_mh_head_of(const void *mh) { return mh; }

static inline int mcp_mh_is_set(const void *mh) { return mcp_mh_head_of(mh)->set; }

/* The handle's keys on member k; a one-device handle answers with its own whatever k is,
 * as before the head (its struct has no table to index). */
static inline uint32_t mcp_mh_lkey(const void *mh, int k)
{
  return k == 0 || !mcp_mh_is_set(mh) ? mcp_mh_head_of(mh)->lkey : ((const struct mcp_mr_set *)mh)->lkey[k];
}

static inline uint32_t mcp_mh_rkey(const void *mh, int k)
{
  return k == 0 || !mcp_mh_is_set(mh) ? mcp_mh_head_of(mh)->rkey : ((const struct mcp_mr_set *)mh)->rkey[k];
}

static inline int mcp_mh_type(const void *mh)
{
  return mcp_mh_is_set(mh) ? ((const struct mcp_mr_set *)mh)->type : ((const struct mcp_mr *)mh)->type;
}

/* Whether the CPU may read the handle's memory (an inline send is a CPU copy): host memory
 * registered without DMA-BUF only; never GPU memory. The one rule for every inline write,
 * decided when the handle was made. */
static inline int mcp_mh_cpu_readable(const void *mh) { return mcp_mh_head_of(mh)->cpu_readable; }

/* The completion record of a slot (grouped receives: written by the sender). */
struct mcp_record {
  uint32_t seq;
  uint32_t n;
  uint32_t sizes[MCP_MAX_RECVS];
  uint8_t pad[24];
};
_Static_assert(sizeof(struct mcp_record) == 64, "record is one cache line");

/* A landing: a small message from host memory to host memory, written by one inline
 * RDMA write (no immediate, no receive WQE, no completion at the receiver) into the slot's
 * line of the receiver's record ring, data first and ending at the trailer; the
 * receiver's test sees the trailer's seq and copies the data to the user's buffer with
 * the CPU (host memory only). The write is one aligned 64-byte line written in address
 * order, the seq last, as a NIC places a single packet (and rxe copies it). A slot's
 * line is otherwise a grouped receive's record, whose trailer bytes are zero padding;
 * irecv writes a seq no landing can carry (~seq) before it advertises the slot. The
 * sender keeps the same line in its own records (slot for slot), which is what a
 * recovery writes again when the receiver does not have it. The sender's request is
 * done when the write's completion says it was acknowledged, as any send's. */
#define MCP_LAND_TRAILER 56 /* the trailer's offset in the line: data is at most this long */
struct mcp_landing {
  uint8_t data[MCP_LAND_TRAILER]; /* the message's bytes end here: [56 - size, 56) */
  uint32_t size;
  uint32_t seq; /* written last */
};
_Static_assert(sizeof(struct mcp_landing) == sizeof(struct mcp_record), "a landing is a record's line");
/* Slot `slot`'s line of a record ring (the receiver's, or the sender's copy of it) as a
 * landing. */
static inline struct mcp_landing *mcp_landing_of(struct mcp_record *ring, int slot)
{
  return (struct mcp_landing *)(void *)&ring[slot];
}
/* Whether seq's landing is in its line: the trailer's seq, which the write puts there last. */
static inline int mcp_landing_arrived(const struct mcp_landing *ld, uint32_t seq)
{
  return __atomic_load_n(&ld->seq, __ATOMIC_ACQUIRE) == seq;
}

/* Immediate data: seq low 16 bits | completions expected << 16 | record flag << 24. */
#define MCP_IMM(seq, k, rec) (((uint32_t)(seq)&0xffffu) | ((uint32_t)(k) << 16) | ((uint32_t)(rec) << 24))
#define MCP_IMM_SEQ(imm) ((imm)&0xffffu)
#define MCP_IMM_K(imm) (((imm) >> 16) & 0xffu)
#define MCP_IMM_REC(imm) (((imm) >> 24) & 1u)

enum mcp_req_kind { MCP_REQ_SEND = 1, MCP_REQ_RECV = 2, MCP_REQ_FLUSH = 3, MCP_REQ_PROF = 4 };

struct mcp_comm;

struct mcp_request {
  uint8_t kind; /* enum mcp_req_kind */
  uint8_t in_use;
  uint8_t done;
  int pending; /* completions still expected */
  uint32_t seq;
  int n;
  int size; /* send: bytes; receive with land: the buffer's size */
  int sizes[MCP_MAX_RECVS];
  int16_t group_next; /* grouped sends: the next request completed by the same write */
  uint16_t index;
  uint8_t elem;   /* send: the CTS element it matched */
  uint8_t repost; /* flush: its read was lost with the flush QP; post it again */
  uint8_t land;   /* receive: advertised with MCP_CTS_LAND (its slot's line may complete it) */
  void *data;     /* send: what a recovery replays; flush: the buffer read; receive: a landing's buffer */
  const void *mh; /* struct mcp_mr, or struct mcp_mr_set on a fused comm (mcp_mh_*) */
  struct mcp_comm *comm;
};

/* Per-slot receive state. */
struct mcp_recv_slot {
  struct mcp_request *req;
  uint32_t seq;
  int expected; /* 0 until the first immediate says */
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

/* A send or receive comm: the link (conn) and the send-side or receive-side state xfer
 * owns (CTS ring, slots, request pool, records, flush, watchdog). */
struct mcp_comm {
  struct mcp_link link; /* first: its kind is the comm's */
  int data_inline;      /* data writes up to this size go inline: min(max_inline, MCPNET_INLINE_BYTES) */
  /* The data path's counters for mcpnet-top: the comm's status slot's, or cnt_local when
   * it has none (status.h; plain stores, one per post and per completion tested). */
  struct mcp_status_count *cnt;

  /* The ring the peer writes (send: CTS ring; recv: records) and its MR. */
  union {
    void *ring;
    struct mcp_cts_slot *ring_elems; /* send */
    struct mcp_record *ring_records; /* recv */
  };
  size_t ring_bytes;
  struct ibv_mr *ring_mr;
  struct ibv_mr *ring_mrs[MCP_LINK_MAX_DEVS]; /* the ring on member k ([0] is ring_mr) */
  /* The receiver's member count its rkey tables are laid out for (mcp_cts_rkeys_bytes):
   * fixed when the ring is made, whatever later happens to the link's members. */
  int cts_rkeys_n;
  uint64_t remote_ring;
  uint32_t remote_rkey;
  uint32_t remote_rkeys[MCP_LINK_MAX_DEVS]; /* the peer's ring on its member k ([0] = remote_rkey) */

  uint32_t seq; /* send: next CTS to consume; recv: next irecv */
  int inflight; /* recv: slots in use */
  int free_top;
  uint16_t free_list[MCP_SEND_REQS > MCP_RECV_REQS ? MCP_SEND_REQS : MCP_RECV_REQS];
  struct mcp_request *reqs; /* pool: MCP_SEND_REQS or MCP_RECV_REQS */
  int nreqs;

  /* Send side. */
  struct mcp_send_slot *sslots; /* MCP_SLOTS */
  int next_qp;
  /* Landings (struct mcp_landing), on QP 0: the largest message that lands (-1: none). */
  int land_max;
  /* Receive side: whether receives are advertised for landing (one member, and landings
   * not switched off), and how many completed by one since the CQ was last polled. */
  int land_recv;
  int land_unpolled;
  int32_t tag_refused;      /* the last isend whose tag had no free buffer in the head */
  uint32_t tag_refused_seq; /* receive, and that receive's seq (0: none; seqs start at 1) */

  /* Receive side. */
  struct mcp_recv_slot *rslots; /* MCP_SLOTS */
  struct mcp_cts_slot *staging; /* local copy of CTS entries when too big to inline */
  struct ibv_mr *staging_mr;
  struct ibv_mr *staging_mrs[MCP_LINK_MAX_DEVS]; /* a fused comm's, on member k ([0] is staging_mr) */
  /* The clear-to-send's keys on QP 0: the staging on the member the QP is on, the peer's
   * ring on the member it reaches (members_moved sets them when failover moves it). */
  uint32_t cts_lkey, cts_rkey;
  int cts_unsignaled;

  /* Send side: completion records of grouped sends, when too big to inline. */
  struct mcp_record *records;
  struct ibv_mr *records_mr;
  struct ibv_mr *records_mrs[MCP_LINK_MAX_DEVS]; /* on member k ([0] is records_mr) */

  /* Flush (loopback RDMA read) for GPU buffers; created on first use, and again when
   * its port failed it (mcp_xfer_flush_retry): a new QP, a new generation in wr_id. */
  struct ibv_qp *flush_qp;
  uint64_t *flush_buf;
  struct ibv_mr *flush_mr;
  /* A fused comm reads through every member (data may have landed on any): members
   * k >= 1 have their own loopback QP and buffer registration; [0] is unused. */
  struct ibv_qp *flush_qps[MCP_LINK_MAX_DEVS];
  struct ibv_mr *flush_mrs[MCP_LINK_MAX_DEVS];
  uint8_t flush_gen;
  int flush_reposts;      /* reads waiting to be posted on a new flush QP */
  uint64_t flush_lost_ns; /* when reads were first lost; 0: the flush QP works */
  uint64_t flush_next_try_ns;

  uint64_t next_alive_check_ns;

  /* Watchdog (mcp_xfer_health.c): calls that made progress (a post or a completion;
   * counted, never timed, on the data path) and the stall being watched. */
  uint64_t wd_progress, wd_seen;
  uint64_t wd_since_ns, wd_last_ns;
  int wd_warned;

  struct mcp_status_count cnt_local; /* cnt without a status slot */
  uint64_t st_wait_ms;               /* when the slot's wait was last described */

  /* NCCL's profiler (mcp_xfer_prof.c): what NCCL holds for a request it profiles, one per
   * request of the pool, made on the first; whether its profiler takes our events
   * (PROF_* there); the parent handle of the receive a flush that comes next belongs to. */
  struct mcp_prof_req *prof_reqs;
  int prof_mode, prof_count;                /* enum mcp_prof_mode; starts no profiler took in a row */
  uint64_t prof_retry_ns;                   /* PROF_OFF: when the liveness check lets it ask again */
  void *prof_flush_parent, *prof_flush_key; /* key: that receive's first buffer */
};

/* A request NCCL's profiler follows: NCCL holds this instead of the request itself.
 * Its head is a request no longer in use, so test sends it down its cold path (never
 * taken by a request nobody profiles), which hands it here. Per parent handle, at most
 * MCP_PROF_EVENTS events (what NCCL's example profiler keeps per step). */
#define MCP_PROF_EVENTS 8
struct mcp_prof_req {
  struct mcp_request head; /* kind MCP_REQ_PROF, in_use 0 */
  struct mcp_request *inner;
  void *parent, *key; /* NCCL's parent handle; a receive's first buffer */
  int nev;
  void *ev[MCP_PROF_EVENTS];
};

/* Profiler events (mcp_xfer_prof.c): NCCL's callback from init; the data-path calls that
 * start an event for each work request they post, under the parent handle NCCL gave
 * (phandle; irecv: its first element's), and the request NCCL tests (*request) becomes
 * a struct mcp_prof_req whose events stop when it completes or fails; a flush right
 * after a profiled receive has its reads' events under that receive's parent. */
void mcp_xfer_prof_set(ncclProfilerCallback_t fn);
/* Whether NCCL's profiler takes events on the comm (ON), may (PROBING), or took none of
 * its last starts or has no callback (OFF: calls go the plain way; the 100 ms liveness
 * check lets it ask again every 10 s, mcp_xfer_prof_tick). */
enum mcp_prof_mode { MCP_PROF_OFF = 0, MCP_PROF_PROBING = 1, MCP_PROF_ON = 2 };
static inline int mcp_xfer_prof_may(const void *comm)
{
  return ((const struct mcp_comm *)comm)->prof_mode != MCP_PROF_OFF;
}
void mcp_xfer_prof_init(struct mcp_comm *c);
void mcp_xfer_prof_tick(struct mcp_comm *c, uint64_t now_ns);
int mcp_xfer_isend_prof(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                        void **request);
int mcp_xfer_irecv_prof(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                        void **phandles, void **request);
void mcp_xfer_prof_flush(struct mcp_comm *c, struct mcp_request *r, const void *data0, void **request);
int mcp_xfer_prof_test(struct mcp_request *wrapper, int *done, int *sizes);
void mcp_xfer_prof_release(struct mcp_comm *c);
/* The comm a link belongs to: what conn hands back through struct mcp_link_ops. */
static inline struct mcp_comm *mcp_comm_of(struct mcp_link *l)
{
  return (struct mcp_comm *)(void *)((char *)l - offsetof(struct mcp_comm, link));
}

static inline const struct mcp_comm *mcp_comm_of_const(const struct mcp_link *l)
{
  return (const struct mcp_comm *)(const void *)((const char *)l - offsetof(struct mcp_comm, link));
}

/* net tells a send or receive comm from a listen comm by the kind at offset 0 of both. */
_Static_assert(offsetof(struct mcp_comm, link.kind) == 0, "a comm's kind is its first field");
_Static_assert(offsetof(struct mcp_listen_comm, kind) == 0, "a listen comm's kind is its first field");

void mcp_xfer_fail_wc(struct mcp_comm *c, const struct ibv_wc *wc, int peer_gone);

/* A work request the data path posted, as NCCL's profiler is told of it
 * (mcp_xfer_prof.c): the member of the QP it went on, its wr_id, opcode, the QP's
 * number and the bytes it carries. The notes functions say which work requests the call
 * that made request r posted, at most max: the same arithmetic as the posts, out of
 * their way, so a request nobody profiles costs nothing more (send: finished is 1 when
 * that call completed r's clear-to-send entry, i.e. posted a group's record). */
struct mcp_wr_note {
  int member;
  uint64_t wr_id;
  int opcode;
  uint32_t qp_num;
  size_t length;
};
int mcp_xfer_send_notes(const struct mcp_comm *c, const struct mcp_request *r, int finished,
                        struct mcp_wr_note *w, int max);
int mcp_xfer_recv_notes(const struct mcp_comm *c, const struct mcp_request *r, struct mcp_wr_note *w,
                        int max);
int mcp_xfer_flush_notes(struct mcp_comm *c, const struct mcp_request *r, struct mcp_wr_note *w, int max);

/* The note of a work request on QP qp of the link. */
static inline int mcp_wr_note_on(struct mcp_wr_note *w, const struct mcp_link *l, int qp, uint64_t wr_id,
                                 int opcode, size_t length)
{
  w->member = mcp_link_dev_index(l, qp);
  w->wr_id = wr_id;
  w->opcode = opcode;
  w->qp_num = l->qp[qp] != NULL ? l->qp[qp]->qp_num : 0;
  w->length = length;
  return 1;
}

/* Replay after recovery (mcp_xfer_send.c, mcp_xfer_recv.c). */
int mcp_xfer_send_replay(struct mcp_comm *c, const uint32_t *done);
int mcp_xfer_recv_replay(struct mcp_comm *c);
void mcp_xfer_recv_done_table(const struct mcp_comm *c, uint32_t *done);
/* The flush QP failed a read (its port went down): every read in flight on it is lost
 * (mcp_xfer_flush.c, driven from test).
 * flush_lost drops the QP and marks them; flush_retry, from test, makes a new QP and
 * posts them again, at most every 100 ms, and fails the comm once
 * MCPNET_RECOVERY_TIMEOUT has passed since the loss. */
void mcp_xfer_flush_lost(struct mcp_comm *c, uint64_t now_ns);
int mcp_xfer_flush_retry(struct mcp_comm *c, uint64_t now_ns);

/* Registration on a fused comm (mcp_xfer_link.c): one MR per member through each member's
 * cache; fd >= 0 for DMA-BUF. 0 or a negative errno. */
int mcp_xfer_reg_mr_set(struct mcp_comm *c, void *data, size_t size, int type, uint64_t offset, int fd,
                        void **mhandle);
void mcp_xfer_dereg_mr_set(void *mhandle);

/* Which messages land (struct mcp_landing), from the QPs' inline size and
 * MCPNET_INLINE_BYTES (data_inline); link_up calls it (mcp_xfer_link.c). */
void mcp_xfer_land_setup(struct mcp_comm *c);

/* xfer's side of every comm, handed to conn by net (mcp_xfer_link.c). */
extern const struct mcp_link_ops mcp_xfer_link_ops;

/* Requests (mcp_xfer_req.c). get and put are inline: they run once per message on
 * the data path, where a call costs as much as the work. */
int mcp_req_pool_init(struct mcp_comm *c, int n, int kind);

static inline struct mcp_request *mcp_req_get(struct mcp_comm *c)
{
  struct mcp_request *r;

  if (c->free_top == 0)
    return NULL;
  r = &c->reqs[c->free_list[--c->free_top]];
  r->in_use = 1;
  r->done = 0;
  r->pending = 0;
  r->group_next = -1;
  return r;
}

static inline void mcp_req_put(struct mcp_request *r)
{
  struct mcp_comm *c = r->comm;

  r->in_use = 0;
  c->free_list[c->free_top++] = r->index;
}

/* Data path (mcp_xfer_send.c, mcp_xfer_recv.c, mcp_xfer_flush.c, mcp_xfer_poll.c): the work behind
 * net's isend, irecv, iflush and test. */
int mcp_xfer_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
int mcp_xfer_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                   void **request);
int mcp_xfer_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
int mcp_xfer_test(void *request, int *done, int *sizes);
int mcp_xfer_poll(struct mcp_comm *c);
int mcp_xfer_check_alive(struct mcp_comm *c);

/*
 * The gate each data-path call passes first. A comm that failed answers with its error.
 * One that recovers is driven a step by the call and takes no new request from isend or
 * irecv: 0, "not yet", or its error once the recovery failed. iflush posts through a
 * recovery (its read waits for the new flush QP, r->repost): only a failure stops it.
 * test goes on when the recovery ended in this very call (MCP_GATE_REOPENED: the poll is
 * then its slow path's). MCP_GATE_OPEN is the hot path's answer: two loads and two
 * branches, no call, no allocation, no logging.
 */
enum mcp_xfer_gate_kind {
  MCP_GATE_POST,  /* isend, irecv */
  MCP_GATE_FLUSH, /* iflush */
  MCP_GATE_TEST,  /* test */
};
#define MCP_GATE_OPEN 1
#define MCP_GATE_REOPENED 2

static inline __attribute__((always_inline)) int mcp_xfer_gate(struct mcp_comm *c,
                                                               enum mcp_xfer_gate_kind kind)
{
  if (__builtin_expect(c->link.error != 0, 0))
    return c->link.error;
  if (kind == MCP_GATE_FLUSH || __builtin_expect(c->link.rec.phase == MCP_REC_NONE, 1))
    return MCP_GATE_OPEN;
  if (mcp_recover_progress(&c->link) < 0)
    return c->link.error;
  return kind == MCP_GATE_TEST && c->link.rec.phase == MCP_REC_NONE ? MCP_GATE_REOPENED : 0;
}

/* "Not yet" from isend or irecv (no clear-to-send, no free request or slot): the caller
 * waits, so the 100 ms liveness check runs. 0, or the comm's error once it failed. */
static inline int mcp_xfer_not_yet(struct mcp_comm *c)
{
  return mcp_xfer_check_alive(c) == 0 ? 0 : c->link.error;
}

/* Health (mcp_xfer_health.c). wc_diagnose writes the port state of member m (the failed
 * QP's), what moved since and the likely cause of a failed completion; watchdog runs from
 * the 100 ms liveness check and returns 1 when it reported a stall. */
enum mcp_cnt_cause mcp_xfer_wc_diagnose(struct mcp_comm *c, const struct mcp_link_dev *m, int wc_status,
                                        char *buf, size_t len);
int mcp_xfer_watchdog(struct mcp_comm *c, uint64_t now_ns, int seconds);
size_t mcp_xfer_watchdog_describe(const struct mcp_comm *c, char *buf, size_t len);
/* The same description, and the first thing it names as a kind (enum mcp_status_wait),
 * the sequence number and the count it is about. */
struct mcp_xfer_wait {
  unsigned kind;
  uint32_t seq;
  int count;
};
size_t mcp_xfer_wait_describe(const struct mcp_comm *c, struct mcp_xfer_wait *w, char *buf, size_t len);

/* mcpnet-top's view of a waiting comm (mcp_xfer_status.c), from the liveness check: the
 * heartbeat, how long it made no progress and, after a second of that, what it waits for
 * (the watchdog's diagnosis). Nothing when the comm has no status slot. */
void mcp_xfer_status_check(struct mcp_comm *c, uint64_t now_ns);

#endif
