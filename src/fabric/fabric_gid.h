/*
 * fabric_gid.h - GID table entries, the rules that pick one, and finding the chosen one
 * again after the kernel rebuilt the table (see mcp_fabric_gid.c).
 */
#ifndef MCPNET_FABRIC_GID_H
#define MCPNET_FABRIC_GID_H

#include <stddef.h>
#include <stdint.h>

#include "core/gid_range.h"
#include "fabric/fabric.h"

struct mcp_gid_entry {
  int index;
  uint8_t raw[16];
  int type;                 /* enum mcp_gid_type */
  char netdev[IF_NAMESIZE]; /* "" when the entry has none (IB) */
  int netdev_in_ns;         /* the netdev belongs to our network namespace */
  int netdev_up;
  const char *not_ours; /* why the entry is not ours, when more is known than "another namespace" */
};

struct mcp_gid_policy {
  int index;                /* >= 0: exactly this index, validated */
  const char *index_source; /* who set index, for messages ("NCCL_IB_GID_INDEX") */
  const char *range_source; /* who set range ("NCCL_IB_ADDR_RANGE") */
  int roce_version;         /* 1 or 2 */
  int family;               /* 4 or 6: preferred */
  int has_range;
  struct mcp_gid_range range; /* NCCL_IB_ADDR_RANGE */
  int has_address;
  uint8_t address[16]; /* pinned by address */
  int has_oob_subnet;
  struct mcp_gid_range oob_subnet;
};

int mcp_gid_family(const uint8_t raw[16]);
void mcp_gid_format(const uint8_t raw[16], char *buf, size_t len);
int mcp_gid_in_range(const uint8_t raw[16], const struct mcp_gid_range *range);
/*
 * Pick the port's GID by the policy. 0: chosen. 1: chosen, with a sentence in err worth a
 * WARN (an explicit index whose RoCE version is not NCCL_IB_ROCE_VERSION_NUM's: used as
 * given, as NCCL does). -ENOENT: nothing usable, the reason in err.
 */
int mcp_gid_choose(const struct mcp_gid_entry *tab, int n, const struct mcp_gid_policy *pol,
                   struct mcp_gid_choice *choice, char *err, size_t errlen);

struct ibv_context;
/*
 * d's GID (d->gid: address and type) in the current GID table of its port under the sysfs
 * root, among the entries that are ours by the rule discovery used (mcp_netns_port_rows):
 * after a link flap the kernel may have put it back at another index, and in a pod another
 * namespace's entry may hold the same address on the same port. ctx is d's open device.
 * Returns the index; index_in_use on InfiniBand (GID 0, routed by LID); -ENOENT while it
 * is not there, another negative errno when the table cannot be read. Queries the kernel
 * (RDMA netlink and rtnetlink on sockets with a 2 s receive timeout, sysfs) and allocates:
 * a setup thread's work, never NCCL's thread's.
 */
int mcp_fabric_gid_refind(const struct mcp_net_dev *d, struct ibv_context *ctx, const char *root,
                          int index_in_use);
/* Tests only: fn stands in for mcp_fabric_gid_refind's lookup on a RoCE port (it gets the
 * device and the index in use and returns the index found or a negative value). NULL
 * restores the real lookup. Set it before any comm exists. */
typedef int (*mcp_fabric_gid_refind_fn)(const struct mcp_net_dev *d, int index_in_use);
void mcp_fabric_gid_test_set_refind(mcp_fabric_gid_refind_fn fn);

#endif
