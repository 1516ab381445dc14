/*
 * test_fabric_netns.c - the namespace view on fixture trees (a netdev and the upper
 * devices this namespace links above it, with their up state; GID rows marked from it)
 * and the RDMA netlink query's answers where no such device exists. The netlink answer
 * for real ports is asserted in the lab (test/lab/scenarios/single_netns.sh).
 */
#include <errno.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "fabric/fabric_netns.h"

#define FIXTURES MCP_SOURCE_DIR "/test/unit/fixtures/"

static void test_view_uppers(void)
{
  struct mcp_netns_view v = {.n = 0};
  int i;

  CHECK_EQ_INT(mcp_netns_view_add(&v, FIXTURES "cx-split/sys", "ens1f0np0"), 2);
  CHECK_EQ_INT(v.n, 2);
  i = mcp_netns_view_find(&v, "ens1f0np0");
  CHECK(i >= 0 && v.dev[i].up);
  i = mcp_netns_view_find(&v, "ens1f0np0.100");
  CHECK(i >= 0 && !v.dev[i].up);
  CHECK_EQ_INT(mcp_netns_view_find(&v, "ens1f1np1"), -ENOENT);
  /* Adding again adds nothing; an unknown or empty name adds nothing. */
  CHECK_EQ_INT(mcp_netns_view_add(&v, FIXTURES "cx-split/sys", "ens1f0np0"), 0);
  CHECK_EQ_INT(mcp_netns_view_add(&v, FIXTURES "cx-split/sys", "eth9"), 0);
  CHECK_EQ_INT(mcp_netns_view_add(&v, FIXTURES "cx-split/sys", ""), 0);
  CHECK_EQ_INT(v.n, 2);
  /* lo's operstate is "unknown", which counts as up. */
  CHECK_EQ_INT(mcp_netns_view_add(&v, FIXTURES "cx-split/sys", "lo"), 1);
  CHECK(v.dev[mcp_netns_view_find(&v, "lo")].up);
}

static void test_rows(void)
{
  struct mcp_netns_view v = {.n = 0};
  struct mcp_gid_entry rows[16];
  struct mcp_sysfs_dev d;
  char err[256];
  int n;

  CHECK_EQ_INT(mcp_sysfs_dev_read(FIXTURES "cx-split/sys", "mlx5_0", &d, err, sizeof(err)), 0);
  mcp_netns_view_add(&v, FIXTURES "cx-split/sys", "ens1f0np0");
  n = mcp_netns_gid_rows(&d.port[0], &v, rows, 16);
  CHECK_EQ_INT(n, 6);
  CHECK_EQ_INT(rows[3].index, 3);
  CHECK(rows[3].netdev_in_ns && rows[3].netdev_up);
  CHECK(rows[5].netdev_in_ns && !rows[5].netdev_up);
  /* max is honoured. */
  CHECK_EQ_INT(mcp_netns_gid_rows(&d.port[0], &v, rows, 2), 2);
  /* An empty view: nothing is ours. */
  v.n = 0;
  n = mcp_netns_gid_rows(&d.port[0], &v, rows, 16);
  CHECK_EQ_INT(n, 6);
  CHECK(!rows[3].netdev_in_ns && !rows[3].netdev_up);
  mcp_sysfs_dev_free(&d);
}

static void test_netlink_unknown_device(void)
{
  char name[IF_NAMESIZE] = "junk";
  int rc = mcp_netns_port_netdev("mcp-no-such-dev", 1, name, sizeof(name));

  /* No RDMA in this kernel (-EPROTONOSUPPORT), or no such device (-ENODEV), or a
   * sandbox that forbids the socket: never success, never a stale name. */
  if (rc >= 0)
    fprintf(stderr, "netlink answered %d for a device that does not exist\n", rc);
  CHECK(rc < 0);
  CHECK_EQ_STR(name, "");
  CHECK_EQ_INT(mcp_netns_port_netdev("mcp-no-such-dev", 0, name, sizeof(name)), -EINVAL);
}

int main(void)
{
  RUN_TEST(test_view_uppers);
  RUN_TEST(test_rows);
  RUN_TEST(test_netlink_unknown_device);
  return TEST_EXIT();
}
