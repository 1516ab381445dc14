/*
 * mcp_fabric_discover.c - turns verbs and sysfs into the inventory of usable ports.
 *
 * Every device is opened (the device cgroup of a container shows up here as an open
 * failure), every port queried, a GID chosen, and the context closed again: the
 * inventory keeps no file descriptor, so nothing outlives the last communicator.
 * Devices that cannot be used are reported with their reason in one message.
 */
#include <endian.h>
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "core/param.h"
#include "core/rankmap.h"
#include "core/sock.h"
#include "core/verbs.h"
#include "fabric/devctx.h"
#include "fabric/fabric.h"
#include "fabric/fabric_gid.h"
#include "fabric/fabric_hca.h"
#include "fabric/fabric_netns.h"
#include "fabric/fabric_pkey.h"
#include "fabric/fabric_select.h"
#include "fabric/fabric_sysfs.h"
#include "fabric/fabric_topo.h"
#include "nccl/net_common.h"

/* The loaded verbs library's sysfs view: "/sys", or a userspace device's own tree. */
#define SYSFS_ROOT mcp_verbs_sysfs_root()
#define GID_TABLE_MAX 256

int mcp_fabric_speed_mbps(uint8_t width_code, uint32_t speed_code)
{
  static const struct {
    uint32_t code;
    int mbps;
  } lane[] = {
    {1, 2500},   {2, 5000},   {4, 10000},    {8, 10000},    {16, 14000},
    {32, 25000}, {64, 50000}, {128, 100000}, {256, 200000},
  };
  int lanes, i;

  switch (width_code) {
  case 1: lanes = 1; break;
  case 2: lanes = 4; break;
  case 4: lanes = 8; break;
  case 8: lanes = 12; break;
  case 16: lanes = 2; break;
  default: return 0;
  }
  for (i = 0; i < (int)(sizeof(lane) / sizeof(lane[0])); i++)
    if (lane[i].code == speed_code)
      return lanes * lane[i].mbps;
  return 0;
}

int mcp_fabric_port_speed(uint8_t width_code, uint8_t speed_code, uint32_t speed_ex, int rate_mbps,
                          const char **source)
{
  int mbps = mcp_fabric_speed_mbps(width_code, speed_ex != 0 ? speed_ex : speed_code);

  *source = NULL;
  if (mbps > 0)
    return mbps;
  if (rate_mbps > 0) {
    *source = "the kernel's rate in sysfs";
    return rate_mbps;
  }
  *source = "mcpnet's fallback for an unknown speed";
  return MCP_FABRIC_SPEED_FALLBACK_MBPS;
}

int mcp_fabric_mtu_bytes(int ibv_mtu)
{
  return ibv_mtu >= IBV_MTU_256 && ibv_mtu <= IBV_MTU_4096 ? 128 << ibv_mtu : 0;
}

int mcp_fabric_mtu_enum(int bytes)
{
  int m;

  for (m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
    if ((128 << m) == bytes)
      return m;
  return 0;
}

static void sysfs_driver(const char *ibdev, char *out, size_t len)
{
  char path[PATH_MAX], target[PATH_MAX];
  ssize_t n;

  out[0] = '\0';
  snprintf(path, sizeof(path), "%s/class/infiniband/%s/device/driver", SYSFS_ROOT, ibdev);
  n = readlink(path, target, sizeof(target) - 1);
  if (n > 0) {
    const char *slash;
    target[n] = '\0';
    slash = strrchr(target, '/');
    snprintf(out, len, "%.31s", slash ? slash + 1 : target);
    return;
  }
  /* Software devices have no PCI parent; rxe names its netdev in "parent". */
  snprintf(path, sizeof(path), "%s/class/infiniband/%s/parent", SYSFS_ROOT, ibdev);
  if (access(path, R_OK) == 0 && strncmp(ibdev, "rxe", 3) == 0)
    snprintf(out, len, "rxe");
}

/* A real DMA-BUF to register: a page of a sealed memfd exported by /dev/udmabuf.
 * Returns the dma-buf fd, or -ENODEV when this host has no udmabuf (-errno when it fails). */
static int udmabuf_page(void)
{
  struct udmabuf_create create;
  int dev, mfd, buf = -EIO;

  dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
  if (dev < 0)
    return -ENODEV;
  mfd = memfd_create("mcpnet-dmabuf-probe", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (mfd >= 0 && ftruncate(mfd, 4096) == 0 && fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0) {
    memset(&create, 0, sizeof(create));
    create.memfd = (uint32_t)mfd;
    create.flags = UDMABUF_FLAGS_CLOEXEC;
    create.size = 4096;
    buf = ioctl(dev, UDMABUF_CREATE, &create);
    if (buf < 0)
      buf = -errno;
  }
  if (mfd >= 0)
    close(mfd);
  close(dev);
  return buf;
}

/* DMA-BUF support: a registration of a real dma-buf must succeed. Without udmabuf on
 * this host, fall back to what the driver says about an invalid fd: a driver without
 * the verb answers EOPNOTSUPP before it looks at the fd. */
static int probe_dmabuf(struct ibv_pd *pd, const char *ibdev)
{
  int fd = udmabuf_page(), ok;
  struct ibv_mr *mr;

  errno = 0;
  mr = mcp_ibv.reg_dmabuf_mr(pd, 0, 4096, 0, fd >= 0 ? fd : -1, IBV_ACCESS_LOCAL_WRITE);
  if (mr != NULL)
    mcp_ibv.dereg_mr(mr);
  ok = fd >= 0
    ? mr != NULL
    : mr == NULL && errno != EOPNOTSUPP && errno != ENOSYS && errno != EPROTONOSUPPORT && errno != 0;
  MCP_INFO(NCCL_INIT | NCCL_NET, "%s: DMA-BUF %s (%s)", ibdev, ok ? "supported" : "not supported",
           fd >= 0 ? (mr != NULL ? "a udmabuf page registered" : "registering a udmabuf page failed")
                   : "no /dev/udmabuf: judged by the driver's answer to an invalid fd");
  if (fd >= 0)
    close(fd);
  return ok;
}

static int probe_ptr_support(struct ibv_context *ctx, const char *ibdev)
{
  int support = NCCL_PTR_HOST;
  struct ibv_pd *pd;
  char mod[PATH_MAX], old[PATH_MAX];

  /* A GPU peer-memory module, as the loaded library's sysfs view shows it. */
  snprintf(mod, sizeof(mod), "%s/module/nvidia_peermem", SYSFS_ROOT);
  snprintf(old, sizeof(old), "%s/module/nv_peer_mem", SYSFS_ROOT);
  if (access(mod, F_OK) == 0 || access(old, F_OK) == 0)
    support |= NCCL_PTR_CUDA;
  if (mcp_ibv.reg_dmabuf_mr == NULL)
    return support;
  pd = mcp_ibv.alloc_pd(ctx);
  if (pd == NULL)
    return support;
  if (probe_dmabuf(pd, ibdev))
    support |= NCCL_PTR_DMABUF;
  mcp_ibv.dealloc_pd(pd);
  return support;
}

/* The subnet of the out-of-band interface: automatic GID choice prefers a GID in it,
 * so RDMA traffic goes where the bootstrap already reaches the peer. */
static int oob_subnet(const struct mcp_config *cfg, struct mcp_gid_range *range)
{
  struct mcp_sock_iface_choice ch;
  struct ifaddrs *ifs, *ifa;
  int found = -ENOENT;

  if (mcp_sock_iface_find(cfg->socket_ifname, &cfg->socket_ifname_list, cfg->socket_af, &ch) != 0 ||
      getifaddrs(&ifs) != 0)
    return -ENOENT;
  for (ifa = ifs; ifa != NULL && found < 0; ifa = ifa->ifa_next) {
    const uint8_t *a, *m;
    int alen, i, bits = 0;

    if (ifa->ifa_addr == NULL || ifa->ifa_netmask == NULL || strcmp(ifa->ifa_name, ch.name) != 0 ||
        ifa->ifa_addr->sa_family != ch.addr.sa.sa_family || (ifa->ifa_flags & IFF_LOOPBACK))
      continue;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      a = (const uint8_t *)&((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
      m = (const uint8_t *)&((const struct sockaddr_in *)ifa->ifa_netmask)->sin_addr;
      if (memcmp(a, &ch.addr.sin.sin_addr, 4) != 0)
        continue;
      alen = 4;
      memset(range->raw, 0, 10);
      range->raw[10] = range->raw[11] = 0xff;
      memcpy(range->raw + 12, a, 4);
      range->family = 4;
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      a = (const uint8_t *)&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
      m = (const uint8_t *)&((const struct sockaddr_in6 *)ifa->ifa_netmask)->sin6_addr;
      if (memcmp(a, &ch.addr.sin6.sin6_addr, 16) != 0)
        continue;
      alen = 16;
      memcpy(range->raw, a, 16);
      range->family = 6;
    } else {
      continue;
    }
    for (i = 0; i < alen; i++)
      bits += __builtin_popcount(m[i]);
    range->bits = bits;
    found = 0;
  }
  freeifaddrs(ifs);
  return found;
}

static void gid_policy_from_config(struct mcp_gid_policy *pol, const struct mcp_config *cfg,
                                   const struct mcp_rankmap_entry *pin)
{
  memset(pol, 0, sizeof(*pol));
  pol->index = cfg->ib_gid_index;
  pol->index_source = "NCCL_IB_GID_INDEX";
  pol->roce_version = cfg->ib_roce_version;
  pol->family = cfg->ib_af == AF_INET6 ? 6 : 4;
  if (cfg->ib_addr_range != NULL && mcp_gid_range_parse(cfg->ib_addr_range, &pol->range) == 0) {
    pol->has_range = 1;
    pol->range_source = "NCCL_IB_ADDR_RANGE";
  }
  pol->has_oob_subnet = oob_subnet(cfg, &pol->oob_subnet) == 0;
  if (pin == NULL)
    return;
  if (pin->gid_index >= 0) {
    pol->index = pin->gid_index;
    pol->index_source = "MCPNET_RANK_MAP gid=";
  } else if (pin->has_gid_addr) {
    pol->index = -1;
    pol->has_address = 1;
    memcpy(pol->address, pin->gid_addr, 16);
  } else if (pin->has_gid_range) {
    pol->index = -1;
    pol->has_range = 1;
    pol->range = pin->gid_range;
    pol->range_source = "MCPNET_RANK_MAP gid=";
  }
}

struct discover_dev {
  struct ibv_context *ctx;
  const char *ibdev;
  struct ibv_device_attr attr;
  int ptr_support;
  struct mcp_sysfs_dev sys; /* the device as sysfs shows it: GID tables */
  int sys_ok;
};

/* The port's readable GID entries from sysfs, with which are ours decided by the rule
 * the doctor and recovery share (mcp_netns_port_rows): RDMA netlink's answer for the
 * port where it names the port's netdev here; GID by GID where the port's netdev is in
 * another namespace (a pod's macvlan or ipvlan of it); names alone, which prove little
 * (every namespace has a lo, many an eth0), only when netlink cannot be asked. */
static int gid_table_read(const struct discover_dev *dd, int port, struct mcp_gid_entry *tab, int max)
{
  const struct mcp_sysfs_port *p = dd->sys_ok ? mcp_sysfs_port_find(&dd->sys, port) : NULL;
  struct mcp_netns_port info;
  int n;

  if (p == NULL)
    return 0;
  n = mcp_netns_port_rows(dd->ctx, SYSFS_ROOT, dd->ibdev, p, tab, max, &info);
  if (info.netlink_rc != 0)
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "%s port %d: RDMA netlink cannot name the port's netdev (%s); "
             "GIDs count as ours when their netdev's name exists here, which names shared "
             "across network namespaces can fool",
             dd->ibdev, port, strerror(-info.netlink_rc));
  else if (!info.per_gid)
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s port %d: netdev in this network namespace: %s", dd->ibdev, port,
             info.netdev);
  else if (info.per_gid_rc != 0)
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "%s port %d: the port's netdev is in another network namespace, and this "
             "namespace's netdevs cannot be read (%s): no GID of it counts as ours",
             dd->ibdev, port, strerror(-info.per_gid_rc));
  else
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "%s port %d: the port's netdev is in another network namespace; %d of its %d GIDs "
             "are ours (on a netdev here stacked on it, such as a macvlan or ipvlan, with the "
             "address configured here; %d GIDs with a netdev index)",
             dd->ibdev, port, info.nours, n, info.gid_ifindexes);
  return n;
}

/* What discovery of one process is working with. */
struct discover_run {
  struct mcp_fabric *fab;
  const struct mcp_config *cfg;
  const struct mcp_select *sel;
  const struct mcp_rankmap_entry *pin;
  struct mcp_gid_policy pol;
};

#define EXCLUDE(run, dev, port, ...) \
  mcp_fabric_exclude((run)->fab, dev, port, mcp_select_requested((run)->sel, dev, port), __VA_ARGS__)

/* The port's P_Key table: sysfs when it was read, else one query per index. */
static int pkey_table(const struct discover_dev *dd, int port, uint16_t *tab, int max)
{
  const struct mcp_sysfs_port *p = dd->sys_ok ? mcp_sysfs_port_find(&dd->sys, port) : NULL;
  int i, n;

  if (p != NULL && p->npkey > 0) {
    n = p->npkey < max ? p->npkey : max;
    memcpy(tab, p->pkey, (size_t)n * sizeof(tab[0]));
    return n;
  }
  n = dd->attr.max_pkeys < max ? dd->attr.max_pkeys : max;
  for (i = 0; i < n; i++) {
    __be16 v;
    if (mcp_ibv.query_pkey(dd->ctx, (uint8_t)port, i, &v) != 0)
      break;
    tab[i] = ntohs(v);
  }
  return i;
}

/* The P_Key index QPs on this port use: the tenant's key resolved by value, or
 * NCCL_IB_PKEY's index checked against the table. -ENOENT with why on failure. */
static int choose_pkey(const struct discover_run *run, const struct discover_dev *dd, int port,
                       struct mcp_net_dev *d, char *why, size_t len)
{
  uint16_t tab[128];
  char shown[256];
  int n = pkey_table(dd, port, tab, 128), value, full = 1, idx;
  const char *from = "MCPNET_TENANT_PKEY";

  value = run->cfg->tenant_pkey;
  if (run->pin != NULL && run->pin->pkey >= 0) {
    value = run->pin->pkey;
    from = "MCPNET_RANK_MAP pkey=";
  }
  mcp_pkey_format_table(tab, n, shown, sizeof(shown));
  if (value < 0) {
    idx = run->cfg->ib_pkey_index;
    if (idx >= n || (tab[idx] & MCP_PKEY_BASE_MASK) == 0) {
      snprintf(why, len, "NCCL_IB_PKEY=%d: the port's P_Key table has no key at that index (table: %s)", idx,
               shown);
      return -ENOENT;
    }
    d->pkey_index = idx;
    d->pkey = tab[idx];
    d->pkey_full = (tab[idx] & MCP_PKEY_FULL_MEMBER) != 0;
    return 0;
  }
  idx = mcp_pkey_resolve(tab, n, (unsigned)value, &full);
  if (idx < 0) {
    snprintf(why, len,
             "%s 0x%04x: partition 0x%04x is not in the port's P_Key table (table: %s); "
             "ask the fabric administrator to add this port to the partition",
             from, (unsigned)value, (unsigned)value & MCP_PKEY_BASE_MASK, shown);
    return -ENOENT;
  }
  d->pkey_index = idx;
  d->pkey = tab[idx];
  d->pkey_full = full;
  return 0;
}

/* Said once per process: every init would find the same ports. */
static int speed_fallback_said;

/* The port's speed as NCCL's IB transport finds it: the library's own answer where it has
 * ibv_query_port_speed (100 Mb/s units), else the width and speed codes. */
static int port_speed(const struct discover_dev *dd, int port, const struct mcp_port_attr *px)
{
  const struct mcp_sysfs_port *sp = dd->sys_ok ? mcp_sysfs_port_find(&dd->sys, port) : NULL;
  uint64_t q = 0;
  const char *source;
  int mbps;

  if (mcp_ibv.query_port_speed != NULL && mcp_ibv.query_port_speed(dd->ctx, (uint32_t)port, &q) == 0 &&
      q > 0 && q <= INT_MAX / 100)
    return (int)q * 100;
  mbps = mcp_fabric_port_speed(px->attr.active_width, px->attr.active_speed, mcp_port_attr_speed_ex(px),
                               sp != NULL ? sp->rate_mbps : 0, &source);
  if (source != NULL && !speed_fallback_said) {
    speed_fallback_said = 1;
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "%s port %d: unknown link width/speed code (width %u, speed %u, speed_ex %u); reporting %d Mb/s "
             "from %s (said once)",
             dd->ibdev, port, px->attr.active_width, px->attr.active_speed, mcp_port_attr_speed_ex(px), mbps,
             source);
  }
  return mbps;
}

static void discover_port(struct discover_run *run, const struct discover_dev *dd, int port)
{
  struct mcp_fabric *fab = run->fab;
  struct mcp_port_attr px;
  struct ibv_port_attr pattr;
  struct mcp_net_dev *d;
  char err[MCP_REASON_MAX];

  if (!mcp_select_allows_port(run->sel, dd->ibdev, port)) {
    char by[320];
    mcp_select_by(run->sel, by, sizeof(by));
    EXCLUDE(run, dd->ibdev, port, "not selected by %s", by);
    return;
  }
  if (mcp_verbs_query_port_ex(dd->ctx, (uint8_t)port, &px) != 0) {
    EXCLUDE(run, dd->ibdev, port, "ibv_query_port failed: %s", strerror(errno));
    return;
  }
  pattr = px.attr;
  if (pattr.state != IBV_PORT_ACTIVE) {
    EXCLUDE(run, dd->ibdev, port, "port state is %s, not ACTIVE (link down, or the switch port is not up)",
            pattr.state == IBV_PORT_DOWN     ? "DOWN"
              : pattr.state == IBV_PORT_INIT ? "INIT"
                                             : "not active");
    return;
  }
  if (pattr.link_layer != IBV_LINK_LAYER_ETHERNET && pattr.link_layer != IBV_LINK_LAYER_INFINIBAND) {
    EXCLUDE(run, dd->ibdev, port, "link layer %d is neither InfiniBand nor Ethernet", pattr.link_layer);
    return;
  }
  if (fab->ndev == MCP_MAX_NET_DEVS) {
    EXCLUDE(run, dd->ibdev, port, "more than %d usable ports; this one is left out", MCP_MAX_NET_DEVS);
    return;
  }
  d = &fab->dev[fab->ndev];
  memset(d, 0, sizeof(*d));
  if (pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
    struct mcp_gid_entry tab[GID_TABLE_MAX];
    int n = gid_table_read(dd, port, tab, GID_TABLE_MAX);

    int rc = mcp_gid_choose(tab, n, &run->pol, &d->gid, err, sizeof(err));

    if (rc < 0) {
      EXCLUDE(run, dd->ibdev, port, "%s", err);
      return;
    }
    if (rc > 0)
      MCP_WARN("%s port %d: %s", dd->ibdev, port, err);
  } else {
    d->gid.index = 0;
    d->gid.type = MCP_GID_TYPE_IB;
    snprintf(d->gid.why, sizeof(d->gid.why), "InfiniBand: LID-routed, GID 0");
  }
  if (choose_pkey(run, dd, port, d, err, sizeof(err)) != 0) {
    EXCLUDE(run, dd->ibdev, port, "%s", err);
    return;
  }
  d->sl = run->pin != NULL ? run->pin->sl : -1;
  d->tc = run->pin != NULL ? run->pin->tc : -1;
  mcp_select_rail_plane(run->sel, dd->ibdev, port, &d->rail, &d->plane);
  if (dd->attr.phys_port_cnt > 1)
    snprintf(d->name, sizeof(d->name), "%s:%d", dd->ibdev, port);
  else
    snprintf(d->name, sizeof(d->name), "%s", dd->ibdev);
  snprintf(d->ibdev, sizeof(d->ibdev), "%s", dd->ibdev);
  d->port = port;
  d->link_layer = pattr.link_layer;
  d->active_mtu = pattr.active_mtu;
  d->speed_mbps = port_speed(dd, port, &px);
  d->lid = pattr.lid;
  d->guid = be64toh(dd->attr.sys_image_guid);
  d->ptr_support = dd->ptr_support;
  d->max_qp = dd->attr.max_qp;
  d->max_cqe = dd->attr.max_cqe;
  d->qps_per_conn = run->cfg->ib_qps_per_conn; /* capped by the plugin's init (mcp_net_init.c) */
  d->max_qp_wr = dd->attr.max_qp_wr;
  d->max_sge = dd->attr.max_sge;
  sysfs_driver(dd->ibdev, d->driver, sizeof(d->driver));
  fab->ndev++;
  if (d->link_layer == IBV_LINK_LAYER_ETHERNET)
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s port %d: GID %d %s (%s, netdev %s): %s; P_Key 0x%04x at index %d",
             dd->ibdev, port, d->gid.index, d->gid.text,
             d->gid.type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : "RoCE v1",
             d->gid.netdev[0] ? d->gid.netdev : "none", d->gid.why, d->pkey, d->pkey_index);
  else
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s port %d: InfiniBand LID %u; P_Key 0x%04x at index %d (%s member)",
             dd->ibdev, port, d->lid, d->pkey, d->pkey_index, d->pkey_full ? "full" : "limited");
  if (d->rail >= 0 || d->plane >= 0)
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s port %d: rail %d, plane %d (-1: none; from %s)", dd->ibdev, port,
             d->rail, d->plane,
             run->pin != NULL && (run->pin->rail >= 0 || run->pin->plane >= 0) ? "MCPNET_RANK_MAP"
                                                                               : "NCCL_IB_HCA");
}

/* NCCL matches NCCL_IB_HCA tokens as prefixes: "mlx5_1" also takes mlx5_10..19. NCCL
 * uses every match, so mcpnet does too, strict or not, and says so once. */
static void warn_ambiguous_tokens(const struct mcp_select *sel, const char *const *names, int n)
{
  char msg[1024];

  if (mcp_select_ambiguous(sel, names, n, msg, sizeof(msg)) > 0)
    MCP_WARN("%s", msg);
}

static void discover_device(struct discover_run *run, struct ibv_device *dev)
{
  struct discover_dev dd = {.ibdev = mcp_ibv.get_device_name(dev)};
  char err[MCP_REASON_MAX], by[320];
  int port;

  if (!mcp_select_allows_dev(run->sel, dd.ibdev)) {
    mcp_select_by(run->sel, by, sizeof(by));
    mcp_fabric_exclude(run->fab, dd.ibdev, 0, 0, "not selected by %s", by);
    return;
  }
  dd.ctx = mcp_ibv.open_device(dev);
  if (dd.ctx == NULL) {
    /* libibverbs retries through a private node and reports that attempt's errno;
     * the node's own access check says what the user can fix. */
    char node[sizeof(dev->dev_name) + 32];
    int e = errno;

    snprintf(node, sizeof(node), "/dev/infiniband/%s", dev->dev_name);
    if (access(node, R_OK | W_OK) != 0)
      e = errno;
    EXCLUDE(run, dd.ibdev, 0,
            "cannot open its uverbs node %s (%s): not granted to this container "
            "(device cgroup, --device) or no permission for this user",
            node, strerror(e));
    return;
  }
  if (mcp_ibv.query_device(dd.ctx, &dd.attr) != 0) {
    EXCLUDE(run, dd.ibdev, 0, "ibv_query_device failed: %s", strerror(errno));
    mcp_ibv.close_device(dd.ctx);
    return;
  }
  dd.ptr_support = probe_ptr_support(dd.ctx, dd.ibdev);
  dd.sys_ok = mcp_sysfs_dev_read(SYSFS_ROOT, dd.ibdev, &dd.sys, err, sizeof(err)) == 0;
  if (!dd.sys_ok)
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s: no GID table from sysfs: %s", dd.ibdev, err);
  for (port = 1; port <= dd.attr.phys_port_cnt; port++)
    discover_port(run, &dd, port);
  mcp_sysfs_dev_free(&dd.sys);
  mcp_ibv.close_device(dd.ctx);
}

static const char fallback[] = "NCCL falls back to its own transports unless NCCL_NET=MCP is set";

/* The rank map's entry for this rank, or NULL; -ENODEV when init must fail. */
static int find_pin(struct mcp_fabric *fab, const struct mcp_config *cfg, const struct mcp_rankmap *map,
                    const struct mcp_rankmap_entry **pin)
{
  char err[MCP_REASON_MAX];

  *pin = NULL;
  if (map->n == 0)
    return 0;
  *pin = fab->local_rank >= 0 ? mcp_rankmap_find(map, fab->local_rank) : NULL;
  if (*pin != NULL) {
    snprintf(fab->placement, sizeof(fab->placement), "%s", (*pin)->text);
    MCP_INFO(NCCL_INIT | NCCL_NET, "local rank %d (from %s): MCPNET_RANK_MAP entry '%s'%s", fab->local_rank,
             fab->local_rank_source, (*pin)->text,
             cfg->ib_hca != NULL ? "; NCCL_IB_HCA does not apply to a pinned rank" : "");
    return 0;
  }
  if (fab->local_rank < 0)
    snprintf(err, sizeof(err),
             "MCPNET_RANK_MAP is set but this process has no local rank: set "
             "MCPNET_LOCAL_RANK, or start it with a launcher that sets LOCAL_RANK (torchrun), "
             "SLURM_LOCALID (srun) or OMPI_COMM_WORLD_LOCAL_RANK (mpirun)");
  else
    snprintf(err, sizeof(err), "MCPNET_RANK_MAP places no device for local rank %d (from %s)",
             fab->local_rank, fab->local_rank_source);
  if (cfg->strict) {
    MCP_WARN("%s. MCPNET_STRICT=1: init fails; %s", err, fallback);
    return -ENODEV;
  }
  MCP_WARN("%s; MCPNET_STRICT=0: using every usable device", err);
  return 0;
}

/* Said once per process: every discovery would find the same spaces. */
static int hca_spaces_warned;

#define DISCOVER_REPORT_MAX 8192
/* The rank map (core) holds device names that discovery compares with its own. */
_Static_assert(MCP_RANKMAP_NAME_MAX == MCP_DEV_NAME_MAX, "rank map device names fit a device name");

/* What discovery found, said once: fail, or go on with a word about what was skipped. */
static int discover_verdict(struct mcp_fabric *fab, const struct mcp_config *cfg, int n, int nproblems,
                            const char *problems, const char *report)
{
  if (nproblems > 0 && cfg->strict) {
    MCP_WARN("init fails (MCPNET_STRICT=1): %s. Devices found: %s. %s", problems, report, fallback);
    mcp_fabric_release(fab);
    return -ENODEV;
  }
  if (fab->ndev == 0) {
    MCP_WARN("no usable RDMA port among %d device(s): %s. %s", n, report, fallback);
    return -ENODEV;
  }
  if (nproblems > 0)
    MCP_WARN("requested devices skipped (MCPNET_STRICT=0): %s", problems);
  if (fab->nexcl > 0)
    MCP_INFO(NCCL_INIT | NCCL_NET, "devices: %s", report);
  return 0;
}

void mcp_fabric_cfg_fill(struct mcp_fabric_cfg *fc, const struct mcp_config *cfg)
{
  fc->data_access = mcp_mr_data_access(cfg);
  fc->merge_nics = cfg->ib_merge_nics;
}

int mcp_fabric_discover_rank(struct mcp_fabric *fab, const struct mcp_config *cfg, int local_rank,
                             const char *local_rank_source)
{
  static const struct mcp_rankmap no_map; /* MCPNET_RANK_MAP unset */
  /* The loader parsed the map once (mcp_param_load); discovery only resolves it. */
  const struct mcp_rankmap *map = cfg->rank_map_parsed != NULL ? cfg->rank_map_parsed : &no_map;
  char *report;
  const char *names[MCP_MAX_EXCLUDED];
  struct discover_run run = {.fab = fab, .cfg = cfg};
  struct ibv_device **list;
  struct mcp_select sel;
  char problems[2048];
  int i, n = 0, nnames, nproblems, rc;

  memset(fab, 0, sizeof(*fab));
  mcp_fabric_cfg_fill(&fab->cfg, cfg);
  fab->local_rank = local_rank;
  fab->local_rank_source = local_rank_source;
  rc = find_pin(fab, cfg, map, &run.pin);
  if (rc != 0)
    return rc;
  /* NCCL_IB_HCA was parsed by the loader, which refused a bad list. */
  mcp_select_init(&sel, cfg->ib_hca, &cfg->ib_hca_list, run.pin, cfg->strict);
  mcp_match_list_warn_trimmed("NCCL_IB_HCA", &sel.hca, &hca_spaces_warned);
  run.sel = &sel;
  gid_policy_from_config(&run.pol, cfg, run.pin);
  list = mcp_ibv.get_device_list(&n);
  if (list == NULL || n == 0) {
    MCP_WARN("no RDMA device found (ibv_get_device_list: %s): is the RDMA driver loaded and "
             "/dev/infiniband visible in this container? %s",
             list == NULL ? strerror(errno) : "0 devices", fallback);
    if (list != NULL)
      mcp_ibv.free_device_list(list);
    return -ENODEV;
  }
  nnames = n < MCP_MAX_EXCLUDED ? n : MCP_MAX_EXCLUDED;
  for (i = 0; i < nnames; i++)
    names[i] = mcp_ibv.get_device_name(list[i]);
  warn_ambiguous_tokens(&sel, names, nnames);
  for (i = 0; i < n; i++)
    discover_device(&run, list[i]);
  /* Port numbers for NCCL count the other devices found, so they come once all are in. */
  if (mcp_fabric_topo_assign(fab, SYSFS_ROOT, cfg->ib_merge_vfs) != 0)
    MCP_INFO(NCCL_INIT | NCCL_NET, "out of memory naming the devices' PCI paths; some report none");
  nproblems = mcp_select_check(&sel, fab, names, nnames, problems, sizeof(problems));
  mcp_ibv.free_device_list(list);
  /* Only for the messages below: on the heap (8 KiB), never kept past this call. */
  report = malloc(DISCOVER_REPORT_MAX);
  if (report != NULL)
    mcp_select_report(fab, report, DISCOVER_REPORT_MAX);
  rc = discover_verdict(fab, cfg, n, nproblems, problems, report != NULL ? report : "(out of memory)");
  free(report);
  return rc;
}

int mcp_fabric_discover(struct mcp_fabric *fab, const struct mcp_config *cfg)
{
  const char *source = NULL;
  char err[MCP_REASON_MAX];
  int rank = mcp_local_rank(cfg->local_rank, NULL, NULL, &source, err, sizeof(err));

  if (rank == -EINVAL) {
    if (cfg->rank_map != NULL) {
      MCP_WARN("%s: MCPNET_RANK_MAP needs this process's local rank; set MCPNET_LOCAL_RANK", err);
      memset(fab, 0, sizeof(*fab));
      return -EINVAL;
    }
  }
  if (rank < 0)
    rank = -1; /* none known: discover_rank's "no local rank" */
  return mcp_fabric_discover_rank(fab, cfg, rank, source);
}

void mcp_fabric_release(struct mcp_fabric *fab)
{
  int i;

  for (i = 0; i < fab->ndev; i++) {
    free(fab->dev[i].pci_path);
    fab->dev[i].pci_path = NULL;
  }
  fab->ndev = 0;
}
