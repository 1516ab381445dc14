/*
 * test_xfer_health_watchdog.c - the watchdog on a fake connected pair (mcp_fake_verbs.c), the
 * stalls made by holding the fake's QPs back: what it says
 * about each kind of stall (a send whose receive buffer the peer never advertised, data
 * written but not acknowledged, a receive advertised and never filled), and when it
 * speaks: once per stall, after MCPNET_WATCHDOG_SEC without progress, never for a
 * comm that made progress or was only idle.
 */
#include <stdarg.h>
#include <stdlib.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/log.h"
#include "xfer/comm.h"

#define SEC 1000000000ull

static char sbuf[1 << 20], rbuf[1 << 20];
static struct mcp_mr *smh, *rmh;

/* Every receive advertised at once (no entry held back): the scenarios below say
 * exactly which sends have their clear-to-send. */
static struct fake_pair *pair_make(int nqps)
{
  struct fake_pair_opts o = {.nqps = nqps};
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg(p, FAKE_SEND_SIDE, sbuf, sizeof(sbuf), NCCL_PTR_HOST);
  rmh = fake_pair_reg(p, FAKE_RECV_SIDE, rbuf, sizeof(rbuf), NCCL_PTR_HOST);
  return p;
}

/* The receiver's irecv of n buffers of size bytes (tags 0..n-1). */
static void *irecv(struct fake_pair *p, int n, size_t size)
{
  void *data[MCP_MAX_RECVS], *mh[MCP_MAX_RECVS], *req = (void *)0xbad;
  size_t sizes[MCP_MAX_RECVS];
  int tags[MCP_MAX_RECVS], i;

  for (i = 0; i < n; i++) {
    data[i] = rbuf;
    mh[i] = rmh;
    sizes[i] = size;
    tags[i] = i;
  }
  CHECK_EQ_INT(mcp_net_irecv(p->recv, n, data, sizes, tags, mh, &req), ncclSuccess);
  return req;
}

static void *isend(struct fake_pair *p, size_t size, int tag)
{
  void *req = NULL;

  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, size, tag, smh, &req), ncclSuccess);
  CHECK(req != NULL);
  return req;
}

static void test_send_no_cts(void)
{
  struct fake_pair *p = pair_make(1);
  char buf[1024];

  mcp_xfer_watchdog_describe(p->send, buf, sizeof(buf));
  CHECK(strstr(buf,
               "the send of seq 1 waits for its receive buffer, which was never advertised by the "
               "peer (no clear-to-send)") != NULL);
  CHECK(strstr(buf, "not acknowledged") == NULL);
  fake_pair_free(p);
}

static void test_send_unacked(void)
{
  struct fake_pair *p = pair_make(3);
  char buf[1024];
  void *s1;
  int i, done = 0;

  /* Seq 1 and 2 were sent (their CTS came), seq 2 striped over 3 writes (QPs 2, 0, 1);
   * seq 3's CTS is here. No write is acknowledged: every QP of the sender is held. */
  for (i = 0; i < 3; i++)
    irecv(p, 1, 1 << 20);
  fake_progress();
  for (i = 0; i < 3; i++)
    fake_pair_hold(p, FAKE_SEND_SIDE, i, 1);
  s1 = isend(p, 100, 0);
  isend(p, 3 * 64 * 1024, 0);
  mcp_xfer_watchdog_describe(p->send, buf, sizeof(buf));
  CHECK(strstr(buf,
               "2 send(s) written but not acknowledged by the peer's adapter (oldest seq 1, 1 write(s) "
               "of it unacknowledged)") == buf);
  CHECK(strstr(buf, "never advertised") == NULL);
  /* A completed send is not waiting: seq 1's write (first on QP 1) is acknowledged. */
  fake_pair_release_n(p, FAKE_SEND_SIDE, 1, 1);
  CHECK_EQ_INT(mcp_net_test(s1, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  mcp_xfer_watchdog_describe(p->send, buf, sizeof(buf));
  CHECK(
    strstr(buf, "1 send(s) written but not acknowledged by the peer's adapter (oldest seq 2, 3 write(s)") ==
    buf);
  /* Without its CTS the next send waits too: both are said. */
  isend(p, 100, 0);
  mcp_xfer_watchdog_describe(p->send, buf, sizeof(buf));
  CHECK(strstr(buf, "not acknowledged") != NULL);
  CHECK(strstr(buf, "; the send of seq 4 waits for its receive buffer") != NULL);
  fake_pair_free(p);
}

static void test_send_partial(void)
{
  struct fake_pair *p = pair_make(1);
  char buf[1024];

  /* A grouped receive of 3 buffers whose entry is still arriving: 2 of its 3 elements
   * (32 bytes each) are in the sender's ring. */
  fake_pair_hold(p, FAKE_RECV_SIDE, 0, 1);
  irecv(p, 3, 4096);
  fake_pair_release_bytes(p, FAKE_RECV_SIDE, 0, 2 * sizeof(struct mcp_cts_elem));
  mcp_xfer_watchdog_describe(p->send, buf, sizeof(buf));
  CHECK(strstr(buf, "the clear-to-send of seq 1 arrived for 2 of its 3 buffers") != NULL);
  /* Whole, one element sent: the others wait for isend with their tags. */
  fake_pair_hold(p, FAKE_RECV_SIDE, 0, 0);
  fake_progress();
  isend(p, 10, 1);
  mcp_xfer_watchdog_describe(p->send, buf, sizeof(buf));
  CHECK(strstr(buf, "the grouped receive of seq 1 has 1 of its 3 buffers sent") != NULL);
  fake_pair_free(p);
}

static void test_recv_no_data(void)
{
  struct fake_pair *p = pair_make(1);
  char buf[1024];
  void *r;
  int done = 0;

  mcp_xfer_watchdog_describe(p->recv, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "nothing is in flight on this comm");
  irecv(p, 2, 4096);
  mcp_xfer_watchdog_describe(p->recv, buf, sizeof(buf));
  CHECK(strstr(buf, "1 receive(s) advertised to the peer but no data arrived (oldest seq 1, 2 buffer(s))") ==
        buf);
  fake_pair_free(p);

  /* Part of a striped message arrived: one of its 4 writes (QPs 1, 2, 3, 0; only QP 1
   * is not held). */
  p = pair_make(4);
  r = irecv(p, 1, 1 << 20);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  fake_pair_hold(p, FAKE_SEND_SIDE, 2, 1);
  fake_pair_hold(p, FAKE_SEND_SIDE, 3, 1);
  isend(p, 4 * 64 * 1024, 0);
  CHECK_EQ_INT(mcp_net_test(r, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  mcp_xfer_watchdog_describe(p->recv, buf, sizeof(buf));
  CHECK(strstr(buf, "the oldest (seq 1) got 1 of its 4 writes: the rest never arrived") != NULL);
  fake_pair_free(p);
}

/* Progress on the receive comm through its own calls: a completion polled by test. */
static void progress(struct fake_pair *p, void *r)
{
  int done = 0;

  fake_pair_inject_wc(p, FAKE_RECV_SIDE, MCP_WR(MCP_WR_CTS, 0, 0, 0), IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
  CHECK_EQ_INT(mcp_net_test(r, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
}

/* When it speaks: after the period without progress, once; again only after progress. */
static void test_timing(void)
{
  struct fake_pair *p = pair_make(1);
  struct mcp_comm *c = p->recv;
  uint64_t t = 1000 * SEC;
  void *r;
  int i;

  mcp_log_set_logger(fake_warn_capture);
  r = irecv(p, 1, 4096);
  fake_warns = 0;
  /* Off: never. */
  for (i = 0; i < 50; i++)
    CHECK_EQ_INT(mcp_xfer_watchdog(c, t + (uint64_t)i * SEC / 10, 0), 0);
  t += 10 * SEC;
  /* Checks every 100 ms, as the liveness check runs them; MCPNET_WATCHDOG_SEC=1. */
  for (i = 0; i <= 9; i++)
    CHECK_EQ_INT(mcp_xfer_watchdog(c, t + (uint64_t)i * SEC / 10, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC, 1), 1);
  CHECK_EQ_INT(fake_warns, 1);
  CHECK(strstr(fake_lastwarn,
               "NET/MCP watchdog: receive from fake-sender pid 1 (192.0.2.1:40000) on fake1 port 1: no "
               "progress for 1 s (MCPNET_WATCHDOG_SEC=1): 1 receive(s) advertised to the peer but no data "
               "arrived") == fake_lastwarn);
  CHECK(strstr(fake_lastwarn, "reported once per stall") != NULL);
  for (i = 11; i < 40; i++)
    CHECK_EQ_INT(mcp_xfer_watchdog(c, t + (uint64_t)i * SEC / 10, 1), 0);
  CHECK_EQ_INT(fake_warns, 1);
  /* Progress ends the stall; a new one is reported again after the period. */
  progress(p, r);
  t += 4 * SEC;
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC / 2, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC, 1), 1);
  CHECK_EQ_INT(fake_warns, 2);
  /* Progress that keeps coming: never. */
  for (i = 0; i < 100; i++) {
    progress(p, r);
    CHECK_EQ_INT(mcp_xfer_watchdog(c, t + 2 * SEC + (uint64_t)i * SEC / 10, 1), 0);
  }
  /* A comm nobody waited on for a while was idle: its clock starts at the next wait. */
  t += 100 * SEC;
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC / 2, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC, 1), 1);
  CHECK_EQ_INT(fake_warns, 3);
  mcp_log_set_logger(NULL);
  fake_pair_free(p);
}

int main(void)
{
  RUN_TEST(test_send_no_cts);
  RUN_TEST(test_send_unacked);
  RUN_TEST(test_send_partial);
  RUN_TEST(test_recv_no_data);
  RUN_TEST(test_timing);
  return TEST_EXIT();
}
