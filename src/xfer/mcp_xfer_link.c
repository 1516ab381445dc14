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
static int link_alloc(struct mcp_comm *c)
{
  int is_send = c->kind == MCP_COMM_SEND;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

  c->ring_bytes = is_send ? MCP_SLOTS * sizeof(struct mcp_cts_slot) : MCP_SLOTS * sizeof(struct mcp_record);
  c->ring = ring_alloc(c->ring_bytes);
  if (c->ring == NULL || (c->ring_mr = mcp_mr_internal(c->dc, c->ring, c->ring_bytes, access)) == NULL)
    return -1;
  if (is_send) {
    c->records = ring_alloc(MCP_SLOTS * sizeof(struct mcp_record));
    c->sslots = calloc(MCP_SLOTS, sizeof(*c->sslots));
    if (c->records == NULL || c->sslots == NULL ||
        (c->records_mr = mcp_mr_internal(c->dc, c->records, MCP_SLOTS * sizeof(struct mcp_record),
                                         IBV_ACCESS_LOCAL_WRITE)) == NULL)
      return -1;
    return mcp_req_pool_init(c, MCP_SEND_REQS, MCP_REQ_SEND);
  }
  c->staging = ring_alloc(MCP_SLOTS * sizeof(struct mcp_cts_slot));
  c->rslots = calloc(MCP_SLOTS, sizeof(*c->rslots));
  if (c->staging == NULL || c->rslots == NULL ||
      (c->staging_mr = mcp_mr_internal(c->dc, c->staging, MCP_SLOTS * sizeof(struct mcp_cts_slot),
                                       IBV_ACCESS_LOCAL_WRITE)) == NULL)
    return -1;
  return mcp_req_pool_init(c, MCP_RECV_REQS, MCP_REQ_RECV);
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
static void link_release(struct mcp_comm *c)
{
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

static int link_replay(struct mcp_comm *c, const uint32_t *done)
{
  return c->kind == MCP_COMM_SEND ? mcp_xfer_send_replay(c, done) : mcp_xfer_recv_replay(c);
}

const struct mcp_link_ops mcp_xfer_link_ops = {
  .alloc = link_alloc,
  .release = link_release,
  .poll = mcp_xfer_poll,
  .fail_wc = mcp_xfer_fail_wc,
  .done_table = mcp_xfer_recv_done_table,
  .replay = link_replay,
};
