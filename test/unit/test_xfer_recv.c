/*
 * test_xfer_recv.c - irecv, iflush and test on a fake connected pair (mcp_fake_verbs.c):
 * the fake records the clear-to-send writes, the sender's isend lands the data, and
 * the test injects the completions a failing port or a closing peer would leave.
 *
 * The rule kept here: NCCL's optional-completion hint (LL/LL128 receives) makes the
 * clear-to-send go out at once, but test reports the receive done only once its data
 * has landed, as NCCL's IB transport does. Reporting it done early lets NCCL stop
 * calling the comm, and then nothing drives the comm's recovery if the link fails.
 * And a flush read that the adapter fails (its port went down) is posted again on a
 * new loopback QP, never lost: NCCL would wait for it forever. And a receive whose
 * data landed just before the peer closed is complete, not lost work, and so is a flush
 * the peer's close finds pending: it reads our own memory. And a receive
 * that irecv accepted reaches the sender without any further call on its comm: a
 * caller busy on another comm (NCCL's proxy making its sends) must not starve it.
 */
#include <stdlib.h>
#include <string.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/log.h"
#include "core/param.h"
#include "xfer/comm.h"

static char buf[65536], sbuf[65536];
static struct mcp_mr *mh, *smh;

static struct fake_pair *pair_make(void)
{
  struct fake_pair_opts o = {.nqps = 1, .max_inline = 256};
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(&o);
  mh = fake_pair_reg(p, FAKE_RECV_SIDE, buf, sizeof(buf), NCCL_PTR_HOST);
  smh = fake_pair_reg(p, FAKE_SEND_SIDE, sbuf, sizeof(sbuf), NCCL_PTR_HOST);
  return p;
}

static void *post(struct fake_pair *p, int hint, size_t size)
{
  void *data = buf, *mhp = mh, *req = hint ? (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION : (void *)0xbad;
  int tag = 1;

  CHECK_EQ_INT(mcp_net_irecv(p->recv, 1, &data, &size, &tag, &mhp, &req), ncclSuccess);
  return req;
}

/* The sender's write-with-immediate of the next seq, bytes long, is posted (it lands
 * when the receiver next polls). */
static void land(struct fake_pair *p, uint32_t bytes)
{
  void *req = NULL;

  fake_progress(); /* the clear-to-send reaches the sender */
  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, bytes, 1, smh, &req), ncclSuccess);
  CHECK(req != NULL);
}

static void test_hint_waits_for_data(void)
{
  struct fake_pair *p = pair_make();
  int done = 0, sizes[1] = {-1}, i;
  void *r1, *r2;

  fake_posts_reset();
  r1 = post(p, 1, 65536);
  CHECK(r1 != NULL && r1 != (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION);
  CHECK_EQ_INT(fake_count_cts_writes(), 1); /* its clear-to-send went out at once */
  r2 = post(p, 1, 65536);
  CHECK_EQ_INT(fake_count_cts_writes(), 2);
  /* No data yet: NCCL keeps calling test, and each call can drive the comm. */
  for (i = 0; i < 3; i++) {
    CHECK_EQ_INT(mcp_net_test(r1, &done, sizes), ncclSuccess);
    CHECK_EQ_INT(done, 0);
  }
  land(p, 4096);
  CHECK_EQ_INT(mcp_net_test(r1, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sizes[0], 4096); /* the bytes that arrived, not the posted size */
  done = 0;
  CHECK_EQ_INT(mcp_net_test(r2, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  land(p, 0);
  CHECK_EQ_INT(mcp_net_test(r2, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sizes[0], 0);
  CHECK_EQ_INT(fake_comm_inflight(p->recv), 0);
  CHECK_EQ_INT(fake_comm_error(p->recv), 0);
  fake_pair_free(p);
}

/* Without the hint too, every receive's clear-to-send is written by its irecv. */
static void test_written_without_hint(void)
{
  struct fake_pair *p = pair_make();
  int i;

  fake_posts_reset();
  for (i = 0; i < 8; i++) {
    CHECK(post(p, 0, 4096) != NULL);
    CHECK_EQ_INT(fake_count_cts_writes(), i + 1);
  }
  fake_pair_free(p);
}

/* The wr_id of the last read posted on the flush QP. */
static uint64_t last_read(void)
{
  const struct fake_post *log;
  int n = fake_posts(&log);

  while (n-- > 0)
    if (log[n].opcode == IBV_WR_RDMA_READ)
      return log[n].wr_id;
  return 0;
}

static int reads_posted(void)
{
  const struct fake_post *log;
  int n = fake_posts(&log), i, k = 0;

  for (i = 0; i < n; i++)
    k += log[i].opcode == IBV_WR_RDMA_READ;
  return k;
}

static void test_flush_lost_with_its_qp(void)
{
  struct fake_pair *p = pair_make();
  struct mcp_mr *gpu = fake_pair_reg(p, FAKE_RECV_SIDE, buf, sizeof(buf), NCCL_PTR_CUDA);
  void *data = buf, *mhp = gpu, *req = NULL;
  int sizes[1] = {4096}, done = 0, created = fake_qps_created(), destroyed = fake_qps_destroyed();
  uint64_t first;

  /* The recovery timeout bounds the retries; the default configuration of a loaded plugin. */
  (mcp_param_process())->recovery_timeout_s = 30;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  fake_posts_reset();
  CHECK_EQ_INT(mcp_net_iflush(p->recv, 1, &data, sizes, &mhp, &req), ncclSuccess);
  CHECK(req != NULL);
  CHECK_EQ_INT(fake_qps_created() - created, 1);
  CHECK_EQ_INT(reads_posted(), 1);
  first = last_read();
  /* The port goes down: the read fails, and the QP with it. */
  fake_pair_break_flush(p);
  CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  CHECK_EQ_INT(fake_qps_destroyed() - destroyed, 1);
  CHECK_EQ_INT(fake_qps_created() - created, 2); /* a new flush QP ... */
  CHECK_EQ_INT(reads_posted(), 2);               /* ... and the read posted again on it */
  CHECK(MCP_WR_EPOCH(last_read()) != MCP_WR_EPOCH(first));
  /* What the old QP still completes is dropped; the new read completes the flush. The
   * new QP's read is held back until the stale completion was seen. */
  fake_pair_hold_flush(p, 1);
  fake_pair_inject_wc(p, FAKE_RECV_SIDE, first, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_READ);
  CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  CHECK_EQ_INT(fake_qps_destroyed() - destroyed, 1); /* the new QP was not taken for lost */
  fake_pair_hold_flush(p, 0);
  CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(fake_comm_error(p->recv), 0);
  CHECK_EQ_INT(fake_comm_flush_lost(p->recv), 0);
  CHECK_EQ_INT(fake_comm_flush_reposts(p->recv), 0);
  (mcp_param_process())->recovery_timeout_s = 0;
  fake_pair_free(p);
}

/* A flush is local work: a read through our own loopback QP of a buffer whose data has
 * all arrived. Its read was lost with the flush QP and is on its way again on a new one
 * when the peer, done with its part, closes the connection normally: the flush still
 * completes, and nothing fails. A receive still waiting for data when the peer has
 * closed is lost work, and is still reported. */
static void test_flush_pending_when_peer_closes(void)
{
  struct fake_pair *p = pair_make();
  struct mcp_mr *gpu = fake_pair_reg(p, FAKE_RECV_SIDE, buf, sizeof(buf), NCCL_PTR_CUDA);
  void *data = buf, *mhp = gpu, *req = NULL, *r;
  int sizes[1] = {4096}, done = 0, rsizes[1] = {-1}, i;

  (mcp_param_process())->recovery_timeout_s = 30;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  /* The receive the flush is for: its data arrived. */
  r = post(p, 0, 4096);
  land(p, 4096);
  CHECK_EQ_INT(mcp_net_test(r, &done, rsizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(mcp_net_iflush(p->recv, 1, &data, sizes, &mhp, &req), ncclSuccess);
  CHECK(req != NULL);
  /* The port goes down: the read fails with its QP, and is posted on a new one ... */
  fake_pair_break_flush(p);
  done = 1;
  CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  CHECK_EQ_INT(reads_posted(), 2);
  /* ... which has not completed it yet when the peer closes its end. */
  fake_pair_hold_flush(p, 1);
  fake_comm_peer_closed(p->recv);
  for (i = 0; i < 3; i++) {
    fake_comm_check_due(p->recv); /* each call also looks at the peer */
    CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
    CHECK_EQ_INT(done, 0);
    CHECK_EQ_INT(fake_comm_error(p->recv), 0);
  }
  fake_pair_hold_flush(p, 0);
  CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(fake_comm_error(p->recv), 0);
  CHECK_EQ_INT(fake_comm_flush_lost(p->recv), 0);
  /* A receive posted now waits for data that a closed peer never sends: reported. */
  r = post(p, 0, 4096);
  fake_comm_check_due(p->recv);
  CHECK_EQ_INT(mcp_net_test(r, &done, rsizes), ncclRemoteError);
  (mcp_param_process())->recovery_timeout_s = 0;
  fake_pair_free(p);
}

/* The peer received its last message, closed, and its CLOSE reached us before we polled
 * the completion of ours, behind 16 others: the work finished; nothing failed. */
static void test_completion_behind_peer_close(void)
{
  struct fake_pair *p = pair_make();
  int done = 0, sizes[1] = {-1}, i;
  void *r;

  r = post(p, 0, 4096);
  for (i = 0; i < MCP_CQ_BATCH; i++) /* signalled clear-to-send writes, say */
    fake_pair_inject_wc(p, FAKE_RECV_SIDE, MCP_WR(MCP_WR_CTS, 0, 0, 0), IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
  land(p, 100);
  fake_comm_peer_closed(p->recv);
  CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sizes[0], 100);
  CHECK_EQ_INT(fake_comm_error(p->recv), 0);
  /* Work still pending when the peer has closed is reported, on the next check. */
  r = post(p, 0, 4096);
  fake_comm_peer_closed(p->recv);
  CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclRemoteError);
  fake_pair_free(p);
}

/* Two ranks, each with a send comm to the other and a receive comm from it (two pairs
 * of the fake). Each posts 32 receives, then makes its 32 sends, retrying each isend
 * until it returns a request, and only then tests anything: a third-party functional
 * test of the net API does exactly this. No call is made on a receive comm after its
 * irecvs, so every receive irecv accepted must already be on its way to the sender.
 * fake_progress is the adapters working on their own between calls, as NICs do; the
 * spins are counted, never timed. */
#define TWO_RANK_MSGS 32
static void test_two_ranks_busy_in_isend(void)
{
  static char rbuf[2][TWO_RANK_MSGS][64], tbuf[2][TWO_RANK_MSGS][64];
  struct fake_pair_opts o = {.nqps = 1};
  struct fake_pair *ab, *ba; /* ab: rank 0 sends, rank 1 receives; ba the other way */
  struct fake_pair *to[2], *from[2];
  void *rmh[2], *smh2[2], *rreq[2][TWO_RANK_MSGS], *sreq[2][TWO_RANK_MSGS];
  int sent[2] = {0, 0}, rank, i, spins, done, sizes[1];

  fake_verbs_install();
  ab = fake_pair_make(&o);
  ba = fake_pair_make(&o);
  to[0] = ab;
  from[0] = ba;
  to[1] = ba;
  from[1] = ab;
  for (rank = 0; rank < 2; rank++) {
    rmh[rank] = fake_pair_reg(from[rank], FAKE_RECV_SIDE, rbuf[rank], sizeof(rbuf[rank]), NCCL_PTR_HOST);
    smh2[rank] = fake_pair_reg(to[rank], FAKE_SEND_SIDE, tbuf[rank], sizeof(tbuf[rank]), NCCL_PTR_HOST);
    for (i = 0; i < TWO_RANK_MSGS; i++)
      fake_pattern((unsigned char *)tbuf[rank][i], 64, (unsigned)(rank * 100 + i));
  }
  memset(rbuf, 0, sizeof(rbuf));
  for (rank = 0; rank < 2; rank++)
    for (i = 0; i < TWO_RANK_MSGS; i++) {
      void *data = rbuf[rank][i], *mhp = rmh[rank];
      size_t size = 64;
      int tag = 7;

      rreq[rank][i] = NULL;
      CHECK_EQ_INT(mcp_net_irecv(from[rank]->recv, 1, &data, &size, &tag, &mhp, &rreq[rank][i]), ncclSuccess);
      CHECK(rreq[rank][i] != NULL);
    }
  for (spins = 0; spins < 100000 && (sent[0] < TWO_RANK_MSGS || sent[1] < TWO_RANK_MSGS); spins++) {
    fake_progress();
    for (rank = 0; rank < 2; rank++) {
      void *req = NULL;

      if (sent[rank] == TWO_RANK_MSGS)
        continue;
      CHECK_EQ_INT(mcp_net_isend(to[rank]->send, tbuf[rank][sent[rank]], 64, 7, smh2[rank], &req),
                   ncclSuccess);
      if (req != NULL)
        sreq[rank][sent[rank]++] = req;
    }
  }
  CHECK_EQ_INT(sent[0], TWO_RANK_MSGS); /* today's batching: both ranks spin in isend forever */
  CHECK_EQ_INT(sent[1], TWO_RANK_MSGS);
  for (rank = 0; rank < 2; rank++) {
    for (i = 0; i < sent[rank]; i++)
      CHECK_EQ_INT(fake_wait_done(sreq[rank][i], NULL, 1000), 1);
    for (i = 0; i < TWO_RANK_MSGS && sent[1 - rank] == TWO_RANK_MSGS; i++) {
      done = fake_wait_done(rreq[rank][i], sizes, 1000);
      CHECK_EQ_INT(done, 1);
      if (done == 1) {
        CHECK_EQ_INT(sizes[0], 64);
        CHECK(fake_same((unsigned char *)rbuf[rank][i], 64, (unsigned)((1 - rank) * 100 + i)));
      }
    }
  }
  CHECK_EQ_INT(fake_comm_error(ab->send) | fake_comm_error(ab->recv), 0);
  CHECK_EQ_INT(fake_comm_error(ba->send) | fake_comm_error(ba->recv), 0);
  fake_pair_free(ab);
  fake_pair_free(ba);
}

int main(void)
{
  mcp_log_set_logger(mcp_test_log_quiet);
  RUN_TEST(test_hint_waits_for_data);
  RUN_TEST(test_written_without_hint);
  RUN_TEST(test_flush_lost_with_its_qp);
  RUN_TEST(test_completion_behind_peer_close);
  RUN_TEST(test_flush_pending_when_peer_closes);
  RUN_TEST(test_two_ranks_busy_in_isend);
  return TEST_EXIT();
}
