/*
 * test_conn_recover_never_block.c - no call of NCCL's waits for a QP setup thread or a peer (issue 12).
 *
 * ibv_modify_qp to RTR resolves the peer's neighbour on RoCE and can block for as long
 * as the link is down, and NCCL's proxy thread serves every comm of the process from one
 * loop. Fake verbs here make that step block until the test lets it go, and the
 * recovery's clock is the test's, so this checks the order of events, never their
 * speed: a recovery round still connecting reports "not yet" while the step blocks and
 * fails the comm when the clock passes its deadline; a new round starts without waiting
 * for the old step; close returns at once; the QPs the blocked step walks are destroyed
 * only after it returns, and the comm (with its CQ) only after them. A round's first
 * step, destroying the old QPs, can wait in the driver too (rxe drains their work in
 * flight while a port is down): it runs on the rebuild thread, and a destroy that blocks
 * leaves the calls reporting "not yet" until the deadline. A failed completion
 * that may mean the peer died does not sleep while the out-of-band channel decides: the
 * calls that follow report "not yet" until the peer's close is seen or 200 ms pass.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/param.h"
#include "core/verbs.h"
#include "xfer/comm.h"

/* ---- fake verbs: RTR blocks until released (or 10 s, so a build that waits ends) ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int released, in_rtr, in_destroy, created, block_destroy, next_event = 1, next_qpn = 0x100;
static int ev_rtr_returned, ev_cq_destroyed, qps_destroyed;
static struct ibv_qp *destroyed[8];
static int ev_destroyed[8];

static int event(void) { return next_event++; } /* with lock held */

/* Blocks RTR until the test releases it: with no time limit, so a slow host cannot
 * end the block early and reorder the events the tests check (every test releases;
 * a hang is ended by ctest's TIMEOUT, as a failure). */
static int fake_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
  (void)qp;
  (void)mask;
  if (attr->qp_state != IBV_QPS_RTR)
    return 0;
  pthread_mutex_lock(&lock);
  in_rtr++;
  pthread_cond_broadcast(&cond);
  while (!released)
    pthread_cond_wait(&cond, &lock);
  ev_rtr_returned = event();
  pthread_mutex_unlock(&lock);
  return 0;
}

static struct ibv_qp *fake_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
  struct ibv_qp *qp = calloc(1, sizeof(*qp));

  (void)pd;
  (void)init;
  pthread_mutex_lock(&lock);
  qp->qp_num = (uint32_t)next_qpn++;
  created++;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  return qp;
}

/* With block_destroy, waits until released as rxe's destroy waits for the QP's work in
 * flight to drain, which a port that is down holds. */
static int fake_destroy_qp(struct ibv_qp *qp)
{
  pthread_mutex_lock(&lock);
  in_destroy++;
  pthread_cond_broadcast(&cond);
  while (block_destroy && !released)
    pthread_cond_wait(&cond, &lock);
  if (qps_destroyed < 8) {
    destroyed[qps_destroyed] = qp;
    ev_destroyed[qps_destroyed] = event();
  }
  qps_destroyed++;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  free(qp);
  return 0;
}

static int fake_destroy_cq(struct ibv_cq *cq)
{
  pthread_mutex_lock(&lock);
  ev_cq_destroyed = event();
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  free(cq);
  return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
  (void)cq;
  (void)n;
  (void)wc;
  return 0;
}

static int fake_dereg_mr(struct ibv_mr *mr)
{
  free(mr);
  return 0;
}

static const char *fake_status_str(enum ibv_wc_status st)
{
  (void)st;
  return "fake";
}

/* ---- a send comm on fake verbs, in the recovery's CONNECTING phase ---- */

static uint64_t fake_now;
static uint64_t test_clock(void) { return fake_now; }

static struct ibv_context fake_ctx;
static struct mcp_net_dev fake_dev;
static struct mcp_devctx fake_dc;
static struct mcp_oob_stream *stream;

static struct mcp_comm *comm_connecting(void)
{
  stream = mcp_oob_test_stream_new();
  return fake_comm_connecting(&fake_dc, &fake_ctx, stream, fake_now);
}

/* Waits until the fake's counter reaches want; returns the counter. No wall-clock
 * bound: what never happens hangs the test until ctest's TIMEOUT fails it. */
static int wait_for(int *counter, int want)
{
  int v;

  pthread_mutex_lock(&lock);
  while (*counter < want)
    pthread_cond_wait(&cond, &lock);
  v = *counter;
  pthread_mutex_unlock(&lock);
  return v;
}

static int now_event(void)
{
  int e;

  pthread_mutex_lock(&lock);
  e = event();
  pthread_mutex_unlock(&lock);
  return e;
}

static void reset(void)
{
  pthread_mutex_lock(&lock);
  released = 0;
  in_rtr = 0;
  in_destroy = 0;
  created = 0;
  block_destroy = 0;
  ev_rtr_returned = 0;
  ev_cq_destroyed = 0;
  qps_destroyed = 0;
  memset(destroyed, 0, sizeof(destroyed));
  memset(ev_destroyed, 0, sizeof(ev_destroyed));
  pthread_mutex_unlock(&lock);
}

static void release(void)
{
  pthread_mutex_lock(&lock);
  released = 1;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
}

/* NCCL's close (or abort) while the fake blocks, then the block released; returns the
 * close's event once the comm's CQ, freed last, is gone. */
static int close_then_release(struct mcp_comm *c)
{
  int ev;

  fake_comm_detach_stream(c); /* a fake: nothing of the out-of-band channel to close */
  free(stream);
  mcp_comm_destroy(&c->link);
  ev = now_event();
  release();
  CHECK_EQ_INT(wait_for(&ev_cq_destroyed, 1) > 0, 1);
  return ev;
}

/* The round's deadline passes while RTR blocks: the comm fails then, and close does not
 * wait for the step either. */
static void test_deadline_and_close(void)
{
  struct mcp_comm *c;
  struct ibv_qp *walked;
  int ev_failed, ev_closed;

  reset();
  c = comm_connecting();
  walked = fake_comm_qp(c, 0);
  CHECK_EQ_INT(mcp_qp_connect_start(&c->link), 0);
  CHECK_EQ_INT(wait_for(&in_rtr, 1), 1);

  fake_now += 1000000000ull; /* 1 s in: still connecting, no verdict, no wait */
  CHECK_EQ_INT(mcp_recover_progress(&c->link), 0);
  CHECK_EQ_INT(fake_comm_error(c), 0);

  fake_now += 6000000000ull; /* past the deadline */
  CHECK_EQ_INT(mcp_recover_progress(&c->link), MCP_ERR_REMOTE);
  ev_failed = now_event();
  CHECK(fake_comm_error(c) != 0);
  CHECK(strstr(fake_comm_errmsg(c), "did not reach RTS") != NULL);
  CHECK(strstr(fake_comm_errmsg(c), "round 1") != NULL);

  ev_closed = close_then_release(c);

  pthread_mutex_lock(&lock);
  /* The verdict and the close came while RTR still blocked... */
  CHECK(ev_rtr_returned > ev_failed);
  CHECK(ev_rtr_returned > ev_closed);
  /* ...and the walked QP, then the CQ, went only after it returned. */
  CHECK_EQ_INT(qps_destroyed, 1);
  CHECK(destroyed[0] == walked);
  CHECK(ev_destroyed[0] > ev_rtr_returned);
  CHECK(ev_cq_destroyed > ev_destroyed[0]);
  pthread_mutex_unlock(&lock);
}

/* The peer (or a new error) starts a new round while the old round's RTR blocks: the new
 * round builds new QPs without waiting for it; the old step destroys its own when it
 * returns. */
static void test_new_round_does_not_wait(void)
{
  struct mcp_comm *c;
  struct ibv_qp *old;
  int ev_started, ev_closed, i, old_at = -1, others = 0;

  reset();
  c = comm_connecting();
  old = fake_comm_qp(c, 0);
  CHECK_EQ_INT(mcp_qp_connect_start(&c->link), 0);
  CHECK_EQ_INT(wait_for(&in_rtr, 1), 1);

  mcp_recover_start(&c->link, "another fake error");
  ev_started = now_event();
  CHECK_EQ_INT(fake_comm_rec_round(c), 2);
  CHECK_EQ_INT(fake_comm_rec_phase(c), MCP_REC_REBUILD);
  /* The rebuild thread made the new QP: the second creation (the comm was made with the
   * first, so waiting for one would not wait at all). */
  CHECK_EQ_INT(wait_for(&created, 2), 2);
  /* The out-of-band connection is marked dead so that the fake needs no peer: the next
   * call then fails the comm, after the round began. */
  mcp_oob_test_stream_end(stream, 1, 0, "a fake dead peer");
  CHECK_EQ_INT(mcp_recover_progress(&c->link), MCP_ERR_REMOTE);
  CHECK(strstr(fake_comm_errmsg(c), "a fake dead peer") != NULL);

  ev_closed = close_then_release(c);

  pthread_mutex_lock(&lock);
  CHECK(ev_rtr_returned > ev_started);
  CHECK(ev_rtr_returned > ev_closed);
  CHECK_EQ_INT(qps_destroyed, 2);
  /* The old QP goes once its RTR returned; the new one with the rebuild, and the CQ last. */
  for (i = 0; i < 2; i++) {
    if (destroyed[i] == old)
      old_at = i;
    else if (destroyed[i] != NULL)
      others++;
    CHECK(ev_cq_destroyed > ev_destroyed[i]);
  }
  CHECK(old_at >= 0 && ev_destroyed[old_at] > ev_rtr_returned);
  CHECK_EQ_INT(others, 1);
  pthread_mutex_unlock(&lock);
}

/* A round's first step, destroying the old QPs, can wait in the driver for as long as a
 * port is down (rxe drains the QP's work in flight first; the lab saw NCCL's thread held
 * until the link came back): it runs on the rebuild thread, so the calls report "not
 * yet", the round fails at its deadline naming that step, close returns at once, and
 * the thread frees what it made (and the comm, CQ last) when the destroy returns. */
static void test_rebuild_destroy_blocks(void)
{
  struct mcp_comm *c;
  struct ibv_qp *old;
  int ev_failed, ev_closed, i, old_at = -1;

  reset();
  block_destroy = 1;
  mcp_param_process()->recovery_timeout_s = 6;
  c = comm_connecting();
  fake_comm_set_rec_phase(c, MCP_REC_NONE);
  old = fake_comm_qp(c, 0);
  mcp_recover_start(&c->link, "a fake port went down");
  CHECK_EQ_INT(fake_comm_rec_phase(c), MCP_REC_REBUILD);
  CHECK_EQ_INT(wait_for(&in_destroy, 1), 1);
  CHECK(fake_comm_qp(c, 0) == NULL);

  fake_now += 1000000000ull; /* 1 s in: still destroying, no verdict, no wait */
  CHECK_EQ_INT(mcp_recover_progress(&c->link), 0);
  CHECK_EQ_INT(fake_comm_error(c), 0);

  fake_now += 6000000000ull; /* past the deadline */
  CHECK_EQ_INT(mcp_recover_progress(&c->link), MCP_ERR_REMOTE);
  ev_failed = now_event();
  CHECK(strstr(fake_comm_errmsg(c), "the old QPs were still being destroyed") != NULL);
  CHECK(strstr(fake_comm_errmsg(c), "MCPNET_RECOVERY_TIMEOUT=6") != NULL);

  ev_closed = close_then_release(c);

  pthread_mutex_lock(&lock);
  CHECK_EQ_INT(qps_destroyed, 2); /* the old QP, then the one the thread created */
  for (i = 0; i < 2; i++)
    if (destroyed[i] == old)
      old_at = i;
  CHECK_EQ_INT(old_at, 0);
  CHECK(ev_destroyed[0] > ev_failed);
  CHECK(ev_destroyed[0] > ev_closed);
  CHECK(destroyed[1] != NULL && destroyed[1] != old && ev_destroyed[1] > ev_destroyed[0]);
  CHECK(ev_cq_destroyed > ev_destroyed[1]);
  pthread_mutex_unlock(&lock);
  mcp_param_process()->recovery_timeout_s = 0;
}

/* A remote access error: the peer's process may have died (its FIN is on the way). */
static void test_verdict(int peer_closes)
{
  struct mcp_comm *c;
  struct ibv_wc wc;

  reset();
  c = comm_connecting();
  fake_comm_set_rec_phase(c, MCP_REC_NONE);
  memset(&wc, 0, sizeof(wc));
  wc.status = IBV_WC_REM_ACCESS_ERR;
  wc.qp_num = fake_comm_qp(c, 0)->qp_num;
  wc.wr_id = MCP_WR(MCP_WR_SEND, 0, 0, 0);
  mcp_recover_await_verdict(&c->link, &wc);
  CHECK_EQ_INT(fake_comm_rec_phase(c), MCP_REC_VERDICT);

  fake_now += 100000000ull; /* 100 ms: no FIN yet, no verdict */
  CHECK_EQ_INT(mcp_recover_progress(&c->link), 0);
  CHECK_EQ_INT(fake_comm_error(c), 0);
  if (peer_closes) {
    mcp_oob_test_stream_end(stream, 0, 1, NULL);
    CHECK_EQ_INT(mcp_recover_progress(&c->link), MCP_ERR_REMOTE);
    CHECK(strstr(fake_comm_errmsg(c),
                 "the peer closed this connection; its adapter refused the work in flight") != NULL);
  } else {
    fake_now += 150000000ull; /* 250 ms: a real fault, with the completion's diagnosis */
    CHECK_EQ_INT(mcp_recover_progress(&c->link), MCP_ERR_REMOTE);
    CHECK(strstr(fake_comm_errmsg(c), "work completion error fake") != NULL);
  }
  CHECK_EQ_INT(fake_comm_rec_phase(c), MCP_REC_NONE);
  CHECK(fake_comm_error(c) != 0);
  fake_comm_detach_stream(c);
  free(stream);
  mcp_comm_destroy(&c->link);
  CHECK_EQ_INT(wait_for(&ev_cq_destroyed, 1) > 0, 1); /* nothing kept it: freed by the close */
}

int main(void)
{
  fake_ctx.ops.poll_cq = fake_poll_cq;
  mcp_ibv.create_qp = fake_create_qp;
  mcp_ibv.modify_qp = fake_modify_qp;
  mcp_ibv.destroy_qp = fake_destroy_qp;
  mcp_ibv.destroy_cq = fake_destroy_cq;
  mcp_ibv.dereg_mr = fake_dereg_mr;
  mcp_ibv.wc_status_str = fake_status_str;
  snprintf(fake_dev.name, sizeof(fake_dev.name), "fake0");
  snprintf(fake_dev.ibdev, sizeof(fake_dev.ibdev), "fake0");
  fake_dev.port = 1;
  fake_dev.link_layer = IBV_LINK_LAYER_INFINIBAND;
  fake_dc.info = &fake_dev;
  fake_dc.ctx = &fake_ctx; /* no async events: recovery's reads of them see a bad fd */
  fake_ctx.async_fd = -1;
  fake_dc.refs = 1000; /* never closed by the comms' puts */
  fake_now = 1000000000000ull;
  mcp_clock_test_set(test_clock);

  test_deadline_and_close();
  test_new_round_does_not_wait();
  test_rebuild_destroy_blocks();
  test_verdict(1);
  test_verdict(0);
  return mcp_test_failures != 0;
}
