/*
 * mcp_fabric_nsview.c - the namespace view: the netdevs established as ours, and the
 * GID rows it yields for the choice in mcp_fabric_gid.c.
 *
 * The view starts from a netdev the caller knows to be ours (RDMA netlink's answer for
 * the port) and adds what this namespace's sysfs links above it: a VLAN, bond or
 * macvlan on top of our netdev carries GIDs of its own, and the kernel creates the
 * upper_* links only between devices of one namespace, so following them cannot leave
 * it. Nothing here looks names up globally: a GID labelled "eth0" is ours only when the
 * view holds "eth0", that is, when it was reached from netlink's answer.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fabric/fabric_netns.h"

/* Bond over port, VLAN over bond: two levels above the port's netdev, and one spare. */
#define UPPER_DEPTH 3

static int operstate_up(const char *dir)
{
  char path[PATH_MAX], text[32] = "";
  FILE *f;
  int up;

  if (snprintf(path, sizeof(path), "%s/operstate", dir) >= (int)sizeof(path))
    return 0;
  f = fopen(path, "re");
  if (f == NULL)
    return 0;
  up = fgets(text, sizeof(text), f) != NULL && strncmp(text, "down", 4) != 0;
  fclose(f);
  return up;
}

static int view_add(struct mcp_netns_view *view, const char *root, const char *netdev, int depth)
{
  char dir[PATH_MAX];
  struct stat st;
  struct dirent *de;
  DIR *d;
  int added;

  if (netdev[0] == '\0' || strlen(netdev) >= IF_NAMESIZE || mcp_netns_view_find(view, netdev) >= 0 ||
      view->n == MCP_NETNS_VIEW_MAX)
    return 0;
  if (snprintf(dir, sizeof(dir), "%s/class/net/%s", root, netdev) >= (int)sizeof(dir) || stat(dir, &st) != 0)
    return 0;
  snprintf(view->dev[view->n].name, IF_NAMESIZE, "%s", netdev);
  view->dev[view->n].up = operstate_up(dir);
  view->n++;
  added = 1;
  if (depth >= UPPER_DEPTH || (d = opendir(dir)) == NULL)
    return added;
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, "upper_", 6) == 0)
      added += view_add(view, root, de->d_name + 6, depth + 1);
  closedir(d);
  return added;
}

int mcp_netns_view_add(struct mcp_netns_view *view, const char *root, const char *netdev)
{
  return view_add(view, root, netdev, 0);
}

int mcp_netns_view_find(const struct mcp_netns_view *view, const char *netdev)
{
  int i;

  for (i = 0; i < view->n; i++)
    if (strcmp(view->dev[i].name, netdev) == 0)
      return i;
  return -ENOENT;
}

int mcp_netns_gid_rows(const struct mcp_sysfs_port *port, const struct mcp_netns_view *view,
                       struct mcp_gid_entry *rows, int max)
{
  int i, n = 0;

  for (i = 0; i < port->ngid && n < max; i++) {
    const struct mcp_sysfs_gid *g = &port->gid[i];
    struct mcp_gid_entry *r = &rows[n++];
    int slot = g->netdev[0] != '\0' ? mcp_netns_view_find(view, g->netdev) : -1;

    memset(r, 0, sizeof(*r));
    r->index = g->index;
    memcpy(r->raw, g->raw, sizeof(r->raw));
    r->type = g->type;
    memcpy(r->netdev, g->netdev, sizeof(r->netdev));
    r->netdev_in_ns = slot >= 0;
    r->netdev_up = slot >= 0 && view->dev[slot].up;
  }
  return n;
}
