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

#include "core/log.h"
#include "core/match_list.h"
#include "core/text.h"

static int match_fault(struct mcp_match_fault *f, enum mcp_match_error kind, const char *tok, size_t len)
{
  f->kind = kind;
  f->token = tok;
  f->token_len = (int)len;
  return -EINVAL;
}

/* One numeric field of "port:rail:plane" in [p, p+len): empty (or all spaces) leaves *out
 * at -1, as NCCL does for a field absent or empty ("mlx5_0::2": every port, rail 2), and
 * so does -1 itself, the value NCCL stores for it. */
static int match_field(const char *p, size_t len, long lo, long hi, int *out)
{
  char num[16], *stop;
  long v;

  mcp_trim_span(&p, &len);
  if (len == 0)
    return 0;
  if (len >= sizeof(num))
    return -EINVAL;
  memcpy(num, p, len);
  num[len] = '\0';
  if (strcmp(num, "-1") == 0)
    return 0;
  errno = 0;
  v = strtol(num, &stop, 10);
  if (errno != 0 || *stop != '\0' || num[0] == '+' || num[0] == '-' || v < lo || v > hi)
    return -EINVAL;
  *out = (int)v;
  return 0;
}

/* ":port[:rail[:plane]]" after a name (fields points past the first ':'), into entry i. */
static int match_fields(struct mcp_match_list *list, const char *fields, size_t len,
                        struct mcp_match_fault *f)
{
  static const struct {
    enum mcp_match_error bad;
    long lo, hi;
  } spec[] = {
    {MCP_MATCH_BAD_PORT, 1, 255},
    {MCP_MATCH_BAD_RAIL, 0, MCP_MATCH_RAIL_MAX},
    {MCP_MATCH_BAD_PLANE, 0, MCP_MATCH_PLANE_MAX},
  };
  int *out[3] = {&list->e[list->n].port, &list->e[list->n].rail, &list->e[list->n].plane};
  const char *p = fields, *end = fields + len;

  for (size_t k = 0;; k++) {
    const char *colon = memchr(p, ':', (size_t)(end - p));
    size_t flen = colon != NULL ? (size_t)(colon - p) : (size_t)(end - p);

    if (k == sizeof(spec) / sizeof(spec[0])) {
      f->kind = MCP_MATCH_EXTRA;
      return -EINVAL;
    }
    if (match_field(p, flen, spec[k].lo, spec[k].hi, out[k]) != 0) {
      f->kind = spec[k].bad;
      if (flen < sizeof(f->field)) /* a longer one is only "bad" */
        snprintf(f->field, sizeof(f->field), "%.*s", (int)flen, p);
      return -EINVAL;
    }
    if (colon == NULL)
      return 0;
    p = colon + 1;
  }
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
    list->e[list->n].port = list->e[list->n].rail = list->e[list->n].plane = -1;
    if (with_ports && colon != NULL &&
        match_fields(list, colon + 1, (size_t)(tok + len - colon - 1), fault) != 0)
      return match_fault(fault, fault->kind, tok, len);
    list->n++;
  }
  return 0;
}

/* NCCL_IB_HCA's wording of a refused list; the loader parses the variable with it. */
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
  return -EINVAL;
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

int mcp_match_which(const struct mcp_match_list *list, const char *name, int port)
{
  if (list->exclude)
    return -ENOENT;
  for (int i = 0; i < list->n; i++)
    if (mcp_match_token(list, i, name) && (port < 0 || list->e[i].port < 0 || list->e[i].port == port))
      return i;
  return -ENOENT;
}

void mcp_match_list_warn_trimmed(const char *var, const struct mcp_match_list *list, int *once)
{
  if (list->ntrimmed == 0 || __atomic_exchange_n(once, 1, __ATOMIC_RELAXED) != 0)
    return;
  MCP_WARN("%s entry %s has spaces around its name: mcpnet ignores them, but NCCL itself "
           "matches the spaces too, so its own transports skip %d such entr%s",
           var, list->trimmed, list->ntrimmed, list->ntrimmed == 1 ? "y" : "ies");
}
