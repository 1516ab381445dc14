/*
 * fabric_hca.h - NCCL_IB_HCA lists with NCCL's meaning: comma-separated
 * "name[:port]" tokens, prefix matches unless the list starts with '=' (exact), an
 * exclude list when it starts with '^' ("^=" excludes exact names).
 */
#ifndef MCPNET_FABRIC_HCA_H
#define MCPNET_FABRIC_HCA_H

#include <stddef.h>

#define MCP_HCA_LIST_MAX 32

struct mcp_hca_list {
  int exclude;
  int exact;
  int n;
  struct {
    char name[64];
    int port; /* -1: every port */
  } e[MCP_HCA_LIST_MAX];
};

int mcp_hca_parse(const char *text, struct mcp_hca_list *list, char *err, size_t errlen);
/* 1 when token i names device dev (port ignored). */
int mcp_hca_token_matches(const struct mcp_hca_list *list, int i, const char *dev);
/*
 * How many of the ndev names in devs token i matches; those names go to out, separated
 * by ", " (cut short if out is too small). Discovery uses it to WARN about a prefix
 * that catches more than meant ("mlx5_1" also matches "mlx5_10").
 */
int mcp_hca_token_devices(const struct mcp_hca_list *list, int i, const char *const *devs, int ndev,
                          char *out, size_t outlen);
/* 1 when dev:port passes the list (an empty list passes everything). */
int mcp_hca_allows(const struct mcp_hca_list *list, const char *dev, int port);

#endif
