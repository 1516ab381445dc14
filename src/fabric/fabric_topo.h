/*
 * fabric_topo.h - the PCI path and port number getProperties reports for a physical
 * device, chosen so NCCL's topology sees mcpnet's ports as it sees its own transport's.
 *
 * NCCL places a net device under the PCI node its pciPath names; devices under one node
 * are ports of one NIC, which NCCL fuses by default (NCCL_NET_MERGE_LEVEL=PORT). Two net
 * devices with equal (guid, port) are one physical port to NCCL: it splits that port's
 * bandwidth between them. NCCL's IB transport reports the PCI function's path with the
 * function digit zeroed, so the functions of one adapter share a NIC, and with
 * NCCL_IB_MERGE_VFS a VF's path names its PF's NIC; the port it reports is the verbs port
 * plus how many devices with the same path come before it in PCI order. mcpnet does the
 * same, except that a VF is recognised by its physfn link rather than by zeroing the PCI
 * device digits of every path (which would make distinct NICs on one bus, as in a VM,
 * ports of one NIC). The verbs port (mcp_net_dev.port) is left alone: QPs use it.
 */
#ifndef MCPNET_FABRIC_TOPO_H
#define MCPNET_FABRIC_TOPO_H

#include <stdint.h>

#include "fabric/fabric.h"

/*
 * The PCI bus id of a path's last component ("0000:3b:00.1" -> 0x3b001, the key NCCL
 * sorts its devices by), or -EINVAL when the last component is not a PCI address.
 */
int64_t mcp_fabric_pci_busid(const char *path);

/* Zeroes the function digit of a path whose last component is a PCI address: the path of
 * the adapter's NIC as NCCL's topology names it. Returns 1 when it did, 0 when the path
 * does not end in a PCI address (left as it is). */
int mcp_fabric_pci_nic_path(char *path);

/*
 * Fills pci_path and topo_port of every device of fab from the sysfs below sysfs_root
 * ("/sys", or a fixture tree): pci_path is <root>/class/infiniband/<ibdev>/device
 * resolved, then for a VF (merge_vfs set) its PF's path, with the function digit
 * zeroed; NULL without a device node (rxe). topo_port is the verbs port plus the
 * number of devices with the same pci_path before it in PCI order (ties: inventory
 * order). 0, or -ENOMEM (pci_path of the devices not reached stays NULL).
 */
int mcp_fabric_topo_assign(struct mcp_fabric *fab, const char *sysfs_root, int merge_vfs);

#endif
