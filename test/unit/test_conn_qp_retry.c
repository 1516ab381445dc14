/*
 * test_conn_qp_retry.c - NCCL_IB_MQP_RETRY_* (NCCL 2.30, misc/ibvwrap.cc): a
 * connection's RTR/RTS transition that fails with ETIMEDOUT (the peer's neighbour not
 * resolved yet) is tried again, up to NCCL_IB_MQP_RETRY_CNT times, the k-th time after
 * k x NCCL_IB_MQP_RETRY_SLEEP_MSEC; any error with NCCL_IB_MQP_RETRY_ALL. Only on the
 * setup thread of a connection's first walk: a recovery round is retried as a round.
 *
 * The fake's RTR fails as often as asked and counts its tries; the wait is injected, so
 * the test counts tries and the waits asked for, never wall-clock time.
 */
#include <errno.h>
#include <time.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/param.h"
#include "xfer/comm.h"

static unsigned waits[64];
static int nwaits;

static void record_wait(unsigned ms)
{
  if (nwaits < 64)
    waits[nwaits] = ms;
  nwaits++;
}

/* One walk of the send comm's QPs on its setup thread; 1 at RTS, -1 failed. */
static int walk(struct fake_pair *p)
{
  struct timespec nap = {0, 100000};
  int st;

  nwaits = 0;
  CHECK_EQ_INT(mcp_qp_connect_start(&p->send->link), 0);
  while ((st = mcp_qp_connect_poll(&p->send->link)) == 0)
    nanosleep(&nap, NULL);
  return st;
}

static void test_retries(void)
{
  struct mcp_config *cfg = mcp_param_process();
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(NULL);
  mcp_qp_test_set_retry_sleep(record_wait);
  cfg->ib_mqp_retry_cnt = 3;
  cfg->ib_mqp_retry_sleep_ms = 100;
  cfg->ib_mqp_retry_all = 0;
  fake_pair_configure(p); /* the pair exists: its comms take the change */

  /* Two timeouts, then it resolves: three tries, waits of 100 and 200 ms. */
  fake_fail_next_rtr(2, ETIMEDOUT);
  CHECK_EQ_INT(walk(p), 1);
  CHECK_EQ_INT(fake_fail_next_rtr(0, 0), 3);
  CHECK_EQ_INT(nwaits, 2);
  CHECK_EQ_INT(waits[0], 100);
  CHECK_EQ_INT(waits[1], 200);

  /* More timeouts than retries: 1 + 3 tries, then the walk fails. */
  fake_fail_next_rtr(9, ETIMEDOUT);
  CHECK_EQ_INT(walk(p), -EIO);
  CHECK_EQ_INT(fake_fail_next_rtr(0, 0), 4);
  CHECK_EQ_INT(nwaits, 3);
  CHECK_EQ_INT(waits[2], 300);

  /* Another error is final, unless NCCL_IB_MQP_RETRY_ALL. */
  fake_fail_next_rtr(1, EINVAL);
  CHECK_EQ_INT(walk(p), -EIO);
  CHECK_EQ_INT(fake_fail_next_rtr(0, 0), 1);
  CHECK_EQ_INT(nwaits, 0);
  cfg->ib_mqp_retry_all = 1;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  fake_fail_next_rtr(1, EINVAL);
  CHECK_EQ_INT(walk(p), 1);
  CHECK_EQ_INT(fake_fail_next_rtr(0, 0), 2);
  CHECK_EQ_INT(nwaits, 1);
  cfg->ib_mqp_retry_all = 0;
  fake_pair_configure(p); /* the pair exists: its comms take the change */

  /* 0 retries: NCCL_IB_MQP_RETRY_CNT=0 turns it off. */
  cfg->ib_mqp_retry_cnt = 0;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  fake_fail_next_rtr(1, ETIMEDOUT);
  CHECK_EQ_INT(walk(p), -EIO);
  CHECK_EQ_INT(fake_fail_next_rtr(0, 0), 1);
  CHECK_EQ_INT(nwaits, 0);
  cfg->ib_mqp_retry_cnt = 3;
  fake_pair_configure(p); /* the pair exists: its comms take the change */

  /* A recovery round's walk is not retried in place: recovery starts a new round. */
  p->send->link.rec.round = 1;
  fake_fail_next_rtr(1, ETIMEDOUT);
  CHECK_EQ_INT(walk(p), -EIO);
  CHECK_EQ_INT(fake_fail_next_rtr(0, 0), 1);
  CHECK_EQ_INT(nwaits, 0);
  p->send->link.rec.round = 0;

  mcp_qp_test_set_retry_sleep(NULL);
  fake_pair_free(p);
}

int main(void)
{
  RUN_TEST(test_retries);
  return TEST_EXIT();
}
