/*
 * mcp_fabric_hca.c - NCCL_IB_HCA parsing and matching, kept to NCCL's meaning so that
 * lists users already have behave the same (prefix matching included: "mlx5_1" also
 * matches "mlx5_10"; discovery warns when a token matches several devices).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpnet/fabric_hca.h"

static int parse_port(const char *p, size_t len, const char *colon, int *port, char *err,
                      size_t errlen)
{
  char num[16], *stop;
  size_t plen = (size_t)(p + len - colon - 1);
  /* NCCL allows "dev:port:rail:plane"; mcpnet uses the port and ignores the rest. */
  const char *second = memchr(colon + 1, ':', plen);
  long v;

  if (second != NULL)
    plen = (size_t)(second - colon - 1);
  if (plen == 0)
    return 0;
  if (plen >= sizeof(num)) {
    snprintf(err, errlen, "NCCL_IB_HCA entry '%.*s': bad port", (int)len, p);
    return -1;
  }
  memcpy(num, colon + 1, plen);
  num[plen] = '\0';
  errno = 0;
  v = strtol(num, &stop, 10);
  if (errno != 0 || *stop != '\0' || v < 1 || v > 255) {
    snprintf(err, errlen, "NCCL_IB_HCA entry '%.*s': port '%s' is not 1..255", (int)len, p, num);
    return -1;
  }
  *port = (int)v;
  return 0;
}

int mcp_hca_parse(const char *text, struct mcp_hca_list *list, char *err, size_t errlen)
{
  const char *p = text;

  memset(list, 0, sizeof(*list));
  if (text == NULL)
    return 0;
  if (*p == '^') {
    list->exclude = 1;
    p++;
  }
  if (*p == '=') {
    list->exact = 1;
    p++;
  }
  while (*p != '\0') {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *colon = memchr(p, ':', len);
    size_t nlen = colon ? (size_t)(colon - p) : len;

    if (len == 0) {
      p = end ? end + 1 : p + len;
      continue;
    }
    if (list->n == MCP_HCA_LIST_MAX) {
      snprintf(err, errlen, "NCCL_IB_HCA has more than %d entries", MCP_HCA_LIST_MAX);
      return -1;
    }
    if (nlen == 0 || nlen >= sizeof(list->e[0].name)) {
      snprintf(err, errlen, "NCCL_IB_HCA entry '%.*s' has no usable device name", (int)len, p);
      return -1;
    }
    memcpy(list->e[list->n].name, p, nlen);
    list->e[list->n].port = -1;
    if (colon != NULL && parse_port(p, len, colon, &list->e[list->n].port, err, errlen) != 0)
      return -1;
    list->n++;
    p = end ? end + 1 : p + len;
  }
  return 0;
}

int mcp_hca_token_matches(const struct mcp_hca_list *list, int i, const char *dev)
{
  if (list->exact)
    return strcmp(list->e[i].name, dev) == 0;
  return strncmp(list->e[i].name, dev, strlen(list->e[i].name)) == 0;
}

int mcp_hca_token_devices(const struct mcp_hca_list *list, int i, const char *const *devs, int ndev,
                          char *out, size_t outlen)
{
  size_t used = 0;
  int k, hits = 0;

  if (outlen > 0)
    out[0] = '\0';
  for (k = 0; k < ndev; k++) {
    if (!mcp_hca_token_matches(list, i, devs[k]))
      continue;
    if (used < outlen) {
      int w = snprintf(out + used, outlen - used, "%s%s", hits ? ", " : "", devs[k]);
      used += w > 0 ? (size_t)w : 0;
    }
    hits++;
  }
  return hits;
}

int mcp_hca_allows(const struct mcp_hca_list *list, const char *dev, int port)
{
  int i, hit = 0;

  if (list->n == 0)
    return 1;
  for (i = 0; i < list->n && !hit; i++)
    hit = mcp_hca_token_matches(list, i, dev) &&
          (port < 0 || list->e[i].port < 0 || list->e[i].port == port);
  return list->exclude ? !hit : hit;
}
