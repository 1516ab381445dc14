/*
 * fabric_vdev.h - the devices NCCL numbers: physical ports, then virtual (fused) ones.
 *
 * NCCL's makeVDevice (plugin v9+) asks for a virtual NIC over several physical devices
 * and keeps the index it gets for the life of the process. Everything below net that is
 * handed a device index asks here which physical devices it stands for: a physical
 * device is its own single member, a virtual one its list. Links put their QPs on those
 * members (link.h, MCP_LINK_MAX_DEVS).
 */
#ifndef MCPNET_FABRIC_VDEV_H
#define MCPNET_FABRIC_VDEV_H

#include "mcpnet/fabric.h"

/* NCCL's bound on the physical devices behind one virtual NIC (NCCL_NET_MAX_DEVS_PER_NIC). */
#define MCP_VDEV_MAX_MEMBERS 4

/* The physical device indices (into f->dev[]) behind device index dev, in stripe order.
 * Returns how many (>= 1), or -ENODEV for an index that names no device. */
int mcp_fabric_dev_members(const struct mcp_fabric *f, int dev, int members[MCP_VDEV_MAX_MEMBERS]);

#endif
