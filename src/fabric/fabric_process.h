/*
 * fabric_process.h - the process's discovered fabric and who holds it.
 *
 * Discovery is process-wide and happens once; it is given back when the last holder
 * goes: a v11 context (init .. finalize) or a comm (listen, connect, accept .. close).
 * Older NCCL (v8-v10 tables) has no finalize, so without any context the fabric stays
 * until the library is unloaded. The counts and the lock live here, below conn, so a
 * comm takes and gives back its hold without reaching up to the entry points.
 */
#ifndef MCPNET_FABRIC_PROCESS_H
#define MCPNET_FABRIC_PROCESS_H

#include "fabric/fabric.h"

/* Runs setup under the process lock unless the fabric is ready already; on success
 * (setup returned 0, or nothing to do) and with ctx set, counts one more context.
 * setup fills the fabric and the process's configuration (core/param.h) and frees the
 * configuration itself when it fails. Returns setup's result or 0. */
int mcp_fabric_process_open(int ctx, int (*setup)(struct mcp_fabric *fab));
/* A context's finalize: the fabric goes when it was the last holder. */
void mcp_fabric_process_close_ctx(void);
/* The fabric, NULL before a successful open or after the teardown. */
const struct mcp_fabric *mcp_fabric_process(void);
/* A comm's hold (listen, send and receive comms). */
void mcp_fabric_comm_ref(void);
void mcp_fabric_comm_unref(void);
/* dlclose: gives the fabric back when no comm holds it; 1 when none did. */
int mcp_fabric_process_unload(void);

#endif
