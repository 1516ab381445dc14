/*
 * siphash.h - SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit MAC over short
 * messages. The out-of-band channel proves knowledge of a listen key with it without
 * sending the key (mcp_oob.c); it is small enough to carry here instead of a dependency.
 */
#ifndef MCPNET_SIPHASH_H
#define MCPNET_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The MAC of data[0..len) under the 128-bit key {key[0], key[1]}, where key[0] holds the
 * key's first 8 bytes read little-endian (the specification's k0) and key[1] the last 8. */
uint64_t mcp_siphash24(const uint64_t key[2], const void *data, size_t len);

#endif
