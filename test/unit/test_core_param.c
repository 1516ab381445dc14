/*
 * test_core_param.c - the parameter table and its loader: defaults, each layer (config
 * file, NCCL's files, environment) and their precedence, every value syntax, every
 * refusal with the words it must say, and the RC timer arithmetic. The environment is
 * a fake handed in through struct mcp_param_env, and files live in a temp folder, so
 * the test never depends on the machine it runs on.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/log.h"
#include "core/param.h"
#include "core/rankmap.h"

/* A fake environment plus a record of what the loader reported. */
struct fake {
  const char *vars[24][2];
  int nvars;
  char warns[8192];
  int nwarn;
  char infos[4096];
  int ninfo;
  char err[1024];
  struct mcp_param_env env;
  struct mcp_config cfg;
};

static char tmpdir[] = "/tmp/mcp_param_test_XXXXXX";

static const char *fake_getenv(void *arg, const char *name)
{
  struct fake *f = arg;

  for (int i = 0; i < f->nvars; i++)
    if (strcmp(f->vars[i][0], name) == 0)
      return f->vars[i][1];
  return NULL;
}

static void fake_report(void *arg, ncclDebugLogLevel level, const char *msg)
{
  struct fake *f = arg;
  char *buf = level == NCCL_LOG_WARN ? f->warns : f->infos;
  size_t cap = level == NCCL_LOG_WARN ? sizeof(f->warns) : sizeof(f->infos);
  size_t used = strlen(buf);

  snprintf(buf + used, cap - used, "%s\n", msg);
  if (level == NCCL_LOG_WARN)
    f->nwarn++;
  else
    f->ninfo++;
}

static void fake_init(struct fake *f)
{
  memset(f, 0, sizeof(*f));
  f->env.getenv = fake_getenv;
  f->env.getenv_arg = f;
  f->env.report = fake_report;
  f->env.report_arg = f;
  /* Point NCCL's files at places that do not exist unless a test writes them. */
  f->env.home = tmpdir;
  f->env.system_conf = "/nonexistent/mcp_param_test/nccl.conf";
}

static void fake_set(struct fake *f, const char *name, const char *value)
{
  f->vars[f->nvars][0] = name;
  f->vars[f->nvars][1] = value;
  f->nvars++;
}

static int fake_load(struct fake *f, unsigned flags)
{
  return mcp_param_load(&f->cfg, &f->env, flags, f->err, sizeof(f->err));
}

/* Write a file under the temp folder and return its path (a static buffer per slot). */
static const char *write_file(int slot, const char *name, const char *text)
{
  static char paths[4][512];
  FILE *fp;

  snprintf(paths[slot], sizeof(paths[slot]), "%s/%s", tmpdir, name);
  fp = fopen(paths[slot], "w");
  if (fp == NULL) {
    perror(paths[slot]);
    exit(1);
  }
  fputs(text, fp);
  fclose(fp);
  return paths[slot];
}

static bool near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void test_table_is_consistent(void)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char why[256];

  CHECK_EQ_INT(n, MCP_PARAM_COUNT);
  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_def *d = &defs[i];

    CHECK_EQ_INT(d->id, i);
    CHECK(d->name != NULL && d->doc != NULL && d->doc[0] != '\0');
    CHECK(strchr(d->doc, '\n') == NULL);
    CHECK(mcp_param_find(d->name) == d);
    for (const char *const *a = d->aliases; a != NULL && *a != NULL; a++)
      CHECK(mcp_param_find(*a) == d);
    for (size_t j = 0; j < i; j++)
      CHECK(defs[j].offset != d->offset && strcmp(defs[j].name, d->name) != 0);
    /* Every default must pass its own checks, or a clean environment would fail. */
    if (d->type == MCP_PARAM_INT) {
      CHECK(d->def >= d->min && d->def <= d->max);
      CHECK(d->check_int == NULL || d->check_int(d->def, why, sizeof(why)) == 0);
    }
    if (d->type == MCP_PARAM_STRING && d->def_str != NULL && d->check_str != NULL)
      CHECK(d->check_str(d->def_str, why, sizeof(why)) == 0);
  }
  CHECK(mcp_param_find("NCCL_IB_NOPE") == NULL);
}

static void test_defaults(void)
{
  struct fake f;

  fake_init(&f);
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_STR(f.err, "");
  CHECK_EQ_INT(f.nwarn, 0);
  CHECK(f.cfg.ib_hca == NULL);
  CHECK_EQ_INT(f.cfg.ib_gid_index, -1);
  CHECK_EQ_INT(f.cfg.ib_roce_version, 2);
  CHECK_EQ_STR(f.cfg.ib_addr_family, "AF_INET");
  CHECK(f.cfg.ib_addr_range == NULL);
  /* NCCL's default since 2.23; the NCCL era (below) can lower it to 18. */
  CHECK_EQ_INT(f.cfg.ib_timeout, 20);
  CHECK_EQ_INT(f.cfg.ib_retry_cnt, 7);
  CHECK_EQ_INT(f.cfg.ib_sl, -1);
  CHECK_EQ_INT(f.cfg.ib_tc, -1);
  CHECK_EQ_INT(f.cfg.ib_pkey_index, 0);
  CHECK_EQ_INT(f.cfg.ib_qps_per_conn, 1);
  CHECK(f.cfg.socket_ifname == NULL && f.cfg.socket_family == NULL);
  CHECK(f.cfg.rank_map == NULL);
  CHECK_EQ_INT(f.cfg.local_rank, -1);
  CHECK(f.cfg.strict);
  CHECK_EQ_INT(f.cfg.tenant_pkey, -1);
  CHECK_EQ_INT(f.cfg.mtu, 0);
  CHECK_EQ_INT(f.cfg.rnr_retry, 6);
  CHECK_EQ_INT(f.cfg.min_rnr_timer, 12);
  CHECK(!f.cfg.allow_infinite_retry);
  CHECK(f.cfg.oob_port_range == NULL);
  CHECK_EQ_INT(f.cfg.oob_port_lo, 0);
  CHECK_EQ_INT(f.cfg.connect_timeout_s, 30);
  CHECK_EQ_INT(f.cfg.recovery_timeout_s, 30);
  CHECK_EQ_INT(f.cfg.watchdog_s, 300);
  CHECK(!f.cfg.abort_on_error && !f.cfg.force_flush);
  CHECK_EQ_INT(f.cfg.progress_cpu, -1);
  CHECK_EQ_INT(f.cfg.inline_bytes, 64);
  CHECK(f.cfg.config_path == NULL);
  CHECK_EQ_INT(f.cfg.ib_af, AF_INET);
  CHECK_EQ_INT(f.cfg.socket_af, AF_UNSPEC);
  for (int i = 0; i < MCP_PARAM_COUNT; i++) {
    CHECK_EQ_INT(f.cfg.origin[i].source, MCP_PARAM_SRC_DEFAULT);
    CHECK(!f.cfg.origin[i].rejected);
  }
  /* A successful load states the time to error once. */
  CHECK_EQ_INT(f.ninfo, 1);
  CHECK(strstr(f.infos, "34.36 s") != NULL);
  CHECK(strstr(f.infos, "NCCL_IB_TIMEOUT is the default for this NCCL: 20, NCCL's default since 2.23") !=
        NULL);
  CHECK(strstr(f.infos, "4x") != NULL);
  CHECK(strstr(f.infos, "4.48 ms") != NULL);
  mcp_param_free(&f.cfg);
}

static void test_env_override(void)
{
  struct fake f;
  char buf[128];

  fake_init(&f);
  fake_set(&f, "NCCL_IB_TIMEOUT", "20");
  fake_set(&f, "NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1");
  fake_set(&f, "NCCL_IB_ADDR_FAMILY", "AF_INET6");
  fake_set(&f, "NCCL_SOCKET_FAMILY", "AF_INET");
  fake_set(&f, "MCPNET_OOB_PORT_RANGE", "40000-40100");
  fake_set(&f, "NCCL_IB_SL", "");            /* empty means unset, as in NCCL */
  fake_set(&f, "MCPNET_LOCAL_RANK", " 3\t"); /* whitespace from YAML or quoting is trimmed */
  fake_set(&f, "NCCL_IB_TC", "  ");          /* and blank is unset */
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.nwarn, 0);
  CHECK_EQ_INT(f.cfg.ib_timeout, 20);
  CHECK_EQ_STR(f.cfg.ib_hca, "=mlx5_0:1,mlx5_1:1");
  CHECK_EQ_INT(f.cfg.ib_af, AF_INET6);
  CHECK_EQ_INT(f.cfg.socket_af, AF_INET);
  CHECK_EQ_INT(f.cfg.oob_port_lo, 40000);
  CHECK_EQ_INT(f.cfg.oob_port_hi, 40100);
  CHECK_EQ_INT(f.cfg.ib_sl, -1);
  CHECK_EQ_INT(f.cfg.local_rank, 3);
  CHECK_EQ_INT(f.cfg.ib_tc, -1);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_TIMEOUT].source, MCP_PARAM_SRC_ENV);
  CHECK_EQ_STR(f.cfg.origin[MCP_PARAM_IB_TIMEOUT].key, "NCCL_IB_TIMEOUT");
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_SL].source, MCP_PARAM_SRC_DEFAULT);
  CHECK(strstr(f.infos, "34.36 s") != NULL);
  mcp_param_format_origin(&f.cfg.origin[MCP_PARAM_IB_TIMEOUT], buf, sizeof(buf));
  CHECK_EQ_STR(buf, "environment");
  mcp_param_free(&f.cfg);
  CHECK(f.cfg.ib_hca == NULL && f.cfg.strings_ == NULL);
}

static void test_aliases(void)
{
  struct fake f;
  char buf[64];

  fake_init(&f);
  fake_set(&f, "MCPNET_PKEY", "0x8001");
  fake_set(&f, "MCPNET_WATCHDOG_SECONDS", "60");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.tenant_pkey, 0x8001);
  CHECK_EQ_INT(f.cfg.watchdog_s, 60);
  CHECK_EQ_STR(f.cfg.origin[MCP_PARAM_TENANT_PKEY].key, "MCPNET_PKEY");
  mcp_param_format(&f.cfg, mcp_param_find("MCPNET_PKEY"), buf, sizeof(buf));
  CHECK_EQ_STR(buf, "0x8001");
  mcp_param_free(&f.cfg);

  /* The canonical name wins over an alias, and the conflict is pointed out. */
  fake_set(&f, "MCPNET_TENANT_PKEY", "0x7fff");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.tenant_pkey, 0x7fff);
  CHECK_EQ_STR(f.cfg.origin[MCP_PARAM_TENANT_PKEY].key, "MCPNET_TENANT_PKEY");
  CHECK_EQ_INT(f.nwarn, 1);
  CHECK(strstr(f.warns, "MCPNET_PKEY=0x8001") != NULL);
  mcp_param_free(&f.cfg);

  /* An error through an alias names the canonical variable as well. */
  fake_init(&f);
  fake_set(&f, "MCPNET_PKEY", "0x10000");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(strstr(f.err, "MCPNET_PKEY=0x10000 (environment, alias of MCPNET_TENANT_PKEY)") != NULL);
  CHECK(strstr(f.err, "-1..0xffff") != NULL);
  mcp_param_free(&f.cfg);
}

static void test_int_syntax(void)
{
  long long v = 0;

  CHECK_EQ_INT(mcp_param_parse_int("0", &v), 0);
  CHECK_EQ_INT(v, 0);
  CHECK_EQ_INT(mcp_param_parse_int("-1", &v), 0);
  CHECK_EQ_INT(v, -1);
  CHECK_EQ_INT(mcp_param_parse_int("+42", &v), 0);
  CHECK_EQ_INT(v, 42);
  CHECK_EQ_INT(mcp_param_parse_int("0x1F", &v), 0);
  CHECK_EQ_INT(v, 31);
  CHECK_EQ_INT(mcp_param_parse_int("0XfFfF", &v), 0);
  CHECK_EQ_INT(v, 0xffff);
  CHECK_EQ_INT(mcp_param_parse_int("010", &v), 0); /* decimal, never octal */
  CHECK_EQ_INT(v, 10);
  CHECK_EQ_INT(mcp_param_parse_int("-9223372036854775808", &v), 0);
  CHECK(v == (-9223372036854775807LL - 1));
  CHECK_EQ_INT(mcp_param_parse_int("9223372036854775808", &v), -ERANGE);
  CHECK_EQ_INT(mcp_param_parse_int("0x10000000000000000", &v), -ERANGE);
  CHECK_EQ_INT(mcp_param_parse_int("", &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_int("-", &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_int("0x", &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_int("0x0x1", &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_int("18s", &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_int("1e3", &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_int(" 1", &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_int("0xg", &v), -EINVAL);
}

static void test_hex_values(void)
{
  struct fake f;

  fake_init(&f);
  fake_set(&f, "NCCL_IB_TC", "0x60");
  fake_set(&f, "MCPNET_TENANT_PKEY", "0xFFFF");
  fake_set(&f, "NCCL_IB_PKEY", "0x2");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_tc, 96);
  CHECK_EQ_INT(f.cfg.tenant_pkey, 0xffff);
  CHECK_EQ_INT(f.cfg.ib_pkey_index, 2);
  mcp_param_free(&f.cfg);
}

static void test_bool_forms(void)
{
  static const char *const truthy[] = {"1", "true", "TRUE", "yes", "Yes", "on", "ON"};
  static const char *const falsy[] = {"0", "false", "False", "no", "NO", "off", "Off"};
  struct fake f;
  bool b;

  for (size_t i = 0; i < sizeof(truthy) / sizeof(truthy[0]); i++) {
    CHECK(mcp_param_parse_bool(truthy[i], &b) == 0 && b);
    CHECK(mcp_param_parse_bool(falsy[i], &b) == 0 && !b);
  }
  CHECK_EQ_INT(mcp_param_parse_bool("2", &b), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_bool("y", &b), -EINVAL);
  CHECK_EQ_INT(mcp_param_parse_bool("", &b), -EINVAL);

  fake_init(&f);
  fake_set(&f, "MCPNET_STRICT", "off");
  fake_set(&f, "MCPNET_ABORT_ON_ERROR", "Yes");
  fake_set(&f, "MCPNET_FORCE_FLUSH", "true");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK(!f.cfg.strict && f.cfg.abort_on_error && f.cfg.force_flush);
  mcp_param_free(&f.cfg);

  /* NCCL's own on/off integers take any integer, as NCCL reads them: 2 is on. */
  fake_init(&f);
  fake_set(&f, "NCCL_IB_MERGE_NICS", "2");
  fake_set(&f, "NCCL_IB_MERGE_VFS", "0");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK(f.cfg.ib_merge_nics && !f.cfg.ib_merge_vfs);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "MCPNET_STRICT", "maybe");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(strstr(f.err, "MCPNET_STRICT=maybe (environment) is not a boolean") != NULL);
  CHECK(f.cfg.strict);
  mcp_param_free(&f.cfg);
}

static void test_out_of_range(void)
{
  struct fake f;

  fake_init(&f);
  fake_set(&f, "NCCL_IB_RETRY_CNT", "15");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK_EQ_STR(f.err,
               "NCCL_IB_RETRY_CNT=15 (environment) is out of range 0..7: "
               "the IB retry counter is 3 bits");
  CHECK_EQ_INT(f.nwarn, 1);
  CHECK_EQ_INT(f.ninfo, 0); /* no time-to-error line for a refused configuration */
  CHECK_EQ_INT(f.cfg.ib_retry_cnt, 7);
  CHECK(f.cfg.origin[MCP_PARAM_IB_RETRY_CNT].rejected);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_RETRY_CNT].source, MCP_PARAM_SRC_ENV);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "NCCL_IB_GID_INDEX", "-2");
  fake_set(&f, "MCPNET_MTU", "1500");
  fake_set(&f, "NCCL_IB_QPS_PER_CONNECTION", "0");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK_EQ_INT(f.nwarn, 3); /* one WARN per bad value, not just the first */
  CHECK(strstr(f.warns, "NCCL_IB_GID_INDEX=-2 (environment) is out of range -1..1023") != NULL);
  CHECK(strstr(f.warns, "MCPNET_MTU=1500 (environment) is not allowed: IB path MTUs are") != NULL);
  CHECK(strstr(f.warns, "NCCL_IB_QPS_PER_CONNECTION=0") != NULL);
  CHECK(strstr(f.err, "(and 2 more invalid settings)") != NULL);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "MCPNET_MTU", "4096");
  fake_set(&f, "NCCL_IB_TIMEOUT", "31");
  fake_set(&f, "MCPNET_RECOVERY_TIMEOUT", "0");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.mtu, 4096);
  CHECK_EQ_INT(f.cfg.recovery_timeout_s, 0);
  mcp_param_free(&f.cfg);
}

static void test_garbage(void)
{
  struct fake f;

  fake_init(&f);
  fake_set(&f, "NCCL_IB_TIMEOUT", "18s");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(strstr(f.err, "NCCL_IB_TIMEOUT=18s (environment) is not an integer") != NULL);
  CHECK(strstr(f.err, "0..31") != NULL);
  CHECK_EQ_INT(f.cfg.ib_timeout, 20);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "MCPNET_WATCHDOG_SEC", "99999999999999999999");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(strstr(f.err, "is out of range 0..86400") != NULL);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "NCCL_IB_ADDR_FAMILY", "inet6");
  fake_set(&f, "NCCL_IB_ADDR_RANGE", "10.1.0.0");
  fake_set(&f, "MCPNET_OOB_PORT_RANGE", "5000-4000");
  fake_set(&f, "NCCL_SOCKET_FAMILY", "AF_UNIX");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK_EQ_INT(f.nwarn, 4);
  CHECK(strstr(f.warns, "NCCL_IB_ADDR_FAMILY=inet6 (environment) must be AF_INET or AF_INET6") != NULL);
  CHECK(strstr(f.warns, "NCCL_IB_ADDR_RANGE=10.1.0.0 (environment) is not a CIDR") != NULL);
  CHECK(strstr(f.warns, "LO 5000 above HI 4000") != NULL);
  CHECK_EQ_STR(f.cfg.ib_addr_family, "AF_INET");
  CHECK(f.cfg.ib_addr_range == NULL && f.cfg.oob_port_range == NULL);
  mcp_param_free(&f.cfg);
}

static void test_string_checks(void)
{
  static const char *const good_cidr[] = {"10.1.0.0/16", "0.0.0.0/0",           "192.168.1.7/32",
                                          "fd00::/64",   "::ffff:10.0.0.0/104", "2001:db8::1/128"};
  static const char *const bad_cidr[] = {"10.1.0.0/33",  "fd00::/129",    "10.1.0/16",   "10.1.0.0/",  "/16",
                                         "10.1.0.0/16x", "10.1.0.0/0x10", "fe80::zz/64", "10.1.0.0/-1"};
  static const char *const good_ports[] = {"1-65535", "40000-40000", "50000-50100", "40000"};
  static const char *const bad_ports[] = {"0-10",   "10-65536", "0",    "a-b",
                                          "40000-", "-1-5",     "1 -2", "0x10-0x20"};
  const struct mcp_param_def *range = mcp_param_find("NCCL_IB_ADDR_RANGE");
  const struct mcp_param_def *ports = mcp_param_find("MCPNET_OOB_PORT_RANGE");
  char why[256];

  for (size_t i = 0; i < sizeof(good_cidr) / sizeof(good_cidr[0]); i++)
    CHECK(range->check_str(good_cidr[i], why, sizeof(why)) == 0);
  for (size_t i = 0; i < sizeof(bad_cidr) / sizeof(bad_cidr[0]); i++) {
    why[0] = '\0';
    CHECK(range->check_str(bad_cidr[i], why, sizeof(why)) == -EINVAL);
    CHECK(why[0] != '\0');
  }
  for (size_t i = 0; i < sizeof(good_ports) / sizeof(good_ports[0]); i++)
    CHECK(ports->check_str(good_ports[i], why, sizeof(why)) == 0);
  for (size_t i = 0; i < sizeof(bad_ports) / sizeof(bad_ports[0]); i++)
    CHECK(ports->check_str(bad_ports[i], why, sizeof(why)) == -EINVAL);
}

static void test_split_line(void)
{
  char l1[] = "  NCCL_IB_HCA = mlx5_0:1  \n", l2[] = "   # comment = x\n", l3[] = " \t\n";
  char l4[] = "NCCL_IB_HCA mlx5_0\n", l5[] = "X=\"quoted value\"\n", l6[] = "1BAD=2";
  char l7[] = "KEY='a'b'", l8[] = "= value";
  char *k, *v;

  CHECK_EQ_INT(mcp_param_split_line(l1, &k, &v), 1);
  CHECK_EQ_STR(k, "NCCL_IB_HCA");
  CHECK_EQ_STR(v, "mlx5_0:1");
  CHECK_EQ_INT(mcp_param_split_line(l2, &k, &v), 0);
  CHECK_EQ_INT(mcp_param_split_line(l3, &k, &v), 0);
  CHECK_EQ_INT(mcp_param_split_line(l4, &k, &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_split_line(l5, &k, &v), 1);
  CHECK_EQ_STR(v, "quoted value");
  CHECK_EQ_INT(mcp_param_split_line(l6, &k, &v), -EINVAL);
  CHECK_EQ_INT(mcp_param_split_line(l7, &k, &v), 1);
  CHECK_EQ_STR(v, "a'b");
  CHECK_EQ_INT(mcp_param_split_line(l8, &k, &v), -EINVAL);
}

static void test_config_file(void)
{
  struct fake f;
  const char *path;
  char buf[700], want[700];

  path = write_file(0, "good.conf",
                    "# mcpnet settings for this pod\n"
                    "\n"
                    "  NCCL_IB_TIMEOUT = 20\n"
                    "NCCL_IB_RETRY_CNT=5\n"
                    "MCPNET_RANK_MAP=\"0-3=mlx5_0:1;4-7=mlx5_1:1\"\n"
                    "MCPNET_PKEY=0x8002\n"
                    "\tMCPNET_STRICT=no\n");
  fake_init(&f);
  fake_set(&f, "MCPNET_CONFIG", path);
  fake_set(&f, "NCCL_IB_RETRY_CNT", "6"); /* the environment wins over the file */
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.nwarn, 0);
  CHECK_EQ_STR(f.cfg.config_path, path);
  CHECK_EQ_INT(f.cfg.ib_timeout, 20);
  CHECK_EQ_INT(f.cfg.ib_retry_cnt, 6);
  CHECK_EQ_STR(f.cfg.rank_map, "0-3=mlx5_0:1;4-7=mlx5_1:1");
  CHECK_EQ_INT(f.cfg.tenant_pkey, 0x8002);
  CHECK(!f.cfg.strict);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_TIMEOUT].source, MCP_PARAM_SRC_CONFIG_FILE);
  CHECK_EQ_STR(f.cfg.origin[MCP_PARAM_IB_TIMEOUT].path, path);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_TIMEOUT].line, 3);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_RETRY_CNT].source, MCP_PARAM_SRC_ENV);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_CONFIG].source, MCP_PARAM_SRC_ENV);
  mcp_param_format_origin(&f.cfg.origin[MCP_PARAM_IB_TIMEOUT], buf, sizeof(buf));
  snprintf(want, sizeof(want), "config file %s:3", path);
  CHECK_EQ_STR(buf, want);
  mcp_param_free(&f.cfg);

  /* An unknown key is a WARN naming file and line; the load still succeeds. */
  path = write_file(0, "unknown.conf", "NCCL_IB_TIMEOUT=19\nNCCL_IB_TIMOUT=20\n");
  fake_init(&f);
  fake_set(&f, "MCPNET_CONFIG", path);
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.nwarn, 1);
  snprintf(want, sizeof(want), "%s:2: unknown key NCCL_IB_TIMOUT", path);
  CHECK(strstr(f.warns, want) != NULL);
  CHECK_EQ_INT(f.cfg.ib_timeout, 19);
  mcp_param_free(&f.cfg);

  /* A malformed line is an error naming file and line. */
  path = write_file(0, "malformed.conf", "NCCL_IB_TIMEOUT=19\n\nthis is not a setting\n");
  fake_init(&f);
  fake_set(&f, "MCPNET_CONFIG", path);
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  snprintf(want, sizeof(want), "%s:3: malformed line, expected KEY=VALUE: this is not a setting", path);
  CHECK_EQ_STR(f.err, want);
  mcp_param_free(&f.cfg);

  /* A bad value in the file is refused with its file and line. */
  path = write_file(0, "badvalue.conf", "NCCL_IB_SL=16\n");
  fake_init(&f);
  fake_set(&f, "MCPNET_CONFIG", path);
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  snprintf(want, sizeof(want), "NCCL_IB_SL=16 (config file %s:1) is out of range -1..15", path);
  CHECK(strstr(f.err, want) != NULL);
  mcp_param_free(&f.cfg);

  /* ...unless the environment overrides it: only effective values are checked. */
  fake_set(&f, "NCCL_IB_SL", "3");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_sl, 3);
  mcp_param_free(&f.cfg);

  /* A config file that cannot be read is an error, not a silent default. */
  fake_init(&f);
  fake_set(&f, "MCPNET_CONFIG", "/nonexistent/mcpnet.conf");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(strstr(f.err, "MCPNET_CONFIG=/nonexistent/mcpnet.conf (environment) cannot be read") != NULL);
  mcp_param_free(&f.cfg);
}

static void test_nccl_conf(void)
{
  struct fake f;
  const char *sys, *mine, *user;
  char want[700];

  write_file(0, ".nccl.conf",
             "# written by the image\nNCCL_DEBUG=INFO\nNCCL_IB_HCA=mlx5_2\nNCCL_IB_TIMEOUT=22\n"
             "this line NCCL skips\n");
  sys = write_file(1, "etc-nccl.conf", "NCCL_IB_HCA=mlx5_9\nNCCL_IB_GID_INDEX=3\nNCCL_IB_TC=0x68\n");
  mine = write_file(2, "mine.conf", "NCCL_IB_GID_INDEX=5\nMCPNET_INLINE_BYTES=128\n");

  /* Off by default: inside NCCL these files are already in the environment. */
  fake_init(&f);
  f.env.system_conf = sys;
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK(f.cfg.ib_hca == NULL);
  CHECK_EQ_INT(f.cfg.ib_timeout, 20);
  mcp_param_free(&f.cfg);

  /* Asked for: ~/.nccl.conf beats /etc/nccl.conf, both beat our file, the environment beats all. */
  fake_init(&f);
  f.env.system_conf = sys;
  fake_set(&f, "NCCL_IB_TC", "0x60");
  fake_set(&f, "MCPNET_CONFIG", mine);
  CHECK_EQ_INT(fake_load(&f, MCP_PARAM_LOAD_NCCL_CONF), 0);
  CHECK_EQ_STR(f.cfg.ib_hca, "mlx5_2");
  CHECK_EQ_INT(f.cfg.ib_timeout, 22);
  CHECK_EQ_INT(f.cfg.ib_gid_index, 3);
  CHECK_EQ_INT(f.cfg.ib_tc, 0x60);
  CHECK_EQ_INT(f.cfg.inline_bytes, 128);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_HCA].source, MCP_PARAM_SRC_NCCL_CONF);
  snprintf(want, sizeof(want), "%s/.nccl.conf", tmpdir);
  CHECK_EQ_STR(f.cfg.origin[MCP_PARAM_IB_HCA].path, want);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_HCA].line, 3);
  CHECK_EQ_STR(f.cfg.origin[MCP_PARAM_IB_GID_INDEX].path, sys);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_TC].source, MCP_PARAM_SRC_ENV);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_INLINE_BYTES].source, MCP_PARAM_SRC_CONFIG_FILE);
  /* NCCL's files carry NCCL's variables: no WARN for those; the bad line is skipped with one. */
  CHECK_EQ_INT(f.nwarn, 1);
  CHECK(strstr(f.warns, "malformed line skipped") != NULL);
  mcp_param_free(&f.cfg);

  /* NCCL_CONF_FILE replaces ~/.nccl.conf, and may name our file. */
  user = write_file(3, "user-nccl.conf", "NCCL_IB_RETRY_CNT=4\nMCPNET_CONFIG=");
  {
    FILE *fp = fopen(user, "a");

    fputs(mine, fp);
    fputs("\n", fp);
    fclose(fp);
  }
  fake_init(&f);
  f.env.system_conf = sys;
  fake_set(&f, "NCCL_CONF_FILE", user);
  CHECK_EQ_INT(fake_load(&f, MCP_PARAM_LOAD_NCCL_CONF), 0);
  CHECK(f.cfg.ib_hca != NULL && strcmp(f.cfg.ib_hca, "mlx5_9") == 0);
  CHECK_EQ_INT(f.cfg.ib_retry_cnt, 4);
  CHECK_EQ_INT(f.cfg.inline_bytes, 128);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_CONFIG].source, MCP_PARAM_SRC_NCCL_CONF);
  mcp_param_free(&f.cfg);
}

static void test_infinite_retry(void)
{
  struct fake f;

  fake_init(&f);
  fake_set(&f, "NCCL_IB_TIMEOUT", "0");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(strstr(f.err, "NCCL_IB_TIMEOUT=0 (environment)") != NULL);
  CHECK(strstr(f.err, "MCPNET_ALLOW_INFINITE_RETRY=1") != NULL);
  CHECK_EQ_INT(f.cfg.ib_timeout, 20);
  CHECK(f.cfg.origin[MCP_PARAM_IB_TIMEOUT].rejected);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "MCPNET_RNR_RETRY", "7");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(strstr(f.err, "MCPNET_RNR_RETRY=7") != NULL);
  CHECK(strstr(f.err, "MCPNET_ALLOW_INFINITE_RETRY=1") != NULL);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "NCCL_IB_TIMEOUT", "0");
  fake_set(&f, "MCPNET_RNR_RETRY", "7");
  fake_set(&f, "MCPNET_ALLOW_INFINITE_RETRY", "on");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_timeout, 0);
  CHECK_EQ_INT(f.cfg.rnr_retry, 7);
  CHECK(strstr(f.infos, "never") != NULL);
  mcp_param_free(&f.cfg);
}

/* NCCL_IB_TIMEOUT's default follows the NCCL that loaded the plugin: 18 before 2.23. */
static void test_timeout_by_nccl_era(void)
{
  struct fake f;
  char why[192];

  CHECK_EQ_INT(mcp_param_nccl_ib_timeout(22203, 8, why, sizeof(why)), 18); /* 2.22.3 */
  CHECK(strstr(why, "NCCL 2.22.3") != NULL);
  CHECK_EQ_INT(mcp_param_nccl_ib_timeout(22304, 8, why, sizeof(why)), 20); /* 2.23.4 took v8 */
  CHECK_EQ_INT(mcp_param_nccl_ib_timeout(0, 8, why, sizeof(why)), 18);
  CHECK(strstr(why, "v8 table") != NULL);
  CHECK_EQ_INT(mcp_param_nccl_ib_timeout(0, 9, why, sizeof(why)), 20);
  CHECK_EQ_INT(mcp_param_nccl_ib_timeout(0, 11, why, sizeof(why)), 20);
  CHECK_EQ_INT(mcp_param_nccl_ib_timeout(0, 0, why, sizeof(why)), 20);

  fake_init(&f);
  f.env.nccl_abi = 8;
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_timeout, 18);
  CHECK_EQ_INT(f.cfg.origin[MCP_PARAM_IB_TIMEOUT].source, MCP_PARAM_SRC_DEFAULT);
  CHECK(strstr(f.infos, "8.59 s (NCCL_IB_TIMEOUT=18:") != NULL);
  CHECK(strstr(f.infos, "NCCL_IB_TIMEOUT is the default for this NCCL: 18, as NCCL took the v8 table") !=
        NULL);
  mcp_param_free(&f.cfg);

  /* A value the user set wins over either default, and a refused one falls back to the era's. */
  fake_init(&f);
  f.env.nccl_abi = 8;
  fake_set(&f, "NCCL_IB_TIMEOUT", "22");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_timeout, 22);
  CHECK(strstr(f.infos, "is the default") == NULL);
  mcp_param_free(&f.cfg);
  fake_init(&f);
  f.env.nccl_abi = 8;
  fake_set(&f, "NCCL_IB_TIMEOUT", "0");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK_EQ_INT(f.cfg.ib_timeout, 18);
  mcp_param_free(&f.cfg);
  fake_init(&f);
  f.env.nccl_abi = 11;
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_timeout, 20);
  mcp_param_free(&f.cfg);
}

/* NCCL accepts NCCL_IB_QPS_PER_CONNECTION above 16 (its arrays hold 128): so does mcpnet. */
static void test_qps_per_connection(void)
{
  struct fake f;
  char why[256];

  fake_init(&f);
  fake_set(&f, "NCCL_IB_QPS_PER_CONNECTION", "32");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.nwarn, 0);
  CHECK_EQ_INT(f.cfg.ib_qps_per_conn, 32);
  mcp_param_free(&f.cfg);
  fake_init(&f);
  fake_set(&f, "NCCL_IB_QPS_PER_CONNECTION", "300");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_qps_per_conn, 300); /* capped per device, with a WARN, at init */
  mcp_param_free(&f.cfg);

  /* The cap: mcpnet's bound, then what the device's CQ holds. */
  CHECK_EQ_INT(mcp_param_qps_cap(4, 128, 4194303, 513, 16, why, sizeof(why)), 4);
  CHECK_EQ_STR(why, "");
  CHECK_EQ_INT(mcp_param_qps_cap(128, 128, 4194303, 513, 16, why, sizeof(why)), 128);
  CHECK_EQ_INT(mcp_param_qps_cap(300, 128, 4194303, 513, 16, why, sizeof(why)), 128);
  CHECK(strstr(why, "128 QPs per connection is mcpnet's bound") != NULL);
  /* soft-RoCE: 32767 CQ entries, 513 per QP: 63 QPs fit (63 * 513 + 16 = 32335). */
  CHECK_EQ_INT(mcp_param_qps_cap(100, 128, 32767, 513, 16, why, sizeof(why)), 63);
  CHECK(strstr(why,
               "63 QPs per connection fill this device's completion queue: it holds at most "
               "32767 entries (ibv_device_attr.max_cqe) and mcpnet needs 513 per QP") != NULL);
  CHECK_EQ_INT(mcp_param_qps_cap(63, 128, 32767, 513, 16, why, sizeof(why)), 63);
  CHECK_EQ_STR(why, "");
  CHECK_EQ_INT(mcp_param_qps_cap(64, 128, 32767, 513, 16, why, sizeof(why)), 63);
  CHECK_EQ_INT(mcp_param_qps_cap(2, 128, 100, 513, 16, why, sizeof(why)), 1);
}

/* Set NCCL_IB_* variables mcpnet does not act on, and MCPNET_* names that do not exist. */
static void test_scan_env(void)
{
  struct fake f;
  int d, nign = -1;
  char *envp[] = {
    "PATH=/usr/bin",
    "NCCL_IB_AR_THRESHOLD=0",
    "NCCL_IB_HCA=mlx5_0", /* read by mcpnet */
    "NCCL_IB_USE_INLINE=1",
    "NCCL_IB_ECE_ENABLE=",  /* empty: unset, as NCCL reads it */
    "NCCL_IB_FROBNICATE=1", /* not even NCCL's */
    "MCPNET_STRIKT=0",
    "MCPNET_WATCHDOG_SECONDS=60", /* an alias: known */
    "MCPNET_RECOVERY_TIMEOUT=5",
    "MCPNET_BUILD_DIR=/tmp/b", /* the lab harness's own */
    "MCPNET_INLINE_BYTE=2",
    "MCPNET_CTS_BATCH=4", /* retired */
    NULL,
  };

  CHECK_EQ_STR(mcp_param_nearest("MCPNET_STRIKT", &d), "MCPNET_STRICT");
  CHECK_EQ_INT(d, 1);
  CHECK_EQ_STR(mcp_param_nearest("MCPNET_RECOVERY_TIMOUT", &d), "MCPNET_RECOVERY_TIMEOUT");
  CHECK_EQ_STR(mcp_param_nearest("MCPNET_WATCHDOG_SECS", &d), "MCPNET_WATCHDOG_SEC");
  CHECK_EQ_STR(mcp_param_nearest("MCPNET_WATCHDOG_SECONDZ", &d), "MCPNET_WATCHDOG_SECONDS");
  CHECK_EQ_STR(mcp_param_nearest("MCPNET_INLINE", &d), "MCPNET_INLINE_BYTES");
  CHECK_EQ_STR(mcp_param_nearest("MCPNET_STRICT", &d), "MCPNET_STRICT");
  CHECK_EQ_INT(d, 0);
  CHECK(mcp_param_nccl_reads("NCCL_IB_AR_THRESHOLD"));
  CHECK(mcp_param_nccl_reads("NCCL_IB_TIMEOUT"));
  CHECK(!mcp_param_nccl_reads("NCCL_IB_FROBNICATE"));
  CHECK(!mcp_param_nccl_reads("MCPNET_STRICT"));
  for (const struct mcp_param_nccl_var *v = mcp_param_nccl_list(MCP_NCCL_IB_IGNORED); v->name != NULL; v++)
    CHECK(mcp_param_find(v->name) == NULL); /* ignored means: no row of the table */
  for (const struct mcp_param_nccl_var *v = mcp_param_nccl_list(MCP_NCCL_OWN); v->name != NULL; v++)
    CHECK(mcp_param_find(v->name) == NULL && mcp_param_nccl_family(v->name));

  fake_init(&f);
  f.env.envp = envp;
  CHECK_EQ_INT(mcp_param_scan_env(&f.env, &nign), 3); /* the retired name is no unknown one */
  CHECK_EQ_INT(nign, 2);
  CHECK_EQ_INT(f.nwarn, 5);
  CHECK(strstr(f.warns,
               "MCPNET_STRIKT=0 (environment) is not an mcpnet variable and is ignored; "
               "the nearest one is MCPNET_STRICT") != NULL);
  CHECK(strstr(f.warns,
               "MCPNET_INLINE_BYTE=2 (environment) is not an mcpnet variable and is ignored; "
               "the nearest one is MCPNET_INLINE_BYTES") != NULL);
  CHECK(strstr(f.warns,
               "MCPNET_CTS_BATCH=4 (environment) was retired and is ignored: every receive's "
               "clear-to-send is now written by the irecv that accepted it") != NULL);
  /* Each with its reason (issue 37). */
  CHECK(
    strstr(f.warns,
           "mcpnet does not act on them (NCCL's own IB transport would): "
           "NCCL_IB_AR_THRESHOLD (mcpnet does not split large writes for adaptive routing); "
           "NCCL_IB_USE_INLINE (mcpnet inlines small messages itself (MCPNET_INLINE_BYTES)). The README") !=
    NULL);
  /* NCCL 2.30's FIFO traffic class and modify-QP retries are parameters, not ignored. */
  CHECK(mcp_param_find("NCCL_IB_FIFO_TC") != NULL);
  CHECK(mcp_param_find("NCCL_IB_MQP_RETRY_ALL") != NULL);
  CHECK(mcp_param_find("NCCL_IB_MQP_RETRY_CNT") != NULL);
  CHECK(mcp_param_find("NCCL_IB_MQP_RETRY_SLEEP_MSEC") != NULL);
  CHECK(mcp_param_nccl_lookup("NCCL_IB_FIFO_TC", NULL) == NULL);
  /* Every other variable of 2.29-2.30 the brief names is ignored with a reason. */
  {
    static const char *const later[] = {"NCCL_IB_OOO_RQ", "NCCL_IB_SUBNET_AWARE_ROUTING",
                                        "NCCL_IB_SUBNET_PREFIX_LEN", "NCCL_IB_DATA_DIRECT",
                                        "NCCL_IB_RETURN_ASYNC_EVENTS"};
    enum mcp_param_nccl_kind kind;

    for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++) {
      const struct mcp_param_nccl_var *v = mcp_param_nccl_lookup(later[i], &kind);
      CHECK(v != NULL && kind == MCP_NCCL_IB_IGNORED && v->why != NULL);
    }
  }
  /* Not even NCCL's, and nothing close: said so, without a guess. */
  CHECK(strstr(f.warns,
               "NCCL_IB_FROBNICATE=1 (environment) is a variable neither NCCL 2.20-2.30 nor mcpnet "
               "reads, so it changes nothing (no known name is close to it)") != NULL);
  CHECK(strstr(f.warns, "NCCL_IB_HCA") == NULL);
  CHECK(strstr(f.warns, "ECE") == NULL);
  CHECK(strstr(f.warns, "WATCHDOG") == NULL);
  CHECK(strstr(f.warns, "BUILD_DIR") == NULL);

  /* A clean environment says nothing. */
  char *clean[] = {"NCCL_IB_HCA=mlx5_0", "MCPNET_STRICT=1", NULL};
  fake_init(&f);
  f.env.envp = clean;
  CHECK_EQ_INT(mcp_param_scan_env(&f.env, &nign), 0);
  CHECK_EQ_INT(nign, 0);
  CHECK_EQ_INT(f.nwarn, 0);
}

/* What a finding callback saw, for the structured side of the scans. */
struct seen {
  int n, problems;
  char names[1024], nearest[1024];
  enum mcp_param_finding_kind kinds[32];
};

static void seen_finding(void *arg, const struct mcp_param_finding *fd)
{
  struct seen *s = arg;
  size_t used = strlen(s->names), nused = strlen(s->nearest);

  if (s->n < 32)
    s->kinds[s->n] = fd->kind;
  s->n++;
  s->problems += fd->problem;
  snprintf(s->names + used, sizeof(s->names) - used, "%s=%s ", fd->name, fd->value ? fd->value : "(unset)");
  snprintf(s->nearest + nused, sizeof(s->nearest) - nused, "%s ", fd->nearest ? fd->nearest : "-");
}

/* Misspelt NCCL names get the nearest NCCL name; values equal to NCCL's default say
 * nothing (NCCL_IB_DISABLE=0 is in many images: one WARN at every init was noise). */
static void test_scan_nccl_names(void)
{
  struct fake f;
  struct seen s;
  int d, nign = -1;
  char *envp[] = {
    "NCCL_IB_GID_INDX=3",     /* NCCL_IB_GID_INDEX, one of mcpnet's rows */
    "NCCL_NET_PLUGN=mcp",     /* NCCL_NET_PLUGIN, NCCL's own */
    "NCCL_SOCKET_IFNAM=eth0", /* NCCL_SOCKET_IFNAME, one of mcpnet's rows */
    "NCCL_NET_GDR_LEVL=PHB",  /* NCCL_NET_GDR_LEVEL, NCCL's own */
    "NCCL_IB_DISABLE=0",      /* NCCL's default: silent */
    "NCCL_IB_ECE_ENABLE=00",  /* 0, not NCCL's default 1: WARN */
    "NCCL_IB_SPLIT_DATA_ON_QPS=0",
    "NCCL_SOCKET_NTHREADS=4", /* NCCL's own, known: silent */
    "NCCL_NET_GDR_LEVEL=PHB",
    "NCCL_NET=MCP",
    "NCCL_DEBUG=INFO", /* not a family mcpnet judges */
    NULL,
  };

  CHECK_EQ_STR(mcp_param_nearest("NCCL_IB_GID_INDX", &d), "NCCL_IB_GID_INDEX");
  CHECK_EQ_INT(d, 1);
  CHECK_EQ_STR(mcp_param_nearest("NCCL_NET_PLUGN", &d), "NCCL_NET_PLUGIN");
  CHECK_EQ_STR(mcp_param_nearest("NCCL_SOCKET_IFNAM", &d), "NCCL_SOCKET_IFNAME");
  CHECK_EQ_INT(d, 1); /* cut short: one edit from its completion */
  CHECK_EQ_STR(mcp_param_nearest("NCCL_IB_TIMOUT", &d), "NCCL_IB_TIMEOUT");
  /* An NCCL name is never "corrected" to one of mcpnet's own. */
  CHECK(strncmp(mcp_param_nearest("NCCL_IB_STRICT", &d), "NCCL_", 5) == 0);
  CHECK(mcp_param_near_enough(1, 16));
  CHECK(!mcp_param_near_enough(0, 16));
  CHECK(!mcp_param_near_enough(2, 3));
  CHECK(!mcp_param_near_enough(8, 18));
  CHECK(mcp_param_nccl_family("NCCL_NET"));
  CHECK(mcp_param_nccl_family("NCCL_SOCKET_NTHREADS"));
  CHECK(!mcp_param_nccl_family("NCCL_NETDEVS_POLICY"));
  CHECK(!mcp_param_nccl_family("NCCL_DEBUG"));
  CHECK(mcp_param_nccl_reads("NCCL_IB_DISABLE"));
  CHECK(mcp_param_nccl_reads("NCCL_SOCKET_IFNAME"));
  CHECK(mcp_param_nccl_reads("NCCL_NET_PLUGIN"));
  CHECK(!mcp_param_nccl_reads("NCCL_IB_GID_INDX"));

  fake_init(&f);
  memset(&s, 0, sizeof(s));
  f.env.envp = envp;
  f.env.finding = seen_finding;
  f.env.finding_arg = &s;
  CHECK_EQ_INT(mcp_param_scan_env(&f.env, &nign), 4);
  CHECK_EQ_INT(nign, 1);
  CHECK(strstr(f.warns,
               "NCCL_IB_GID_INDX=3 (environment) is a variable neither NCCL 2.20-2.30 nor mcpnet reads, "
               "so it changes nothing; did you mean NCCL_IB_GID_INDEX?") != NULL);
  CHECK(strstr(f.warns, "NCCL_NET_PLUGN=mcp (environment) is a variable neither") != NULL);
  CHECK(strstr(f.warns, "did you mean NCCL_NET_PLUGIN?") != NULL);
  CHECK(strstr(f.warns, "did you mean NCCL_SOCKET_IFNAME?") != NULL);
  CHECK(strstr(f.warns, "did you mean NCCL_NET_GDR_LEVEL?") != NULL);
  CHECK(strstr(f.warns,
               "(NCCL's own IB transport would): NCCL_IB_ECE_ENABLE (mcpnet negotiates no ECE "
               "(plain verbs)). The") != NULL);
  CHECK(strstr(f.warns, "NCCL_IB_DISABLE") == NULL);
  CHECK(strstr(f.warns, "SPLIT_DATA") == NULL);
  CHECK(strstr(f.warns, "NTHREADS") == NULL);
  CHECK(strstr(f.warns, "NCCL_DEBUG") == NULL);
  CHECK_EQ_INT(f.nwarn, 5);
  /* Structured: four unknown names with their nearest, one ignored. */
  CHECK_EQ_INT(s.n, 5);
  CHECK_EQ_INT(s.problems, 4);
  CHECK_EQ_STR(s.names,
               "NCCL_IB_GID_INDX=3 NCCL_NET_PLUGN=mcp NCCL_SOCKET_IFNAM=eth0 NCCL_NET_GDR_LEVL=PHB "
               "NCCL_IB_ECE_ENABLE=00 ");
  CHECK_EQ_STR(s.nearest, "NCCL_IB_GID_INDEX NCCL_NET_PLUGIN NCCL_SOCKET_IFNAME NCCL_NET_GDR_LEVEL - ");
  CHECK(s.kinds[0] == MCP_FIND_UNKNOWN_NAME && s.kinds[4] == MCP_FIND_IGNORED);

  /* A retired name is no typo: its finding guesses no nearest name, and is a note an old
   * image deserves (WARN), not a problem that fails mcpnet-params --check. */
  char *retired[] = {"MCPNET_CTS_BATCH=4", NULL};
  fake_init(&f);
  memset(&s, 0, sizeof(s));
  f.env.envp = retired;
  f.env.finding = seen_finding;
  f.env.finding_arg = &s;
  CHECK_EQ_INT(mcp_param_scan_env(&f.env, &nign), 0);
  CHECK_EQ_INT(s.n, 1);
  CHECK_EQ_INT(s.problems, 0);
  CHECK(s.kinds[0] == MCP_FIND_IGNORED);
  CHECK_EQ_STR(s.names, "MCPNET_CTS_BATCH=4 ");
  CHECK_EQ_STR(s.nearest, "- ");
  CHECK(strstr(f.warns, "MCPNET_CTS_BATCH=4 (environment) was retired and is ignored") != NULL);

  /* Every listed default parses, and a default compares as NCCL reads integers. */
  for (const struct mcp_param_nccl_var *v = mcp_param_nccl_list(MCP_NCCL_IB_IGNORED); v->name != NULL; v++) {
    long long x;

    CHECK(v->dflt == NULL || mcp_param_parse_int(v->dflt, &x) == 0);
    CHECK(!mcp_param_nccl_is_default(v, "garbage"));
  }
  CHECK(mcp_param_nccl_is_default(mcp_param_nccl_lookup("NCCL_IB_DISABLE", NULL), "0"));
  CHECK(mcp_param_nccl_is_default(mcp_param_nccl_lookup("NCCL_IB_RETURN_ASYNC_EVENTS", NULL), "1"));
  CHECK(!mcp_param_nccl_is_default(mcp_param_nccl_lookup("NCCL_IB_DISABLE", NULL), "1"));
  CHECK(!mcp_param_nccl_is_default(mcp_param_nccl_lookup("NCCL_IB_AR_THRESHOLD", NULL), "8192"));
}

/* Runs mcp_param_check_select on one environment; returns its problem count. */
static int select_on(struct fake *f, struct seen *s, char **envp)
{
  fake_init(f);
  memset(s, 0, sizeof(*s));
  f->env.envp = envp;
  f->env.finding = seen_finding;
  f->env.finding_arg = s;
  return mcp_param_check_select(&f->env);
}

/* NCCL_NET_PLUGIN and NCCL_NET decide whether NCCL loads and uses mcpnet at all. */
static void test_check_select(void)
{
  struct fake f;
  struct seen s;

  char *good[] = {"NCCL_NET_PLUGIN=mcp", "NCCL_NET=MCP", NULL};
  CHECK_EQ_INT(select_on(&f, &s, good), 0);
  CHECK_EQ_INT(f.nwarn + f.ninfo + s.n, 0);
  char *lower[] = {"NCCL_NET_PLUGIN=libnccl-net-mcp.so", "NCCL_NET=mcp", NULL}; /* NCCL: strcasecmp */
  CHECK_EQ_INT(select_on(&f, &s, lower), 0);
  CHECK_EQ_INT(f.nwarn, 0);

  /* Unset: a note, not a problem (images that only carry the package). */
  char *unset[] = {"PATH=/usr/bin", NULL};
  CHECK_EQ_INT(select_on(&f, &s, unset), 0);
  CHECK_EQ_INT(f.nwarn, 0);
  CHECK_EQ_INT(f.ninfo, 1);
  CHECK(strstr(f.infos, "NCCL_NET_PLUGIN is not set: NCCL opens libnccl-net.so") != NULL);
  CHECK(s.n == 1 && s.kinds[0] == MCP_FIND_NOTE && s.problems == 0);

  /* Slips of mcp: a transposition, a case, a longer name, a library name. */
  const char *slips[] = {"mpc", "MCP", "mcpnet", "libnccl-net-mpc.so", "mc", NULL};
  for (int i = 0; slips[i] != NULL; i++) {
    char var[128], *env[] = {var, NULL};

    snprintf(var, sizeof(var), "NCCL_NET_PLUGIN=%s", slips[i]);
    CHECK_EQ_INT(select_on(&f, &s, env), 1);
    CHECK(strstr(f.warns, "did you mean mcp?") != NULL);
    CHECK_EQ_STR(s.nearest, "mcp ");
  }
  char *mpc[] = {"NCCL_NET_PLUGIN=mpc", NULL};
  select_on(&f, &s, mpc);
  CHECK(
    strstr(f.warns, "NCCL_NET_PLUGIN=mpc: NCCL opens libnccl-net-mpc.so, not mcpnet's libnccl-net-mcp.so") !=
    NULL);

  /* Another plugin altogether, or none: mcpnet does not run. */
  char *ofi[] = {"NCCL_NET_PLUGIN=ofi", NULL};
  CHECK_EQ_INT(select_on(&f, &s, ofi), 1);
  CHECK(strstr(f.warns, "NCCL_NET_PLUGIN=ofi names no mcpnet: NCCL loads libnccl-net-ofi.so") != NULL);
  char *none[] = {"NCCL_NET_PLUGIN=none", NULL};
  CHECK_EQ_INT(select_on(&f, &s, none), 1);
  CHECK(strstr(f.warns, "NCCL_NET_PLUGIN=none: NCCL 2.27 and later load no plugin at all") != NULL);
  char *gone[] = {"NCCL_NET_PLUGIN=/nonexistent/mcp_param_test/libnccl-net-mcp.so", NULL};
  CHECK_EQ_INT(select_on(&f, &s, gone), 1);
  CHECK(strstr(f.warns, "does not exist here") != NULL);
  /* A list (2.27+) with mcpnet second: notes, no problem. */
  char *list[] = {"NCCL_NET_PLUGIN=ofi,mcp", NULL};
  CHECK_EQ_INT(select_on(&f, &s, list), 0);
  CHECK_EQ_INT(f.nwarn, 0);
  CHECK(strstr(f.infos, "NCCL tries libnccl-net-ofi.so before mcpnet") != NULL);
  CHECK(strstr(f.infos, "is a list, which NCCL 2.27 and later read") != NULL);

  /* NCCL_NET: NCCL's own networks, a slip of MCP, something else. */
  char *ib[] = {"NCCL_NET_PLUGIN=mcp", "NCCL_NET=IB", NULL};
  CHECK_EQ_INT(select_on(&f, &s, ib), 1);
  CHECK(strstr(f.warns, "NCCL_NET=IB selects NCCL's own IB transport: NCCL never initialises mcpnet") !=
        NULL);
  char *sock[] = {"NCCL_NET_PLUGIN=mcp", "NCCL_NET=socket", NULL};
  CHECK_EQ_INT(select_on(&f, &s, sock), 1);
  char *mpcnet[] = {"NCCL_NET_PLUGIN=mcp", "NCCL_NET=MPC", NULL};
  CHECK_EQ_INT(select_on(&f, &s, mpcnet), 1);
  CHECK(strstr(f.warns, "NCCL_NET=MPC names no network NCCL has") != NULL);
  CHECK(strstr(f.warns, "did you mean MCP?") != NULL);
  CHECK_EQ_STR(s.nearest, "MCP ");
  char *other[] = {"NCCL_NET_PLUGIN=mcp", "NCCL_NET=AWS Libfabric", NULL};
  CHECK_EQ_INT(select_on(&f, &s, other), 1);
  CHECK(strstr(f.warns, "NCCL_NET=AWS Libfabric is not mcpnet's network") != NULL);
  /* Both wrong: two problems. */
  char *both[] = {"NCCL_NET_PLUGIN=mpc", "NCCL_NET=IB", NULL};
  CHECK_EQ_INT(select_on(&f, &s, both), 2);
  CHECK_EQ_INT(s.problems, 2);
}

static void test_time_to_error(void)
{
  CHECK(near(mcp_param_time_to_error_s(18, 7), 8.59, 0.005));
  CHECK(near(mcp_param_time_to_error_s(20, 7), 34.36, 0.005));
  CHECK(near(mcp_param_time_to_error_s(14, 0), 0.0671, 0.0001));
  CHECK(near(mcp_param_time_to_error_s(31, 0), 8796.09, 0.01));
  CHECK(isinf(mcp_param_time_to_error_s(0, 7)));
  CHECK(near(mcp_param_rnr_timer_ms(0), 655.36, 1e-9));
  CHECK(near(mcp_param_rnr_timer_ms(1), 0.01, 1e-9));
  CHECK(near(mcp_param_rnr_timer_ms(12), 0.64, 1e-9));
  CHECK(near(mcp_param_rnr_timer_ms(17), 3.84, 1e-9));
  CHECK(near(mcp_param_rnr_timer_ms(31), 491.52, 1e-9));
  CHECK(isnan(mcp_param_rnr_timer_ms(32)));
  CHECK(isnan(mcp_param_rnr_timer_ms(-1)));
  CHECK(near(mcp_param_rnr_bound_s(12, 6), 0.00448, 1e-9));
  CHECK(near(mcp_param_rnr_bound_s(0, 0), 0.65536, 1e-9));
  CHECK(isinf(mcp_param_rnr_bound_s(12, 7)));
  /* The encoding is monotonic after code 0, which wraps to the largest value. */
  for (int c = 2; c < 32; c++)
    CHECK(mcp_param_rnr_timer_ms(c) > mcp_param_rnr_timer_ms(c - 1));
}

static void test_formatting(void)
{
  char buf[128];

  mcp_param_format_default(mcp_param_find("NCCL_IB_HCA"), buf, sizeof(buf));
  CHECK_EQ_STR(buf, "(unset)");
  mcp_param_format_default(mcp_param_find("MCPNET_TENANT_PKEY"), buf, sizeof(buf));
  CHECK_EQ_STR(buf, "-1");
  mcp_param_format_default(mcp_param_find("MCPNET_STRICT"), buf, sizeof(buf));
  CHECK_EQ_STR(buf, "1");
  mcp_param_format_range(mcp_param_find("NCCL_IB_RETRY_CNT"), buf, sizeof(buf));
  CHECK_EQ_STR(buf, "0..7");
  mcp_param_format_range(mcp_param_find("MCPNET_TENANT_PKEY"), buf, sizeof(buf));
  CHECK_EQ_STR(buf, "-1..0xffff");
  mcp_param_format_range(mcp_param_find("NCCL_IB_ADDR_FAMILY"), buf, sizeof(buf));
  CHECK_EQ_STR(buf, "AF_INET|AF_INET6");
  CHECK_EQ_STR(mcp_param_source_name(MCP_PARAM_SRC_ENV), "environment");
  CHECK_EQ_STR(mcp_param_source_name(MCP_PARAM_SRC_DEFAULT), "default");
  CHECK_EQ_STR(mcp_param_type_name(MCP_PARAM_BOOL), "bool");
}

/* mcp_param_log goes through the log bridge: captured as NCCL's logger would get it. */
static void test_log(void)
{
  struct fake f;

  fake_init(&f);
  fake_set(&f, "NCCL_IB_TIMEOUT", "20");
  fake_set(&f, "MCPNET_PKEY", "0x8001");
  fake_set(&f, "NCCL_IB_RETRY_CNT", "9");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  mcp_test_log_clear();
  mcp_log_set_logger(mcp_test_log_capture);
  mcp_param_log(&f.cfg);
  mcp_log_set_logger(NULL);
  CHECK_EQ_INT(mcp_test_log_lines(), MCP_PARAM_COUNT);
  CHECK_EQ_INT(mcp_test_log_count_flags(NCCL_LOG_INFO, NCCL_ENV), MCP_PARAM_COUNT);
  CHECK(strstr(mcp_test_log_text(), "NCCL_IB_TIMEOUT=20 (environment)\n") != NULL);
  CHECK(strstr(mcp_test_log_text(), "NCCL_IB_HCA=(unset) (default)\n") != NULL);
  CHECK(strstr(mcp_test_log_text(), "MCPNET_TENANT_PKEY=0x8001 (environment, set as MCPNET_PKEY)\n") != NULL);
  CHECK(strstr(mcp_test_log_text(),
               "NCCL_IB_RETRY_CNT=7 (default; the value from the environment "
               "was refused)\n") != NULL);
  mcp_param_free(&f.cfg);
}

/* The loader must not keep state between calls: two different loads, interleaved frees. */
static void test_reentrant(void)
{
  struct fake a, b;

  fake_init(&a);
  fake_init(&b);
  fake_set(&a, "NCCL_IB_HCA", "mlx5_0");
  fake_set(&b, "NCCL_IB_HCA", "mlx5_1");
  CHECK_EQ_INT(fake_load(&a, 0), 0);
  CHECK_EQ_INT(fake_load(&b, 0), 0);
  CHECK_EQ_STR(a.cfg.ib_hca, "mlx5_0");
  CHECK_EQ_STR(b.cfg.ib_hca, "mlx5_1");
  mcp_param_free(&a.cfg);
  CHECK_EQ_STR(b.cfg.ib_hca, "mlx5_1");
  mcp_param_free(&b.cfg);
}

static void remove_tmpdir(void)
{
  static const char *const names[] = {"good.conf",  "unknown.conf",  "malformed.conf", "badvalue.conf",
                                      ".nccl.conf", "etc-nccl.conf", "mine.conf",      "user-nccl.conf"};
  char path[600];

  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
    unlink(path);
  }
  rmdir(tmpdir);
}

/* MCPNET_RANK_MAP is parsed once, by the loader, into the typed map the configuration
 * keeps (discovery and the doctor read it there); a refused map leaves neither text nor map. */
static void test_rank_map_parsed_once(void)
{
  struct fake f;
  const struct mcp_rankmap_entry *e;

  fake_init(&f);
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK(f.cfg.rank_map_parsed == NULL);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "MCPNET_RANK_MAP", " 0-3=mlx5_0:1 ; 4-7=mlx5_1:1+mlx5_2,sl=3 ");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK(f.cfg.rank_map_parsed != NULL);
  if (f.cfg.rank_map_parsed != NULL) {
    CHECK_EQ_INT(f.cfg.rank_map_parsed->n, 2);
    e = mcp_rankmap_find(f.cfg.rank_map_parsed, 5);
    CHECK(e != NULL);
    if (e != NULL) {
      CHECK_EQ_INT(e->ndev, 2);
      CHECK_EQ_STR(e->dev[1].name, "mlx5_2");
      CHECK_EQ_INT(e->dev[1].port, -1);
      CHECK_EQ_INT(e->sl, 3);
    }
  }
  mcp_param_free(&f.cfg);
  CHECK(f.cfg.rank_map_parsed == NULL);

  fake_init(&f);
  fake_set(&f, "MCPNET_RANK_MAP", "0-3=mlx5_0;2-5=mlx5_1"); /* overlapping ranks */
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(f.cfg.rank_map == NULL);
  CHECK(f.cfg.rank_map_parsed == NULL);
  CHECK(f.cfg.origin[MCP_PARAM_RANK_MAP].rejected);
  CHECK(strstr(f.warns, "MCPNET_RANK_MAP=0-3=mlx5_0;2-5=mlx5_1 (environment)") != NULL);
  mcp_param_free(&f.cfg);
}

/* The list variables are parsed once, by the loader, into the typed lists discovery and
 * the out-of-band channel use; a malformed list fails the load, naming the bad entry,
 * and leaves the list empty. */
static void test_lists_parsed_once(void)
{
  struct fake f;

  fake_init(&f);
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_hca_list.n, 0);
  CHECK_EQ_INT(f.cfg.socket_ifname_list.n, 0);
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "NCCL_IB_HCA", "^=mlx5_0:1,mlx5_1::3");
  fake_set(&f, "NCCL_SOCKET_IFNAME", "=eth0,ib:5");
  CHECK_EQ_INT(fake_load(&f, 0), 0);
  CHECK_EQ_INT(f.cfg.ib_hca_list.n, 2);
  CHECK(f.cfg.ib_hca_list.exclude && f.cfg.ib_hca_list.exact);
  CHECK_EQ_STR(f.cfg.ib_hca_list.e[1].name, "mlx5_1");
  CHECK_EQ_INT(f.cfg.ib_hca_list.e[0].port, 1);
  CHECK_EQ_INT(f.cfg.ib_hca_list.e[1].rail, 3);
  CHECK_EQ_INT(f.cfg.socket_ifname_list.n, 2);
  CHECK_EQ_STR(f.cfg.socket_ifname_list.e[1].name, "ib"); /* ":5" dropped, as NCCL does */
  mcp_param_free(&f.cfg);

  fake_init(&f);
  fake_set(&f, "NCCL_IB_HCA", "mlx5_0:0");
  fake_set(&f, "NCCL_SOCKET_IFNAME", "thisnameiswaytoolong");
  CHECK_EQ_INT(fake_load(&f, 0), -EINVAL);
  CHECK(f.cfg.ib_hca == NULL && f.cfg.ib_hca_list.n == 0);
  CHECK(f.cfg.origin[MCP_PARAM_IB_HCA].rejected);
  CHECK(strstr(f.warns,
               "NCCL_IB_HCA=mlx5_0:0 (environment) is not a device list: NCCL_IB_HCA entry "
               "'mlx5_0:0': port '0' is not 1..255") != NULL);
  CHECK(f.cfg.socket_ifname == NULL && f.cfg.socket_ifname_list.n == 0);
  CHECK(strstr(f.warns,
               "NCCL_SOCKET_IFNAME=thisnameiswaytoolong (environment) is not an interface list: "
               "NCCL_SOCKET_IFNAME entry \"thisnameiswaytoolong\" is longer than any interface "
               "name") != NULL);
  mcp_param_free(&f.cfg);
}

int main(void)
{
  if (mkdtemp(tmpdir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  RUN_TEST(test_table_is_consistent);
  RUN_TEST(test_defaults);
  RUN_TEST(test_env_override);
  RUN_TEST(test_aliases);
  RUN_TEST(test_int_syntax);
  RUN_TEST(test_hex_values);
  RUN_TEST(test_bool_forms);
  RUN_TEST(test_out_of_range);
  RUN_TEST(test_garbage);
  RUN_TEST(test_string_checks);
  RUN_TEST(test_split_line);
  RUN_TEST(test_config_file);
  RUN_TEST(test_nccl_conf);
  RUN_TEST(test_infinite_retry);
  RUN_TEST(test_timeout_by_nccl_era);
  RUN_TEST(test_qps_per_connection);
  RUN_TEST(test_scan_env);
  RUN_TEST(test_scan_nccl_names);
  RUN_TEST(test_check_select);
  RUN_TEST(test_time_to_error);
  RUN_TEST(test_formatting);
  RUN_TEST(test_log);
  RUN_TEST(test_reentrant);
  RUN_TEST(test_rank_map_parsed_once);
  RUN_TEST(test_lists_parsed_once);
  remove_tmpdir();
  return TEST_EXIT();
}
