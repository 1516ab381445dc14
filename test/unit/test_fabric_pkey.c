/*
 * test_fabric_pkey.c - P_Key values resolved against the tables of the ib-pkeys fixture
 * host: low 15 bits match, full membership preferred, absent keys refused, two limited
 * members cannot talk.
 */
#include <errno.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "fabric/fabric_pkey.h"
#include "fabric/fabric_sysfs.h"

#define ROOT MCP_SOURCE_DIR "/test/unit/fixtures/ib-pkeys/sys"

static void test_full_member_table(void)
{
  struct mcp_sysfs_dev d;
  char err[256], text[64];
  int full = -1;

  CHECK_EQ_INT(mcp_sysfs_dev_read(ROOT, "mlx5_0", &d, err, sizeof(err)), 0);
  if (d.nport == 1) {
    const uint16_t *t = d.port[0].pkey;
    int n = d.port[0].npkey;
    CHECK_EQ_INT(mcp_pkey_resolve(t, n, 0xffff, &full), 0);
    CHECK_EQ_INT(full, 1);
    CHECK_EQ_INT(mcp_pkey_resolve(t, n, 0x7fff, &full), 0); /* same partition */
    CHECK_EQ_INT(mcp_pkey_resolve(t, n, 0x8001, &full), 1);
    CHECK_EQ_INT(full, 1);
    CHECK_EQ_INT(mcp_pkey_resolve(t, n, 0x0001, &full), 1);
    CHECK_EQ_INT(mcp_pkey_resolve(t, n, 0x8002, &full), -ENOENT);
    CHECK_EQ_INT(mcp_pkey_resolve(t, n, 0x0000, &full), -EINVAL);
    CHECK_EQ_INT(mcp_pkey_resolve(t, n, 0x8000, &full), -EINVAL);
    CHECK_EQ_INT(mcp_pkey_resolve(t, n, 0x18001, &full), -EINVAL);
    mcp_pkey_format_table(t, n, text, sizeof(text));
    CHECK_EQ_STR(text, "0xffff, 0x8001");
  }
  mcp_sysfs_dev_free(&d);
}

static void test_limited_member_table(void)
{
  struct mcp_sysfs_dev d;
  char err[256];
  int full = -1;

  CHECK_EQ_INT(mcp_sysfs_dev_read(ROOT, "mlx5_1", &d, err, sizeof(err)), 0);
  if (d.nport == 1) {
    CHECK_EQ_INT(mcp_pkey_resolve(d.port[0].pkey, d.port[0].npkey, 0xffff, &full), 0);
    CHECK_EQ_INT(full, 0);
    CHECK_EQ_INT(mcp_pkey_resolve(d.port[0].pkey, d.port[0].npkey, 0x8001, &full), 1);
    CHECK_EQ_INT(full, 0);
  }
  mcp_sysfs_dev_free(&d);
}

static void test_full_preferred_and_talk(void)
{
  static const uint16_t both[] = {0xffff, 0x0001, 0x8001};
  static const uint16_t none[] = {0, 0};
  char text[16];
  int full = -1;

  CHECK_EQ_INT(mcp_pkey_resolve(both, 3, 0x8001, &full), 2);
  CHECK_EQ_INT(full, 1);
  CHECK(mcp_pkey_can_talk(1, 0));
  CHECK(mcp_pkey_can_talk(0, 1));
  CHECK(mcp_pkey_can_talk(1, 1));
  CHECK(!mcp_pkey_can_talk(0, 0));
  mcp_pkey_format_table(none, 2, text, sizeof(text));
  CHECK_EQ_STR(text, "empty");
}

int main(void)
{
  RUN_TEST(test_full_member_table);
  RUN_TEST(test_limited_member_table);
  RUN_TEST(test_full_preferred_and_talk);
  return TEST_EXIT();
}
