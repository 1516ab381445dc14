/*
 * test_doctor_fleet.c - the fleet preflight's rules, without hosts.
 *
 * mcpnet-doctor --fleet must find node 0 and its own rank the way Slurm and Kubernetes
 * give them, check exactly the pairs NCCL's rings and node 0 need (per rail, each pair
 * once), blame a failed pair on the node common to the failures (and say when it cannot
 * tell), and print one table whose last line counts the nodes with problems. The lab's
 * single_fleet runs the same code with three processes on one guest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "doctor_fleet.h"
#include "mcp_test.h"

/* ---- Slurm's node list -------------------------------------------------------------------- */

static void test_first_host(void)
{
  char out[64];

  CHECK_EQ_INT(doctor_fleet_first_host("gpu[03-05,07]", out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "gpu03");
  CHECK_EQ_INT(doctor_fleet_first_host("gpu[03-05,07],cpu01", out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "gpu03");
  CHECK_EQ_INT(doctor_fleet_first_host("gpu[7,3-5]", out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "gpu7"); /* Slurm keeps the order given: the first is first */
  CHECK_EQ_INT(doctor_fleet_first_host("a01,a02", out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "a01");
  CHECK_EQ_INT(doctor_fleet_first_host("rack[1-2]-n[01-04]", out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "rack1-n01");
  CHECK_EQ_INT(doctor_fleet_first_host("node-7.cluster", out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "node-7.cluster");
  CHECK_EQ_INT(doctor_fleet_first_host("", out, sizeof(out)), -1);
  CHECK_EQ_INT(doctor_fleet_first_host("gpu[03", out, sizeof(out)), -1);
  CHECK_EQ_INT(doctor_fleet_first_host("gpu[]", out, sizeof(out)), -1);
  CHECK_EQ_INT(doctor_fleet_first_host("gpu03]", out, sizeof(out)), -1);
  CHECK_EQ_INT(doctor_fleet_first_host("averyveryverylongname", out, 8), -1);
}

/* ---- Options and environment ---------------------------------------------------------------- */

static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
  size_t n = strlen(name);

  for (const char *const *e = fake_env; e != NULL && *e != NULL; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

static int resolve(const char *const *env, const char *coord, int nodes, int rank, struct fleet_conf *c,
                   char *err, size_t len)
{
  struct fleet_opts o = {coord, nodes, rank};

  fake_env = env;
  err[0] = '\0';
  return doctor_fleet_resolve(&o, fake_getenv, c, err, len);
}

static void test_resolve(void)
{
  static const char *const slurm[] = {"SLURM_JOB_NODELIST=gpu[03-05,07]", "SLURM_NNODES=4", "SLURM_NODEID=2",
                                      NULL};
  static const char *const k8s[] = {"JOB_COMPLETION_INDEX=3", "MCPNET_FLEET_NODES=4",
                                    "MCPNET_FLEET_COORDINATOR=fleet-0.fleet:18650", NULL};
  static const char *const none[] = {NULL};
  static const char *const nodes_only[] = {"MCPNET_FLEET_NODES=3", NULL};
  static const char *const rank1[] = {"MCPNET_FLEET_NODES=3", "MCPNET_FLEET_RANK=1", NULL};
  static const char *const bad_count[] = {"SLURM_NNODES=four", NULL};
  static const char *const bad_list[] = {"SLURM_JOB_NODELIST=gpu[03", "SLURM_NNODES=2", "SLURM_NODEID=1",
                                         NULL};
  struct fleet_conf c;
  char err[600];

  CHECK_EQ_INT(resolve(slurm, NULL, -1, -1, &c, err, sizeof(err)), 0);
  CHECK_EQ_STR(c.coordinator, "gpu03");
  CHECK_EQ_STR(c.coordinator_source, "SLURM_JOB_NODELIST");
  CHECK_EQ_INT(c.nodes, 4);
  CHECK_EQ_INT(c.rank, 2);
  CHECK_EQ_STR(c.rank_source, "SLURM_NODEID");

  CHECK_EQ_INT(resolve(k8s, NULL, -1, -1, &c, err, sizeof(err)), 0);
  CHECK_EQ_STR(c.coordinator, "fleet-0.fleet:18650");
  CHECK_EQ_INT(c.nodes, 4);
  CHECK_EQ_INT(c.rank, 3);
  CHECK_EQ_STR(c.rank_source, "JOB_COMPLETION_INDEX");

  /* Options win over the environment. */
  CHECK_EQ_INT(resolve(slurm, "10.0.0.1:2000", 2, 1, &c, err, sizeof(err)), 0);
  CHECK_EQ_STR(c.coordinator, "10.0.0.1:2000");
  CHECK_EQ_INT(c.nodes, 2);
  CHECK_EQ_INT(c.rank, 1);

  /* Each missing value is a usage error naming what to set. */
  CHECK_EQ_INT(resolve(none, NULL, -1, -1, &c, err, sizeof(err)), -1);
  CHECK(strstr(err, "MCPNET_FLEET_NODES") != NULL && strstr(err, "--nodes") != NULL);
  CHECK_EQ_INT(resolve(nodes_only, NULL, -1, -1, &c, err, sizeof(err)), -1);
  CHECK(strstr(err, "MCPNET_FLEET_RANK") != NULL && strstr(err, "JOB_COMPLETION_INDEX") != NULL);
  CHECK_EQ_INT(resolve(rank1, NULL, -1, -1, &c, err, sizeof(err)), -1);
  CHECK(strstr(err, "MCPNET_FLEET_COORDINATOR") != NULL && strstr(err, "--coordinator") != NULL);
  /* Node 0 listens: it needs no address of its own. */
  CHECK_EQ_INT(resolve(nodes_only, NULL, -1, 0, &c, err, sizeof(err)), 0);
  CHECK_EQ_STR(c.coordinator, "");
  CHECK_EQ_INT(resolve(nodes_only, NULL, -1, 3, &c, err, sizeof(err)), -1);
  CHECK(strstr(err, "not below the number of nodes 3") != NULL);
  CHECK_EQ_INT(resolve(bad_count, NULL, -1, 0, &c, err, sizeof(err)), -1);
  CHECK(strstr(err, "SLURM_NNODES='four'") != NULL);
  CHECK_EQ_INT(resolve(bad_list, NULL, -1, -1, &c, err, sizeof(err)), -1);
  CHECK(strstr(err, "SLURM_JOB_NODELIST") != NULL);
}

/* ---- Pair selection ------------------------------------------------------------------------- */

static int has(const struct fleet_pair *p, int np, int a, int b, int rail)
{
  int found = 0;

  for (int i = 0; i < np; i++)
    found += p[i].a == a && p[i].b == b && p[i].rail == rail;
  return found;
}

static void test_pairs(void)
{
  struct fleet_pair p[64];
  int one[8] = {1, 1, 1, 1, 1, 1, 1, 1}, np;

  CHECK_EQ_INT(doctor_fleet_pairs(1, one, p, 64), 0);
  np = doctor_fleet_pairs(2, one, p, 64);
  CHECK_EQ_INT(np, 1);
  CHECK_EQ_INT(has(p, np, 0, 1, 0), 1);
  np = doctor_fleet_pairs(3, one, p, 64);
  CHECK_EQ_INT(np, 3);
  CHECK_EQ_INT(has(p, np, 0, 1, 0) + has(p, np, 1, 2, 0) + has(p, np, 0, 2, 0), 3);
  /* 8 nodes: the ring's 8 pairs, and node 0 with the 5 nodes that are not its ring
   * neighbours; each pair exactly once. */
  np = doctor_fleet_pairs(8, one, p, 64);
  CHECK_EQ_INT(np, 13);
  for (int r = 0; r < 8; r++) {
    int a = r, b = (r + 1) % 8;

    CHECK_EQ_INT(has(p, np, a < b ? a : b, a < b ? b : a, 0), 1);
    if (r > 0)
      CHECK_EQ_INT(has(p, np, 0, r, 0), 1);
  }
  CHECK(doctor_fleet_pairs_cap(8, 1) >= np);
  CHECK_EQ_INT(doctor_fleet_pairs(8, one, p, 12), -1);
}

static void test_pairs_rails(void)
{
  struct fleet_pair p[64];
  int two_two_one[3] = {2, 2, 1}, one_two_two[3] = {1, 2, 2}, absent[4] = {1, -1, 1, 1}, eight[2] = {8, 8};
  int np;

  /* Rail 1 exists on nodes 0 and 1 only: their one pair there; never rail 1 with rail 0. */
  np = doctor_fleet_pairs(3, two_two_one, p, 64);
  CHECK_EQ_INT(np, 4);
  CHECK_EQ_INT(has(p, np, 0, 1, 1), 1);
  CHECK_EQ_INT(has(p, np, 1, 2, 1) + has(p, np, 0, 2, 1), 0);
  /* Node 0 lacks rail 1: nodes 1 and 2 still meet there. */
  np = doctor_fleet_pairs(3, one_two_two, p, 64);
  CHECK_EQ_INT(np, 4);
  CHECK_EQ_INT(has(p, np, 1, 2, 1), 1);
  /* An absent node has no pairs; the ring closes over the others. */
  np = doctor_fleet_pairs(4, absent, p, 64);
  CHECK_EQ_INT(np, 3);
  CHECK_EQ_INT(has(p, np, 0, 2, 0) + has(p, np, 2, 3, 0) + has(p, np, 0, 3, 0), 3);
  for (int i = 0; i < np; i++)
    CHECK(p[i].a != 1 && p[i].b != 1);
  /* Two nodes of 8 rails: one pair per rail. */
  np = doctor_fleet_pairs(2, eight, p, 64);
  CHECK_EQ_INT(np, 8);
  for (int k = 0; k < 8; k++)
    CHECK_EQ_INT(has(p, np, 0, 1, k), 1);
}

/* ---- Attribution ---------------------------------------------------------------------------- */

static struct fleet_node nodes[8];
static struct fleet_pair pairs[64];

/* A fleet of n present nodes of `rails` rails, every selected pair run and ok. */
static void fleet_make(struct fleet *f, int n, int rails)
{
  int ndev[8];

  memset(nodes, 0, sizeof(nodes));
  for (int r = 0; r < n; r++) {
    nodes[r].present = 1;
    nodes[r].ndev = ndev[r] = rails;
    snprintf(nodes[r].host, sizeof(nodes[r].host), "host%d", r);
    snprintf(nodes[r].addr, sizeof(nodes[r].addr), "192.0.2.%d", r + 1);
  }
  f->n = n;
  f->node = nodes;
  f->pair = pairs;
  f->npair = doctor_fleet_pairs(n, ndev, pairs, 64);
  for (int i = 0; i < f->npair; i++) {
    pairs[i].ran = pairs[i].ok = 1;
  }
}

/* Every pair with `bad` on rail (or any rail, -1) fails at connect. */
static void break_node(struct fleet *f, int bad, int rail)
{
  for (int i = 0; i < f->npair; i++) {
    struct fleet_pair *p = &f->pair[i];

    if ((p->a == bad || p->b == bad) && (rail < 0 || p->rail == rail)) {
      p->ok = 0;
      snprintf(p->step, sizeof(p->step), "connect");
      snprintf(p->err, sizeof(p->err), "connect did not finish within 5 s");
      p->said_by = p->a == bad ? p->b : p->a;
    }
  }
}

static void test_attribute(void)
{
  struct fleet f;

  /* Three nodes, node 2's port blocked: both its pairs fail, 0-1 works. */
  fleet_make(&f, 3, 1);
  break_node(&f, 2, -1);
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 1);
  CHECK(!nodes[0].problems && !nodes[1].problems && nodes[2].problems);
  for (int i = 0; i < f.npair; i++)
    CHECK(!pairs[i].unsure);

  /* Eight nodes, node 3 broken: only node 3. */
  fleet_make(&f, 8, 1);
  break_node(&f, 3, -1);
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 1);
  for (int r = 0; r < 8; r++)
    CHECK_EQ_INT(nodes[r].problems, r == 3);

  /* Node 0 itself broken: node 0 only. */
  fleet_make(&f, 4, 1);
  break_node(&f, 0, -1);
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 1);
  CHECK(nodes[0].problems && !nodes[1].problems && !nodes[2].problems && !nodes[3].problems);

  /* Two nodes, their one pair fails: the pairs cannot tell; both named, unsure. */
  fleet_make(&f, 2, 1);
  break_node(&f, 1, -1);
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 2);
  CHECK(pairs[0].unsure && pairs[0].blame == (FLEET_BLAME_A | FLEET_BLAME_B));

  /* ...unless one end's own report FAILs: that end, and it says why. */
  fleet_make(&f, 2, 1);
  break_node(&f, 1, -1);
  nodes[1].nown = 1;
  snprintf(nodes[1].own[0], FLEET_LINE, "port-state rxe0:1: port DOWN");
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 1);
  CHECK(!nodes[0].problems && nodes[1].problems && pairs[0].by_own && !pairs[0].unsure);

  /* One odd pair among healthy nodes (a bad cable): both ends, unsure. */
  fleet_make(&f, 8, 1);
  for (int i = 0; i < f.npair; i++)
    if (pairs[i].a == 2 && pairs[i].b == 3)
      pairs[i].ok = 0;
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 2);
  CHECK(nodes[2].problems && nodes[3].problems && !nodes[0].problems);

  /* Rails are separate fabrics: node 2's rail 1 is dead, rail 0 fine; node 2 named. */
  fleet_make(&f, 3, 2);
  break_node(&f, 2, 1);
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 1);
  CHECK(nodes[2].problems && !nodes[0].problems && !nodes[1].problems);

  /* A node that never arrived, and one with its own FAILs but working pairs. */
  fleet_make(&f, 3, 1);
  nodes[1].present = 0;
  nodes[2].nown = 1;
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 2);
  CHECK(!nodes[0].problems && nodes[1].problems && nodes[2].problems);
}

/* ---- The table ------------------------------------------------------------------------------ */

static char *table(const struct fleet *f, int json)
{
  static char buf[16384];
  FILE *m = fmemopen(buf, sizeof(buf) - 1, "w");

  memset(buf, 0, sizeof(buf));
  if (json)
    doctor_fleet_table_json(f, m);
  else
    doctor_fleet_table_text(f, m);
  fclose(m);
  return buf;
}

static void test_table(void)
{
  struct fleet f;
  char *t;

  fleet_make(&f, 3, 1);
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 0);
  t = table(&f, 0);
  CHECK(strstr(t,
               "Fleet: 3 of 3 nodes reported to node 0; 3 pairs checked through the plugin on 1 rail, "
               "0 failed\n") != NULL);
  CHECK(strstr(t, "\n0     host0                192.0.2.1                healthy   -\n") != NULL);
  CHECK(strstr(t, "\nfleet: 3 nodes, 0 with problems\n") != NULL);

  fleet_make(&f, 3, 1);
  break_node(&f, 2, -1);
  nodes[1].present = 0;
  snprintf(nodes[1].missing, FLEET_LINE, "it did not connect within --wait 60 s");
  /* Node 1 absent: the ring over 0 and 2 is their one pair, and it fails too. */
  {
    int ndev[3] = {1, -1, 1};

    f.npair = doctor_fleet_pairs(3, ndev, pairs, 64);
    pairs[0].ran = 1;
    pairs[0].ok = 0;
    snprintf(pairs[0].step, sizeof(pairs[0].step), "connect");
    snprintf(pairs[0].err, sizeof(pairs[0].err), "timed out");
    pairs[0].said_by = 0;
  }
  CHECK_EQ_INT(doctor_fleet_attribute(&f), 3);
  t = table(&f, 0);
  CHECK(
    strstr(t,
           "\n1     host1                192.0.2.2                PROBLEMS  no report reached node 0: it did "
           "not connect within --wait 60 s\n") != NULL);
  CHECK(strstr(t,
               "to node 0 (rail 0): connect: timed out (seen on node 0); cannot tell which end: both are "
               "named") != NULL);
  CHECK(strstr(t, "could not be pinned on one end") != NULL);
  CHECK(strstr(t, "\nfleet: 3 nodes, 3 with problems\n") != NULL);

  /* The named node's row lists each failed pair with its peer, rail and step. */
  fleet_make(&f, 3, 1);
  break_node(&f, 2, -1);
  doctor_fleet_attribute(&f);
  t = table(&f, 0);
  CHECK(strstr(t, "\n2     host2                192.0.2.3                PROBLEMS  to node ") != NULL);
  CHECK(strstr(t, "to node 0 (rail 0): connect: connect did not finish within 5 s (seen on node 0)\n") !=
        NULL);
  CHECK(strstr(t, "to node 1 (rail 0): connect: connect did not finish within 5 s (seen on node 1)\n") !=
        NULL);
  CHECK(strstr(t, "\nfleet: 3 nodes, 1 with problems\n") != NULL);
  t = table(&f, 1);
  CHECK(strstr(t, "\"with_problems\":1,\"exit\":1}") != NULL);
  CHECK(strstr(t,
               "{\"rank\":2,\"host\":\"host2\",\"address\":\"192.0.2.3\",\"reported\":true,\"rails\":1,"
               "\"healthy\":false") != NULL);
  CHECK(strstr(t, "\"blamed\":[2],\"unsure\":false") != NULL);
}

/* What another doctor sends is read as a stranger's would be (issue 35): a node's report
 * with control characters in its strings and numbers out of range, and measurement plans
 * with counts that would index the message ring backwards or not at all. */
static void test_peer_text(void)
{
  char text[] = "rank=1\nnodes=3\nndev=-5\nnown=-2\nhost=evil\x1b[31mhost\naddr=10.0.0.9\nfail=a\rb\tc\n"
                "ndev=99999\n";
  struct fleet_node nd;
  int rank = -1, nnodes = -1;
  long count;
  size_t size;

  memset(&nd, 0, sizeof(nd));
  doctor_fleet_parse_hello(&nd, text, &rank, &nnodes);
  CHECK_EQ_INT(rank, 1);
  CHECK_EQ_INT(nnodes, 3);
  CHECK_EQ_INT(nd.ndev, FLEET_MAX_DEVS);
  CHECK_EQ_INT(nd.nown, 0);
  CHECK_EQ_STR(nd.host, "evil?[31mhost");
  CHECK_EQ_STR(nd.addr, "10.0.0.9");
  CHECK_EQ_STR(nd.own[0], "a?b?c");

  CHECK_EQ_INT(doctor_plan_parse("end", 1 << 20, &count, &size), DOCTOR_PLAN_END);
  CHECK_EQ_INT(doctor_plan_parse("bw 3 4096", 1 << 20, &count, &size), DOCTOR_PLAN_BW);
  CHECK(count == 3 && size == 4096);
  CHECK_EQ_INT(doctor_plan_parse("bw 0 4096", 1 << 20, &count, &size), DOCTOR_PLAN_BAD);
  CHECK_EQ_INT(doctor_plan_parse("bw -7 4096", 1 << 20, &count, &size), DOCTOR_PLAN_BAD);
  CHECK_EQ_INT(doctor_plan_parse("bw 3 4194304", 1 << 20, &count, &size), DOCTOR_PLAN_BAD);
  CHECK_EQ_INT(doctor_plan_parse("bw 99999999999 1", 1 << 20, &count, &size), DOCTOR_PLAN_BAD);
  CHECK_EQ_INT(doctor_plan_parse("lat 100", 1 << 20, &count, &size), DOCTOR_PLAN_LAT);
  CHECK_EQ_INT(doctor_plan_parse("lat 100 and more", 1 << 20, &count, &size), DOCTOR_PLAN_BAD);
  CHECK_EQ_INT(doctor_plan_parse("rm -rf /", 1 << 20, &count, &size), DOCTOR_PLAN_BAD);
}

int main(void)
{
  RUN_TEST(test_first_host);
  RUN_TEST(test_peer_text);
  RUN_TEST(test_resolve);
  RUN_TEST(test_pairs);
  RUN_TEST(test_pairs_rails);
  RUN_TEST(test_attribute);
  RUN_TEST(test_table);
  return TEST_EXIT();
}
