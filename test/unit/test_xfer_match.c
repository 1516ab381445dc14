/*
 * test_xfer_match.c - isend's matching and posting on a send comm built by hand, with a
 * fake QP whose post_send records the work requests instead of reaching an adapter.
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

#include "mcp_test.h"
#include "mcpnet/comm.h"
#include "mcpnet/log.h"
#include "mcpnet/net.h"

#define MAX_POSTS 64

static struct ibv_send_wr posted[MAX_POSTS];
static int nposted;
static int warns;

static void capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                    const char *fmt, ...)
{
  (void)flags;
  (void)file;
  (void)line;
  (void)fmt;
  warns += level == NCCL_LOG_WARN;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
  (void)qp;
  (void)bad;
  for (; wr != NULL; wr = wr->next)
    if (nposted < MAX_POSTS)
      posted[nposted++] = *wr;
  return 0;
}

static struct ibv_context fake_ctx;
static struct ibv_qp fake_qp;
static struct mcp_net_dev info;
static struct mcp_devctx dc;
static struct ibv_mr host_ibmr, records_ibmr;
static struct mcp_mr host_mr, gpu_mr, dmabuf_mr;
static char buf[4096];

static struct mcp_comm *comm_make(void)
{
  struct mcp_comm *c = calloc(1, sizeof(*c));

  fake_ctx.ops.post_send = fake_post_send;
  fake_qp.context = &fake_ctx;
  fake_qp.qp_num = 0x11;
  snprintf(info.name, sizeof(info.name), "rxe0");
  dc.info = &info;
  host_ibmr.lkey = 7;
  host_mr.mr = &host_ibmr;
  host_mr.type = NCCL_PTR_HOST;
  gpu_mr = host_mr;
  gpu_mr.type = NCCL_PTR_CUDA;
  dmabuf_mr = gpu_mr;
  dmabuf_mr.dmabuf = 1;
  c->link.kind = MCP_COMM_SEND;
  c->link.dc = &dc;
  c->seq = 1;
  c->link.nqps = 1;
  c->link.qp[0] = &fake_qp;
  c->link.max_inline = 64;
  c->data_inline = 64;
  /* The liveness check is for waiting callers every 100 ms: not due in this test. */
  c->next_alive_check_ns = UINT64_MAX;
  snprintf(c->link.peer_name, sizeof(c->link.peer_name), "lab-b pid 42 (192.0.2.2:40000)");
  c->ring_elems = calloc(MCP_SLOTS, sizeof(struct mcp_cts_slot));
  c->sslots = calloc(MCP_SLOTS, sizeof(*c->sslots));
  c->records = calloc(MCP_SLOTS, sizeof(struct mcp_record));
  records_ibmr.lkey = 9;
  c->records_mr = &records_ibmr;
  mcp_req_pool_init(c, MCP_SEND_REQS, MCP_REQ_SEND);
  nposted = 0;
  warns = 0;
  return c;
}

static void comm_free(struct mcp_comm *c)
{
  free(c->ring_elems);
  free(c->sslots);
  free(c->records);
  free(c->reqs);
  free(c);
}

/* The receiver's irecv of seq with these tags has landed in the sender's ring. */
static void cts_arrive(struct mcp_comm *c, uint32_t seq, int n, const int *tags)
{
  int i;

  for (i = 0; i < n; i++) {
    struct mcp_cts_elem *e = &c->ring_elems[seq % MCP_SLOTS].e[i];
    e->addr = 0x100000 * (seq % MCP_SLOTS) + 0x1000 * (uint64_t)i;
    e->rkey = 5;
    e->n = (uint16_t)n;
    e->idx = (uint16_t)i;
    e->size = 4096;
    e->tag = tags[i];
    e->seq = seq;
  }
}

static struct mcp_request *do_send(struct mcp_comm *c, int tag, size_t size, struct mcp_mr *mh,
                                ncclResult_t *rc)
{
  void *req = (void *)0xdead; /* NCCL leaves junk in the slot */

  *rc = mcp_net_isend(c, buf, size, tag, mh, &req);
  return req;
}

/* Grouped receives of tags {1,2}: tag 1's next step comes before tag 2's current one. */
static void test_pxn_next_step_before_other_tag(void)
{
  struct mcp_comm *c = comm_make();
  const int tags[2] = {1, 2};
  ncclResult_t rc;
  struct mcp_request *a, *b;

  cts_arrive(c, 1, 2, tags);
  cts_arrive(c, 2, 2, tags);
  a = do_send(c, 1, 100, &host_mr, &rc);
  CHECK(a != NULL);
  CHECK_EQ_INT(rc, ncclSuccess);
  /* Tag 1 again: its element of seq 1 is used, and seq 2 is not the head yet. */
  CHECK(do_send(c, 1, 100, &host_mr, &rc) == NULL);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK_EQ_INT(c->link.error, 0);
  CHECK_EQ_INT(c->seq, 1);
  CHECK_EQ_INT(c->tag_refused, 1);
  CHECK_EQ_INT(c->tag_refused_seq, 1);
  CHECK_EQ_INT(nposted, 1); /* only the first part was written */
  b = do_send(c, 2, 200, &host_mr, &rc);
  CHECK(b != NULL);
  CHECK_EQ_INT(c->seq, 2);
  /* Parts of seq 1, then the record that completes the group. */
  CHECK_EQ_INT(nposted, 3);
  CHECK_EQ_INT(posted[0].wr.rdma.remote_addr, c->ring_elems[1].e[0].addr);
  CHECK_EQ_INT(posted[1].wr.rdma.remote_addr, c->ring_elems[1].e[1].addr);
  CHECK_EQ_INT(posted[2].opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  /* The retried send of tag 1 now lands in seq 2's buffer, not in seq 1's. */
  a = do_send(c, 1, 100, &host_mr, &rc);
  CHECK(a != NULL);
  CHECK_EQ_INT(a != NULL ? a->seq : 0, 2);
  CHECK_EQ_INT(posted[3].wr.rdma.remote_addr, c->ring_elems[2].e[0].addr);
  CHECK_EQ_INT(warns, 0);
  comm_free(c);
}

/* The head receive is a single one for tag 3: tag 4's send waits, nothing fails. */
static void test_single_receive_other_tag(void)
{
  struct mcp_comm *c = comm_make();
  const int t3[1] = {3}, t4[1] = {4};
  ncclResult_t rc;
  char why[1024];

  cts_arrive(c, 1, 1, t3);
  cts_arrive(c, 2, 1, t4);
  CHECK(do_send(c, 4, 10, &host_mr, &rc) == NULL);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK_EQ_INT(c->link.error, 0);
  CHECK_EQ_INT(nposted, 0);
  /* Should it last, the watchdog names the tag and what the head receive waits for. */
  mcp_xfer_watchdog_describe(c, why, sizeof(why));
  CHECK(strstr(why, "isend with tag 4") != NULL);
  CHECK(strstr(why, "tags 3)") != NULL);
  CHECK(do_send(c, 3, 10, &host_mr, &rc) != NULL);
  CHECK(do_send(c, 4, 10, &host_mr, &rc) != NULL);
  CHECK_EQ_INT(c->seq, 3);
  CHECK_EQ_INT(warns, 0);
  comm_free(c);
}

/* The element a tag already used is not free; a group for other tags only is not ours. */
static void test_group_without_our_tag(void)
{
  struct mcp_comm *c = comm_make();
  const int tags[3] = {5, 6, 7};
  ncclResult_t rc;
  int i;

  cts_arrive(c, 1, 3, tags);
  for (i = 0; i < 3; i++)
    CHECK(do_send(c, 9, 10, &host_mr, &rc) == NULL);
  CHECK_EQ_INT(c->link.error, 0);
  CHECK(do_send(c, 7, 10, &host_mr, &rc) != NULL);
  CHECK(do_send(c, 7, 10, &host_mr, &rc) == NULL);
  CHECK(do_send(c, 5, 10, &host_mr, &rc) != NULL);
  CHECK(do_send(c, 6, 10, &host_mr, &rc) != NULL);
  CHECK_EQ_INT(c->seq, 2);
  CHECK_EQ_INT(c->link.error, 0);
  comm_free(c);
}

/* A send larger than the posted receive still fails loudly (NCCL's transport would
 * truncate it and the job would run on wrong data). */
static void test_larger_than_receive_fails(void)
{
  struct mcp_comm *c = comm_make();
  const int t[1] = {1};
  ncclResult_t rc;

  cts_arrive(c, 1, 1, t);
  CHECK(do_send(c, 1, 8192, &host_mr, &rc) == NULL);
  CHECK_EQ_INT(rc, ncclInvalidUsage);
  CHECK(c->link.error != 0);
  CHECK_EQ_INT(warns, 1);
  comm_free(c);
}

/* Small writes go inline from host memory only. */
static void test_inline_only_from_host_memory(void)
{
  struct mcp_mr *kinds[3] = {&host_mr, &gpu_mr, &dmabuf_mr};
  const int t[1] = {1}, tg[2] = {1, 2};
  int k;

  for (k = 0; k < 3; k++) {
    struct mcp_comm *c = comm_make();
    ncclResult_t rc;
    int want = k == 0 ? IBV_SEND_INLINE : 0;

    cts_arrive(c, 1, 1, t);
    cts_arrive(c, 2, 2, tg);
    CHECK(do_send(c, 1, 8, kinds[k], &rc) != NULL);   /* single receive */
    CHECK(do_send(c, 1, 8, kinds[k], &rc) != NULL);   /* element of a grouped receive */
    CHECK(do_send(c, 2, 64, kinds[k], &rc) != NULL);
    CHECK_EQ_INT(nposted, 4);
    CHECK_EQ_INT(posted[0].send_flags & IBV_SEND_INLINE, want);
    CHECK_EQ_INT(posted[1].send_flags & IBV_SEND_INLINE, want);
    CHECK_EQ_INT(posted[2].send_flags & IBV_SEND_INLINE, want);
    /* The sizes record is our own host memory: inline whatever the data's kind. */
    CHECK_EQ_INT(posted[3].send_flags & IBV_SEND_INLINE, IBV_SEND_INLINE);
    CHECK_EQ_INT(posted[0].sg_list == NULL, 0);
    comm_free(c);
  }
}

int main(void)
{
  mcp_log_set_logger(capture);
  RUN_TEST(test_pxn_next_step_before_other_tag);
  RUN_TEST(test_single_receive_other_tag);
  RUN_TEST(test_group_without_our_tag);
  RUN_TEST(test_larger_than_receive_fails);
  RUN_TEST(test_inline_only_from_host_memory);
  return TEST_EXIT();
}
