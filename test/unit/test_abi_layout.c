/*
 * test_abi_layout.c - the NCCL ABI declarations in include/nccl/, checked at run time.
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

int main(void)
{
  RUN_TEST(test_sizes);
  RUN_TEST(test_offsets);
  return TEST_EXIT();
}
