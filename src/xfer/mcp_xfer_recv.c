/*
 * mcp_xfer_recv.c - irecv, and the replay of receives after a recovery.
 *
 * irecv takes the next sequence number, records which request waits on its slot and
 * RDMA-writes the clear-to-send entry into the sender's ring on QP 0 (inline when it
 * fits), in that same call: a receive irecv accepted reaches the sender without any
 * further call on this comm, as NCCL's IB transport writes its FIFO entry inside irecv.
 * A caller busy on another comm (NCCL's proxy spinning on isend to the same peer, which
 * waits for our entries as we wait for its) is then never the one that holds it up.
 * The only batching left costs nothing: the elements of a grouped receive are one entry
 * and one write. Only every 16th write is signalled, to keep the send queue drained.
 * iflush, which reads back what arrived, is mcp_xfer_flush.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "xfer/comm.h"

#define CTS_SIGNAL_EVERY 16

/* The member of QP 0, which carries the clear-to-send writes. */
static struct mcp_link_dev *qp0_dev(struct mcp_comm *c) { return mcp_link_dev_of(&c->link, 0); }

/* RDMA-writes the staged CTS entry of `slot`, its n elements, into the sender's ring on
 * QP 0. */
static int post_cts(struct mcp_comm *c, int slot, int n)
{
  struct ibv_send_wr wr, *bad;
  struct ibv_sge sge;
  int rc;

  if (c->link.ndevs > 1) {
    /* A fused receiver: the other members' rkeys of these slots first, on the same QP,
     * so they are in place once the sender sees the entries' seq (mcp_cts_rkeys_of). */
    size_t off = MCP_CTS_RKEYS_OFFSET + (size_t)slot * mcp_cts_rkeys_bytes(c->cts_rkeys_n);

    memset(&wr, 0, sizeof(wr));
    sge.addr = (uintptr_t)c->staging + off;
    sge.length = (uint32_t)mcp_cts_rkeys_bytes(c->cts_rkeys_n);
    sge.lkey = c->cts_lkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = c->remote_ring + off;
    wr.wr.rdma.rkey = c->cts_rkey;
    wr.wr_id = mcp_link_wr(&c->link, MCP_WR_CTS, 0);
    if ((int)sge.length <= c->link.max_inline)
      wr.send_flags |= IBV_SEND_INLINE;
    rc = ibv_post_send(c->link.qp[0], &wr, &bad);
    if (rc != 0)
      return rc;
  }
  /* The fields an RDMA write reads, set one by one (no memset of the work request:
   * this runs for every receive), as the data path's one-write send does. */
  sge.addr = (uintptr_t)c->staging[slot].e;
  sge.length = (uint32_t)(n * (int)sizeof(struct mcp_cts_elem));
  sge.lkey = c->cts_lkey;
  wr.next = NULL;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.imm_data = 0;
  wr.qp_type.xrc.remote_srqn = 0;
  wr.wr.rdma.remote_addr = c->remote_ring + (uint64_t)slot * sizeof(struct mcp_cts_slot);
  wr.wr.rdma.rkey = c->cts_rkey;
  wr.wr_id = mcp_link_wr(&c->link, MCP_WR_CTS, 0);
  wr.send_flags = (int)sge.length <= c->link.max_inline ? IBV_SEND_INLINE : 0;
  if (++c->cts_unsignaled == CTS_SIGNAL_EVERY) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    c->cts_unsignaled = 0;
  }
  return ibv_post_send(c->link.qp[0], &wr, &bad);
}

int mcp_xfer_recv_notes(const struct mcp_comm *c, const struct mcp_request *r, struct mcp_wr_note *w, int max)
{
  const struct mcp_link *l = &c->link;
  uint64_t wr_id = mcp_link_wr(l, MCP_WR_CTS, 0);
  int n = 0;

  /* post_cts: a fused receiver's rkey table, then the entry, on QP 0. */
  if (l->ndevs > 1 && n < max)
    n += mcp_wr_note_on(&w[n], l, 0, wr_id, IBV_WR_RDMA_WRITE, mcp_cts_rkeys_bytes(c->cts_rkeys_n));
  if (n < max)
    n += mcp_wr_note_on(&w[n], l, 0, wr_id, IBV_WR_RDMA_WRITE, (size_t)r->n * sizeof(struct mcp_cts_elem));
  return n;
}

void mcp_xfer_recv_done_table(const struct mcp_comm *c, uint32_t *done)
{
  int i;

  /* A slot holds either its last completed seq, or the seq in flight there, whose
   * predecessor 64 earlier is complete (a slot is reused only after its data landed).
   * A landing whose line arrived is complete too, though test has not seen it yet:
   * the sender then completes it without writing it again, as a write with immediate
   * whose completion arrived here. */
  for (i = 0; i < MCP_SLOTS; i++) {
    const struct mcp_recv_slot *rs = &c->rslots[i];

    if (rs->req == NULL ||
        (rs->req->land && mcp_landing_arrived(mcp_landing_of(c->ring_records, i), rs->seq)))
      done[i] = rs->seq;
    else
      done[i] = rs->seq - MCP_SLOTS;
  }
}

/* After recovery: every slot still waiting asks for its data again, oldest first. The
 * entries are the same bytes as before, so one the sender already holds changes nothing. */
int mcp_xfer_recv_replay(struct mcp_comm *c)
{
  uint32_t s;
  int rc;

  for (s = c->seq - MCP_SLOTS; s != c->seq; s++) {
    const struct mcp_recv_slot *rs = &c->rslots[s % MCP_SLOTS];
    if (rs->req == NULL || rs->seq != s)
      continue;
    rc = post_cts(c, (int)(s % MCP_SLOTS), rs->req->n);
    if (rc != 0) {
      mcp_comm_fail(&c->link, MCP_ERR_SYSTEM,
                    "%s: posting the clear-to-send for seq %u to %s after recovery "
                    "failed: %s",
                    qp0_dev(c)->dc->info->name, s, c->link.peer_name, strerror(rc));
      return MCP_ERR_SYSTEM;
    }
  }
  return 0;
}

static __attribute__((noinline, cold)) int irecv_no_handle(struct mcp_comm *c, struct mcp_request *r,
                                                           size_t size)
{
  mcp_req_put(r);
  MCP_WARN("irecv of %zu bytes from %s without a memory handle", size, c->link.peer_name);
  return MCP_ERR_ARG;
}

/* The elements of a grouped receive (n >= 2); out of line, as its only caller's rare case. */
static __attribute__((noinline)) int irecv_group(struct mcp_comm *c, struct mcp_request *r, uint32_t seq,
                                                 struct mcp_cts_elem *e, int n, void **data, size_t *sizes,
                                                 int *tags, void **mhandles)
{
  int i;

  for (i = 0; i < n; i++) {
    const void *mh = mhandles[i];
    if (mh == NULL && sizes[i] > 0)
      return irecv_no_handle(c, r, sizes[i]);
    e[i].addr = (uintptr_t)data[i];
    e[i].size = sizes[i];
    e[i].rkey = mh != NULL ? mcp_mh_rkey(mh, 0) : 0;
    e[i].tag = tags[i];
    e[i].n = (uint16_t)n;
    e[i].idx = (uint8_t)i;
    e[i].flags = 0;
    e[i].seq = seq;
  }
  r->land = 0;
  return 0;
}

int mcp_xfer_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                   void **request)
{
  struct mcp_comm *c = recv_comm;
  int optional = *request == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION;
  struct mcp_request *r;
  struct mcp_recv_slot *rs;
  struct mcp_cts_elem *e;
  uint32_t seq;
  int slot, i, rc;

  *request = NULL;
  if ((rc = mcp_xfer_gate(c, MCP_GATE_POST)) != MCP_GATE_OPEN)
    return rc;
  if (n < 1 || n > MCP_MAX_RECVS) {
    MCP_WARN("irecv with %d buffers: 1..%d are supported", n, MCP_MAX_RECVS);
    return MCP_ERR_ARG;
  }
  seq = c->seq;
  slot = (int)(seq % MCP_SLOTS);
  /* The slot is busy until its data has arrived. */
  if (c->rslots[slot].req != NULL || c->inflight == MCP_RECV_INFLIGHT || (r = mcp_req_get(c)) == NULL)
    return mcp_xfer_not_yet(c);
  e = c->staging[slot].e;
  if (n == 1) {
    /* A single receive (every small message): its one element, set field by field. */
    const void *mh = mhandles[0];

    if (mh == NULL && sizes[0] > 0)
      return irecv_no_handle(c, r, sizes[0]);
    e->addr = (uintptr_t)data[0];
    e->size = sizes[0];
    e->rkey = mh != NULL ? mcp_mh_rkey(mh, 0) : 0;
    e->tag = tags[0];
    e->n = 1;
    e->idx = 0;
    e->seq = seq;
    /* A host buffer the CPU may write: the sender may land a small message in the
     * slot's line (struct mcp_landing), whose seq must not be this one until it does.
     * Not under the optional-completion hint: there the GPU polls the buffer itself for
     * LL/LL128 flags, which only the NIC's own write puts there in time. */
    r->land = c->land_recv && !optional && (mh != NULL ? mcp_mh_cpu_readable(mh) : sizes[0] == 0);
    e->flags = r->land ? MCP_CTS_LAND : 0;
    if (r->land) {
      __atomic_store_n(&mcp_landing_of(c->ring_records, slot)->seq, ~seq, __ATOMIC_RELAXED);
      r->data = data[0];
      r->size = sizes[0] < (size_t)MCP_LAND_TRAILER ? (int)sizes[0] : MCP_LAND_TRAILER;
    }
  } else if (irecv_group(c, r, seq, e, n, data, sizes, tags, mhandles) != 0) {
    return MCP_ERR_ARG;
  }
  if (c->link.ndevs > 1) {
    uint32_t *t = mcp_cts_rkeys_of(c->staging, c->cts_rkeys_n, slot);
    int k;

    for (i = 0; i < n; i++)
      for (k = 0; k < c->cts_rkeys_n; k++)
        t[i * c->cts_rkeys_n + k] = mhandles[i] != NULL ? mcp_mh_rkey(mhandles[i], k) : 0;
  }
  r->kind = MCP_REQ_RECV;
  r->seq = seq;
  r->n = n;
  rs = &c->rslots[slot];
  rs->req = r;
  rs->seq = seq;
  rs->expected = 0;
  rs->got = 0;
  rs->bytes = 0;

  /* The entry goes out now, whatever the caller does next (header). */
  rc = post_cts(c, slot, n);
  if (rc != 0) {
    rs->req = NULL;
    mcp_req_put(r);
    mcp_comm_fail(&c->link, MCP_ERR_SYSTEM, "%s: posting the clear-to-send for seq %u to %s failed: %s",
                  qp0_dev(c)->dc->info->name, seq, c->link.peer_name, strerror(rc));
    return MCP_ERR_SYSTEM;
  }
  c->seq = seq + 1;
  c->inflight++;
  c->wd_progress++;
  mcp_status_posted(c->cnt);
  *request = r;
  return 0;
}
