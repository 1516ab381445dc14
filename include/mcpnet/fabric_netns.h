/*
 * fabric_netns.h - which netdevs, and so which GIDs, belong to this process's network
 * namespace.
 *
 * In the kernel's shared RDMA namespace mode every container sees every device and every
 * GID, each labelled with a netdev name; names, ifindexes and loopback addresses repeat
 * across namespaces, so a name that also exists here proves nothing. RDMA netlink
 * answers the one question that is conclusive: it names a port's netdev only to a
 * caller in that netdev's namespace (mcp_netns_port_netdev). A namespace view is the set
 * of netdevs established that way, plus what this namespace's own sysfs links above them
 * (VLANs, bonds, macvlans living here), with their up state. GID rows for
 * mcp_gid_choose are built from the sysfs GID table and a view.
 */
#ifndef MCPNET_FABRIC_NETNS_H
#define MCPNET_FABRIC_NETNS_H

#include <net/if.h>
#include <stddef.h>

#include "mcpnet/fabric_gid.h"
#include "mcpnet/fabric_sysfs.h"

#define MCP_NETNS_VIEW_MAX 32

struct mcp_netns_view {
  int n;
  struct {
    char name[IF_NAMESIZE];
    int up; /* operstate is not "down" ("unknown" counts as up: lo, dummy) */
  } dev[MCP_NETNS_VIEW_MAX];
};

/*
 * The netdev of ibdev's port as RDMA netlink reports it to this namespace. Returns 0
 * with name set to it, or to "" when the port's netdev is not in this namespace or the
 * port has none; -ENODEV when netlink does not know the device here (exclusive RDMA
 * namespace mode hides it); another negative errno when the question cannot be asked
 * (no NETLINK_RDMA in this kernel: -EPROTONOSUPPORT).
 */
int mcp_netns_port_netdev(const char *ibdev, int port, char *name, size_t len);

/*
 * Add netdev and, recursively, the upper devices sysfs links above it in this namespace
 * (<root>/class/net/<netdev>/upper_*) to view, with their up state. A netdev this
 * namespace's sysfs does not show is not added. Returns how many were added.
 */
int mcp_netns_view_add(struct mcp_netns_view *view, const char *root, const char *netdev);
/* The view's slot for a netdev name, or -1. */
int mcp_netns_view_find(const struct mcp_netns_view *view, const char *netdev);

/*
 * The port's readable GID entries as rows for mcp_gid_choose, in index order, at most
 * max; netdev_in_ns and netdev_up come from view. Returns the number of rows.
 */
int mcp_netns_gid_rows(const struct mcp_sysfs_port *port, const struct mcp_netns_view *view,
                       struct mcp_gid_entry *rows, int max);

#endif
