/*
 * mcp_param_process.c - the process's one configuration.
 *
 * net's init loads it once (under the fabric's process lock) and every layer reads it
 * from here, so no layer needs to reach up to the entry points for a parameter. It is
 * freed with the fabric on the last holder's teardown and loaded again by the next init.
 */
#include "core/param.h"

static struct mcp_config process_cfg;

struct mcp_config *mcp_param_process(void) { return &process_cfg; }
