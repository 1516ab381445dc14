/*
 * mcp_param_env.c - where mcpnet's configuration meets NCCL's habits and the user's
 * typos: defaults NCCL changed between releases (picked for the NCCL that loaded the
 * plugin), the NCCL_IB_* variables NCCL's IB transport reads and mcpnet does not act
 * on, MCPNET_* names that are no parameter (with the nearest real one), and the
 * per-device bound on QPs per connection. A job configured for NCCL's own transport
 * must run under mcpnet too, so each of these is said once at init, never refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpnet/log.h"
#include "mcpnet/param.h"

extern char **environ;

/* NCCL 2.23 raised NCCL_IB_TIMEOUT's default from 18 to 20; its version code is 22300. */
#define NCCL_CODE_2_23 22300

int mcp_param_nccl_ib_timeout(int nccl_version, int nccl_abi, char *why, size_t whylen)
{
  if (nccl_version > 0) {
    int maj = nccl_version / 10000, min = nccl_version / 100 % 100, pat = nccl_version % 100;
    int t = nccl_version >= NCCL_CODE_2_23 ? 20 : 18;

    snprintf(why, whylen, "%d, as NCCL %d.%d.%d (which loaded mcpnet) defaults to (%s)", t, maj, min, pat,
             t == 20 ? "20 from NCCL 2.23 on" : "18 before NCCL 2.23");
    return t;
  }
  if (nccl_abi == 8) {
    snprintf(why, whylen,
             "18, as NCCL took the v8 table: NCCL 2.20-2.22 default to 18 (2.23, also "
             "v8, to 20; NCCL's version was not visible)");
    return 18;
  }
  if (nccl_abi >= 9) {
    snprintf(why, whylen, "20, as NCCL took the v%d table: NCCL 2.24 or later, which default to 20",
             nccl_abi);
    return 20;
  }
  snprintf(why, whylen, "20, NCCL's default since 2.23 (no NCCL seen)");
  return 20;
}

/*
 * NCCL_IB_* variables NCCL 2.28's IB transport (src/transport/net_ib.cc, ibvwrap.cc)
 * reads that mcpnet has no counterpart for; the ones it does act on are rows of the
 * parameter table. Why each is safe to ignore is in the README's compatibility section.
 */
static const char *const nccl_ignored[] = {
  "NCCL_IB_ADAPTIVE_ROUTING",
  "NCCL_IB_AR_THRESHOLD",
  "NCCL_IB_DATA_DIRECT",
  "NCCL_IB_DISABLE",
  "NCCL_IB_ECE_ENABLE",
  "NCCL_IB_FIFO_TC",
  "NCCL_IB_MQP_RETRY_ALL",
  "NCCL_IB_MQP_RETRY_CNT",
  "NCCL_IB_MQP_RETRY_SLEEP_MSEC",
  "NCCL_IB_RETURN_ASYNC_EVENTS",
  "NCCL_IB_ROUTABLE_FLID_GID_INDEX",
  "NCCL_IB_SPLIT_DATA_ON_QPS",
  "NCCL_IB_USE_INLINE",
  "NCCL_IB_WARN_RAIL_LOCAL",
  NULL,
};

/*
 * MCPNET_* names that are not parameters but belong to mcpnet's own build and lab
 * harness (test/lab exports them to every guest process), or to its tools (the
 * doctor's --fleet reads MCPNET_FLEET_*, set in the same pod or job as NCCL's): not a
 * user's typo.
 */
static const char *const harness_names[] = {"MCPNET_BUILD_DIR",         "MCPNET_SOURCE_DIR",
                                            "MCPNET_FLEET_COORDINATOR", "MCPNET_FLEET_NODES",
                                            "MCPNET_FLEET_RANK",        NULL};

/*
 * Parameters mcpnet no longer has, with what happens instead: a job that still sets one
 * hears why it has no effect, not a guess at the nearest name.
 */
static const struct {
  const char *name, *instead;
} retired[] = {
  {"MCPNET_CTS_BATCH",
   "every receive's clear-to-send is now written by the irecv that accepted it, so nothing is "
   "held back to batch (issue 36)"},
  {NULL, NULL},
};

const char *const *mcp_param_nccl_ignored(void) { return nccl_ignored; }

static bool in_list(const char *const *list, const char *name)
{
  for (; *list != NULL; list++)
    if (strcmp(*list, name) == 0)
      return true;
  return false;
}

bool mcp_param_nccl_reads(const char *name)
{
  const struct mcp_param_def *def = mcp_param_find(name);

  return in_list(nccl_ignored, name) || (def != NULL && strncmp(def->name, "NCCL_", 5) == 0);
}

/* Levenshtein distance, two rows; names are short (under 64 characters here). */
static int edit_distance(const char *a, const char *b)
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
      int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      int del = prev[j] + 1, ins = cur[j - 1] + 1;

      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
  }
  return row[la & 1][lb];
}

static size_t common_prefix(const char *a, const char *b)
{
  size_t i = 0;

  while (a[i] != '\0' && a[i] == b[i])
    i++;
  return i;
}

/* Keep cand when it is nearer, or as near with a longer common start. A name cut short
 * (MCPNET_INLINE for MCPNET_INLINE_BYTES) counts as one edit from its completion:
 * plain edit distance would prefer any other word of the same length. */
static void consider(const char *name, const char *cand, const char **best, int *best_d)
{
  size_t len = strlen(name);
  int d = strncmp(name, cand, len) == 0 && cand[len] != '\0' ? 1 : edit_distance(name, cand);

  if (*best == NULL || d < *best_d ||
      (d == *best_d && common_prefix(name, cand) > common_prefix(name, *best))) {
    *best = cand;
    *best_d = d;
  }
}

const char *mcp_param_nearest(const char *name, int *distance)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  const char *best = NULL;
  int best_d = 0;

  for (size_t i = 0; i < n; i++) {
    consider(name, defs[i].name, &best, &best_d);
    for (const char *const *a = defs[i].aliases; a != NULL && *a != NULL; a++)
      consider(name, *a, &best, &best_d);
  }
  if (distance != NULL)
    *distance = best_d;
  return best;
}

static void report(const struct mcp_param_env *env, ncclDebugLogLevel level, const char *msg)
{
  if (env != NULL && env->report != NULL)
    env->report(env->report_arg, level, msg);
  else if (level == NCCL_LOG_WARN)
    MCP_WARN("%s", msg);
  else
    MCP_INFO(NCCL_ENV, "%s", msg);
}

/* Append ", NAME" (or "NAME" first) to buf, keeping it terminated when it fills up. */
static void append_name(char *buf, size_t len, const char *name, size_t namelen)
{
  size_t used = strlen(buf);

  if (used + 1 >= len)
    return;
  snprintf(buf + used, len - used, "%s%.*s", used > 0 ? ", " : "", (int)namelen, name);
}

int mcp_param_scan_env(const struct mcp_param_env *env, int *nignored)
{
  char *const *envp = env != NULL && env->envp != NULL ? env->envp : environ;
  char ignored[1024] = "", foreign[512] = "", msg[1800];
  int nunknown = 0, nign = 0;

  for (; envp != NULL && *envp != NULL; envp++) {
    const char *eq = strchr(*envp, '=');
    char name[128];
    size_t nlen;

    /* NCCL treats an empty value as unset, and so does the loader. */
    if (eq == NULL || eq[1] == '\0')
      continue;
    nlen = (size_t)(eq - *envp);
    if (nlen >= sizeof(name))
      continue;
    memcpy(name, *envp, nlen);
    name[nlen] = '\0';
    if (strncmp(name, "NCCL_IB_", 8) == 0 && mcp_param_find(name) == NULL) {
      nign++;
      if (in_list(nccl_ignored, name))
        append_name(ignored, sizeof(ignored), name, nlen);
      else
        append_name(foreign, sizeof(foreign), name, nlen);
    } else if (strncmp(name, "MCPNET_", 7) == 0 && mcp_param_find(name) == NULL &&
               !in_list(harness_names, name)) {
      int d, r;
      const char *near = mcp_param_nearest(name, &d);

      nunknown++;
      for (r = 0; retired[r].name != NULL && strcmp(retired[r].name, name) != 0; r++)
        ;
      if (retired[r].name != NULL)
        snprintf(msg, sizeof(msg), "%s=%s (environment) was retired and is ignored: %s", name, eq + 1,
                 retired[r].instead);
      else
        snprintf(msg, sizeof(msg),
                 "%s=%s (environment) is not an mcpnet variable and is ignored; "
                 "the nearest one is %s (mcpnet-params lists them all)",
                 name, eq + 1, near);
      report(env, NCCL_LOG_WARN, msg);
    }
  }
  if (nign > 0) {
    snprintf(msg, sizeof(msg),
             "set, but mcpnet does not act on them (NCCL's own IB transport would): "
             "%s%s%s%s. The README's compatibility section says what mcpnet does instead",
             ignored, ignored[0] != '\0' && foreign[0] != '\0' ? "; " : "",
             foreign[0] != '\0' ? "not read by NCCL 2.28 either: " : "", foreign);
    report(env, NCCL_LOG_WARN, msg);
  }
  if (nignored != NULL)
    *nignored = nign;
  return nunknown;
}

int mcp_param_qps_cap(int want, int max_qps, long max_cqe, int cqe_per_qp, int cqe_fixed, char *why,
                      size_t whylen)
{
  long fit = cqe_per_qp > 0 && max_cqe > 0 ? (max_cqe - cqe_fixed) / cqe_per_qp : want;

  if (whylen > 0)
    why[0] = '\0';
  if (want > max_qps) {
    snprintf(why, whylen, "%d QPs per connection is mcpnet's bound (NCCL's own arrays hold 128)", max_qps);
    want = max_qps;
  }
  if (fit < 1)
    fit = 1; /* one QP needs less than a whole CQ on any real device; let create_cq say */
  if (want > fit) {
    snprintf(why, whylen,
             "%ld QPs per connection fill this device's completion queue: it holds "
             "at most %ld entries (ibv_device_attr.max_cqe) and mcpnet needs %d per QP",
             fit, max_cqe, cqe_per_qp);
    want = (int)fit;
  }
  return want;
}
