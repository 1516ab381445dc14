/*
 * link.h - the link between two processes, owned by conn: its QPs and CQ, epoch, the
 * out-of-band stream, connection setup and recovery, and the functions of src/conn/
 * that the layers above call (setup, QP bring-up, recovery, failure and close).
 *
 * The send and receive comms of xfer (comm.h) embed a link first; what conn needs from
 * xfer it gets through struct mcp_link_ops, never by calling it.
 */
#ifndef MCPNET_LINK_H
#define MCPNET_LINK_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "core/limits.h"
#include "core/status.h"
#include "fabric/devctx.h"
#include "fabric/fabric_counters.h"
#include "fabric/fabric_process.h"
#include "fabric/fabric_vdev.h"
#include "conn/oob.h"
#include "conn/wire.h"

/* QPs per connection: NCCL's own bound (NCCL_IB_MAX_QPS), so any NCCL_IB_QPS_PER_CONNECTION
 * NCCL runs runs here too. The arrays below cost 24 bytes per QP in every link. */
#define MCP_MAX_QPS 128
#define MCP_SLOTS 64 /* ring entries (the handshake checks both ends agree); >= NCCL_NET_MAX_REQUESTS */
/* Receives a receive comm keeps in flight: what NCCL can have outstanding on a comm
 * (NCCL_NET_MAX_REQUESTS); irecv returns a NULL request beyond it. The ring keeps its 64
 * slots (the wire's layout); only half of them are in use at once, so the queues below
 * and the pools are sized by this, not by the ring (issue 16: memory per comm). */
#define MCP_RECV_INFLIGHT 32
#define MCP_CQ_BATCH 16
/* Receive WRs per QP: every receive in flight can have its immediate on the way while up
 * to a batch of consumed WRs waits to be reposted. */
#define MCP_RQ_DEPTH (MCP_RECV_INFLIGHT + MCP_CQ_BATCH)

/* wr_id: kind in the top byte, the generation of the QP that posted it in the next (the
 * comm's epoch; the flush QP's own generation), the comm's per-process id in the next
 * 16 bits, then an index. A recovery bumps the epoch, so completions of the QPs it
 * replaced are recognised and dropped (their work is replayed); the comm id lets a
 * completion queue shared by several comms (later) tell whose a completion is, since a
 * QP number can be reused after a recovery. Poll drops what is not its comm's. */
#define MCP_WR(kind, comm_id, epoch, idx)                                                                  \
  (((uint64_t)(kind) << 56) | ((uint64_t)(uint8_t)(epoch) << 48) | ((uint64_t)(uint16_t)(comm_id) << 32) | \
   (uint64_t)(uint32_t)(idx))
#define MCP_WR_KIND(wr) ((unsigned)((wr) >> 56))
#define MCP_WR_EPOCH(wr) ((uint8_t)((wr) >> 48))
#define MCP_WR_COMM(wr) ((uint16_t)((wr) >> 32))
#define MCP_WR_IDX(wr) ((uint32_t)(wr))
enum { MCP_WR_SEND = 1, MCP_WR_GROUP = 2, MCP_WR_CTS = 3, MCP_WR_RECV = 4, MCP_WR_FLUSH = 5 };
/* What messages call each kind: one table, so that every message names a WR alike.
 * Any other value reads as a data write, as the messages always did. */
static inline const char *mcp_wr_kind_name(unsigned kind)
{
  static const char *const names[] = {
    [MCP_WR_SEND] = "data write", [MCP_WR_GROUP] = "data write", [MCP_WR_CTS] = "clear-to-send write",
    [MCP_WR_RECV] = "receive",    [MCP_WR_FLUSH] = "flush read",
  };

  return kind < sizeof(names) / sizeof(names[0]) && names[kind] != NULL ? names[kind] : "data write";
}

enum {
  MCP_QP_THREAD_NONE = 0,
  MCP_QP_THREAD_RUNNING,
  MCP_QP_THREAD_OK,
  MCP_QP_THREAD_FAILED,
  MCP_QP_THREAD_NO_GID /* a member's GID is not in its port's table (yet): nothing walked */
};

/* One RTR/RTS walk on a detached thread (mcp_conn_qp.c). ibv_modify_qp to RTR resolves the
 * peer's neighbour on RoCE and can block while the link is down, so nobody ever joins
 * or waits for it: the walk works on its own copy of what it needs, holds a reference
 * on the comm (its CQ must outlive the QPs), and when the comm moves on without it (a
 * new recovery round, close) it takes the QPs along and destroys them when it returns. */
struct mcp_qp_job;

/* Recovery phases (mcp_conn_recover.c). */
enum {
  MCP_REC_NONE = 0,
  MCP_REC_REBUILD, /* the setup thread destroys the old QPs and creates new ones */
  MCP_REC_WAIT_PEER,
  MCP_REC_CONNECTING,
  MCP_REC_WAIT_READY,
  MCP_REC_VERDICT /* a failed completion waits (200 ms at most) to learn whether the peer died */
};

struct mcp_recovery {
  int phase;
  uint32_t round; /* rounds started on this connection */
  uint64_t start_ns, deadline_ns, next_try_ns;
  int gid_missing; /* WAIT_PEER: this round's lookup did not find our GID; wait for the device's */
  int gid_probe;   /* NONE: a GID change event's lookup is awaited (each member's gid_need) */
  int peer_ready;  /* the peer's CONN_READY of this round arrived */
  int count;       /* recoveries completed */
  uint8_t live_before, remote_live_before; /* the link's members when the recovery began */
  char cause[256];
  struct mcp_wire_recover peer;
  struct ibv_wc verdict_wc; /* MCP_REC_VERDICT: the completion that failed */
  uint64_t verdict_ns;      /* ... and when it fails the comm if the peer still lives */
};

enum mcp_comm_kind { MCP_COMM_SEND = 1, MCP_COMM_RECV = 2, MCP_COMM_LISTEN = 3 };

struct mcp_link;

/* What the layer above the link (xfer) hands it when a comm is created, so conn never
 * calls up (mcp_xfer_link.c). alloc makes the upper layer's state of the comm before
 * its QPs exist and names the ring the handshake carries (link.ring_addr/ring_rkey);
 * link_up takes what the handshake brought (the peer's ring, the QPs' inline size);
 * release frees it with the comm's last reference. Recovery: poll drains the
 * completions of the old QPs (> 0 while there are some), qps_replaced forgets what was
 * counted on them, next_seq is what the RECOVER frame announces, fail_wc fails the comm
 * with a completion's diagnosis, done_table fills the receive side's table of finished
 * slots for the peer, replay posts again what the lost QPs never completed (done: the
 * peer's table). */
struct mcp_link_ops {
  size_t comm_size; /* the upper layer's comm, which begins with the link */
  int (*alloc)(struct mcp_link *c);
  void (*link_up)(struct mcp_link *c);
  void (*release)(struct mcp_link *c);
  void (*qps_replaced)(struct mcp_link *c);
  uint32_t (*next_seq)(const struct mcp_link *c);
  int (*poll)(struct mcp_link *c);
  void (*fail_wc)(struct mcp_link *c, const struct ibv_wc *wc, int peer_gone);
  void (*done_table)(const struct mcp_link *c, uint32_t *done);
  int (*replay)(struct mcp_link *c, const uint32_t *done);
  /* The QPs moved between members (failover, or a member back): before the replay, the
   * layer above takes the keys of the members its fixed uses of a QP now reach. */
  void (*members_moved)(struct mcp_link *c);
};

/* Device contexts one link can hold QPs on: the physical devices behind one virtual
 * (fused) NIC (fabric_vdev.h). */
#define MCP_LINK_MAX_DEVS MCP_VDEV_MAX_MEMBERS

/* What the link keeps per device context it has QPs on (a member; a fused device has up
 * to MCP_LINK_MAX_DEVS): the context, its CQ, our GID's index on its port, the
 * events of its port this comm has handled and the port's counters at connect. A
 * member's PD and MRs are its context's. The counters snapshot is ~4.7 KB, so it is
 * on the heap, read once at connect: idle members cost no more than their few fields. */
struct mcp_link_dev {
  struct mcp_devctx *dc;
  struct ibv_cq *cq;
  int sgid_index;                   /* our GID's index, looked up again by recovery */
  unsigned port_err_seen, gid_seen; /* the devctx event generations this comm has handled */
  unsigned port_up_seen;            /* ... and of its port coming back (PORT_ACTIVE) */
  unsigned gid_need;                /* the device's GID lookup this comm waits for (mcp_qp_gid_poll) */
  /* The port's error counters when the comm connected, for a failed completion's WARN. */
  int cnt_base_ok;
  struct mcp_cnt_snapshot *cnt_base; /* NULL until read (freed with the link) */
};

struct mcp_config;

/*
 * The settings of one link, copied once from the process's configuration when the link
 * is made and read from here by conn and xfer, never from the configuration itself.
 * The path of each: net's init loads the configuration (mcp_param_load into
 * mcp_param_process(), src/net/mcp_net_init.c); comm_new (src/conn/mcp_conn_setup.c)
 * copies it with mcp_link_cfg_fill into link.cfg; conn and xfer read link.cfg. E.g.
 * NCCL_IB_TIMEOUT: parsed by the table's row (src/core/mcp_param_table.c), then
 * mcp_config.ib_timeout, then link.cfg.ib_timeout, then the QPs' RTS attribute and the
 * wire fingerprint (mcp_conn_qp.c) and a failed completion's message (xfer). A new
 * per-link setting: a field here and its line in mcp_link_cfg_fill.
 */
struct mcp_link_cfg {
  int ib_timeout, ib_retry_cnt; /* NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT: RTS, fingerprint */
  int rnr_retry;                /* MCPNET_RNR_RETRY: RTS, fingerprint */
  int min_rnr_timer;            /* MCPNET_MIN_RNR_TIMER: RTR */
  int mtu;                      /* MCPNET_MTU in bytes (0: the port's active MTU) */
  int ib_sl, ib_tc;             /* NCCL_IB_SL, NCCL_IB_TC; -1 unset (a rank map's sl=/tc= win) */
  int ib_fifo_tc;               /* NCCL_IB_FIFO_TC: the receive side's QPs on RoCE; -1 unset */
  int ib_pkey_index;            /* NCCL_IB_PKEY: the P_Key index of xfer's flush QP */
  /* NCCL_IB_MQP_RETRY_*: a connection's RTR/RTS retries */
  int ib_mqp_retry_all, ib_mqp_retry_cnt, ib_mqp_retry_sleep_ms;
  int ib_port_failover, ib_port_recovery; /* NCCL_IB_RESILIENCY_PORT_*: non-zero on */
  int connect_timeout_s;                  /* MCPNET_CONNECT_TIMEOUT */
  int recovery_timeout_s;                 /* MCPNET_RECOVERY_TIMEOUT; 0: no recovery */
  int watchdog_s;                         /* MCPNET_WATCHDOG_SEC (xfer); 0: off */
  int inline_bytes;                       /* MCPNET_INLINE_BYTES (xfer) */
  bool abort_on_error;                    /* MCPNET_ABORT_ON_ERROR */
  bool force_flush;                       /* MCPNET_FORCE_FLUSH (xfer) */
};

/* Copies a link's settings out of a loaded configuration (mcp_conn_setup.c). */
void mcp_link_cfg_fill(struct mcp_link_cfg *lc, const struct mcp_config *cfg);

/* The link between two processes (conn): QPs, their device contexts and CQs, epoch, the
 * out-of-band stream, setup and recovery state, the peer's name and the comm's error.
 * The send and receive comms (xfer, comm.h) embed it first, so a comm's kind is at
 * offset 0 of every comm. QPs are striped over the live members (all but those a
 * failover left out): QP i is on devs[qp_dev[i]] (mcp_link_dev_of) and lands on the
 * peer's member qp_rdev[i] (mcp_link_remote_dev): both ends have max(their members) x
 * NCCL_IB_QPS_PER_CONNECTION QPs, as NCCL's transport, so every member of either end
 * carries some. */
struct mcp_link {
  int kind; /* enum mcp_comm_kind; first, as in the listen comm */
  int dev;
  uint16_t id;                    /* per process, for wr_id (mcp_comm_next_id); 0: a test's comm */
  const struct mcp_link_ops *ops; /* the layer above, served by the link (never NULL once set up) */
  struct mcp_link_cfg cfg;        /* its settings, copied at creation (comm_new) */
  int ndevs;                      /* members in devs[] (mcp_fabric_dev_members) */
  struct mcp_link_dev devs[MCP_LINK_MAX_DEVS];
  int remote_ndevs; /* the peer's members (its endpoint's ndevs; 1 for a version-2 peer) */
  /* Failover of a fused link (issue 37), bit k: member k. up: our members whose port was
   * active when our QPs were last made; live: those our QPs are on (mcp_link_masks of
   * both ends' up: with as many members as the peer, the members up at both ends, so QP i
   * joins member k to the peer's member k as at setup). remote_*: the peer's, from its
   * RECOVER. Every member at setup. QP i is on our member qp_dev[i] and lands on the
   * peer's member qp_rdev[i]: the live ones in turn (mcp_link_place); with every member
   * live, member i % ndevs, as before failover existed. */
  uint8_t up, live, remote_up, remote_live;
  uint8_t qp_dev[MCP_MAX_QPS], qp_rdev[MCP_MAX_QPS];
  struct mcp_oob_stream *stream;
  int traffic_class;
  int sl, tc;
  int mtu; /* negotiated ibv_mtu */
  int nqps;
  struct ibv_qp *qp[MCP_MAX_QPS];
  uint32_t psn[MCP_MAX_QPS];
  int recv_posted[MCP_MAX_QPS]; /* receive WRs (the immediates) posted and consumed per QP */
  int recv_consumed[MCP_MAX_QPS];
  int max_inline;
  /* Inline data the upper layer asks its QPs for (0: 256, then 64, then none). A
   * provider's send-queue entry grows with it (rxe: 208 bytes plus this, rounded up to
   * a power of two), so a side that only writes small entries asks for little. */
  int inline_want;
  uint64_t ring_addr; /* the ring the peer writes, named by the upper layer's alloc */
  uint32_t ring_rkey;
  uint32_t ring_rkeys[MCP_LINK_MAX_DEVS]; /* the same ring on each member ([0] = ring_rkey) */
  struct mcp_wire_endpoint local, remote;
  char peer_name[160];

  /* Connection setup (connect or accept); RTR/RTS runs on a job's thread (may block). */
  int state;
  struct mcp_qp_job *qp_job; /* the walk in progress or not yet collected; NULL: none */
  atomic_int refs;           /* holders besides the owner (qp jobs): freed when -1 */
  struct mcp_oob_cred cred;  /* connect: the listen the handle names */
  uint64_t deadline_ns;      /* local work only (the setup thread); a peer is waited for */
  uint64_t wait_since_ms;    /* a wait on the peer: when it began (mcp_clock_coarse_ms) */
  unsigned wait_notices;     /* INFO/WARNs said about that wait (mcp_oob_wait_notice) */

  /* Fatal error: every later call fails with it (0 or a negative errno, src/core/err.h). */
  int error;
  char errmsg[512];

  /* Recovery: QPs are re-created with the same depths and a new epoch. wr_self is
   * MCP_WR(0, id, epoch, 0), kept with the epoch (mcp_link_set_epoch): the data path
   * adds a kind and an index to it (mcp_link_wr) and compares completions with it. */
  uint8_t epoch;
  uint64_t wr_self;
  int sq_depth, rq_depth;
  atomic_int qp_event; /* an async event on one of its QPs (type + 1), 0: none */
  struct mcp_recovery rec;

  /* What mcpnet-top sees of this comm (status.h): its slot, NULL when not published;
   * status_ref: the comm holds a reference on the process's segment. */
  struct mcp_status_comm *st;
  int status_ref;
};

/* The link's epoch, and the wr_id tag that goes with it. */
static inline void mcp_link_set_epoch(struct mcp_link *l, uint8_t epoch)
{
  l->epoch = epoch;
  l->wr_self = MCP_WR(0, l->id, epoch, 0);
}

/* A wr_id of kind for index idx on the link's QPs of the current epoch. */
static inline uint64_t mcp_link_wr(const struct mcp_link *l, unsigned kind, uint32_t idx)
{
  return l->wr_self | (uint64_t)kind << 56 | idx;
}

/* The member QP qp (an index into qp[]) is on. */
static inline int mcp_link_dev_index(const struct mcp_link *l, int qp) { return l->qp_dev[qp]; }

/* The peer's member QP qp lands on: the rkeys of what it writes there are that member's. */
static inline int mcp_link_remote_dev(const struct mcp_link *l, int qp) { return l->qp_rdev[qp]; }

/* Whether our member k carries QPs now (failover leaves those whose port is down out). */
static inline int mcp_link_is_live(const struct mcp_link *l, int k) { return (l->live >> k) & 1; }

static inline struct mcp_link_dev *mcp_link_dev_of(struct mcp_link *l, int qp)
{
  return &l->devs[mcp_link_dev_index(l, qp)];
}

/* The member of the link's QP with number qpn (a completion's qp_num): for the messages
 * of a failed completion only, never on the success path. Member 0 for a QP that is not
 * in qp[] (the flush QP, or one a recovery replaced). */
static inline struct mcp_link_dev *mcp_link_dev_of_qpn(struct mcp_link *l, uint32_t qpn)
{
  int i;

  for (i = 0; i < l->nqps; i++)
    if (l->qp[i] != NULL && l->qp[i]->qp_num == qpn)
      return mcp_link_dev_of(l, i);
  return &l->devs[0];
}

struct mcp_listen_comm {
  int kind; /* MCP_COMM_LISTEN */
  int dev;
  int traffic_class;
  const struct mcp_link_ops *ops; /* handed to every comm it accepts */
  struct mcp_oob_listener *listener;
  struct mcp_link *accepting;
};

/* Listen, connect and accept (mcp_conn_setup.c): the work behind net's entry points of
 * the same names, with the traffic class net resolved from the context or the config. */
int mcp_conn_listen(int dev, int traffic_class, const struct mcp_link_ops *ops, void *handle,
                    void **listen_comm);
int mcp_conn_close_listen(void *listen_comm);
int mcp_conn_connect(int dev, int traffic_class, const struct mcp_link_ops *ops, void *handle,
                     void **send_comm);
int mcp_conn_accept(void *listen_comm, void **recv_comm);
/* Whether an accept that has waited waited_ms for its connector's READY gives the listen
 * to one of the pending requests queued behind it: only with one queued, and only after
 * MCPNET_CONNECT_TIMEOUT (a connector alone is waited for as long as it stands). */
int mcp_conn_accept_yields(uint64_t waited_ms, int connect_timeout_s, unsigned pending);

/* Queue pair bring-up (mcp_conn_qp.c). */
int mcp_qp_create_all(struct mcp_link *c, int nqps, int sq_depth, int rq_depth);
int mcp_qp_create_qps(struct mcp_link *c);
/* RTR/RTS of every QP toward c->remote on a short-lived thread (may block on address
 * resolution); poll returns 0 while running, 1 when at RTS, -EIO on failure (start: a
 * negative errno when no thread could start). */
int mcp_qp_connect_start(struct mcp_link *c);
int mcp_qp_connect_poll(struct mcp_link *c);
/* Recovery: the same walk, after the thread looked each member's GID up again by address
 * (mcp_fabric_gid_refind: netlink and sysfs, which NCCL's thread must not wait for).
 * poll_gid is poll that also hands back the indices found (gid_index[k] per member,
 * negative: not found), and returns MCP_QP_NO_GID when one was missing (then nothing was
 * walked). */
int mcp_qp_connect_start_gid(struct mcp_link *c);
#define MCP_QP_NO_GID (-ENOENT) /* its failure is -EIO, as poll's */
int mcp_qp_connect_poll_gid(struct mcp_link *c, int *gid_index);
/* Every lookup of our GID (the walk's above, or one started here) is published on its
 * device, so that the device's comms share them: a GID change event, or a GID that has
 * not come back after a link flap, costs one lookup every 100 ms per device, not one per
 * comm. gid_need: the number of the first lookup of member k's GID that begins after
 * this call. gid_poll: 1 with *index (negative: not in the port's table) once that lookup or
 * a later one finished, on any comm of the device; 0 while waiting, having started one
 * on c's setup thread when none runs and the device's last began 100 ms ago or more;
 * a negative errno when that thread could not start (the next poll tries again). */
unsigned mcp_qp_gid_need(struct mcp_link *c, int k);
int mcp_qp_gid_poll(struct mcp_link *c, int k, unsigned need, int *index);
/* Recovery's rebuild on a setup thread (mcp_conn_qp.c): the comm's QPs leave qp[] (all
 * NULL until take) and the thread destroys them, then creates new ones at INIT. The
 * destroy can wait for the driver to drain work a downed port holds, and NCCL's thread
 * must not. poll: 0 running, 1 done (drain the CQ of the old QPs' completions, then
 * take the new QPs), -EIO failed (nothing to take; the WARN of the step that failed was
 * logged). start returns a negative errno (the QPs stay the comm's) when no thread could start. */
int mcp_qp_rebuild_start(struct mcp_link *c);
int mcp_qp_rebuild_poll(struct mcp_link *c);
void mcp_qp_rebuild_take(struct mcp_link *c);
/* Lets go of the comm's walk without waiting: one still running keeps the QPs it walks
 * (c->qp[] entries become NULL) and destroys them when it returns; 1 if it was running. */
int mcp_qp_connect_abandon(struct mcp_link *c);
/* Tests only: replaces the wait between retries of a connection's RTR/RTS
 * (NCCL_IB_MQP_RETRY_*, on its setup thread) with fn(ms); NULL restores nanosleep. */
void mcp_qp_test_set_retry_sleep(void (*fn)(unsigned ms));
/* RTR/RTS of a QP outside qp[] on member k's port: xfer's flush QP of that member. */
int mcp_qp_to_rts(struct mcp_link *c, struct ibv_qp *qp, uint32_t my_psn, uint32_t dqpn, uint32_t dpsn,
                  const uint8_t *dgid, uint16_t dlid);
int mcp_qp_to_rts_member(struct mcp_link *c, int k, struct ibv_qp *qp, uint32_t my_psn, uint32_t dqpn,
                         uint32_t dpsn, const uint8_t *dgid, uint16_t dlid);
/* The QP count of a link: NCCL_IB_QPS_PER_CONNECTION per member of the end with more
 * members, as NCCL's transport, so each member of either end has its share. */
int mcp_link_qp_count(int qps_per_conn, int local_ndevs, int remote_ndevs);
/* QP i's member among the members of mask live (bit k: member k of ndevs): the live ones
 * in turn, i % (live members); with every member live, i % ndevs. A mask with none of
 * the ndevs members counts as all of them. */
int mcp_link_member_of(uint8_t live, int ndevs, int qp);
/* The link's maps (qp_dev, qp_rdev) from its masks (live, remote_live; 0: every member). */
void mcp_link_place(struct mcp_link *l);
/* Every member of the end with ndevs, as a mask. */
uint8_t mcp_link_members_all(int ndevs);
/* Where both ends put their QPs, from the members whose port is up at each (up: ours of
 * ndevs, rup: the peer's of rdevs; none up counts as all): with as many members at both
 * ends, the members up at both (QP i joins member k to member k, as at setup) unless
 * there are none; else each end's own. Both ends compute it from the two masks the
 * RECOVER frames carried, so they agree. */
void mcp_link_masks(int ndevs, int rdevs, uint8_t up, uint8_t rup, uint8_t *live, uint8_t *rlive);
/* The peer's member count (its endpoint's ndevs, 0 read as 1): every one of them up and
 * carrying QPs, as at setup. */
void mcp_link_set_remote_ndevs(struct mcp_link *l, int rdevs);
/* Opens the device contexts of the physical devices behind dev (one, or a fused set) as
 * the link's members; refuses a set whose link layers differ, with a WARN that names
 * both devices (the comm does not exist yet). 0 or -ENODEV. */
int mcp_link_open_members(struct mcp_link *c, int dev);
int mcp_qp_post_recvs(struct mcp_link *c, int qp, int count);
/* NCCL's close: tells the peer, lets go of a running walk and drops the owner's
 * reference; the verbs resources go with the last reference. Never waits. */
void mcp_comm_destroy(struct mcp_link *c);
void mcp_comm_fail(struct mcp_link *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void mcp_comm_fill_endpoint(struct mcp_link *c);
/* The next per-process comm id for wr_id: 1..65535, then again from 1. */
uint16_t mcp_comm_next_id(void);
uint32_t mcp_version_number(void);

/* The comm's slot in the status segment mcpnet-top reads (mcp_conn_status.c): open with
 * the comm (a reference on the segment, a slot when one is free), close with its last
 * reference. The rest publish what conn knows as it changes: a setup state
 * (MCP_STATUS_CONNECTING, _WAIT_ACCEPT, _WAIT_CONNECT) with the peer known so far, the
 * connected endpoint and peer, a recovery's start (its cause) and end, the failure. */
void mcp_link_status_open(struct mcp_link *c, const struct mcp_config *cfg);
void mcp_link_status_close(struct mcp_link *c);
void mcp_link_status_setup(struct mcp_link *c, int state);
void mcp_link_status_ready(struct mcp_link *c);
void mcp_link_status_recovering(struct mcp_link *c);
void mcp_link_status_recovered(struct mcp_link *c);
void mcp_link_status_failed(struct mcp_link *c);

/* Recovery (mcp_conn_recover.c). recoverable says whether a completion status can be
 * survived by re-creating the QPs; start begins a round (callers check that
 * MCPNET_RECOVERY_TIMEOUT > 0 and that the peer's connection is alive); progress drives
 * it from every call on the comm and returns 0 while it runs, 1 once the comm works
 * again, a negative errno (the comm's error) when it failed; poll_stream handles the peer's RECOVER frames outside a call
 * that is already recovering. */
int mcp_recover_status_recoverable(int wc_status);
void mcp_recover_start(struct mcp_link *c, const char *cause);
int mcp_recover_progress(struct mcp_link *c);
void mcp_recover_poll_stream(struct mcp_link *c);
/* Async events (mcp_devctx_poll_events notes a QP's event for its comm): from the 100 ms
 * liveness check, starts a recovery for a port error, a QP event or a GID that moved. */
void mcp_recover_check_events(struct mcp_link *c);
/* The handler conn registers with fabric for a QP's async event (comm: the QP's context). */
void mcp_comm_async_qp_event(void *comm, uint32_t qpn, int event_type);
/* A failed completion that may mean the peer process died: isend/irecv/test route to
 * mcp_recover_progress, which fails the comm as soon as the out-of-band connection says
 * the peer is gone, or with the completion's diagnosis after 200 ms (mcp_xfer_fail_wc). */
void mcp_recover_await_verdict(struct mcp_link *c, const struct ibv_wc *wc);

#endif
