/*
 * test_xfer_watchdog.c - the watchdog on comms built by hand (no verbs): what it says
 * about each kind of stall (a send whose receive buffer the peer never advertised, data
 * written but not acknowledged, a receive advertised and never filled), and when it
 * speaks: once per stall, after MCPNET_WATCHDOG_SEC without progress, never for a
 * comm that made progress or was only idle.
 */
#include <stdarg.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "mcpnet/comm.h"
#include "mcpnet/log.h"

#define SEC 1000000000ull

static int warns;
static char last[4096];

static void capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                    const char *fmt, ...)
{
  va_list ap;

  (void)flags;
  (void)file;
  (void)line;
  if (level != NCCL_LOG_WARN)
    return;
  va_start(ap, fmt);
  vsnprintf(last, sizeof(last), fmt, ap);
  va_end(ap);
  warns++;
}

static struct mcp_net_dev info;
static struct mcp_devctx dc;

static struct mcp_comm *comm_make(int kind)
{
  struct mcp_comm *c = calloc(1, sizeof(*c));

  snprintf(info.name, sizeof(info.name), "rxe0");
  snprintf(info.ibdev, sizeof(info.ibdev), "rxe0");
  info.port = 1;
  snprintf(info.driver, sizeof(info.driver), "rxe");
  dc.info = &info;
  c->link.kind = kind;
  c->link.dc = &dc;
  c->seq = 1;
  snprintf(c->link.peer_name, sizeof(c->link.peer_name), "lab-b pid 42 (192.0.2.2:40000)");
  if (kind == MCP_COMM_SEND) {
    c->ring_elems = calloc(MCP_SLOTS, sizeof(struct mcp_cts_slot));
    c->sslots = calloc(MCP_SLOTS, sizeof(*c->sslots));
    mcp_req_pool_init(c, MCP_SEND_REQS, MCP_REQ_SEND);
  } else {
    c->staging = calloc(MCP_SLOTS, sizeof(struct mcp_cts_slot));
    c->rslots = calloc(MCP_SLOTS, sizeof(*c->rslots));
    mcp_req_pool_init(c, MCP_RECV_REQS, MCP_REQ_RECV);
  }
  return c;
}

static void comm_free(struct mcp_comm *c)
{
  free(c->ring_elems);
  free(c->sslots);
  free(c->staging);
  free(c->rslots);
  free(c->reqs);
  free(c);
}

/* The receiver's irecv of seq: its clear-to-send has landed in the sender's ring. */
static void cts_arrive(struct mcp_comm *c, uint32_t seq, int n)
{
  int i;

  for (i = 0; i < n; i++) {
    struct mcp_cts_elem *e = &c->ring_elems[seq % MCP_SLOTS].e[i];
    e->n = (uint16_t)n;
    e->idx = (uint16_t)i;
    e->size = 4096;
    e->seq = seq;
  }
}

static void test_send_no_cts(void)
{
  struct mcp_comm *c = comm_make(MCP_COMM_SEND);
  char buf[1024];

  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK(strstr(buf, "the send of seq 1 waits for its receive buffer, which was never advertised by the "
                    "peer (no clear-to-send)") != NULL);
  CHECK(strstr(buf, "not acknowledged") == NULL);
  comm_free(c);
}

static void test_send_unacked(void)
{
  struct mcp_comm *c = comm_make(MCP_COMM_SEND);
  struct mcp_request *a, *b;
  char buf[1024];

  /* Seq 1 and 2 were sent (their CTS came), seq 2 striped over 3 writes; seq 3's CTS is here. */
  cts_arrive(c, 1, 1);
  cts_arrive(c, 2, 1);
  a = mcp_req_get(c);
  a->kind = MCP_REQ_SEND;
  a->seq = 2;
  a->pending = 3;
  b = mcp_req_get(c);
  b->kind = MCP_REQ_SEND;
  b->seq = 1;
  b->pending = 1;
  c->seq = 3;
  cts_arrive(c, 3, 1);
  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK(strstr(buf, "2 send(s) written but not acknowledged by the peer's adapter (oldest seq 1, 1 write(s) "
                    "of it unacknowledged)") == buf);
  CHECK(strstr(buf, "never advertised") == NULL);
  /* A completed send is not waiting. */
  b->done = 1;
  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK(strstr(buf, "1 send(s) written but not acknowledged by the peer's adapter (oldest seq 2, 3 write(s)") == buf);
  /* Without its CTS the next send waits too: both are said. */
  c->seq = 4;
  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK(strstr(buf, "not acknowledged") != NULL);
  CHECK(strstr(buf, "; the send of seq 4 waits for its receive buffer") != NULL);
  comm_free(c);
}

static void test_send_partial(void)
{
  struct mcp_comm *c = comm_make(MCP_COMM_SEND);
  char buf[1024];

  /* A grouped receive of 3 buffers whose entry is still arriving. */
  cts_arrive(c, 1, 3);
  c->ring_elems[1].e[2].seq = 0;
  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK(strstr(buf, "the clear-to-send of seq 1 arrived for 2 of its 3 buffers") != NULL);
  /* Whole, one element sent: the others wait for isend with their tags. */
  c->ring_elems[1].e[2].seq = 1;
  c->sslots[1].seq = 1;
  c->sslots[1].n = 3;
  c->sslots[1].matched = 1;
  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK(strstr(buf, "the grouped receive of seq 1 has 1 of its 3 buffers sent") != NULL);
  comm_free(c);
}

static void test_recv_no_data(void)
{
  struct mcp_comm *c = comm_make(MCP_COMM_RECV);
  struct mcp_request *r;
  char buf[1024];

  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "nothing is in flight on this comm");
  r = mcp_req_get(c);
  r->kind = MCP_REQ_RECV;
  r->seq = 1;
  r->n = 2;
  c->rslots[1].req = r;
  c->rslots[1].seq = 1;
  c->seq = 2;
  c->inflight = 1;
  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK(strstr(buf, "1 receive(s) advertised to the peer but no data arrived (oldest seq 1, 2 buffer(s))") == buf);
  /* Part of a striped message arrived. */
  c->rslots[1].expected = 4;
  c->rslots[1].got = 1;
  mcp_xfer_watchdog_describe(c, buf, sizeof(buf));
  CHECK(strstr(buf, "the oldest (seq 1) got 1 of its 4 writes: the rest never arrived") != NULL);
  comm_free(c);
}

/* When it speaks: after the period without progress, once; again only after progress. */
static void test_timing(void)
{
  struct mcp_comm *c = comm_make(MCP_COMM_RECV);
  struct mcp_request *r = mcp_req_get(c);
  uint64_t t = 1000 * SEC;
  int i;

  mcp_log_set_logger(capture);
  r->kind = MCP_REQ_RECV;
  r->seq = 1;
  r->n = 1;
  c->rslots[1].req = r;
  c->rslots[1].seq = 1;
  c->seq = 2;
  warns = 0;
  /* Off: never. */
  for (i = 0; i < 50; i++)
    CHECK_EQ_INT(mcp_xfer_watchdog(c, t + (uint64_t)i * SEC / 10, 0), 0);
  t += 10 * SEC;
  /* Checks every 100 ms, as the liveness check runs them; MCPNET_WATCHDOG_SEC=1. */
  for (i = 0; i <= 9; i++)
    CHECK_EQ_INT(mcp_xfer_watchdog(c, t + (uint64_t)i * SEC / 10, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC, 1), 1);
  CHECK_EQ_INT(warns, 1);
  CHECK(strstr(last, "NET/MCP watchdog: receive from lab-b pid 42 (192.0.2.2:40000) on rxe0 port 1: no progress for "
                     "1 s (MCPNET_WATCHDOG_SEC=1): 1 receive(s) advertised to the peer but no data arrived") == last);
  CHECK(strstr(last, "reported once per stall") != NULL);
  for (i = 11; i < 40; i++)
    CHECK_EQ_INT(mcp_xfer_watchdog(c, t + (uint64_t)i * SEC / 10, 1), 0);
  CHECK_EQ_INT(warns, 1);
  /* Progress ends the stall; a new one is reported again after the period. */
  c->wd_progress++;
  t += 4 * SEC;
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC / 2, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC, 1), 1);
  CHECK_EQ_INT(warns, 2);
  /* Progress that keeps coming: never. */
  for (i = 0; i < 100; i++) {
    c->wd_progress++;
    CHECK_EQ_INT(mcp_xfer_watchdog(c, t + 2 * SEC + (uint64_t)i * SEC / 10, 1), 0);
  }
  /* A comm nobody waited on for a while was idle: its clock starts at the next wait. */
  t += 100 * SEC;
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC / 2, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(c, t + SEC, 1), 1);
  CHECK_EQ_INT(warns, 3);
  mcp_log_set_logger(NULL);
  comm_free(c);
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
