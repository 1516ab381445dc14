/*
 * fabric_vdev.h - the devices NCCL numbers: physical ports, then virtual (fused) ones.
 *
 * NCCL's makeVDevice (plugin v9+) asks for a virtual NIC over several physical devices
 * and keeps the index it gets for the life of the process. Everything below net that is
 * handed a device index asks here which physical devices it stands for: a physical
 * device is its own single member, a virtual one its list. Links put their QPs on those
 * members (link.h, MCP_LINK_MAX_DEVS).
 *
 * The index space: 0..nphys-1 is what NCCL counts as physical (devices() at its first
 * init): every discovered port, except that a rank map's fused set ("rxe0*rxe1") is one
 * index. Virtual devices follow from base (nphys when the first was made). The table
 * keeps its devices by member name, not by index into a fabric, because the fabric is
 * given back with the last comm and discovered again later (fabric_process.h) while
 * NCCL keeps the indices it was given; each lookup resolves the names in the fabric of
 * the moment.
 */
#ifndef MCPNET_FABRIC_VDEV_H
#define MCPNET_FABRIC_VDEV_H

#include <stddef.h>

#include "core/limits.h"
#include "core/rankmap.h"
#include "fabric/fabric.h"

/* The physical devices behind one virtual NIC (limits.h: NCCL 2.30's 8). */
#define MCP_VDEV_MAX_MEMBERS MCP_MAX_MEMBERS
/* Virtual devices one process may make: NCCL makes at most one per physical device. */
#define MCP_VDEV_MAX MCP_MAX_NET_DEVS
/* Members' names joined by '+', as NCCL names a fused NIC. */
#define MCP_VDEV_NAME_MAX (MCP_VDEV_MAX_MEMBERS * MCP_DEV_NAME_MAX)

/* One index NCCL holds, by the names (struct mcp_net_dev.name) of its members. */
struct mcp_vdev {
  int nmem;
  char mem[MCP_VDEV_MAX_MEMBERS][MCP_DEV_NAME_MAX];
  char name[MCP_VDEV_NAME_MAX];
  int nvp; /* makeVDevice's vProps as NCCL gave them (virtual devices only) */
  int vp[MCP_VDEV_MAX_MEMBERS];
};

struct mcp_vdev_table {
  int synced; /* built from a fabric at least once: until then an index is a physical port */
  int nphys;
  struct mcp_vdev phys[MCP_MAX_NET_DEVS];
  int base; /* the first virtual index; -1 before the first makeVDevice */
  int nvirt;
  struct mcp_vdev virt[MCP_VDEV_MAX];
};

/* What one index stands for in a given fabric. */
struct mcp_vdev_info {
  int nmem;
  int mem[MCP_VDEV_MAX_MEMBERS]; /* indices into f->dev[], in stripe order */
  int virt;                      /* made by makeVDevice */
  const char *name;              /* the table's name for it (lives as long as the table) */
  int nvp;                       /* vProps NCCL reads: {1, {itself}} for a physical index */
  int vp[MCP_VDEV_MAX_MEMBERS];
  /* Net API v12's railId and planeId (-1: none), as NCCL 2.30's IB transport reports a
   * device: one port's own; for several ports the first one's rail when every port has
   * that rail (else -1), and for the plane MCP_PLANE_FUSED with one bit per port's
   * plane (its index among the planes of the fabric's ports, in their order, no plane
   * being index 0), so a fused device's plane set differs from every single plane. */
  int rail, plane;
};
/* NCCL's marker of a fused device's plane set (bit 14; its planes are 0..16383). */
#define MCP_PLANE_FUSED 0x4000
/* Distinct planes the ports of one process may have: NCCL 2.30's IB transport fails its
 * init with more (its plane bits stop below the marker). */
#define MCP_PLANES_MAX 12

/* The physical device indices (into f->dev[]) behind device index dev, in stripe order.
 * Returns how many (>= 1), or -ENODEV for an index that names no device. */
int mcp_fabric_dev_members(const struct mcp_fabric *f, int dev, int members[MCP_VDEV_MAX_MEMBERS]);

/* The process's table (locked inside), for net: */
/* After each discovery: rebuild the physical range from f and the rank map's entry for
 * this rank (pin may be NULL). 0; -EINVAL (message said) when a fused set cannot be made
 * or the ports have more than MCP_PLANES_MAX planes. */
int mcp_fabric_vdev_sync(const struct mcp_fabric *f, const struct mcp_rankmap_entry *pin);
/* How many indices NCCL may use now (devices()). */
int mcp_fabric_vdev_count(const struct mcp_fabric *f);
/* What index dev stands for; -ENODEV (message said) for none. */
int mcp_fabric_vdev_info(const struct mcp_fabric *f, int dev, struct mcp_vdev_info *info);
/* makeVDevice: a virtual device over the n indices devs (each in the physical range; n at
 * most max, what the calling table's vProps hold: 4 for v9-v11, 8 for v12); its index in
 * *index, or -EINVAL / -ENOSPC with the reason said (MCP_WARN). devs is read only once n
 * is known to fit. Its members (a rank map's fused set counts each of its ports) are at
 * most MCP_VDEV_MAX_MEMBERS whatever the table. */
int mcp_fabric_make_vdev(const struct mcp_fabric *f, int n, const int *devs, int max, int *index);

/* The same on a given table, for unit tests: err gets the reason of a refusal. */
void mcp_vdev_table_init(struct mcp_vdev_table *t);
int mcp_vdev_table_sync(struct mcp_vdev_table *t, const struct mcp_fabric *f,
                        const struct mcp_rankmap_entry *pin, char *err, size_t errlen);
int mcp_vdev_table_count(const struct mcp_vdev_table *t);
int mcp_vdev_table_info(const struct mcp_vdev_table *t, const struct mcp_fabric *f, int dev,
                        struct mcp_vdev_info *info, char *err, size_t errlen);
int mcp_vdev_table_make(struct mcp_vdev_table *t, const struct mcp_fabric *f, int n, const int *devs, int max,
                        int *index, char *err, size_t errlen);

#endif
