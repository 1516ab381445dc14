/*
 * mcp_json.h - the one JSON string writer of the tools: the benchmark's --json, the
 * doctor's --json report and its fleet table all quote strings through it, so a name,
 * an error message or a command line is escaped the same way in every document.
 */
#ifndef MCP_JSON_H
#define MCP_JSON_H

#include <stdio.h>

/* Writes s to f as a JSON string literal, quotes included; NULL is written as "". */
void mcp_json_str(FILE *f, const char *s);

#endif
