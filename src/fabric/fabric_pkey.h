/*
 * fabric_pkey.h - P_Key values resolved to table indexes (see mcp_fabric_pkey.c).
 */
#ifndef MCPNET_FABRIC_PKEY_H
#define MCPNET_FABRIC_PKEY_H

#include <stddef.h>
#include <stdint.h>

#define MCP_PKEY_FULL_MEMBER 0x8000u
#define MCP_PKEY_BASE_MASK 0x7fffu

/*
 * The index of the entry of table (n entries, empty slots 0x0000) whose low 15 bits
 * equal value's, a full member preferred when the table holds both; *full says which
 * was found. -ENOENT when the partition is absent, -EINVAL when value is not a P_Key
 * (above 0xffff, or no partition bits).
 */
int mcp_pkey_resolve(const uint16_t *table, int n, unsigned value, int *full);
/* Members of one partition can talk unless both are limited members. */
int mcp_pkey_can_talk(int full_a, int full_b);
/* The table's non-empty entries for messages: "0xffff, 0x8001" (or "empty"). */
void mcp_pkey_format_table(const uint16_t *table, int n, char *buf, size_t len);

#endif
