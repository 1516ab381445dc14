/*
 * mcp_fabric_vdev.c - which physical devices a device index NCCL holds stands for.
 *
 * Until makeVDevice is implemented every index is a physical device, its own single
 * member.
 */
#include <errno.h>
#include <stddef.h>

#include "mcpnet/fabric_vdev.h"

int mcp_fabric_dev_members(const struct mcp_fabric *f, int dev, int members[MCP_VDEV_MAX_MEMBERS])
{
  if (f == NULL || dev < 0 || dev >= f->ndev)
    return -ENODEV;
  members[0] = dev;
  return 1;
}
