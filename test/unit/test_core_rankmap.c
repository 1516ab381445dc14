/*
 * test_core_rankmap.c - MCPNET_RANK_MAP parsing (ranges, device lists, gid=/pkey=/
 * sl=/tc=/rail=/plane=, every refusal naming its entry), the local-rank lookup order, and
 * the selection rules built on them: a pinned rank sees exactly its devices in the map's
 * order, NCCL_IB_HCA does not select for it (its rails still apply where the entry names
 * none), and strict mode reports every requested device that did not become usable, with
 * the reason discovery recorded.
 */
#include <errno.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "core/rankmap.h"
#include "fabric/fabric_select.h"

static struct mcp_rankmap map;

/* NCCL_IB_HCA as the loader parses it, then the selection over it, as discovery makes it. */
static int select_init(struct mcp_select *s, const char *hca, const struct mcp_rankmap_entry *entry,
                       int strict)
{
  struct mcp_match_list list;
  char err[256];

  if (mcp_hca_parse(hca, &list, err, sizeof(err)) != 0)
    return -1;
  mcp_select_init(s, hca, &list, entry, strict);
  return 0;
}

static void parse_ok(const char *text)
{
  char err[256] = "";

  if (mcp_rankmap_parse(text, &map, err, sizeof(err)) != 0) {
    fprintf(stderr, "'%s' refused: %s\n", text, err);
    CHECK(0);
  }
}

static void expect_refused(const char *text, const char *needle)
{
  char err[256] = "";

  CHECK_EQ_INT(mcp_rankmap_parse(text, &map, err, sizeof(err)), -22);
  if (strstr(err, needle) == NULL)
    fprintf(stderr, "'%s': error \"%s\" lacks \"%s\"\n", text, err, needle);
  CHECK(strstr(err, needle) != NULL);
}

static void test_issue_example(void)
{
  const struct mcp_rankmap_entry *e;

  parse_ok("0-3=mlx5_0:1,gid=10.1.0.0/16;4-7=mlx5_1:1+mlx5_2,gid=10.2.0.0/16,sl=3,tc=106,pkey=0x8001");
  CHECK_EQ_INT(map.n, 2);
  e = mcp_rankmap_find(&map, 2);
  CHECK(e == &map.e[0]);
  CHECK_EQ_INT(e->ndev, 1);
  CHECK_EQ_STR(e->dev[0].name, "mlx5_0");
  CHECK_EQ_INT(e->dev[0].port, 1);
  CHECK_EQ_INT(e->has_gid_range, 1);
  CHECK_EQ_INT(e->gid_range.family, 4);
  CHECK_EQ_INT(e->gid_range.bits, 16);
  CHECK_EQ_INT(e->pkey, -1);
  CHECK_EQ_INT(e->sl, -1);
  e = mcp_rankmap_find(&map, 7);
  CHECK(e == &map.e[1]);
  CHECK_EQ_INT(e->ndev, 2);
  CHECK_EQ_STR(e->dev[1].name, "mlx5_2");
  CHECK_EQ_INT(e->dev[1].port, -1);
  CHECK_EQ_INT(e->sl, 3);
  CHECK_EQ_INT(e->tc, 106);
  CHECK_EQ_INT(e->pkey, 0x8001);
  CHECK(mcp_rankmap_find(&map, 8) == NULL);
  CHECK_EQ_STR(map.e[0].text, "0-3=mlx5_0:1,gid=10.1.0.0/16");
}

static void test_gid_forms(void)
{
  static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 0, 5};

  parse_ok(" 0 = rxe0 , gid = 3 ; 1=rxe0,gid=10.1.0.5; 2=rxe0,gid=fd00::7 ;");
  CHECK_EQ_INT(map.n, 3);
  CHECK_EQ_INT(map.e[0].gid_index, 3);
  CHECK_EQ_INT(map.e[0].has_gid_addr, 0);
  CHECK_EQ_INT(map.e[1].has_gid_addr, 1);
  CHECK(memcmp(map.e[1].gid_addr, v4, 16) == 0);
  CHECK_EQ_INT(map.e[2].has_gid_addr, 1);
  CHECK_EQ_INT(map.e[2].gid_addr[0], 0xfd);
  CHECK_EQ_INT(map.e[2].gid_addr[15], 7);
  CHECK_EQ_INT(map.e[1].gid_index, -1);
}

static void test_empty(void)
{
  parse_ok("");
  CHECK_EQ_INT(map.n, 0);
  CHECK_EQ_INT(mcp_rankmap_parse(NULL, &map, NULL, 0), 0);
  CHECK_EQ_INT(map.n, 0);
  CHECK(mcp_rankmap_find(&map, 0) == NULL);
}

static void test_refusals(void)
{
  expect_refused("0-3", "entry '0-3': expected RANKS=DEVICES");
  expect_refused("=mlx5_0", "ranks before '=' are missing");
  expect_refused("x=mlx5_0", "'x' is not a local rank");
  expect_refused("3-1=mlx5_0", "runs backwards");
  expect_refused("0-5000=mlx5_0", "ranks 0..4095");
  expect_refused("0=", "no device after '='");
  expect_refused("0=mlx5_0:0", "port must be 1..255");
  expect_refused("0=mlx5_0+", "empty or overlong device name");
  expect_refused("0=mlx5_0+mlx5_0:1", "named twice");
  expect_refused("0=mlx5_0,gid=300", "GID index is 0..255");
  expect_refused("0=mlx5_0,gid=10.1.0.0/40", "not a CIDR");
  expect_refused("0=mlx5_0,gid=eth0", "neither a GID index");
  expect_refused("0=mlx5_0,pkey=0x8000", "not a P_Key value");
  expect_refused("0=mlx5_0,pkey=0x10000", "not a P_Key value");
  expect_refused("0=mlx5_0,sl=16", "sl=16: must be 0..15");
  expect_refused("0=mlx5_0,tc=256", "tc=256: must be 0..255");
  expect_refused("0=mlx5_0,mtu=4096", "unknown option 'mtu'");
  expect_refused("0=mlx5_0,sl=1,sl=2", "sl= is given twice");
  expect_refused("0=mlx5_0,gid=1,gid=10.0.0.0/8", "gid= is given twice");
  expect_refused("0=mlx5_0,gid", "not KEY=VALUE");
  expect_refused("0-3=mlx5_0;3-4=mlx5_1", "both place local rank 3");
  expect_refused("0=mlx5_0,rail=32768", "rail=32768: must be 0..32767");
  expect_refused("0=mlx5_0,rail=-1", "rail=-1: must be 0..32767");
  expect_refused("0=mlx5_0,rail=x", "rail=x: must be 0..32767");
  expect_refused("0=mlx5_0,plane=16384", "plane=16384: must be 0..16383");
  expect_refused("0=mlx5_0,rail=1,rail=2", "rail= is given twice");
  expect_refused("0=mlx5_0,plane=1,plane=1", "plane= is given twice");
  expect_refused("0=mlx5_0,rails=1", "unknown option 'rails' (gid=, pkey=, sl=, tc=, rail=, plane=)");
}

/* rail= and plane= (NCCL 2.30's rail and plane, net API v12), for each device of the
 * entry; a pinned rank takes NCCL_IB_HCA's only where the entry names none. */
static void test_rail_plane(void)
{
  struct mcp_select s;
  int rail, plane;

  parse_ok("0-1=mlx5_0:1,rail=0;2-3=mlx5_1:1,rail=1,plane=2;4=mlx5_2");
  CHECK_EQ_INT(map.e[0].rail, 0);
  CHECK_EQ_INT(map.e[0].plane, -1);
  CHECK_EQ_INT(map.e[1].rail, 1);
  CHECK_EQ_INT(map.e[1].plane, 2);
  CHECK_EQ_INT(map.e[2].rail, -1);
  CHECK_EQ_INT(map.e[2].plane, -1);
  /* The entry's rail wins over NCCL_IB_HCA's; its missing plane comes from there. */
  CHECK_EQ_INT(select_init(&s, "mlx5_0:1:5:6,mlx5_2::9", &map.e[0], 1), 0);
  mcp_select_rail_plane(&s, "mlx5_0", 1, &rail, &plane);
  CHECK_EQ_INT(rail, 0);
  CHECK_EQ_INT(plane, 6);
  /* An entry without either: NCCL_IB_HCA's token for the port, or none. */
  CHECK_EQ_INT(select_init(&s, "mlx5_0:1:5:6,mlx5_2::9", &map.e[2], 1), 0);
  mcp_select_rail_plane(&s, "mlx5_2", 1, &rail, &plane);
  CHECK_EQ_INT(rail, 9);
  CHECK_EQ_INT(plane, -1);
  CHECK_EQ_INT(select_init(&s, "mlx5_0:2:5:6", &map.e[2], 1), 0);
  mcp_select_rail_plane(&s, "mlx5_0", 1, &rail, &plane); /* the token is port 2's */
  CHECK_EQ_INT(rail, -1);
  CHECK_EQ_INT(plane, -1);
  /* No rank map: NCCL_IB_HCA alone, the first token that names the port. */
  CHECK_EQ_INT(select_init(&s, "mlx5_0:1:2:0,mlx5_0::3:1", NULL, 1), 0);
  mcp_select_rail_plane(&s, "mlx5_0", 1, &rail, &plane);
  CHECK_EQ_INT(rail, 2);
  CHECK_EQ_INT(plane, 0);
  mcp_select_rail_plane(&s, "mlx5_0", 2, &rail, &plane);
  CHECK_EQ_INT(rail, 3);
  CHECK_EQ_INT(plane, 1);
}

struct fake_env {
  const char *names[4];
  const char *values[4];
};

static const char *fake_get(void *arg, const char *name)
{
  const struct fake_env *e = arg;
  int i;

  for (i = 0; i < 4 && e->names[i] != NULL; i++)
    if (strcmp(e->names[i], name) == 0)
      return e->values[i];
  return NULL;
}

/* '*' fuses devices into one; '+' keeps them separate; both combine. */
static void test_fused_sets(void)
{
  const struct mcp_rankmap_entry *e;

  parse_ok("0=rxe0*rxe1+rxe2;1-2=mlx5_0:1 * mlx5_0:2,gid=3;3=a+b");
  e = mcp_rankmap_find(&map, 0);
  CHECK_EQ_INT(e->ndev, 3);
  CHECK_EQ_STR(e->dev[1].name, "rxe1");
  CHECK_EQ_INT(e->dev[0].group, 0);
  CHECK_EQ_INT(e->dev[1].group, 0);
  CHECK_EQ_INT(e->dev[2].group, 1);
  e = mcp_rankmap_find(&map, 2);
  CHECK_EQ_INT(e->ndev, 2);
  CHECK_EQ_STR(e->dev[1].name, "mlx5_0");
  CHECK_EQ_INT(e->dev[1].port, 2);
  CHECK_EQ_INT(e->dev[1].group, 0);
  CHECK_EQ_INT(e->gid_index, 3);
  e = mcp_rankmap_find(&map, 3);
  CHECK_EQ_INT(e->dev[0].group, 0);
  CHECK_EQ_INT(e->dev[1].group, 1);
  parse_ok("0=a*b*c*d+e*f*g*h");
  CHECK_EQ_INT(map.e[0].ndev, 8);
  CHECK_EQ_INT(map.e[0].dev[4].group, 1);
  expect_refused("0=rxe0*", "an empty or overlong device name in 'rxe0*'");
  expect_refused("0=*rxe0", "an empty or overlong device name");
  expect_refused("0=a+*b", "an empty or overlong device name");
  parse_ok("0=a*b*c*d*e*f*g*h+i*j");
  CHECK_EQ_INT(map.e[0].ndev, 10);
  CHECK_EQ_INT(map.e[0].dev[7].group, 0);
  CHECK_EQ_INT(map.e[0].dev[8].group, 1);
  expect_refused("0=a*b*c*d*e*f*g*h*i", "more than 8 devices fused with '*' in 'a*b*c*d*e*f*g*h*i'");
  expect_refused("0=a*b*c*d*e*f*g*h+i*j*k*l*m*n*o*p+q", "more than 16 devices");
  expect_refused("0=rxe0*rxe0:1", "device rxe0 is named twice");
}

static void test_local_rank(void)
{
  struct fake_env none = {{NULL}, {NULL}};
  struct fake_env slurm = {{"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}, {"5", "2"}};
  struct fake_env both = {{"PMI_LOCAL_RANK", "LOCAL_RANK"}, {"1", " 3 "}};
  struct fake_env empty = {{"LOCAL_RANK", "MPI_LOCALRANKID"}, {"", "4"}};
  struct fake_env bad = {{"LOCAL_RANK"}, {"two"}};
  const char *src = "x";
  char err[128] = "";

  CHECK_EQ_INT(mcp_local_rank(-1, fake_get, &none, &src, err, sizeof(err)), -ENOENT);
  CHECK(src == NULL);
  CHECK_EQ_INT(mcp_local_rank(6, fake_get, &slurm, &src, err, sizeof(err)), 6);
  CHECK_EQ_STR(src, "MCPNET_LOCAL_RANK");
  CHECK_EQ_INT(mcp_local_rank(-1, fake_get, &slurm, &src, err, sizeof(err)), 5);
  CHECK_EQ_STR(src, "SLURM_LOCALID");
  CHECK_EQ_INT(mcp_local_rank(-1, fake_get, &both, &src, err, sizeof(err)), 3);
  CHECK_EQ_STR(src, "LOCAL_RANK");
  CHECK_EQ_INT(mcp_local_rank(-1, fake_get, &empty, &src, err, sizeof(err)), 4);
  CHECK_EQ_STR(src, "MPI_LOCALRANKID");
  CHECK_EQ_INT(mcp_local_rank(-1, fake_get, &bad, &src, err, sizeof(err)), -22);
  CHECK(strstr(err, "LOCAL_RANK=two is not a local rank") != NULL);
}

/* A fabric as discovery would leave it: the ports that became usable, the exclusions. */
static void add_dev(struct mcp_fabric *fab, const char *ibdev, int port)
{
  struct mcp_net_dev *d = &fab->dev[fab->ndev++];

  memset(d, 0, sizeof(*d));
  snprintf(d->ibdev, sizeof(d->ibdev), "%s", ibdev);
  snprintf(d->name, sizeof(d->name), "%s:%d", ibdev, port);
  d->port = port;
}

static const char *const visible[] = {"mlx5_0", "mlx5_1", "mlx5_10", "mlx5_2"};

static void test_pinned_selection(void)
{
  struct mcp_fabric *fab = calloc(1, sizeof(*fab));
  struct mcp_select s;
  char problems[1024];

  parse_ok("0=mlx5_2:1+mlx5_0:1");
  CHECK_EQ_INT(select_init(&s, "^mlx5_2", &map.e[0], 1), 0);
  /* Exact names only, NCCL_IB_HCA ignored for the pinned rank. */
  CHECK_EQ_INT(mcp_select_allows_dev(&s, "mlx5_2"), 1);
  CHECK_EQ_INT(mcp_select_allows_dev(&s, "mlx5_0"), 1);
  CHECK_EQ_INT(mcp_select_allows_dev(&s, "mlx5_1"), 0);
  CHECK_EQ_INT(mcp_select_allows_dev(&s, "mlx5_"), 0);
  CHECK_EQ_INT(mcp_select_allows_port(&s, "mlx5_0", 1), 1);
  CHECK_EQ_INT(mcp_select_allows_port(&s, "mlx5_0", 2), 0);
  CHECK_EQ_INT(mcp_select_requested(&s, "mlx5_0", 1), 1);
  CHECK_EQ_INT(mcp_select_requested(&s, "mlx5_1", 1), 0);
  /* Found in discovery order; the check puts them in the map's order. */
  add_dev(fab, "mlx5_0", 1);
  add_dev(fab, "mlx5_2", 1);
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 0);
  CHECK_EQ_STR(fab->dev[0].ibdev, "mlx5_2");
  CHECK_EQ_STR(fab->dev[1].ibdev, "mlx5_0");
  /* mlx5_0 went down: the problem names the device, the map entry and the reason. */
  memset(fab, 0, sizeof(*fab));
  add_dev(fab, "mlx5_2", 1);
  mcp_fabric_exclude(fab, "mlx5_0", 1, 1, "port state is DOWN, not ACTIVE");
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 1);
  CHECK(strstr(problems,
               "mlx5_0:1 (pinned by MCPNET_RANK_MAP entry '0=mlx5_2:1+mlx5_0:1'): port state is DOWN") !=
        NULL);
  /* A name that does not exist at all. */
  parse_ok("0=mlx5_9");
  CHECK_EQ_INT(select_init(&s, NULL, &map.e[0], 1), 0);
  memset(fab, 0, sizeof(*fab));
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 1);
  CHECK(strstr(problems, "mlx5_9 (pinned by MCPNET_RANK_MAP entry '0=mlx5_9'): no such device") != NULL);
  free(fab);
}

static void test_hca_list_selection(void)
{
  struct mcp_fabric *fab = calloc(1, sizeof(*fab));
  struct mcp_select s;
  char problems[1024], report[1024];

  /* A prefix that catches mlx5_1 and mlx5_10 takes both, as NCCL does: even strict mode
   * does not fail init for it (discovery WARNs; see test_ambiguous_prefix). */
  CHECK_EQ_INT(select_init(&s, "mlx5_1,mlx5_2:1", NULL, 1), 0);
  CHECK_EQ_INT(mcp_select_requested(&s, "mlx5_10", 1), 1);
  CHECK_EQ_INT(mcp_select_requested(&s, "mlx5_0", 1), 0);
  add_dev(fab, "mlx5_1", 1);
  add_dev(fab, "mlx5_10", 1);
  add_dev(fab, "mlx5_2", 1);
  problems[0] = '\0';
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 0);
  CHECK_EQ_STR(problems, "");
  CHECK_EQ_INT(select_init(&s, "=mlx5_1,mlx5_2:1", NULL, 1), 0);
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 0);
  CHECK_EQ_INT(select_init(&s, "mlx5_1,mlx5_2:1", NULL, 0), 0);
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 0);
  /* Strict still holds for a device the token names exactly: mlx5_1 unusable fails init
   * even though the prefix also caught a usable mlx5_10. */
  memset(fab, 0, sizeof(*fab));
  add_dev(fab, "mlx5_10", 1);
  add_dev(fab, "mlx5_2", 1);
  mcp_fabric_exclude(fab, "mlx5_1", 1, 1, "port state is DOWN, not ACTIVE");
  CHECK_EQ_INT(select_init(&s, "mlx5_1,mlx5_2:1", NULL, 1), 0);
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 1);
  CHECK(strstr(problems, "mlx5_1 (listed in NCCL_IB_HCA): port state is DOWN") != NULL);
  /* A listed device whose uverbs node did not open, and one that does not exist. */
  memset(fab, 0, sizeof(*fab));
  add_dev(fab, "mlx5_1", 1);
  mcp_fabric_exclude(fab, "mlx5_2", 0, 1, "cannot open its uverbs node (Permission denied)");
  CHECK_EQ_INT(select_init(&s, "=mlx5_1,mlx5_2,mlx5_7", NULL, 1), 0);
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 2);
  CHECK(strstr(problems, "mlx5_2 (listed in NCCL_IB_HCA): cannot open its uverbs node") != NULL);
  CHECK(strstr(problems, "'mlx5_7' matches no device") != NULL);
  mcp_select_report(fab, report, sizeof(report));
  CHECK(strstr(report, "mlx5_1 port 1: used") != NULL);
  CHECK(strstr(report, "mlx5_2: cannot open its uverbs node") != NULL);
  /* An exclude list requests nothing. */
  CHECK_EQ_INT(select_init(&s, "^mlx5_0", NULL, 1), 0);
  CHECK_EQ_INT(mcp_select_requested(&s, "mlx5_1", 1), 0);
  CHECK_EQ_INT(mcp_select_allows_port(&s, "mlx5_0", 1), 0);
  CHECK_EQ_INT(mcp_select_check(&s, fab, visible, 4, problems, sizeof(problems)), 0);
  free(fab);
}

/* The WARN text for prefixes that match several devices: which token, which devices,
 * and that all of them are used; nothing for exact lists, exclusions or pinned ranks. */
static void test_ambiguous_prefix(void)
{
  struct mcp_select s;
  char msg[1024];

  CHECK_EQ_INT(select_init(&s, "mlx5_1,mlx5_2:1", NULL, 1), 0);
  CHECK_EQ_INT(mcp_select_ambiguous(&s, visible, 4, msg, sizeof(msg)), 1);
  CHECK(strstr(msg, "NCCL_IB_HCA=mlx5_1,mlx5_2:1: 'mlx5_1' matches several devices (mlx5_1, mlx5_10)") !=
        NULL);
  CHECK(strstr(msg, "uses all of them") != NULL);
  CHECK(strstr(msg, "mlx5_2'") == NULL);
  CHECK_EQ_INT(select_init(&s, "mlx5", NULL, 0), 0);
  CHECK_EQ_INT(mcp_select_ambiguous(&s, visible, 4, msg, sizeof(msg)), 1);
  CHECK(strstr(msg, "(mlx5_0, mlx5_1, mlx5_10, mlx5_2)") != NULL);
  CHECK_EQ_INT(select_init(&s, "=mlx5_1", NULL, 1), 0);
  CHECK_EQ_INT(mcp_select_ambiguous(&s, visible, 4, msg, sizeof(msg)), 0);
  CHECK_EQ_STR(msg, "");
  CHECK_EQ_INT(select_init(&s, "^mlx5_1", NULL, 1), 0);
  CHECK_EQ_INT(mcp_select_ambiguous(&s, visible, 4, msg, sizeof(msg)), 0);
  parse_ok("0=mlx5_1");
  CHECK_EQ_INT(select_init(&s, "mlx5_1", &map.e[0], 1), 0);
  CHECK_EQ_INT(mcp_select_ambiguous(&s, visible, 4, msg, sizeof(msg)), 0);
}

int main(void)
{
  RUN_TEST(test_issue_example);
  RUN_TEST(test_gid_forms);
  RUN_TEST(test_empty);
  RUN_TEST(test_refusals);
  RUN_TEST(test_fused_sets);
  RUN_TEST(test_rail_plane);
  RUN_TEST(test_local_rank);
  RUN_TEST(test_pinned_selection);
  RUN_TEST(test_hca_list_selection);
  RUN_TEST(test_ambiguous_prefix);
  return TEST_EXIT();
}
