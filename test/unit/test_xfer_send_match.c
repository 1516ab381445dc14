/*
 * test_xfer_send_match.c - isend's matching and posting, on a fake connected pair
 * (mcp_fake_verbs.c): the receiver's irecv writes the clear-to-send entries, the fake
 * records every work request isend posts.
 *
 * What NCCL's proxy really does with a shared comm under PXN: several local ranks send
 * on it with their own tags, out of step with each other. A send may take only a free
 * element with its tag in the oldest advertised receive; when there is none it gets a
 * NULL request (NCCL calls again), and the comm must not fail or look ahead. And data
 * from GPU memory (NCCL_PTR_CUDA, DMA-BUF) must never be posted inline, which would
 * make the provider copy it with the CPU.
 */
#include <stdarg.h>
#include <stdlib.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/log.h"
#include "xfer/comm.h"

static char sbuf[4096], rbuf[8 * 4096];
static struct mcp_mr *host_mr, *rmh;

static struct fake_pair *pair_make(void)
{
  struct fake_pair_opts o = {.nqps = 1, .max_inline = 64, .data_inline = 64};
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(&o);
  host_mr = fake_pair_reg(p, FAKE_SEND_SIDE, sbuf, sizeof(sbuf), NCCL_PTR_HOST);
  rmh = fake_pair_reg(p, FAKE_RECV_SIDE, rbuf, sizeof(rbuf), NCCL_PTR_HOST);
  fake_warns = 0;
  return p;
}

/* The receiver's irecv with these tags (buffers of 4096 bytes); its entry reaches the
 * sender's ring. Receive k uses buffers from k * n on. */
static void irecv_tags(struct fake_pair *p, int k, int n, const int *tags)
{
  void *data[MCP_MAX_RECVS], *mh[MCP_MAX_RECVS], *req = (void *)0xbad;
  size_t sizes[MCP_MAX_RECVS];
  int t[MCP_MAX_RECVS], i;

  for (i = 0; i < n; i++) {
    data[i] = rbuf + (size_t)(k * n + i) % 8 * 4096;
    mh[i] = rmh;
    sizes[i] = 4096;
    t[i] = tags[i];
  }
  CHECK_EQ_INT(mcp_net_irecv(p->recv, n, data, sizes, t, mh, &req), ncclSuccess);
  CHECK(req != NULL);
  fake_progress();
}

static void *do_send(struct fake_pair *p, int tag, size_t size, struct mcp_mr *mh, ncclResult_t *rc)
{
  void *req = (void *)0xdead; /* NCCL leaves junk in the slot */

  *rc = mcp_net_isend(p->send, sbuf, size, tag, mh, &req);
  return req;
}

/* The send side's posts in the log since the last fake_posts_reset. */
static int sends(const struct fake_post **out)
{
  static struct fake_post mine[64];
  const struct fake_post *log;
  int n = fake_posts(&log), i, k = 0;

  for (i = 0; i < n && k < 64; i++)
    if (log[i].side == FAKE_SEND_SIDE)
      mine[k++] = log[i];
  *out = mine;
  return k;
}

/* Grouped receives of tags {1,2}: tag 1's next step comes before tag 2's current one. */
static void test_pxn_next_step_before_other_tag(void)
{
  struct fake_pair *p = pair_make();
  const int tags[2] = {1, 2};
  const struct fake_post *posted;
  ncclResult_t rc;
  void *a, *b;
  char why[1024];

  irecv_tags(p, 0, 2, tags);
  irecv_tags(p, 1, 2, tags);
  fake_posts_reset();
  a = do_send(p, 1, 100, host_mr, &rc);
  CHECK(a != NULL);
  CHECK_EQ_INT(rc, ncclSuccess);
  /* Tag 1 again: its element of seq 1 is used, and seq 2 is not the head yet. */
  CHECK(do_send(p, 1, 100, host_mr, &rc) == NULL);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  CHECK_EQ_INT(fake_comm_seq(p->send), 1);
  mcp_xfer_watchdog_describe(p->send, why, sizeof(why));
  /* The refused tag and the seq of the head receive, for the watchdog. */
  CHECK(strstr(why,
               "isend with tag 1 finds no free buffer for its tag in the oldest receive "
               "(seq 1, tags 1(sent),2)") != NULL);
  CHECK_EQ_INT(sends(&posted), 1); /* only the first part was written */
  b = do_send(p, 2, 200, host_mr, &rc);
  CHECK(b != NULL);
  CHECK_EQ_INT(fake_comm_seq(p->send), 2);
  /* Parts of seq 1, then the record that completes the group. */
  CHECK_EQ_INT(sends(&posted), 3);
  CHECK_EQ_INT(posted[0].remote_addr, (uintptr_t)rbuf);
  CHECK_EQ_INT(posted[1].remote_addr, (uintptr_t)(rbuf + 4096));
  CHECK_EQ_INT(posted[2].opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  /* The retried send of tag 1 now lands in seq 2's buffer, not in seq 1's. */
  a = do_send(p, 1, 100, host_mr, &rc);
  CHECK(a != NULL);
  CHECK_EQ_INT(a != NULL ? fake_req_seq(a) : 0, 2);
  CHECK_EQ_INT(sends(&posted), 4);
  CHECK_EQ_INT(posted[3].remote_addr, (uintptr_t)(rbuf + 2 * 4096));
  CHECK_EQ_INT(fake_warns, 0);
  fake_pair_free(p);
}

/* The head receive is a single one for tag 3: tag 4's send waits, nothing fails. */
static void test_single_receive_other_tag(void)
{
  struct fake_pair *p = pair_make();
  const int t3[1] = {3}, t4[1] = {4};
  const struct fake_post *posted;
  ncclResult_t rc;
  char why[1024];

  irecv_tags(p, 0, 1, t3);
  irecv_tags(p, 1, 1, t4);
  fake_posts_reset();
  CHECK(do_send(p, 4, 10, host_mr, &rc) == NULL);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  CHECK_EQ_INT(sends(&posted), 0);
  /* Should it last, the watchdog names the tag and what the head receive waits for. */
  mcp_xfer_watchdog_describe(p->send, why, sizeof(why));
  CHECK(strstr(why, "isend with tag 4") != NULL);
  CHECK(strstr(why, "tags 3)") != NULL);
  CHECK(do_send(p, 3, 10, host_mr, &rc) != NULL);
  CHECK(do_send(p, 4, 10, host_mr, &rc) != NULL);
  CHECK_EQ_INT(fake_comm_seq(p->send), 3);
  CHECK_EQ_INT(fake_warns, 0);
  fake_pair_free(p);
}

/* The element a tag already used is not free; a group for other tags only is not ours. */
static void test_group_without_our_tag(void)
{
  struct fake_pair *p = pair_make();
  const int tags[3] = {5, 6, 7};
  ncclResult_t rc;
  int i;

  irecv_tags(p, 0, 3, tags);
  for (i = 0; i < 3; i++)
    CHECK(do_send(p, 9, 10, host_mr, &rc) == NULL);
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  CHECK(do_send(p, 7, 10, host_mr, &rc) != NULL);
  CHECK(do_send(p, 7, 10, host_mr, &rc) == NULL);
  CHECK(do_send(p, 5, 10, host_mr, &rc) != NULL);
  CHECK(do_send(p, 6, 10, host_mr, &rc) != NULL);
  CHECK_EQ_INT(fake_comm_seq(p->send), 2);
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  fake_pair_free(p);
}

/* A send larger than the posted receive still fails loudly (NCCL's transport would
 * truncate it and the job would run on wrong data). */
static void test_larger_than_receive_fails(void)
{
  struct fake_pair *p = pair_make();
  const int t[1] = {1};
  ncclResult_t rc;
  static char big[8192];
  struct mcp_mr *bmh = fake_pair_reg(p, FAKE_SEND_SIDE, big, sizeof(big), NCCL_PTR_HOST);
  void *req = (void *)0xdead;

  irecv_tags(p, 0, 1, t);
  rc = mcp_net_isend(p->send, big, 8192, 1, bmh, &req);
  CHECK(req == NULL);
  CHECK_EQ_INT(rc, ncclInvalidUsage);
  CHECK(fake_comm_error(p->send) != 0);
  CHECK_EQ_INT(fake_warns, 1);
  fake_pair_free(p);
}

/* Small writes go inline from host memory only. */
static void test_inline_only_from_host_memory(void)
{
  const int t[1] = {1}, tg[2] = {1, 2};
  int k;

  for (k = 0; k < 3; k++) {
    struct fake_pair *p = pair_make();
    struct mcp_mr *kinds[3] = {host_mr, fake_pair_reg(p, FAKE_SEND_SIDE, sbuf, sizeof(sbuf), NCCL_PTR_CUDA),
                               fake_pair_reg_dmabuf(p, FAKE_SEND_SIDE, sbuf, sizeof(sbuf), NCCL_PTR_CUDA)};
    const struct fake_post *posted;
    ncclResult_t rc;
    int want = k == 0 ? IBV_SEND_INLINE : 0;

    irecv_tags(p, 0, 1, t);
    irecv_tags(p, 1, 2, tg);
    fake_posts_reset();
    CHECK(do_send(p, 1, 8, kinds[k], &rc) != NULL); /* single receive */
    CHECK(do_send(p, 1, 8, kinds[k], &rc) != NULL); /* element of a grouped receive */
    CHECK(do_send(p, 2, 64, kinds[k], &rc) != NULL);
    CHECK_EQ_INT(sends(&posted), 4);
    CHECK_EQ_INT(posted[0].send_flags & IBV_SEND_INLINE, want);
    CHECK_EQ_INT(posted[1].send_flags & IBV_SEND_INLINE, want);
    CHECK_EQ_INT(posted[2].send_flags & IBV_SEND_INLINE, want);
    /* The sizes record is our own host memory: inline whatever the data's kind. */
    CHECK_EQ_INT(posted[3].send_flags & IBV_SEND_INLINE, IBV_SEND_INLINE);
    /* From host memory to a host buffer, a single receive's 8 bytes land: one write
     * without immediate of the data and its 8-byte trailer (comm.h, struct mcp_landing);
     * from GPU memory they are a plain write with immediate of the 8 bytes. */
    CHECK_EQ_INT(posted[0].len, k == 0 ? 8 + 8 : 8);
    CHECK_EQ_INT(posted[0].opcode, k == 0 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM);
    fake_pair_free(p);
  }
}

/* Completions carry their comm's id beside the QP generation (a shared CQ will hold
 * several comms' work, and a QP number can come back after a recovery): a failed write
 * that names another comm is not this comm's failure. */
static void test_completion_of_another_comm(void)
{
  struct fake_pair *p = pair_make();

  fake_pair_inject_wc(p, FAKE_SEND_SIDE, MCP_WR(MCP_WR_SEND, 0x42, 0, 0), IBV_WC_REM_ACCESS_ERR,
                      IBV_WC_RDMA_WRITE);
  CHECK_EQ_INT(mcp_xfer_poll(p->send), 1); /* polled, and dropped */
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  CHECK_EQ_INT(fake_comm_rec_phase(p->send), MCP_REC_NONE);
  /* The same completion with the comm's own id (0 for the fake pair's comms) counts. */
  fake_pair_inject_wc(p, FAKE_SEND_SIDE, MCP_WR(MCP_WR_SEND, 0, 0, 0), IBV_WC_REM_ACCESS_ERR,
                      IBV_WC_RDMA_WRITE);
  CHECK_EQ_INT(mcp_xfer_poll(p->send), 1);
  CHECK(fake_comm_error(p->send) != 0 || fake_comm_rec_phase(p->send) == MCP_REC_VERDICT);
  fake_pair_free(p);
}

int main(void)
{
  mcp_log_set_logger(fake_warn_capture);
  RUN_TEST(test_pxn_next_step_before_other_tag);
  RUN_TEST(test_single_receive_other_tag);
  RUN_TEST(test_group_without_our_tag);
  RUN_TEST(test_larger_than_receive_fails);
  RUN_TEST(test_inline_only_from_host_memory);
  RUN_TEST(test_completion_of_another_comm);
  return TEST_EXIT();
}
