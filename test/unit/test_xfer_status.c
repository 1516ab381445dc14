/*
 * test_xfer_status.c - what a comm publishes for mcpnet-top, on a fake connected pair
 * (mcp_fake_verbs.c) whose comms have status slots: the data path's counters (posted,
 * done, bytes, both directions, grouped receives), what the liveness check writes of a
 * comm that waits (the watchdog's diagnosis as a kind: no clear-to-send, no data,
 * unacknowledged writes) and that progress clears it, and conn's state transitions as
 * mcpnet-top reads them: connecting, waiting for the peer, connected, recovering,
 * recovered (the count kept), failed (the error kept).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/param.h"
#include "core/status.h"
#include "xfer/comm.h"

#define SEC 1000000000ull

static char dir[64];
static char sbuf[1 << 20], rbuf[1 << 20];
static struct mcp_mr *smh, *rmh;

static struct fake_pair *pair_make(int nqps)
{
  struct fake_pair_opts o = {.nqps = nqps, .publish = 1};
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg(p, FAKE_SEND_SIDE, sbuf, sizeof(sbuf), NCCL_PTR_HOST);
  rmh = fake_pair_reg(p, FAKE_RECV_SIDE, rbuf, sizeof(rbuf), NCCL_PTR_HOST);
  return p;
}

static void *irecv(struct fake_pair *p, int n, size_t size)
{
  void *data[MCP_MAX_RECVS], *mh[MCP_MAX_RECVS], *req = NULL;
  size_t sizes[MCP_MAX_RECVS];
  int tags[MCP_MAX_RECVS], i;

  for (i = 0; i < n; i++) {
    data[i] = rbuf + (size_t)i * 4096;
    mh[i] = rmh;
    sizes[i] = size;
    tags[i] = i;
  }
  CHECK_EQ_INT(mcp_net_irecv(p->recv, n, data, sizes, tags, mh, &req), ncclSuccess);
  CHECK(req != NULL);
  return req;
}

static void *isend(struct fake_pair *p, size_t size, int tag)
{
  void *req = NULL;

  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, size, tag, smh, &req), ncclSuccess);
  return req;
}

static int wait_done(void *req, int *size)
{
  int done = 0, turns;

  for (turns = 0; turns < 1000 && !done; turns++) {
    fake_progress();
    if (mcp_net_test(req, &done, size) != ncclSuccess)
      return -1;
  }
  return done;
}

/* The liveness check as check_alive runs it: the watchdog's clock, then the slot. */
static void check_at(struct mcp_comm *c, uint64_t t)
{
  mcp_xfer_watchdog(c, t, 0);
  mcp_xfer_status_check(c, t);
}

static void test_counters(void)
{
  struct fake_pair *p = pair_make(1);
  struct mcp_status_comm *ss = fake_comm_status(p->send), *rs = fake_comm_status(p->recv);
  void *r, *s;
  int i, size = -1;

  CHECK(ss != NULL && rs != NULL);
  CHECK_EQ_INT(ss->kind, 1);
  CHECK_EQ_INT(rs->kind, 2);
  for (i = 0; i < 5; i++) {
    r = irecv(p, 1, 65536);
    fake_progress();
    s = isend(p, 1000 + (size_t)i, 0);
    CHECK_EQ_INT(ss->count.posted, i + 1);
    CHECK_EQ_INT(rs->count.posted, i + 1);
    CHECK_EQ_INT(wait_done(s, NULL), 1);
    CHECK_EQ_INT(wait_done(r, &size), 1);
    CHECK_EQ_INT(size, 1000 + i);
  }
  CHECK_EQ_INT(ss->count.done, 5);
  CHECK_EQ_INT(rs->count.done, 5);
  CHECK_EQ_INT(ss->count.bytes, 5 * 1000 + 10);
  CHECK_EQ_INT(rs->count.bytes, 5 * 1000 + 10);
  /* A grouped receive is one request of three buffers: its bytes are their sum. */
  {
    void *sr[3];
    int sizes[3];

    r = irecv(p, 3, 4096);
    fake_progress();
    for (i = 0; i < 3; i++)
      sr[i] = isend(p, 100 * (size_t)(i + 1), i);
    for (i = 0; i < 3; i++)
      CHECK_EQ_INT(wait_done(sr[i], NULL), 1);
    CHECK_EQ_INT(wait_done(r, sizes), 1);
  }
  CHECK_EQ_INT(ss->count.posted, 8);
  CHECK_EQ_INT(ss->count.done, 8);
  CHECK_EQ_INT(rs->count.posted, 6);
  CHECK_EQ_INT(rs->count.done, 6);
  CHECK_EQ_INT(rs->count.bytes, 5 * 1000 + 10 + 600);
  fake_pair_free(p);
}

static void test_waits(void)
{
  struct fake_pair *p = pair_make(1);
  struct mcp_status_comm *ss = fake_comm_status(p->send), *rs = fake_comm_status(p->recv);
  uint64_t t = 5000 * SEC;
  void *r, *s;
  int i;

  /* The sender has nothing to send to: isend gets no request; it waits for a clear-to-send. */
  CHECK(isend(p, 100, 0) == NULL);
  for (i = 0; i <= 15; i++)
    check_at(p->send, t + (uint64_t)i * SEC / 10);
  CHECK_EQ_INT(ss->check_ms, (t + 15 * SEC / 10) / 1000000);
  CHECK_EQ_INT(ss->stall_ms, t / 1000000);
  CHECK_EQ_INT(ss->wait, MCP_WAIT_CTS);
  CHECK_EQ_INT(ss->wait_seq, 1);
  CHECK(strstr(ss->wait_text, "waits for its receive buffer, which was never advertised by the peer") !=
        NULL);
  /* Short of a second it is measured, not described. */
  check_at(p->recv, t);
  check_at(p->recv, t + SEC / 2);
  CHECK_EQ_INT(rs->wait, MCP_WAIT_NONE);
  /* The receiver posts; the sender's writes are held: one waits for data, the other for an ack. */
  t += 10 * SEC;
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  r = irecv(p, 1, 4096);
  fake_progress();
  s = isend(p, 100, 0);
  CHECK(s != NULL);
  for (i = 0; i <= 12; i++) {
    check_at(p->send, t + (uint64_t)i * SEC / 10);
    check_at(p->recv, t + (uint64_t)i * SEC / 10);
  }
  CHECK_EQ_INT(ss->wait, MCP_WAIT_ACK);
  CHECK(strstr(ss->wait_text, "written but not acknowledged") != NULL);
  CHECK_EQ_INT(rs->wait, MCP_WAIT_DATA);
  CHECK_EQ_INT(rs->wait_count, 1);
  CHECK(strstr(rs->wait_text, "advertised to the peer but no data arrived") != NULL);
  CHECK_EQ_INT(rs->count.posted - rs->count.done, 1);
  /* "None completed" runs from the first check of the wait. */
  CHECK_EQ_INT(rs->done_ms, t / 1000000);
  /* Progress: the wait is cleared at the next check. */
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 0);
  CHECK_EQ_INT(wait_done(s, NULL), 1);
  CHECK_EQ_INT(wait_done(r, NULL), 1);
  check_at(p->send, t + 2 * SEC);
  check_at(p->recv, t + 2 * SEC);
  CHECK_EQ_INT(ss->wait, MCP_WAIT_NONE);
  CHECK_EQ_INT(rs->wait, MCP_WAIT_NONE);
  CHECK_EQ_INT(rs->stall_ms, 0);
  CHECK_EQ_INT(rs->done_ms, (t + 2 * SEC) / 1000000);
  fake_pair_free(p);
}

static void test_states(void)
{
  struct fake_pair *p = pair_make(1);
  struct mcp_status_comm *ss = fake_comm_status(p->send);
  struct mcp_link *l = fake_comm_link(p->send);
  void *req = NULL;

  /* The fake pair never went through connect: its slot is as mcp_status_open left it. */
  CHECK_EQ_INT(ss->state, MCP_STATUS_CONNECTING);
  mcp_link_status_setup(l, MCP_STATUS_WAIT_ACCEPT);
  CHECK_EQ_INT(ss->state, MCP_STATUS_WAIT_ACCEPT);
  CHECK_EQ_STR(ss->ibdev, "fake0");
  CHECK_EQ_INT(ss->port, 1);
  mcp_link_status_ready(l);
  CHECK_EQ_INT(ss->state, MCP_STATUS_READY);
  snprintf(l->rec.cause, sizeof(l->rec.cause), "work completion error Transport Retry Counter Exceeded (12)");
  mcp_link_status_recovering(l);
  CHECK_EQ_INT(ss->state, MCP_STATUS_RECOVERING);
  CHECK(strstr(ss->cause, "Transport Retry Counter Exceeded") != NULL);
  l->rec.count = 1;
  mcp_link_status_recovered(l);
  CHECK_EQ_INT(ss->state, MCP_STATUS_READY);
  CHECK_EQ_INT(ss->recoveries, 1);
  CHECK(strstr(ss->cause, "Transport Retry Counter Exceeded") != NULL); /* the last recovery's */
  /* A failure through the data path: the slot says failed, with the error. */
  irecv(p, 1, 64);
  fake_progress();
  CHECK(mcp_net_isend(p->send, sbuf, 4096, 0, smh, &req) != ncclSuccess);
  CHECK_EQ_INT(ss->state, MCP_STATUS_FAILED);
  CHECK(strstr(ss->cause, "is larger than the posted receive buffer of 64 bytes") != NULL);
  fake_pair_free(p);
}

int main(void)
{
  struct mcp_config *cfg = mcp_param_process();

  snprintf(dir, sizeof(dir), "/tmp/mcpnet-xfer-status.XXXXXX");
  if (mkdtemp(dir) == NULL)
    return 1;
  cfg->status = 1;
  cfg->status_dir = dir;
  cfg->local_rank = -1;
  mcp_status_acquire(cfg, "192.0.2.1:41000");
  RUN_TEST(test_counters);
  RUN_TEST(test_waits);
  RUN_TEST(test_states);
  mcp_status_release();
  rmdir(dir);
  return TEST_EXIT();
}
