/*
 * doctor_config.c - the effective configuration, loaded by the plugin's own loader the
 * way a job would see it: defaults, the MCPNET_CONFIG file, NCCL's configuration files
 * (NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf: NCCL turns them into
 * environment before it loads the plugin) and the environment. Every value keeps its
 * origin for the report. A value the loader refuses is a FAIL, since the plugin's init
 * would fail on it; its other WARNs (unknown keys, ignored aliases) stay WARNs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

struct load_msgs {
  struct doctor_report *r;
  int n;
  char msg[32][1024];
};

static void on_report(void *arg, ncclDebugLogLevel level, const char *msg)
{
  struct load_msgs *m = arg;

  if (level == NCCL_LOG_WARN && m->n < 32)
    snprintf(m->msg[m->n++], sizeof(m->msg[0]), "%s", msg);
}

/* A loader message about a refused parameter names it; find which one. */
static const struct mcp_param_def *refused_param(const struct doctor_report *r, const char *msg)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);

  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_origin *o = &r->cfg.origin[defs[i].id];
    const char *key = o->key != NULL ? o->key : defs[i].name;

    if (o->rejected && (strstr(msg, key) != NULL || strstr(msg, defs[i].name) != NULL))
      return &defs[i];
  }
  return NULL;
}

void doctor_config_load(struct doctor_report *r)
{
  static struct load_msgs m;
  struct mcp_param_env env;
  char err[1024];
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  int i, reported = 0;

  memset(&m, 0, sizeof(m));
  memset(&env, 0, sizeof(env));
  m.r = r;
  env.report = on_report;
  env.report_arg = &m;
  r->cfg_rc = mcp_param_load(&r->cfg, &env, MCP_PARAM_LOAD_NCCL_CONF, err, sizeof(err));
  for (i = 0; i < m.n; i++) {
    const struct mcp_param_def *def = refused_param(r, m.msg[i]);
    char fix[256];

    if (def != NULL) {
      char range[200];

      mcp_param_format_range(def, range, sizeof(range));
      snprintf(fix, sizeof(fix), "set %s to a value in %s, or unset it", def->name, range);
      doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_CONFIG, "invalid-value", def->name, fix, "%s", m.msg[i]);
      reported++;
    } else {
      doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_CONFIG, "config-note", NULL, "correct or remove the entry named",
                 "%s", m.msg[i]);
    }
  }
  if (r->cfg_rc != 0 && reported == 0)
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_CONFIG, "invalid-value", NULL,
               "fix the value named; mcpnet-params --effective --nccl-conf shows every value",
               "invalid configuration: %s", err);
  if (r->cfg_rc == 0) {
    int set = 0;

    for (size_t k = 0; k < n; k++)
      set += r->cfg.origin[defs[k].id].source != MCP_PARAM_SRC_DEFAULT;
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_CONFIG, "config", NULL, NULL,
               "configuration valid: %d of %zu parameters set, the rest at their defaults", set, n);
  }
}

/* The plugin reads only the environment: put what NCCL's files set there, as NCCL
 * does (never overriding the environment), before the plugin is loaded. */
void doctor_config_export_nccl_conf(const struct doctor_report *r)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char value[1024];

  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_origin *o = &r->cfg.origin[defs[i].id];

    if (o->source != MCP_PARAM_SRC_NCCL_CONF || o->rejected)
      continue;
    mcp_param_format(&r->cfg, &defs[i], value, sizeof(value));
    setenv(o->key != NULL ? o->key : defs[i].name, value, 0);
  }
}
