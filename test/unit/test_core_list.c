/*
 * test_core_list.c - the one intrusive list: order of push (stack) and append (FIFO),
 * O(1) removal from anywhere, removal while walking, and a second del being harmless.
 */
#include "mcp_test.h"
#include "core/list.h"

struct item {
  int v;
  struct mcp_list link;
};

static int values(struct mcp_list *h, int *out, int max)
{
  struct mcp_list *it;
  int n = 0;

  mcp_list_each(it, h)
  {
    if (n < max)
      out[n] = mcp_list_entry(it, struct item, link)->v;
    n++;
  }
  return n;
}

static void test_order_and_removal(void)
{
  static struct mcp_list h = MCP_LIST_INIT(h);
  struct item a = {.v = 1}, b = {.v = 2}, c = {.v = 3}, d = {.v = 4};
  struct mcp_list *it, *tmp;
  int got[8];

  CHECK(mcp_list_empty(&h));
  CHECK(mcp_list_first(&h, struct item, link) == NULL);
  mcp_list_append(&h, &a.link);
  mcp_list_append(&h, &b.link);
  mcp_list_push(&h, &c.link);   /* c a b */
  mcp_list_append(&h, &d.link); /* c a b d */
  CHECK_EQ_INT(values(&h, got, 8), 4);
  CHECK(got[0] == 3 && got[1] == 1 && got[2] == 2 && got[3] == 4);
  CHECK(mcp_list_first(&h, struct item, link) == &c);
  mcp_list_del(&b.link); /* from the middle */
  mcp_list_del(&b.link); /* unlinked already: no effect on the list */
  CHECK(mcp_list_empty(&b.link));
  CHECK_EQ_INT(values(&h, got, 8), 3);
  CHECK(got[0] == 3 && got[1] == 1 && got[2] == 4);
  /* Unlink every odd value while walking. */
  mcp_list_each_safe(it, tmp, &h)
  {
    if (mcp_list_entry(it, struct item, link)->v % 2 == 1)
      mcp_list_del(it);
  }
  CHECK_EQ_INT(values(&h, got, 8), 1);
  CHECK_EQ_INT(got[0], 4);
  mcp_list_del(&d.link);
  CHECK(mcp_list_empty(&h));
}

int main(void)
{
  RUN_TEST(test_order_and_removal);
  return TEST_EXIT();
}
