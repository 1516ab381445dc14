/*
 * test_fabric_gid.c - the GID choice (mcp_gid_choose) on GID tables read from fixture
 * hosts, with the namespace view a caller would have established: each expected choice
 * or error, for the automatic rules (RoCE v2 and IPv4 preferred, NCCL_IB_ADDR_FAMILY,
 * NCCL_IB_ADDR_RANGE, pinning by address) and for an explicit NCCL_IB_GID_INDEX (empty,
 * wrong RoCE version, other namespace, netdev down); and recovery's finding of the chosen
 * GID again by address (mcp_fabric_gid_refind) on a fixture host's table.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "mcp_test.h"
#include "fabric/fabric_gid.h"
#include "fabric/fabric_netns.h"
#include "fabric/fabric_sysfs.h"

#define FIXTURES MCP_SOURCE_DIR "/test/unit/fixtures/"
#define ROWS_MAX 64

struct table {
  struct mcp_gid_entry row[ROWS_MAX];
  int n;
};

/* Port 'port' of host/dev as rows, "ours" being what the view reaches from netdev
 * (NULL: netlink said the port's netdev is not in this namespace). */
static void table_load(struct table *t, const char *host, const char *dev, int port, const char *netdev)
{
  char root[512], err[256] = "";
  struct mcp_netns_view view = {.n = 0};
  struct mcp_sysfs_dev d;
  const struct mcp_sysfs_port *p;

  snprintf(root, sizeof(root), FIXTURES "%s/sys", host);
  t->n = 0;
  if (mcp_sysfs_dev_read(root, dev, &d, err, sizeof(err)) != 0) {
    fprintf(stderr, "%s/%s: %s\n", host, dev, err);
    CHECK(0);
    mcp_sysfs_dev_free(&d);
    return;
  }
  if (netdev != NULL)
    mcp_netns_view_add(&view, root, netdev);
  p = mcp_sysfs_port_find(&d, port);
  CHECK(p != NULL);
  if (p != NULL)
    t->n = mcp_netns_gid_rows(p, &view, t->row, ROWS_MAX);
  mcp_sysfs_dev_free(&d);
}

static struct mcp_gid_policy policy(void)
{
  struct mcp_gid_policy pol;

  memset(&pol, 0, sizeof(pol));
  pol.index = -1;
  pol.roce_version = 2;
  pol.family = 4;
  return pol;
}

static int choose(const struct table *t, const struct mcp_gid_policy *pol, struct mcp_gid_choice *c,
                  char *err, size_t errlen)
{
  memset(c, 0, sizeof(*c));
  err[0] = '\0';
  return mcp_gid_choose(t->row, t->n, pol, c, err, errlen);
}

/* Expect index; print the error otherwise. */
#define EXPECT_INDEX(t, pol, want)                     \
  do {                                                 \
    struct mcp_gid_choice _c;                          \
    char _e[256];                                      \
    int _rc = choose((t), (pol), &_c, _e, sizeof(_e)); \
    if (_rc != 0)                                      \
      fprintf(stderr, "unexpected error: %s\n", _e);   \
    CHECK_EQ_INT(_rc, 0);                              \
    CHECK_EQ_INT(_c.index, (want));                    \
  } while (0)

#define EXPECT_ERROR(t, pol, needle)                                \
  do {                                                              \
    struct mcp_gid_choice _c;                                       \
    char _e[256];                                                   \
    int _rc = choose((t), (pol), &_c, _e, sizeof(_e));              \
    CHECK_EQ_INT(_rc, -ENOENT);                                     \
    if (strstr(_e, (needle)) == NULL)                               \
      fprintf(stderr, "error \"%s\" lacks \"%s\"\n", _e, (needle)); \
    CHECK(strstr(_e, (needle)) != NULL);                            \
  } while (0)

/* (a)+(f): RoCE v2 over v1 for one address, IPv4 over link-local. */
static void test_auto_v2_ipv4(void)
{
  struct mcp_gid_policy pol = policy();
  struct mcp_gid_choice c;
  struct table t;
  char err[256];

  table_load(&t, "cx-split", "mlx5_0", 1, "ens1f0np0");
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 0);
  CHECK_EQ_INT(c.index, 3);
  CHECK_EQ_INT(c.type, MCP_GID_TYPE_ROCE_V2);
  CHECK_EQ_INT(c.family, 4);
  CHECK_EQ_STR(c.text, "10.1.0.5");
  CHECK_EQ_STR(c.netdev, "ens1f0np0");
  CHECK(strstr(c.why, "automatic") != NULL && strstr(c.why, "RoCE v2") != NULL);
  /* NCCL_IB_ROCE_VERSION_NUM=1: the v1 entry of the same address. */
  pol.roce_version = 1;
  EXPECT_INDEX(&t, &pol, 2);
}

static void test_family_and_range(void)
{
  struct mcp_gid_policy pol = policy();
  struct mcp_gid_choice c;
  struct table t;
  char err[256];

  table_load(&t, "cx-split", "mlx5_1", 1, "ens1f1np1");
  EXPECT_INDEX(&t, &pol, 3);
  /* NCCL_IB_ADDR_FAMILY=AF_INET6 */
  pol.family = 6;
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 0);
  CHECK_EQ_INT(c.index, 5);
  CHECK_EQ_STR(c.text, "2001:db8:2::5");
  CHECK(strstr(c.why, "IPv6") != NULL);
  /* NCCL_IB_ADDR_RANGE wins over the family: it is the stronger statement. */
  pol = policy();
  CHECK_EQ_INT(mcp_gid_range_parse("10.2.0.0/16", &pol.range), 0);
  pol.has_range = 1;
  EXPECT_INDEX(&t, &pol, 3);
  CHECK_EQ_INT(mcp_gid_range_parse("2001:db8:2::/64", &pol.range), 0);
  EXPECT_INDEX(&t, &pol, 5);
  pol.roce_version = 1;
  EXPECT_INDEX(&t, &pol, 4);
  pol.roce_version = 2;
  CHECK_EQ_INT(mcp_gid_range_parse("10.9.0.0/16", &pol.range), 0);
  EXPECT_ERROR(&t, &pol, "NCCL_IB_ADDR_RANGE");
  /* Link-local addresses are never chosen automatically, even inside the range. */
  CHECK_EQ_INT(mcp_gid_range_parse("fe80::/10", &pol.range), 0);
  EXPECT_ERROR(&t, &pol, "link-local");
  CHECK_EQ_INT(mcp_gid_range_parse("10.2.0.0/33", &pol.range), -EINVAL);
  CHECK_EQ_INT(mcp_gid_range_parse("not-an-address/8", &pol.range), -EINVAL);
}

/* Pinning by address (MCPNET_RANK_MAP gid=IP): the entry carrying it, v2 preferred. */
static void test_by_address(void)
{
  struct mcp_gid_policy pol = policy();
  struct table t;

  table_load(&t, "cx-split", "mlx5_1", 1, "ens1f1np1");
  pol.has_address = 1;
  memset(pol.address, 0, 16);
  pol.address[10] = pol.address[11] = 0xff;
  inet_pton(AF_INET, "10.2.0.5", pol.address + 12);
  EXPECT_INDEX(&t, &pol, 3);
  inet_pton(AF_INET6, "2001:db8:2::5", pol.address);
  EXPECT_INDEX(&t, &pol, 5);
  inet_pton(AF_INET, "10.1.0.5", pol.address + 12);
  memset(pol.address, 0, 10);
  pol.address[10] = pol.address[11] = 0xff;
  EXPECT_ERROR(&t, &pol, "not the requested address");
}

/* NCCL_IB_GID_INDEX is taken as given only after it is checked. */
static void test_explicit_index(void)
{
  struct mcp_gid_policy pol = policy();
  struct mcp_gid_choice c;
  struct table t;
  char err[256];

  table_load(&t, "cx-split", "mlx5_0", 1, "ens1f0np0");
  pol.index = 3;
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 0);
  CHECK_EQ_INT(c.index, 3);
  CHECK(strstr(c.why, "NCCL_IB_GID_INDEX") != NULL);
  /* The v1 entry of the same address while v2 is preferred: NCCL uses an explicit index
   * as given, so mcpnet does too, and says (1 + err) that the versions differ. */
  pol.index = 2;
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 1);
  CHECK_EQ_INT(c.index, 2);
  CHECK_EQ_INT(c.type, MCP_GID_TYPE_ROCE_V1);
  CHECK(strstr(err, "GID index 2 is RoCE v1, not the v2 NCCL_IB_ROCE_VERSION_NUM=2 asks for") != NULL);
  CHECK(strstr(err, "used as given (set by NCCL_IB_GID_INDEX)") != NULL);
  pol.roce_version = 1;
  EXPECT_INDEX(&t, &pol, 2);
  pol.index = 3;
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 1);
  CHECK_EQ_INT(c.index, 3);
  CHECK(strstr(err, "GID index 3 is RoCE v2, not the v1 NCCL_IB_ROCE_VERSION_NUM=1 asks for") != NULL);
  pol.roce_version = 2;
  pol.index = 5; /* on the VLAN above the port, which is down */
  EXPECT_ERROR(&t, &pol, "down");
  pol.index = 7; /* an empty slot */
  EXPECT_ERROR(&t, &pol, "GID index 7 is empty");
  pol.index = 200; /* beyond the table */
  EXPECT_ERROR(&t, &pol, "GID index 200");
}

/* (g) A pod on a shared HCA: the host's GIDs and another pod's "eth0" are not ours. */
static void test_other_namespace(void)
{
  struct mcp_gid_policy pol = policy();
  struct table t;

  table_load(&t, "pod-foreign", "mlx5_0", 1, "net1");
  CHECK_EQ_INT(t.n, 7);
  EXPECT_INDEX(&t, &pol, 7);
  pol.index = 3; /* the host's IPv4 GID */
  EXPECT_ERROR(&t, &pol, "not in this network namespace");
  pol.index = 8; /* labelled eth0, and this namespace has an eth0: still not ours */
  EXPECT_ERROR(&t, &pol, "not in this network namespace");
  pol.index = 4; /* a slot the kernel refused to describe */
  EXPECT_ERROR(&t, &pol, "empty");
  /* Netlink said the port's netdev is not here at all: nothing is ours. */
  pol.index = -1;
  table_load(&t, "pod-foreign", "mlx5_0", 1, NULL);
  EXPECT_ERROR(&t, &pol, "another network namespace");
}

/* The lab's situation: names repeat, only the view built from netlink decides. */
static void test_names_prove_nothing(void)
{
  struct mcp_gid_policy pol = policy();
  struct mcp_gid_choice c;
  struct table t;
  char err[256];

  table_load(&t, "netns-eth0", "rxeA", 1, "eth0");
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 0);
  CHECK_EQ_INT(c.index, 1);
  CHECK_EQ_STR(c.text, "10.77.0.1");
  table_load(&t, "netns-eth0", "rxeB", 1, NULL);
  CHECK_EQ_STR(t.row[1].netdev, "eth0");
  EXPECT_ERROR(&t, &pol, "another network namespace");
  table_load(&t, "netns-eth0", "rxe0", 1, NULL);
  CHECK_EQ_STR(t.row[1].netdev, "lo");
  EXPECT_ERROR(&t, &pol, "another network namespace");
}

/* (d) A table starting at index 4 with holes: the scan goes past the refused slots. */
static void test_sparse(void)
{
  struct mcp_gid_policy pol = policy();
  struct mcp_gid_choice c;
  struct table t;
  char err[256];

  table_load(&t, "pod-sparse", "mlx5_3", 1, "net1");
  EXPECT_INDEX(&t, &pol, 9);
  pol.index = 4; /* a RoCE v1 entry: used as given, with a WARN */
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 1);
  CHECK_EQ_INT(c.index, 4);
  CHECK(strstr(err, "is RoCE v1, not the v2") != NULL);
  pol.index = 6;
  EXPECT_ERROR(&t, &pol, "empty");
  pol.index = 0;
  EXPECT_ERROR(&t, &pol, "empty");
  pol.index = 9;
  EXPECT_INDEX(&t, &pol, 9);
}

/* (e) IPv6-only: the IPv4 default finds no IPv4 GID and takes the routable IPv6 one
 * rather than the link-local entry 0 (NCCL's fallback, status 12 / vendor err 0xa). */
static void test_ipv6_only(void)
{
  struct mcp_gid_policy pol = policy();
  struct mcp_gid_choice c;
  struct table t;
  char err[256];

  table_load(&t, "bnxt-v6", "bnxt_re0", 1, "ens3f0np0");
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 0);
  CHECK_EQ_INT(c.index, 3);
  CHECK_EQ_INT(c.family, 6);
  CHECK_EQ_STR(c.text, "2001:db8:5::10");
  pol.family = 6;
  EXPECT_INDEX(&t, &pol, 3);
  CHECK_EQ_INT(mcp_gid_range_parse("10.0.0.0/8", &pol.range), 0);
  pol.has_range = 1;
  EXPECT_ERROR(&t, &pol, "NCCL_IB_ADDR_RANGE");
}

/* (b)+(h) The dual-port device: port 1 chooses, port 2's netdev is down. */
static void test_port_down(void)
{
  struct mcp_gid_policy pol = policy();
  struct table t;

  table_load(&t, "dualport", "mlx4_0", 1, "ens2");
  EXPECT_INDEX(&t, &pol, 3);
  table_load(&t, "dualport", "mlx4_0", 2, "ens2d1");
  EXPECT_ERROR(&t, &pol, "down");
  pol.index = 3;
  EXPECT_ERROR(&t, &pol, "its netdev is down");
}

/* (c) Each VF chooses from its own table. */
static void test_vfs(void)
{
  struct mcp_gid_policy pol = policy();
  struct mcp_gid_choice c;
  struct table t;
  char err[256];

  table_load(&t, "sriov", "mlx5_3", 1, "ens1f0v1");
  CHECK_EQ_INT(choose(&t, &pol, &c, err, sizeof(err)), 0);
  CHECK_EQ_STR(c.text, "10.1.2.5");
  /* The PF's netdev does not make the VF's GIDs ours. */
  table_load(&t, "sriov", "mlx5_3", 1, "ens1f0np0");
  EXPECT_ERROR(&t, &pol, "another network namespace");
}

/* A RoCE port of the fixture host netns-eth0 whose GID is the address text of type. */
static void refind_dev(struct mcp_net_dev *d, const char *ibdev, const char *text, int type)
{
  memset(d, 0, sizeof(*d));
  snprintf(d->ibdev, sizeof(d->ibdev), "%s", ibdev);
  d->port = 1;
  d->link_layer = IBV_LINK_LAYER_ETHERNET;
  CHECK_EQ_INT(inet_pton(AF_INET6, text, d->gid.raw), 1);
  d->gid.type = type;
}

/* Recovery's lookup after a flap finds our GID by address and type wherever the table
 * holds it now, whatever index was in use; not there, it says so rather than guess. The
 * fixture's device is unknown to this host's RDMA netlink, so the table's netdev names
 * decide which entries are ours (mcp_netns_port_rows). */
static void test_refind(void)
{
  const char *root = FIXTURES "netns-eth0/sys";
  struct mcp_net_dev d;
  char name[IF_NAMESIZE];

  if (mcp_netns_port_netdev("rxeA", 1, name, sizeof(name)) == 0) {
    fprintf(stderr, "  this host has an RDMA device named rxeA: the fixture's lookups are not checked\n");
    return;
  }
  refind_dev(&d, "rxeA", "::ffff:10.77.0.1", MCP_GID_TYPE_ROCE_V2);
  CHECK_EQ_INT(mcp_fabric_gid_refind(&d, NULL, root, 1), 1);
  CHECK_EQ_INT(mcp_fabric_gid_refind(&d, NULL, root, 3), 1); /* moved from 3: found at 1 */
  refind_dev(&d, "rxeA", "fe80::6c3e:1fff:fe2d:a01", MCP_GID_TYPE_ROCE_V2);
  CHECK_EQ_INT(mcp_fabric_gid_refind(&d, NULL, root, 0), 0);
  /* The address with another RoCE version, an address the table does not hold. */
  refind_dev(&d, "rxeA", "::ffff:10.77.0.1", MCP_GID_TYPE_ROCE_V1);
  CHECK_EQ_INT(mcp_fabric_gid_refind(&d, NULL, root, 1), -ENOENT);
  refind_dev(&d, "rxeA", "::ffff:10.77.0.2", MCP_GID_TYPE_ROCE_V2);
  CHECK_EQ_INT(mcp_fabric_gid_refind(&d, NULL, root, 1), -ENOENT);
  /* A port the device lacks; a device sysfs does not show. */
  refind_dev(&d, "rxeA", "::ffff:10.77.0.1", MCP_GID_TYPE_ROCE_V2);
  d.port = 2;
  CHECK_EQ_INT(mcp_fabric_gid_refind(&d, NULL, root, 1), -ENOENT);
  refind_dev(&d, "mcp-no-such-dev", "::ffff:10.77.0.1", MCP_GID_TYPE_ROCE_V2);
  CHECK(mcp_fabric_gid_refind(&d, NULL, root, 1) < 0);
  /* InfiniBand: GID 0 routed by LID, nothing to look up. */
  refind_dev(&d, "mcp-no-such-dev", "fe80::1", MCP_GID_TYPE_IB);
  d.link_layer = IBV_LINK_LAYER_INFINIBAND;
  CHECK_EQ_INT(mcp_fabric_gid_refind(&d, NULL, root, 0), 0);
}

int main(void)
{
  RUN_TEST(test_auto_v2_ipv4);
  RUN_TEST(test_family_and_range);
  RUN_TEST(test_by_address);
  RUN_TEST(test_explicit_index);
  RUN_TEST(test_other_namespace);
  RUN_TEST(test_names_prove_nothing);
  RUN_TEST(test_sparse);
  RUN_TEST(test_ipv6_only);
  RUN_TEST(test_port_down);
  RUN_TEST(test_vfs);
  RUN_TEST(test_refind);
  return TEST_EXIT();
}
