/*
 * limits.h - the limits every layer shares: what a receive may group and how large a
 * message may be. net advertises them to NCCL (properties), conn puts them in the
 * handshake, xfer sizes its slots by them; so they live below all three.
 */
#ifndef MCPNET_LIMITS_H
#define MCPNET_LIMITS_H

#define MCP_MAX_RECVS 8 /* grouped receives per irecv (props.maxRecvs) */
#define MCP_MAX_P2P_BYTES (1ULL << 30)
/* Physical devices one fused device may stand for: NCCL 2.30's bound (v12's vProps hold 8;
 * v9-v11's hold 4, which their tables check). Fabric's virtual devices, the rank map's
 * fused sets, a link's members and the wire's endpoints are all sized by it. */
#define MCP_MAX_MEMBERS 8

#endif
