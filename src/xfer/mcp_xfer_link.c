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
#include <stdlib.h>
#include <string.h>

#include "mcpnet/comm.h"
#include "mcpnet/param.h"
#include "mcpnet/verbs.h"

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
  /* The ring, records and staging are written and read by QP 0's member (member 0);
   * NIC fusion will register them on every member. */
  struct mcp_devctx *dc = mcp_link_dev_of(&c->link, 0)->dc;

  c->seq = 1;
  c->cts_batch = mcp_param_process()->cts_batch;
  c->ring_bytes = is_send ? MCP_SLOTS * sizeof(struct mcp_cts_slot) : MCP_SLOTS * sizeof(struct mcp_record);
  c->ring = ring_alloc(c->ring_bytes);
  if (c->ring == NULL || (c->ring_mr = mcp_mr_internal(dc, c->ring, c->ring_bytes, access)) == NULL)
    return -1;
  c->link.ring_addr = (uintptr_t)c->ring; /* the handshake names it */
  c->link.ring_rkey = c->ring_mr->rkey;
  if (is_send) {
    c->records = ring_alloc(MCP_SLOTS * sizeof(struct mcp_record));
    c->sslots = calloc(MCP_SLOTS, sizeof(*c->sslots));
    if (c->records == NULL || c->sslots == NULL ||
        (c->records_mr = mcp_mr_internal(dc, c->records, MCP_SLOTS * sizeof(struct mcp_record),
                                         IBV_ACCESS_LOCAL_WRITE)) == NULL)
      return -1;
    /* The send side's QPs post the writes; one receive WR is never used. */
    c->link.sq_depth = 2 * MCP_SEND_REQS;
    c->link.rq_depth = 1;
    return mcp_req_pool_init(c, MCP_SEND_REQS, MCP_REQ_SEND);
  }
  c->staging = ring_alloc(MCP_SLOTS * sizeof(struct mcp_cts_slot));
  c->rslots = calloc(MCP_SLOTS, sizeof(*c->rslots));
  if (c->staging == NULL || c->rslots == NULL ||
      (c->staging_mr = mcp_mr_internal(dc, c->staging, MCP_SLOTS * sizeof(struct mcp_cts_slot),
                                       IBV_ACCESS_LOCAL_WRITE)) == NULL)
    return -1;
  /* The receive side's QPs take the immediates and write clear-to-send entries. */
  c->link.sq_depth = 2 * MCP_SLOTS + 8;
  c->link.rq_depth = MCP_RQ_DEPTH;
  return mcp_req_pool_init(c, MCP_RECV_REQS, MCP_REQ_RECV);
}

/* The handshake is done: the ring the peer's answer named, and how much data fits
 * inline in a work request on these QPs. */
static void link_up(struct mcp_link *l)
{
  struct mcp_comm *c = mcp_comm_of(l);
  int inline_bytes = mcp_param_process()->inline_bytes;

  c->remote_ring = c->link.remote.ring_addr;
  c->remote_rkey = c->link.remote.ring_rkey;
  c->data_inline = c->link.max_inline < inline_bytes ? c->link.max_inline : inline_bytes;
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

  if (c->flush_qp != NULL)
    mcp_ibv.destroy_qp(c->flush_qp);
  c->flush_qp = NULL;
  free_ring(&c->ring_mr, &c->ring);
  free_ring(&c->staging_mr, (void **)&c->staging);
  free_ring(&c->records_mr, (void **)&c->records);
  free_ring(&c->flush_mr, (void **)&c->flush_buf);
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
};
