/*
 * mcp_param_env.c - where mcpnet's configuration meets NCCL's habits and the user's
 * typos: defaults NCCL changed between releases (picked for the NCCL that loaded the
 * plugin), the NCCL_IB_* variables NCCL's IB transport reads and mcpnet does not act
 * on, MCPNET_* names that are no parameter and names of NCCL's families that NCCL does
 * not read (with the nearest real one), and the per-device bound on QPs per connection. A job configured for NCCL's own transport
 * must run under mcpnet too, so each of these is said once at init, never refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/param.h"

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
 * MCPNET_* names that are not parameters but belong to mcpnet's own build and lab
 * harness (test/lab exports them to every guest process), or to its tools (the
 * doctor's --fleet reads MCPNET_FLEET_* and its token MCPNET_DOCTOR_TOKEN, set in the
 * same pod or job as NCCL's): not a
 * user's typo.
 */
static const char *const harness_names[] = {"MCPNET_BUILD_DIR",
                                            "MCPNET_SOURCE_DIR",
                                            "MCPNET_FLEET_COORDINATOR",
                                            "MCPNET_FLEET_NODES",
                                            "MCPNET_FLEET_RANK",
                                            "MCPNET_DOCTOR_TOKEN",
                                            NULL};

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

static bool in_list(const char *const *list, const char *name)
{
  for (; *list != NULL; list++)
    if (strcmp(*list, name) == 0)
      return true;
  return false;
}

void mcp_param_report(const struct mcp_param_env *env, ncclDebugLogLevel level, const char *msg)
{
  if (env != NULL && env->report != NULL)
    env->report(env->report_arg, level, msg);
  else if (level == NCCL_LOG_WARN)
    MCP_WARN("%s", msg);
  else
    MCP_INFO(NCCL_ENV, "%s", msg);
}

void mcp_param_found(const struct mcp_param_env *env, const struct mcp_param_finding *f)
{
  if (env != NULL && env->finding != NULL)
    env->finding(env->finding_arg, f);
}

/* Append "; NAME (WHY)" (or "NAME (WHY)" first; no parenthesis without a reason) to buf,
 * keeping it terminated when it fills up. */
static void append_name(char *buf, size_t len, const char *name, size_t namelen, const char *why)
{
  size_t used = strlen(buf);

  if (used + 1 >= len)
    return;
  snprintf(buf + used, len - used, "%s%.*s%s%s%s", used > 0 ? "; " : "", (int)namelen, name,
           why != NULL ? " (" : "", why != NULL ? why : "", why != NULL ? ")" : "");
}

/* A name of NCCL's families that nobody reads: the nearest NCCL name when one is close. */
static void unknown_nccl(const struct mcp_param_env *env, const char *name, const char *value)
{
  int d;
  const char *near = mcp_param_nearest(name, &d);
  bool close = mcp_param_near_enough(d, strlen(name));
  char msg[600];
  struct mcp_param_finding f = {MCP_FIND_UNKNOWN_NAME, true, name, value, close ? near : NULL, msg};

  if (close)
    snprintf(msg, sizeof(msg),
             "%s=%s (environment) is a variable neither NCCL 2.20-2.30 nor mcpnet reads, so it changes "
             "nothing; did you mean %s?",
             name, value, near);
  else
    snprintf(msg, sizeof(msg),
             "%s=%s (environment) is a variable neither NCCL 2.20-2.30 nor mcpnet reads, so it changes "
             "nothing (no known name is close to it)",
             name, value);
  mcp_param_report(env, NCCL_LOG_WARN, msg);
  mcp_param_found(env, &f);
}

/* An MCPNET_* name that is no parameter: a retired one says what replaced it (a note an
 * old image deserves, not a typo: --check does not fail on it), any other names the
 * nearest real one. Returns whether it was unknown (not retired). */
static bool unknown_mcpnet(const struct mcp_param_env *env, const char *name, const char *value)
{
  int d, r;
  const char *near = mcp_param_nearest(name, &d);
  char msg[600];
  struct mcp_param_finding f = {MCP_FIND_UNKNOWN_NAME, true, name, value, near, msg};

  for (r = 0; retired[r].name != NULL && strcmp(retired[r].name, name) != 0; r++)
    ;
  if (retired[r].name != NULL) {
    f.kind = MCP_FIND_IGNORED;
    f.problem = false;
    f.nearest = NULL; /* nothing replaces it: no guess */
    snprintf(msg, sizeof(msg), "%s=%s (environment) was retired and is ignored: %s", name, value,
             retired[r].instead);
  } else {
    snprintf(msg, sizeof(msg),
             "%s=%s (environment) is not an mcpnet variable and is ignored; "
             "the nearest one is %s (mcpnet-params lists them all)",
             name, value, near);
  }
  mcp_param_report(env, NCCL_LOG_WARN, msg);
  mcp_param_found(env, &f);
  return retired[r].name == NULL;
}

int mcp_param_scan_env(const struct mcp_param_env *env, int *nignored)
{
  char *const *envp = env != NULL && env->envp != NULL ? env->envp : environ;
  char ignored[4096] = "", msg[4400];
  int nunknown = 0, nign = 0;

  for (; envp != NULL && *envp != NULL; envp++) {
    const char *eq = strchr(*envp, '=');
    const struct mcp_param_nccl_var *var;
    enum mcp_param_nccl_kind kind;
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
    if (mcp_param_find(name) != NULL)
      continue; /* a parameter: the loader judges its value */
    if (mcp_param_nccl_family(name)) {
      var = mcp_param_nccl_lookup(name, &kind);
      if (var == NULL) {
        nunknown++;
        unknown_nccl(env, name, eq + 1);
      } else if (kind == MCP_NCCL_IB_IGNORED && !mcp_param_nccl_is_default(var, eq + 1)) {
        struct mcp_param_finding f = {MCP_FIND_IGNORED, false, name, eq + 1, NULL, NULL};
        char one[400];

        snprintf(one, sizeof(one), "%s=%s: NCCL's IB transport reads it, mcpnet does not act on it%s%s", name,
                 eq + 1, var->why != NULL ? ": " : "", var->why != NULL ? var->why : "");
        f.message = one;
        nign++;
        append_name(ignored, sizeof(ignored), name, nlen, var->why);
        mcp_param_found(env, &f);
      }
    } else if (strncmp(name, "MCPNET_", 7) == 0 && !in_list(harness_names, name)) {
      nunknown += unknown_mcpnet(env, name, eq + 1);
    }
  }
  if (nign > 0) {
    snprintf(msg, sizeof(msg),
             "set, but mcpnet does not act on them (NCCL's own IB transport would): "
             "%s. The README's compatibility section says what mcpnet does instead",
             ignored);
    mcp_param_report(env, NCCL_LOG_WARN, msg);
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
