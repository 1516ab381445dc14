/*
 * mcp_gid_range.c - the CIDR text of an address range (NCCL_IB_ADDR_RANGE, a rank
 * map's gid=CIDR) read into the 16-byte form GIDs use. Pure parsing, so it sits in core
 * where the configuration is read once; fabric matches GIDs against the result.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/gid_range.h"

/* CIDR "a.b.c.d/n" or "v6/n" (or a bare address = /32 or /128); -EINVAL when malformed. */
int mcp_gid_range_parse(const char *text, struct mcp_gid_range *range)
{
  char addr[INET6_ADDRSTRLEN + 1];
  const char *slash = strchr(text, '/');
  size_t alen = slash ? (size_t)(slash - text) : strlen(text);
  char *end;
  long bits;

  memset(range, 0, sizeof(*range));
  if (alen == 0 || alen >= sizeof(addr))
    return -EINVAL;
  memcpy(addr, text, alen);
  addr[alen] = '\0';
  if (inet_pton(AF_INET, addr, range->raw + 12) == 1) {
    range->raw[10] = range->raw[11] = 0xff;
    range->family = 4;
  } else if (inet_pton(AF_INET6, addr, range->raw) == 1) {
    range->family = 6;
  } else {
    return -EINVAL;
  }
  if (slash == NULL) {
    range->bits = range->family == 4 ? 32 : 128;
    return 0;
  }
  errno = 0;
  bits = strtol(slash + 1, &end, 10);
  if (errno != 0 || *end != '\0' || end == slash + 1 || bits < 0 || bits > (range->family == 4 ? 32 : 128))
    return -EINVAL;
  range->bits = (int)bits;
  return 0;
}
