/*
 * test_fabric_sysfs.c - the sysfs reader on fixture trees shaped like real hosts
 * (test/unit/fixtures/make-fixtures.sh): identity, port state, sparse GID tables whose
 * refused slots are skipped, GID types and netdevs, P_Key tables, PF/VF links.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "fabric/fabric_gid.h"
#include "fabric/fabric_sysfs.h"

#define FIXTURES MCP_SOURCE_DIR "/test/unit/fixtures/"

static const char *root_of(const char *host)
{
  static char path[512];
  snprintf(path, sizeof(path), FIXTURES "%s/sys", host);
  return path;
}

static int load(const char *host, const char *name, struct mcp_sysfs_dev *dev)
{
  char err[256] = "";
  int rc = mcp_sysfs_dev_read(root_of(host), name, dev, err, sizeof(err));
  if (rc != 0)
    fprintf(stderr, "reading %s/%s: %s\n", host, name, err);
  return rc;
}

static int ends_with(const char *s, const char *tail)
{
  size_t a = s ? strlen(s) : 0, b = strlen(tail);
  return s != NULL && a >= b && strcmp(s + a - b, tail) == 0;
}

static void v4mapped(const char *ip, uint8_t raw[16])
{
  memset(raw, 0, 16);
  raw[10] = raw[11] = 0xff;
  inet_pton(AF_INET, ip, raw + 12);
}

static void test_parsers(void)
{
  uint64_t g = 0;
  char name[24];
  int num = 0, mbps = 0;

  CHECK_EQ_INT(mcp_sysfs_parse_guid("0c42:a103:00b5:3e10", &g), 0);
  CHECK(g == 0x0c42a10300b53e10ull);
  CHECK_EQ_INT(mcp_sysfs_parse_guid("0c42:a103:00b5", &g), -EINVAL);
  CHECK_EQ_INT(mcp_sysfs_parse_guid("0c42:a103:00b5:3e1g", &g), -EINVAL);
  CHECK_EQ_INT(mcp_sysfs_parse_state("4: ACTIVE", &num, name, sizeof(name)), 0);
  CHECK_EQ_INT(num, 4);
  CHECK_EQ_STR(name, "ACTIVE");
  CHECK_EQ_INT(mcp_sysfs_parse_state("5: LinkUp", &num, name, sizeof(name)), 0);
  CHECK_EQ_INT(num, 5);
  CHECK_EQ_STR(name, "LinkUp");
  CHECK_EQ_INT(mcp_sysfs_parse_state("ACTIVE", &num, name, sizeof(name)), -EINVAL);
  CHECK_EQ_INT(mcp_sysfs_parse_rate("100 Gb/sec (4X EDR)", &mbps), 0);
  CHECK_EQ_INT(mbps, 100000);
  CHECK_EQ_INT(mcp_sysfs_parse_rate("2.5 Gb/sec (1X SDR)", &mbps), 0);
  CHECK_EQ_INT(mbps, 2500);
  CHECK_EQ_INT(mcp_sysfs_parse_rate("Invalid argument", &mbps), -EINVAL);
}

static void test_dev_names(void)
{
  char names[4][MCP_DEV_NAME_MAX];

  CHECK_EQ_INT(mcp_sysfs_dev_names(root_of("sriov"), names, 4), 3);
  CHECK_EQ_STR(names[0], "mlx5_0");
  CHECK_EQ_STR(names[1], "mlx5_2");
  CHECK_EQ_STR(names[2], "mlx5_3");
  /* More devices than room: the count says so. */
  CHECK_EQ_INT(mcp_sysfs_dev_names(root_of("netns-eth0"), names, 2), 3);
  /* No RDMA on this "host" at all. */
  CHECK_EQ_INT(mcp_sysfs_dev_names(FIXTURES "no-such-host/sys", names, 4), 0);
}

/* (a) Split ports: two devices, one sys_image_guid; (f) v1 and v2 for one address. */
static void test_split_ports(void)
{
  struct mcp_sysfs_dev d0, d1;
  const struct mcp_sysfs_port *p;
  uint8_t raw[16];

  CHECK_EQ_INT(load("cx-split", "mlx5_0", &d0), 0);
  CHECK_EQ_INT(load("cx-split", "mlx5_1", &d1), 0);
  CHECK(d0.node_guid == 0x0c42a10300b53e10ull);
  CHECK(d1.node_guid == 0x0c42a10300b53e11ull);
  CHECK(d0.sys_image_guid == d1.sys_image_guid);
  CHECK(ends_with(d0.device_path, "/devices/pci0000:00/0000:3b:00.0"));
  CHECK(ends_with(d1.device_path, "/devices/pci0000:00/0000:3b:00.1"));
  CHECK(d0.pf_path == NULL);
  CHECK_EQ_STR(d0.driver, "mlx5_core");
  CHECK_EQ_INT(d0.nport, 1);
  p = mcp_sysfs_port_find(&d0, 1);
  CHECK(p != NULL);
  CHECK(mcp_sysfs_port_find(&d0, 2) == NULL);
  if (p != NULL) {
    CHECK_EQ_INT(p->state, 4);
    CHECK_EQ_STR(p->state_name, "ACTIVE");
    CHECK_EQ_INT(p->phys_state, 5);
    CHECK_EQ_INT(p->link_layer, MCP_LINK_LAYER_ETHERNET);
    CHECK_EQ_STR(p->rate, "100 Gb/sec (4X EDR)");
    CHECK_EQ_INT(p->rate_mbps, 100000);
    CHECK_EQ_INT(p->lid, 0);
    CHECK_EQ_INT(p->gid_slots, 8);
    CHECK_EQ_INT(p->ngid, 6);
    CHECK_EQ_INT(p->gid_skipped, 2);
    v4mapped("10.1.0.5", raw);
    CHECK_EQ_INT(p->gid[2].index, 2);
    CHECK(memcmp(p->gid[2].raw, raw, 16) == 0);
    CHECK_EQ_INT(p->gid[2].type, MCP_GID_TYPE_ROCE_V1);
    CHECK(memcmp(p->gid[3].raw, raw, 16) == 0);
    CHECK_EQ_INT(p->gid[3].type, MCP_GID_TYPE_ROCE_V2);
    CHECK_EQ_STR(p->gid[3].netdev, "ens1f0np0");
    CHECK_EQ_STR(p->gid[5].netdev, "ens1f0np0.100");
    CHECK_EQ_INT(p->npkey, 1);
    CHECK_EQ_INT(p->pkey[0], 0xffff);
  }
  mcp_sysfs_dev_free(&d0);
  mcp_sysfs_dev_free(&d1);
}

/* (b) A true dual-port device; (h) its second port DOWN. */
static void test_dual_port(void)
{
  struct mcp_sysfs_dev d;
  const struct mcp_sysfs_port *p1, *p2;

  CHECK_EQ_INT(load("dualport", "mlx4_0", &d), 0);
  CHECK_EQ_INT(d.nport, 2);
  CHECK_EQ_STR(d.driver, "mlx4_core");
  p1 = mcp_sysfs_port_find(&d, 1);
  p2 = mcp_sysfs_port_find(&d, 2);
  CHECK(p1 != NULL && p2 != NULL);
  if (p1 != NULL && p2 != NULL) {
    CHECK_EQ_INT(p1->state, 4);
    CHECK_EQ_INT(p2->state, 1);
    CHECK_EQ_STR(p2->state_name, "DOWN");
    CHECK_EQ_INT(p2->phys_state, 3);
    CHECK_EQ_STR(p2->phys_state_name, "Disabled");
    CHECK_EQ_STR(p2->gid[3].netdev, "ens2d1");
    CHECK_EQ_INT(p1->rate_mbps, 40000);
  }
  mcp_sysfs_dev_free(&d);
}

/* (c) PF + VFs: same sys_image_guid; only physfn tells a VF from a second port. */
static void test_pf_vf(void)
{
  struct mcp_sysfs_dev pf, vf0, vf1;

  CHECK_EQ_INT(load("sriov", "mlx5_0", &pf), 0);
  CHECK_EQ_INT(load("sriov", "mlx5_2", &vf0), 0);
  CHECK_EQ_INT(load("sriov", "mlx5_3", &vf1), 0);
  CHECK(pf.sys_image_guid == vf0.sys_image_guid && vf0.sys_image_guid == vf1.sys_image_guid);
  CHECK(pf.pf_path == NULL);
  CHECK(ends_with(vf0.device_path, "/0000:3b:00.2"));
  CHECK(ends_with(vf1.device_path, "/0000:3b:00.3"));
  CHECK(ends_with(vf0.pf_path, "/0000:3b:00.0"));
  CHECK(vf0.pf_path != NULL && pf.device_path != NULL && strcmp(vf0.pf_path, pf.device_path) == 0);
  CHECK(vf1.pf_path != NULL && pf.device_path != NULL && strcmp(vf1.pf_path, pf.device_path) == 0);
  CHECK_EQ_STR(vf1.driver, "mlx5_core");
  mcp_sysfs_dev_free(&pf);
  mcp_sysfs_dev_free(&vf0);
  mcp_sysfs_dev_free(&vf1);
}

/* (d) A table that starts at index 4, with holes: every slot is looked at. */
static void test_sparse(void)
{
  struct mcp_sysfs_dev d;
  const struct mcp_sysfs_port *p;

  CHECK_EQ_INT(load("pod-sparse", "mlx5_3", &d), 0);
  p = mcp_sysfs_port_find(&d, 1);
  CHECK(p != NULL);
  if (p != NULL) {
    CHECK_EQ_INT(p->gid_slots, 12);
    CHECK_EQ_INT(p->ngid, 4);
    CHECK_EQ_INT(p->gid_skipped, 8);
    CHECK_EQ_INT(p->gid[0].index, 4);
    CHECK_EQ_INT(p->gid[1].index, 5);
    CHECK_EQ_INT(p->gid[2].index, 8);
    CHECK_EQ_INT(p->gid[3].index, 9);
    CHECK_EQ_STR(p->gid[3].netdev, "net1");
  }
  mcp_sysfs_dev_free(&d);
}

/* (e) IPv6-only GIDs. */
static void test_ipv6_only(void)
{
  struct mcp_sysfs_dev d;
  const struct mcp_sysfs_port *p;
  int i;

  CHECK_EQ_INT(load("bnxt-v6", "bnxt_re0", &d), 0);
  CHECK_EQ_STR(d.driver, "bnxt_en");
  p = mcp_sysfs_port_find(&d, 1);
  CHECK(p != NULL);
  if (p != NULL) {
    CHECK_EQ_INT(p->ngid, 4);
    for (i = 0; i < p->ngid; i++)
      CHECK_EQ_INT(mcp_gid_family(p->gid[i].raw), 6);
  }
  mcp_sysfs_dev_free(&d);
}

/* (g) Slots the kernel refuses to describe are skipped; readable ones are kept whatever
 * their netdev, since deciding "ours" is not the reader's job. */
static void test_foreign(void)
{
  struct mcp_sysfs_dev d;
  const struct mcp_sysfs_port *p;

  CHECK_EQ_INT(load("pod-foreign", "mlx5_0", &d), 0);
  p = mcp_sysfs_port_find(&d, 1);
  CHECK(p != NULL);
  if (p != NULL) {
    CHECK_EQ_INT(p->gid_slots, 9);
    CHECK_EQ_INT(p->ngid, 7);
    CHECK_EQ_INT(p->gid_skipped, 2);
    CHECK_EQ_INT(p->gid[4].index, 6);
    CHECK_EQ_STR(p->gid[0].netdev, "ens1f0np0");
    CHECK_EQ_STR(p->gid[6].netdev, "eth0");
  }
  mcp_sysfs_dev_free(&d);
}

/* The lab's namespaces seen from A: the names read eth0, eth0 and lo. */
static void test_names_repeat(void)
{
  static const char *const devs[3] = {"rxeA", "rxeB", "rxe0"};
  static const char *const want[3] = {"eth0", "eth0", "lo"};
  int i;

  for (i = 0; i < 3; i++) {
    struct mcp_sysfs_dev d;
    CHECK_EQ_INT(load("netns-eth0", devs[i], &d), 0);
    CHECK(d.device_path == NULL);
    CHECK_EQ_STR(d.driver, "rxe");
    CHECK_EQ_INT(d.nport, 1);
    if (d.nport == 1 && d.port[0].ngid > 1)
      CHECK_EQ_STR(d.port[0].gid[1].netdev, want[i]);
    CHECK_EQ_INT(d.port[0].rate_mbps, 2500);
    mcp_sysfs_dev_free(&d);
  }
}

/* (i) InfiniBand: GIDs without netdev are kept, P_Key tables with their holes. */
static void test_ib_pkeys(void)
{
  struct mcp_sysfs_dev full, lim;

  CHECK_EQ_INT(load("ib-pkeys", "mlx5_0", &full), 0);
  CHECK_EQ_INT(load("ib-pkeys", "mlx5_1", &lim), 0);
  CHECK_EQ_INT(full.port[0].link_layer, MCP_LINK_LAYER_INFINIBAND);
  CHECK_EQ_INT(full.port[0].lid, 0x12);
  CHECK_EQ_INT(lim.port[0].lid, 0x13);
  CHECK_EQ_INT(full.port[0].rate_mbps, 200000);
  CHECK_EQ_INT(full.port[0].ngid, 1);
  CHECK_EQ_INT(full.port[0].gid[0].type, MCP_GID_TYPE_IB);
  CHECK_EQ_STR(full.port[0].gid[0].netdev, "");
  CHECK_EQ_INT(full.port[0].npkey, 4);
  CHECK_EQ_INT(full.port[0].pkey[0], 0xffff);
  CHECK_EQ_INT(full.port[0].pkey[1], 0x8001);
  CHECK_EQ_INT(full.port[0].pkey[2], 0);
  CHECK_EQ_INT(lim.port[0].pkey[0], 0x7fff);
  CHECK_EQ_INT(lim.port[0].pkey[1], 0x0001);
  mcp_sysfs_dev_free(&full);
  mcp_sysfs_dev_free(&lim);
}

static void test_missing_device(void)
{
  struct mcp_sysfs_dev d;
  char err[256] = "";

  CHECK_EQ_INT(mcp_sysfs_dev_read(root_of("cx-split"), "mlx5_9", &d, err, sizeof(err)), -ENOENT);
  CHECK(strstr(err, "mlx5_9") != NULL);
  mcp_sysfs_dev_free(&d);
}

int main(void)
{
  RUN_TEST(test_parsers);
  RUN_TEST(test_dev_names);
  RUN_TEST(test_split_ports);
  RUN_TEST(test_dual_port);
  RUN_TEST(test_pf_vf);
  RUN_TEST(test_sparse);
  RUN_TEST(test_ipv6_only);
  RUN_TEST(test_foreign);
  RUN_TEST(test_names_repeat);
  RUN_TEST(test_ib_pkeys);
  RUN_TEST(test_missing_device);
  return TEST_EXIT();
}
