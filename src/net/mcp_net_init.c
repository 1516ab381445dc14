/*
 * mcp_net_init.c - the process-wide entry points: init, devices, properties, finalize.
 *
 * The top of the stack (net): what NCCL calls first. init loads the configuration,
 * the verbs library and discovers the fabric, once per process (fabric's process
 * state counts who holds them and gives them back after the last one); everything
 * else here is a thin read of what that found. ncclResult_t is spoken here and in
 * the other net files only.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "fabric/fabric.h"
#include "fabric/fabric_process.h"
#include "fabric/fabric_vdev.h"
#include "xfer/comm.h"
#include "net/net.h"

#include "net_internal.h"

static _Atomic int abi_taken; /* the ncclNetPlugin_vN table NCCL took; 0: not said */

int mcp_ctx_traffic_class(const void *ctx)
{
  const struct mcp_ctx *x = ctx;

  return x != NULL ? x->traffic_class : NCCL_NET_TRAFFIC_CLASS_UNDEF;
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
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "fork safety: the kernel copies registered pages into a forked child "
             "(copy-on-fork, Linux 5.13+); nothing to set up");
  else if (st == IBV_FORK_ENABLED)
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "fork safety: libibverbs' fork protection was already on "
             "(RDMAV_FORK_SAFE or the application)");
  else if (rc == 0)
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "fork safety: %s; ibv_fork_init turned on libibverbs' protection "
             "(MADV_DONTFORK: a forked child does not inherit registered memory)",
             mcp_ibv.is_fork_initialized
               ? "this kernel would share registered pages with a forked child"
               : "this rdma-core cannot tell whether the kernel copies pages on fork");
  else
    MCP_WARN("fork safety: ibv_fork_init failed (%s): memory was registered in this process before "
             "mcpnet's init, and on this kernel (older than 5.13) a fork() after that can corrupt "
             "transfers. Set RDMAV_FORK_SAFE=1 in the environment",
             strerror(rc));
}

/* Whether NCCL's buffers are registered with relaxed ordering, and why, once per init:
 * a bandwidth difference between hosts often comes down to this line. */
static void log_ordering(const struct mcp_config *cfg)
{
  const struct mcp_param_origin *o = &cfg->origin[MCP_PARAM_IB_PCI_RELAXED_ORDERING];
  const char *from = o->source == MCP_PARAM_SRC_DEFAULT ? "default" : mcp_param_source_name(o->source);

  if (cfg->ib_pci_relaxed_ordering < 0 || cfg->ib_pci_relaxed_ordering > 2)
    MCP_WARN("NCCL_IB_PCI_RELAXED_ORDERING=%d (from the %s) is not 0, 1 or 2: relaxed ordering is off, as "
             "NCCL's own transport takes such a value",
             cfg->ib_pci_relaxed_ordering, from);
  if (mcp_mr_relaxed_ordering(cfg))
    MCP_INFO(
      NCCL_INIT | NCCL_NET,
      "relaxed ordering: data buffers are registered with IBV_ACCESS_RELAXED_ORDERING "
      "(NCCL_IB_PCI_RELAXED_ORDERING=%d from the %s; libibverbs has ibv_reg_mr_iova2). It takes effect "
      "where the kernel passes optional access flags and PCIe relaxed ordering is enabled for the "
      "adapter; the clear-to-send ring and records are always strictly ordered",
      cfg->ib_pci_relaxed_ordering, from);
  else
    MCP_INFO(NCCL_INIT | NCCL_NET, "relaxed ordering: off, every registration is strictly ordered (%s)",
             cfg->ib_pci_relaxed_ordering != 1 && cfg->ib_pci_relaxed_ordering != 2
               ? "NCCL_IB_PCI_RELAXED_ORDERING is neither 1 nor 2"
               : "this libibverbs has no ibv_reg_mr_iova2");
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
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s; NCCL took the ncclNetPlugin_v%d table%s; library %s",
             mcp_version_text(), abi_taken, nccl, path);
  else
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s; no ncclNetPlugin table named%s; library %s", mcp_version_text(), nccl,
             path);
}

/* NCCL_IB_QPS_PER_CONNECTION as each port can run it: NCCL accepts any value, so mcpnet
 * caps rather than refuses, once per port, with the reason. The send side needs the most
 * completion entries per QP (its send queue), so both ends of a connection agree. */
static void cap_qps(struct mcp_fabric *fab, const struct mcp_config *cfg)
{
  int per_qp = 2 * MCP_SEND_REQS + 1 > 2 * MCP_SLOTS + 8 + MCP_RQ_DEPTH ? 2 * MCP_SEND_REQS + 1
                                                                        : 2 * MCP_SLOTS + 8 + MCP_RQ_DEPTH;
  char why[256];

  for (int i = 0; i < fab->ndev; i++) {
    struct mcp_net_dev *d = &fab->dev[i];

    d->qps_per_conn =
      mcp_param_qps_cap(cfg->ib_qps_per_conn, MCP_MAX_QPS, d->max_cqe, per_qp, 16, why, sizeof(why));
    if (why[0] != '\0')
      MCP_WARN("NCCL_IB_QPS_PER_CONNECTION=%d: %s uses %d QPs per connection: %s", cfg->ib_qps_per_conn,
               d->name, d->qps_per_conn, why);
  }
}

/* Configuration, verbs and discovery, once (under fabric's process lock): 0 or a
 * negative errno (src/core/err.h). */
static int setup_locked(struct mcp_fabric *fab)
{
  struct mcp_config *cfg = mcp_param_process();
  struct mcp_param_env env = {0};
  char why[512];

  env.nccl_abi = abi_taken;
  env.nccl_version = nccl_version();
  log_identity(env.nccl_version);
  /* Said before the values are checked: a misspelt name explains a "wrong" default. */
  mcp_param_scan_env(&env, NULL);
  if (mcp_param_load(cfg, &env, 0, why, sizeof(why)) != 0) {
    MCP_WARN("invalid configuration: %s. NCCL falls back to its own transports unless NCCL_NET=MCP", why);
    mcp_param_free(cfg);
    return MCP_ERR_USAGE;
  }
  mcp_param_log(cfg);
  if (mcp_verbs_load(cfg->verbs_library, why, sizeof(why)) != 0) {
    MCP_WARN("%s. NCCL falls back to its own transports unless NCCL_NET=MCP", why);
    mcp_param_free(cfg);
    return MCP_ERR_SYSTEM;
  }
  fork_protect();
  log_ordering(cfg);
  if (mcp_fabric_discover(fab, cfg) != 0) {
    mcp_param_free(cfg);
    return MCP_ERR_SYSTEM;
  }
  cap_qps(fab, cfg);
  /* The indices NCCL sees: a rank map's fused sets become one device each, and virtual
   * devices NCCL made before a teardown are found again by their members' names. */
  if (mcp_fabric_vdev_sync(fab,
                           fab->local_rank >= 0 && cfg->rank_map_parsed != NULL
                             ? mcp_rankmap_find(cfg->rank_map_parsed, fab->local_rank)
                             : NULL) != 0) {
    mcp_fabric_release(fab);
    mcp_param_free(cfg);
    return MCP_ERR_USAGE;
  }
  return 0;
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
  rc = mcp_net_result(mcp_fabric_process_open(x != NULL, setup_locked));
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
  mcp_fabric_process_close_ctx();
  return ncclSuccess;
}

ncclResult_t mcp_net_devices(int *ndev)
{
  const struct mcp_fabric *fab = mcp_fabric_process();

  *ndev = fab != NULL ? mcp_fabric_vdev_count(fab) : 0;
  return fab != NULL ? ncclSuccess : ncclInvalidUsage;
}

static void phys_properties(const struct mcp_net_dev *d, struct mcp_net_props *props)
{
  memset(props, 0, sizeof(*props));
  props->name = d->name;
  props->pci_path = d->pci_path;
  props->guid = d->guid;
  props->ptr_support = d->ptr_support;
  props->reg_is_global = 1;
  props->force_flush = 0;
  props->speed_mbps = d->speed_mbps;
  props->port = d->topo_port; /* unique with guid per physical port, as NCCL's topology needs */
  props->latency_us = 0;
  /* Each comm takes its QPs, plus a loopback QP for flushes on the receive side. */
  props->max_comms = d->max_qp / (d->qps_per_conn + 1);
  props->max_recvs = MCP_MAX_RECVS;
  props->max_p2p_bytes = MCP_MAX_P2P_BYTES;
  props->max_coll_bytes = MCP_MAX_P2P_BYTES;
}

_Static_assert(sizeof(((struct mcp_net_props *)0)->vdev) == sizeof(((struct mcp_vdev_info *)0)->vp),
               "the properties carry every index of a virtual device");

ncclResult_t mcp_net_get_properties(int dev, struct mcp_net_props *props)
{
  const struct mcp_fabric *fab = mcp_fabric_process();
  struct mcp_vdev_info info;

  if (fab == NULL) {
    MCP_WARN("getProperties(%d): there are %d device(s)", dev, 0);
    return ncclInvalidArgument;
  }
  if (mcp_fabric_vdev_info(fab, dev, &info) < 0)
    return ncclInvalidArgument; /* said by the table: no such index, or a member gone */
  phys_properties(&fab->dev[info.mem[0]], props);
  /* A fused device: the first member describes it (PCI path, GUID, port, as NCCL's own
   * transport does), the bandwidth is the members' sum, NCCL may hand it only memory
   * every member can reach, and each comm holds QPs on every member. */
  for (int i = 1; i < info.nmem; i++) {
    struct mcp_net_props m;

    phys_properties(&fab->dev[info.mem[i]], &m);
    props->speed_mbps += m.speed_mbps;
    props->ptr_support &= m.ptr_support;
    if (m.max_comms < props->max_comms)
      props->max_comms = m.max_comms;
  }
  if (info.nmem > 1)
    props->name = info.name;
  props->vdev_n = info.nvp;
  memcpy(props->vdev, info.vp, sizeof(props->vdev));
  props->rail_id = info.rail;
  props->plane_id = info.plane;
  return ncclSuccess;
}

ncclResult_t mcp_net_make_vdevice(int *dev, int n, const int *devs, int max)
{
  const struct mcp_fabric *fab = mcp_fabric_process();

  if (dev == NULL || devs == NULL) {
    MCP_WARN("makeVDevice: NULL %s", dev == NULL ? "index" : "device list");
    return ncclInvalidArgument;
  }
  if (fab == NULL) {
    MCP_WARN("makeVDevice before init: there are no devices to fuse");
    return ncclInvalidUsage;
  }
  /* NCCL's IB transport answers so, at INFO: NCCL's topology code then keeps the devices
   * unfused. One device is no fusion and is made as before. */
  if (n > 1 && !fab->cfg.merge_nics) {
    MCP_INFO(NCCL_INIT | NCCL_NET, "makeVDevice of %d devices: not fused, NCCL_IB_MERGE_NICS=0", n);
    return ncclInvalidUsage;
  }
  return mcp_net_result(mcp_fabric_make_vdev(fab, n, devs, max, dev) == 0 ? 0 : MCP_ERR_USAGE);
}

/* dlclose: give back what the v8-v10 tables, which have no finalize, never could. */
__attribute__((destructor)) static void mcp_net_unload(void)
{
  if (mcp_fabric_process_unload())
    mcp_verbs_unload();
}
