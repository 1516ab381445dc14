/*
 * mcp_fabric_devctx.c - opens a device for the first comm that needs it and closes it
 * after the last. One context and one protection domain per port entry per process:
 * every comm on it shares them, so a buffer registered once serves them all, and no
 * descriptor of ours outlives the last communicator.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/verbs.h"
#include "fabric/devctx.h"

static pthread_mutex_t devctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcp_devctx *devctx_table[MCP_MAX_NET_DEVS];
/* Where a QP's async event goes: registered from above (conn), never called by name. */
static _Atomic(mcp_devctx_qp_event_fn) qp_event_handler;

void mcp_devctx_set_qp_event_handler(mcp_devctx_qp_event_fn fn) { atomic_store(&qp_event_handler, fn); }

static struct ibv_context *open_by_name(const char *name)
{
  struct ibv_device **list;
  struct ibv_context *ctx = NULL;
  int i, n = 0;

  list = mcp_ibv.get_device_list(&n);
  if (list == NULL)
    return NULL;
  for (i = 0; i < n; i++) {
    if (strcmp(mcp_ibv.get_device_name(list[i]), name) == 0) {
      ctx = mcp_ibv.open_device(list[i]);
      break;
    }
  }
  if (i == n)
    errno = ENODEV;
  mcp_ibv.free_device_list(list);
  return ctx;
}

struct mcp_devctx *mcp_devctx_get(const struct mcp_fabric *fab, int dev)
{
  struct mcp_devctx *dc;
  const struct mcp_net_dev *info;

  if (dev < 0 || dev >= fab->ndev) {
    MCP_WARN("device index %d is out of range: %d device(s)", dev, fab->ndev);
    return NULL;
  }
  info = &fab->dev[dev];
  pthread_mutex_lock(&devctx_lock);
  dc = devctx_table[dev];
  if (dc != NULL) {
    dc->refs++;
    goto out;
  }
  dc = calloc(1, sizeof(*dc));
  if (dc == NULL)
    goto out;
  dc->dev = dev;
  dc->info = info;
  dc->data_access = fab->cfg.data_access;
  mcp_list_init(&dc->mrs);
  dc->ctx = open_by_name(info->ibdev);
  if (dc->ctx == NULL) {
    MCP_WARN("%s: cannot open the device (%s)", info->ibdev, strerror(errno));
    goto fail;
  }
  dc->pd = mcp_ibv.alloc_pd(dc->ctx);
  if (dc->pd == NULL) {
    MCP_WARN("%s: ibv_alloc_pd failed (%s)", info->ibdev, strerror(errno));
    goto fail;
  }
  pthread_mutex_init(&dc->mr_lock, NULL);
  pthread_mutex_init(&dc->ev_lock, NULL);
  pthread_mutex_init(&dc->gid_lock, NULL);
  pthread_cond_init(&dc->gid_cond, NULL);
  /* Events are polled from the progress path: reading them must never block. */
  if (fcntl(dc->ctx->async_fd, F_SETFL, fcntl(dc->ctx->async_fd, F_GETFL) | O_NONBLOCK) != 0)
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s: async events cannot be made non-blocking (%s); they are not read",
             info->ibdev, strerror(errno));
  dc->refs = 1;
  devctx_table[dev] = dc;
  goto out;
fail:
  if (dc->ctx != NULL)
    mcp_ibv.close_device(dc->ctx);
  free(dc);
  dc = NULL;
out:
  pthread_mutex_unlock(&devctx_lock);
  return dc;
}

void mcp_devctx_put(struct mcp_devctx *dc)
{
  if (dc == NULL)
    return;
  pthread_mutex_lock(&devctx_lock);
  if (--dc->refs > 0) {
    pthread_mutex_unlock(&devctx_lock);
    return;
  }
  devctx_table[dc->dev] = NULL;
  pthread_mutex_unlock(&devctx_lock);
  if (!mcp_list_empty(&dc->mrs))
    MCP_WARN("%s: %d registration(s) still held when the last comm closed; released now", dc->info->ibdev,
             dc->mr_count);
  while (!mcp_list_empty(&dc->mrs)) {
    struct mcp_mr *m = mcp_list_first(&dc->mrs, struct mcp_mr, link);

    mcp_list_del(&m->link);
    mcp_ibv.dereg_mr(m->mr);
    /* The mhandle stays allocated: NCCL may still deregister it, which then sees dc NULL. */
    m->dc = NULL;
    m->mr = NULL;
  }
  mcp_ibv.dealloc_pd(dc->pd);
  mcp_ibv.close_device(dc->ctx);
  pthread_mutex_destroy(&dc->mr_lock);
  pthread_mutex_destroy(&dc->ev_lock);
  pthread_cond_destroy(&dc->gid_cond);
  pthread_mutex_destroy(&dc->gid_lock);
  free(dc);
}

void mcp_devctx_poll_events(struct mcp_devctx *dc)
{
  struct ibv_async_event ev;
  int fl = fcntl(dc->ctx->async_fd, F_GETFL);

  if (fl < 0 || !(fl & O_NONBLOCK) || pthread_mutex_trylock(&dc->ev_lock) != 0)
    return;
  while (mcp_ibv.get_async_event(dc->ctx, &ev) == 0) {
    switch (ev.event_type) {
    case IBV_EVENT_PORT_ERR:
      if (ev.element.port_num == dc->info->port) {
        atomic_fetch_add(&dc->port_err_gen, 1);
        MCP_WARN("%s port %d: port error event: the link went down; connections on it recover or fail "
                 "after MCPNET_RECOVERY_TIMEOUT",
                 dc->info->ibdev, dc->info->port);
      }
      break;
    case IBV_EVENT_PORT_ACTIVE:
      if (ev.element.port_num == dc->info->port)
        atomic_fetch_add(&dc->port_up_gen, 1);
      if (ev.element.port_num == dc->info->port)
        MCP_INFO(NCCL_NET, "%s port %d: active again", dc->info->ibdev, dc->info->port);
      break;
    case IBV_EVENT_GID_CHANGE:
      if (ev.element.port_num == dc->info->port)
        atomic_fetch_add(&dc->gid_gen, 1);
      break;
    case IBV_EVENT_DEVICE_FATAL:
      atomic_store(&dc->fatal, 1);
      MCP_WARN("%s: device fatal error event: the adapter needs a reset; every connection on it fails",
               dc->info->ibdev);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR: {
      mcp_devctx_qp_event_fn fn = atomic_load(&qp_event_handler);

      /* The QP cannot be destroyed before this event is acknowledged: its comm is alive. */
      if (fn != NULL && ev.element.qp != NULL && ev.element.qp->qp_context != NULL)
        fn(ev.element.qp->qp_context, ev.element.qp->qp_num, ev.event_type);
      break;
    }
    default: break;
    }
    mcp_ibv.ack_async_event(&ev);
  }
  pthread_mutex_unlock(&dc->ev_lock);
}
