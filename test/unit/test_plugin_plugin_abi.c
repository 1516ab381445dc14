/*
 * test_plugin_plugin_abi.c - the NCCL ABI declarations in include/nccl/, checked at run time.
 *
 * The headers already pin every size and offset with static asserts; this program
 * repeats the ones NCCL most depends on so a ctest log shows the layout that was
 * actually compiled (useful when someone builds on a new compiler or architecture).
 */
#include <stddef.h>

#include "mcp_test.h"
#include "nccl/net.h"

#define SHOW_SIZE(type, expect)                          \
  do {                                                   \
    printf("  sizeof(%s) = %zu\n", #type, sizeof(type)); \
    CHECK_EQ_INT(sizeof(type), (expect));                \
  } while (0)

static void test_sizes(void)
{
  SHOW_SIZE(ncclNetProperties_v12_t, 128);
  SHOW_SIZE(ncclNetVDeviceProps_v12_t, 36);
  SHOW_SIZE(ncclNet_v12_t, 176);
  SHOW_SIZE(ncclNetProperties_v11_t, 112);
  SHOW_SIZE(ncclNetProperties_v10_t, 104);
  SHOW_SIZE(ncclNetProperties_v9_t, 104);
  SHOW_SIZE(ncclNetProperties_v8_t, 64);
  SHOW_SIZE(ncclNetVDeviceProps_v11_t, 20);
  SHOW_SIZE(ncclNetDeviceHandle_v11_t, 32);
  SHOW_SIZE(ncclNetAttr_v11_t, 44);
  SHOW_SIZE(ncclNet_v11_t, 176);
  SHOW_SIZE(ncclNet_v10_t, 160);
  SHOW_SIZE(ncclNet_v9_t, 160);
  SHOW_SIZE(ncclNet_v8_t, 152);
}

/* The offsets where the versions diverge, and the slots NCCL 2.28 added. */
static void test_offsets(void)
{
  CHECK_EQ_INT(offsetof(ncclNetProperties_v11_t, forceFlush), 32);
  CHECK_EQ_INT(offsetof(ncclNetProperties_v11_t, vProps), 64);
  CHECK_EQ_INT(offsetof(ncclNetProperties_v11_t, maxP2pBytes), 88);
  CHECK_EQ_INT(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize), 104);
  CHECK_EQ_INT(offsetof(ncclNetProperties_v8_t, netDeviceVersion), 56);
  CHECK_EQ_INT(offsetof(ncclNet_v11_t, finalize), 20 * sizeof(void *));
  CHECK_EQ_INT(offsetof(ncclNet_v11_t, setNetAttr), 21 * sizeof(void *));
  CHECK_EQ_INT(offsetof(ncclNet_v10_t, makeVDevice), 19 * sizeof(void *));
  CHECK_EQ_INT(offsetof(ncclNet_v8_t, irecvConsumed), 18 * sizeof(void *));
}

/* NCCL 2.30's ncclNetProperties_v12_t, offset by offset as its header (v2.30.7-1,
 * src/include/plugin/net/net_v12.h) lays it out on LP64: v11's fields up to vProps,
 * whose 8 devices end at 100, so every later field moves (maxP2pBytes 104, not v11's
 * 88), then the two int16_t: railId 124, planeId 126, 128 bytes in all. */
static void test_v12_offsets(void)
{
  static const struct {
    const char *field;
    size_t got, want;
  } f[] = {
    {"name", offsetof(ncclNetProperties_v12_t, name), 0},
    {"pciPath", offsetof(ncclNetProperties_v12_t, pciPath), 8},
    {"guid", offsetof(ncclNetProperties_v12_t, guid), 16},
    {"ptrSupport", offsetof(ncclNetProperties_v12_t, ptrSupport), 24},
    {"regIsGlobal", offsetof(ncclNetProperties_v12_t, regIsGlobal), 28},
    {"forceFlush", offsetof(ncclNetProperties_v12_t, forceFlush), 32},
    {"speed", offsetof(ncclNetProperties_v12_t, speed), 36},
    {"port", offsetof(ncclNetProperties_v12_t, port), 40},
    {"latency", offsetof(ncclNetProperties_v12_t, latency), 44},
    {"maxComms", offsetof(ncclNetProperties_v12_t, maxComms), 48},
    {"maxRecvs", offsetof(ncclNetProperties_v12_t, maxRecvs), 52},
    {"netDeviceType", offsetof(ncclNetProperties_v12_t, netDeviceType), 56},
    {"netDeviceVersion", offsetof(ncclNetProperties_v12_t, netDeviceVersion), 60},
    {"vProps", offsetof(ncclNetProperties_v12_t, vProps), 64},
    {"vProps.devs", offsetof(ncclNetProperties_v12_t, vProps.devs), 68},
    {"maxP2pBytes", offsetof(ncclNetProperties_v12_t, maxP2pBytes), 104},
    {"maxCollBytes", offsetof(ncclNetProperties_v12_t, maxCollBytes), 112},
    {"maxMultiRequestSize", offsetof(ncclNetProperties_v12_t, maxMultiRequestSize), 120},
    {"railId", offsetof(ncclNetProperties_v12_t, railId), 124},
    {"planeId", offsetof(ncclNetProperties_v12_t, planeId), 126},
  };

  for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
    if (f[i].got != f[i].want)
      fprintf(stderr, "ncclNetProperties_v12_t.%s at %zu, NCCL 2.30 has it at %zu\n", f[i].field, f[i].got,
              f[i].want);
    CHECK_EQ_INT(f[i].got, f[i].want);
  }
  CHECK_EQ_INT(sizeof(((ncclNetProperties_v12_t *)0)->railId), 2);
  CHECK_EQ_INT(sizeof(((ncclNetProperties_v12_t *)0)->planeId), 2);
  CHECK_EQ_INT(NCCL_NET_MAX_DEVS_PER_NIC_V12, 8);
  CHECK_EQ_INT(NCCL_NET_ID_UNDEF, -1);
  /* The table: v11's 22 slots in v11's order. */
  CHECK_EQ_INT(offsetof(ncclNet_v12_t, getProperties), 3 * sizeof(void *));
  CHECK_EQ_INT(offsetof(ncclNet_v12_t, makeVDevice), 19 * sizeof(void *));
  CHECK_EQ_INT(offsetof(ncclNet_v12_t, finalize), 20 * sizeof(void *));
  CHECK_EQ_INT(offsetof(ncclNet_v12_t, setNetAttr), 21 * sizeof(void *));
}

int main(void)
{
  RUN_TEST(test_sizes);
  RUN_TEST(test_offsets);
  RUN_TEST(test_v12_offsets);
  return TEST_EXIT();
}
