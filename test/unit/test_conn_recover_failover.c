/*
 * test_conn_recover_failover.c - a fused link that loses a member for good goes on through the
 * others, and takes the member back when its port returns (NCCL_IB_RESILIENCY_PORT_
 * FAILOVER and _RECOVERY, issue 37), without a VM: the fake pair's members break
 * (mcp_fake_verbs.c), their ports read DOWN, the RECOVER frames travel on a real
 * out-of-band connection (mcp_fake_flight.c), the recovery runs on the test's clock.
 *
 * Why: a member's loss used to hold every round (its QPs could not connect) until
 * MCPNET_RECOVERY_TIMEOUT failed the comm, where NCCL 2.30 with failover completes the
 * job. What must hold: every message lands exactly once, both ends agree which members
 * carry which QPs (with as many members at both ends, the same ones, so QP i still
 * joins member k to member k), nothing more is posted on a member left out, and a
 * member whose port is back carries QPs again.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "mcp_fake_flight.h"
#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "fabric/fabric_gid.h"
#include "conn/link.h"
#include "conn/oob.h"
#include "xfer/comm.h"

#define N FAKE_FLIGHT_N

static uint64_t now_ns = 1000000000000ull;
static uint64_t test_clock(void) { return now_ns; }

/* The pure placement: which members carry QPs, and QP i's member among them. */
static void test_masks(void)
{
  uint8_t live, rlive;

  mcp_link_masks(2, 2, 3, 3, &live, &rlive); /* all up: all carry */
  CHECK_EQ_INT(live, 3);
  CHECK_EQ_INT(rlive, 3);
  mcp_link_masks(2, 2, 3, 1, &live, &rlive); /* the peer lost member 1: both leave it out */
  CHECK_EQ_INT(live, 1);
  CHECK_EQ_INT(rlive, 1);
  mcp_link_masks(4, 4, 0xd, 0xb, &live, &rlive); /* each lost another: the common ones */
  CHECK_EQ_INT(live, 0x9);
  CHECK_EQ_INT(rlive, 0x9);
  mcp_link_masks(2, 2, 2, 1, &live, &rlive); /* none in common: each its own */
  CHECK_EQ_INT(live, 2);
  CHECK_EQ_INT(rlive, 1);
  mcp_link_masks(3, 2, 5, 3, &live, &rlive); /* other counts: each its own */
  CHECK_EQ_INT(live, 5);
  CHECK_EQ_INT(rlive, 3);
  mcp_link_masks(2, 1, 0, 0, &live, &rlive); /* none up counts as all */
  CHECK_EQ_INT(live, 3);
  CHECK_EQ_INT(rlive, 1);
  CHECK_EQ_INT(mcp_link_member_of(0x7, 3, 4), 1); /* all live: i % ndevs */
  CHECK_EQ_INT(mcp_link_member_of(0x5, 3, 0), 0); /* members 0 and 2 in turn */
  CHECK_EQ_INT(mcp_link_member_of(0x5, 3, 1), 2);
  CHECK_EQ_INT(mcp_link_member_of(0x5, 3, 2), 0);
  CHECK_EQ_INT(mcp_link_member_of(0x0, 2, 1), 1); /* an empty mask is every member */
  CHECK_EQ_INT(mcp_link_member_of(0xf0, 2, 1), 1);
}

struct loss {
  int side, member;
};

static struct mcp_comm *side_comm(struct fake_pair *p, int side)
{
  return side == FAKE_SEND_SIDE ? p->send : p->recv;
}

/* Holds (1), releases (0) or breaks (2) the QPs of a member at both ends: its own, and the
 * peer's QPs joined to them (a link that goes down fails the work of both). */
static void member_qps(struct fake_pair *p, const struct loss *l, int what)
{
  struct mcp_comm *c = side_comm(p, l->side);
  int qp;

  for (qp = 0; qp < fake_comm_nqps(c); qp++) {
    if (fake_comm_qp_member(c, qp) != l->member)
      continue;
    if (what == 2) {
      fake_pair_break(p, l->side, qp, 0);
      fake_pair_break(p, 1 - l->side, qp, 0);
    } else {
      fake_pair_hold(p, l->side, qp, what);
      fake_pair_hold(p, 1 - l->side, qp, what);
    }
  }
}

/* One flight (size0 + i bytes, pattern pat0 + i) driven to its end; the members in
 * losses go down for good in the middle of it, with the writes on their QPs held, so
 * some messages land and some are lost. 0 when every message arrived whole, exactly
 * once, and no comm failed. */
static int flight(struct fake_pair *p, void *smh, void *rmh, const struct loss *losses, int nloss,
                  size_t size0, unsigned pat0)
{
  struct fake_flight f;
  uint32_t first = fake_comm_seq(p->recv);
  int i, turn, failed = 0, again[N], replayed = 0;

  fake_posts_reset(); /* a flight without losses: the checks count all it posted */
  failed += fake_flight_recvs(p, rmh, &f, size0, pat0);
  fake_progress();
  for (i = 0; i < nloss; i++)
    member_qps(p, &losses[i], 1);
  failed += fake_flight_sends(p, smh, &f, size0);
  fake_progress(); /* the other members' writes land and are acknowledged */
  for (i = 0; i < nloss; i++) {
    member_qps(p, &losses[i], 2);
    fake_pair_member_down(p, losses[i].side, losses[i].member, 1);
  }
  for (i = 0; i < nloss; i++)
    member_qps(p, &losses[i], 0);
  if (nloss > 0)
    fake_posts_reset(); /* with losses: what is written again from here */
  for (turn = 0; turn < FAKE_FLIGHT_TURNS && f.left > 0 && failed == 0; turn++) {
    failed += fake_flight_test(p, &f, 0);
    mcp_oob_progress();
    now_ns += 1000000ull; /* 1 ms of the recovery's clock per round of calls */
    if (turn % 4 == 3)
      mcp_test_nap(); /* the QP walks run on their own threads */
  }
  if (failed != 0 || f.left != 0)
    fprintf(stderr, "  flight: %d failed, %d left; send: %s; recv: %s\n", failed, f.left,
            fake_comm_errmsg(p->send), fake_comm_errmsg(p->recv));
  failed += f.left != 0;
  failed += fake_flight_verify(&f, size0, pat0);
  /* Exactly once: what landed before the loss is completed from the receiver's table,
   * only the rest is written again, once. */
  fake_flight_writes(first, again);
  for (i = 0; i < N; i++) {
    failed += again[i] > 1;
    replayed += again[i];
  }
  if (nloss > 0 && replayed == 0) {
    fprintf(stderr, "  flight: nothing was lost with the members (the test did not hold their writes)\n");
    failed++;
  }
  return failed;
}

/* Whether member k of a side's comm carries none of its QPs, nor (with as many members at
 * both ends) is the peer's member any of its QPs lands on. */
static int left_out(struct fake_pair *p, int side, int k)
{
  struct mcp_comm *c = side_comm(p, side), *peer = side_comm(p, 1 - side);
  int qp, out = !(fake_comm_members_live(c) & (1 << k));

  for (qp = 0; qp < fake_comm_nqps(c); qp++) {
    out &= fake_comm_qp_member(c, qp) != k;
    out &= fake_comm_qp_remote_member(peer, qp) == fake_comm_qp_member(c, qp); /* both agree */
    if (p->ndevs[0] == p->ndevs[1])
      out &= fake_comm_qp_member(peer, qp) == fake_comm_qp_member(c, qp); /* member k to member k */
  }
  return out;
}

/* Work posted on member k of a side since the log was reset, every opcode. */
static int posts_on(int side, int k)
{
  return fake_count_posts_on_member(side, k, IBV_WR_RDMA_WRITE) +
    fake_count_posts_on_member(side, k, IBV_WR_RDMA_WRITE_WITH_IMM) +
    fake_count_posts_on_member(side, k, IBV_WR_RDMA_READ);
}

/* Both comms idle, as NCCL's proxy leaves them between steps: its calls find nothing to
 * do, so each comm's liveness check runs every 100 ms (events, the peer's frames) and a
 * round in progress goes on. Until both completed `want` recoveries; 0 then. */
static int idle_until(struct fake_pair *p, int want)
{
  int turn;

  for (turn = 0; turn < FAKE_FLIGHT_TURNS; turn++) {
    if (fake_comm_recoveries(p->send) >= want && fake_comm_recoveries(p->recv) >= want &&
        fake_comm_rec_phase(p->send) == MCP_REC_NONE && fake_comm_rec_phase(p->recv) == MCP_REC_NONE)
      return 0;
    fake_comm_check_due(p->send);
    fake_comm_check_due(p->recv);
    if (mcp_xfer_check_alive(p->send) != 0 || mcp_xfer_check_alive(p->recv) != 0)
      return -1;
    if (mcp_recover_progress(&p->send->link) < 0 || mcp_recover_progress(&p->recv->link) < 0)
      return -1;
    mcp_oob_progress();
    now_ns += 1000000ull;
    if (turn % 4 == 3)
      mcp_test_nap();
  }
  return -1;
}

/* RoCE members (roce_run): each round looks every live member's GID up again by address
 * (fabric's mcp_fabric_gid_refind: netlink and sysfs, which may wait for the kernel). It
 * stands in here and notes the thread and member it ran for: never the test's thread,
 * which is NCCL's proxy thread making every call, and never a member whose port is down. */
static pthread_t proxy_thread;
static const struct mcp_net_dev *refind_member[2][4]; /* compared, never read */
static atomic_int refinds_here, refinds_elsewhere, refinds_of[2][4];

static int refind_counted(const struct mcp_net_dev *d, int index_in_use)
{
  int side, k;

  atomic_fetch_add(pthread_equal(pthread_self(), proxy_thread) ? &refinds_here : &refinds_elsewhere, 1);
  for (side = 0; side < 2; side++)
    for (k = 0; k < 4; k++)
      if (d == refind_member[side][k])
        atomic_fetch_add(&refinds_of[side][k], 1);
  return index_in_use; /* the GIDs came back where they were */
}

static void refinds_on(struct fake_pair *p)
{
  int side, k;

  proxy_thread = pthread_self();
  atomic_store(&refinds_here, 0);
  atomic_store(&refinds_elsewhere, 0);
  for (side = 0; side < 2; side++)
    for (k = 0; k < 4; k++) {
      atomic_store(&refinds_of[side][k], 0);
      refind_member[side][k] = k < p->ndevs[side] ? fake_pair_member_info(p, side, k) : NULL;
      if (refind_member[side][k] != NULL)
        fake_pair_member_info(p, side, k)->link_layer = IBV_LINK_LAYER_ETHERNET;
    }
  mcp_fabric_gid_test_set_refind(refind_counted);
}

enum { LATER_NONE, LATER_SECOND_LOSS, LATER_BACK };

static int roce_run; /* run's pairs have RoCE members (refinds_on) */

/* A pair of ndevs members loses the members in first (all at once); then a flight that
 * must avoid them; then `later`: another member lost (second), or the first ones back
 * (with port recovery on or off). */
static void run(int nsend, int nrecv, const struct loss *first, int nfirst, int later,
                const struct loss *second, int port_recovery)
{
  struct fake_pair_opts o = {.nqps = 1, .ndevs = {nsend, nrecv}};
  struct mcp_config *cfg = mcp_param_process();
  struct mcp_oob_stream *ss = NULL, *rs = NULL;
  struct fake_pair *p;
  void *smh, *rmh;
  char want[128];
  int i, rec;

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg_mh(p, FAKE_SEND_SIDE, fake_flight_sbuf, sizeof(fake_flight_sbuf), NCCL_PTR_HOST);
  rmh = fake_pair_reg_mh(p, FAKE_RECV_SIDE, fake_flight_rbuf, sizeof(fake_flight_rbuf), NCCL_PTR_HOST);
  CHECK_EQ_INT(fake_streams_open(p, &ss, &rs), 0);
  if (rs == NULL)
    goto out;
  if (roce_run)
    refinds_on(p);
  cfg->recovery_timeout_s = 30;
  cfg->ib_port_failover = 1;
  cfg->ib_port_recovery = port_recovery;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  mcp_test_log_clear();

  /* The loss: the flight completes on the other members. */
  CHECK_EQ_INT(flight(p, smh, rmh, first, nfirst, 200, 60), 0);
  for (i = 0; i < nfirst; i++) {
    CHECK(left_out(p, first[i].side, first[i].member));
    snprintf(want, sizeof(want), "without fake%d_m%d port 1 (port down)", first[i].side, first[i].member);
    CHECK(mcp_test_log_has(NCCL_LOG_WARN, want));
  }
  CHECK(mcp_test_log_has(NCCL_LOG_WARN, "send to fake-receiver pid 2 (192.0.2.2:40000): recovered from"));
  CHECK(mcp_test_log_has(NCCL_LOG_WARN, "receive from fake-sender pid 1 (192.0.2.1:40000): recovered from"));
  /* Then nothing goes near them. */
  CHECK_EQ_INT(flight(p, smh, rmh, NULL, 0, 300, 70), 0);
  for (i = 0; i < nfirst; i++) {
    CHECK_EQ_INT(posts_on(first[i].side, first[i].member), 0);
    if (nsend == nrecv)
      CHECK_EQ_INT(posts_on(1 - first[i].side, first[i].member), 0);
  }
  if (roce_run) {
    /* The members that carry the link were looked up, on setup threads; the lost ones
     * were not. */
    CHECK_EQ_INT(atomic_load(&refinds_here), 0);
    CHECK(atomic_load(&refinds_elsewhere) >= 2);
    CHECK(atomic_load(&refinds_of[FAKE_SEND_SIDE][0]) > 0 && atomic_load(&refinds_of[FAKE_RECV_SIDE][0]) > 0);
    for (i = 0; i < nfirst; i++)
      CHECK_EQ_INT(atomic_load(&refinds_of[first[i].side][first[i].member]), 0);
  }
  rec = fake_comm_recoveries(p->send);

  if (later == LATER_SECOND_LOSS) {
    CHECK_EQ_INT(flight(p, smh, rmh, second, 1, 400, 80), 0);
    CHECK(left_out(p, second->side, second->member));
    for (i = 0; i < nfirst; i++)
      CHECK(left_out(p, first[i].side, first[i].member));
    CHECK_EQ_INT(flight(p, smh, rmh, NULL, 0, 500, 90), 0);
    CHECK_EQ_INT(posts_on(second->side, second->member), 0);
  } else if (later == LATER_BACK) {
    /* The ports return (PORT_ACTIVE): with port recovery, a round during the next flight
     * takes the members again, and the flight after it uses them. */
    mcp_test_log_clear();
    for (i = 0; i < nfirst; i++)
      fake_pair_member_down(p, first[i].side, first[i].member, 0);
    if (port_recovery)
      CHECK_EQ_INT(idle_until(p, rec + 1), 0);
    else
      CHECK_EQ_INT(idle_until(p, rec + 1), -1); /* nothing happens: the turns run out */
    CHECK_EQ_INT(flight(p, smh, rmh, NULL, 0, 400, 80), 0);
    for (i = 0; i < nfirst; i++) {
      CHECK_EQ_INT(!!(fake_comm_members_live(side_comm(p, first[i].side)) & (1 << first[i].member)),
                   port_recovery);
      CHECK_EQ_INT(posts_on(first[i].side, first[i].member) > 0, port_recovery);
    }
    CHECK_EQ_INT(fake_comm_recoveries(p->send), rec + port_recovery);
    if (port_recovery) {
      CHECK(mcp_test_log_has(NCCL_LOG_WARN, "is active again (port event); taking the member back"));
      CHECK(mcp_test_log_has(NCCL_LOG_WARN, "every member of both ends carries the connection again"));
    }
    /* Taken back, a member is looked up again: still never on the test's thread. */
    for (i = 0; roce_run && i < nfirst; i++)
      CHECK_EQ_INT(atomic_load(&refinds_of[first[i].side][first[i].member]) > 0, port_recovery);
    if (roce_run)
      CHECK_EQ_INT(atomic_load(&refinds_here), 0);
  }
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
out:
  mcp_fabric_gid_test_set_refind(NULL);
  cfg->recovery_timeout_s = 0;
  cfg->ib_port_failover = cfg->ib_port_recovery = 0;
  fake_streams_close(p, ss, rs);
  fake_pair_dereg_mh(p, FAKE_SEND_SIDE, smh);
  fake_pair_dereg_mh(p, FAKE_RECV_SIDE, rmh);
  fake_pair_free(p);
}

static const struct loss send_m1 = {FAKE_SEND_SIDE, 1};

static void test_lost_2_1(void) { run(2, 1, &send_m1, 1, LATER_NONE, NULL, 1); }

static void test_lost_3_2(void)
{
  static const struct loss l = {FAKE_SEND_SIDE, 2};

  run(3, 2, &l, 1, LATER_NONE, NULL, 1);
}

static void test_lost_4_4_receiver(void)
{
  static const struct loss l = {FAKE_RECV_SIDE, 2};

  run(4, 4, &l, 1, LATER_NONE, NULL, 1);
}

static void test_lost_and_back(void) { run(2, 2, &send_m1, 1, LATER_BACK, NULL, 1); }

/* The same on RoCE members, whose GIDs each round looks up again off the test's thread. */
static void test_lost_and_back_roce(void)
{
  roce_run = 1;
  run(2, 2, &send_m1, 1, LATER_BACK, NULL, 1);
  roce_run = 0;
}

/* NCCL_IB_RESILIENCY_PORT_RECOVERY=0: the member stays out once left out. */
static void test_lost_and_back_no_port_recovery(void) { run(2, 2, &send_m1, 1, LATER_BACK, NULL, 0); }

static void test_both_ends_lose_different_members(void)
{
  static const struct loss l[2] = {{FAKE_SEND_SIDE, 1}, {FAKE_RECV_SIDE, 3}};

  run(4, 4, l, 2, LATER_NONE, NULL, 1);
}

static void test_second_member_lost(void)
{
  static const struct loss l = {FAKE_RECV_SIDE, 2};

  run(3, 3, &send_m1, 1, LATER_SECOND_LOSS, &l, 1);
}

/* A RECOVER naming another member count than the link was set up with is refused with a
 * message: its QPs would land on members this end never heard of. */
static void test_member_count_mismatch(void)
{
  struct fake_pair_opts o = {.nqps = 1, .ndevs = {2, 2}};
  struct mcp_config *cfg = mcp_param_process();
  struct mcp_oob_stream *ss = NULL, *rs = NULL;
  struct fake_pair *p;
  struct mcp_wire_msg m;
  int turn;

  fake_verbs_install();
  p = fake_pair_make(&o);
  CHECK_EQ_INT(fake_streams_open(p, &ss, &rs), 0);
  if (rs == NULL)
    goto out;
  cfg->recovery_timeout_s = 30;
  cfg->ib_port_failover = cfg->ib_port_recovery = 1;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_RECOVER;
  m.u.recover.round = 1;
  m.u.recover.step = MCP_WIRE_RECOVER_QPS;
  fake_comm_endpoint(p->send, &m.u.recover.ep);
  m.u.recover.ep.ndevs = 1; /* a fused peer of 2 now says 1 */
  m.u.recover.up = m.u.recover.live = 1;
  CHECK_EQ_INT(mcp_oob_stream_send(ss, &m), 0);
  for (turn = 0; turn < FAKE_FLIGHT_TURNS && fake_comm_error(p->recv) == 0; turn++) {
    mcp_oob_progress();
    mcp_recover_poll_stream(&p->recv->link); /* what the comm's liveness check reads */
    mcp_test_nap();
  }
  CHECK(fake_comm_error(p->recv) != 0);
  CHECK(strstr(fake_comm_errmsg(p->recv),
               "recovery round 1 refused: member count mismatch (the peer's new QPs are on a device of 1 "
               "member(s); the connection was set up with 2)") != NULL);
out:
  mcp_fabric_gid_test_set_refind(NULL);
  cfg->recovery_timeout_s = 0;
  cfg->ib_port_failover = cfg->ib_port_recovery = 0;
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
  RUN_TEST(test_masks);
  RUN_TEST(test_lost_2_1);
  RUN_TEST(test_lost_3_2);
  RUN_TEST(test_lost_4_4_receiver);
  RUN_TEST(test_lost_and_back);
  RUN_TEST(test_lost_and_back_roce);
  RUN_TEST(test_lost_and_back_no_port_recovery);
  RUN_TEST(test_both_ends_lose_different_members);
  RUN_TEST(test_second_member_lost);
  RUN_TEST(test_member_count_mismatch);
  mcp_oob_release();
  mcp_clock_test_set(NULL);
  return TEST_EXIT();
}
