/*
 * mcp_xfer_flush.c - iflush, and the loopback flush QP it reads through.
 *
 * iflush reads one byte of the last received buffer back through a loopback QP, which
 * orders the NIC's earlier PCIe writes before NCCL's kernel reads GPU memory; it is
 * only needed for GPU buffers, or when MCPNET_FORCE_FLUSH=1 makes it run on host
 * memory (the lab's way of exercising it). A read the flush QP loses with its port is
 * posted again on a new QP (flush_lost, flush_retry), which test drives: test calls into
 * this file, never the other way, and the flush needs nothing from irecv.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/verbs.h"
#include "xfer/comm.h"

/* The member of QP 0, whose device names the flush in messages. */
static struct mcp_link_dev *qp0_dev(struct mcp_comm *c) { return mcp_link_dev_of(&c->link, 0); }

/* Member k's loopback QP and buffer registration: member 0's are the comm's original
 * fields, a fused comm's other members have their own. */
static struct ibv_qp **flush_qp_ref(struct mcp_comm *c, int k)
{
  return k == 0 ? &c->flush_qp : &c->flush_qps[k];
}
static struct ibv_mr **flush_mr_ref(struct mcp_comm *c, int k)
{
  return k == 0 ? &c->flush_mr : &c->flush_mrs[k];
}

/* Every live member has its loopback QP: a flush can be posted. A member failover left
 * out has no data landing through it any more, and its port may be down. */
static int flush_ready(struct mcp_comm *c)
{
  int k;

  for (k = 0; k < c->link.ndevs; k++)
    if (mcp_link_is_live(&c->link, k) && *flush_qp_ref(c, k) == NULL)
      return 0;
  return 1;
}

/* A loopback RC QP on member k: connected to itself, it reads our own memory through
 * that member's device. Its buffer and MR outlive a QP that a failed port took down; a
 * QP that does not reach RTS is dropped. */
static int flush_setup_member(struct mcp_comm *c, int k, int quiet)
{
  struct mcp_link_dev *m = &c->link.devs[k];
  struct ibv_qp **qp = flush_qp_ref(c, k);
  struct ibv_mr **mr = flush_mr_ref(c, k);
  struct ibv_qp_init_attr init;
  struct ibv_qp_attr attr;
  int rc;

  if (*qp != NULL)
    return 0;
  if (*mr == NULL)
    *mr = mcp_mr_internal(m->dc, c->flush_buf, sizeof(uint64_t), IBV_ACCESS_LOCAL_WRITE);
  if (*mr == NULL)
    return -ENOMEM;
  memset(&init, 0, sizeof(init));
  init.send_cq = m->cq;
  init.recv_cq = m->cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = MCP_RECV_REQS;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  *qp = mcp_ibv.create_qp(m->dc->pd, &init);
  if (*qp == NULL) {
    rc = -errno;
    if (!quiet)
      MCP_WARN("%s: cannot create the flush QP: %s", m->dc->info->name, strerror(-rc));
    return rc;
  }
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = (uint16_t)c->link.cfg.ib_pkey_index;
  attr.port_num = (uint8_t)m->dc->info->port;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  rc = mcp_ibv.modify_qp(*qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0)
    rc = rc > 0 ? -rc : -errno; /* verbs returns the errno; some providers set it */
  else
    rc = mcp_qp_to_rts_member(&c->link, k, *qp, 0, (*qp)->qp_num, 0, m->dc->info->gid.raw, m->dc->info->lid);
  if (rc != 0) {
    mcp_ibv.destroy_qp(*qp);
    *qp = NULL;
    return rc;
  }
  return 0;
}

static int flush_setup(struct mcp_comm *c, int quiet)
{
  int k, rc;

  if (c->flush_buf == NULL)
    c->flush_buf = calloc(1, sizeof(uint64_t));
  if (c->flush_buf == NULL)
    return -ENOMEM;
  for (k = 0; k < c->link.ndevs; k++)
    if (mcp_link_is_live(&c->link, k) && (rc = flush_setup_member(c, k, quiet)) != 0)
      return rc;
  return 0;
}

/* One signalled read of a byte of the request's buffer through each live member's flush
 * QP: data may have landed through any of them, and a read orders only its own device's
 * earlier writes (as NCCL's transport flushes every device of a fused NIC). 0 or a
 * negative errno. */
static int flush_post(struct mcp_comm *c, struct mcp_request *r)
{
  struct ibv_send_wr wr, *bad;
  struct ibv_sge sge;
  int k, rc;

  r->pending = __builtin_popcount(c->link.live);
  for (k = 0; k < c->link.ndevs; k++) {
    if (!mcp_link_is_live(&c->link, k))
      continue;
    memset(&wr, 0, sizeof(wr));
    sge.addr = (uintptr_t)c->flush_buf;
    sge.length = 1;
    sge.lkey = (*flush_mr_ref(c, k))->lkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)r->data;
    wr.wr.rdma.rkey = mcp_mh_rkey(r->mh, k);
    wr.wr_id = MCP_WR(MCP_WR_FLUSH, c->link.id, c->flush_gen, r->index);
    rc = ibv_post_send(*flush_qp_ref(c, k), &wr, &bad);
    if (rc != 0)
      return -rc; /* ibv_post_send returns the errno itself */
  }
  return 0;
}

int mcp_xfer_flush_notes(struct mcp_comm *c, const struct mcp_request *r, struct mcp_wr_note *w, int max)
{
  int k, n = 0;

  if (r->repost)
    return 0; /* nothing posted yet: its read waits for a new flush QP */
  for (k = 0; k < c->link.ndevs && n < max; k++) {
    if (!mcp_link_is_live(&c->link, k))
      continue;
    w[n].member = k;
    w[n].wr_id = MCP_WR(MCP_WR_FLUSH, c->link.id, c->flush_gen, r->index);
    w[n].opcode = IBV_WR_RDMA_READ;
    w[n].qp_num = (*flush_qp_ref(c, k))->qp_num;
    w[n].length = 1;
    n++;
  }
  return n;
}

void mcp_xfer_flush_lost(struct mcp_comm *c, uint64_t now_ns)
{
  int i;

  for (i = 0; i < c->nreqs; i++) {
    struct mcp_request *r = &c->reqs[i];
    if (r->in_use && !r->done && r->kind == MCP_REQ_FLUSH && !r->repost) {
      r->repost = 1;
      c->flush_reposts++;
    }
  }
  for (i = 0; i < c->link.ndevs; i++) {
    struct ibv_qp **qp = flush_qp_ref(c, i);

    if (*qp != NULL) {
      mcp_ibv.destroy_qp(*qp);
      *qp = NULL;
    }
  }
  c->flush_gen++; /* what the old QPs still complete is not ours any more */
  if (c->flush_lost_ns == 0)
    c->flush_lost_ns = now_ns;
}

int mcp_xfer_flush_retry(struct mcp_comm *c, uint64_t now_ns)
{
  int timeout_s = c->link.cfg.recovery_timeout_s, i, left = 0;

  if (now_ns < c->flush_next_try_ns)
    return 0;
  c->flush_next_try_ns = now_ns + 100000000ull;
  if (now_ns - c->flush_lost_ns > (uint64_t)timeout_s * 1000000000ull) {
    mcp_comm_fail(&c->link, MCP_ERR_SYSTEM,
                  "%s port %d: the loopback flush read failed and could not be made "
                  "again within MCPNET_RECOVERY_TIMEOUT=%d s (is the port still down?)",
                  qp0_dev(c)->dc->info->name, qp0_dev(c)->dc->info->port, timeout_s);
    return MCP_ERR_SYSTEM;
  }
  if (!flush_ready(c) && flush_setup(c, 1) != 0)
    return 0; /* the port is still down: the next test tries again */
  for (i = 0; i < c->nreqs; i++) {
    struct mcp_request *r = &c->reqs[i];
    if (!r->in_use || r->done || r->kind != MCP_REQ_FLUSH || !r->repost)
      continue;
    if (flush_post(c, r) != 0) {
      left++;
      continue;
    }
    r->repost = 0;
    c->flush_reposts--;
  }
  if (left == 0)
    MCP_INFO(NCCL_NET, "%s: flush reads lost with the flush QP were posted again on a new one",
             qp0_dev(c)->dc->info->name);
  return 0;
}

int mcp_xfer_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request)
{
  struct mcp_comm *c = recv_comm;
  struct mcp_request *r;
  int i, last = -1, gpu = 0, rc;

  *request = NULL;
  if ((rc = mcp_xfer_gate(c, MCP_GATE_FLUSH)) != MCP_GATE_OPEN)
    return rc;
  for (i = 0; i < n; i++) {
    const void *mh = mhandles[i];
    if (sizes[i] > 0 && mh != NULL) {
      last = i;
      gpu |= mcp_mh_type(mh) == NCCL_PTR_CUDA;
    }
  }
  if (last < 0 || (!gpu && !c->link.cfg.force_flush))
    return 0;
  if (!flush_ready(c) && c->flush_lost_ns == 0 && flush_setup(c, 0) != 0) {
    mcp_comm_fail(&c->link, MCP_ERR_SYSTEM, "%s: the loopback flush QP could not be set up",
                  qp0_dev(c)->dc->info->name);
    return MCP_ERR_SYSTEM;
  }
  r = mcp_req_get(c);
  if (r == NULL) {
    /* A NULL request would tell NCCL the flush is done: refuse loudly instead. */
    mcp_comm_fail(&c->link, MCP_ERR_INTERNAL, "iflush on %s: more than %d requests outstanding",
                  qp0_dev(c)->dc->info->name, MCP_RECV_REQS);
    return MCP_ERR_INTERNAL;
  }
  r->kind = MCP_REQ_FLUSH;
  r->land = 0; /* the request may have been a receive's */
  r->n = 0;
  r->pending = __builtin_popcount(c->link.live);
  r->data = data[last];
  r->mh = mhandles[last];
  /* While the flush QP is being replaced, this read waits with the lost ones. */
  r->repost = !flush_ready(c);
  c->flush_reposts += r->repost;
  rc = r->repost ? 0 : flush_post(c, r);
  if (rc != 0) {
    mcp_req_put(r);
    mcp_comm_fail(&c->link, MCP_ERR_SYSTEM, "%s: posting the flush read failed: %s",
                  qp0_dev(c)->dc->info->name, strerror(-rc));
    return MCP_ERR_SYSTEM;
  }
  c->wd_progress++;
  *request = r;
  if (__builtin_expect(c->prof_flush_parent != NULL, 0))
    mcp_xfer_prof_flush(c, r, data[0], request); /* right after a profiled receive */
  return 0;
}
