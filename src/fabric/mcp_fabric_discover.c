/*
 * mcp_fabric_discover.c - turns verbs and sysfs into the inventory of usable ports.
 *
 * Every device is opened (the device cgroup of a container shows up here as an open
 * failure), every port queried, a GID chosen, and the context closed again: the
 * inventory keeps no file descriptor, so nothing outlives the last communicator.
 * Devices that cannot be used are reported with their reason in one message.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcpnet/fabric.h"
#include "mcpnet/fabric_gid.h"
#include "mcpnet/fabric_hca.h"
#include "mcpnet/fabric_netns.h"
#include "mcpnet/fabric_sysfs.h"
#include "mcpnet/log.h"
#include "mcpnet/param.h"
#include "mcpnet/verbs.h"
#include "nccl/net_common.h"

#define SYSFS_ROOT "/sys"
#define SYSFS_IB SYSFS_ROOT "/class/infiniband"
#define GID_TABLE_MAX 256

int mcp_fabric_speed_mbps(uint8_t width_code, uint32_t speed_code)
{
  static const struct { uint32_t code; int mbps; } lane[] = {
    {1, 2500}, {2, 5000}, {4, 10000}, {8, 10000}, {16, 14000},
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
  snprintf(path, sizeof(path), SYSFS_IB "/%s/device/driver", ibdev);
  n = readlink(path, target, sizeof(target) - 1);
  if (n > 0) {
    const char *slash;
    target[n] = '\0';
    slash = strrchr(target, '/');
    snprintf(out, len, "%.31s", slash ? slash + 1 : target);
    return;
  }
  /* Software devices have no PCI parent; rxe names its netdev in "parent". */
  snprintf(path, sizeof(path), SYSFS_IB "/%s/parent", ibdev);
  if (access(path, R_OK) == 0 && strncmp(ibdev, "rxe", 3) == 0)
    snprintf(out, len, "rxe");
}

static char *sysfs_pci_path(const char *ibdev)
{
  char path[PATH_MAX];

  snprintf(path, sizeof(path), SYSFS_IB "/%s/device", ibdev);
  return realpath(path, NULL);
}

/* A real DMA-BUF to register: a page of a sealed memfd exported by /dev/udmabuf.
 * Returns the dma-buf fd, or -1 when this host has no udmabuf. */
static int udmabuf_page(void)
{
  struct udmabuf_create create;
  int dev, mfd, buf = -1;

  dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
  if (dev < 0)
    return -1;
  mfd = memfd_create("mcpnet-dmabuf-probe", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (mfd >= 0 && ftruncate(mfd, 4096) == 0 && fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0) {
    memset(&create, 0, sizeof(create));
    create.memfd = (uint32_t)mfd;
    create.flags = UDMABUF_FLAGS_CLOEXEC;
    create.size = 4096;
    buf = ioctl(dev, UDMABUF_CREATE, &create);
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
  mr = mcp_ibv.reg_dmabuf_mr(pd, 0, 4096, 0, fd, IBV_ACCESS_LOCAL_WRITE);
  if (mr != NULL)
    mcp_ibv.dereg_mr(mr);
  ok = fd >= 0 ? mr != NULL
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

  if (access("/sys/module/nvidia_peermem", F_OK) == 0 || access("/sys/module/nv_peer_mem", F_OK) == 0)
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

static void gid_policy_from_config(struct mcp_gid_policy *pol, const struct mcp_config *cfg)
{
  memset(pol, 0, sizeof(*pol));
  pol->index = cfg->ib_gid_index;
  pol->roce_version = cfg->ib_roce_version;
  pol->family = cfg->ib_af == AF_INET6 ? 6 : 4;
  if (cfg->ib_addr_range != NULL && mcp_gid_range_parse(cfg->ib_addr_range, &pol->range) == 0)
    pol->has_range = 1;
}

struct discover_log {
  char text[4096];
  size_t len;
};

static void excluded(struct discover_log *log, const char *dev, int port, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
static void excluded(struct discover_log *log, const char *dev, int port, const char *fmt, ...)
{
  size_t room = sizeof(log->text) - log->len;
  va_list ap;
  int n;

  if (room <= 1)
    return;
  n = port > 0 ? snprintf(log->text + log->len, room, "; %s:%d: ", dev, port)
               : snprintf(log->text + log->len, room, "; %s: ", dev);
  log->len += n > 0 ? (size_t)n : 0;
  if (log->len >= sizeof(log->text) - 1) {
    log->len = sizeof(log->text) - 1;
    return;
  }
  va_start(ap, fmt);
  n = vsnprintf(log->text + log->len, sizeof(log->text) - log->len, fmt, ap);
  va_end(ap);
  log->len += n > 0 ? (size_t)n : 0;
  if (log->len >= sizeof(log->text))
    log->len = sizeof(log->text) - 1;
}

struct discover_dev {
  struct ibv_context *ctx;
  const char *ibdev;
  struct ibv_device_attr attr;
  int ptr_support;
  struct mcp_sysfs_dev sys;  /* the device as sysfs shows it: GID tables */
  int sys_ok;
};

/* The port's readable GID entries from sysfs. Which are ours is decided by RDMA
 * netlink's answer for the port: its netdev, and what this namespace links above it,
 * when that netdev is here. Names alone prove nothing (every namespace has a lo, many
 * an eth0); they are trusted only when netlink cannot be asked. */
static int gid_table_read(const struct discover_dev *dd, int port, struct mcp_gid_entry *tab, int max)
{
  const struct mcp_sysfs_port *p = dd->sys_ok ? mcp_sysfs_port_find(&dd->sys, port) : NULL;
  struct mcp_netns_view view = {.n = 0};
  char ndev[IF_NAMESIZE];
  int rc, i;

  if (p == NULL)
    return 0;
  rc = mcp_netns_port_netdev(dd->ibdev, port, ndev, sizeof(ndev));
  if (rc == 0) {
    mcp_netns_view_add(&view, SYSFS_ROOT, ndev);
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s port %d: netdev in this network namespace: %s", dd->ibdev,
             port, ndev[0] ? ndev : "none (its GIDs belong to another namespace)");
  } else {
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s port %d: RDMA netlink cannot name the port's netdev (%s); "
             "GIDs count as ours when their netdev's name exists here, which names shared "
             "across network namespaces can fool", dd->ibdev, port, strerror(-rc));
    for (i = 0; i < p->ngid; i++)
      mcp_netns_view_add(&view, SYSFS_ROOT, p->gid[i].netdev);
  }
  return mcp_netns_gid_rows(p, &view, tab, max);
}

static void discover_port(struct mcp_fabric *fab, const struct discover_dev *dd, int port,
                          const struct mcp_config *cfg, const struct mcp_hca_list *hca,
                          struct discover_log *log)
{
  struct ibv_port_attr pattr;
  struct mcp_net_dev *d;
  char err[MCP_REASON_MAX];

  if (!mcp_hca_allows(hca, dd->ibdev, port)) {
    excluded(log, dd->ibdev, port, "not selected by NCCL_IB_HCA=%s", cfg->ib_hca);
    return;
  }
  if (mcp_verbs_query_port(dd->ctx, (uint8_t)port, &pattr) != 0) {
    excluded(log, dd->ibdev, port, "ibv_query_port failed: %s", strerror(errno));
    return;
  }
  if (pattr.state != IBV_PORT_ACTIVE) {
    excluded(log, dd->ibdev, port, "port state is %s, not ACTIVE",
             pattr.state == IBV_PORT_DOWN ? "DOWN" : pattr.state == IBV_PORT_INIT ? "INIT" : "not active");
    return;
  }
  if (pattr.link_layer != IBV_LINK_LAYER_ETHERNET && pattr.link_layer != IBV_LINK_LAYER_INFINIBAND) {
    excluded(log, dd->ibdev, port, "link layer %d is neither InfiniBand nor Ethernet", pattr.link_layer);
    return;
  }
  if (fab->ndev == MCP_MAX_NET_DEVS) {
    excluded(log, dd->ibdev, port, "more than %d usable ports; this one is left out", MCP_MAX_NET_DEVS);
    return;
  }
  d = &fab->dev[fab->ndev];
  memset(d, 0, sizeof(*d));
  if (pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
    struct mcp_gid_entry tab[GID_TABLE_MAX];
    struct mcp_gid_policy pol;
    int n = gid_table_read(dd, port, tab, GID_TABLE_MAX);

    gid_policy_from_config(&pol, cfg);
    if (mcp_gid_choose(tab, n, &pol, &d->gid, err, sizeof(err)) != 0) {
      excluded(log, dd->ibdev, port, "%s", err);
      return;
    }
  } else {
    d->gid.index = 0;
    d->gid.type = MCP_GID_TYPE_IB;
    snprintf(d->gid.why, sizeof(d->gid.why), "InfiniBand: LID-routed, GID 0");
  }
  if (dd->attr.phys_port_cnt > 1)
    snprintf(d->name, sizeof(d->name), "%s:%d", dd->ibdev, port);
  else
    snprintf(d->name, sizeof(d->name), "%s", dd->ibdev);
  snprintf(d->ibdev, sizeof(d->ibdev), "%s", dd->ibdev);
  d->port = port;
  d->link_layer = pattr.link_layer;
  d->active_mtu = pattr.active_mtu;
  d->speed_mbps = mcp_fabric_speed_mbps(pattr.active_width, pattr.active_speed);
  d->lid = pattr.lid;
  d->guid = be64toh(dd->attr.sys_image_guid);
  d->pci_path = sysfs_pci_path(dd->ibdev);
  d->ptr_support = dd->ptr_support;
  d->max_qp = dd->attr.max_qp;
  d->max_qp_wr = dd->attr.max_qp_wr;
  d->max_sge = dd->attr.max_sge;
  sysfs_driver(dd->ibdev, d->driver, sizeof(d->driver));
  fab->ndev++;
  if (d->link_layer == IBV_LINK_LAYER_ETHERNET)
    MCP_INFO(NCCL_INIT | NCCL_NET, "%s port %d: GID %d %s (%s, netdev %s): %s", dd->ibdev, port,
             d->gid.index, d->gid.text, d->gid.type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : "RoCE v1",
             d->gid.netdev[0] ? d->gid.netdev : "none", d->gid.why);
}

/* An include list names the device with some token (ports are checked per port). */
static int hca_names_device(const struct mcp_hca_list *hca, const char *ibdev)
{
  int t;

  if (hca->n == 0 || hca->exclude)
    return 1;
  for (t = 0; t < hca->n; t++)
    if (mcp_hca_token_matches(hca, t, ibdev))
      return 1;
  return 0;
}

/* NCCL matches NCCL_IB_HCA tokens as prefixes: "mlx5_1" also takes mlx5_10..19. Say so
 * when a token catches more than one device. */
static void warn_ambiguous_tokens(const struct mcp_hca_list *hca, struct ibv_device **list, int n,
                                  const char *text)
{
  const char *names[MCP_MAX_NET_DEVS];
  char which[512];
  int i, t, m = 0;

  if (hca->exact)
    return;
  for (i = 0; i < n && m < MCP_MAX_NET_DEVS; i++)
    names[m++] = mcp_ibv.get_device_name(list[i]);
  for (t = 0; t < hca->n; t++)
    if (mcp_hca_token_devices(hca, t, names, m, which, sizeof(which)) > 1)
      MCP_WARN("NCCL_IB_HCA=%s: '%s' matches several devices (%s): NCCL's prefix matching. "
               "Start the list with '=' to match names exactly", text, hca->e[t].name, which);
}

int mcp_fabric_discover(struct mcp_fabric *fab, const struct mcp_config *cfg)
{
  struct discover_log log = {.len = 0};
  struct ibv_device **list;
  struct mcp_hca_list hca;
  char err[MCP_REASON_MAX];
  int i, n = 0;

  memset(fab, 0, sizeof(*fab));
  log.text[0] = '\0';
  if (mcp_hca_parse(cfg->ib_hca, &hca, err, sizeof(err)) != 0) {
    MCP_WARN("%s", err);
    return -1;
  }
  list = mcp_ibv.get_device_list(&n);
  if (list == NULL || n == 0) {
    MCP_WARN("no RDMA device found (ibv_get_device_list: %s): is the RDMA driver loaded and "
             "/dev/infiniband visible in this container? NCCL falls back to its own transports "
             "unless NCCL_NET=MCP", list == NULL ? strerror(errno) : "0 devices");
    if (list != NULL)
      mcp_ibv.free_device_list(list);
    return -1;
  }
  warn_ambiguous_tokens(&hca, list, n, cfg->ib_hca);
  for (i = 0; i < n; i++) {
    struct discover_dev dd = {.ibdev = mcp_ibv.get_device_name(list[i])};
    int port;

    if (!hca_names_device(&hca, dd.ibdev)) {
      excluded(&log, dd.ibdev, 0, "not selected by NCCL_IB_HCA=%s", cfg->ib_hca);
      continue;
    }
    dd.ctx = mcp_ibv.open_device(list[i]);
    if (dd.ctx == NULL) {
      excluded(&log, dd.ibdev, 0, "cannot open its uverbs node (%s): not granted to this container?",
               strerror(errno));
      continue;
    }
    if (mcp_ibv.query_device(dd.ctx, &dd.attr) != 0) {
      excluded(&log, dd.ibdev, 0, "ibv_query_device failed: %s", strerror(errno));
      mcp_ibv.close_device(dd.ctx);
      continue;
    }
    dd.ptr_support = probe_ptr_support(dd.ctx, dd.ibdev);
    dd.sys_ok = mcp_sysfs_dev_read(SYSFS_ROOT, dd.ibdev, &dd.sys, err, sizeof(err)) == 0;
    if (!dd.sys_ok)
      MCP_INFO(NCCL_INIT | NCCL_NET, "%s: no GID table from sysfs: %s", dd.ibdev, err);
    for (port = 1; port <= dd.attr.phys_port_cnt; port++)
      discover_port(fab, &dd, port, cfg, &hca, &log);
    mcp_sysfs_dev_free(&dd.sys);
    mcp_ibv.close_device(dd.ctx);
  }
  mcp_ibv.free_device_list(list);
  if (fab->ndev == 0) {
    MCP_WARN("no usable RDMA port among %d device(s)%s. NCCL falls back to its own transports "
             "unless NCCL_NET=MCP is set", n, log.text);
    return -1;
  }
  if (log.len > 0)
    MCP_INFO(NCCL_INIT | NCCL_NET, "excluded%s", log.text);
  return 0;
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
