/*
 * test_match_list.c - NCCL's list grammar as both NCCL_IB_HCA and NCCL_SOCKET_IFNAME
 * read it now (one parser): the places where the two old copies disagreed, each
 * settled on NCCL's reading, plus mcpnet's one deliberate difference (spaces trimmed,
 * and reported so the caller can warn that NCCL itself would not match).
 */
#include <errno.h>
#include <string.h>

#include "mcp_test.h"
#include "mcpnet/fabric_hca.h"
#include "mcpnet/match_list.h"
#include "mcpnet/sock.h"
#include "mcpnet/text.h"

static struct mcp_match_list parse(const char *text, int with_ports)
{
  struct mcp_match_list l;
  struct mcp_match_fault f;

  CHECK_EQ_INT(mcp_match_list_parse(text, MCP_MATCH_NAME_MAX, with_ports, &l, &f), 0);
  return l;
}

static void test_grammar(void)
{
  struct mcp_match_list l = parse("^=mlx5_0:1,mlx5_2", 1);

  CHECK(l.exclude && l.exact);
  CHECK_EQ_INT(l.n, 2);
  CHECK_EQ_STR(l.e[0].name, "mlx5_0");
  CHECK_EQ_INT(l.e[0].port, 1);
  CHECK_EQ_INT(l.e[1].port, -1);
  CHECK(!mcp_match_allows(&l, "mlx5_0", 1));
  CHECK(mcp_match_allows(&l, "mlx5_0", 2));
  CHECK(mcp_match_allows(&l, "mlx5_20", 1)); /* exact: mlx5_2 does not name mlx5_20 */
  /* Only a leading '^' then '=' is syntax; "=^x" names the prefix "^x". */
  l = parse("=^x", 1);
  CHECK(l.exact && !l.exclude);
  CHECK_EQ_STR(l.e[0].name, "^x");
  CHECK_EQ_INT(l.ntrimmed, 0);
}

/* Old HCA parser kept " mlx5_1" (matching nothing, a strict-mode failure); the old
 * socket parser trimmed. Both trim now, and say they did. */
static void test_spaces_trimmed_and_reported(void)
{
  struct mcp_match_list l;
  char err[256] = "";

  CHECK_EQ_INT(mcp_hca_parse("mlx5_0, mlx5_1 ,mlx5_2", &l, err, sizeof(err)), 0);
  CHECK_EQ_INT(l.n, 3);
  CHECK_EQ_STR(l.e[1].name, "mlx5_1");
  CHECK(mcp_match_allows(&l, "mlx5_1", 1));
  CHECK_EQ_INT(l.ntrimmed, 1);
  CHECK_EQ_STR(l.trimmed, "' mlx5_1 '");
  /* Spaces before a port, and a tab, are white space too. */
  CHECK_EQ_INT(mcp_hca_parse("\tmlx5_0 :2", &l, err, sizeof(err)), 0);
  CHECK_EQ_STR(l.e[0].name, "mlx5_0");
  CHECK_EQ_INT(l.e[0].port, 2);
  CHECK_EQ_INT(l.ntrimmed, 1);
  /* A token of spaces only is an empty token: skipped, like ",,". */
  l = parse("eth0, ,ib", 0);
  CHECK_EQ_INT(l.n, 2);
  CHECK_EQ_INT(l.ntrimmed, 0);
  CHECK_EQ_INT(mcp_sock_ifspec_parse("eth0, ib0", &l, err, sizeof(err)), 0);
  CHECK_EQ_INT(l.ntrimmed, 1);
  CHECK(mcp_match_allows(&l, "ib0", -1));
}

/* Old socket parser kept ":1" in the name ("eth0:1" named only aliases); NCCL splits
 * the port off every list and ignores it for interfaces. */
static void test_socket_port_suffix_dropped(void)
{
  struct mcp_match_list l;
  char msg[MCP_SOCK_MSGLEN] = "";

  CHECK_EQ_INT(mcp_sock_ifspec_parse("eth0:1,=x", &l, msg, sizeof(msg)), 0);
  CHECK_EQ_INT(l.n, 2);
  CHECK_EQ_STR(l.e[0].name, "eth0");
  CHECK_EQ_INT(l.e[0].port, -1);
  CHECK(mcp_match_allows(&l, "eth0", -1));
  CHECK(mcp_match_allows(&l, "eth01", -1)); /* still a prefix */
  /* Interfaces have no ports, so a port that HCA lists refuse is ignored here. */
  CHECK_EQ_INT(mcp_sock_ifspec_parse("eth0:x", &l, msg, sizeof(msg)), 0);
  CHECK_EQ_STR(l.e[0].name, "eth0");
  /* A port with no name is refused for both. */
  CHECK_EQ_INT(mcp_sock_ifspec_parse(":1", &l, msg, sizeof(msg)), -EINVAL);
  CHECK(strstr(msg, "no interface name") != NULL);
}

static void test_limits(void)
{
  struct mcp_match_list l;
  struct mcp_match_fault f;

  CHECK_EQ_INT(mcp_match_list_parse("abcdefghijklmnop", 16, 0, &l, &f), -EINVAL);
  CHECK_EQ_INT(f.kind, MCP_MATCH_TOO_LONG);
  CHECK_EQ_INT(f.token_len, 16);
  CHECK_EQ_INT(mcp_match_list_parse("abcdefghijklmno", 16, 0, &l, &f), 0);
  CHECK_EQ_INT(mcp_match_list_parse("a:1:2:3", 64, 1, &l, &f), 0);
  CHECK_EQ_INT(l.e[0].port, 1);
  CHECK_EQ_INT(mcp_match_list_parse("a:0", 64, 1, &l, &f), -EINVAL);
  CHECK_EQ_INT(f.kind, MCP_MATCH_BAD_PORT);
  CHECK_EQ_STR(f.port, "0");
}

static void test_trim_helper(void)
{
  char buf[] = "  \tkey = value \n";
  const char *s = buf;
  size_t n = strlen(buf);

  CHECK_EQ_INT((int)mcp_trim_span(&s, &n), 11);
  CHECK(strncmp(s, "key = value", n) == 0);
  CHECK_EQ_STR(mcp_trim_inplace(buf), "key = value");
  s = "   ";
  n = 3;
  CHECK_EQ_INT((int)mcp_trim_span(&s, &n), 0);
}

int main(void)
{
  RUN_TEST(test_grammar);
  RUN_TEST(test_spaces_trimmed_and_reported);
  RUN_TEST(test_socket_port_suffix_dropped);
  RUN_TEST(test_limits);
  RUN_TEST(test_trim_helper);
  return TEST_EXIT();
}
