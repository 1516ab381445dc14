/*
 * mcp_version.c - the one text that names this build: "mcpnet VERSION, source revision REV".
 *
 * The plugin logs it at init and every tool prints it for --version, so a user can match
 * a tool to the plugin it came with by comparing one line. It is the only file that
 * includes mcp_revision.h, which the build rewrites when git describe changes
 * (cmake/revision.cmake), so a new commit recompiles this file alone.
 */
#include "mcp_revision.h"
#include "core/log.h"

const char *mcp_version_text(void) { return "mcpnet " MCPNET_VERSION ", source revision " MCPNET_REVISION; }
