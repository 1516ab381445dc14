/*
 * test_net_result.c - what NCCL sees of each library error.
 *
 * Below net every call returns 0 or a negative errno; net maps it once. NCCL treats the
 * kinds differently, so each MCP_ERR_* must keep the ncclResult_t its callers returned
 * before the convention, and any other errno is a system error.
 */
#include <errno.h>

#include "mcp_test.h"
#include "core/err.h"
#include "net/net.h"

static void test_each_kind(void)
{
  CHECK_EQ_INT(mcp_net_result(0), ncclSuccess);
  CHECK_EQ_INT(mcp_net_result(MCP_ERR_SYSTEM), ncclSystemError);
  CHECK_EQ_INT(mcp_net_result(MCP_ERR_REMOTE), ncclRemoteError);
  CHECK_EQ_INT(mcp_net_result(MCP_ERR_INTERNAL), ncclInternalError);
  CHECK_EQ_INT(mcp_net_result(MCP_ERR_ARG), ncclInvalidArgument);
  CHECK_EQ_INT(mcp_net_result(MCP_ERR_USAGE), ncclInvalidUsage);
}

static void test_kinds_are_distinct(void)
{
  const int kinds[] = {MCP_ERR_SYSTEM, MCP_ERR_REMOTE, MCP_ERR_INTERNAL, MCP_ERR_ARG, MCP_ERR_USAGE};

  for (unsigned i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    CHECK(kinds[i] < 0);
    for (unsigned j = i + 1; j < sizeof(kinds) / sizeof(kinds[0]); j++)
      CHECK(kinds[i] != kinds[j]);
  }
}

static void test_other_errno_is_system(void)
{
  CHECK_EQ_INT(mcp_net_result(-ENOMEM), ncclSystemError);
  CHECK_EQ_INT(mcp_net_result(-ENODEV), ncclSystemError);
  CHECK_EQ_INT(mcp_net_result(-1), ncclSystemError);
}

int main(void)
{
  RUN_TEST(test_each_kind);
  RUN_TEST(test_kinds_are_distinct);
  RUN_TEST(test_other_errno_is_system);
  return TEST_EXIT();
}
