/*
 * uv_qp.c - queue pairs and completion queues of the userspace verbs device: the
 * RESET->INIT->RTR->RTS state machine with its attribute checks, posting, polling,
 * completions in order per QP, errors and flushes, and async events.
 *
 * Queues are as deep as they were created, with an adapter's accounting (mlx5's): a
 * send queue entry is taken at the post and given back only when a completion at or
 * after it is polled (an unsignalled WR is retired by the next completion of its QP),
 * a receive queue entry when its completion is polled; a post past either depth fails
 * with ENOMEM. A completion queue holds the entries it was created with: one more
 * overruns it, which fails every QP on it with an async event, as an adapter does.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uv.h"

pthread_cond_t uv_idle_cond = PTHREAD_COND_INITIALIZER;

struct uv_qp *uv_qp_find(struct uv_dev *dev, uint32_t qpn)
{
  struct uv_qp *q;

  for (q = dev->qp_hash[qpn % 1024]; q != NULL; q = q->hnext)
    if (q->qp.qp_num == qpn)
      return q;
  return NULL;
}

struct uv_mr *uv_mr_find(struct uv_dev *dev, uint32_t key)
{
  uint32_t slot = key >> 8;

  if (slot >= dev->nmr || dev->mrs[slot] == NULL || dev->mrs[slot]->dead || (key & 0xff) != dev->mr_gen[slot])
    return NULL;
  return dev->mrs[slot];
}

void uv_qp_wait_idle(struct uv_qp *qp)
{
  while (qp->busy > 0)
    pthread_cond_wait(&uv_idle_cond, &uv.lock);
}

/* ---- async events ---- */

static void ctx_queue(struct uv_ctx *c, const struct ibv_async_event *ev)
{
  struct uv_event *e = calloc(1, sizeof(*e));
  char one = 1;

  if (e == NULL)
    return;
  e->ev = *ev;
  if (c->ev_tail != NULL)
    c->ev_tail->next = e;
  else
    c->ev_head = e;
  c->ev_tail = e;
  if (write(c->pipe_w, &one, 1) != 1) {
    /* The pipe holds 64 KiB of pending events: a caller that never reads them. */
  }
}

void uv_qp_event(struct uv_qp *qp, enum ibv_event_type type)
{
  struct ibv_async_event ev;

  memset(&ev, 0, sizeof(ev));
  ev.event_type = type;
  ev.element.qp = &qp->qp;
  qp->events++;
  ctx_queue((struct uv_ctx *)(void *)qp->qp.context, &ev);
}

void uv_dev_event(struct uv_dev *dev, enum ibv_event_type type, int port)
{
  struct ibv_async_event ev;
  struct uv_ctx *c;

  memset(&ev, 0, sizeof(ev));
  ev.event_type = type;
  ev.element.port_num = port;
  for (c = dev->ctxs; c != NULL; c = c->next)
    ctx_queue(c, &ev);
}

static void cq_event(struct uv_cq *cq)
{
  struct ibv_async_event ev;

  memset(&ev, 0, sizeof(ev));
  ev.event_type = IBV_EVENT_CQ_ERR;
  ev.element.cq = &cq->cq;
  ctx_queue((struct uv_ctx *)(void *)cq->cq.context, &ev);
}

/* ---- completions ---- */

void uv_cq_push(struct uv_cq *cq, const struct ibv_wc *wc, struct uv_qp *qp, int sq_retire, int rq_retire)
{
  struct uv_cqe *e;
  int i;

  if (cq->overrun)
    return;
  if (cq->count == cq->depth) {
    /* Overrun: the adapter reports it and fails every QP that uses the CQ. */
    cq->overrun = 1;
    cq_event(cq);
    for (i = 0; i < 1024; i++) {
      struct uv_qp *q;
      for (q = cq->dev->qp_hash[i]; q != NULL; q = q->hnext)
        if ((q->scq == cq || q->rcq == cq) && q->state != IBV_QPS_ERR && q->state != IBV_QPS_RESET) {
          uv_qp_event(q, IBV_EVENT_QP_FATAL);
          uv_qp_error(q);
        }
    }
    return;
  }
  e = &cq->ring[(cq->head + cq->count) % cq->depth];
  cq->count++;
  e->wc = *wc;
  e->qp = qp;
  e->sq_retire = sq_retire;
  e->rq_retire = rq_retire;
}

static enum ibv_wc_opcode wc_opcode(int op)
{
  switch (op) {
  case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
  case IBV_WR_SEND:
  case IBV_WR_SEND_WITH_IMM: return IBV_WC_SEND;
  default: return IBV_WC_RDMA_WRITE;
  }
}

/* The send WR at the head is done with status st. */
static void sq_finish(struct uv_qp *qp, struct uv_swqe *w, enum ibv_wc_status st)
{
  int signalled = (w->flags & IBV_SEND_SIGNALED) || qp->sq_sig_all;

  w->state = UV_W_DONE;
  if (st != IBV_WC_SUCCESS || signalled) {
    struct ibv_wc wc;

    memset(&wc, 0, sizeof(wc));
    wc.wr_id = w->wr_id;
    wc.status = st;
    wc.opcode = wc_opcode(w->opcode);
    wc.byte_len = w->opcode == IBV_WR_RDMA_READ ? w->len : 0;
    wc.qp_num = qp->qp.qp_num;
    uv_cq_push(qp->scq, &wc, qp, 1 + qp->sq_done_unsig, 0);
    qp->sq_done_unsig = 0;
  } else {
    qp->sq_done_unsig++;
  }
  qp->sq_head++;
  if (qp->next_send < qp->sq_head)
    qp->next_send = qp->sq_head;
}

void uv_sq_complete_ready(struct uv_qp *qp)
{
  while (qp->sq_head < qp->next_send) {
    struct uv_swqe *w = &qp->sq[qp->sq_head % (uint64_t)qp->max_send_wr];
    if (w->state != UV_W_ACKED)
      break;
    sq_finish(qp, w, IBV_WC_SUCCESS);
  }
}

static void rq_flush(struct uv_qp *qp)
{
  while (qp->rq_head < qp->rq_tail) {
    struct uv_rwqe *r = &qp->rq[qp->rq_head % (uint64_t)qp->max_recv_wr];
    struct ibv_wc wc;

    memset(&wc, 0, sizeof(wc));
    wc.wr_id = r->wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp->qp.qp_num;
    uv_cq_push(qp->rcq, &wc, qp, 0, 1);
    qp->rq_head++;
  }
}

void uv_qp_error(struct uv_qp *qp)
{
  if (qp->state == IBV_QPS_ERR)
    return;
  qp->state = IBV_QPS_ERR;
  qp->qp.state = IBV_QPS_ERR;
  qp->epoch++;
  while (qp->sq_head < qp->sq_tail)
    sq_finish(qp, &qp->sq[qp->sq_head % (uint64_t)qp->max_send_wr], IBV_WC_WR_FLUSH_ERR);
  qp->next_send = qp->sq_tail;
  rq_flush(qp);
}

void uv_sq_fail(struct uv_qp *qp, struct uv_swqe *w, enum ibv_wc_status st)
{
  /* What came before the failed WR was executed by the responder (the NAK says so)
   * unless it is a read whose data never came back. */
  while (qp->sq_head < qp->sq_tail) {
    struct uv_swqe *h = &qp->sq[qp->sq_head % (uint64_t)qp->max_send_wr];
    if (h == w) {
      sq_finish(qp, h, st);
      break;
    }
    sq_finish(qp, h,
              h->state == UV_W_ACKED ||
                  ((h->state == UV_W_SENT || h->state == UV_W_SENDING) && h->opcode != IBV_WR_RDMA_READ)
                ? IBV_WC_SUCCESS
                : IBV_WC_WR_FLUSH_ERR);
  }
  uv_qp_error(qp);
}

uint64_t uv_qp_timeout_ns(const struct uv_qp *qp)
{
  /* 4.096 us * 2^timeout; 0 means never. */
  return qp->timeout == 0 ? UINT64_MAX : 4096ull << qp->timeout;
}

uint64_t uv_rnr_delay_ns(int code)
{
  /* The IB spec's RNR NAK timer field, in microseconds. */
  static const unsigned us[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                                  160,    240,   320,   480,    640,    960,    1280,   1920,
                                  2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                                  40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return (uint64_t)us[code & 31] * 1000;
}

/* ---- posting ---- */

int uv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  int rc = 0, kick = 0;

  pthread_mutex_lock(&uv.lock);
  for (; wr != NULL; wr = wr->next) {
    struct uv_swqe *w;
    uint64_t len = 0;
    int i;

    if (qp->state == IBV_QPS_RESET) {
      rc = EINVAL;
      break;
    }
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
        wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM && wr->opcode != IBV_WR_RDMA_READ) {
      rc = EINVAL; /* atomics, memory windows, ...: not emulated */
      break;
    }
    if (wr->num_sge < 0 || wr->num_sge > qp->max_send_sge) {
      rc = EINVAL;
      break;
    }
    for (i = 0; i < wr->num_sge; i++)
      len += wr->sg_list[i].length;
    if ((wr->send_flags & IBV_SEND_INLINE) &&
        (len > (uint64_t)qp->max_inline || wr->opcode == IBV_WR_RDMA_READ)) {
      rc = EINVAL;
      break;
    }
    if (len > 0x80000000ull) {
      rc = EINVAL;
      break;
    }
    if (qp->sq_used == qp->max_send_wr) {
      rc = ENOMEM;
      break;
    }
    qp->sq_used++;
    w = &qp->sq[qp->sq_tail % (uint64_t)qp->max_send_wr];
    {
      unsigned char *inl = w->inl_data; /* the slot's own inline area, kept */
      memset(w, 0, sizeof(*w));
      w->inl_data = inl;
    }
    w->wr_id = wr->wr_id;
    w->opcode = wr->opcode;
    w->flags = wr->send_flags;
    w->imm = wr->imm_data;
    w->raddr = wr->wr.rdma.remote_addr;
    w->rkey = wr->wr.rdma.rkey;
    w->len = (uint32_t)len;
    w->state = UV_W_POSTED;
    if (wr->send_flags & IBV_SEND_INLINE) {
      uint32_t off = 0;
      /* The bytes are the WR's from now on: the caller may reuse its buffer. */
      for (i = 0; i < wr->num_sge; i++) {
        memcpy(w->inl_data + off, (const void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
        off += wr->sg_list[i].length;
      }
      w->inl = 1;
    } else {
      w->nsge = wr->num_sge;
      memcpy(w->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
    }
    qp->sq_tail++;
    if (qp->state == IBV_QPS_ERR) {
      /* Posted to a QP in error: flushed at once. */
      sq_finish(qp, w, IBV_WC_WR_FLUSH_ERR);
      qp->next_send = qp->sq_tail;
    } else {
      kick = 1;
    }
  }
  if (kick && qp->state == IBV_QPS_RTS && qp->path != NULL)
    uv_path_kick(qp->path);
  pthread_mutex_unlock(&uv.lock);
  if (rc != 0)
    *bad = wr;
  return rc;
}

int uv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  int rc = 0;

  pthread_mutex_lock(&uv.lock);
  for (; wr != NULL; wr = wr->next) {
    struct uv_rwqe *r;

    if (qp->state == IBV_QPS_RESET || wr->num_sge < 0 || wr->num_sge > qp->max_recv_sge) {
      rc = EINVAL;
      break;
    }
    if (qp->rq_used == qp->max_recv_wr) {
      rc = ENOMEM;
      break;
    }
    qp->rq_used++;
    r = &qp->rq[qp->rq_tail % (uint64_t)qp->max_recv_wr];
    r->wr_id = wr->wr_id;
    r->nsge = wr->num_sge;
    memcpy(r->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
    qp->rq_tail++;
    if (qp->state == IBV_QPS_ERR)
      rq_flush(qp);
  }
  pthread_mutex_unlock(&uv.lock);
  if (rc != 0)
    *bad = wr;
  return rc;
}

int uv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
  struct uv_cq *cq = (struct uv_cq *)(void *)ibcq;
  int got = 0;

  pthread_mutex_lock(&uv.lock);
  while (got < n && cq->count > 0) {
    struct uv_cqe *e = &cq->ring[cq->head];

    if (e->qp != NULL) {
      e->qp->sq_used -= e->sq_retire;
      e->qp->rq_used -= e->rq_retire;
    }
    wc[got++] = e->wc;
    cq->head = (cq->head + 1) % cq->depth;
    cq->count--;
  }
  pthread_mutex_unlock(&uv.lock);
  return got;
}

/* ---- the state machine ---- */

#define M(x) IBV_QP_##x
static const struct {
  int from, to;
  int req, opt;
} transitions[] = {
  {IBV_QPS_RESET, IBV_QPS_INIT, M(STATE) | M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS), 0},
  {IBV_QPS_INIT, IBV_QPS_INIT, 0, M(STATE) | M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS)},
  {IBV_QPS_INIT, IBV_QPS_RTR,
   M(STATE) | M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) | M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER),
   M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX)},
  {IBV_QPS_RTR, IBV_QPS_RTS,
   M(STATE) | M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) | M(SQ_PSN) | M(MAX_QP_RD_ATOMIC),
   M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(MIN_RNR_TIMER) | M(PATH_MIG_STATE)},
  {IBV_QPS_RTS, IBV_QPS_RTS, 0,
   M(STATE) | M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE) | M(MIN_RNR_TIMER)},
};

static void qp_reset(struct uv_qp *qp)
{
  uv_path_detach_qp(qp);
  qp->sq_head = qp->sq_tail = qp->next_send = 0;
  qp->sq_used = qp->sq_done_unsig = 0;
  qp->rq_head = qp->rq_tail = 0;
  qp->rq_used = 0;
  qp->epoch++;
  /* Completions still queued for it stay, but retire nothing now. */
  for (struct uv_cq *cq = qp->scq; cq != NULL; cq = cq == qp->rcq ? NULL : qp->rcq)
    for (int i = 0; i < cq->count; i++)
      if (cq->ring[(cq->head + i) % cq->depth].qp == qp)
        cq->ring[(cq->head + i) % cq->depth].qp = NULL;
}

static int check_av(struct uv_qp *qp, const struct ibv_ah_attr *ah, uint32_t *dest_id)
{
  struct uv_dev *dev = qp->dev;

  if (!ah->is_global || (ah->port_num != 0 && ah->port_num != 1))
    return EINVAL; /* RoCE routes by GRH: a global address is required */
  if (ah->grh.sgid_index >= UV_GIDS)
    return EINVAL;
  if (uv_dev_by_gid(&ah->grh.dgid, dest_id) != 0)
    return EINVAL;
  if (dev->port_state != IBV_PORT_ACTIVE)
    return ETIMEDOUT; /* the port is down: the peer's address does not resolve */
  return 0;
}

int uv_modify_qp_locked(struct uv_qp *qp, struct ibv_qp_attr *a, int mask)
{
  int cur = qp->state, to = (mask & IBV_QP_STATE) ? (int)a->qp_state : cur, i, rc;
  uint32_t dest_id = 0;

  if ((mask & IBV_QP_CUR_STATE) && (int)a->cur_qp_state != cur)
    return EINVAL;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
    if (mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE))
      return EINVAL;
    if (to == IBV_QPS_RESET) {
      uv_qp_wait_idle(qp);
      qp_reset(qp);
      qp->state = IBV_QPS_RESET;
    } else {
      uv_qp_error(qp);
    }
    qp->qp.state = (enum ibv_qp_state)qp->state;
    return 0;
  }
  for (i = 0; i < (int)(sizeof(transitions) / sizeof(transitions[0])); i++)
    if (transitions[i].from == cur && transitions[i].to == to)
      break;
  if (i == (int)(sizeof(transitions) / sizeof(transitions[0])))
    return EINVAL; /* not a transition of the RC state machine (SQD and SQE are not emulated) */
  if ((mask & transitions[i].req) != transitions[i].req ||
      (mask & ~(transitions[i].req | transitions[i].opt)))
    return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
    return EINVAL; /* the P_Key table has one entry */
  if ((mask & IBV_QP_PORT) && a->port_num != 1)
    return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (a->qp_access_flags &
       ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                   IBV_ACCESS_REMOTE_ATOMIC)))
    return EINVAL;
  if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
    return EINVAL;
  if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > UV_PSN_MASK)
    return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > 16)
    return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > 16)
    return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
    return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
    return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
    return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
    return EINVAL;
  if ((mask & IBV_QP_AV) && (rc = check_av(qp, &a->ah_attr, &dest_id)) != 0)
    return rc;
  /* Accepted: apply. */
  if (mask & IBV_QP_PKEY_INDEX)
    qp->pkey_index = a->pkey_index;
  if (mask & IBV_QP_PORT)
    qp->port = a->port_num;
  if (mask & IBV_QP_ACCESS_FLAGS)
    qp->access = a->qp_access_flags;
  if (mask & IBV_QP_PATH_MTU)
    qp->path_mtu = a->path_mtu;
  if (mask & IBV_QP_DEST_QPN)
    qp->dest_qpn = a->dest_qp_num;
  if (mask & IBV_QP_RQ_PSN)
    qp->rq_psn = a->rq_psn & UV_PSN_MASK;
  if (mask & IBV_QP_SQ_PSN)
    qp->sq_psn = a->sq_psn & UV_PSN_MASK;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
    qp->max_dest_rd_atomic = a->max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
    qp->max_rd_atomic = a->max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER)
    qp->min_rnr_timer = a->min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT)
    qp->timeout = a->timeout;
  if (mask & IBV_QP_RETRY_CNT)
    qp->retry_cnt = a->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY)
    qp->rnr_retry = a->rnr_retry;
  if (mask & IBV_QP_AV) {
    qp->ah = a->ah_attr;
    qp->dest_id = dest_id;
  }
  if (to == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
    qp->epsn = qp->rq_psn;
    struct uv_path *p = uv_path_get(qp->dev, qp->dest_id);
    if (p == NULL)
      return ENOMEM;
    uv_path_attach_qp(p, qp);
  }
  if (to == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
    qp->next_psn = qp->sq_psn;
    uv_path_kick(qp->path); /* work posted before RTS goes now */
  }
  qp->state = to;
  qp->qp.state = (enum ibv_qp_state)to;
  return 0;
}
