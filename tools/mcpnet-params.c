/*
 * mcpnet-params - print mcpnet's configuration reference from the parameter table.
 *
 * `--markdown` writes the table docs/configuration.md carries between its params markers
 * (a test compares them, so the document cannot drift from the code); the default is the
 * same in plain text for a terminal; `--effective` loads the configuration the way
 * the plugin would (plus NCCL's configuration files with `--nccl-conf`) and prints
 * each value with where it came from; `--check` vets an environment before a job
 * starts (an image build, a launcher script): the WARNs the plugin's init would print
 * about it, and a non-zero exit for a misspelt MCPNET_* name or an invalid value. This
 * is the table's only front end; the doctor has its own report.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mcpnet/log.h"
#include "mcpnet/param.h"

static void usage(FILE *out)
{
  fputs("usage: mcpnet-params [--markdown | --text | --effective | --check] [--nccl-conf]\n"
        "  --text       the configuration reference as plain text (default)\n"
        "  --markdown   the same as a markdown table (docs/configuration.md's reference)\n"
        "  --effective  the values this environment gives, and where each came from\n"
        "  --check      vet this environment as the plugin's init would: WARN about set\n"
        "               NCCL_IB_* variables mcpnet ignores and unknown MCPNET_* names\n"
        "               (with the nearest real one); exit 1 on an unknown MCPNET_* name\n"
        "               or an invalid value, 0 otherwise\n"
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

/* The environment as the plugin's init would judge it; WARNs on stderr, a verdict on stdout. */
static int check_env(unsigned flags)
{
  struct mcp_config cfg;
  char err[1024];
  int nignored = 0, nunknown, rc;

  mcp_log_set_stderr(NCCL_LOG_WARN);
  nunknown = mcp_param_scan_env(NULL, &nignored);
  rc = mcp_param_load(&cfg, NULL, flags, err, sizeof(err));
  mcp_param_free(&cfg);
  printf("mcpnet-params --check: %d unknown MCPNET_* name%s, %d NCCL_IB_* variable%s mcpnet does "
         "not act on, configuration %s\n",
         nunknown, nunknown == 1 ? "" : "s", nignored, nignored == 1 ? "" : "s",
         rc == 0 ? "valid" : "invalid");
  if (rc != 0)
    fprintf(stderr, "mcpnet-params: invalid configuration: %s\n", err);
  return nunknown > 0 || rc != 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
  enum { TEXT, MARKDOWN, EFFECTIVE, CHECK } mode = TEXT;
  unsigned flags = 0;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--markdown") == 0) {
      mode = MARKDOWN;
    } else if (strcmp(argv[i], "--text") == 0) {
      mode = TEXT;
    } else if (strcmp(argv[i], "--effective") == 0) {
      mode = EFFECTIVE;
    } else if (strcmp(argv[i], "--check") == 0) {
      mode = CHECK;
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
  switch (mode) {
  case MARKDOWN: print_markdown(); return 0;
  case EFFECTIVE: return print_effective(flags);
  case CHECK: return check_env(flags);
  case TEXT: break;
  }
  print_text();
  return 0;
}
