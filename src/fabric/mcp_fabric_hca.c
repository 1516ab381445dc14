/*
 * mcp_fabric_hca.c - NCCL_IB_HCA: NCCL's list grammar (core's match list, prefix
 * matching included: "mlx5_1" also matches "mlx5_10") with this variable's own error
 * wording, and the count discovery uses to warn when a token matches several devices.
 */
#include <stdio.h>
#include <string.h>

#include "fabric/fabric_hca.h"

int mcp_hca_parse(const char *text, struct mcp_match_list *list, char *err, size_t errlen)
{
  struct mcp_match_fault f;

  if (mcp_match_list_parse(text, MCP_MATCH_NAME_MAX, 1, list, &f) == 0)
    return 0;
  switch (f.kind) {
  case MCP_MATCH_TOO_MANY:
    snprintf(err, errlen, "NCCL_IB_HCA has more than %d entries", MCP_MATCH_LIST_MAX);
    break;
  case MCP_MATCH_BAD_PORT:
  case MCP_MATCH_BAD_RAIL:
  case MCP_MATCH_BAD_PLANE: {
    const char *what = f.kind == MCP_MATCH_BAD_PORT ? "port"
      : f.kind == MCP_MATCH_BAD_RAIL                ? "rail"
                                                    : "plane";
    int lo = f.kind == MCP_MATCH_BAD_PORT ? 1 : 0;
    int hi = f.kind == MCP_MATCH_BAD_PORT ? 255
      : f.kind == MCP_MATCH_BAD_RAIL      ? MCP_MATCH_RAIL_MAX
                                          : MCP_MATCH_PLANE_MAX;

    if (f.field[0] == '\0') {
      snprintf(err, errlen, "NCCL_IB_HCA entry '%.*s': bad %s", f.token_len, f.token, what);
      break;
    }
    snprintf(err, errlen,
             "NCCL_IB_HCA entry '%.*s': %s '%s' is not %d..%d (name:port:rail:plane, empty for none)",
             f.token_len, f.token, what, f.field, lo, hi);
    break;
  }
  case MCP_MATCH_EXTRA:
    snprintf(err, errlen, "NCCL_IB_HCA entry '%.*s' has fields after name:port:rail:plane", f.token_len,
             f.token);
    break;
  default:
    snprintf(err, errlen, "NCCL_IB_HCA entry '%.*s' has no usable device name", f.token_len, f.token);
    break;
  }
  return -1;
}

int mcp_hca_token_devices(const struct mcp_match_list *list, int i, const char *const *devs, int ndev,
                          char *out, size_t outlen)
{
  size_t used = 0;
  int k, hits = 0;

  if (outlen > 0)
    out[0] = '\0';
  for (k = 0; k < ndev; k++) {
    if (!mcp_match_token(list, i, devs[k]))
      continue;
    if (used < outlen) {
      int w = snprintf(out + used, outlen - used, "%s%s", hits ? ", " : "", devs[k]);
      used += w > 0 ? (size_t)w : 0;
    }
    hits++;
  }
  return hits;
}
