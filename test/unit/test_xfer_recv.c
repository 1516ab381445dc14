/*
 * test_xfer_recv.c - irecv and test on a receive comm built by hand: a fake QP records
 * the clear-to-send writes, a fake CQ hands out the completions the test scripts.
 *
 * The rule kept here: NCCL's optional-completion hint (LL/LL128 receives) makes the
 * clear-to-send go out at once, but test reports the receive done only once its data
 * has landed, as NCCL's IB transport does. Reporting it done early lets NCCL stop
 * calling the comm, and then nothing drives the comm's recovery if the link fails.
 * And a flush read that the adapter fails (its port went down) is posted again on a
 * new loopback QP, never lost: NCCL would wait for it forever. And a receive whose
 * data landed just before the peer closed is complete, not lost work.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "mcpnet/comm.h"
#include "mcpnet/log.h"
#include "mcpnet/net.h"
#include "mcpnet/param.h"
#include "mcpnet/verbs.h"

static int nposted;
static uint64_t last_wr_id;
static struct ibv_wc script[32];
static int nscript;

static void quiet(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                  const char *fmt, ...)
{
  (void)level;
  (void)flags;
  (void)file;
  (void)line;
  (void)fmt;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
  (void)qp;
  (void)bad;
  for (; wr != NULL; wr = wr->next) {
    nposted++;
    last_wr_id = wr->wr_id;
  }
  return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
  (void)qp;
  (void)wr;
  (void)bad;
  return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
  int n = 0;

  (void)cq;
  while (n < num && nscript > 0) {
    wc[n++] = script[0];
    memmove(script, script + 1, (size_t)--nscript * sizeof(script[0]));
  }
  return n;
}

static struct ibv_context fake_ctx;
static struct ibv_qp fake_qp;
static struct ibv_cq fake_cq;
static struct mcp_net_dev info;
static struct mcp_devctx dc;
static struct ibv_mr ibmr;
static struct mcp_mr mh;
static char buf[65536];

static struct mcp_comm *comm_make(void)
{
  struct mcp_comm *c = calloc(1, sizeof(*c));

  fake_ctx.ops.post_send = fake_post_send;
  fake_ctx.ops.post_recv = fake_post_recv;
  fake_ctx.ops.poll_cq = fake_poll_cq;
  fake_qp.context = &fake_ctx;
  fake_cq.context = &fake_ctx;
  snprintf(info.name, sizeof(info.name), "rxe0");
  dc.info = &info;
  ibmr.rkey = 3;
  mh.mr = &ibmr;
  mh.type = NCCL_PTR_HOST;
  c->link.kind = MCP_COMM_RECV;
  c->link.dc = &dc;
  c->seq = 1;
  c->link.nqps = 1;
  c->link.qp[0] = &fake_qp;
  c->link.cq = &fake_cq;
  c->link.max_inline = 256;
  c->cts_batch = 4;
  c->next_alive_check_ns = UINT64_MAX; /* the 100 ms liveness check is not due here */
  snprintf(c->link.peer_name, sizeof(c->link.peer_name), "lab-a pid 41 (192.0.2.1:40000)");
  c->staging = calloc(MCP_SLOTS, sizeof(struct mcp_cts_slot));
  c->staging_mr = &ibmr;
  c->rslots = calloc(MCP_SLOTS, sizeof(*c->rslots));
  c->ring_records = calloc(MCP_SLOTS, sizeof(struct mcp_record));
  mcp_req_pool_init(c, MCP_RECV_REQS, MCP_REQ_RECV);
  nposted = 0;
  nscript = 0;
  return c;
}

static void comm_free(struct mcp_comm *c)
{
  free(c->staging);
  free(c->rslots);
  free(c->ring_records);
  free(c->flush_buf);
  free(c->reqs);
  free(c);
}

static void *post(struct mcp_comm *c, int hint, size_t size)
{
  void *data = buf, *mhp = &mh, *req = hint ? (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION : (void *)0xbad;
  int tag = 1;

  CHECK_EQ_INT(mcp_net_irecv(c, 1, &data, &size, &tag, &mhp, &req), ncclSuccess);
  return req;
}

/* The sender's write-with-immediate of seq, bytes long, landed on QP 0 of the comm
 * whose id the receive WR carried. */
static void land_as(uint16_t comm_id, uint32_t seq, uint32_t bytes)
{
  struct ibv_wc *w = &script[nscript++];

  memset(w, 0, sizeof(*w));
  w->status = IBV_WC_SUCCESS;
  w->opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  w->wc_flags = IBV_WC_WITH_IMM;
  w->imm_data = htonl(MCP_IMM(seq, 1, 0));
  w->byte_len = bytes;
  w->wr_id = MCP_WR(MCP_WR_RECV, comm_id, 0, 0);
}

static void land(uint32_t seq, uint32_t bytes) { land_as(0, seq, bytes); }

/* Completions carry the comm's id (a shared CQ will hold several comms' work, and a QP
 * number can come back after a recovery): another comm's completion lands nothing. */
static void test_completion_of_another_comm(void)
{
  struct mcp_comm *c = comm_make();
  int done = 0, sizes[1] = {-1};
  void *r;

  c->link.id = 7;
  r = post(c, 1, 65536);
  CHECK_EQ_INT(MCP_WR_COMM(last_wr_id), 7); /* the clear-to-send write names its comm */
  land_as(8, 1, 4096);
  CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  CHECK_EQ_INT(nscript, 0); /* it was polled, and dropped */
  land_as(7, 1, 4096);
  CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sizes[0], 4096);
  CHECK_EQ_INT(c->link.error, 0);
  comm_free(c);
}

static void test_hint_waits_for_data(void)
{
  struct mcp_comm *c = comm_make();
  int done = 0, sizes[1] = {-1}, i;
  void *r1, *r2;

  r1 = post(c, 1, 65536);
  CHECK(r1 != NULL && r1 != (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION);
  CHECK_EQ_INT(nposted, 1); /* its clear-to-send went out at once */
  r2 = post(c, 1, 65536);
  CHECK_EQ_INT(nposted, 2);
  /* No data yet: NCCL keeps calling test, and each call can drive the comm. */
  for (i = 0; i < 3; i++) {
    CHECK_EQ_INT(mcp_net_test(r1, &done, sizes), ncclSuccess);
    CHECK_EQ_INT(done, 0);
  }
  land(1, 4096);
  CHECK_EQ_INT(mcp_net_test(r1, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sizes[0], 4096); /* the bytes that arrived, not the posted size */
  done = 0;
  CHECK_EQ_INT(mcp_net_test(r2, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  land(2, 0);
  CHECK_EQ_INT(mcp_net_test(r2, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sizes[0], 0);
  CHECK_EQ_INT(c->inflight, 0);
  CHECK_EQ_INT(c->link.error, 0);
  comm_free(c);
}

/* Without the hint, receives posted ahead share clear-to-send writes (batches of 4). */
static void test_batched_without_hint(void)
{
  struct mcp_comm *c = comm_make();
  int i;

  for (i = 0; i < 8; i++)
    CHECK(post(c, 0, 4096) != NULL);
  CHECK(nposted < 8);
  CHECK(nposted >= 1);
  comm_free(c);
}

/* Fake verbs for the flush QP's life: QPs from a small array, every transition works. */
static struct ibv_qp flush_qps[4];
static int ncreated, ndestroyed;
static struct ibv_mr flush_ibmr;

static struct ibv_qp *fake_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
  struct ibv_qp *qp = &flush_qps[ncreated++ % 4];

  (void)pd;
  (void)attr;
  qp->context = &fake_ctx;
  qp->qp_num = 0x100 + (uint32_t)ncreated;
  return qp;
}

static int fake_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
  (void)qp;
  (void)attr;
  (void)mask;
  return 0;
}

static int fake_destroy_qp(struct ibv_qp *qp)
{
  (void)qp;
  ndestroyed++;
  return 0;
}

static struct ibv_mr *fake_reg_mr(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, unsigned access)
{
  (void)pd;
  (void)addr;
  (void)len;
  (void)iova;
  (void)access;
  return &flush_ibmr;
}

static void flush_done(uint64_t wr_id, enum ibv_wc_status status)
{
  struct ibv_wc *w = &script[nscript++];

  memset(w, 0, sizeof(*w));
  w->status = status;
  w->opcode = IBV_WC_RDMA_READ;
  w->wr_id = wr_id;
}

static void test_flush_lost_with_its_qp(void)
{
  struct mcp_comm *c = comm_make();
  struct mcp_mr gpu = mh;
  void *data = buf, *mhp = &gpu, *req = NULL;
  int sizes[1] = {4096}, done = 0;
  uint64_t first;

  mcp_ibv.create_qp = fake_create_qp;
  mcp_ibv.modify_qp = fake_modify_qp;
  mcp_ibv.destroy_qp = fake_destroy_qp;
  mcp_ibv.reg_mr_iova2 = fake_reg_mr;
  /* The recovery timeout bounds the retries; the default configuration of a loaded plugin. */
  ((struct mcp_config *)mcp_param_process())->recovery_timeout_s = 30;
  gpu.type = NCCL_PTR_CUDA;
  CHECK_EQ_INT(mcp_net_iflush(c, 1, &data, sizes, &mhp, &req), ncclSuccess);
  CHECK(req != NULL);
  CHECK_EQ_INT(ncreated, 1);
  CHECK_EQ_INT(nposted, 1);
  first = last_wr_id;
  /* The port goes down: the read fails, and the QP with it. */
  flush_done(first, IBV_WC_LOC_QP_OP_ERR);
  CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  CHECK_EQ_INT(ndestroyed, 1);
  CHECK_EQ_INT(ncreated, 2);   /* a new flush QP ... */
  CHECK_EQ_INT(nposted, 2);    /* ... and the read posted again on it */
  CHECK(MCP_WR_EPOCH(last_wr_id) != MCP_WR_EPOCH(first));
  /* What the old QP still completes is dropped; the new read completes the flush. */
  flush_done(first, IBV_WC_WR_FLUSH_ERR);
  CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  flush_done(last_wr_id, IBV_WC_SUCCESS);
  CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(c->link.error, 0);
  CHECK_EQ_INT(c->flush_lost_ns, 0);
  CHECK_EQ_INT(c->flush_reposts, 0);
  comm_free(c);
}

/* The peer received its last message, closed, and its CLOSE reached us before we polled
 * the completion of ours, behind 16 others: the work finished; nothing failed. */
static void test_completion_behind_peer_close(void)
{
  struct mcp_comm *c = comm_make();
  struct mcp_oob_stream *st = mcp_oob_test_stream_new();
  int done = 0, sizes[1] = {-1}, i;
  void *r;

  c->link.stream = st;
  r = post(c, 0, 4096);
  for (i = 0; i < MCP_CQ_BATCH; i++) { /* signalled clear-to-send writes, say */
    struct ibv_wc *w = &script[nscript++];
    memset(w, 0, sizeof(*w));
    w->status = IBV_WC_SUCCESS;
    w->wr_id = MCP_WR(MCP_WR_CTS, 0, 0, 0);
  }
  land(1, 100);
  mcp_oob_test_stream_end(st, 0, 1, NULL);
  c->next_alive_check_ns = 0;
  CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sizes[0], 100);
  CHECK_EQ_INT(c->link.error, 0);
  /* Work still pending when the peer has closed is reported, on the next check. */
  r = post(c, 0, 4096);
  c->next_alive_check_ns = 0;
  CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclRemoteError);
  free(st);
  comm_free(c);
}

int main(void)
{
  mcp_log_set_logger(quiet);
  RUN_TEST(test_hint_waits_for_data);
  RUN_TEST(test_batched_without_hint);
  RUN_TEST(test_flush_lost_with_its_qp);
  RUN_TEST(test_completion_behind_peer_close);
  RUN_TEST(test_completion_of_another_comm);
  return TEST_EXIT();
}
