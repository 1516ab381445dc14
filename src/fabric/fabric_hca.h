/*
 * fabric_hca.h - NCCL_IB_HCA lists with NCCL's meaning: comma-separated
 * "name[:port]" tokens, prefix matches unless the list starts with '=' (exact), an
 * exclude list when it starts with '^' ("^=" excludes exact names). The grammar,
 * matching and the variable's parse messages are core's (match_list.h: mcp_hca_parse,
 * which the parameter loader calls); this adds what discovery reports of a list.
 */
#ifndef MCPNET_FABRIC_HCA_H
#define MCPNET_FABRIC_HCA_H

#include <stddef.h>

#include "core/match_list.h"

/*
 * How many of the ndev names in devs token i matches; those names go to out, separated
 * by ", " (cut short if out is too small). Discovery uses it to WARN about a prefix
 * that catches more than meant ("mlx5_1" also matches "mlx5_10").
 */
int mcp_hca_token_devices(const struct mcp_match_list *list, int i, const char *const *devs, int ndev,
                          char *out, size_t outlen);

#endif
