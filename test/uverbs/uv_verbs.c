/*
 * uv_verbs.c - the verbs the userspace device exports, under libibverbs' names and
 * prototypes (mcpnet's loader resolves them by name from MCPNET_VERBS_LIBRARY, see
 * src/core/mcp_verbs.c): devices, contexts, queries, protection domains, memory
 * regions with keys checked by the adapter, completion queues, queue pairs, async
 * events, and mcpnet_verbs_sysfs_root(), the tree that shows the devices as sysfs does.
 *
 * Errors follow libibverbs: functions returning a pointer give NULL with errno set;
 * ibv_modify_qp, ibv_destroy_* and ibv_dereg_mr return an errno value (and set errno).
 * Every exported function runs under uv.lock except where memory is copied.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uv.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

#define UV_EXPORT __attribute__((visibility("default")))

static struct uv_dev *dev_of_ctx(struct ibv_context *ctx) { return ((struct uv_ctx *)(void *)ctx)->dev; }

static int fail_errno(int e)
{
  errno = e;
  return e;
}

UV_EXPORT const char *mcpnet_verbs_sysfs_root(void) { return uv_init() == 0 ? uv.sysroot : NULL; }

UV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
  struct ibv_device **list;
  int i, rc = uv_init();

  if (rc != 0) {
    errno = -rc;
    return NULL;
  }
  list = calloc((size_t)uv.ndev + 1, sizeof(*list));
  if (list == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  for (i = 0; i < uv.ndev; i++)
    list[i] = &uv.dev[i].ibdev;
  if (num != NULL)
    *num = uv.ndev;
  return list;
}

UV_EXPORT void ibv_free_device_list(struct ibv_device **list) { free(list); }

UV_EXPORT const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

UV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d)
{
  struct uv_dev *dev = (struct uv_dev *)(void *)d;
  struct uv_ctx *c = calloc(1, sizeof(*c));
  int p[2];

  if (c == NULL || pipe2(p, O_CLOEXEC) != 0) {
    free(c);
    errno = ENOMEM;
    return NULL;
  }
  c->dev = dev;
  c->ctx.device = d;
  c->ctx.cmd_fd = -1;
  c->ctx.async_fd = p[0];
  c->pipe_w = p[1];
  c->ctx.num_comp_vectors = 1;
  c->ctx.ops.poll_cq = uv_poll_cq;
  c->ctx.ops.post_send = uv_post_send;
  c->ctx.ops.post_recv = uv_post_recv;
  pthread_mutex_init(&c->ctx.mutex, NULL);
  pthread_mutex_lock(&uv.lock);
  c->next = dev->ctxs;
  dev->ctxs = c;
  pthread_mutex_unlock(&uv.lock);
  return &c->ctx;
}

UV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
  struct uv_ctx *c = (struct uv_ctx *)(void *)ctx, **pp;
  struct uv_event *e;

  pthread_mutex_lock(&uv.lock);
  for (pp = &c->dev->ctxs; *pp != NULL; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  pthread_mutex_unlock(&uv.lock);
  while ((e = c->ev_head) != NULL) {
    c->ev_head = e->next;
    free(e);
  }
  close(ctx->async_fd);
  close(c->pipe_w);
  pthread_mutex_destroy(&ctx->mutex);
  free(c);
  return 0;
}

UV_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
  struct uv_dev *dev = dev_of_ctx(ctx);

  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "mcp-uverbs 1");
  a->node_guid = htobe64(dev->guid);
  a->sys_image_guid = htobe64(dev->guid);
  a->max_mr_size = 1ull << 40;
  a->page_size_cap = 0xfffff000;
  a->max_qp = 65536;
  a->max_qp_wr = UV_MAX_QP_WR;
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
  a->max_sge = UV_MAX_SGE;
  a->max_sge_rd = UV_MAX_SGE;
  a->max_cq = 65536;
  a->max_cqe = UV_MAX_CQE;
  a->max_mr = 1 << 20;
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->max_res_rd_atom = 1 << 20;
  a->atomic_cap = IBV_ATOMIC_NONE;
  a->max_pkeys = 1;
  a->phys_port_cnt = 1;
  return 0;
}

UV_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *out)
{
  struct uv_dev *dev = dev_of_ctx(ctx);
  struct ibv_port_attr *a = (struct ibv_port_attr *)(void *)out;

  if (port != 1)
    return fail_errno(EINVAL);
  memset(a, 0, sizeof(*a));
  pthread_mutex_lock(&uv.lock);
  a->state = (enum ibv_port_state)dev->port_state;
  a->phys_state = dev->port_state == IBV_PORT_ACTIVE ? 5 : 3; /* LinkUp : Disabled */
  pthread_mutex_unlock(&uv.lock);
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = UV_GIDS;
  a->port_cap_flags = IBV_PORT_CM_SUP;
  a->max_msg_sz = 0x80000000u;
  a->pkey_tbl_len = 1;
  a->active_width = 2;  /* 4X */
  a->active_speed = 32; /* EDR: 25 Gb/s a lane, 100 Gb/s */
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

/* rdma-core 62's verb (IBVERBS_1.16): the port's speed in 100 Mb/s units. */
UV_EXPORT int ibv_query_port_speed(struct ibv_context *ctx, uint32_t port, uint64_t *speed)
{
  (void)ctx;
  if (port != 1)
    return fail_errno(EINVAL);
  *speed = 1000;
  return 0;
}

UV_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
  struct uv_dev *dev = dev_of_ctx(ctx);

  if (port != 1 || index < 0 || index >= UV_GIDS)
    return -1;
  *gid = dev->gid[index];
  return 0;
}

UV_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
                                struct ibv_gid_entry *e, uint32_t flags, size_t size)
{
  struct uv_dev *dev = dev_of_ctx(ctx);

  if (flags != 0 || size < sizeof(*e))
    return EINVAL;
  if (port != 1 || index >= UV_GIDS)
    return ENODATA;
  memset(e, 0, sizeof(*e));
  e->gid = dev->gid[index];
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = index % 2 == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
  e->ndev_ifindex = 1; /* lo */
  return 0;
}

UV_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
  (void)ctx;
  if (port != 1 || index != 0)
    return -1;
  *pkey = htobe16(0xffff);
  return 0;
}

UV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
  struct uv_pd *pd = calloc(1, sizeof(*pd));

  if (pd == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  pd->pd.context = ctx;
  pd->dev = dev_of_ctx(ctx);
  return &pd->pd;
}

UV_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
  struct uv_pd *pd = (struct uv_pd *)(void *)ibpd;
  int refs;

  pthread_mutex_lock(&uv.lock);
  refs = pd->refs;
  pthread_mutex_unlock(&uv.lock);
  if (refs > 0)
    return fail_errno(EBUSY);
  free(pd);
  return 0;
}

/* ---- memory regions ---- */

#define UV_MR_ACCESS                                                                                      \
  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
   IBV_ACCESS_RELAXED_ORDERING)

static struct uv_mr *mr_new(struct ibv_pd *ibpd, size_t len, uint64_t iova, unsigned access)
{
  struct uv_mr *m;

  /* Remote write (or atomics) without local write is refused, as the spec says. */
  if ((access & ~(unsigned)UV_MR_ACCESS & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE) ||
      ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
       !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;
    return NULL;
  }
  if (len > (1ull << 40)) {
    errno = EINVAL;
    return NULL;
  }
  m = calloc(1, sizeof(*m));
  if (m == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  m->pd = (struct uv_pd *)(void *)ibpd;
  m->dev = m->pd->dev;
  m->access = access;
  m->iova = iova;
  m->len = len;
  return m;
}

/* Gives the MR a slot and its keys: slot << 8 | a generation byte that changes at
 * every reuse of the slot, so a key of a deregistered region never matches again. */
static struct ibv_mr *mr_publish(struct uv_mr *m, void *addr)
{
  struct uv_dev *dev = m->dev;
  uint32_t slot, key;

  pthread_mutex_lock(&uv.lock);
  for (slot = 0; slot < dev->nmr && dev->mrs[slot] != NULL; slot++)
    ;
  if (slot == dev->nmr) {
    uint32_t n = dev->nmr ? dev->nmr * 2 : 256;
    struct uv_mr **mrs = realloc(dev->mrs, n * sizeof(*mrs));
    uint8_t *gen = mrs != NULL ? realloc(dev->mr_gen, n) : NULL;

    if (mrs != NULL)
      dev->mrs = mrs;
    if (gen == NULL || n > (1u << 24)) {
      pthread_mutex_unlock(&uv.lock);
      uv_mem_unreg(m);
      free(m);
      errno = ENOMEM;
      return NULL;
    }
    dev->mr_gen = gen;
    memset(dev->mrs + dev->nmr, 0, (n - dev->nmr) * sizeof(*mrs));
    for (uint32_t i = dev->nmr; i < n; i++)
      gen[i] = (uint8_t)(uv_rand_pct() * 2 + (int)i);
    dev->nmr = n;
  }
  dev->mr_gen[slot]++;
  key = slot << 8 | dev->mr_gen[slot];
  m->slot = slot;
  dev->mrs[slot] = m;
  m->pd->refs++;
  pthread_mutex_unlock(&uv.lock);
  m->mr.context = m->pd->pd.context;
  m->mr.pd = &m->pd->pd;
  m->mr.addr = addr;
  m->mr.length = m->len;
  m->mr.lkey = key;
  m->mr.rkey = key;
  m->mr.handle = slot;
  return &m->mr;
}

UV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                          unsigned int access)
{
  struct uv_mr *m = mr_new(pd, length, iova, access);
  int rc;

  if (m == NULL)
    return NULL;
  rc = uv_mem_reg_addr(m, addr, length);
  if (rc != 0) {
    free(m);
    errno = -rc;
    return NULL;
  }
  return mr_publish(m, addr);
}

/* Not resolved by mcpnet, but what verbs.h's ibv_reg_mr() calls for constant flags. */
UV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
  return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

UV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                           int fd, int access)
{
  struct uv_mr *m = mr_new(pd, length, iova, (unsigned)access);
  int rc;

  if (m == NULL)
    return NULL;
  rc = uv_mem_reg_dmabuf(m, fd, offset, length);
  if (rc != 0) {
    free(m);
    errno = -rc;
    return NULL;
  }
  return mr_publish(m, (void *)(uintptr_t)iova);
}

UV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
  struct uv_mr *m = (struct uv_mr *)(void *)mr;

  pthread_mutex_lock(&uv.lock);
  m->dead = 1; /* no new work finds it */
  while (m->busy > 0)
    pthread_cond_wait(&uv_idle_cond, &uv.lock);
  m->dev->mrs[m->slot] = NULL;
  m->pd->refs--;
  pthread_mutex_unlock(&uv.lock);
  uv_mem_unreg(m);
  free(m);
  return 0;
}

/* ---- completion queues ---- */

UV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                       struct ibv_comp_channel *channel, int comp_vector)
{
  struct uv_cq *cq;

  if (cqe < 1 || cqe > UV_MAX_CQE || channel != NULL || comp_vector != 0) {
    errno = EINVAL; /* completion channels are not emulated: poll */
    return NULL;
  }
  cq = calloc(1, sizeof(*cq));
  if (cq != NULL)
    cq->ring = calloc((size_t)cqe, sizeof(*cq->ring));
  if (cq == NULL || cq->ring == NULL) {
    free(cq);
    errno = ENOMEM;
    return NULL;
  }
  cq->dev = dev_of_ctx(ctx);
  cq->depth = cqe;
  cq->cq.context = ctx;
  cq->cq.cq_context = cq_context;
  cq->cq.cqe = cqe;
  pthread_mutex_init(&cq->cq.mutex, NULL);
  pthread_cond_init(&cq->cq.cond, NULL);
  return &cq->cq;
}

UV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
  struct uv_cq *cq = (struct uv_cq *)(void *)ibcq;
  int qps;

  pthread_mutex_lock(&uv.lock);
  qps = cq->qps;
  pthread_mutex_unlock(&uv.lock);
  if (qps > 0)
    return fail_errno(EBUSY);
  free(cq->ring);
  free(cq);
  return 0;
}

/* ---- queue pairs ---- */

UV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *init)
{
  struct uv_pd *pd = (struct uv_pd *)(void *)ibpd;
  struct uv_dev *dev = pd->dev;
  struct uv_qp *qp;
  int i;

  if (init->qp_type != IBV_QPT_RC) {
    errno = EOPNOTSUPP; /* only reliable connection is emulated */
    return NULL;
  }
  if (init->send_cq == NULL || init->recv_cq == NULL || init->srq != NULL ||
      ((struct uv_cq *)(void *)init->send_cq)->dev != dev ||
      ((struct uv_cq *)(void *)init->recv_cq)->dev != dev || init->cap.max_send_wr < 1 ||
      init->cap.max_send_wr > UV_MAX_QP_WR || init->cap.max_recv_wr > UV_MAX_QP_WR ||
      init->cap.max_send_sge > UV_MAX_SGE || init->cap.max_recv_sge > UV_MAX_SGE ||
      init->cap.max_inline_data > UV_MAX_INLINE) {
    errno = EINVAL;
    return NULL;
  }
  qp = calloc(1, sizeof(*qp));
  if (qp == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  qp->max_send_wr = (int)init->cap.max_send_wr;
  qp->max_recv_wr = init->cap.max_recv_wr > 0 ? (int)init->cap.max_recv_wr : 1;
  qp->max_send_sge = (int)init->cap.max_send_sge;
  qp->max_recv_sge = (int)init->cap.max_recv_sge;
  qp->max_inline = (int)init->cap.max_inline_data;
  qp->sq = calloc((size_t)qp->max_send_wr, sizeof(*qp->sq));
  qp->rq = calloc((size_t)qp->max_recv_wr, sizeof(*qp->rq));
  qp->inl_pool = qp->max_inline > 0 ? malloc((size_t)qp->max_send_wr * (size_t)qp->max_inline) : NULL;
  if (qp->sq == NULL || qp->rq == NULL || (qp->max_inline > 0 && qp->inl_pool == NULL)) {
    free(qp->sq);
    free(qp->rq);
    free(qp->inl_pool);
    free(qp);
    errno = ENOMEM;
    return NULL;
  }
  for (i = 0; qp->inl_pool != NULL && i < qp->max_send_wr; i++)
    qp->sq[i].inl_data = qp->inl_pool + (size_t)i * (size_t)qp->max_inline;
  if (init->cap.max_recv_wr == 0)
    qp->max_recv_wr = 0; /* a queue of none: every post_recv is refused */
  qp->dev = dev;
  qp->pd = pd;
  qp->scq = (struct uv_cq *)(void *)init->send_cq;
  qp->rcq = (struct uv_cq *)(void *)init->recv_cq;
  qp->sq_sig_all = init->sq_sig_all;
  qp->state = IBV_QPS_RESET;
  qp->qp.context = ibpd->context;
  qp->qp.qp_context = init->qp_context;
  qp->qp.pd = ibpd;
  qp->qp.send_cq = init->send_cq;
  qp->qp.recv_cq = init->recv_cq;
  qp->qp.qp_type = IBV_QPT_RC;
  qp->qp.state = IBV_QPS_RESET;
  pthread_mutex_init(&qp->qp.mutex, NULL);
  pthread_cond_init(&qp->qp.cond, NULL);
  pthread_mutex_lock(&uv.lock);
  do {
    dev->next_qpn = (dev->next_qpn + 1) & UV_PSN_MASK;
    if (dev->next_qpn < 2)
      dev->next_qpn = 2;
  } while (uv_qp_find(dev, dev->next_qpn) != NULL);
  qp->qp.qp_num = dev->next_qpn;
  qp->hnext = dev->qp_hash[qp->qp.qp_num % 1024];
  dev->qp_hash[qp->qp.qp_num % 1024] = qp;
  pd->refs++;
  qp->scq->qps++;
  qp->rcq->qps++;
  pthread_mutex_unlock(&uv.lock);
  init->cap.max_inline_data = (uint32_t)qp->max_inline;
  return &qp->qp;
}

UV_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;
  int rc;

  pthread_mutex_lock(&uv.lock);
  rc = uv_modify_qp_locked(qp, attr, mask);
  pthread_mutex_unlock(&uv.lock);
  return rc != 0 ? fail_errno(rc) : 0;
}

UV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
                           struct ibv_qp_init_attr *init)
{
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp;

  (void)mask;
  memset(a, 0, sizeof(*a));
  memset(init, 0, sizeof(*init));
  pthread_mutex_lock(&uv.lock);
  a->qp_state = (enum ibv_qp_state)qp->state;
  a->cur_qp_state = (enum ibv_qp_state)qp->state;
  a->path_mtu = (enum ibv_mtu)qp->path_mtu;
  a->qp_access_flags = qp->access;
  a->pkey_index = (uint16_t)qp->pkey_index;
  a->port_num = (uint8_t)qp->port;
  a->dest_qp_num = qp->dest_qpn;
  a->rq_psn = qp->rq_psn;
  a->sq_psn = qp->sq_psn;
  a->ah_attr = qp->ah;
  a->timeout = (uint8_t)qp->timeout;
  a->retry_cnt = (uint8_t)qp->retry_cnt;
  a->rnr_retry = (uint8_t)qp->rnr_retry;
  a->min_rnr_timer = (uint8_t)qp->min_rnr_timer;
  a->max_rd_atomic = (uint8_t)qp->max_rd_atomic;
  a->max_dest_rd_atomic = (uint8_t)qp->max_dest_rd_atomic;
  a->cap.max_send_wr = (uint32_t)qp->max_send_wr;
  a->cap.max_recv_wr = (uint32_t)qp->max_recv_wr;
  a->cap.max_send_sge = (uint32_t)qp->max_send_sge;
  a->cap.max_recv_sge = (uint32_t)qp->max_recv_sge;
  a->cap.max_inline_data = (uint32_t)qp->max_inline;
  init->qp_context = qp->qp.qp_context;
  init->send_cq = qp->qp.send_cq;
  init->recv_cq = qp->qp.recv_cq;
  init->cap = a->cap;
  init->qp_type = IBV_QPT_RC;
  init->sq_sig_all = qp->sq_sig_all;
  pthread_mutex_unlock(&uv.lock);
  return 0;
}

UV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
  struct uv_qp *qp = (struct uv_qp *)(void *)ibqp, **pp;
  struct uv_cq *cqs[2];
  int i, k;

  pthread_mutex_lock(&uv.lock);
  /* As libibverbs: not before its async events were acknowledged. */
  while (qp->events > 0 || qp->busy > 0)
    pthread_cond_wait(&uv_idle_cond, &uv.lock);
  uv_path_detach_qp(qp);
  for (pp = &qp->dev->qp_hash[qp->qp.qp_num % 1024]; *pp != NULL; pp = &(*pp)->hnext)
    if (*pp == qp) {
      *pp = qp->hnext;
      break;
    }
  /* Its completions still queued stay, retiring nothing. */
  cqs[0] = qp->scq;
  cqs[1] = qp->rcq;
  for (k = 0; k < 2; k++) {
    for (i = 0; i < cqs[k]->count; i++) {
      struct uv_cqe *e = &cqs[k]->ring[(cqs[k]->head + i) % cqs[k]->depth];
      if (e->qp == qp)
        e->qp = NULL;
    }
    cqs[k]->qps--;
  }
  qp->pd->refs--;
  pthread_mutex_unlock(&uv.lock);
  free(qp->sq);
  free(qp->rq);
  free(qp->inl_pool);
  pthread_mutex_destroy(&qp->qp.mutex);
  pthread_cond_destroy(&qp->qp.cond);
  free(qp);
  return 0;
}

/* ---- async events ---- */

UV_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
  struct uv_ctx *c = (struct uv_ctx *)(void *)ctx;
  struct uv_event *e;
  char one;

  /* The pipe holds a byte per queued event: it blocks or says EAGAIN as its fd flags
   * say, which is how mcpnet reads events without waiting. */
  if (read(ctx->async_fd, &one, 1) != 1)
    return -1;
  pthread_mutex_lock(&uv.lock);
  e = c->ev_head;
  if (e != NULL) {
    c->ev_head = e->next;
    if (c->ev_head == NULL)
      c->ev_tail = NULL;
  }
  pthread_mutex_unlock(&uv.lock);
  if (e == NULL) {
    errno = EAGAIN;
    return -1;
  }
  *ev = e->ev;
  free(e);
  return 0;
}

UV_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
  switch (ev->event_type) {
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_COMM_EST:
  case IBV_EVENT_SQ_DRAINED:
  case IBV_EVENT_PATH_MIG:
  case IBV_EVENT_PATH_MIG_ERR:
  case IBV_EVENT_QP_LAST_WQE_REACHED:
    pthread_mutex_lock(&uv.lock);
    ((struct uv_qp *)(void *)ev->element.qp)->events--;
    pthread_cond_broadcast(&uv_idle_cond);
    pthread_mutex_unlock(&uv.lock);
    break;
  default: break;
  }
}

UV_EXPORT int ibv_fork_init(void) { return 0; }

UV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

UV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status st)
{
  static const char *const s[] = {
    [IBV_WC_SUCCESS] = "success",
    [IBV_WC_LOC_LEN_ERR] = "local length error",
    [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
    [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
    [IBV_WC_LOC_PROT_ERR] = "local protection error",
    [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
    [IBV_WC_MW_BIND_ERR] = "memory management operation error",
    [IBV_WC_BAD_RESP_ERR] = "bad response error",
    [IBV_WC_LOC_ACCESS_ERR] = "local access error",
    [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
    [IBV_WC_REM_ACCESS_ERR] = "remote access error",
    [IBV_WC_REM_OP_ERR] = "remote operation error",
    [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
    [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
    [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
    [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
    [IBV_WC_REM_ABORT_ERR] = "aborted error",
    [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
    [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
    [IBV_WC_FATAL_ERR] = "fatal error",
    [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
    [IBV_WC_GENERAL_ERR] = "general error",
  };
  return (unsigned)st < sizeof(s) / sizeof(s[0]) && s[st] != NULL ? s[st] : "unknown";
}

UV_EXPORT const char *ibv_event_type_str(enum ibv_event_type t)
{
  static const char *const s[] = {
    [IBV_EVENT_CQ_ERR] = "CQ error",
    [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
    [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
    [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
    [IBV_EVENT_COMM_EST] = "communication established",
    [IBV_EVENT_SQ_DRAINED] = "send queue drained",
    [IBV_EVENT_PATH_MIG] = "path migrated",
    [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
    [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
    [IBV_EVENT_PORT_ACTIVE] = "port active",
    [IBV_EVENT_PORT_ERR] = "port error",
    [IBV_EVENT_LID_CHANGE] = "LID change",
    [IBV_EVENT_PKEY_CHANGE] = "P_Key change",
    [IBV_EVENT_SM_CHANGE] = "SM change",
    [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
    [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
    [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
    [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
    [IBV_EVENT_GID_CHANGE] = "GID table change",
    [IBV_EVENT_WQ_FATAL] = "WQ fatal",
  };
  return (unsigned)t < sizeof(s) / sizeof(s[0]) && s[t] != NULL ? s[t] : "unknown";
}
