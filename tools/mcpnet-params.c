/*
 * mcpnet-params - print mcpnet's configuration reference from the parameter table.
 *
 * `--markdown` writes the table docs/configuration.md carries between its params markers
 * (a test compares them, so the document cannot drift from the code); the default is the
 * same in plain text for a terminal; `--effective` loads the configuration the way
 * the plugin would (plus NCCL's configuration files with `--nccl-conf`) and prints
 * each value with where it came from; `--check` vets an environment before a job
 * starts (an image build, a launcher script): the WARNs the plugin's init would print
 * about it, whether NCCL_NET_PLUGIN and NCCL_NET let NCCL load and use mcpnet at all,
 * and a non-zero exit for a misspelt name, an invalid value or a plugin choice that
 * leaves mcpnet out; with `--json` the same findings as one JSON object. This is the
 * table's only front end; the doctor has its own report.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_json.h"
#include "core/log.h"
#include "core/param.h"

static void usage(FILE *out)
{
  fputs("usage: mcpnet-params [--markdown | --text | --effective | --check [--json]] [--nccl-conf]\n"
        "  --text       the configuration reference as plain text (default)\n"
        "  --markdown   the same as a markdown table (docs/configuration.md's reference)\n"
        "  --effective  the values this environment gives, and where each came from\n"
        "  --check      vet this environment as the plugin's init would, and as NCCL\n"
        "               chooses its plugin: WARN about set NCCL_IB_* variables mcpnet\n"
        "               ignores, misspelt MCPNET_*, NCCL_IB_*, NCCL_NET_* and\n"
        "               NCCL_SOCKET_* names (with the nearest real one), invalid values,\n"
        "               and an NCCL_NET_PLUGIN or NCCL_NET that keeps NCCL from using\n"
        "               mcpnet; exit 1 on any of those but the ignored ones, else 0\n"
        "  --json       with --check: the findings as one JSON object on stdout\n"
        "  --nccl-conf  with --effective or --check: also read NCCL_CONF_FILE or\n"
        "               ~/.nccl.conf, and /etc/nccl.conf, as NCCL does before it loads\n"
        "               the plugin\n"
        "  --version    the mcpnet version and source revision, as the plugin logs them\n",
        out);
}

/* Markdown cells cannot hold a raw '|'; everything else in the table is plain text. */
static void md_cell(const char *s)
{
  for (; *s != '\0'; s++) {
    if (*s == '|')
      fputs("\\|", stdout);
    else
      putchar(*s);
  }
}

static void print_aliases(const struct mcp_param_def *def, const char *sep, int code)
{
  const char *const *a = def->aliases;

  for (int i = 0; a != NULL && a[i] != NULL; i++)
    printf("%s%s%s%s", i > 0 ? sep : "", code ? "`" : "", a[i], code ? "`" : "");
}

static void print_markdown(void)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char dflt[256], range[256];

  puts("| Variable | Aliases | Type | Default | Range | Description |");
  puts("|---|---|---|---|---|---|");
  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_def *def = &defs[i];

    mcp_param_format_default(def, dflt, sizeof(dflt));
    mcp_param_format_range(def, range, sizeof(range));
    printf("| `%s` | ", def->name);
    print_aliases(def, ", ", 1);
    printf(" | %s | ", mcp_param_type_name(def->type));
    md_cell(dflt);
    fputs(" | ", stdout);
    md_cell(range);
    fputs(" | ", stdout);
    md_cell(def->doc);
    puts(" |");
  }
}

static void print_text(void)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char dflt[256], range[256];

  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_def *def = &defs[i];

    mcp_param_format_default(def, dflt, sizeof(dflt));
    mcp_param_format_range(def, range, sizeof(range));
    printf("%s (%s, default %s, range %s)", def->name, mcp_param_type_name(def->type), dflt, range);
    if (def->aliases != NULL) {
      fputs(", alias ", stdout);
      print_aliases(def, ", ", 0);
    }
    printf("\n    %s\n", def->doc);
  }
}

static int print_effective(unsigned flags)
{
  struct mcp_config cfg;
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char err[1024], value[1024], where[512];
  int rc;

  /* The loader's WARNs and its time-to-error line go to stderr, the values to stdout. */
  mcp_log_set_stderr(NCCL_LOG_INFO);
  rc = mcp_param_load(&cfg, NULL, flags, err, sizeof(err));
  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_origin *o = &cfg.origin[defs[i].id];

    mcp_param_format(&cfg, &defs[i], value, sizeof(value));
    mcp_param_format_origin(o, where, sizeof(where));
    printf("%s=%s\t(%s%s%s%s)\n", defs[i].name, value, where,
           o->key != NULL && o->key != defs[i].name ? ", as " : "",
           o->key != NULL && o->key != defs[i].name ? o->key : "",
           o->rejected ? ", REFUSED: the default applies" : "");
  }
  mcp_param_free(&cfg);
  if (rc != 0) {
    fprintf(stderr, "mcpnet-params: invalid configuration: %s\n", err);
    return 1;
  }
  return 0;
}

/* What --check found, kept for --json (its strings copied: findings point into buffers
 * that are gone once the call returns). */
#define MAX_FINDINGS 256
struct found {
  const char *kind;
  bool problem;
  char *name, *value, *nearest, *message;
};

struct check {
  bool json;
  int n;
  struct found f[MAX_FINDINGS];
  int invalid;
};

static char *dup_or_null(const char *s) { return s != NULL ? strdup(s) : NULL; }

static void keep(struct check *ck, const char *kind, bool problem, const char *name, const char *value,
                 const char *nearest, const char *message)
{
  struct found *f;

  if (ck->n >= MAX_FINDINGS)
    return;
  f = &ck->f[ck->n++];
  f->kind = kind;
  f->problem = problem;
  f->name = dup_or_null(name);
  f->value = dup_or_null(value);
  f->nearest = dup_or_null(nearest);
  f->message = dup_or_null(message);
}

static void on_finding(void *arg, const struct mcp_param_finding *f)
{
  static const char *const kinds[] = {[MCP_FIND_UNKNOWN_NAME] = "unknown-name",
                                      [MCP_FIND_IGNORED] = "ignored",
                                      [MCP_FIND_PLUGIN] = "plugin",
                                      [MCP_FIND_NET] = "net",
                                      [MCP_FIND_NOTE] = "note"};

  keep(arg, kinds[f->kind], f->problem, f->name, f->value, f->nearest, f->message);
}

/* The loader's and the scans' messages: stderr as the log prints them, or kept for
 * --json (the loader's WARNs are its invalid values). */
static bool loading;

static void on_report(void *arg, ncclDebugLogLevel level, const char *msg)
{
  struct check *ck = arg;

  if (!ck->json) {
    if (level == NCCL_LOG_WARN)
      MCP_WARN("%s", msg);
    else if (level == NCCL_LOG_INFO && !loading)
      fprintf(stderr, "mcpnet-params: note: %s\n", msg);
    return;
  }
  if (loading && level == NCCL_LOG_WARN) {
    ck->invalid++;
    keep(ck, "invalid-value", true, NULL, NULL, NULL, msg);
  }
}

/* The variable an invalid-value message is about: the rejected parameter whose name
 * (or alias) it starts with. */
static void name_invalid(struct check *ck, const struct mcp_config *cfg)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);

  for (int i = 0; i < ck->n; i++) {
    struct found *f = &ck->f[i];

    if (strcmp(f->kind, "invalid-value") != 0 || f->name != NULL)
      continue;
    for (size_t d = 0; d < n; d++) {
      const char *key = cfg->origin[defs[d].id].key;
      size_t len = key != NULL ? strlen(key) : 0;

      if (cfg->origin[defs[d].id].rejected && len > 0 && strncmp(f->message, key, len) == 0 &&
          f->message[len] == '=') {
        f->name = strdup(key);
        f->value = dup_or_null(getenv(key));
        break;
      }
    }
  }
}

static void json_field(const char *key, const char *value, bool last)
{
  printf("\"%s\": ", key);
  if (value != NULL)
    mcp_json_str(stdout, value);
  else
    fputs("null", stdout);
  fputs(last ? "" : ", ", stdout);
}

static void print_json(const struct check *ck, int nunknown, int nignored, int nselect, bool valid, int rc)
{
  printf("{\"tool\": \"mcpnet-params --check\", \"version\": ");
  mcp_json_str(stdout, mcp_version_text());
  printf(", \"ok\": %s, \"configuration_valid\": %s,\n \"counts\": {\"unknown_names\": %d, "
         "\"ignored\": %d, \"invalid_values\": %d, \"plugin_selection\": %d},\n \"findings\": [",
         rc == 0 ? "true" : "false", valid ? "true" : "false", nunknown, nignored, ck->invalid, nselect);
  for (int i = 0; i < ck->n; i++) {
    const struct found *f = &ck->f[i];

    printf("%s\n  {\"kind\": \"%s\", \"problem\": %s, ", i ? "," : "", f->kind,
           f->problem ? "true" : "false");
    json_field("name", f->name, false);
    json_field("value", f->value, false);
    json_field("nearest", f->nearest, false);
    json_field("message", f->message, true);
    putchar('}');
  }
  puts("]}");
}

/* The environment as the plugin's init would judge it, and as NCCL picks its plugin. */
static int check_env(unsigned flags, bool json)
{
  static struct check ck;
  struct mcp_param_env env = {0};
  struct mcp_config cfg;
  char err[1024];
  int nignored = 0, nunknown, nselect, rc;

  ck.json = json;
  env.report = on_report;
  env.report_arg = &ck;
  env.finding = on_finding;
  env.finding_arg = &ck;
  mcp_log_set_stderr(NCCL_LOG_WARN);
  nunknown = mcp_param_scan_env(&env, &nignored);
  nselect = mcp_param_check_select(&env);
  loading = true;
  rc = mcp_param_load(&cfg, &env, flags, err, sizeof(err));
  loading = false;
  name_invalid(&ck, &cfg);
  mcp_param_free(&cfg);
  if (json) {
    print_json(&ck, nunknown, nignored, nselect, rc == 0, nunknown > 0 || nselect > 0 || rc != 0);
  } else {
    printf("mcpnet-params --check: %d unknown name%s, %d NCCL_IB_* variable%s mcpnet does not act on, "
           "%d plugin selection problem%s, configuration %s\n",
           nunknown, nunknown == 1 ? "" : "s", nignored, nignored == 1 ? "" : "s", nselect,
           nselect == 1 ? "" : "s", rc == 0 ? "valid" : "invalid");
    if (rc != 0)
      fprintf(stderr, "mcpnet-params: invalid configuration: %s\n", err);
  }
  return nunknown > 0 || nselect > 0 || rc != 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
  enum { TEXT, MARKDOWN, EFFECTIVE, CHECK } mode = TEXT;
  unsigned flags = 0;
  bool json = false;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--markdown") == 0) {
      mode = MARKDOWN;
    } else if (strcmp(argv[i], "--text") == 0) {
      mode = TEXT;
    } else if (strcmp(argv[i], "--effective") == 0) {
      mode = EFFECTIVE;
    } else if (strcmp(argv[i], "--check") == 0) {
      mode = CHECK;
    } else if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--nccl-conf") == 0) {
      flags |= MCP_PARAM_LOAD_NCCL_CONF;
    } else if (strcmp(argv[i], "--version") == 0) {
      printf("mcpnet-params: %s\n", mcp_version_text());
      return 0;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "mcpnet-params: unknown option %s\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (json && mode != CHECK) {
    fprintf(stderr, "mcpnet-params: --json goes with --check\n");
    usage(stderr);
    return 2;
  }
  switch (mode) {
  case MARKDOWN: print_markdown(); return 0;
  case EFFECTIVE: return print_effective(flags);
  case CHECK: return check_env(flags, json);
  case TEXT: break;
  }
  print_text();
  return 0;
}
