/*
 * mcp_param_near.c - the name someone probably meant: for a misspelt variable
 * (MCPNET_STRIKT, NCCL_IB_GID_INDX, NCCL_SOCKET_IFNAM) the nearest known name, and for
 * a value with a fixed set of right answers (NCCL_NET=MPC, NCCL_NET_PLUGIN=mpc) the
 * nearest of those. Edit distance, with a name cut short counted as one edit from its
 * completion, since plain distance would prefer any other name of the same length.
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "core/param.h"

/* Levenshtein distance, two rows; names are short (under 64 characters here). */
static int edit_distance(const char *a, const char *b, bool nocase)
{
  size_t la = strlen(a), lb = strlen(b);
  int row[2][65];

  if (la > 64 || lb > 64)
    return (int)(la > lb ? la : lb);
  for (size_t j = 0; j <= lb; j++)
    row[0][j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int *prev = row[(i - 1) & 1], *cur = row[i & 1];

    cur[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      char ca = a[i - 1], cb = b[j - 1];
      int differ = nocase ? tolower((unsigned char)ca) != tolower((unsigned char)cb) : ca != cb;
      int sub = prev[j - 1] + differ;
      int del = prev[j] + 1, ins = cur[j - 1] + 1;

      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
  }
  return row[la & 1][lb];
}

static size_t common_prefix(const char *a, const char *b, bool nocase)
{
  size_t i = 0;

  while (a[i] != '\0' &&
         (nocase ? tolower((unsigned char)a[i]) == tolower((unsigned char)b[i]) : a[i] == b[i]))
    i++;
  return i;
}

struct near {
  const char *best;
  int d;
  bool nocase;
};

/* Keep cand when it is nearer, or as near with a longer common start. */
static void consider(const char *name, const char *cand, struct near *n)
{
  size_t len = strlen(name);
  int d = common_prefix(name, cand, n->nocase) == len && cand[len] != '\0'
    ? 1
    : edit_distance(name, cand, n->nocase);

  if (n->best == NULL || d < n->d ||
      (d == n->d && common_prefix(name, cand, n->nocase) > common_prefix(name, n->best, n->nocase))) {
    n->best = cand;
    n->d = d;
  }
}

const char *mcp_param_nearest(const char *name, int *distance)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  bool nccl = mcp_param_nccl_family(name);
  struct near best = {NULL, 0, false};

  for (size_t i = 0; i < n; i++) {
    if (nccl && strncmp(defs[i].name, "NCCL_", 5) != 0)
      continue;
    consider(name, defs[i].name, &best);
    for (const char *const *a = defs[i].aliases; a != NULL && *a != NULL; a++)
      consider(name, *a, &best);
  }
  if (nccl) {
    for (const struct mcp_param_nccl_var *v = mcp_param_nccl_list(MCP_NCCL_IB_IGNORED); v->name != NULL; v++)
      consider(name, v->name, &best);
    for (const struct mcp_param_nccl_var *v = mcp_param_nccl_list(MCP_NCCL_OWN); v->name != NULL; v++)
      consider(name, v->name, &best);
  }
  if (distance != NULL)
    *distance = best.d;
  return best.best;
}

const char *mcp_param_nearest_word(const char *word, const char *const *cands, int *distance)
{
  struct near best = {NULL, 0, true};

  for (; *cands != NULL; cands++)
    consider(word, *cands, &best);
  if (distance != NULL)
    *distance = best.d;
  return best.best;
}

/* One edit anywhere, two in a name of six characters or more, a quarter of a long one:
 * NCCL_IB_GID_INDX and NCCL_SOCKET_IFNAM are one away; NCCL_IB_FROBNICATE is no typo
 * of anything, nor is a three-letter plugin name two letters away from mcp. */
bool mcp_param_near_enough(int distance, size_t len)
{
  return distance > 0 && (distance == 1 || (distance == 2 && len >= 6) || (size_t)distance * 4 <= len);
}
