/*
 * mcp_param_parse.c - text to values and back: integers (decimal or 0x hex), booleans
 * in the spellings people type and the lines of KEY=VALUE files on the way in; values,
 * defaults, ranges and origins as the log, the doctor and the docs print them on the
 * way out. The parsers are strict on purpose: NCCL's strtol-based parsing takes "18s"
 * as 18 and "0x" as 0, and a silently misread timeout is exactly the kind of surprise
 * mcpnet exists to remove. Other modules reuse them for values embedded in larger
 * strings (the rank map's sl=, tc=, pkey=).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/param.h"
#include "core/text.h"

static int digit_value(char c, unsigned base)
{
  int v;

  if (c >= '0' && c <= '9')
    v = c - '0';
  else if (c >= 'a' && c <= 'f')
    v = c - 'a' + 10;
  else if (c >= 'A' && c <= 'F')
    v = c - 'A' + 10;
  else
    return -EINVAL;
  return (unsigned)v < base ? v : -EINVAL;
}

int mcp_param_parse_int(const char *text, long long *out)
{
  const char *p = text;
  unsigned long long mag = 0, limit;
  unsigned base = 10;
  bool neg = false;

  if (*p == '-' || *p == '+')
    neg = *p++ == '-';
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  if (*p == '\0')
    return -EINVAL;
  /* The magnitude a long long of this sign can hold: LLONG_MAX, or one more below 0. */
  limit = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
  for (; *p != '\0'; p++) {
    int d = digit_value(*p, base);

    if (d < 0)
      return -EINVAL;
    if (mag > (limit - (unsigned)d) / base)
      return -ERANGE;
    mag = mag * base + (unsigned)d;
  }
  if (neg)
    *out = mag == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)mag;
  else
    *out = (long long)mag;
  return 0;
}

int mcp_param_parse_bool(const char *text, bool *out)
{
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};

  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
    if (strcasecmp(text, yes[i]) == 0) {
      *out = true;
      return 0;
    }
    if (strcasecmp(text, no[i]) == 0) {
      *out = false;
      return 0;
    }
  }
  return -EINVAL;
}

/* Variable names as a shell would accept them; anything else is a typo worth an error. */
static bool is_key(const char *s)
{
  if (!(isalpha((unsigned char)*s) || *s == '_'))
    return false;
  for (; *s != '\0'; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_'))
      return false;
  return true;
}

int mcp_param_split_line(char *line, char **key, char **value)
{
  char *s = mcp_trim_inplace(line), *eq, *v;
  size_t vlen;

  if (*s == '\0' || *s == '#')
    return 0;
  eq = strchr(s, '=');
  if (eq == NULL)
    return -EINVAL;
  *eq = '\0';
  s = mcp_trim_inplace(s);
  if (!is_key(s))
    return -EINVAL;
  v = mcp_trim_inplace(eq + 1);
  /* Files written for a shell quote their values; the quotes are not part of them. */
  vlen = strlen(v);
  if (vlen >= 2 && (v[0] == '"' || v[0] == '\'') && v[vlen - 1] == v[0]) {
    v[vlen - 1] = '\0';
    v++;
  }
  *key = s;
  *value = v;
  return 1;
}

static const void *cfield(const struct mcp_config *cfg, const struct mcp_param_def *def)
{
  return (const char *)cfg + def->offset;
}

const char *mcp_param_source_name(enum mcp_param_source source)
{
  switch (source) {
  case MCP_PARAM_SRC_DEFAULT: return "default";
  case MCP_PARAM_SRC_CONFIG_FILE: return "config file";
  case MCP_PARAM_SRC_NCCL_CONF: return "NCCL configuration file";
  case MCP_PARAM_SRC_ENV: return "environment";
  }
  return "?";
}

int mcp_param_format_origin(const struct mcp_param_origin *origin, char *buf, size_t len)
{
  const char *name = mcp_param_source_name(origin->source);

  if (origin->path != NULL)
    return snprintf(buf, len, "%s %s:%u", name, origin->path, origin->line);
  return snprintf(buf, len, "%s", name);
}

static int format_int(const struct mcp_param_def *def, long long v, char *buf, size_t len)
{
  /* P_Keys are read in hex everywhere else (ibstat, sysfs); -1 stays readable as "unset". */
  if (def->hex && v >= 0)
    return snprintf(buf, len, "0x%04llx", (unsigned long long)v);
  return snprintf(buf, len, "%lld", v);
}

int mcp_param_format(const struct mcp_config *cfg, const struct mcp_param_def *def, char *buf, size_t len)
{
  const char *s;

  switch (def->type) {
  case MCP_PARAM_INT: return format_int(def, *(const int *)cfield(cfg, def), buf, len);
  case MCP_PARAM_BOOL: return snprintf(buf, len, "%d", *(const bool *)cfield(cfg, def) ? 1 : 0);
  case MCP_PARAM_STRING:
    s = *(const char *const *)cfield(cfg, def);
    return snprintf(buf, len, "%s", s != NULL ? s : "(unset)");
  }
  return snprintf(buf, len, "?");
}

int mcp_param_format_default(const struct mcp_param_def *def, char *buf, size_t len)
{
  switch (def->type) {
  case MCP_PARAM_INT: return format_int(def, def->def, buf, len);
  case MCP_PARAM_BOOL: return snprintf(buf, len, "%d", def->def != 0);
  case MCP_PARAM_STRING: return snprintf(buf, len, "%s", def->def_str != NULL ? def->def_str : "(unset)");
  }
  return snprintf(buf, len, "?");
}

int mcp_param_format_range(const struct mcp_param_def *def, char *buf, size_t len)
{
  char lo[32], hi[32];

  if (def->range_doc != NULL)
    return snprintf(buf, len, "%s", def->range_doc);
  switch (def->type) {
  case MCP_PARAM_INT:
    format_int(def, def->min, lo, sizeof(lo));
    format_int(def, def->max, hi, sizeof(hi));
    return snprintf(buf, len, "%s..%s", lo, hi);
  case MCP_PARAM_BOOL: return snprintf(buf, len, "0 or 1");
  case MCP_PARAM_STRING: return snprintf(buf, len, "any");
  }
  return snprintf(buf, len, "?");
}
