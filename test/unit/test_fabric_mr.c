/*
 * test_fabric_mr.c - the registration cache (src/fabric/mcp_fabric_mr.c) on the fake verbs
 * provider (mcp_fake_verbs.c), which counts the registrations it holds.
 *
 * Why: NCCL registers the same buffers again for every connection, so the cache must
 * find an MR that covers the pages (and only one of the same memory type), count its
 * holders, and deregister with the last one; a DMA-BUF registration must never be
 * found by address (the range may be another buffer object later). A cache that
 * deregisters early makes the adapter refuse data in flight; one that never does
 * leaks pinned memory. And a data write from such a registration that lands must carry
 * the bytes (it is checked end to end on the pair).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/log.h"

#define PAGE 4096

static unsigned char *mem;

static struct fake_pair *pair_make(void)
{
  fake_verbs_install();
  fake_warns = 0;
  return fake_pair_make(NULL);
}

/* The same pages again, or a part of them: the same registration, one more holder. */
static void test_hit_and_refcount(void)
{
  struct fake_pair *p = pair_make();
  int base = fake_mrs_live();
  struct mcp_mr *a = fake_pair_reg(p, FAKE_SEND_SIDE, mem, 4 * PAGE, NCCL_PTR_HOST);
  struct mcp_mr *b = fake_pair_reg(p, FAKE_SEND_SIDE, mem, 4 * PAGE, NCCL_PTR_HOST);
  struct mcp_mr *c = fake_pair_reg(p, FAKE_SEND_SIDE, mem + PAGE + 100, 200, NCCL_PTR_HOST);

  CHECK(a != NULL);
  CHECK(a == b);
  CHECK(a == c);
  CHECK_EQ_INT(fake_mrs_live() - base, 1);
  CHECK_EQ_INT(fake_pair_devctx(p, FAKE_SEND_SIDE)->mr_count, 1);
  /* Two holders let go: still registered, still found. */
  fake_pair_dereg(b);
  CHECK_EQ_INT(fake_mrs_live() - base, 1);
  fake_pair_dereg(c);
  CHECK_EQ_INT(fake_mrs_live() - base, 1);
  CHECK(fake_pair_reg(p, FAKE_SEND_SIDE, mem + 3 * PAGE, PAGE, NCCL_PTR_HOST) == a);
  fake_pair_dereg(a);
  /* The last holder: deregistered at once, the next registration is a new one. */
  fake_pair_dereg(a);
  CHECK_EQ_INT(fake_mrs_live() - base, 0);
  CHECK_EQ_INT(fake_pair_devctx(p, FAKE_SEND_SIDE)->mr_count, 0);
  CHECK_EQ_INT(fake_pair_devctx(p, FAKE_SEND_SIDE)->mr_bytes, 0);
  a = fake_pair_reg(p, FAKE_SEND_SIDE, mem, PAGE, NCCL_PTR_HOST);
  CHECK_EQ_INT(fake_mrs_live() - base, 1);
  fake_pair_dereg(a);
  CHECK_EQ_INT(fake_warns, 0);
  fake_pair_free(p);
}

/* A range that reaches past a registration is not covered by it: a new one. Another
 * device, or another memory type, is never a hit either. */
static void test_overlap_type_device(void)
{
  struct fake_pair *p = pair_make();
  int base = fake_mrs_live();
  struct mcp_mr *a = fake_pair_reg(p, FAKE_SEND_SIDE, mem, 2 * PAGE, NCCL_PTR_HOST);
  struct mcp_mr *b = fake_pair_reg(p, FAKE_SEND_SIDE, mem + PAGE, 2 * PAGE, NCCL_PTR_HOST);
  struct mcp_mr *g = fake_pair_reg(p, FAKE_SEND_SIDE, mem, 2 * PAGE, NCCL_PTR_CUDA);
  struct mcp_mr *o = fake_pair_reg(p, FAKE_RECV_SIDE, mem, 2 * PAGE, NCCL_PTR_HOST);

  CHECK(a != NULL && b != NULL && g != NULL && o != NULL);
  CHECK(a != b);
  CHECK(g != a && g != b);
  CHECK(o != a);
  CHECK_EQ_INT(fake_mrs_live() - base, 4);
  /* The third page is only in the second registration. */
  CHECK(fake_pair_reg(p, FAKE_SEND_SIDE, mem + 2 * PAGE, 10, NCCL_PTR_HOST) == b);
  fake_pair_dereg(b);
  fake_pair_dereg(a);
  CHECK_EQ_INT(fake_mrs_live() - base, 3);
  /* b still has a holder: its range is still found. */
  CHECK(fake_pair_reg(p, FAKE_SEND_SIDE, mem + PAGE, 10, NCCL_PTR_HOST) == b);
  fake_pair_dereg(b);
  fake_pair_dereg(b);
  fake_pair_dereg(g);
  fake_pair_dereg(o);
  CHECK_EQ_INT(fake_mrs_live() - base, 0);
  fake_pair_free(p);
}

/* DMA-BUF registrations are never found by address, and never find others. */
static void test_dmabuf_never_cached(void)
{
  struct fake_pair *p = pair_make();
  int base = fake_mrs_live();
  struct mcp_mr *d1 = fake_pair_reg_dmabuf(p, FAKE_SEND_SIDE, mem, 2 * PAGE, NCCL_PTR_CUDA);
  struct mcp_mr *d2 = fake_pair_reg_dmabuf(p, FAKE_SEND_SIDE, mem, 2 * PAGE, NCCL_PTR_CUDA);
  struct mcp_mr *g = fake_pair_reg(p, FAKE_SEND_SIDE, mem, PAGE, NCCL_PTR_CUDA);

  CHECK(d1 != NULL && d2 != NULL && g != NULL);
  CHECK(d1 != d2);
  CHECK(g != d1 && g != d2);
  CHECK_EQ_INT(fake_mrs_live() - base, 3);
  fake_pair_dereg(d1);
  fake_pair_dereg(d2);
  fake_pair_dereg(g);
  CHECK_EQ_INT(fake_mrs_live() - base, 0);
  fake_pair_free(p);
}

/* A holder lets go while another's send is in flight: the data still lands, because
 * the registration stays until its last holder lets go. */
static void test_dereg_while_in_use(void)
{
  struct fake_pair *p = pair_make();
  struct mcp_mr *rmh = fake_pair_reg(p, FAKE_RECV_SIDE, mem + 64 * PAGE, PAGE, NCCL_PTR_HOST);
  struct mcp_mr *s1 = fake_pair_reg(p, FAKE_SEND_SIDE, mem, PAGE, NCCL_PTR_HOST);
  struct mcp_mr *s2 = fake_pair_reg(p, FAKE_SEND_SIDE, mem, PAGE, NCCL_PTR_HOST);
  void *data = mem + 64 * PAGE, *mh = rmh, *r = (void *)0xbad, *s = NULL;
  size_t size = PAGE;
  int tag = 1, done = 0, sizes[1] = {-1}, i;

  CHECK(s1 == s2);
  for (i = 0; i < 1000; i++)
    mem[i] = (unsigned char)(i * 3);
  memset(mem + 64 * PAGE, 0, PAGE);
  CHECK_EQ_INT(mcp_net_irecv(p->recv, 1, &data, &size, &tag, &mh, &r), ncclSuccess);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  CHECK_EQ_INT(mcp_net_isend(p->send, mem, 1000, 1, s1, &s), ncclSuccess); /* not inline: 1000 bytes */
  CHECK(s != NULL);
  fake_pair_dereg(s2);
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 0);
  for (i = 0; i < 10 && !done; i++)
    CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sizes[0], 1000);
  CHECK(memcmp(mem, mem + 64 * PAGE, 1000) == 0);
  done = 0;
  CHECK_EQ_INT(mcp_net_test(s, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  fake_pair_dereg(s1);
  fake_pair_dereg(rmh);
  fake_pair_free(p);
}

/* A refused registration: an error code and one WARN that names the limit to raise. */
static void test_failure_says_why(void)
{
  struct fake_pair *p = pair_make();
  int base = fake_mrs_live();
  struct mcp_mr *m = (struct mcp_mr *)0x1;

  fake_fail_next_reg(ENOMEM);
  CHECK_EQ_INT(mcp_mr_register(fake_pair_devctx(p, FAKE_SEND_SIDE), mem, PAGE, NCCL_PTR_HOST, &m), -ENOMEM);
  CHECK(m == NULL);
  CHECK_EQ_INT(fake_warns, 1);
  CHECK(strstr(fake_lastwarn, "Locked-memory limit (ulimit -l)") != NULL);
  CHECK(strstr(fake_lastwarn, "Raise the limit") != NULL);
  CHECK_EQ_INT(fake_mrs_live() - base, 0);
  /* Nothing was cached: the next try registers. */
  m = fake_pair_reg(p, FAKE_SEND_SIDE, mem, PAGE, NCCL_PTR_HOST);
  CHECK(m != NULL);
  fake_pair_dereg(m);
  fake_pair_free(p);
}

int main(void)
{
  mem = aligned_alloc(PAGE, 128 * PAGE);
  mcp_log_set_logger(fake_warn_capture);
  RUN_TEST(test_hit_and_refcount);
  RUN_TEST(test_overlap_type_device);
  RUN_TEST(test_dmabuf_never_cached);
  RUN_TEST(test_dereg_while_in_use);
  RUN_TEST(test_failure_says_why);
  free(mem);
  return TEST_EXIT();
}
