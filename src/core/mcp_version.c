/*
 * mcp_version.c - the one text that names this build: "mcpnet VERSION, source revision REV".
 *
 * The plugin logs it at init and every tool prints it for --version, so a user can match
 * a tool to the plugin it came with by comparing one line. It is the only file compiled
 * with MCPNET_REVISION (git describe at configure time), so a new commit recompiles this
 * file alone.
 */
#include "mcpnet/log.h"

#ifndef MCPNET_REVISION
#define MCPNET_REVISION "unknown" /* set by CMake from git describe at configure time */
#endif

const char *mcp_version_text(void) { return "mcpnet " MCPNET_VERSION ", source revision " MCPNET_REVISION; }
