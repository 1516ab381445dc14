/*
 * test_core_match_list.c - NCCL's list grammar as both NCCL_IB_HCA and NCCL_SOCKET_IFNAME
 * read it now (one parser): the places where the two old copies disagreed, each
 * settled on NCCL's reading, plus mcpnet's one deliberate difference (spaces trimmed,
 * and reported so the caller can warn that NCCL itself would not match).
 */
#include <errno.h>
#include <string.h>

#include "mcp_test.h"
#include "core/match_list.h"
#include "core/sock.h"
#include "core/text.h"
#include "fabric/fabric_hca.h"

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
  CHECK_EQ_STR(f.field, "0");
}

/* NCCL 2.30's name:port:rail:plane (parseStringList): every field after the name
 * optional, absent or empty meaning none (-1), so "mlx5_0::2" is any port on rail 2. */
static void test_rail_plane(void)
{
  struct mcp_match_list l = parse("mlx5_0:1:2:0,mlx5_1::2,mlx5_2,mlx5_3:1,mlx5_4:::5,mlx5_5:2:-1:3", 1);

  CHECK_EQ_INT(l.n, 6);
  CHECK_EQ_INT(l.e[0].port, 1);
  CHECK_EQ_INT(l.e[0].rail, 2);
  CHECK_EQ_INT(l.e[0].plane, 0);
  CHECK_EQ_INT(l.e[1].port, -1);
  CHECK_EQ_INT(l.e[1].rail, 2);
  CHECK_EQ_INT(l.e[1].plane, -1);
  CHECK_EQ_INT(l.e[2].port, -1);
  CHECK_EQ_INT(l.e[2].rail, -1);
  CHECK_EQ_INT(l.e[2].plane, -1);
  CHECK_EQ_INT(l.e[3].port, 1);
  CHECK_EQ_INT(l.e[3].rail, -1);
  CHECK_EQ_INT(l.e[4].rail, -1);
  CHECK_EQ_INT(l.e[4].plane, 5);
  CHECK_EQ_INT(l.e[5].rail, -1); /* -1 is NCCL's "none" written out */
  CHECK_EQ_INT(l.e[5].plane, 3);
  /* As a 2.30 user writes it, mlx5_0:1:2:0 still selects mlx5_0 port 1 and no other. */
  l = parse("mlx5_0:1:2:0", 1);
  CHECK(mcp_match_allows(&l, "mlx5_0", 1));
  CHECK(!mcp_match_allows(&l, "mlx5_0", 2));
  /* The token a port takes its rail from: the first include token naming it. */
  l = parse("mlx5_0:2:7,mlx5_0::3,mlx5_1", 1);
  CHECK_EQ_INT(mcp_match_which(&l, "mlx5_0", 2), 0);
  CHECK_EQ_INT(mcp_match_which(&l, "mlx5_0", 1), 1);
  CHECK_EQ_INT(mcp_match_which(&l, "mlx5_1", 1), 2);
  CHECK_EQ_INT(mcp_match_which(&l, "mlx5_2", 1), -ENOENT);
  l = parse("^mlx5_0:1:2", 1); /* an exclude list names no rails */
  CHECK_EQ_INT(mcp_match_which(&l, "mlx5_1", 1), -ENOENT);
  CHECK_EQ_INT(mcp_match_which(&l, "mlx5_0", 1), -ENOENT);
  /* Interface names drop the fields, rails included. */
  l = parse("eth0:1:2:3", 0);
  CHECK_EQ_INT(l.e[0].rail, -1);
}

/* Values NCCL would take as something nobody meant (a word as 0, a plane it refuses
 * later) are refused at once, naming the field. */
static void test_rail_plane_refused(void)
{
  static const struct {
    const char *text, *field, *msg;
    enum mcp_match_error kind;
  } bad[] = {
    {"mlx5_0:1:x", "x", "rail 'x' is not 0..32767", MCP_MATCH_BAD_RAIL},
    {"mlx5_0:1:32768", "32768", "rail '32768' is not 0..32767", MCP_MATCH_BAD_RAIL},
    {"mlx5_0:1:-2", "-2", "rail '-2' is not 0..32767", MCP_MATCH_BAD_RAIL},
    {"mlx5_0:1:+2", "+2", "rail '+2' is not 0..32767", MCP_MATCH_BAD_RAIL},
    {"mlx5_0::1:16384", "16384", "plane '16384' is not 0..16383", MCP_MATCH_BAD_PLANE},
    {"mlx5_0:1:2:p", "p", "plane 'p' is not 0..16383", MCP_MATCH_BAD_PLANE},
    {"mlx5_0:x:2:0", "x", "port 'x' is not 1..255", MCP_MATCH_BAD_PORT},
    {"mlx5_0:1:2:0:9", "", "has fields after name:port:rail:plane", MCP_MATCH_EXTRA},
  };
  struct mcp_match_list l;
  struct mcp_match_fault f;
  char err[256];

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    CHECK_EQ_INT(mcp_match_list_parse(bad[i].text, 64, 1, &l, &f), -EINVAL);
    CHECK_EQ_INT(f.kind, bad[i].kind);
    CHECK_EQ_STR(f.field, bad[i].field);
    err[0] = '\0';
    CHECK_EQ_INT(mcp_hca_parse(bad[i].text, &l, err, sizeof(err)), -EINVAL);
    if (strstr(err, bad[i].msg) == NULL)
      fprintf(stderr, "'%s': \"%s\" lacks \"%s\"\n", bad[i].text, err, bad[i].msg);
    CHECK(strstr(err, bad[i].msg) != NULL);
  }
  /* The bounds themselves pass. */
  l = parse("a:255:32767:16383,b:1:0:0", 1);
  CHECK_EQ_INT(l.e[0].rail, 32767);
  CHECK_EQ_INT(l.e[0].plane, 16383);
  CHECK_EQ_INT(l.e[1].rail, 0);
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
  RUN_TEST(test_rail_plane);
  RUN_TEST(test_rail_plane_refused);
  RUN_TEST(test_trim_helper);
  return TEST_EXIT();
}
