/*
 * mcp_fabric_hca.c - NCCL_IB_HCA, as the configuration parsed it (core's match list,
 * prefix matching included: "mlx5_1" also matches "mlx5_10"): the count discovery uses
 * to warn when a token matches several devices.
 */
#include <stdio.h>
#include <string.h>

#include "fabric/fabric_hca.h"

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
