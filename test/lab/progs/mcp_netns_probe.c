/*
 * mcp_netns_probe.c - prints, for every RDMA port sysfs shows, what the fabric module
 * sees from the calling process's network namespace: the port's netdev as RDMA netlink
 * reports it here, each readable GID with the netdev name sysfs gives it, and the GID
 * the automatic choice takes when only the netdevs netlink vouched for count as ours.
 * The lab's namespace scenario runs it inside and outside namespaces and asserts on
 * the lines, to show on a real kernel that names repeat and netlink's answer does not.
 *
 *   mcp-netns-probe [SYSFS_ROOT]     (default /sys)
 * Output, one fact per line, "DEV/PORT what ...":
 *   rxeA/1 netlink netdev "eth0"
 *   rxeA/1 gid 1 10.77.0.1 RoCE v2 ndev "eth0" ours=1 up=1
 *   rxeA/1 slots 1024 readable 2 skipped 1022
 *   rxeA/1 choice GID 1 10.77.0.1 (automatic: RoCE v2, IPv4)
 *   rxeB/1 choice none: no usable GID: ...
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpnet/fabric_gid.h"
#include "mcpnet/fabric_netns.h"
#include "mcpnet/fabric_sysfs.h"

#define DEVS_MAX 32
#define ROWS_MAX 1024

static const char *type_name(int type)
{
  return type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : type == MCP_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB";
}

static void probe_port(const char *root, const struct mcp_sysfs_dev *d, const struct mcp_sysfs_port *p,
                       struct mcp_gid_entry *rows)
{
  struct mcp_netns_view view = {.n = 0};
  struct mcp_gid_policy pol;
  struct mcp_gid_choice c;
  char ndev[IF_NAMESIZE], text[64], err[256];
  int rc, n, i;

  rc = mcp_netns_port_netdev(d->name, p->num, ndev, sizeof(ndev));
  if (rc == 0)
    printf("%s/%d netlink netdev \"%s\"\n", d->name, p->num, ndev);
  else
    printf("%s/%d netlink error %s\n", d->name, p->num, strerror(-rc));
  if (rc == 0)
    mcp_netns_view_add(&view, root, ndev);
  n = mcp_netns_gid_rows(p, &view, rows, ROWS_MAX);
  for (i = 0; i < n; i++) {
    mcp_gid_format(rows[i].raw, text, sizeof(text));
    printf("%s/%d gid %d %s %s ndev \"%s\" ours=%d up=%d\n", d->name, p->num, rows[i].index, text,
           type_name(rows[i].type), rows[i].netdev, rows[i].netdev_in_ns, rows[i].netdev_up);
  }
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

int main(int argc, char **argv)
{
  const char *root = argc > 1 ? argv[1] : "/sys";
  static char names[DEVS_MAX][MCP_DEV_NAME_MAX];
  struct mcp_gid_entry *rows = calloc(ROWS_MAX, sizeof(*rows));
  int n, i, k, failed = 0;

  if (rows == NULL)
    return 2;
  n = mcp_sysfs_dev_names(root, names, DEVS_MAX);
  if (n < 0) {
    fprintf(stderr, "mcp-netns-probe: cannot list devices under %s: %s\n", root, strerror(-n));
    free(rows);
    return 1;
  }
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
