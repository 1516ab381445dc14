/*
 * limits.h - the limits every layer shares: what a receive may group and how large a
 * message may be. net advertises them to NCCL (properties), conn puts them in the
 * handshake, xfer sizes its slots by them; so they live below all three.
 */
#ifndef MCPNET_LIMITS_H
#define MCPNET_LIMITS_H

#define MCP_MAX_RECVS 8 /* grouped receives per irecv (props.maxRecvs) */
#define MCP_MAX_P2P_BYTES (1ULL << 30)

#endif
