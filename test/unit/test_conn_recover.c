/*
 * test_conn_recover.c - the whole recovery of a connection after its QPs were lost,
 * without a VM: the fake pair's QPs break (mcp_fake_verbs.c), the comms notice it in
 * their own calls, the RECOVER frames travel over a real out-of-band connection on the
 * loopback interface (this process to its own listener), the QP walks run on their
 * threads against the fake, and the recovery's deadlines run on the test's clock
 * (mcp_clock_test_set).
 *
 * Why: test_xfer_comm_protocol.c checks the replay functions called directly; this checks
 * that the state machine gets there: the failed completion starts a round, the peer
 * that saw nothing learns of it from the frame, both re-create and connect QPs, and
 * the replay delivers each message exactly once, in order. The loop that drives it
 * counts its turns and never bounds wall-clock time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "mcp_fake_flight.h"
#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "core/status.h"
#include "fabric/fabric_gid.h"
#include "conn/link.h"
#include "conn/oob.h"
#include "xfer/comm.h"

#define N FAKE_FLIGHT_N
#define TURNS FAKE_FLIGHT_TURNS

static uint64_t now_ns = 1000000000000ull;
static uint64_t test_clock(void) { return now_ns; }

/* Recovery's lookup of our GID on a RoCE port (fabric's mcp_fabric_gid_refind: netlink
 * and sysfs queries that may wait for the kernel) stands in here, counting the threads it
 * runs on: NCCL's proxy thread (the test's, which makes every isend/irecv/test) must
 * never be one of them. */
static pthread_t proxy_thread;
static atomic_int lookups_here, lookups_elsewhere, gid_answer;
/* While lookup_gate is set, a lookup waits in the kernel until the test clears it. */
static atomic_int lookup_gate;

static int lookup_counted(const struct mcp_net_dev *d, int index_in_use)
{
  (void)d;
  (void)index_in_use;
  atomic_fetch_add(pthread_equal(pthread_self(), proxy_thread) ? &lookups_here : &lookups_elsewhere, 1);
  while (atomic_load(&lookup_gate))
    mcp_test_nap();
  return atomic_load(&gid_answer);
}

/* Both ends' devices become RoCE ports whose GID lookup is lookup_counted. */
static void lookups_on(struct fake_pair *p, int answer)
{
  proxy_thread = pthread_self();
  atomic_store(&lookups_here, 0);
  atomic_store(&lookups_elsewhere, 0);
  atomic_store(&gid_answer, answer);
  fake_pair_member_info(p, FAKE_SEND_SIDE, 0)->link_layer = IBV_LINK_LAYER_ETHERNET;
  fake_pair_member_info(p, FAKE_RECV_SIDE, 0)->link_layer = IBV_LINK_LAYER_ETHERNET;
  mcp_fabric_gid_test_set_refind(lookup_counted);
}

static int gid_index_of(struct mcp_comm *c)
{
  struct mcp_wire_endpoint ep;

  fake_comm_endpoint(c, &ep);
  return ep.gid_index;
}

/* The link goes down under eight messages: 1-3 acknowledged, 4-5 landed without their
 * acknowledgements, 6-8 lost. Only the sender's adapter reports it (both = 0), or both
 * adapters do (both = 1). roce: both ends are RoCE ports whose GID the recovery looks
 * up again (1), and it is missing for the first 300 ms of the recovery's clock (2: the
 * kernel has not put it back yet after the flap). */
/* The run publishes its comms (status.h): what mcpnet-top reads of a recovery is checked. */
static int published;

static void run(int both, int roce)
{
  struct fake_pair_opts o = {.nqps = 1, .publish = published};
  int saw_recovering = 0;
  struct mcp_config *cfg = mcp_param_process();
  struct fake_pair *p;
  struct mcp_oob_stream *ss = NULL, *rs = NULL;
  struct mcp_mr *smh, *rmh;
  struct fake_flight f;
  int i, turn, again[N];

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg(p, FAKE_SEND_SIDE, fake_flight_sbuf, sizeof(fake_flight_sbuf), NCCL_PTR_HOST);
  rmh = fake_pair_reg(p, FAKE_RECV_SIDE, fake_flight_rbuf, sizeof(fake_flight_rbuf), NCCL_PTR_HOST);
  CHECK_EQ_INT(fake_streams_open(p, &ss, &rs), 0);
  if (rs == NULL)
    goto out;
  cfg->recovery_timeout_s = 30;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  mcp_test_log_clear();
  if (roce) {
    CHECK(gid_index_of(p->send) != 3 && gid_index_of(p->recv) != 3);
    lookups_on(p, roce == 2 ? -1 : 3); /* after the flap the kernel put our GID at index 3 */
  }

  CHECK_EQ_INT(fake_flight_recvs(p, rmh, &f, 100, 40), 0);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  CHECK_EQ_INT(fake_flight_sends(p, smh, &f, 100), 0);
  fake_pair_release_n(p, FAKE_SEND_SIDE, 0, 3);
  fake_pair_break(p, FAKE_SEND_SIDE, 0, 1);
  fake_pair_release_n(p, FAKE_SEND_SIDE, 0, 2);
  fake_pair_break(p, FAKE_SEND_SIDE, 0, 0);
  if (both)
    fake_pair_break(p, FAKE_RECV_SIDE, 0, 0);
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 0);
  fake_posts_reset();

  /* NCCL's proxy: test every request in flight, round after round. */
  for (turn = 0; turn < TURNS && f.left > 0; turn++) {
    int failed = fake_flight_test(p, &f, 0);

    CHECK_EQ_INT(failed, 0);
    if (failed != 0)
      goto out;
    if (published && fake_comm_status(p->send)->state == MCP_STATUS_RECOVERING &&
        strstr(fake_comm_status(p->send)->cause, "work completion error") != NULL)
      saw_recovering++;
    mcp_oob_progress();
    now_ns += 1000000ull; /* 1 ms of the recovery's clock per round of calls */
    if (turn % 4 == 3)
      mcp_test_nap(); /* the QP walks run on their own threads */
    if (roce == 2 && atomic_load(&gid_answer) < 0 && turn >= 300 && atomic_load(&lookups_elsewhere) >= 4) {
      /* Both ends wait with their QPs at INIT, each device looking again at most every
       * 100 ms of the clock: one lookup per end for the round's walk, then one per
       * device per 100 ms at most, not one per call. Then the GID is back. */
      CHECK_EQ_INT(fake_comm_recoveries(p->send) + fake_comm_recoveries(p->recv), 0);
      CHECK(atomic_load(&lookups_elsewhere) <= 2 + 2 * (turn / 100 + 1));
      atomic_store(&gid_answer, 3);
    }
  }
  CHECK_EQ_INT(f.left, 0);
  for (i = 0; i < N; i++) {
    CHECK_EQ_INT(f.rdone[i], 1);
    CHECK_EQ_INT(f.rdone[i] ? f.rsize[i] : 100 + i, 100 + i);
    CHECK(fake_same(fake_flight_rbuf + i * 4096, 100 + (size_t)i, (unsigned)(40 + i)));
  }
  /* Exactly once: 4-5 completed from the receiver's table, 6-8 written again once. */
  fake_flight_writes(1, again); /* again[seq - 1] */
  for (i = 1; i <= N; i++)
    CHECK_EQ_INT(again[i - 1], i <= 5 ? 0 : 1);
  CHECK_EQ_INT(fake_comm_recoveries(p->send), 1);
  CHECK_EQ_INT(fake_comm_recoveries(p->recv), 1);
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  /* Who started the round, and how the other side learned of it. */
  CHECK(mcp_test_log_has(NCCL_LOG_WARN,
                         "send to fake-receiver pid 2 (192.0.2.2:40000): work completion error Work Request "
                         "Flushed Error (5) on QP"));
  CHECK(mcp_test_log_has(
    NCCL_LOG_WARN,
    both ? "receive from fake-sender pid 1 (192.0.2.1:40000): work completion error Work "
           "Request Flushed Error (5) on QP"
         : "receive from fake-sender pid 1 (192.0.2.1:40000): the peer lost the connection's "
           "RDMA path and re-created its QPs"));
  CHECK(mcp_test_log_has(NCCL_LOG_WARN, "send to fake-receiver pid 2 (192.0.2.2:40000): recovered from"));
  CHECK(mcp_test_log_has(NCCL_LOG_WARN, "receive from fake-sender pid 1 (192.0.2.1:40000): recovered from"));
  if (published) {
    /* mcpnet-top saw the round (its cause) while it ran, and the count once it was over. */
    CHECK(saw_recovering > 0);
    CHECK_EQ_INT(fake_comm_status(p->send)->state, MCP_STATUS_READY);
    CHECK_EQ_INT(fake_comm_status(p->send)->recoveries, 1);
    CHECK_EQ_INT(fake_comm_status(p->recv)->recoveries, 1);
    CHECK(strstr(fake_comm_status(p->send)->cause, "work completion error") != NULL);
  }
  if (roce) {
    /* Each end looked its GID up on a setup thread, and its new QPs use what it found. */
    CHECK_EQ_INT(atomic_load(&lookups_here), 0);
    CHECK(atomic_load(&lookups_elsewhere) >= 2);
    CHECK_EQ_INT(gid_index_of(p->send), 3);
    CHECK_EQ_INT(gid_index_of(p->recv), 3);
  }
out:
  mcp_fabric_gid_test_set_refind(NULL);
  cfg->recovery_timeout_s = 0;
  fake_streams_close(p, ss, rs);
  fake_pair_free(p);
}

/* A fused link (two members each end, QP i on member i % 2) loses member 1 of the sending
 * end: its QP's work fails, the other member's work lands. The link recovers as a whole
 * (every member's QPs re-created, the replay writes exactly what did not land, whichever
 * member it was striped to). With NCCL_IB_RESILIENCY_PORT_FAILOVER=0 (as here), a member
 * that stays down fails the comm after MCPNET_RECOVERY_TIMEOUT with the physical member
 * named; with failover on, the link goes on without it (test_conn_recover_failover.c). */
static void run_fused(int stays_down)
{
  struct fake_pair_opts o = {.nqps = 1, .ndevs = {2, 2}};
  struct mcp_config *cfg = mcp_param_process();
  struct fake_pair *p;
  struct mcp_oob_stream *ss = NULL, *rs = NULL;
  void *smh, *rmh;
  struct fake_flight f;
  int i, turn, again[N], failed = 0;

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg_mh(p, FAKE_SEND_SIDE, fake_flight_sbuf, sizeof(fake_flight_sbuf), NCCL_PTR_HOST);
  rmh = fake_pair_reg_mh(p, FAKE_RECV_SIDE, fake_flight_rbuf, sizeof(fake_flight_rbuf), NCCL_PTR_HOST);
  CHECK_EQ_INT(fake_streams_open(p, &ss, &rs), 0);
  if (rs == NULL)
    goto out;
  cfg->recovery_timeout_s = stays_down ? 2 : 30;
  cfg->ib_port_failover = 0;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  mcp_test_log_clear();

  CHECK_EQ_INT(fake_flight_recvs(p, rmh, &f, 200, 60), 0);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 1, 1); /* member 1's QP: odd seqs */
  CHECK_EQ_INT(fake_flight_sends(p, smh, &f, 200), 0);
  fake_progress(); /* member 0's writes (even seqs) land and are acknowledged */
  fake_pair_break_member(p, FAKE_SEND_SIDE, 1, 0);
  if (stays_down)
    fake_pair_member_down(p, FAKE_SEND_SIDE, 1, 1);
  fake_pair_hold(p, FAKE_SEND_SIDE, 1, 0);
  fake_posts_reset();

  /* Both ends are driven until the sender fails (stays down: the receiver, which only
   * waits for the sender's READY, may give up first) or everything completed. */
  for (turn = 0; turn < TURNS && f.left > 0 && !(stays_down ? fake_comm_error(p->send) != 0 : failed);
       turn++) {
    failed += fake_flight_test(p, &f, stays_down);
    mcp_oob_progress();
    now_ns += 1000000ull;
    if (turn % 4 == 3)
      mcp_test_nap();
  }
  if (stays_down) {
    /* The sender gives up at its deadline, naming the physical member that went down. */
    printf("  sender failed with: %s\n", fake_comm_errmsg(p->send));
    CHECK(fake_comm_error(p->send) != 0);
    CHECK(strstr(fake_comm_errmsg(p->send), "MCPNET_RECOVERY_TIMEOUT=2") != NULL);
    CHECK(strstr(fake_comm_errmsg(p->send), "local fake0_m1 port 1") != NULL);
    CHECK(mcp_test_log_has(NCCL_LOG_WARN, "fake0_m1 port 1: QP")); /* the failed RTR names it too */
    for (i = 1; i < N; i += 2) /* seq i + 1 even: member 0's, which landed */
      CHECK(fake_same(fake_flight_rbuf + i * 4096, 200 + (size_t)i, (unsigned)(60 + i)));
    goto out;
  }
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(f.left, 0);
  for (i = 0; i < N; i++) {
    CHECK_EQ_INT(f.rdone[i] ? f.rsize[i] : -1, 200 + i);
    CHECK(fake_same(fake_flight_rbuf + i * 4096, 200 + (size_t)i, (unsigned)(60 + i)));
  }
  /* Exactly once: member 0's messages (seq 2, 4, ...) completed from the receiver's table,
   * member 1's (seq 1, 3, ...) written once more after the recovery. */
  fake_flight_writes(1, again); /* again[seq - 1] */
  for (i = 1; i <= N; i++)
    CHECK_EQ_INT(again[i - 1], i % 2 == 1 ? 1 : 0);
  CHECK_EQ_INT(fake_comm_recoveries(p->send), 1);
  CHECK_EQ_INT(fake_comm_recoveries(p->recv), 1);
  CHECK(mcp_test_log_has(NCCL_LOG_WARN, "local fake0_m1 port 1; re-creating the connection's 2 QP(s)"));
out:
  cfg->recovery_timeout_s = 0;
  fake_streams_close(p, ss, rs);
  fake_pair_dereg_mh(p, FAKE_SEND_SIDE, smh);
  fake_pair_dereg_mh(p, FAKE_RECV_SIDE, rmh);
  fake_pair_free(p);
}

static void test_recover_fused_member_flap(void) { run_fused(0); }
static void test_recover_fused_member_stays_down(void) { run_fused(1); }

static void test_recover_sender_noticed(void) { run(0, 0); }
static void test_recover_published(void)
{
  struct mcp_config cfg = {.status = 1, .local_rank = -1};
  char dir[64];

  snprintf(dir, sizeof(dir), "/tmp/mcpnet-recovery-status.XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  cfg.status_dir = dir;
  mcp_status_acquire(&cfg, "");
  published = 1;
  run(0, 0);
  published = 0;
  mcp_status_release();
  rmdir(dir);
}
static void test_recover_both_noticed(void) { run(1, 0); }
static void test_recover_roce_gid_off_proxy_thread(void) { run(0, 1); }
static void test_recover_roce_gid_back_late(void) { run(0, 2); }

static int lookups_running(struct mcp_devctx *dc)
{
  int n;

  pthread_mutex_lock(&dc->gid_lock);
  n = dc->gid_running;
  pthread_mutex_unlock(&dc->gid_lock);
  return n;
}

/* Many comms of one device wait for the same answer: whether our GID is in the port's
 * table. They share the device's lookups: 32 comms asking after a GID change event make
 * one lookup, and 32 comms waiting for a GID that stays missing make at most one lookup
 * per 100 ms of the clock between them, not 32; once it is back, every comm learns its
 * index from the next. */
static void test_gid_lookups_shared_by_device(void)
{
  struct fake_pair_opts o = {.nqps = 1};
  struct fake_pair *p;
  struct mcp_comm *c[32];
  unsigned need[32];
  int index[32], got, i, turn, n = 32, before;

  fake_verbs_install();
  p = fake_pair_make(&o);
  lookups_on(p, 5);
  for (i = 0; i < n; i++) {
    c[i] = fake_comm_alloc(p, FAKE_RECV_SIDE);
    need[i] = mcp_qp_gid_need(&c[i]->link, 0);
    index[i] = -2;
  }
  /* After an event: every comm asks, one lookup answers all of them. */
  for (turn = 0, got = 0; turn < TURNS && got < n; turn++) {
    for (i = 0, got = 0; i < n; i++) {
      if (index[i] == -2 && mcp_qp_gid_poll(&c[i]->link, 0, need[i], &index[i]) != 1)
        index[i] = -2;
      got += index[i] != -2;
    }
    mcp_test_nap();
  }
  CHECK_EQ_INT(got, n);
  for (i = 0; i < n; i++)
    CHECK_EQ_INT(index[i], 5);
  CHECK_EQ_INT(atomic_load(&lookups_here), 0);
  CHECK_EQ_INT(atomic_load(&lookups_elsewhere), 1);

  /* The GID is gone for 1 s of the clock: every comm asks again after each answer. */
  atomic_store(&gid_answer, -1);
  for (i = 0; i < n; i++)
    need[i] = mcp_qp_gid_need(&c[i]->link, 0);
  before = atomic_load(&lookups_elsewhere);
  for (turn = 0; turn < 1000; turn++) {
    for (i = 0; i < n; i++)
      if (mcp_qp_gid_poll(&c[i]->link, 0, need[i], &index[i]) == 1 && index[i] < 0)
        need[i] = mcp_qp_gid_need(&c[i]->link, 0);
    now_ns += 1000000ull;
    mcp_test_nap();
  }
  CHECK(atomic_load(&lookups_elsewhere) - before >= 2);  /* it went on looking (threads permitting) */
  CHECK(atomic_load(&lookups_elsewhere) - before <= 11); /* 1 s of the clock: 11 at most, never 32 */

  /* Back at index 7: the next lookup tells every comm. */
  atomic_store(&gid_answer, 7);
  for (turn = 0, got = 0; turn < TURNS && got < n; turn++) {
    for (i = 0, got = 0; i < n; i++) {
      if (mcp_qp_gid_poll(&c[i]->link, 0, need[i], &index[i]) == 1 && index[i] < 0)
        need[i] = mcp_qp_gid_need(&c[i]->link, 0);
      else if (index[i] == 7)
        got++;
    }
    now_ns += 1000000ull;
    mcp_test_nap();
  }
  CHECK_EQ_INT(got, n);
  CHECK_EQ_INT(atomic_load(&lookups_here), 0);
  for (turn = 0; turn < TURNS && lookups_running(fake_pair_devctx(p, FAKE_RECV_SIDE)); turn++)
    mcp_test_nap(); /* the last lookup's thread is done with the device before it goes */
  for (i = 0; i < n; i++) {
    mcp_qp_connect_abandon(&c[i]->link);
    fake_comm_release(c[i]);
  }
  mcp_fabric_gid_test_set_refind(NULL);
  fake_pair_free(p);
}

/* Every comm of a port starts a round at once (a link flap), and each round's walk looks
 * our GID up first: they share the lookups too. 32 walks started while a lookup is held
 * in the kernel make at most two between them (the one under way may have begun before
 * some asked; the next answers the rest), not 32, and every walk gets the answer. */
static void test_walk_lookups_shared(void)
{
  struct fake_pair_opts o = {.nqps = 1};
  struct fake_pair *p;
  struct mcp_comm *c[32];
  int index[32], got, i, turn, n = 32, st;

  fake_verbs_install();
  p = fake_pair_make(&o);
  lookups_on(p, 4);
  atomic_store(&lookup_gate, 1);
  for (i = 0; i < n; i++) {
    c[i] = fake_comm_alloc(p, FAKE_RECV_SIDE);
    CHECK_EQ_INT(mcp_qp_connect_start_gid(&c[i]->link), 0);
    index[i] = -2;
  }
  for (turn = 0; turn < TURNS && atomic_load(&lookups_elsewhere) == 0; turn++)
    mcp_test_nap(); /* the first is in the kernel, the others wait for it or are still starting */
  atomic_store(&lookup_gate, 0);
  for (turn = 0, got = 0; turn < TURNS && got < n; turn++) {
    for (i = 0, got = 0; i < n; i++) {
      if (index[i] == -2 && (st = mcp_qp_connect_poll_gid(&c[i]->link, &index[i])) != 0)
        CHECK_EQ_INT(st, 1);
      got += index[i] != -2;
    }
    mcp_test_nap();
  }
  CHECK_EQ_INT(got, n);
  for (i = 0; i < n; i++)
    CHECK_EQ_INT(index[i], 4);
  CHECK_EQ_INT(atomic_load(&lookups_here), 0);
  CHECK(atomic_load(&lookups_elsewhere) >= 1);
  CHECK(atomic_load(&lookups_elsewhere) <= 2);
  for (i = 0; i < n; i++)
    fake_comm_release(c[i]);
  mcp_fabric_gid_test_set_refind(NULL);
  fake_pair_free(p);
}

/* A GID change event on the receiving end's device: whether our GID left its index is
 * looked up on a thread of its own and collected by a later liveness check. Still there:
 * nothing happens. Moved (to index 6): the connection recovers onto it, and a message
 * posted around it arrives. The proxy thread never runs the lookup. */
static void test_recover_gid_event_off_proxy_thread(void)
{
  struct fake_pair_opts o = {.nqps = 1};
  struct mcp_config *cfg = mcp_param_process();
  struct fake_pair *p;
  struct mcp_oob_stream *ss = NULL, *rs = NULL;
  struct mcp_mr *smh, *rmh;
  void *r = NULL, *s = NULL, *data = fake_flight_rbuf, *mh;
  size_t size = 4096;
  int tag = 1, turn, done = 0, sdone = 0, rsize = -1, seen;

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg(p, FAKE_SEND_SIDE, fake_flight_sbuf, sizeof(fake_flight_sbuf), NCCL_PTR_HOST);
  rmh = fake_pair_reg(p, FAKE_RECV_SIDE, fake_flight_rbuf, sizeof(fake_flight_rbuf), NCCL_PTR_HOST);
  mh = rmh;
  memset(fake_flight_rbuf, 0, sizeof(fake_flight_rbuf));
  CHECK_EQ_INT(fake_streams_open(p, &ss, &rs), 0);
  if (rs == NULL)
    goto out;
  cfg->recovery_timeout_s = 30;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  mcp_test_log_clear();
  lookups_on(p, gid_index_of(p->recv)); /* the event did not move our GID */
  CHECK_EQ_INT(mcp_net_irecv(p->recv, 1, &data, &size, &tag, &mh, &r), ncclSuccess);
  CHECK(r != NULL);
  if (r == NULL)
    goto out;

  /* The table changed, our entry did not: one lookup, off this thread, and no round. */
  atomic_fetch_add(&fake_pair_devctx(p, FAKE_RECV_SIDE)->gid_gen, 1);
  for (turn = 0; turn < TURNS && atomic_load(&lookups_here) + atomic_load(&lookups_elsewhere) == 0; turn++) {
    fake_comm_check_due(p->recv);
    CHECK_EQ_INT(mcp_net_test(r, &done, &rsize), ncclSuccess);
    now_ns += 1000000ull;
    mcp_test_nap();
  }
  for (turn = 0; turn < 20; turn++) { /* later checks collect the answer */
    fake_comm_check_due(p->recv);
    CHECK_EQ_INT(mcp_net_test(r, &done, &rsize), ncclSuccess);
    now_ns += 1000000ull;
    mcp_test_nap();
  }
  CHECK_EQ_INT(atomic_load(&lookups_here), 0);
  CHECK_EQ_INT(atomic_load(&lookups_elsewhere), 1);
  CHECK_EQ_INT(fake_comm_rec_phase(p->recv), MCP_REC_NONE);
  CHECK_EQ_INT(done, 0);

  /* A send waits on the sender's QP (held: it has not reached the wire) when the kernel
   * moves our GID: the receiving end starts a round, the sender follows, the replay
   * writes the message on the new QPs. */
  fake_pattern(fake_flight_sbuf, 200, 77);
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  CHECK_EQ_INT(mcp_net_isend(p->send, fake_flight_sbuf, 200, 1, smh, &s), ncclSuccess);
  CHECK(s != NULL);
  if (s == NULL)
    goto out;
  seen = atomic_load(&lookups_elsewhere);
  atomic_store(&gid_answer, 6);
  atomic_fetch_add(&fake_pair_devctx(p, FAKE_RECV_SIDE)->gid_gen, 1);
  for (turn = 0; turn < TURNS && (!done || !sdone); turn++) {
    if (!done) {
      fake_comm_check_due(p->recv);
      CHECK_EQ_INT(mcp_net_test(r, &done, &rsize), ncclSuccess);
    }
    if (!sdone) {
      fake_comm_check_due(p->send);
      CHECK_EQ_INT(mcp_net_test(s, &sdone, NULL), ncclSuccess);
    }
    mcp_oob_progress();
    now_ns += 1000000ull;
    if (turn % 4 == 3)
      mcp_test_nap();
  }
  CHECK_EQ_INT(done, 1);
  CHECK_EQ_INT(sdone, 1);
  CHECK_EQ_INT(rsize, 200);
  CHECK(fake_same(fake_flight_rbuf, 200, 77));
  CHECK(mcp_test_log_has(NCCL_LOG_WARN, "is no longer at index"));
  CHECK_EQ_INT(fake_comm_recoveries(p->recv), 1);
  CHECK_EQ_INT(fake_comm_recoveries(p->send), 1);
  CHECK_EQ_INT(gid_index_of(p->recv), 6);
  CHECK_EQ_INT(atomic_load(&lookups_here), 0);
  CHECK(atomic_load(&lookups_elsewhere) > seen);
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  if (fake_comm_error(p->send) | fake_comm_error(p->recv))
    printf("  send: %s\n  recv: %s\n", fake_comm_errmsg(p->send), fake_comm_errmsg(p->recv));
out:
  mcp_fabric_gid_test_set_refind(NULL);
  cfg->recovery_timeout_s = 0;
  fake_streams_close(p, ss, rs);
  fake_pair_free(p);
}

int main(void)
{
  struct mcp_config cfg;

  setvbuf(stdout, NULL, _IONBF, 0);
  memset(&cfg, 0, sizeof(cfg));
  cfg.socket_ifname = "lo";
  cfg.socket_af = AF_INET;
  cfg.connect_timeout_s = 5;
  mcp_log_set_logger(mcp_test_log_capture);
  mcp_clock_test_set(test_clock);
  if (mcp_oob_acquire(&cfg) != 0) {
    fprintf(stderr, "cannot start the out-of-band channel on lo\n");
    return 1;
  }
  RUN_TEST(test_recover_sender_noticed);
  RUN_TEST(test_recover_published);
  RUN_TEST(test_recover_both_noticed);
  RUN_TEST(test_recover_roce_gid_off_proxy_thread);
  RUN_TEST(test_recover_roce_gid_back_late);
  RUN_TEST(test_gid_lookups_shared_by_device);
  RUN_TEST(test_walk_lookups_shared);
  RUN_TEST(test_recover_gid_event_off_proxy_thread);
  RUN_TEST(test_recover_fused_member_flap);
  RUN_TEST(test_recover_fused_member_stays_down);
  mcp_oob_release();
  mcp_clock_test_set(NULL);
  return TEST_EXIT();
}
