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
#include <stdint.h>

#include "fabric/fabric_gid.h"
#include "fabric/fabric_sysfs.h"

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
/* The view's slot for a netdev name, or -ENOENT. */
int mcp_netns_view_find(const struct mcp_netns_view *view, const char *netdev);

/*
 * The port's readable GID entries as rows for mcp_gid_choose, in index order, at most
 * max; netdev_in_ns and netdev_up come from view. Returns the number of rows.
 */
int mcp_netns_gid_rows(const struct mcp_sysfs_port *port, const struct mcp_netns_view *view,
                       struct mcp_gid_entry *rows, int max);

/*
 * Per-GID ownership, for a port whose netdev RDMA netlink does not name here (a pod
 * with a macvlan or ipvlan of the host's netdev; see mcp_fabric_nsowner.c). The
 * snapshot is this namespace's netdevs and addresses as rtnetlink reports them.
 */
#define MCP_NS_LINKS_MAX 256 /* beyond: left out, so never ours (a host with many pods) */
#define MCP_NS_ADDRS_MAX 1024

struct mcp_ns_link {
  char name[IF_NAMESIZE];
  int ifindex;
  int up;              /* IFF_UP and operstate not down */
  int lower;           /* IFLA_LINK: a macvlan/ipvlan/VLAN's lower, a veth's peer; 0 none */
  int lower_elsewhere; /* IFLA_LINK_NETNSID was given: lower is another namespace's ifindex */
};

struct mcp_ns_addr {
  int ifindex;
  uint8_t raw[16]; /* in GID form: IPv4 as ::ffff:a.b.c.d */
};

struct mcp_ns_snapshot {
  int nlink;
  struct mcp_ns_link link[MCP_NS_LINKS_MAX];
  int naddr;
  struct mcp_ns_addr addr[MCP_NS_ADDRS_MAX];
};

/* This namespace's netdevs and addresses (two rtnetlink dumps). 0 or a negative errno. */
int mcp_netns_snapshot_read(struct mcp_ns_snapshot *ns);

/* The parsers behind the two netlink conversations, on one received buffer each (what
 * the fuzzer drives): rtnetlink link and address dumps into ns; RDMA netlink's device
 * dump (dev_name given: *dev_index of that device) or port answer (dev_name NULL: the
 * netdev's name into ndev). Each returns 1 with *status when the reply to request seq
 * ended (0 or a negative errno), 0 when more buffers follow. */
int mcp_netns_rt_reply_parse(const void *buf, size_t len, uint32_t seq, struct mcp_ns_snapshot *ns,
                             int *status);
int mcp_netns_rdma_reply_parse(const void *buf, size_t len, uint32_t seq, const char *dev_name,
                               uint32_t *dev_index, char *ndev, size_t ndev_len, int *found, int *status);

/*
 * Is GID entry i of port p ours? ifindex[] holds, for each of p's readable entries, the
 * ifindex the kernel gives for its netdev (0 unknown). NULL when it is, with *slot set to
 * the snapshot's link; otherwise why not, a constant sentence.
 */
const char *mcp_netns_gid_owner(const struct mcp_ns_snapshot *ns, const struct mcp_sysfs_port *p,
                                const int *ifindex, int i, int *slot);
/* The port's rows for mcp_gid_choose with ownership decided per GID as above. */
int mcp_netns_gid_rows_owned(const struct mcp_sysfs_port *p, const int *ifindex,
                             const struct mcp_ns_snapshot *ns, struct mcp_gid_entry *rows, int max);

/* How a port's rows were decided (mcp_netns_port_rows). */
struct mcp_netns_port {
  int netlink_rc;           /* mcp_netns_port_netdev's answer */
  char netdev[IF_NAMESIZE]; /* the port's netdev here, "" when elsewhere or unknown */
  int per_gid;              /* the port's netdev is elsewhere: decided GID by GID */
  int per_gid_rc;           /* 0, or why the namespace could not be read (nothing is ours) */
  int gid_ifindexes;        /* entries the kernel gave an ifindex for */
  int nours;                /* rows that are ours */
};

struct ibv_context;
/*
 * The port's readable GID rows with ownership decided by the one rule discovery,
 * recovery and the doctor share: RDMA netlink's answer where it names the port's netdev
 * here (that netdev and its uppers in sysfs under root); per GID when it names none;
 * netdev names when netlink cannot be asked. ctx is the open device (for the GIDs'
 * ifindexes), or NULL to open ibdev for the question. Returns the number of rows.
 */
int mcp_netns_port_rows(struct ibv_context *ctx, const char *root, const char *ibdev,
                        const struct mcp_sysfs_port *p, struct mcp_gid_entry *rows, int max,
                        struct mcp_netns_port *info);

#endif
