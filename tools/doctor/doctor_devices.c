/*
 * doctor_devices.c - every RDMA device and port as this process sees it: what sysfs
 * says (state, link layer, rate, GIDs and their netdevs, P_Keys), what verbs says (does
 * the uverbs node open, active and maximum MTU), and which GIDs belong to this network
 * namespace according to RDMA netlink. The readers are mcpnet_core's own (the same as
 * discovery uses); this file only gathers their answers per port and turns the
 * problems people hit into findings: a port that is not ACTIVE, a uverbs node the
 * container may not open, a RoCE port whose addresses live in another namespace.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "core/verbs.h"
#include "fabric/fabric_gid.h"
#include "fabric/fabric_netns.h"
#include "fabric/fabric_pkey.h"
#include "fabric/fabric_sysfs.h"

#define SYSFS_ROOT "/sys"
#define GID_ROWS_MAX 256

static const char *gid_type_name(int type)
{
  return type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : type == MCP_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB";
}

static int read_int_file(const char *path, long long *out)
{
  FILE *f = fopen(path, "re");
  int ok;

  if (f == NULL)
    return -1;
  ok = fscanf(f, "%lld", out) == 1;
  fclose(f);
  return ok ? 0 : -1;
}

static int netdev_mtu(const char *netdev)
{
  char path[PATH_MAX];
  long long v;

  if (netdev[0] == '\0')
    return 0;
  snprintf(path, sizeof(path), SYSFS_ROOT "/class/net/%s/mtu", netdev);
  return read_int_file(path, &v) == 0 ? (int)v : 0;
}

/* The uverbs character device of an RDMA device: /sys/class/infiniband_verbs/X/ibdev. */
static void uverbs_name(const char *ibdev, char *out, size_t len)
{
  DIR *d = opendir(SYSFS_ROOT "/class/infiniband_verbs");
  struct dirent *e;

  out[0] = '\0';
  if (d == NULL)
    return;
  while ((e = readdir(d)) != NULL) {
    char path[PATH_MAX], name[MCP_DEV_NAME_MAX];
    FILE *f;

    if (strncmp(e->d_name, "uverbs", 6) != 0)
      continue;
    snprintf(path, sizeof(path), SYSFS_ROOT "/class/infiniband_verbs/%s/ibdev", e->d_name);
    f = fopen(path, "re");
    if (f == NULL)
      continue;
    if (fscanf(f, "%63s", name) == 1 && strcmp(name, ibdev) == 0)
      snprintf(out, len, "%.31s", e->d_name);
    fclose(f);
  }
  closedir(d);
}

static void port_from_sysfs(struct doctor_port *dp, const struct mcp_sysfs_dev *sd,
                            const struct mcp_sysfs_port *sp)
{
  struct mcp_gid_entry rows[GID_ROWS_MAX];
  struct mcp_netns_port info;
  int i, n;

  dp->num = sp->num;
  snprintf(dp->state, sizeof(dp->state), "%s", sp->state_name[0] ? sp->state_name : "unknown");
  snprintf(dp->phys_state, sizeof(dp->phys_state), "%s",
           sp->phys_state_name[0] ? sp->phys_state_name : "unknown");
  dp->ethernet = sp->link_layer == MCP_LINK_LAYER_ETHERNET;
  snprintf(dp->link_layer, sizeof(dp->link_layer), "%s",
           dp->ethernet                                    ? "Ethernet"
             : sp->link_layer == MCP_LINK_LAYER_INFINIBAND ? "InfiniBand"
                                                           : "unknown");
  snprintf(dp->rate, sizeof(dp->rate), "%s", sp->rate);
  dp->rate_mbps = sp->rate_mbps;
  dp->lid = sp->lid;
  dp->gid_slots = sp->gid_slots;
  dp->gid_skipped = sp->gid_skipped;
  mcp_pkey_format_table(sp->pkey, sp->npkey, dp->pkeys, sizeof(dp->pkeys));

  /* Which GIDs are ours: the rule discovery uses (mcp_netns_port_rows), so the doctor
   * and the plugin agree, the per-GID rule of a pod on a macvlan or ipvlan included. */
  n = mcp_netns_port_rows(NULL, SYSFS_ROOT, sd->name, sp, rows, GID_ROWS_MAX, &info);
  dp->netlink_rc = info.netlink_rc;
  snprintf(dp->netdev, sizeof(dp->netdev), "%s", info.netdev);
  dp->gid = calloc((size_t)(n > 0 ? n : 1), sizeof(*dp->gid));
  if (dp->gid == NULL)
    n = 0;
  for (i = 0; i < n; i++) {
    struct doctor_gid *g = &dp->gid[i];

    g->index = rows[i].index;
    mcp_gid_format(rows[i].raw, g->gid, sizeof(g->gid));
    snprintf(g->type, sizeof(g->type), "%s", gid_type_name(rows[i].type));
    snprintf(g->netdev, sizeof(g->netdev), "%s", rows[i].netdev);
    g->in_ns = rows[i].netdev_in_ns;
    g->up = rows[i].netdev_up;
    dp->ngid_ours += g->in_ns;
    dp->ngid_usable += g->in_ns && g->up && !(rows[i].raw[0] == 0xfe && (rows[i].raw[1] & 0xc0) == 0x80);
    if (dp->gid_netdev[0] == '\0' && g->netdev[0] != '\0')
      snprintf(dp->gid_netdev, sizeof(dp->gid_netdev), "%s", g->netdev);
  }
  /* A pod's port lists the host's netdev first: name the one of ours where there is one. */
  for (i = 0; i < n; i++)
    if (dp->gid[i].in_ns && dp->gid[i].netdev[0] != '\0') {
      snprintf(dp->gid_netdev, sizeof(dp->gid_netdev), "%s", dp->gid[i].netdev);
      break;
    }
  dp->ngid = n;
  dp->netdev_mtu = netdev_mtu(dp->netdev[0] ? dp->netdev : (dp->ngid_ours > 0 ? dp->gid_netdev : ""));
}

/* Opens the device as discovery does; records whether that works and the MTUs. */
static void verbs_probe(struct doctor_report *r, struct ibv_device **list, int n)
{
  int i, k;

  for (i = 0; i < r->ndev; i++) {
    struct doctor_dev *d = &r->dev[i];
    struct ibv_context *ctx = NULL;

    for (k = 0; k < n; k++)
      if (strcmp(mcp_ibv.get_device_name(list[k]), d->name) == 0)
        break;
    if (k == n) {
      snprintf(d->open_err, sizeof(d->open_err), "libibverbs does not list it (no provider for driver %s?)",
               d->driver[0] ? d->driver : "unknown");
      continue;
    }
    errno = 0;
    ctx = mcp_ibv.open_device(list[k]);
    if (ctx == NULL) {
      snprintf(d->open_err, sizeof(d->open_err), "%s", strerror(errno ? errno : ENODEV));
      continue;
    }
    d->opens = 1;
    for (int p = 0; p < d->nport; p++) {
      struct ibv_port_attr pa;

      if (mcp_verbs_query_port(ctx, (uint8_t)d->port[p].num, &pa) == 0) {
        d->port[p].active_mtu = mcp_fabric_mtu_bytes(pa.active_mtu);
        d->port[p].max_mtu = mcp_fabric_mtu_bytes(pa.max_mtu);
      }
    }
    mcp_ibv.close_device(ctx);
  }
}

void doctor_devices_scan(struct doctor_report *r)
{
  static char names[DOCTOR_MAX_DEVS][MCP_DEV_NAME_MAX];
  struct ibv_device **list = NULL;
  int n, i, nlist = 0, verbs_ok;

  n = mcp_sysfs_dev_names(SYSFS_ROOT, names, DOCTOR_MAX_DEVS);
  r->devs_rc = n < 0 ? n : 0;
  if (n < 0)
    return;
  /* Before the ports: which GIDs are ours needs the ifindexes verbs gives for them. The
   * library is the one the plugin would load (MCPNET_VERBS_LIBRARY), where the
   * configuration loaded (doctor_config_load runs first). */
  verbs_ok =
    mcp_verbs_load(r->cfg_rc == 0 ? r->cfg.verbs_library : NULL, r->verbs_err, sizeof(r->verbs_err)) == 0;
  if (n > DOCTOR_MAX_DEVS)
    n = DOCTOR_MAX_DEVS;
  for (i = 0; i < n; i++) {
    struct doctor_dev *d = &r->dev[r->ndev];
    struct mcp_sysfs_dev sd;
    char err[256];

    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "%.63s", names[i]);
    if (mcp_sysfs_dev_read(SYSFS_ROOT, names[i], &sd, err, sizeof(err)) != 0) {
      snprintf(d->open_err, sizeof(d->open_err), "sysfs: %.150s", err);
      mcp_sysfs_dev_free(&sd);
      r->ndev++;
      continue;
    }
    snprintf(d->driver, sizeof(d->driver), "%s", sd.driver);
    uverbs_name(d->name, d->uverbs, sizeof(d->uverbs));
    d->port = calloc((size_t)(sd.nport > 0 ? sd.nport : 1), sizeof(*d->port));
    if (d->port != NULL) {
      d->nport = sd.nport;
      for (int p = 0; p < sd.nport; p++)
        port_from_sysfs(&d->port[p], &sd, &sd.port[p]);
    }
    mcp_sysfs_dev_free(&sd);
    r->ndev++;
  }
  if (!verbs_ok)
    return;
  r->verbs_err[0] = '\0';
  list = mcp_ibv.get_device_list(&nlist);
  if (list == NULL)
    nlist = 0;
  verbs_probe(r, list, nlist);
  if (list != NULL)
    mcp_ibv.free_device_list(list);
}

static void check_port(struct doctor_report *r, const struct doctor_dev *d, const struct doctor_port *p)
{
  char subj[80], fix[512];

  snprintf(subj, sizeof(subj), "%s:%d", d->name, p->num);
  if (strcmp(p->state, "ACTIVE") != 0) {
    const char *nd = p->netdev[0] ? p->netdev : p->gid_netdev;

    if (p->ethernet && nd[0])
      snprintf(fix, sizeof(fix),
               "bring the link up (ip link set %s up; check the cable and switch port), "
               "or leave the device out: NCCL_IB_HCA=^%s",
               nd, d->name);
    else
      snprintf(fix, sizeof(fix),
               "bring the link up (cable, switch port, subnet manager: ibstat %s), "
               "or leave the device out: NCCL_IB_HCA=^%s",
               d->name, d->name);
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_DEVICES, "port-state", subj, fix,
               "%s port %d is %s (physical state %s): mcpnet does not use it", d->name, p->num, p->state,
               p->phys_state);
    return;
  }
  if (p->ethernet && p->ngid_ours == 0) {
    if (p->ngid > 0 && p->netlink_rc == 0) {
      snprintf(fix, sizeof(fix),
               "nothing to do if another container owns it; to use it here, give "
               "this namespace its netdev or a macvlan/ipvlan of it with an address; to "
               "silence this, NCCL_IB_HCA=^%s",
               d->name);
      doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_DEVICES, "netns", subj, fix,
                 "%s port %d: its GIDs (netdev %s) belong to another network namespace: this "
                 "container cannot use it",
                 d->name, p->num, p->gid_netdev[0] ? p->gid_netdev : "?");
    } else
      doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_DEVICES, "gid", subj,
                 "give the port's netdev an IPv4 or IPv6 address in this namespace, or pin "
                 "NCCL_IB_GID_INDEX to a valid entry",
                 "%s port %d: no usable GID (%d readable of %d slots, none on an up netdev here)", d->name,
                 p->num, p->ngid, p->gid_slots);
    return;
  }
  if (p->ethernet && p->ngid_usable == 0) {
    const char *nd = p->netdev[0] ? p->netdev : p->gid_netdev;

    snprintf(fix, sizeof(fix),
             "give %s an IPv4 or IPv6 address (ip addr add ADDR/LEN dev %s) and bring "
             "it up, or leave the device out: NCCL_IB_HCA=^%s",
             nd, nd, d->name);
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_DEVICES, "gid", subj, fix,
               "%s port %d: no usable GID: netdev %s has only link-local addresses, or is down; "
               "mcpnet does not use it",
               d->name, p->num, nd);
    return;
  }
  doctor_add(r, DOCTOR_OK, DOCTOR_SEC_DEVICES, "port", subj, NULL, "%s port %d: ACTIVE, %s, %s, MTU %d%s%s",
             d->name, p->num, p->link_layer, p->rate[0] ? p->rate : "rate unknown", p->active_mtu,
             p->ethernet ? ", netdev " : "", p->ethernet ? (p->netdev[0] ? p->netdev : p->gid_netdev) : "");
}

void doctor_devices_check(struct doctor_report *r)
{
  int i;

  if (r->devs_rc < 0) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_DEVICES, "sysfs", NULL,
               "check that /sys is mounted in this container",
               "cannot read " SYSFS_ROOT "/class/infiniband: %s", strerror(-r->devs_rc));
    return;
  }
  if (r->ndev == 0) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_DEVICES, "devices", NULL,
               "load the NIC's RDMA driver (mlx5_ib, rdma_rxe for soft-RoCE) and expose "
               "/sys/class/infiniband and /dev/infiniband to this container",
               "no RDMA device: " SYSFS_ROOT "/class/infiniband is empty or missing");
    return;
  }
  if (r->verbs_err[0] != '\0')
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_DEVICES, "libibverbs", NULL,
               "install libibverbs1 and ibverbs-providers (rdma-core) in this image", "%s", r->verbs_err);
  for (i = 0; i < r->ndev; i++) {
    const struct doctor_dev *d = &r->dev[i];
    char fix[256];

    if (!d->opens && r->verbs_err[0] == '\0') {
      snprintf(fix, sizeof(fix),
               "grant /dev/infiniband/%s to this container (RDMA device plugin, "
               "docker --device), or leave the device out: NCCL_IB_HCA=^%s",
               d->uverbs[0] ? d->uverbs : "uverbsN", d->name);
      doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_DEVICES, "uverbs", d->name, fix,
                 "%s: cannot open its uverbs node %s (%s): not granted to this container?", d->name,
                 d->uverbs[0] ? d->uverbs : "", d->open_err);
      continue;
    }
    for (int p = 0; p < d->nport; p++)
      check_port(r, d, &d->port[p]);
  }
}
