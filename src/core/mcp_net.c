/*
 * mcp_net.c - process-wide lifecycle: init, devices, properties, finalize, and the
 * comm-level calls that are not the data path (registration, close).
 *
 * NCCL 2.28 calls init once per communicator and expects a fresh context each time;
 * discovery is global and happens once, under one lock, and is rebuilt after the last
 * finalize. Older NCCL (v8-v10 tables) never finalizes and may dlclose the plugin after
 * its last communicator, so nothing here owns a thread or a file descriptor: devices
 * and the out-of-band socket are opened by the first comm and closed by the last one.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpnet/comm.h"
#include "mcpnet/fabric.h"
#include "mcpnet/log.h"
#include "mcpnet/net.h"
#include "mcpnet/param.h"
#include "mcpnet/verbs.h"

struct mcp_ctx {
  uint64_t comm_id;
  int traffic_class;
};

#ifndef MCPNET_REVISION
#define MCPNET_REVISION "unknown" /* set by CMake from git describe at configure time */
#endif

static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int abi_taken; /* the ncclNetPlugin_vN table NCCL took; 0: not said */
static struct {
  int ready;        /* configuration loaded and fabric discovered */
  int ctxs;         /* live contexts from v11 init */
  int comms;        /* live listen/send/recv comms */
  int had_ctx;      /* a v11 init happened: finalize exists, teardown is allowed */
  struct mcp_config cfg;
  struct mcp_fabric fab;
} g;

int mcp_ctx_traffic_class(const void *ctx)
{
  const struct mcp_ctx *x = ctx;

  return x != NULL ? x->traffic_class : NCCL_NET_TRAFFIC_CLASS_UNDEF;
}

const struct mcp_fabric *mcp_net_fabric(void) { return g.ready ? &g.fab : NULL; }
const struct mcp_config *mcp_net_config(void) { return &g.cfg; }

static void teardown_locked(void)
{
  if (!g.ready)
    return;
  mcp_fabric_release(&g.fab);
  mcp_param_free(&g.cfg);
  g.ready = 0;
  g.had_ctx = 0;
}

void mcp_net_comm_ref(void)
{
  pthread_mutex_lock(&net_lock);
  g.comms++;
  pthread_mutex_unlock(&net_lock);
}

void mcp_net_comm_unref(void)
{
  pthread_mutex_lock(&net_lock);
  /* Comms closed after the last finalize: the next init rebuilds from scratch. The
   * v8-v10 tables have no finalize; their state goes with dlclose. */
  if (--g.comms == 0 && g.ctxs == 0 && g.had_ctx)
    teardown_locked();
  pthread_mutex_unlock(&net_lock);
}

/* A process that registered memory and then forks (data loaders do) must keep its
 * registered pages. Linux 5.13+ copies pinned pages into the child at fork; older
 * kernels need libibverbs' MADV_DONTFORK bookkeeping (ibv_fork_init), which must start
 * before the process's first registration. Which case applies is said once. */
static void fork_protect(void)
{
  static int said;
  enum ibv_fork_status st = mcp_ibv.is_fork_initialized ? mcp_ibv.is_fork_initialized() : IBV_FORK_DISABLED;
  int rc = st == IBV_FORK_DISABLED ? mcp_ibv.fork_init() : 0;

  if (said)
    return;
  said = 1;
  if (st == IBV_FORK_UNNEEDED)
    MCP_INFO(NCCL_INIT | NCCL_NET, "fork safety: the kernel copies registered pages into a forked child "
             "(copy-on-fork, Linux 5.13+); nothing to set up");
  else if (st == IBV_FORK_ENABLED)
    MCP_INFO(NCCL_INIT | NCCL_NET, "fork safety: libibverbs' fork protection was already on "
             "(RDMAV_FORK_SAFE or the application)");
  else if (rc == 0)
    MCP_INFO(NCCL_INIT | NCCL_NET, "fork safety: %s; ibv_fork_init turned on libibverbs' protection "
             "(MADV_DONTFORK: a forked child does not inherit registered memory)",
             mcp_ibv.is_fork_initialized ? "this kernel would share registered pages with a forked child"
                                         : "this rdma-core cannot tell whether the kernel copies pages on fork");
  else
    MCP_WARN("fork safety: ibv_fork_init failed (%s): memory was registered in this process before "
             "mcpnet's init, and on this kernel (older than 5.13) a fork() after that can corrupt "
             "transfers. Set RDMAV_FORK_SAFE=1 in the environment", strerror(rc));
}

void mcp_net_note_abi(int version) { abi_taken = version; }

/* NCCL's version, when the process exports ncclGetVersion (libnccl.so does; a copy linked
 * statically into a framework may hide it): 0 when it is not visible. */
static int nccl_version(void)
{
  int (*get)(int *) = NULL;
  void *sym = dlsym(RTLD_DEFAULT, "ncclGetVersion");
  int v = 0;

  memcpy(&get, &sym, sizeof(get));
  if (get == NULL || get(&v) != 0 || v < 20000)
    return 0; /* only 2.9+ codes (major*10000 + minor*100 + patch) are read */
  return v;
}

/* Who is running: one INFO line a bug report can quote. */
static void log_identity(int version)
{
  Dl_info info;
  const char *path = "unknown";
  char nccl[48] = "";

  if (dladdr((const void *)&log_identity, &info) != 0 && info.dli_fname != NULL)
    path = info.dli_fname;
  if (version > 0)
    snprintf(nccl, sizeof(nccl), " (NCCL %d.%d.%d)", version / 10000, version / 100 % 100, version % 100);
  if (abi_taken > 0)
    MCP_INFO(NCCL_INIT | NCCL_NET, "mcpnet %s, source revision %s; NCCL took the ncclNetPlugin_v%d table%s; "
             "library %s", MCPNET_VERSION, MCPNET_REVISION, abi_taken, nccl, path);
  else
    MCP_INFO(NCCL_INIT | NCCL_NET, "mcpnet %s, source revision %s; no ncclNetPlugin table named%s; library %s",
             MCPNET_VERSION, MCPNET_REVISION, nccl, path);
}

/* NCCL_IB_QPS_PER_CONNECTION as each port can run it: NCCL accepts any value, so mcpnet
 * caps rather than refuses, once per port, with the reason. The send side needs the most
 * completion entries per QP (its send queue), so both ends of a connection agree. */
static void cap_qps(void)
{
  int per_qp = 2 * MCP_SEND_REQS + 1 > 2 * MCP_SLOTS + 8 + MCP_RQ_DEPTH ? 2 * MCP_SEND_REQS + 1
                                                                         : 2 * MCP_SLOTS + 8 + MCP_RQ_DEPTH;
  char why[256];

  for (int i = 0; i < g.fab.ndev; i++) {
    struct mcp_net_dev *d = &g.fab.dev[i];

    d->qps_per_conn = mcp_param_qps_cap(g.cfg.ib_qps_per_conn, MCP_MAX_QPS, d->max_cqe, per_qp, 16,
                                        why, sizeof(why));
    if (why[0] != '\0')
      MCP_WARN("NCCL_IB_QPS_PER_CONNECTION=%d: %s uses %d QPs per connection: %s",
               g.cfg.ib_qps_per_conn, d->name, d->qps_per_conn, why);
  }
}

/* Configuration, verbs and discovery, once. */
static ncclResult_t setup_locked(void)
{
  struct mcp_param_env env = {0};
  char why[512];

  if (g.ready)
    return ncclSuccess;
  env.nccl_abi = abi_taken;
  env.nccl_version = nccl_version();
  log_identity(env.nccl_version);
  /* Said before the values are checked: a misspelt name explains a "wrong" default. */
  mcp_param_scan_env(&env, NULL);
  if (mcp_param_load(&g.cfg, &env, 0, why, sizeof(why)) != 0) {
    MCP_WARN("invalid configuration: %s. NCCL falls back to its own transports unless NCCL_NET=MCP", why);
    mcp_param_free(&g.cfg);
    return ncclInvalidUsage;
  }
  mcp_param_log(&g.cfg);
  if (mcp_verbs_load(why, sizeof(why)) != 0) {
    MCP_WARN("%s. NCCL falls back to its own transports unless NCCL_NET=MCP", why);
    mcp_param_free(&g.cfg);
    return ncclSystemError;
  }
  fork_protect();
  if (mcp_fabric_discover(&g.fab, &g.cfg) != 0) {
    mcp_param_free(&g.cfg);
    return ncclSystemError;
  }
  cap_qps();
  g.ready = 1;
  return ncclSuccess;
}

ncclResult_t mcp_net_init(void **ctx, uint64_t comm_id, const struct mcp_comm_config *config,
                          ncclDebugLogger_t log_fn)
{
  ncclResult_t rc;
  struct mcp_ctx *x = NULL;

  if (log_fn != NULL)
    mcp_log_set_logger(log_fn);
  if (ctx != NULL) {
    *ctx = NULL;
    x = calloc(1, sizeof(*x));
    if (x == NULL)
      return ncclSystemError;
    x->comm_id = comm_id;
    x->traffic_class = config != NULL ? config->traffic_class : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  }
  pthread_mutex_lock(&net_lock);
  rc = setup_locked();
  if (rc == ncclSuccess && x != NULL) {
    g.ctxs++;
    g.had_ctx = 1;
  }
  pthread_mutex_unlock(&net_lock);
  if (rc != ncclSuccess) {
    free(x);
    return rc;
  }
  if (ctx != NULL)
    *ctx = x;
  return ncclSuccess;
}

ncclResult_t mcp_net_finalize(void *ctx)
{
  /* NCCL also finalizes after a failed init, with the NULL context it got back. */
  if (ctx == NULL)
    return ncclSuccess;
  free(ctx);
  pthread_mutex_lock(&net_lock);
  if (--g.ctxs == 0 && g.comms == 0)
    teardown_locked();
  pthread_mutex_unlock(&net_lock);
  return ncclSuccess;
}

ncclResult_t mcp_net_devices(int *ndev)
{
  *ndev = g.ready ? g.fab.ndev : 0;
  return g.ready ? ncclSuccess : ncclInvalidUsage;
}

ncclResult_t mcp_net_get_properties(int dev, struct mcp_net_props *props)
{
  const struct mcp_net_dev *d;

  if (!g.ready || dev < 0 || dev >= g.fab.ndev) {
    MCP_WARN("getProperties(%d): there are %d device(s)", dev, g.ready ? g.fab.ndev : 0);
    return ncclInvalidArgument;
  }
  d = &g.fab.dev[dev];
  memset(props, 0, sizeof(*props));
  props->name = d->name;
  props->pci_path = d->pci_path;
  props->guid = d->guid;
  props->ptr_support = d->ptr_support;
  props->reg_is_global = 1;
  props->force_flush = 0;
  props->speed_mbps = d->speed_mbps;
  props->port = d->port;
  props->latency_us = 0;
  /* Each comm takes its QPs, plus a loopback QP for flushes on the receive side. */
  props->max_comms = d->max_qp / (d->qps_per_conn + 1);
  props->max_recvs = MCP_MAX_RECVS;
  props->max_p2p_bytes = MCP_MAX_P2P_BYTES;
  props->max_coll_bytes = MCP_MAX_P2P_BYTES;
  return ncclSuccess;
}

static struct mcp_devctx *comm_devctx(void *comm)
{
  struct mcp_comm *c = comm;

  if (c == NULL || (c->kind != MCP_COMM_SEND && c->kind != MCP_COMM_RECV))
    return NULL;
  return c->dc;
}

ncclResult_t mcp_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  struct mcp_devctx *dc = comm_devctx(comm);
  struct mcp_mr *m;

  *mhandle = NULL;
  if (dc == NULL) {
    MCP_WARN("regMr on %p: not a send or receive comm of mcpnet", comm);
    return ncclInvalidArgument;
  }
  if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
    MCP_WARN("regMr of type %d: only host (1) and CUDA (2) memory exist", type);
    return ncclInvalidArgument;
  }
  if (type == NCCL_PTR_CUDA && !(dc->info->ptr_support & NCCL_PTR_CUDA)) {
    MCP_WARN("regMr of GPU memory on %s: no GPU peer-memory module is loaded (nvidia_peermem)",
             dc->info->name);
    return ncclInvalidUsage;
  }
  if (mcp_mr_register(dc, data, size, type, &m) != 0)
    return ncclSystemError;
  *mhandle = m;
  return ncclSuccess;
}

ncclResult_t mcp_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                                   int fd, void **mhandle)
{
  struct mcp_devctx *dc = comm_devctx(comm);
  struct mcp_mr *m;

  *mhandle = NULL;
  if (dc == NULL) {
    MCP_WARN("regMrDmaBuf on %p: not a send or receive comm of mcpnet", comm);
    return ncclInvalidArgument;
  }
  if (fd < 0)
    return mcp_net_reg_mr(comm, data, size, type, mhandle);
  if (mcp_mr_register_dmabuf(dc, data, size, type, offset, fd, &m) != 0)
    return ncclSystemError;
  *mhandle = m;
  return ncclSuccess;
}

ncclResult_t mcp_net_dereg_mr(void *comm, void *mhandle)
{
  if (mhandle == NULL)
    return ncclSuccess;
  mcp_mr_release(mhandle);
  return ncclSuccess;
}

static ncclResult_t close_comm(void *comm, int kind)
{
  struct mcp_comm *c = comm;

  if (c == NULL)
    return ncclSuccess;
  if (c->kind != kind) {
    MCP_WARN("close of %p: not a %s comm of mcpnet", comm, kind == MCP_COMM_SEND ? "send" : "receive");
    return ncclInvalidArgument;
  }
  mcp_comm_destroy(c);
  return ncclSuccess;
}

ncclResult_t mcp_net_close_send(void *send_comm) { return close_comm(send_comm, MCP_COMM_SEND); }
ncclResult_t mcp_net_close_recv(void *recv_comm) { return close_comm(recv_comm, MCP_COMM_RECV); }

/* dlclose: give back what the v8-v10 tables, which have no finalize, never could. */
__attribute__((destructor)) static void mcp_net_unload(void)
{
  pthread_mutex_lock(&net_lock);
  if (g.comms == 0)
    teardown_locked();
  pthread_mutex_unlock(&net_lock);
  if (g.comms == 0)
    mcp_verbs_unload();
}
