/*
 * mcp_fake_verbs.c - the in-memory verbs provider and the comm-pair builder of
 * mcp_fake_verbs.h (see there for why). Single-threaded, deterministic: work posted on
 * a QP is executed in posting order when a CQ is polled; nothing here looks at a clock.
 * Queues are as deep as they were created, as on an adapter: a send queue's entry is
 * taken at the post and given back only when a signalled completion at or after it is
 * polled (what mlx5 does; an unsignalled WR is retired by the next signalled one), so a
 * post to a full send queue fails with ENOMEM, as one past a receive queue's depth; and
 * a completion queue holds the entries it was created with, its overrun ending the test
 * (a real one fails every QP on it).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp_fake_verbs.h"
#include "core/param.h"
#include "core/verbs.h"
#include "xfer/comm.h"

#define FAKE_MAX_QPS 64
#define FAKE_MAX_MRS 256
#define FAKE_CQ_DEPTH 8192
#define FAKE_RQ_DEPTH 1024
#define FAKE_MAX_OPS 4096
#define FAKE_MAX_LOG 4096

struct fake_side {
  struct ibv_context ctx;
  struct ibv_pd pd;
  struct mcp_net_dev info;
  struct mcp_devctx dc;
  int index;
  int down; /* fake_pair_member_down */
};

struct fake_qp;

struct fake_cq {
  struct ibv_cq cq;
  struct ibv_wc wc[FAKE_CQ_DEPTH];
  /* Per entry: the send queue entries its polling retires (0 for a receive), of which
   * QP (its number too: the QP may be destroyed, and its slot reused, before the poll). */
  struct {
    struct fake_qp *qp;
    uint32_t qpn;
    int n;
  } retire[FAKE_CQ_DEPTH];
  int head, count;
  int depth; /* the cqe it was created with */
};

struct fake_qp {
  struct ibv_qp qp;
  struct fake_side *side;
  struct fake_cq *send_cq, *recv_cq;
  uint32_t dest_qpn; /* the peer QP, resolved when work executes */
  int max_inline;
  int sq_depth;           /* max_send_wr */
  int sq_used;            /* entries posted and not yet retired by a polled completion */
  int sq_done_unsig;      /* unsignalled WRs executed since the last completion: the next retires them */
  int sq_high;            /* the most sq_used has been */
  int sq_full;            /* posts refused with ENOMEM for want of room */
  int held, broken, land; /* see fake_pair_break */
  uint64_t rq[FAKE_RQ_DEPTH];
  int rq_head, rq_count;
  int rq_depth; /* max_recv_wr */
  int used;
};

struct fake_mr {
  struct ibv_mr mr;
  struct fake_side *side;
  int used;
};

/* Every registration the fake was asked for, in order, with its access flags. */
#define FAKE_MAX_REGS 256
static struct fake_reg reg_log[FAKE_MAX_REGS];
static int nregs;

/* A posted send WR waiting to be executed. */
struct fake_op {
  struct fake_qp *qp;
  struct ibv_send_wr wr; /* next, sg_list cleared */
  struct ibv_sge sge;
  int has_sge;
  unsigned char *inline_copy; /* IBV_SEND_INLINE: the bytes at post time */
};

static struct fake_qp qps[FAKE_MAX_QPS];
static struct fake_mr mrs[FAKE_MAX_MRS];
static struct fake_op ops[FAKE_MAX_OPS];
static int nops;
static uint32_t next_qpn = 0x100, next_key = 0x1000;
static int fail_next_post;
static int ncreated, ndestroyed;
static int rnr;
static struct fake_post post_log[FAKE_MAX_LOG];
static int nlog;
static struct fake_pair *cur_pair; /* for the log's side/QP names */

#define CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

static struct fake_qp *qp_of(struct ibv_qp *qp) { return CONTAINER(qp, struct fake_qp, qp); }
static struct fake_cq *cq_of(struct ibv_cq *cq) { return CONTAINER(cq, struct fake_cq, cq); }

static struct fake_qp *qp_by_num(uint32_t qpn)
{
  int i;

  for (i = 0; i < FAKE_MAX_QPS; i++)
    if (qps[i].used && qps[i].qp.qp_num == qpn)
      return &qps[i];
  return NULL;
}

/* Queues a completion; a send's (q != NULL) retires, when polled, its own entry and the
 * unsignalled ones executed before it. */
static void cq_push_for(struct fake_cq *cq, const struct ibv_wc *wc, struct fake_qp *q)
{
  int at;

  if (cq == NULL || cq->count == FAKE_CQ_DEPTH)
    abort(); /* a test that overflows the fake's own storage is broken */
  if (cq->count == cq->depth) {
    fprintf(stderr, "fake verbs: completion queue of %d entries overrun (QP %#x, wr_id %#llx)\n", cq->depth,
            wc->qp_num, (unsigned long long)wc->wr_id);
    abort(); /* an adapter would fail every QP on this CQ: the plugin sized it wrong */
  }
  at = (cq->head + cq->count++) % FAKE_CQ_DEPTH;
  cq->wc[at] = *wc;
  cq->retire[at].qp = q;
  cq->retire[at].qpn = q != NULL ? q->qp.qp_num : 0;
  cq->retire[at].n = 0;
  if (q != NULL) {
    cq->retire[at].n = 1 + q->sq_done_unsig;
    q->sq_done_unsig = 0;
  }
}

static void cq_push(struct fake_cq *cq, const struct ibv_wc *wc) { cq_push_for(cq, wc, NULL); }

/* The memory a key grants on a side: the registration must cover [addr, addr+len). */
static int key_covers(const struct fake_side *side, uint32_t key, uint64_t addr, uint64_t len)
{
  int i;

  for (i = 0; i < FAKE_MAX_MRS; i++) {
    const struct fake_mr *m = &mrs[i];
    if (m->used && m->side == side && (m->mr.rkey == key || m->mr.lkey == key) &&
        (uintptr_t)m->mr.addr <= addr && addr + len <= (uintptr_t)m->mr.addr + m->mr.length)
      return 1;
  }
  return 0;
}

static struct fake_qp *pair_qp(struct fake_pair *p, int side, int qp);

/* ---- the verbs ---- */

static int fake_post_send_nolock(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
  struct fake_qp *q = qp_of(ibqp);

  for (; wr != NULL; wr = wr->next) {
    struct fake_op *op;
    uint32_t len = wr->num_sge > 0 ? wr->sg_list[0].length : 0;

    if (fail_next_post != 0) {
      int err = fail_next_post;
      fail_next_post = 0;
      *bad = wr;
      return err;
    }
    if (wr->num_sge > 1 || nops == FAKE_MAX_OPS ||
        ((wr->send_flags & IBV_SEND_INLINE) && (int)len > q->max_inline)) {
      *bad = wr;
      return EINVAL;
    }
    if (q->sq_used == q->sq_depth) {
      q->sq_full++;
      *bad = wr;
      return ENOMEM;
    }
    if (++q->sq_used > q->sq_high)
      q->sq_high = q->sq_used;
    op = &ops[nops++];
    memset(op, 0, sizeof(*op));
    op->qp = q;
    op->wr = *wr;
    op->wr.next = NULL;
    op->wr.sg_list = NULL;
    if (wr->num_sge == 1) {
      op->sge = wr->sg_list[0];
      op->has_sge = 1;
      if (wr->send_flags & IBV_SEND_INLINE) {
        op->inline_copy = malloc(len ? len : 1);
        memcpy(op->inline_copy, (void *)(uintptr_t)op->sge.addr, len);
      }
    }
    if (nlog < FAKE_MAX_LOG) {
      struct fake_post *l = &post_log[nlog++];
      int s, i;
      l->side = -1;
      l->qp = -1;
      l->member = 0;
      for (s = 0; cur_pair != NULL && s < 2; s++) {
        struct mcp_comm *c = s == FAKE_SEND_SIDE ? cur_pair->send : cur_pair->recv;
        for (i = 0; i < c->link.nqps; i++)
          if (c->link.qp[i] == ibqp) {
            l->side = s;
            l->qp = i;
          }
        if (c->flush_qp == ibqp)
          l->side = s;
        for (i = 1; i < MCP_LINK_MAX_DEVS; i++)
          if (c->flush_qps[i] != NULL && c->flush_qps[i] == ibqp) {
            l->side = s;
            l->member = i;
          }
      }
      l->qp_num = ibqp->qp_num;
      l->opcode = wr->opcode;
      l->send_flags = wr->send_flags;
      l->imm = ntohl(wr->imm_data);
      l->len = len;
      l->wr_id = wr->wr_id;
      l->remote_addr = wr->wr.rdma.remote_addr;
    }
  }
  return 0;
}

static int fake_post_recv_nolock(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
  struct fake_qp *q = qp_of(ibqp);

  for (; wr != NULL; wr = wr->next) {
    if (q->rq_count == q->rq_depth) {
      *bad = wr;
      return ENOMEM;
    }
    q->rq[(q->rq_head + q->rq_count++) % FAKE_RQ_DEPTH] = wr->wr_id;
  }
  return 0;
}

/* A completion of QP qpn on cq; with sq, a send WR's of that QP (it retires entries). */
static void complete_on(struct fake_cq *cq, struct fake_qp *sq, uint64_t wr_id, enum ibv_wc_status st,
                        enum ibv_wc_opcode opc, uint32_t qpn)
{
  struct ibv_wc wc;

  memset(&wc, 0, sizeof(wc));
  wc.wr_id = wr_id;
  wc.status = st;
  wc.opcode = opc;
  wc.qp_num = qpn;
  cq_push_for(cq, &wc, sq);
}

/* A send WR's completion on QP q's send CQ. */
static void complete(struct fake_qp *q, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode opc)
{
  complete_on(q->send_cq, q, wr_id, st, opc, q->qp.qp_num);
}

/* Executes one op: the bytes move, the completions are queued. */
static void execute(struct fake_op *op)
{
  struct fake_qp *q = op->qp, *peer = qp_by_num(q->dest_qpn);
  struct ibv_send_wr *wr = &op->wr;
  uint32_t len = op->has_sge ? op->sge.length : 0;
  enum ibv_wc_opcode opc = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
  enum ibv_wc_status st = IBV_WC_SUCCESS;
  int signalled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;

  if (q->broken && !q->land) {
    /* The first WR of a broken QP reports the loss, the rest are flushed. */
    st = q->broken == 1 ? IBV_WC_RETRY_EXC_ERR : IBV_WC_WR_FLUSH_ERR;
    q->broken = 2;
    complete(q, wr->wr_id, st, opc);
    return;
  }
  if (peer != NULL && peer->broken) { /* the other end is gone: nothing lands */
    complete(q, wr->wr_id, q->broken ? IBV_WC_WR_FLUSH_ERR : IBV_WC_RETRY_EXC_ERR, opc);
    q->broken = 2;
    return;
  }
  if (peer == NULL ||
      (op->has_sge && op->inline_copy == NULL && !key_covers(q->side, op->sge.lkey, op->sge.addr, len))) {
    complete(q, wr->wr_id, IBV_WC_LOC_PROT_ERR, opc);
    q->broken = 2;
    return;
  }
  if (len > 0 && !key_covers(peer->side, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len)) {
    complete(q, wr->wr_id, IBV_WC_REM_ACCESS_ERR, opc);
    q->broken = 2;
    return;
  }
  if (wr->opcode == IBV_WR_RDMA_READ) {
    memcpy((void *)(uintptr_t)op->sge.addr, (void *)(uintptr_t)wr->wr.rdma.remote_addr, len);
  } else if (len > 0) {
    memcpy((void *)(uintptr_t)wr->wr.rdma.remote_addr,
           op->inline_copy != NULL ? op->inline_copy : (unsigned char *)(uintptr_t)op->sge.addr, len);
  }
  if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    struct ibv_wc wc;
    if (peer->rq_count == 0 || peer->broken) {
      rnr++;
      complete(q, wr->wr_id, IBV_WC_RNR_RETRY_EXC_ERR, opc);
      q->broken = 2;
      return;
    }
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = peer->rq[peer->rq_head];
    peer->rq_head = (peer->rq_head + 1) % FAKE_RQ_DEPTH;
    peer->rq_count--;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = wr->imm_data;
    wc.byte_len = len;
    wc.qp_num = peer->qp.qp_num;
    cq_push(peer->recv_cq, &wc);
  }
  if (q->broken) /* landed, but the acknowledgement was lost with the link */
    complete(q, wr->wr_id, IBV_WC_WR_FLUSH_ERR, opc);
  else if (signalled)
    complete(q, wr->wr_id, IBV_WC_SUCCESS, opc);
  else
    q->sq_done_unsig++;
}

static int progress_nolock(void)
{
  int i, kept = 0, done = 0;

  for (i = 0; i < nops; i++) {
    struct fake_op *op = &ops[i];
    if (op->qp->held) {
      ops[kept++] = *op;
      continue;
    }
    execute(op);
    free(op->inline_copy);
    done++;
  }
  nops = kept;
  return done;
}

void fake_pair_release_n(struct fake_pair *p, int side, int qp, int n)
{
  struct fake_qp *q = pair_qp(p, side, qp);
  int i, kept = 0;

  for (i = 0; i < nops; i++) {
    if (ops[i].qp == q && n > 0) {
      execute(&ops[i]);
      free(ops[i].inline_copy);
      n--;
    } else {
      ops[kept++] = ops[i];
    }
  }
  nops = kept;
}

void fake_pair_release_bytes(struct fake_pair *p, int side, int qp, uint32_t nbytes)
{
  struct fake_qp *q = pair_qp(p, side, qp);
  int i;

  for (i = 0; i < nops; i++) {
    struct fake_op *op = &ops[i];
    if (op->qp != q)
      continue;
    if (op->has_sge && op->wr.opcode != IBV_WR_RDMA_READ) {
      uint32_t len = op->sge.length < nbytes ? op->sge.length : nbytes;
      memcpy((void *)(uintptr_t)op->wr.wr.rdma.remote_addr,
             op->inline_copy != NULL ? op->inline_copy : (unsigned char *)(uintptr_t)op->sge.addr, len);
    }
    return;
  }
}

static int fake_poll_cq_nolock(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
  struct fake_cq *cq = cq_of(ibcq);
  int n = 0;

  fake_progress();
  while (n < num && cq->count > 0) {
    struct fake_qp *q = cq->retire[cq->head].qp;

    if (q != NULL && q->used && q->qp.qp_num == cq->retire[cq->head].qpn)
      q->sq_used -= cq->retire[cq->head].n;
    wc[n++] = cq->wc[cq->head];
    cq->head = (cq->head + 1) % FAKE_CQ_DEPTH;
    cq->count--;
  }
  return n;
}

static struct fake_side *side_of_pd(struct ibv_pd *pd) { return CONTAINER(pd, struct fake_side, pd); }

static struct ibv_cq *fake_create_cq_nolock(struct ibv_context *ctx, int cqe, void *cq_context,
                                            struct ibv_comp_channel *channel, int comp_vector)
{
  struct fake_cq *cq = calloc(1, sizeof(*cq));

  if (cqe < 1 || cqe > FAKE_CQ_DEPTH) {
    free(cq);
    errno = EINVAL;
    return NULL;
  }
  cq->depth = cqe;
  (void)channel;
  (void)comp_vector;
  cq->cq.context = ctx;
  cq->cq.cq_context = cq_context;
  return &cq->cq;
}

static int fake_destroy_cq_nolock(struct ibv_cq *cq)
{
  free(cq_of(cq));
  return 0;
}

/* The inline capacity the fake provider reports for a QP that asks for less: what a
 * pair's options say (0: what was asked), as a provider that rounds its send-queue
 * entries up reports the room they have. The comm's QPs ask for little (issue 16). */
static int provider_inline;

static struct ibv_qp *fake_create_qp_nolock(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
  struct fake_side *s = side_of_pd(pd);
  int i;

  if (init->cap.max_inline_data > 256 || init->cap.max_recv_wr > FAKE_RQ_DEPTH) {
    errno = EINVAL;
    return NULL;
  }
  if ((int)init->cap.max_inline_data < provider_inline)
    init->cap.max_inline_data = (uint32_t)provider_inline;
  for (i = 0; i < FAKE_MAX_QPS; i++) {
    struct fake_qp *q = &qps[i];
    if (q->used)
      continue;
    memset(q, 0, sizeof(*q));
    q->used = 1;
    q->side = s;
    q->qp.context = &s->ctx;
    q->qp.pd = pd;
    q->qp.qp_num = next_qpn++;
    q->qp.qp_context = init->qp_context;
    q->qp.qp_type = init->qp_type;
    q->send_cq = cq_of(init->send_cq);
    q->recv_cq = cq_of(init->recv_cq);
    q->max_inline = (int)init->cap.max_inline_data;
    q->sq_depth = (int)init->cap.max_send_wr;
    q->rq_depth = (int)init->cap.max_recv_wr;
    ncreated++;
    return &q->qp;
  }
  errno = ENOMEM;
  return NULL;
}

struct ibv_cq *fake_qp_send_cq(struct ibv_qp *qp) { return &qp_of(qp)->send_cq->cq; }

/* fake_fail_next_rtr: how many RTR steps still fail, with which errno; and how many
 * RTR steps were tried since. */
static atomic_int fail_rtr_left, fail_rtr_err, rtr_tries;

static int fake_modify_qp_nolock(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
  if ((mask & IBV_QP_DEST_QPN) != 0)
    atomic_fetch_add(&rtr_tries, 1);
  if ((mask & IBV_QP_DEST_QPN) != 0 && atomic_load(&fail_rtr_left) > 0) {
    atomic_fetch_sub(&fail_rtr_left, 1);
    errno = atomic_load(&fail_rtr_err);
    return -1;
  }
  if ((mask & IBV_QP_DEST_QPN) != 0 && qp_of(ibqp)->side->down) {
    errno = ETIMEDOUT; /* the port is down: the peer's address does not resolve */
    return -1;
  }
  if ((mask & IBV_QP_DEST_QPN) != 0)
    qp_of(ibqp)->dest_qpn = attr->dest_qp_num;
  return 0;
}

static int fake_destroy_qp_nolock(struct ibv_qp *ibqp)
{
  struct fake_qp *q = qp_of(ibqp);
  int i, kept = 0;

  /* A destroyed QP's work and receive WRs vanish without completions. */
  for (i = 0; i < nops; i++) {
    if (ops[i].qp == q)
      free(ops[i].inline_copy);
    else
      ops[kept++] = ops[i];
  }
  nops = kept;
  q->used = 0;
  ndestroyed++;
  return 0;
}

static int fail_next_reg;

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t length, unsigned access, int dmabuf)
{
  int i;

  if (nregs < FAKE_MAX_REGS)
    reg_log[nregs++] = (struct fake_reg){addr, length, access, dmabuf};
  if (fail_next_reg != 0) {
    errno = fail_next_reg;
    fail_next_reg = 0;
    return NULL;
  }
  for (i = 0; i < FAKE_MAX_MRS; i++) {
    struct fake_mr *m = &mrs[i];
    if (m->used)
      continue;
    memset(m, 0, sizeof(*m));
    m->used = 1;
    m->side = side_of_pd(pd);
    m->mr.pd = pd;
    m->mr.context = pd->context;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.lkey = next_key++;
    m->mr.rkey = next_key++;
    return &m->mr;
  }
  errno = ENOMEM;
  return NULL;
}

static struct ibv_mr *fake_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                  unsigned access)
{
  (void)iova;
  return reg(pd, addr, length, access, 0);
}

static struct ibv_mr *fake_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                         int fd, int access)
{
  (void)offset;
  (void)fd;
  return reg(pd, (void *)(uintptr_t)iova, length, (unsigned)access, 1);
}

static int fake_dereg_mr(struct ibv_mr *mr)
{
  CONTAINER(mr, struct fake_mr, mr)->used = 0;
  return 0;
}

static const char *fake_wc_status_str(enum ibv_wc_status st)
{
  switch (st) {
  case IBV_WC_SUCCESS: return "success";
  case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
  case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
  case IBV_WC_REM_ACCESS_ERR: return "remote access error";
  default: return "fake error";
  }
}

/* A member's port: ACTIVE, or DOWN while fake_pair_member_down holds it down. */
static int fake_query_port_nolock(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
  struct fake_side *side = CONTAINER(ctx, struct fake_side, ctx);
  struct ibv_port_attr *a = (struct ibv_port_attr *)(void *)attr;

  (void)port;
  memset(a, 0, sizeof(*a));
  a->state = side->down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  return 0;
}

/* The setup threads of the code under test (QP walks, rebuilds) call create, modify,
 * destroy and query from their own threads while the test's thread posts and polls: one
 * lock (recursive: the fake calls itself) keeps the fake's tables whole. */
static pthread_mutex_t fake_lock;
static pthread_once_t fake_lock_once = PTHREAD_ONCE_INIT;

static void fake_lock_init(void)
{
  pthread_mutexattr_t a;

  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&fake_lock, &a);
  pthread_mutexattr_destroy(&a);
}

static void lock(void)
{
  pthread_once(&fake_lock_once, fake_lock_init);
  pthread_mutex_lock(&fake_lock);
}

static void unlock(void) { pthread_mutex_unlock(&fake_lock); }

#define LOCKED(type, name, params, args) \
  static type name params                \
  {                                      \
    type rc;                             \
    lock();                              \
    rc = name##_nolock args;             \
    unlock();                            \
    return rc;                           \
  }
LOCKED(int, fake_post_send, (struct ibv_qp * q, struct ibv_send_wr *wr, struct ibv_send_wr **bad),
       (q, wr, bad))
LOCKED(int, fake_post_recv, (struct ibv_qp * q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad),
       (q, wr, bad))
LOCKED(int, fake_poll_cq, (struct ibv_cq * cq, int num, struct ibv_wc *wc), (cq, num, wc))
LOCKED(struct ibv_cq *, fake_create_cq,
       (struct ibv_context * ctx, int cqe, void *cqc, struct ibv_comp_channel *ch, int vec),
       (ctx, cqe, cqc, ch, vec))
LOCKED(int, fake_destroy_cq, (struct ibv_cq * cq), (cq))
LOCKED(struct ibv_qp *, fake_create_qp, (struct ibv_pd * pd, struct ibv_qp_init_attr *init), (pd, init))
LOCKED(int, fake_modify_qp, (struct ibv_qp * q, struct ibv_qp_attr *attr, int mask), (q, attr, mask))
LOCKED(int, fake_destroy_qp, (struct ibv_qp * q), (q))
LOCKED(int, fake_query_port, (struct ibv_context * ctx, uint8_t port, struct _compat_ibv_port_attr *attr),
       (ctx, port, attr))

int fake_progress(void)
{
  int n;

  lock();
  n = progress_nolock();
  unlock();
  return n;
}

void fake_verbs_install(void)
{
  mcp_ibv.query_port = fake_query_port;
  mcp_ibv.create_cq = fake_create_cq;
  mcp_ibv.destroy_cq = fake_destroy_cq;
  mcp_ibv.create_qp = fake_create_qp;
  mcp_ibv.modify_qp = fake_modify_qp;
  mcp_ibv.destroy_qp = fake_destroy_qp;
  mcp_ibv.reg_mr_iova2 = fake_reg_mr;
  mcp_ibv.reg_dmabuf_mr = fake_reg_dmabuf_mr;
  mcp_ibv.dereg_mr = fake_dereg_mr;
  mcp_ibv.wc_status_str = fake_wc_status_str;
  fail_next_post = 0;
  rnr = 0;
  ncreated = ndestroyed = 0;
  nlog = 0;
}

/* ---- the comm pair ---- */

/* Member k of side index: "fake0" / "fake1" for member 0, as before members existed. */
static struct fake_side *side_new(int index, int k)
{
  struct fake_side *s = calloc(1, sizeof(*s));

  s->index = index;
  s->ctx.ops.post_send = fake_post_send;
  s->ctx.ops.post_recv = fake_post_recv;
  s->ctx.ops.poll_cq = fake_poll_cq;
  s->pd.context = &s->ctx;
  if (k == 0) {
    snprintf(s->info.name, sizeof(s->info.name), "fake%d", index);
    snprintf(s->info.ibdev, sizeof(s->info.ibdev), "fake%d", index);
  } else {
    snprintf(s->info.name, sizeof(s->info.name), "fake%d_m%d", index, k);
    snprintf(s->info.ibdev, sizeof(s->info.ibdev), "fake%d_m%d", index, k);
  }
  snprintf(s->info.driver, sizeof(s->info.driver), "fake");
  s->info.port = 1;
  s->info.link_layer = IBV_LINK_LAYER_INFINIBAND;
  s->info.lid = (uint16_t)(16 * k + index + 1);
  s->info.active_mtu = IBV_MTU_1024;
  s->info.sl = -1;
  s->info.tc = -1;
  s->dc.info = &s->info;
  s->dc.ctx = &s->ctx;
  s->dc.pd = &s->pd;
  /* As a devctx takes it from its fabric (struct mcp_fabric_cfg). */
  s->dc.data_access = mcp_mr_data_access(mcp_param_process());
  s->dc.refs = 1000; /* never closed by a comm */
  pthread_mutex_init(&s->dc.mr_lock, NULL);
  mcp_list_init(&s->dc.mrs);
  pthread_mutex_init(&s->dc.ev_lock, NULL);
  pthread_mutex_init(&s->dc.gid_lock, NULL);
  pthread_cond_init(&s->dc.gid_cond, NULL);
  return s;
}

static struct mcp_comm *comm_new(struct fake_side **members, int ndevs, int kind, const char *peer,
                                 int publish)
{
  struct mcp_comm *c = calloc(1, sizeof(*c));
  int k;

  if (publish) /* before xfer's alloc, which points the counters at the slot */
    c->link.st = mcp_status_open(kind, 0);

  c->link.kind = kind;
  mcp_link_cfg_fill(&c->link.cfg, mcp_param_process()); /* as conn's comm_new copies it */
  c->link.ops = &mcp_xfer_link_ops; /* what net hands a real comm: recovery drains and replays through it */
  c->link.ndevs = ndevs;            /* as mcp_link_open_members leaves it */
  for (k = 0; k < ndevs; k++)
    c->link.devs[k].dc = &members[k]->dc;
  c->link.up = c->link.live = mcp_link_members_all(ndevs); /* every member, as at setup */
  mcp_link_set_remote_ndevs(&c->link, 1);
  c->seq = 1;
  c->link.mtu = IBV_MTU_1024;
  /* The 100 ms liveness check reads the clock; not due in these tests (they have no
   * out-of-band peer). A test of it sets its own. */
  c->next_alive_check_ns = UINT64_MAX;
  snprintf(c->link.peer_name, sizeof(c->link.peer_name), "%s", peer);
  return c;
}

/* Rings, requests and QPs as mcp_conn_setup.c's comm_resources makes them: xfer's own
 * alloc (rings registered on every member), then the QPs striped over the members. */
static void comm_resources(struct mcp_comm *c, int nqps)
{
  if (c->link.ops->alloc(&c->link) != 0)
    abort();
  if (mcp_qp_create_all(&c->link, nqps, c->link.sq_depth, c->link.rq_depth) != 0)
    abort();
}

static void connect_qps(struct fake_pair *p)
{
  struct mcp_comm *s = p->send, *r = p->recv;
  int i;

  /* QP i of each end on its member i % ndevs, toward the same QP i of the other. */
  for (i = 0; i < s->link.nqps; i++) {
    if (mcp_qp_to_rts_member(&s->link, mcp_link_dev_index(&s->link, i), s->link.qp[i], s->link.psn[i],
                             r->link.qp[i]->qp_num, r->link.psn[i],
                             mcp_link_dev_of(&r->link, i)->dc->info->gid.raw,
                             mcp_link_dev_of(&r->link, i)->dc->info->lid) != 0 ||
        mcp_qp_to_rts_member(&r->link, mcp_link_dev_index(&r->link, i), r->link.qp[i], r->link.psn[i],
                             s->link.qp[i]->qp_num, s->link.psn[i],
                             mcp_link_dev_of(&s->link, i)->dc->info->gid.raw,
                             mcp_link_dev_of(&s->link, i)->dc->info->lid) != 0)
      abort();
  }
  for (i = 0; i < r->link.nqps; i++)
    if (mcp_qp_post_recvs(&r->link, i, MCP_RQ_DEPTH) != 0)
      abort();
}

struct fake_pair *fake_pair_make(const struct fake_pair_opts *o)
{
  struct fake_pair *p = calloc(1, sizeof(*p));
  int nqps = o != NULL && o->nqps > 0 ? o->nqps : 1;
  struct mcp_comm *s, *r;
  int side, k;

  for (side = 0; side < 2; side++) {
    p->ndevs[side] = o != NULL && o->ndevs[side] > 0 ? o->ndevs[side] : 1;
    for (k = 0; k < p->ndevs[side]; k++)
      p->member[side][k] = side_new(side, k);
    p->side[side] = p->member[side][0];
  }
  /* QPs per member, times the larger end's members (mcp_link_qp_count, as connect does). */
  nqps = mcp_link_qp_count(nqps, p->ndevs[0], p->ndevs[1]);
  s = p->send = comm_new(p->member[0], p->ndevs[0], MCP_COMM_SEND, "fake-receiver pid 2 (192.0.2.2:40000)",
                         o != NULL && o->publish);
  r = p->recv = comm_new(p->member[1], p->ndevs[1], MCP_COMM_RECV, "fake-sender pid 1 (192.0.2.1:40000)",
                         o != NULL && o->publish);
  s->link.remote_ndevs = p->ndevs[1];
  r->link.remote_ndevs = p->ndevs[0];
  /* Stand-ins for the out-of-band connection: alive, no frames. */
  p->stub[0] = s->link.stream = mcp_oob_test_stream_new();
  p->stub[1] = r->link.stream = mcp_oob_test_stream_new();
  provider_inline = o != NULL && o->max_inline > 0 ? o->max_inline : 0;
  comm_resources(s, nqps);
  comm_resources(r, nqps);
  /* Each side writes into the other's ring (the endpoints' ring_addr/ring_rkey). */
  s->remote_ring = (uintptr_t)r->ring;
  s->remote_rkey = r->ring_mr->rkey;
  r->remote_ring = (uintptr_t)s->ring;
  r->remote_rkey = s->ring_mr->rkey;
  /* What link_up takes from the peer's endpoint: its ring's key on each of its members. */
  for (k = 0; k < p->ndevs[1]; k++)
    s->remote_rkeys[k] = r->ring_mrs[k]->rkey;
  for (k = 0; k < p->ndevs[0]; k++)
    r->remote_rkeys[k] = s->ring_mrs[k]->rkey;
  if (o != NULL && o->max_inline > 0)
    s->link.max_inline = r->link.max_inline = o->max_inline;
  s->data_inline = r->data_inline = o != NULL && o->data_inline > 0 ? o->data_inline : 64;
  if (s->data_inline > s->link.max_inline)
    s->data_inline = r->data_inline = s->link.max_inline;
  mcp_xfer_land_setup(s); /* as link_up: which messages land, and the CTS's keys */
  mcp_xfer_land_setup(r);
  mcp_xfer_link_ops.members_moved(&s->link);
  mcp_xfer_link_ops.members_moved(&r->link);
  connect_qps(p);
  cur_pair = p;
  return p;
}

static void comm_free(struct mcp_comm *c)
{
  struct timespec nap = {0, 200000};
  int i;

  /* A recovery's QP walk still on its thread reads the comm: it finishes first (the
   * fake's walks never block; a real comm would hand it its QPs and a reference). */
  while (c->link.qp_job != NULL && mcp_qp_connect_poll(&c->link) == 0)
    nanosleep(&nap, NULL);
  mcp_status_close(c->link.st);

  for (i = 0; i < c->link.nqps; i++)
    if (c->link.qp[i] != NULL)
      mcp_ibv.destroy_qp(c->link.qp[i]);
  c->link.ops->release(&c->link); /* rings, their registrations on every member, flush QPs */
  for (i = 0; i < c->link.ndevs; i++)
    if (c->link.devs[i].cq != NULL)
      mcp_ibv.destroy_cq(c->link.devs[i].cq);
  free(c);
}

void fake_pair_free(struct fake_pair *p)
{
  comm_free(p->send);
  comm_free(p->recv);
  /* The cache's leftovers (a test that did not deregister) go with the device. */
  for (int side = 0; side < 2; side++)
    for (int k = 0; k < p->ndevs[side]; k++) {
      struct fake_side *m = p->member[side][k];
      while (!mcp_list_empty(&m->dc.mrs))
        mcp_mr_release(mcp_list_first(&m->dc.mrs, struct mcp_mr, link));
      free(m);
    }
  free(p->stub[0]);
  free(p->stub[1]);
  if (cur_pair == p)
    cur_pair = NULL;
  free(p);
}

struct mcp_mr *fake_pair_reg(struct fake_pair *p, int side, void *buf, size_t len, int type)
{
  struct mcp_mr *m = NULL;

  if (mcp_mr_register(&p->side[side]->dc, buf, len, type, &m) != 0)
    return NULL;
  return m;
}

struct mcp_mr *fake_pair_reg_dmabuf(struct fake_pair *p, int side, void *buf, size_t len, int type)
{
  struct mcp_mr *m = NULL;

  if (mcp_mr_register_dmabuf(&p->side[side]->dc, buf, len, type, 0, 99, &m) != 0)
    return NULL;
  return m;
}

void fake_pair_dereg(struct mcp_mr *mh) { mcp_mr_release(mh); }

struct mcp_devctx *fake_pair_devctx(struct fake_pair *p, int side) { return &p->side[side]->dc; }

int fake_regs(const struct fake_reg **log)
{
  *log = reg_log;
  return nregs;
}

void fake_regs_reset(void) { nregs = 0; }

struct mcp_comm *fake_comm_alloc(struct fake_pair *p, int side)
{
  struct mcp_comm *c =
    comm_new(p->member[side], p->ndevs[side], side == FAKE_SEND_SIDE ? MCP_COMM_SEND : MCP_COMM_RECV, "-", 0);

  if (mcp_xfer_link_ops.alloc(&c->link) != 0)
    abort();
  return c;
}

void fake_comm_release(struct mcp_comm *c)
{
  mcp_xfer_link_ops.release(&c->link);
  free(c);
}

void *fake_pair_reg_mh(struct fake_pair *p, int side, void *buf, size_t len, int type)
{
  struct mcp_comm *c = side == FAKE_SEND_SIDE ? p->send : p->recv;
  void *mh = NULL;

  if (c->link.ndevs == 1)
    return fake_pair_reg(p, side, buf, len, type);
  if (mcp_xfer_reg_mr_set(c, buf, len, type, 0, -1, &mh) != 0)
    return NULL;
  return mh;
}

void fake_pair_dereg_mh(struct fake_pair *p, int side, void *mh)
{
  (void)p;
  (void)side;
  if (mcp_mh_is_set(mh))
    mcp_xfer_dereg_mr_set(mh);
  else
    mcp_mr_release(mh);
}

int fake_comm_nqps(const struct mcp_comm *c) { return c->link.nqps; }
int fake_comm_qp_member(const struct mcp_comm *c, int qp) { return mcp_link_dev_index(&c->link, qp); }
int fake_comm_qp_remote_member(const struct mcp_comm *c, int qp) { return mcp_link_remote_dev(&c->link, qp); }
int fake_comm_members_up(const struct mcp_comm *c) { return c->link.up; }
int fake_comm_members_live(const struct mcp_comm *c) { return c->link.live; }

int fake_count_posts_on_member(int side, int k, enum ibv_wr_opcode opcode)
{
  struct mcp_comm *c;
  int i, n = 0;

  if (cur_pair == NULL)
    return 0;
  c = side == FAKE_SEND_SIDE ? cur_pair->send : cur_pair->recv;
  for (i = 0; i < nlog; i++)
    if (post_log[i].side == side && post_log[i].opcode == opcode &&
        ((post_log[i].qp >= 0 && mcp_link_dev_index(&c->link, post_log[i].qp) == k) ||
         (post_log[i].qp < 0 && post_log[i].member == k)))
      n++;
  return n;
}

void fake_pair_break_member(struct fake_pair *p, int side, int k, int land)
{
  struct mcp_comm *c = side == FAKE_SEND_SIDE ? p->send : p->recv;
  int i;

  for (i = 0; i < c->link.nqps; i++)
    if (mcp_link_dev_index(&c->link, i) == k)
      fake_pair_break(p, side, i, land);
}

struct mcp_net_dev *fake_pair_member_info(struct fake_pair *p, int side, int k)
{
  return &p->member[side][k]->info;
}

void fake_pair_member_down(struct fake_pair *p, int side, int k, int down)
{
  p->member[side][k]->down = down;
  if (!down) /* the adapter's PORT_ACTIVE event, as the devctx counts it */
    atomic_fetch_add(&p->member[side][k]->dc.port_up_gen, 1);
}

void fake_pair_smash_member_rkeys(struct fake_pair *p)
{
  int n = p->send->cts_rkeys_n, slot, i, k;

  for (slot = 0; slot < MCP_SLOTS; slot++) {
    uint32_t *t = mcp_cts_rkeys_of(p->send->ring, n, slot);

    for (i = 0; i < MCP_MAX_RECVS; i++)
      for (k = 1; k < n; k++)
        t[i * n + k] = t[i * n];
  }
}

void fake_pair_poke_cts(struct fake_pair *p, uint32_t seq, int elem, int idx, int64_t size)
{
  struct mcp_cts_elem *e = &p->send->ring_elems[seq % MCP_SLOTS].e[elem];

  if (idx >= 0)
    e->idx = (uint8_t)idx;
  if (size >= 0)
    e->size = (uint64_t)size;
}

void fake_pair_poke_record_size(struct fake_pair *p, uint32_t seq, int i, uint32_t size)
{
  p->recv->ring_records[seq % MCP_SLOTS].sizes[i] = size;
}

static struct fake_qp *pair_qp(struct fake_pair *p, int side, int qp)
{
  struct mcp_comm *c = side == FAKE_SEND_SIDE ? p->send : p->recv;

  return qp_of(c->link.qp[qp]);
}

void fake_pair_hold(struct fake_pair *p, int side, int qp, int hold) { pair_qp(p, side, qp)->held = hold; }

struct fake_sq_use fake_pair_sq_use(struct fake_pair *p, int side, int qp)
{
  const struct fake_qp *q = pair_qp(p, side, qp);

  return (struct fake_sq_use){q->sq_depth, q->sq_high, q->sq_full};
}

void fake_pair_break(struct fake_pair *p, int side, int qp, int land)
{
  struct fake_qp *q = pair_qp(p, side, qp);

  q->broken = 1;
  q->land = land;
  /* Receive WRs of a QP in error are flushed to its CQ. */
  while (q->rq_count > 0) {
    complete_on(q->recv_cq, NULL, q->rq[q->rq_head], IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, q->qp.qp_num);
    q->rq_head = (q->rq_head + 1) % FAKE_RQ_DEPTH;
    q->rq_count--;
  }
}

void fake_fail_next_post(int err) { fail_next_post = err; }

int fake_fail_next_rtr(int n, int err)
{
  int tries = atomic_exchange(&rtr_tries, 0);

  atomic_store(&fail_rtr_err, err);
  atomic_store(&fail_rtr_left, n);
  return tries;
}

void fake_pair_break_flush(struct fake_pair *p)
{
  struct fake_qp *q = qp_of(p->recv->flush_qp);

  q->broken = 1;
  q->land = 0;
}

void fake_pair_hold_flush(struct fake_pair *p, int hold) { qp_of(p->recv->flush_qp)->held = hold; }

void fake_pair_inject_wc(struct fake_pair *p, int side, uint64_t wr_id, enum ibv_wc_status status,
                         enum ibv_wc_opcode opcode)
{
  struct mcp_comm *c = side == FAKE_SEND_SIDE ? p->send : p->recv;

  complete_on(cq_of(c->link.devs[0].cq), NULL, wr_id, status, opcode, 0);
}

int fake_mrs_live(void)
{
  int i, n = 0;

  for (i = 0; i < FAKE_MAX_MRS; i++)
    n += mrs[i].used;
  return n;
}

void fake_fail_next_reg(int err) { fail_next_reg = err; }

int fake_qps_created(void) { return ncreated; }
int fake_qps_destroyed(void) { return ndestroyed; }

/* rebuild_qps of mcp_conn_recover.c, for one comm. */
static int rebuild(struct mcp_comm *c)
{
  int i;

  c->link.rec.phase = MCP_REC_WAIT_PEER; /* errors drained below are the recovery's, not new */
  for (i = 0; i < c->link.nqps; i++) {
    mcp_ibv.destroy_qp(c->link.qp[i]);
    c->link.qp[i] = NULL;
  }
  while (c->link.error == 0 && mcp_xfer_poll(c) > 0)
    ;
  if (c->link.error != 0)
    return -1;
  mcp_link_set_epoch(&c->link, (uint8_t)(c->link.epoch + 1));
  for (i = 0; i < c->link.nqps; i++) {
    c->link.recv_posted[i] = 0;
    c->link.recv_consumed[i] = 0;
  }
  c->cts_unsignaled = 0;
  if (mcp_qp_create_qps(&c->link) != 0)
    return -1;
  if (c->link.kind == MCP_COMM_RECV)
    for (i = 0; i < MCP_SLOTS; i++)
      if (c->rslots[i].req != NULL) {
        c->rslots[i].expected = 0;
        c->rslots[i].got = 0;
        c->rslots[i].bytes = 0;
      }
  return 0;
}

void fake_pair_configure(struct fake_pair *p)
{
  mcp_link_cfg_fill(&p->send->link.cfg, mcp_param_process());
  mcp_link_cfg_fill(&p->recv->link.cfg, mcp_param_process());
}

int fake_pair_recover(struct fake_pair *p)
{
  struct mcp_config *cfg = (struct mcp_config *)mcp_param_process();
  int timeout = cfg->recovery_timeout_s, rc = -1;
  uint32_t done[MCP_SLOTS];

  /* Errors drained during a round are the round's (recovery enabled, phase set). */
  cfg->recovery_timeout_s = 30;
  fake_pair_configure(p);
  fake_progress(); /* what the broken QPs still do (lands or fails) happens first */
  if (rebuild(p->recv) != 0 || rebuild(p->send) != 0)
    goto out;
  connect_qps(p);
  /* The receiver's RECOVER frame carries its done table (computed after its drain). */
  mcp_xfer_recv_done_table(p->recv, done);
  if (mcp_xfer_recv_replay(p->recv) != 0 || mcp_xfer_send_replay(p->send, done) != 0)
    goto out;
  p->recv->link.rec.phase = MCP_REC_NONE;
  p->send->link.rec.phase = MCP_REC_NONE;
  rc = 0;
out:
  cfg->recovery_timeout_s = timeout;
  fake_pair_configure(p);
  return rc;
}

/* ---- the post log ---- */

int fake_posts(const struct fake_post **log)
{
  *log = post_log;
  return nlog;
}

void fake_posts_reset(void) { nlog = 0; }

int fake_count_cts_writes(void)
{
  int i, n = 0;

  for (i = 0; i < nlog; i++)
    n += post_log[i].side == FAKE_RECV_SIDE && post_log[i].opcode == IBV_WR_RDMA_WRITE;
  return n;
}

int fake_count_data_writes(void)
{
  int i, n = 0;

  for (i = 0; i < nlog; i++)
    n += post_log[i].side == FAKE_SEND_SIDE && post_log[i].opcode != IBV_WR_RDMA_READ &&
      !(post_log[i].opcode == IBV_WR_RDMA_WRITE_WITH_IMM && MCP_IMM_REC(post_log[i].imm));
  return n;
}

int fake_count_records(void)
{
  int i, n = 0;

  for (i = 0; i < nlog; i++)
    n += post_log[i].side == FAKE_SEND_SIDE && post_log[i].opcode == IBV_WR_RDMA_WRITE_WITH_IMM &&
      MCP_IMM_REC(post_log[i].imm);
  return n;
}

int fake_rnr_count(void) { return rnr; }

/* ---- accessors ---- */

int fake_comm_error(const struct mcp_comm *c) { return c->link.error; }
const char *fake_comm_errmsg(const struct mcp_comm *c) { return c->link.errmsg; }
uint32_t fake_comm_seq(const struct mcp_comm *c) { return c->seq; }

void fake_pair_set_seq(struct fake_pair *p, uint32_t seq)
{
  int i;

  /* As if the connection had carried seq - 1 messages: every slot's last seq is behind. */
  p->send->seq = p->recv->seq = seq;
  for (i = 0; i < MCP_SLOTS; i++)
    p->recv->rslots[i].seq =
      seq - MCP_SLOTS + (uint32_t)((i - (int)(seq % MCP_SLOTS) + MCP_SLOTS) % MCP_SLOTS);
}
int fake_comm_inflight(const struct mcp_comm *c) { return c->inflight; }
int fake_req_seq(const void *request) { return (int)((const struct mcp_request *)request)->seq; }
int fake_comm_flush_reposts(const struct mcp_comm *c) { return c->flush_reposts; }
int fake_comm_flush_lost(const struct mcp_comm *c) { return c->flush_lost_ns != 0; }

void fake_pair_attach_streams(struct fake_pair *p, struct mcp_oob_stream *send_stream,
                              struct mcp_oob_stream *recv_stream)
{
  p->send->link.stream = send_stream;
  p->recv->link.stream = recv_stream;
}

void fake_comm_endpoint(struct mcp_comm *c, struct mcp_wire_endpoint *ep)
{
  mcp_comm_fill_endpoint(&c->link);
  *ep = c->link.local;
}

void fake_comm_check_due(struct mcp_comm *c) { c->next_alive_check_ns = 0; }
int fake_comm_recoveries(const struct mcp_comm *c) { return c->link.rec.count; }
struct mcp_status_comm *fake_comm_status(struct mcp_comm *c) { return c->link.st; }
struct mcp_link *fake_comm_link(struct mcp_comm *c) { return &c->link; }

void fake_comm_peer_closed(struct mcp_comm *c)
{
  mcp_oob_test_stream_end(c->link.stream, 0, 1, NULL);
  c->next_alive_check_ns = 0;
}

struct mcp_comm *fake_comm_connecting(struct mcp_devctx *dc, struct ibv_context *ctx,
                                      struct mcp_oob_stream *stream, uint64_t now_ns)
{
  struct mcp_comm *c = calloc(1, sizeof(*c));

  c->link.kind = MCP_COMM_SEND;
  mcp_link_cfg_fill(&c->link.cfg, mcp_param_process());
  c->link.ops = &mcp_xfer_link_ops;
  c->link.ndevs = 1;
  c->link.up = c->link.live = 1;
  mcp_link_set_remote_ndevs(&c->link, 1);
  c->link.devs[0].dc = dc;
  c->link.devs[0].cq = calloc(1, sizeof(*c->link.devs[0].cq));
  c->link.devs[0].cq->context = ctx;
  c->link.nqps = 1;
  c->link.sq_depth = 8;
  c->link.rq_depth = 8;
  c->link.qp[0] = mcp_ibv.create_qp(NULL, NULL);
  c->ring_mr = calloc(1, sizeof(*c->ring_mr)); /* the new round's endpoint names it */
  c->link.remote.nqps = 1;
  c->link.remote.qps[0].qpn = 0x900;
  snprintf(c->link.peer_name, sizeof(c->link.peer_name), "fake-peer");
  c->link.stream = stream;
  c->link.rec.round = 1;
  c->link.rec.phase = MCP_REC_CONNECTING;
  c->link.rec.start_ns = now_ns;
  c->link.rec.deadline_ns = now_ns + 6000000000ull;
  snprintf(c->link.rec.cause, sizeof(c->link.rec.cause), "a fake link went down");
  mcp_fabric_comm_ref(); /* the comm's, given back when it is freed */
  return c;
}

struct ibv_qp *fake_comm_qp(const struct mcp_comm *c, int i) { return c->link.qp[i]; }
int fake_comm_rec_phase(const struct mcp_comm *c) { return c->link.rec.phase; }
uint32_t fake_comm_rec_round(const struct mcp_comm *c) { return c->link.rec.round; }
void fake_comm_set_rec_phase(struct mcp_comm *c, int phase) { c->link.rec.phase = phase; }
void fake_comm_detach_stream(struct mcp_comm *c) { c->link.stream = NULL; }

int fake_warns;
char fake_lastwarn[4096];

void fake_warn_capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                       const char *fmt, ...)
{
  va_list ap;

  (void)flags;
  (void)file;
  (void)line;
  if (level != NCCL_LOG_WARN)
    return;
  va_start(ap, fmt);
  vsnprintf(fake_lastwarn, sizeof(fake_lastwarn), fmt, ap);
  va_end(ap);
  fake_warns++;
}

/* One byte pattern for every data-path test, so a test's sender and its check agree. */
void fake_pattern(unsigned char *b, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char)(seed * 131 + i * 7 + 1);
}

int fake_same(const unsigned char *b, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    if (b[i] != (unsigned char)(seed * 131 + i * 7 + 1))
      return 0;
  return 1;
}

int fake_wait_done(void *req, int *sizes, int polls)
{
  int done = 0;

  for (int i = 0; i < polls; i++) {
    if (mcp_net_test(req, &done, sizes) != ncclSuccess)
      return -1;
    if (done)
      return 1;
  }
  return 0;
}
