/*
 * mcp_match_list.c - NCCL's device/interface list grammar (see match_list.h). Two
 * hand-written copies of it (one for NCCL_IB_HCA in fabric, one for NCCL_SOCKET_IFNAME
 * here in core) had drifted apart on spaces and ":port"; this is the one both use now.
 * Pure parsing and matching, no I/O, so unit tests cover it without a device.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpnet/log.h"
#include "mcpnet/match_list.h"
#include "mcpnet/text.h"

static int match_fault(struct mcp_match_fault *f, enum mcp_match_error kind, const char *tok, size_t len)
{
  f->kind = kind;
  f->token = tok;
  f->token_len = (int)len;
  return -EINVAL;
}

/* ":port[:rail[:plane]]" after a name; only the port matters to mcpnet. */
static int match_port(const char *p, size_t len, int *port)
{
  const char *second = memchr(p, ':', len);
  char num[16], *stop;
  long v;

  if (second != NULL)
    len = (size_t)(second - p);
  mcp_trim_span(&p, &len);
  if (len == 0)
    return 0; /* "mlx5_0:" names every port, as a missing port does */
  if (len >= sizeof(num))
    return -1;
  memcpy(num, p, len);
  num[len] = '\0';
  errno = 0;
  v = strtol(num, &stop, 10);
  if (errno != 0 || *stop != '\0' || v < 1 || v > 255)
    return -1;
  *port = (int)v;
  return 0;
}

int mcp_match_list_parse(const char *text, size_t name_max, int with_ports, struct mcp_match_list *list,
                         struct mcp_match_fault *fault)
{
  const char *p = text;

  memset(list, 0, sizeof(*list));
  memset(fault, 0, sizeof(*fault));
  if (name_max > MCP_MATCH_NAME_MAX)
    name_max = MCP_MATCH_NAME_MAX;
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
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    const char *tok = p, *name = p, *colon = memchr(p, ':', len);
    size_t nlen = colon != NULL ? (size_t)(colon - p) : len, raw = nlen;

    p = end != NULL ? end + 1 : p + len;
    if (len == 0)
      continue;
    mcp_trim_span(&name, &nlen);
    if (nlen == 0 && colon == NULL)
      continue; /* only spaces between two commas: an empty token */
    if (nlen != raw && list->ntrimmed++ == 0)
      snprintf(list->trimmed, sizeof(list->trimmed), "'%.*s'", (int)len, tok);
    if (list->n == MCP_MATCH_LIST_MAX)
      return match_fault(fault, MCP_MATCH_TOO_MANY, tok, len);
    if (nlen == 0)
      return match_fault(fault, MCP_MATCH_NO_NAME, tok, len);
    if (nlen >= name_max)
      return match_fault(fault, MCP_MATCH_TOO_LONG, tok, len);
    memcpy(list->e[list->n].name, name, nlen);
    list->e[list->n].port = -1;
    if (with_ports && colon != NULL &&
        match_port(colon + 1, (size_t)(tok + len - colon - 1), &list->e[list->n].port) != 0) {
      size_t plen = len - (size_t)(colon + 1 - tok);
      const char *second = memchr(colon + 1, ':', plen);

      if (second != NULL)
        plen = (size_t)(second - colon - 1);
      if (plen < sizeof(fault->port)) /* a longer one is only "bad" */
        snprintf(fault->port, sizeof(fault->port), "%.*s", (int)plen, colon + 1);
      return match_fault(fault, MCP_MATCH_BAD_PORT, tok, len);
    }
    list->n++;
  }
  return 0;
}

int mcp_match_token(const struct mcp_match_list *list, int i, const char *name)
{
  if (list->exact)
    return strcmp(list->e[i].name, name) == 0;
  return strncmp(list->e[i].name, name, strlen(list->e[i].name)) == 0;
}

int mcp_match_allows(const struct mcp_match_list *list, const char *name, int port)
{
  int hit = 0;

  if (list->n == 0)
    return 1;
  for (int i = 0; i < list->n && !hit; i++)
    hit = mcp_match_token(list, i, name) && (port < 0 || list->e[i].port < 0 || list->e[i].port == port);
  return list->exclude ? !hit : hit;
}

void mcp_match_list_warn_trimmed(const char *var, const struct mcp_match_list *list, int *once)
{
  if (list->ntrimmed == 0 || __atomic_exchange_n(once, 1, __ATOMIC_RELAXED) != 0)
    return;
  MCP_WARN("%s entry %s has spaces around its name: mcpnet ignores them, but NCCL itself "
           "matches the spaces too, so its own transports skip %d such entr%s",
           var, list->trimmed, list->ntrimmed, list->ntrimmed == 1 ? "y" : "ies");
}
