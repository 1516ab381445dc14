/*
 * mcp_param.c - the loader: gathers each parameter's text from its layers (defaults,
 * the MCPNET_CONFIG file, NCCL's configuration files when asked, the environment),
 * keeps the highest-precedence one, checks it against the table and stores the typed
 * value with its origin in struct mcp_config. Every bad value is reported, not just
 * the first, so one failed start shows the user everything to fix. Also here: the
 * once-per-init INFO log of the effective values.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "core/log.h"
#include "core/param.h"
#include "core/text.h"

/* A configuration's strings: a chain of individually allocated copies. */
struct mcp_param_strings {
  struct mcp_param_strings *next;
  char text[];
};

/* One layer's text for one parameter; text NULL when the layer does not set it. */
struct layer_value {
  const char *text;
  struct mcp_param_origin origin;
};

struct loader {
  struct mcp_config *cfg;
  const struct mcp_param_env *env;
  char *err;
  size_t errlen;
  int nerr;
  bool nomem;
  int ib_timeout_default;   /* NCCL_IB_TIMEOUT's default for the NCCL that loaded us */
  char ib_timeout_why[192]; /* and why it is that */
  struct layer_value file[MCP_PARAM_COUNT];
  struct layer_value nccl[MCP_PARAM_COUNT];
  struct layer_value envl[MCP_PARAM_COUNT];
};

static const char *keep_n(struct loader *ld, const char *s, size_t n)
{
  struct mcp_param_strings *node = malloc(sizeof(*node) + n + 1);

  if (node == NULL) {
    ld->nomem = true;
    return NULL;
  }
  memcpy(node->text, s, n);
  node->text[n] = '\0';
  node->next = ld->cfg->strings_;
  ld->cfg->strings_ = node;
  return node->text;
}

static const char *keep(struct loader *ld, const char *s) { return keep_n(ld, s, strlen(s)); }

static void emit(const struct loader *ld, ncclDebugLogLevel level, const char *msg)
{
  if (ld->env != NULL && ld->env->report != NULL)
    ld->env->report(ld->env->report_arg, level, msg);
  else if (level == NCCL_LOG_WARN)
    MCP_WARN("%s", msg);
  else
    MCP_INFO(NCCL_ENV, "%s", msg);
}

/* A WARN that fails the load; the first one is also the caller's error text. */
static void fail(struct loader *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct loader *ld, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (ld->nerr++ == 0 && ld->errlen > 0)
    snprintf(ld->err, ld->errlen, "%s", msg);
  emit(ld, NCCL_LOG_WARN, msg);
}

/* A WARN that does not fail the load (unknown keys, skipped NCCL lines). */
static void warn_only(struct loader *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn_only(struct loader *ld, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  emit(ld, NCCL_LOG_WARN, msg);
}

static const char *env_get(const struct loader *ld, const char *name)
{
  const char *v;

  if (ld->env != NULL && ld->env->getenv != NULL)
    v = ld->env->getenv(ld->env->getenv_arg, name);
  else
    v = getenv(name);
  /* NCCL treats an empty variable as unset; users rely on VAR= to clear a value. */
  return v != NULL && *v != '\0' ? v : NULL;
}

/*
 * The environment's value without surrounding whitespace (YAML and shell quoting leave
 * it behind, and " mlx5_0" would match nothing), or NULL when that leaves nothing.
 */
static const char *env_value(const struct loader *ld, const char *name, size_t *len)
{
  const char *v = env_get(ld, name);
  size_t n;

  if (v == NULL)
    return NULL;
  n = strlen(v);
  mcp_trim_span(&v, &n);
  *len = n;
  return n > 0 ? v : NULL;
}

/* The table's own copy of a name (its row name or alias), so origins need no storage. */
static const char *table_key(const struct mcp_param_def *def, const char *key)
{
  if (strcmp(def->name, key) == 0)
    return def->name;
  for (const char *const *a = def->aliases; a != NULL && *a != NULL; a++)
    if (strcmp(*a, key) == 0)
      return *a;
  return def->name;
}

static void set_layer(struct loader *ld, struct layer_value *slot, const struct mcp_param_def *def,
                      const char *key, const char *text, size_t len, enum mcp_param_source src,
                      const char *path, unsigned line)
{
  slot->text = keep_n(ld, text, len);
  slot->origin =
    (struct mcp_param_origin){.source = src, .key = table_key(def, key), .path = path, .line = line};
}

static void read_env_layer(struct loader *ld)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);

  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_def *def = &defs[i];
    const char *used = def->name;
    size_t len = 0, alen;
    const char *v = env_value(ld, def->name, &len);

    for (const char *const *a = def->aliases; a != NULL && *a != NULL; a++) {
      const char *av = env_value(ld, *a, &alen);

      if (av == NULL)
        continue;
      if (v == NULL) {
        v = av;
        len = alen;
        used = *a;
      } else if (alen != len || strncmp(av, v, len) != 0) {
        warn_only(ld, "%s=%.*s (environment) is ignored: %s=%.*s is also set and takes precedence", *a,
                  (int)alen, av, used, (int)len, v);
      }
    }
    if (v != NULL)
      set_layer(ld, &ld->envl[def->id], def, used, v, len, MCP_PARAM_SRC_ENV, NULL, 0);
  }
}

static const char *source_label(enum mcp_param_source src)
{
  return src == MCP_PARAM_SRC_CONFIG_FILE ? "config file" : "NCCL configuration file";
}

/* One KEY=VALUE line of a file, already split; decides whether and where it lands. */
static void take_line(struct loader *ld, struct layer_value *layer, enum mcp_param_source src,
                      const char *path, unsigned lineno, const char *key, const char *value)
{
  const struct mcp_param_def *def = mcp_param_find(key);
  bool ours = src == MCP_PARAM_SRC_CONFIG_FILE;

  if (def == NULL) {
    /* NCCL's files hold all of NCCL's variables; only ours is expected to be ours. */
    if (ours)
      warn_only(ld, "%s:%u: unknown key %s ignored (mcpnet-params lists the known ones)", path, lineno, key);
    return;
  }
  if (ours && def->id == MCP_PARAM_CONFIG) {
    warn_only(ld, "%s:%u: %s inside a config file is ignored: files do not nest", path, lineno, key);
    return;
  }
  if (*value == '\0')
    return;
  /* NCCL fills the environment with setenv(..., 0): the first file to set a key wins. */
  if (!ours && layer[def->id].text != NULL)
    return;
  set_layer(ld, &layer[def->id], def, key, value, strlen(value), src, path, lineno);
}

/*
 * Read one KEY=VALUE file into a layer. Our own file is strict (a malformed line is an
 * error); NCCL's files are read the way NCCL reads them, skipping what it would skip.
 */
static void read_file_layer(struct loader *ld, const char *path, struct layer_value *layer,
                            enum mcp_param_source src, const struct mcp_param_origin *named_by)
{
  bool ours = src == MCP_PARAM_SRC_CONFIG_FILE;
  char *line = NULL, ebuf[128], where[512];
  size_t cap = 0;
  unsigned lineno = 0;
  const char *kpath, *reason;
  FILE *f;

  f = fopen(path, "r");
  if (f == NULL) {
    if (!ours && errno == ENOENT)
      return;
    goto unreadable;
  }
  kpath = keep(ld, path);
  if (kpath == NULL)
    goto out;
  while (getline(&line, &cap, f) >= 0) {
    char *key, *value, shown[160];
    int rc;

    lineno++;
    /* Splitting edits the line in place; a complaint must quote it as written. */
    snprintf(shown, sizeof(shown), "%.*s", (int)strcspn(line, "\r\n"), line);
    rc = mcp_param_split_line(line, &key, &value);
    if (rc > 0)
      take_line(ld, layer, src, kpath, lineno, key, value);
    else if (rc < 0 && ours)
      fail(ld, "%s:%u: malformed line, expected KEY=VALUE: %s", path, lineno, shown);
    else if (rc < 0)
      warn_only(ld, "%s:%u: malformed line skipped (NCCL skips it too): %s", path, lineno, shown);
  }
  if (ferror(f))
    goto unreadable;
  goto out;

unreadable:
  reason = strerror_r(errno, ebuf, sizeof(ebuf));
  if (ours && named_by != NULL) {
    mcp_param_format_origin(named_by, where, sizeof(where));
    fail(ld, "MCPNET_CONFIG=%s (%s) cannot be read: %s", path, where, reason);
  } else {
    warn_only(ld, "%s %s cannot be read, skipped: %s", source_label(src), path, reason);
  }
out:
  free(line);
  if (f != NULL)
    fclose(f);
}

/* The files NCCL turns into environment variables before it loads a plugin, in its order. */
static void read_nccl_conf(struct loader *ld)
{
  const char *user = env_get(ld, "NCCL_CONF_FILE");
  const char *home = ld->env != NULL && ld->env->home != NULL ? ld->env->home : env_get(ld, "HOME");
  const char *sys = ld->env != NULL && ld->env->system_conf != NULL ? ld->env->system_conf : "/etc/nccl.conf";
  char path[4096];

  if (user != NULL) {
    read_file_layer(ld, user, ld->nccl, MCP_PARAM_SRC_NCCL_CONF, NULL);
  } else if (home != NULL) {
    snprintf(path, sizeof(path), "%s/.nccl.conf", home);
    read_file_layer(ld, path, ld->nccl, MCP_PARAM_SRC_NCCL_CONF, NULL);
  }
  read_file_layer(ld, sys, ld->nccl, MCP_PARAM_SRC_NCCL_CONF, NULL);
}

static void *field(struct mcp_config *cfg, const struct mcp_param_def *def)
{
  return (char *)cfg + def->offset;
}

static void set_default(struct mcp_config *cfg, const struct mcp_param_def *def)
{
  switch (def->type) {
  case MCP_PARAM_INT: *(int *)field(cfg, def) = (int)def->def; break;
  case MCP_PARAM_BOOL: *(bool *)field(cfg, def) = def->def != 0; break;
  case MCP_PARAM_STRING:
    /* Table defaults are string literals: they outlive any configuration. */
    *(const char **)field(cfg, def) = def->def_str;
    break;
  }
}

/* "NAME=value (environment)", naming the canonical variable when an alias was used. */
static void describe(const struct mcp_param_def *def, const struct layer_value *lv, char *buf, size_t len)
{
  char where[512];

  mcp_param_format_origin(&lv->origin, where, sizeof(where));
  if (lv->origin.key != def->name)
    snprintf(buf, len, "%s=%s (%s, alias of %s)", lv->origin.key, lv->text, where, def->name);
  else
    snprintf(buf, len, "%s=%s (%s)", def->name, lv->text, where);
}

/* Check one value and store it; on refusal the default stays and the WARN says why. */
static void apply(struct loader *ld, const struct mcp_param_def *def, const struct layer_value *lv)
{
  char what[1024], range[128], why[256] = "";
  long long v;
  bool b;
  int rc;

  describe(def, lv, what, sizeof(what));
  mcp_param_format_range(def, range, sizeof(range));
  ld->cfg->origin[def->id] = lv->origin;
  switch (def->type) {
  case MCP_PARAM_INT:
    rc = mcp_param_parse_int(lv->text, &v);
    if (rc == -EINVAL) {
      fail(ld, "%s is not an integer (decimal or 0x hex); allowed: %s", what, range);
      goto refused;
    }
    if (rc == -ERANGE || v < def->min || v > def->max) {
      fail(ld, "%s is out of range %s%s%s", what, range, def->why != NULL ? ": " : "",
           def->why != NULL ? def->why : "");
      goto refused;
    }
    if (def->check_int != NULL && def->check_int(v, why, sizeof(why)) != 0) {
      fail(ld, "%s is not allowed: %s", what, why);
      goto refused;
    }
    *(int *)field(ld->cfg, def) = (int)v;
    return;
  case MCP_PARAM_BOOL:
    if (mcp_param_parse_bool(lv->text, &b) != 0) {
      fail(ld, "%s is not a boolean: use 1/0, true/false, yes/no or on/off", what);
      goto refused;
    }
    *(bool *)field(ld->cfg, def) = b;
    return;
  case MCP_PARAM_STRING:
    if (def->check_str != NULL && def->check_str(lv->text, why, sizeof(why)) != 0) {
      fail(ld, "%s %s", what, why);
      goto refused;
    }
    if (def->parse_str != NULL && def->parse_str(lv->text, ld->cfg, why, sizeof(why)) != 0) {
      fail(ld, "%s %s", what, why);
      goto refused;
    }
    *(const char **)field(ld->cfg, def) = lv->text;
    return;
  }
refused:
  ld->cfg->origin[def->id].rejected = true;
}

/* Infinite timers turn a dead peer into a hang, the very failure mcpnet promises to explain. */
static void check_infinite(struct loader *ld)
{
  struct mcp_config *cfg = ld->cfg;
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char where[512];

  if (cfg->allow_infinite_retry)
    return;
  if (cfg->ib_timeout == 0) {
    mcp_param_format_origin(&cfg->origin[MCP_PARAM_IB_TIMEOUT], where, sizeof(where));
    fail(ld,
         "NCCL_IB_TIMEOUT=0 (%s) means an infinite ACK timeout: a lost peer would hang the job "
         "instead of failing. Set MCPNET_ALLOW_INFINITE_RETRY=1 to allow it, or use 1..31 "
         "(20 with 7 retries fails after about 34 s, 18 after about 8.6 s)",
         where);
    cfg->ib_timeout = ld->ib_timeout_default;
    cfg->origin[MCP_PARAM_IB_TIMEOUT].rejected = true;
  }
  if (cfg->rnr_retry == 7) {
    mcp_param_format_origin(&cfg->origin[MCP_PARAM_RNR_RETRY], where, sizeof(where));
    fail(ld,
         "MCPNET_RNR_RETRY=7 (%s) means retrying receiver-not-ready NAKs forever: a peer that "
         "stops posting receives would hang the job. Set MCPNET_ALLOW_INFINITE_RETRY=1 to allow "
         "it, or use 0..6",
         where);
    set_default(cfg, &defs[MCP_PARAM_RNR_RETRY]);
    cfg->origin[MCP_PARAM_RNR_RETRY].rejected = true;
  }
}

static int family_of(const char *name, int unset)
{
  if (name == NULL)
    return unset;
  return strcasecmp(name, "AF_INET6") == 0 ? AF_INET6 : AF_INET;
}

/* Values other modules would otherwise parse again; the checks already passed. */
static void derive(struct mcp_config *cfg)
{
  cfg->ib_af = family_of(cfg->ib_addr_family, AF_INET);
  cfg->socket_af = family_of(cfg->socket_family, AF_UNSPEC);
  cfg->oob_port_lo = cfg->oob_port_hi = 0;
  if (cfg->oob_port_range != NULL) {
    int n = sscanf(cfg->oob_port_range, "%d-%d", &cfg->oob_port_lo, &cfg->oob_port_hi);
    if (n == 1)
      cfg->oob_port_hi = cfg->oob_port_lo; /* a single port */
    else if (n != 2)
      cfg->oob_port_lo = cfg->oob_port_hi = 0;
  }
}

static void log_time_to_error(struct loader *ld)
{
  const struct mcp_config *cfg = ld->cfg;
  double tte = mcp_param_time_to_error_s(cfg->ib_timeout, cfg->ib_retry_cnt);
  double rnr = mcp_param_rnr_bound_s(cfg->min_rnr_timer, cfg->rnr_retry);
  bool timeout_default = cfg->origin[MCP_PARAM_IB_TIMEOUT].source == MCP_PARAM_SRC_DEFAULT;
  char qp[512], rn[256], msg[1200];

  if (isinf(tte))
    snprintf(qp, sizeof(qp), "never (NCCL_IB_TIMEOUT=0 is infinite)");
  else
    snprintf(qp, sizeof(qp),
             "after at least %.2f s (NCCL_IB_TIMEOUT=%d: %.3f s per try, NCCL_IB_RETRY_CNT=%d: "
             "%d tries; hardware may take up to ~4x longer)",
             tte, cfg->ib_timeout, mcp_param_time_to_error_s(cfg->ib_timeout, 0), cfg->ib_retry_cnt,
             cfg->ib_retry_cnt + 1);
  if (isinf(rnr))
    snprintf(rn, sizeof(rn), "never (MCPNET_RNR_RETRY=7 is infinite)");
  else
    snprintf(rn, sizeof(rn), "after at least %.2f ms (MCPNET_MIN_RNR_TIMER=%d: %.2f ms x %d tries)",
             rnr * 1000.0, cfg->min_rnr_timer, mcp_param_rnr_timer_ms(cfg->min_rnr_timer),
             cfg->rnr_retry + 1);
  snprintf(msg, sizeof(msg), "QP time to error: an unreachable peer fails %s; RNR NAKs fail %s%s%s", qp, rn,
           timeout_default ? ". NCCL_IB_TIMEOUT is the default for this NCCL: " : "",
           timeout_default ? ld->ib_timeout_why : "");
  emit(ld, NCCL_LOG_INFO, msg);
}

/* The winning layer for one parameter: environment, then NCCL's files, then ours. */
static const struct layer_value *pick(const struct loader *ld, enum mcp_param_id id)
{
  if (ld->envl[id].text != NULL)
    return &ld->envl[id];
  if (ld->nccl[id].text != NULL)
    return &ld->nccl[id];
  if (ld->file[id].text != NULL)
    return &ld->file[id];
  return NULL;
}

int mcp_param_load(struct mcp_config *cfg, const struct mcp_param_env *env, unsigned flags, char *err,
                   size_t errlen)
{
  struct loader *ld;
  const struct layer_value *conf;
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  int rc = 0;

  memset(cfg, 0, sizeof(*cfg));
  for (size_t i = 0; i < n; i++)
    set_default(cfg, &defs[i]);
  derive(cfg);
  if (err != NULL && errlen > 0)
    err[0] = '\0';
  /* Three layers of texts are a few KiB: keep them off a possibly small thread stack. */
  ld = calloc(1, sizeof(*ld));
  if (ld == NULL) {
    if (err != NULL && errlen > 0)
      snprintf(err, errlen, "out of memory loading the configuration");
    return -ENOMEM;
  }
  ld->cfg = cfg;
  ld->env = env;
  /* NCCL changed this default in 2.23: follow the NCCL that loaded us. */
  ld->ib_timeout_default =
    mcp_param_nccl_ib_timeout(env != NULL ? env->nccl_version : 0, env != NULL ? env->nccl_abi : 0,
                              ld->ib_timeout_why, sizeof(ld->ib_timeout_why));
  cfg->ib_timeout = ld->ib_timeout_default;
  ld->err = err;
  ld->errlen = err != NULL ? errlen : 0;

  read_env_layer(ld);
  if (flags & MCP_PARAM_LOAD_NCCL_CONF)
    read_nccl_conf(ld);
  /* The file may itself be named in NCCL's files, which NCCL would have exported. */
  conf = pick(ld, MCP_PARAM_CONFIG);
  if (conf != NULL)
    read_file_layer(ld, conf->text, ld->file, MCP_PARAM_SRC_CONFIG_FILE, &conf->origin);
  if (ld->nomem)
    goto nomem;

  for (size_t i = 0; i < n; i++) {
    const struct layer_value *lv = pick(ld, defs[i].id);

    if (lv != NULL)
      apply(ld, &defs[i], lv);
  }
  check_infinite(ld);
  derive(cfg);
  if (ld->nerr > 0) {
    if (ld->nerr > 1 && ld->errlen > 0) {
      size_t used = strlen(ld->err);

      if (used < ld->errlen)
        snprintf(ld->err + used, ld->errlen - used, " (and %d more invalid settings)", ld->nerr - 1);
    }
    rc = -EINVAL;
    goto out;
  }
  log_time_to_error(ld);
  goto out;

nomem:
  if (ld->errlen > 0)
    snprintf(ld->err, ld->errlen, "out of memory loading the configuration");
  rc = -ENOMEM;
out:
  free(ld);
  return rc;
}

void mcp_param_free(struct mcp_config *cfg)
{
  struct mcp_param_strings *s = cfg->strings_, *next;

  for (; s != NULL; s = next) {
    next = s->next;
    free(s);
  }
  free(cfg->rank_map_parsed);
  memset(cfg, 0, sizeof(*cfg));
}

void mcp_param_log(const struct mcp_config *cfg)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char value[1024], where[512], note[640];

  if (!mcp_log_level_enabled(NCCL_LOG_INFO))
    return;
  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_def *def = &defs[i];
    const struct mcp_param_origin *o = &cfg->origin[def->id];

    mcp_param_format(cfg, def, value, sizeof(value));
    mcp_param_format_origin(o, where, sizeof(where));
    if (o->rejected)
      snprintf(note, sizeof(note), "default; the value from the %s was refused", where);
    else if (o->key != NULL && o->key != def->name)
      snprintf(note, sizeof(note), "%s, set as %s", where, o->key);
    else
      snprintf(note, sizeof(note), "%s", where);
    MCP_INFO(NCCL_ENV, "%s=%s (%s)", def->name, value, note);
  }
}
