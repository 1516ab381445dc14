/*
 * test_conn_link_wr_kind.c - the one table of work-request kind names that completion-error
 * messages use: the texts users and docs/messages.md know, for every kind.
 */
#include "mcp_test.h"
#include "xfer/comm.h"

static void test_names(void)
{
  CHECK_EQ_STR(mcp_wr_kind_name(MCP_WR_SEND), "data write");
  CHECK_EQ_STR(mcp_wr_kind_name(MCP_WR_GROUP), "data write");
  CHECK_EQ_STR(mcp_wr_kind_name(MCP_WR_CTS), "clear-to-send write");
  CHECK_EQ_STR(mcp_wr_kind_name(MCP_WR_RECV), "receive");
  CHECK_EQ_STR(mcp_wr_kind_name(MCP_WR_FLUSH), "flush read");
  CHECK_EQ_STR(mcp_wr_kind_name(MCP_WR_KIND(MCP_WR(MCP_WR_CTS, 0xffff, 7, 3))), "clear-to-send write");
  /* Values no WR carries still name something, never NULL. */
  CHECK_EQ_STR(mcp_wr_kind_name(0), "data write");
  CHECK_EQ_STR(mcp_wr_kind_name(255), "data write");
}

int main(void)
{
  RUN_TEST(test_names);
  return TEST_EXIT();
}
