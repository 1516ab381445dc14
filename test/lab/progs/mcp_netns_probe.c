/*
 * mcp_netns_probe.c - prints, for every RDMA port sysfs shows, what the fabric module
 * sees from the calling process's network namespace: the port's netdev as RDMA netlink
 * reports it here, each readable GID with the netdev name sysfs gives it, whether it is
 * ours by the rule discovery uses (mcp_netns_port_rows: netlink's answer, or GID by GID
 * when the port's netdev is elsewhere) and why not, the ifindex verbs gives for its
 * netdev, this namespace's netdevs and addresses as rtnetlink reports them, and the GID
 * the automatic choice takes. The lab's namespace scenarios (single_netns, single_pods)
 * run it inside and outside namespaces and assert on the lines, to show on a real kernel
 * that names repeat and what tells them apart.
 *
 *   mcp-netns-probe [SYSFS_ROOT]     (default /sys)
 * Output, one fact per line, "DEV/PORT what ...":
 *   rxeA/1 netlink netdev "eth0"
 *   rxeA/1 gid 1 10.77.0.1 RoCE v2 ndev "eth0" ours=1 up=1
 *   rxeA/1 gid 1 ifindex 5 rule netlink
 *   rxeP/1 gid 3 ifindex 9 rule per-gid not ours: its address is not configured ...
 *   ns link eth0 ifindex 9 up 1 lower 4 elsewhere 1
 *   ns addr 9 10.97.0.11
 *   rxeA/1 slots 1024 readable 2 skipped 1022
 *   rxeA/1 choice GID 1 10.77.0.1 (automatic: RoCE v2, IPv4)
 *   rxeB/1 choice none: no usable GID: ...
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/verbs.h"
#include "fabric/fabric_gid.h"
#include "fabric/fabric_netns.h"
#include "fabric/fabric_sysfs.h"

#define DEVS_MAX 32
#define ROWS_MAX 1024

static const char *type_name(int type)
{
  return type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : type == MCP_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB";
}

/* The ifindex verbs gives for each readable GID's netdev (0 none); -1 when the device
 * cannot be opened or the library has no ibv_query_gid_ex. */
static int probe_ifindexes(const char *ibdev, const struct mcp_sysfs_port *p, int *ifindex)
{
  struct ibv_device **list;
  struct ibv_context *ctx = NULL;
  int i, n = 0;

  if (mcp_ibv.query_gid_ex == NULL || (list = mcp_ibv.get_device_list(&n)) == NULL)
    return -1;
  for (i = 0; i < n && ctx == NULL; i++)
    if (strcmp(mcp_ibv.get_device_name(list[i]), ibdev) == 0)
      ctx = mcp_ibv.open_device(list[i]);
  mcp_ibv.free_device_list(list);
  if (ctx == NULL)
    return -1;
  for (i = 0; i < p->ngid; i++) {
    struct ibv_gid_entry e;

    memset(&e, 0, sizeof(e));
    ifindex[i] = mcp_ibv.query_gid_ex(ctx, (uint32_t)p->num, (uint32_t)p->gid[i].index, &e, 0, sizeof(e)) == 0
      ? (int)e.ndev_ifindex
      : -errno;
  }
  mcp_ibv.close_device(ctx);
  return 0;
}

static void probe_port(const char *root, const struct mcp_sysfs_dev *d, const struct mcp_sysfs_port *p,
                       struct mcp_gid_entry *rows)
{
  struct mcp_netns_port info;
  struct mcp_gid_policy pol;
  struct mcp_gid_choice c;
  char text[64], err[256];
  int *ifindex = calloc((size_t)(p->ngid > 0 ? p->ngid : 1), sizeof(*ifindex));
  int n, i;

  n = mcp_netns_port_rows(NULL, root, d->name, p, rows, ROWS_MAX, &info);
  if (info.netlink_rc == 0)
    printf("%s/%d netlink netdev \"%s\"\n", d->name, p->num, info.netdev);
  else
    printf("%s/%d netlink error %s\n", d->name, p->num, strerror(-info.netlink_rc));
  for (i = 0; i < n; i++) {
    mcp_gid_format(rows[i].raw, text, sizeof(text));
    printf("%s/%d gid %d %s %s ndev \"%s\" ours=%d up=%d\n", d->name, p->num, rows[i].index, text,
           type_name(rows[i].type), rows[i].netdev, rows[i].netdev_in_ns, rows[i].netdev_up);
  }
  /* What the rule weighed, per GID: the ifindex verbs gives for its netdev, and why not. */
  if (ifindex != NULL && probe_ifindexes(d->name, p, ifindex) == 0)
    for (i = 0; i < n && i < p->ngid; i++)
      printf("%s/%d gid %d ifindex %d rule %s%s%s\n", d->name, p->num, rows[i].index, ifindex[i],
             info.per_gid             ? "per-gid"
               : info.netlink_rc == 0 ? "netlink"
                                      : "names",
             rows[i].not_ours != NULL ? " not ours: " : "", rows[i].not_ours != NULL ? rows[i].not_ours : "");
  free(ifindex);
  printf("%s/%d slots %d readable %d skipped %d\n", d->name, p->num, p->gid_slots, p->ngid, p->gid_skipped);
  memset(&pol, 0, sizeof(pol));
  pol.index = -1;
  pol.roce_version = 2;
  pol.family = 4;
  if (mcp_gid_choose(rows, n, &pol, &c, err, sizeof(err)) >= 0)
    printf("%s/%d choice GID %d %s (%s)\n", d->name, p->num, c.index, c.text, c.why);
  else
    printf("%s/%d choice none: %s\n", d->name, p->num, err);
}

/* This namespace as rtnetlink reports it: what the per-GID rule compares with. */
static void probe_namespace(void)
{
  struct mcp_ns_snapshot *ns = malloc(sizeof(*ns));
  char text[64];
  int i, rc;

  if (ns == NULL)
    return;
  rc = mcp_netns_snapshot_read(ns);
  if (rc != 0)
    printf("ns error %s\n", strerror(-rc));
  for (i = 0; rc == 0 && i < ns->nlink; i++)
    printf("ns link %s ifindex %d up %d lower %d elsewhere %d\n", ns->link[i].name, ns->link[i].ifindex,
           ns->link[i].up, ns->link[i].lower, ns->link[i].lower_elsewhere);
  for (i = 0; rc == 0 && i < ns->naddr; i++) {
    mcp_gid_format(ns->addr[i].raw, text, sizeof(text));
    printf("ns addr %d %s\n", ns->addr[i].ifindex, text);
  }
  free(ns);
}

int main(int argc, char **argv)
{
  const char *root = argc > 1 ? argv[1] : "/sys";
  static char names[DEVS_MAX][MCP_DEV_NAME_MAX];
  struct mcp_gid_entry *rows = calloc(ROWS_MAX, sizeof(*rows));
  char err0[256];
  int n, i, k, failed = 0;

  if (rows == NULL)
    return 2;
  n = mcp_sysfs_dev_names(root, names, DEVS_MAX);
  if (n < 0) {
    fprintf(stderr, "mcp-netns-probe: cannot list devices under %s: %s\n", root, strerror(-n));
    free(rows);
    return 1;
  }
  if (mcp_verbs_load(NULL, err0, sizeof(err0)) != 0)
    printf("verbs error %s\n", err0);
  probe_namespace();
  printf("devices %d\n", n);
  for (i = 0; i < n && i < DEVS_MAX; i++) {
    struct mcp_sysfs_dev d;
    char err[256] = "";

    if (mcp_sysfs_dev_read(root, names[i], &d, err, sizeof(err)) != 0) {
      printf("%s read error: %s\n", names[i], err);
      failed = 1;
    } else {
      printf("%s driver \"%s\" ports %d\n", d.name, d.driver, d.nport);
      for (k = 0; k < d.nport; k++)
        probe_port(root, &d, &d.port[k], rows);
    }
    mcp_sysfs_dev_free(&d);
  }
  free(rows);
  return failed;
}
