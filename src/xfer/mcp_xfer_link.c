/*
 * mcp_xfer_link.c - what xfer hands to the link (conn) when a comm is created.
 *
 * conn sets up and recovers the link (QPs, CQ, out-of-band stream) but must not call
 * the layer above it. What it needs from xfer goes through this table, which net
 * passes down with listen and connect: xfer allocates and registers its own state
 * (the ring the peer writes, records, slots, the request pool) before the handshake
 * names the ring, gives it back with the comm, and serves the recovery (drain the
 * completions of the old QPs, fail a completion, the receive side's done table, the
 * replay once the new QPs are up).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "xfer/comm.h"

static void *ring_alloc(size_t bytes)
{
  void *p = NULL;

  if (posix_memalign(&p, 4096, bytes) != 0)
    return NULL;
  memset(p, 0, bytes);
  return p;
}

/* Rings and requests: the send side gets a CTS ring, the receive side records. */
static int link_alloc(struct mcp_link *l)
{
  struct mcp_comm *c = mcp_comm_of(l);
  int is_send = c->link.kind == MCP_COMM_SEND;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  /* The clear-to-send writes ride QP 0, on member 0 at both ends while every member is
   * live, on another after a failover: a fused receiver's staging copy is registered on
   * every member. The ring the peer writes is registered on every member (the records
   * of a grouped receive land on whichever member their QP reaches), and so are the
   * sender's records, which it writes from any member. */
  struct mcp_devctx *dc = mcp_link_dev_of(&c->link, 0)->dc;
  size_t staging_bytes;
  int k;

  c->seq = 1;
  c->cnt = c->link.st != NULL ? &c->link.st->count : &c->cnt_local;
  mcp_xfer_prof_init(c);
  /* The receiver's member count lays out its rkey tables: the send side has it from the
   * listener's handle (the connect checks the answer agrees), the receive side is it. */
  c->cts_rkeys_n = is_send ? c->link.remote_ndevs : c->link.ndevs;
  /* The send side's ring has room for a fused receiver's rkey tables after its slots
   * (none for one member: its 16 KiB of slots only). */
  c->ring_bytes = is_send ? MCP_CTS_RKEYS_OFFSET + MCP_SLOTS * mcp_cts_rkeys_bytes(c->cts_rkeys_n)
                          : MCP_SLOTS * sizeof(struct mcp_record);
  c->ring = ring_alloc(c->ring_bytes);
  if (c->ring == NULL || (c->ring_mr = mcp_mr_internal(dc, c->ring, c->ring_bytes, access)) == NULL)
    return -ENOMEM;
  c->ring_mrs[0] = c->ring_mr;
  for (k = 1; k < c->link.ndevs; k++)
    if ((c->ring_mrs[k] = mcp_mr_internal(c->link.devs[k].dc, c->ring, c->ring_bytes, access)) == NULL)
      return -ENOMEM;
  c->link.ring_addr = (uintptr_t)c->ring; /* the handshake names it */
  c->link.ring_rkey = c->ring_mr->rkey;
  for (k = 0; k < c->link.ndevs; k++)
    c->link.ring_rkeys[k] = c->ring_mrs[k]->rkey;
  if (is_send) {
    c->records = ring_alloc(MCP_SLOTS * sizeof(struct mcp_record));
    c->sslots = calloc(MCP_SLOTS, sizeof(*c->sslots));
    if (c->records == NULL || c->sslots == NULL ||
        (c->records_mr = mcp_mr_internal(dc, c->records, MCP_SLOTS * sizeof(struct mcp_record),
                                         IBV_ACCESS_LOCAL_WRITE)) == NULL)
      return -ENOMEM;
    c->records_mrs[0] = c->records_mr;
    for (k = 1; k < c->link.ndevs; k++)
      if ((c->records_mrs[k] =
             mcp_mr_internal(c->link.devs[k].dc, c->records, MCP_SLOTS * sizeof(struct mcp_record),
                             IBV_ACCESS_LOCAL_WRITE)) == NULL)
        return -ENOMEM;
    /* The send side's QPs post the writes; one receive WR is never used. A request puts
     * at most one WR on a QP (a stripe each, or a group's part), and a group of n >= 2
     * requests one record more: MCP_SEND_REQS * 3 / 2 WRs outstanding per QP at most. */
    c->link.sq_depth = MCP_SEND_SQ_DEPTH;
    /* Inline: small messages (MCPNET_INLINE_BYTES, at most this) and nothing else; a
     * record (64 bytes) goes from its registered copy. 48 keeps rxe's send-queue entry
     * at 256 bytes (208 plus inline, rounded up to a power of two): 256 bytes of
     * inline doubled it, and the send queue with it (issue 16). */
    c->link.inline_want = 48;
    c->link.rq_depth = 1;
    return mcp_req_pool_init(c, MCP_SEND_REQS, MCP_REQ_SEND);
  }
  /* Staging: the CTS slots, then (a fused receiver only: one member never writes it)
   * their rkey table, as in the sender's ring. */
  staging_bytes = MCP_CTS_RKEYS_OFFSET + MCP_SLOTS * mcp_cts_rkeys_bytes(c->cts_rkeys_n);
  c->staging = ring_alloc(staging_bytes);
  c->rslots = calloc(MCP_SLOTS, sizeof(*c->rslots));
  if (c->staging == NULL || c->rslots == NULL ||
      (c->staging_mr = mcp_mr_internal(dc, c->staging, staging_bytes, IBV_ACCESS_LOCAL_WRITE)) == NULL)
    return -ENOMEM;
  c->staging_mrs[0] = c->staging_mr;
  for (k = 1; k < c->link.ndevs; k++)
    if ((c->staging_mrs[k] =
           mcp_mr_internal(c->link.devs[k].dc, c->staging, staging_bytes, IBV_ACCESS_LOCAL_WRITE)) == NULL)
      return -ENOMEM;
  /* The receive side's QPs take the immediates and write clear-to-send entries, one
   * WR per post (a batch is one): at most one per receive in flight, up to 15 more
   * since the last signalled one (every 16th), and 16 spare while that one's
   * completion is on its way: 63, which with the receive queue keeps rxe's queues
   * and the CQ at a power of two. A fused receiver posts its rkey table before each
   * entry (unsignalled, not counted by the interval): twice the ring's slots, as before.
   * An entry of one buffer (32 bytes) is all this side writes inline. */
  c->link.sq_depth = c->link.ndevs > 1 ? 2 * MCP_SLOTS + 8 : 2 * MCP_RECV_INFLIGHT - 1;
  c->link.inline_want = (int)sizeof(struct mcp_cts_elem);
  c->link.rq_depth = MCP_RQ_DEPTH;
  return mcp_req_pool_init(c, MCP_RECV_REQS, MCP_REQ_RECV);
}

/* QP 0's member at either end decides the clear-to-send's keys. */
static void members_moved(struct mcp_link *l)
{
  struct mcp_comm *c = mcp_comm_of(l);

  if (c->staging_mrs[mcp_link_dev_index(l, 0)] != NULL)
    c->cts_lkey = c->staging_mrs[mcp_link_dev_index(l, 0)]->lkey;
  c->cts_rkey = c->remote_rkeys[mcp_link_remote_dev(l, 0)];
}

/* The handshake is done: the ring the peer's answer named, and how much data fits
 * inline in a work request on these QPs. */
static void link_up(struct mcp_link *l)
{
  struct mcp_comm *c = mcp_comm_of(l);
  int inline_bytes = c->link.cfg.inline_bytes;

  int k;

  c->remote_ring = c->link.remote.ring_addr;
  c->remote_rkey = c->link.remote.ring_rkey;
  c->remote_rkeys[0] = c->remote_rkey;
  for (k = 1; k < c->link.remote_ndevs && k < c->link.remote.ndevs; k++)
    c->remote_rkeys[k] = c->link.remote.more[k - 1].ring_rkey;
  c->data_inline = c->link.max_inline < inline_bytes ? c->link.max_inline : inline_bytes;
  mcp_xfer_land_setup(c);
  members_moved(&c->link);
}

void mcp_xfer_land_setup(struct mcp_comm *c)
{
  /* A landing is inline data plus its 8-byte trailer in one line; none when data is never
   * inlined. Only on a connection of one QP (both ends have the same count), NCCL's
   * default and the case the tests cover; with more, messages keep the write with
   * immediate. A receiver advertises them only with one member, too: a sender that
   * predates them reads an element's idx (whose high byte carries the flag) from a
   * fused one. */
  c->land_max = -1;
  c->land_recv = c->link.ndevs == 1 && c->link.nqps == 1;
  if (c->data_inline > 0 && c->link.nqps == 1) {
    c->land_max = c->link.max_inline - 8 < c->data_inline ? c->link.max_inline - 8 : c->data_inline;
    if (c->land_max > MCP_LAND_TRAILER)
      c->land_max = MCP_LAND_TRAILER;
  }
}

static void free_ring(struct ibv_mr **mr, void **mem)
{
  if (*mr != NULL)
    mcp_ibv.dereg_mr(*mr);
  *mr = NULL;
  free(*mem);
  *mem = NULL;
}

/* With the comm's last reference, after its link QPs are gone (a flush QP is xfer's). */
static void link_release(struct mcp_link *l)
{
  struct mcp_comm *c = mcp_comm_of(l);
  int k;

  if (c->flush_qp != NULL)
    mcp_ibv.destroy_qp(c->flush_qp);
  c->flush_qp = NULL;
  for (k = 1; k < MCP_LINK_MAX_DEVS; k++) {
    if (c->flush_qps[k] != NULL)
      mcp_ibv.destroy_qp(c->flush_qps[k]);
    c->flush_qps[k] = NULL;
    /* Members' registrations of the buffers below, which go with member 0's. */
    if (c->ring_mrs[k] != NULL)
      mcp_ibv.dereg_mr(c->ring_mrs[k]);
    if (c->records_mrs[k] != NULL)
      mcp_ibv.dereg_mr(c->records_mrs[k]);
    if (c->flush_mrs[k] != NULL)
      mcp_ibv.dereg_mr(c->flush_mrs[k]);
    if (c->staging_mrs[k] != NULL)
      mcp_ibv.dereg_mr(c->staging_mrs[k]);
    c->ring_mrs[k] = c->records_mrs[k] = c->flush_mrs[k] = c->staging_mrs[k] = NULL;
  }
  free_ring(&c->ring_mr, &c->ring);
  free_ring(&c->staging_mr, (void **)&c->staging);
  free_ring(&c->records_mr, (void **)&c->records);
  free_ring(&c->flush_mr, (void **)&c->flush_buf);
  mcp_xfer_prof_release(c);
  free(c->reqs);
  free(c->sslots);
  free(c->rslots);
  c->reqs = NULL;
  c->sslots = NULL;
  c->rslots = NULL;
}

/* A recovery replaced the QPs: what was counted on the old ones is void. */
static void qps_replaced(struct mcp_link *l)
{
  struct mcp_comm *c = mcp_comm_of(l);
  int i;

  c->cts_unsignaled = 0;
  c->land_unpolled = 0;
  if (c->link.kind != MCP_COMM_RECV)
    return;
  /* Partial counts of the old QPs are void: the sender writes those slots again. */
  for (i = 0; i < MCP_SLOTS; i++)
    if (c->rslots[i].req != NULL) {
      c->rslots[i].expected = 0;
      c->rslots[i].got = 0;
      c->rslots[i].bytes = 0;
    }
}

static uint32_t next_seq(const struct mcp_link *l) { return mcp_comm_of_const(l)->seq; }
static int link_poll(struct mcp_link *l) { return mcp_xfer_poll(mcp_comm_of(l)); }

static void link_fail_wc(struct mcp_link *l, const struct ibv_wc *wc, int peer_gone)
{
  mcp_xfer_fail_wc(mcp_comm_of(l), wc, peer_gone);
}

static void link_done_table(const struct mcp_link *l, uint32_t *done)
{
  mcp_xfer_recv_done_table(mcp_comm_of_const(l), done);
}

static int link_replay(struct mcp_link *l, const uint32_t *done)
{
  struct mcp_comm *c = mcp_comm_of(l);

  return c->link.kind == MCP_COMM_SEND ? mcp_xfer_send_replay(c, done) : mcp_xfer_recv_replay(c);
}

int mcp_xfer_reg_mr_set(struct mcp_comm *c, void *data, size_t size, int type, uint64_t offset, int fd,
                        void **mhandle)
{
  struct mcp_mr_set *set = calloc(1, sizeof(*set));
  int k, rc = 0;

  *mhandle = NULL;
  if (set == NULL)
    return -ENOMEM;
  set->head.set = 1;
  set->head.cpu_readable = type == NCCL_PTR_HOST && fd < 0;
  set->type = type;
  set->dmabuf = fd >= 0;
  for (k = 0; k < c->link.ndevs && rc == 0; k++) {
    struct mcp_devctx *dc = c->link.devs[k].dc;

    /* net checked member 0; GPU memory must be reachable from every member. */
    if (type == NCCL_PTR_CUDA && !(dc->info->ptr_support & NCCL_PTR_CUDA)) {
      MCP_WARN("regMr of GPU memory on a fused device: member %d (%s) has no GPU peer-memory module "
               "loaded (nvidia_peermem)",
               k, dc->info->name);
      mcp_xfer_dereg_mr_set(set);
      return MCP_ERR_USAGE; /* as net's check of member 0 (ncclInvalidUsage) */
    }
    rc = fd >= 0 ? mcp_mr_register_dmabuf(dc, data, size, type, offset, fd, &set->mr[k])
                 : mcp_mr_register(dc, data, size, type, &set->mr[k]);
    if (rc == 0) {
      set->n = k + 1;
      set->lkey[k] = set->mr[k]->head.lkey;
      set->rkey[k] = set->mr[k]->head.rkey;
    }
  }
  if (rc != 0) {
    /* The failed member's WARN named it; say which fused device it belongs to. */
    MCP_WARN("regMr on a fused device: registering %p+%zu on member %d of %d (%s) failed; the members "
             "registered before it are released",
             data, size, set->n, c->link.ndevs, c->link.devs[set->n].dc->info->name);
    mcp_xfer_dereg_mr_set(set);
    return rc;
  }
  set->head.lkey = set->lkey[0];
  set->head.rkey = set->rkey[0];
  *mhandle = set;
  return 0;
}

void mcp_xfer_dereg_mr_set(void *mhandle)
{
  struct mcp_mr_set *set = mhandle;
  int k;

  if (set == NULL)
    return;
  for (k = 0; k < set->n; k++)
    mcp_mr_release(set->mr[k]);
  free(set);
}

const struct mcp_link_ops mcp_xfer_link_ops = {
  .comm_size = sizeof(struct mcp_comm),
  .alloc = link_alloc,
  .link_up = link_up,
  .release = link_release,
  .qps_replaced = qps_replaced,
  .next_seq = next_seq,
  .poll = link_poll,
  .fail_wc = link_fail_wc,
  .done_table = link_done_table,
  .replay = link_replay,
  .members_moved = members_moved,
};
