/*
 * test_fabric_hca.c - NCCL_IB_HCA with NCCL's meaning: prefix matching (mlx5_1 also
 * matches mlx5_10, which mcp_hca_token_devices reports so discovery can warn), '='
 * exact, '^' exclude, '^=' exact exclude, ':port', and refusals of malformed entries.
 */
#include <errno.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "fabric/fabric_hca.h"

static const char *const devs[] = {"mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11", "mlx5_2"};
#define NDEVS ((int)(sizeof(devs) / sizeof(devs[0])))

static struct mcp_match_list parse_ok(const char *text)
{
  struct mcp_match_list l;
  char err[256] = "";

  if (mcp_hca_parse(text, &l, err, sizeof(err)) != 0) {
    fprintf(stderr, "'%s' refused: %s\n", text ? text : "(null)", err);
    CHECK(0);
  }
  return l;
}

static void expect_refused(const char *text, const char *needle)
{
  struct mcp_match_list l;
  char err[256] = "";

  CHECK_EQ_INT(mcp_hca_parse(text, &l, err, sizeof(err)), -EINVAL);
  if (strstr(err, needle) == NULL)
    fprintf(stderr, "'%s': error \"%s\" lacks \"%s\"\n", text, err, needle);
  CHECK(strstr(err, needle) != NULL);
}

static void test_empty_allows_all(void)
{
  struct mcp_match_list l = parse_ok(NULL);

  CHECK_EQ_INT(l.n, 0);
  CHECK(mcp_match_allows(&l, "mlx5_0", 1));
  l = parse_ok("");
  CHECK(mcp_match_allows(&l, "anything", 2));
}

static void test_prefix(void)
{
  struct mcp_match_list l = parse_ok("mlx5_1");
  char names[128];

  CHECK_EQ_INT(l.n, 1);
  CHECK_EQ_INT(l.exact, 0);
  CHECK_EQ_INT(l.exclude, 0);
  CHECK(mcp_match_allows(&l, "mlx5_1", 1));
  CHECK(mcp_match_allows(&l, "mlx5_10", 1)); /* NCCL's meaning, kept */
  CHECK(mcp_match_allows(&l, "mlx5_11", 1));
  CHECK(!mcp_match_allows(&l, "mlx5_0", 1));
  CHECK(!mcp_match_allows(&l, "mlx5_2", 1));
  CHECK_EQ_INT(mcp_hca_token_devices(&l, 0, devs, NDEVS, names, sizeof(names)), 3);
  CHECK_EQ_STR(names, "mlx5_1, mlx5_10, mlx5_11");
  /* Too little room: the count is still right, the text cut short. */
  CHECK_EQ_INT(mcp_hca_token_devices(&l, 0, devs, NDEVS, names, 10), 3);
  CHECK_EQ_INT(strlen(names), 9);
  l = parse_ok("mlx5");
  CHECK_EQ_INT(mcp_hca_token_devices(&l, 0, devs, NDEVS, names, sizeof(names)), NDEVS);
  l = parse_ok("mlx5_2");
  CHECK_EQ_INT(mcp_hca_token_devices(&l, 0, devs, NDEVS, names, sizeof(names)), 1);
  CHECK_EQ_STR(names, "mlx5_2");
  l = parse_ok("mlx5_9");
  CHECK_EQ_INT(mcp_hca_token_devices(&l, 0, devs, NDEVS, names, sizeof(names)), 0);
  CHECK_EQ_STR(names, "");
}

static void test_exact(void)
{
  struct mcp_match_list l = parse_ok("=mlx5_1,mlx5_2");
  char names[128];

  CHECK_EQ_INT(l.exact, 1);
  CHECK_EQ_INT(l.n, 2);
  CHECK(mcp_match_allows(&l, "mlx5_1", 1));
  CHECK(!mcp_match_allows(&l, "mlx5_10", 1));
  CHECK(mcp_match_allows(&l, "mlx5_2", 1));
  CHECK(!mcp_match_allows(&l, "mlx5_", 1));
  CHECK_EQ_INT(mcp_hca_token_devices(&l, 0, devs, NDEVS, names, sizeof(names)), 1);
  CHECK_EQ_STR(names, "mlx5_1");
}

static void test_exclude(void)
{
  struct mcp_match_list l = parse_ok("^mlx5_1");

  CHECK_EQ_INT(l.exclude, 1);
  CHECK_EQ_INT(l.exact, 0);
  CHECK(!mcp_match_allows(&l, "mlx5_1", 1));
  CHECK(!mcp_match_allows(&l, "mlx5_10", 1)); /* the prefix excludes too */
  CHECK(mcp_match_allows(&l, "mlx5_0", 1));
  l = parse_ok("^=mlx5_1");
  CHECK_EQ_INT(l.exclude, 1);
  CHECK_EQ_INT(l.exact, 1);
  CHECK(!mcp_match_allows(&l, "mlx5_1", 1));
  CHECK(mcp_match_allows(&l, "mlx5_10", 1));
  /* Excluding one port leaves the others. */
  l = parse_ok("^=mlx4_0:2");
  CHECK(mcp_match_allows(&l, "mlx4_0", 1));
  CHECK(!mcp_match_allows(&l, "mlx4_0", 2));
}

static void test_ports(void)
{
  struct mcp_match_list l = parse_ok("mlx5_0:1,mlx4_0:2");

  CHECK_EQ_INT(l.n, 2);
  CHECK_EQ_INT(l.e[0].port, 1);
  CHECK_EQ_INT(l.e[1].port, 2);
  CHECK(mcp_match_allows(&l, "mlx5_0", 1));
  CHECK(!mcp_match_allows(&l, "mlx5_0", 2));
  CHECK(mcp_match_allows(&l, "mlx4_0", 2));
  CHECK(!mcp_match_allows(&l, "mlx4_0", 1));
  CHECK(mcp_match_allows(&l, "mlx4_0", -1)); /* the device as a whole is named */
  /* NCCL's "dev:port:rail:plane": the port counts, the rest is ignored. */
  l = parse_ok("mlx5_0:1:0:0");
  CHECK_EQ_INT(l.e[0].port, 1);
  /* A bare ':' names every port. */
  l = parse_ok("mlx5_0:");
  CHECK_EQ_INT(l.e[0].port, -1);
  /* Empty entries are skipped. */
  l = parse_ok("mlx5_0,,mlx5_1,");
  CHECK_EQ_INT(l.n, 2);
}

static void test_refused(void)
{
  char many[40 * 8] = "";
  int i;

  expect_refused("mlx5_0:0", "port '0' is not 1..255");
  expect_refused("mlx5_0:256", "port '256'");
  expect_refused("mlx5_0:x", "port 'x'");
  expect_refused("mlx5_0:1x", "port '1x'");
  expect_refused("mlx5_0:-2", "port '-2'");
  /* -1 is what NCCL stores for "no port": every port, as an empty field. */
  {
    struct mcp_match_list l = parse_ok("mlx5_0:-1");
    CHECK_EQ_INT(l.e[0].port, -1);
    CHECK(mcp_match_allows(&l, "mlx5_0", 2));
  }
  expect_refused("mlx5_0:12345678901234567890", "bad port");
  expect_refused(":1", "no usable device name");
  expect_refused("=:1", "no usable device name");
  expect_refused("mlx5_0123456789012345678901234567890123456789012345678901234567890123",
                 "no usable device name");
  for (i = 0; i < 33; i++)
    snprintf(many + strlen(many), sizeof(many) - strlen(many), "%smlx5_%d", i ? "," : "", i);
  expect_refused(many, "more than 32 entries");
}

int main(void)
{
  RUN_TEST(test_empty_allows_all);
  RUN_TEST(test_prefix);
  RUN_TEST(test_exact);
  RUN_TEST(test_exclude);
  RUN_TEST(test_ports);
  RUN_TEST(test_refused);
  return TEST_EXIT();
}
