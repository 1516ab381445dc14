/*
 * gid_range.h - an address range in GID form (IPv4 as ::ffff:a.b.c.d), parsed in core
 * (mcp_gid_range.c) so the configuration can hold it typed; fabric_gid.h matches it.
 */
#ifndef MCPNET_GID_RANGE_H
#define MCPNET_GID_RANGE_H

#include <stdint.h>

struct mcp_gid_range {
  int family; /* 4 or 6 */
  uint8_t raw[16];
  int bits;
};

/* CIDR "a.b.c.d/n" or "v6/n" (or a bare address = /32 or /128); -EINVAL when malformed. */
int mcp_gid_range_parse(const char *text, struct mcp_gid_range *range);

#endif
