/*
 * mcp_fabric_pkey.c - resolves a tenant's P_Key value to the index a QP needs.
 *
 * Users know their partition by value (0x8001), verbs wants an index into the port's
 * table, and NCCL_IB_PKEY asks users for that index, which differs between hosts. The
 * membership bit (0x8000) is not part of the partition: a table holds 0x8001 for a full
 * member and 0x0001 for a limited one, so matching uses the low 15 bits. Two limited
 * members of a partition cannot talk to each other, which only the pair of ends can
 * judge; hence resolution reports the membership it found.
 */
#include <errno.h>
#include <stdio.h>

#include "fabric/fabric_pkey.h"

int mcp_pkey_resolve(const uint16_t *table, int n, unsigned value, int *full)
{
  int i, limited = -1;

  if (value > 0xffffu || (value & MCP_PKEY_BASE_MASK) == 0)
    return -EINVAL;
  for (i = 0; i < n; i++) {
    if ((table[i] & MCP_PKEY_BASE_MASK) != (value & MCP_PKEY_BASE_MASK))
      continue;
    if (table[i] & MCP_PKEY_FULL_MEMBER) {
      *full = 1;
      return i;
    }
    if (limited < 0)
      limited = i;
  }
  if (limited < 0)
    return -ENOENT;
  *full = 0;
  return limited;
}

int mcp_pkey_can_talk(int full_a, int full_b) { return full_a || full_b; }

void mcp_pkey_format_table(const uint16_t *table, int n, char *buf, size_t len)
{
  size_t used = 0;
  int i, shown = 0;

  if (len == 0)
    return;
  buf[0] = '\0';
  for (i = 0; i < n && used < len; i++) {
    int w;
    if ((table[i] & MCP_PKEY_BASE_MASK) == 0)
      continue;
    w = snprintf(buf + used, len - used, "%s0x%04x", shown ? ", " : "", table[i]);
    used += w > 0 ? (size_t)w : 0;
    shown++;
  }
  if (shown == 0)
    snprintf(buf, len, "empty");
}
