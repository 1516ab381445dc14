/*
 * test_xfer_link_fusion.c - a link over several physical devices (NIC fusion) on the fake
 * pair: each member of a side is a fake device of its own, with its own protection
 * domain, so a key of the wrong member is refused as an adapter refuses it.
 *
 * Why: a fused link is correct only if every QP writes with our key of the member it is
 * on and the peer's key of the member it lands on, both ends agree on the QP count when
 * they fused different numbers of devices, grouped receives' records land on whichever
 * member their QP reaches, and a flush reads through every member. Each check is on
 * what is observable: bytes in the buffers, sizes, the work posted per member, errors.
 */
#include <errno.h>
#include <stdlib.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "xfer/comm.h"

#define BUFSZ (4 << 20)
#define POLLS 256

static unsigned char *sbuf, *rbuf;
static uint64_t now_ns = 1000000000000ull;
static uint64_t test_clock(void) { return now_ns; }
static void *smh, *rmh;

static struct fake_pair *pair(int qps_per_member, int send_devs, int recv_devs)
{
  struct fake_pair_opts o = {.nqps = qps_per_member, .ndevs = {send_devs, recv_devs}};
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg_mh(p, FAKE_SEND_SIDE, sbuf, BUFSZ, NCCL_PTR_HOST);
  rmh = fake_pair_reg_mh(p, FAKE_RECV_SIDE, rbuf, BUFSZ, NCCL_PTR_HOST);
  CHECK(smh != NULL && rmh != NULL);
  memset(rbuf, 0, BUFSZ);
  fake_warns = 0;
  fake_posts_reset();
  return p;
}

static void pair_free(struct fake_pair *p)
{
  fake_pair_dereg_mh(p, FAKE_SEND_SIDE, smh);
  fake_pair_dereg_mh(p, FAKE_RECV_SIDE, rmh);
  fake_pair_free(p);
}

/* One message of size bytes at offset off; 1 when it arrived whole with its size. */
static int one_message(struct fake_pair *p, size_t off, size_t size, unsigned seed)
{
  void *data = rbuf + off, *mh = rmh, *r = (void *)0xbad, *s = NULL;
  size_t rsize = size;
  int tag = 5, rs[1] = {-1}, ok;

  fake_pattern(sbuf + off, size, seed);
  memset(rbuf + off, 0, size);
  if (mcp_net_irecv(p->recv, 1, &data, &rsize, &tag, &mh, &r) != ncclSuccess || r == NULL)
    return 0;
  fake_progress();
  if (mcp_net_isend(p->send, sbuf + off, size, tag, smh, &s) != ncclSuccess || s == NULL)
    return 0;
  ok = fake_wait_done(r, rs, POLLS) == 1 && fake_wait_done(s, NULL, POLLS) == 1;
  return ok && rs[0] == (int)size && fake_same(rbuf + off, size, seed);
}

/* Two members on each end, two QPs per member: a large message is striped over all four
 * QPs, i.e. over both members of both ends, and lands whole. */
static void test_striped_over_two_members(void)
{
  struct fake_pair *p = pair(2, 2, 2);
  int q;

  CHECK_EQ_INT(fake_comm_nqps(p->send), 4);
  CHECK_EQ_INT(fake_comm_nqps(p->recv), 4);
  for (q = 0; q < 4; q++) {
    CHECK_EQ_INT(fake_comm_qp_member(p->send, q), q % 2);
    CHECK_EQ_INT(fake_comm_qp_remote_member(p->send, q), q % 2);
  }
  CHECK(one_message(p, 0, 1 << 20, 3));
  CHECK(fake_count_posts_on_member(FAKE_SEND_SIDE, 0, IBV_WR_RDMA_WRITE_WITH_IMM) >= 2);
  CHECK(fake_count_posts_on_member(FAKE_SEND_SIDE, 1, IBV_WR_RDMA_WRITE_WITH_IMM) >= 2);
  /* Every size from one byte to several stripes, and many trips around the ring. */
  for (int i = 0; i < 3 * MCP_SLOTS; i++) {
    size_t size = 1 + (size_t)i * 40009 % (3 << 20);
    if (!one_message(p, (size_t)(i % 3) * 4096, size, (unsigned)i)) {
      fprintf(stderr, "message %d of %zu bytes did not arrive whole\n", i, size);
      CHECK(0);
      break;
    }
  }
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  CHECK_EQ_INT(fake_warns, 0);
  pair_free(p);
}

/* The receiver's member-k rkey is what reaches member k: when the table the fused
 * receiver wrote says member 0's key for every member (a sender that used one rkey for
 * all would do the same), the writes that land on member 1 are refused and the comm
 * fails; nothing lands there with a foreign key. */
static void test_member_rkeys_are_needed(void)
{
  struct fake_pair *p = pair(1, 2, 2);
  void *data = rbuf, *mh = rmh, *r = (void *)0xbad, *s = NULL;
  size_t rsize = 1 << 20;
  int tag = 5, done = 0, i;

  fake_pattern(sbuf, rsize, 9);
  CHECK_EQ_INT(mcp_net_irecv(p->recv, 1, &data, &rsize, &tag, &mh, &r), ncclSuccess);
  fake_progress(); /* the CTS entry and its rkey table are in the sender's ring */
  fake_pair_smash_member_rkeys(p);
  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, rsize, tag, smh, &s), ncclSuccess);
  CHECK(s != NULL);
  for (i = 0; i < POLLS && fake_comm_error(p->send) == 0; i++) {
    mcp_net_test(s, &done, NULL);
    now_ns += 10 * MCP_NS_PER_MS; /* a refused write waits up to 200 ms for the peer's verdict */
  }
  CHECK_EQ_INT(done, 0);
  CHECK(fake_comm_error(p->send) != 0);
  CHECK(strstr(fake_comm_errmsg(p->send), "remote access error") != NULL);
  pair_free(p);
}

/* The two ends fused different numbers of devices: both have NCCL_IB_QPS_PER_CONNECTION
 * x the larger count of QPs, each QP pairs with the peer's member QP % its count, and
 * data of every size arrives. */
static void test_different_member_counts(void)
{
  static const int shapes[][3] = {{2, 2, 1}, {1, 1, 3}, {1, 3, 2}, {2, 4, 1},
                                  {1, 8, 3}, {1, 3, 8}, {2, 8, 8}};

  for (unsigned t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
    int qpc = shapes[t][0], sd = shapes[t][1], rd = shapes[t][2], max = sd > rd ? sd : rd, q;
    struct fake_pair *p = pair(qpc, sd, rd);

    CHECK_EQ_INT(fake_comm_nqps(p->send), qpc * max);
    CHECK_EQ_INT(fake_comm_nqps(p->recv), qpc * max);
    for (q = 0; q < qpc * max; q++) {
      CHECK_EQ_INT(fake_comm_qp_member(p->send, q), q % sd);
      CHECK_EQ_INT(fake_comm_qp_remote_member(p->send, q), q % rd);
      CHECK_EQ_INT(fake_comm_qp_member(p->recv, q), q % rd);
      CHECK_EQ_INT(fake_comm_qp_remote_member(p->recv, q), q % sd);
    }
    for (int i = 0; i < MCP_SLOTS + 7; i++)
      if (!one_message(p, 0, 1 + (size_t)i * 77777 % (2 << 20), (unsigned)(t * 100 + (unsigned)i))) {
        fprintf(stderr, "shape %d/%d/%d: message %d did not arrive\n", qpc, sd, rd, i);
        CHECK(0);
        break;
      }
    for (int k = 0; k < sd; k++)
      CHECK(fake_count_posts_on_member(FAKE_SEND_SIDE, k, IBV_WR_RDMA_WRITE_WITH_IMM) > 0);
    CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
    pair_free(p);
  }
}

/* Grouped receives ride QP seq % nqps, so on a fused link their parts and sizes record
 * land on every member in turn: each with that member's keys. */
static void test_grouped_on_every_member(void)
{
  struct fake_pair *p = pair(1, 2, 2);
  int seq;

  for (seq = 0; seq < 8; seq++) {
    void *data[3], *mh[3], *r = (void *)0xbad, *s[3];
    size_t sz[3];
    int tags[3] = {1, 2, 3}, sizes[3] = {-1, -1, -1}, i;

    for (i = 0; i < 3; i++) {
      data[i] = rbuf + (size_t)i * 65536;
      mh[i] = rmh;
      sz[i] = 65536;
      memset(data[i], 0, 65536);
      fake_pattern(sbuf + (size_t)i * 65536, 1000 + (size_t)i, (unsigned)(seq * 3 + i));
    }
    CHECK_EQ_INT(mcp_net_irecv(p->recv, 3, data, sz, tags, mh, &r), ncclSuccess);
    fake_progress();
    for (i = 2; i >= 0; i--) {
      s[i] = NULL;
      CHECK_EQ_INT(mcp_net_isend(p->send, sbuf + (size_t)i * 65536, 1000 + (size_t)i, tags[i], smh, &s[i]),
                   ncclSuccess);
      CHECK(s[i] != NULL);
    }
    CHECK_EQ_INT(fake_wait_done(r, sizes, POLLS), 1);
    for (i = 0; i < 3; i++) {
      CHECK_EQ_INT(sizes[i], 1000 + i);
      CHECK(fake_same(rbuf + (size_t)i * 65536, 1000 + (size_t)i, (unsigned)(seq * 3 + i)));
      CHECK_EQ_INT(fake_wait_done(s[i], NULL, POLLS), 1);
    }
  }
  CHECK(fake_count_records() == 8);
  CHECK(fake_count_posts_on_member(FAKE_SEND_SIDE, 0, IBV_WR_RDMA_WRITE_WITH_IMM) == 4);
  CHECK(fake_count_posts_on_member(FAKE_SEND_SIDE, 1, IBV_WR_RDMA_WRITE_WITH_IMM) == 4);
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  pair_free(p);
}

/* Eight members, NCCL 2.30's most, on a receiver whose sender has three (and the other
 * way round): the sender's ring holds the receiver's rkey tables laid out for its member
 * count, grouped receives of MCP_MAX_RECVS buffers land on every member of the receiver
 * with that member's key for each buffer, and large messages stripe over all QPs. */
static void test_eight_members(void)
{
  static const int shapes[][2] = {{3, 8}, {8, 3}};

  for (unsigned t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
    int sd = shapes[t][0], rd = shapes[t][1], seq, k;
    struct fake_pair *p = pair(1, sd, rd);

    CHECK_EQ_INT(p->send->cts_rkeys_n, rd);
    CHECK_EQ_INT(p->recv->cts_rkeys_n, rd);
    CHECK_EQ_INT(p->send->ring_bytes, MCP_CTS_RKEYS_OFFSET + MCP_SLOTS * MCP_MAX_RECVS * rd * 4);
    CHECK_EQ_INT(fake_comm_nqps(p->send), 8);
    for (seq = 0; seq < 16; seq++) { /* QP seq % 8: every member of both ends, twice */
      void *data[MCP_MAX_RECVS], *mh[MCP_MAX_RECVS], *r = (void *)0xbad, *s[MCP_MAX_RECVS];
      size_t sz[MCP_MAX_RECVS];
      int tags[MCP_MAX_RECVS], sizes[MCP_MAX_RECVS], i;

      for (i = 0; i < MCP_MAX_RECVS; i++) {
        data[i] = rbuf + (size_t)i * 65536;
        mh[i] = rmh;
        sz[i] = 65536;
        tags[i] = 10 + i;
        sizes[i] = -1;
        memset(data[i], 0, 65536);
        fake_pattern(sbuf + (size_t)i * 65536, 500 + (size_t)i * 3, (unsigned)(seq * 16 + i));
      }
      CHECK_EQ_INT(mcp_net_irecv(p->recv, MCP_MAX_RECVS, data, sz, tags, mh, &r), ncclSuccess);
      fake_progress();
      for (i = MCP_MAX_RECVS - 1; i >= 0; i--) {
        s[i] = NULL;
        CHECK_EQ_INT(
          mcp_net_isend(p->send, sbuf + (size_t)i * 65536, 500 + (size_t)i * 3, tags[i], smh, &s[i]),
          ncclSuccess);
        CHECK(s[i] != NULL);
      }
      CHECK_EQ_INT(fake_wait_done(r, sizes, POLLS), 1);
      for (i = 0; i < MCP_MAX_RECVS; i++) {
        CHECK_EQ_INT(sizes[i], 500 + i * 3);
        CHECK(fake_same(rbuf + (size_t)i * 65536, 500 + (size_t)i * 3, (unsigned)(seq * 16 + i)));
        CHECK_EQ_INT(fake_wait_done(s[i], NULL, POLLS), 1);
      }
    }
    for (k = 0; k < sd; k++)
      CHECK(fake_count_posts_on_member(FAKE_SEND_SIDE, k, IBV_WR_RDMA_WRITE_WITH_IMM) > 0);
    for (int i = 0; i < 24; i++)
      CHECK(one_message(p, 0, (size_t)(1 << 20) + (size_t)i * 4099, (unsigned)(900 + i)));
    CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
    pair_free(p);
  }
}

/* iflush reads through every member of the receiver: one read on each member's loopback
 * QP, with that member's key, and the flush is done only when all have returned. */
static void test_flush_every_member(void)
{
  struct mcp_config *cfg = mcp_param_process();
  struct fake_pair *p = pair(1, 1, 3);
  void *data = rbuf, *mh = rmh, *f = NULL;
  int size = 4096, done = 0, k;

  cfg->force_flush = 1;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  CHECK(one_message(p, 0, 4096, 1));
  /* The first flush sets up every member's loopback QP. */
  CHECK_EQ_INT(mcp_net_iflush(p->recv, 1, &data, &size, &mh, &f), ncclSuccess);
  CHECK(f != NULL);
  CHECK_EQ_INT(fake_wait_done(f, NULL, POLLS), 1);
  fake_posts_reset();
  fake_pair_hold_flush(p, 1); /* member 0's read waits */
  CHECK_EQ_INT(mcp_net_iflush(p->recv, 1, &data, &size, &mh, &f), ncclSuccess);
  CHECK(f != NULL);
  for (k = 0; k < 3; k++)
    CHECK_EQ_INT(fake_count_posts_on_member(FAKE_RECV_SIDE, k, IBV_WR_RDMA_READ), 1);
  CHECK_EQ_INT(mcp_net_test(f, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0); /* members 1 and 2 answered, member 0 not yet */
  fake_pair_hold_flush(p, 0);
  CHECK_EQ_INT(fake_wait_done(f, NULL, POLLS), 1);
  CHECK_EQ_INT(fake_comm_error(p->recv), 0);
  cfg->force_flush = 0;
  pair_free(p);
}

/* The kind of an mhandle and its keys are read from the handle alone (deregMr has no
 * comm): a set answers with its members' keys, a one-device registration with its MR's,
 * and a set of one member (what a fused device of one would hand out) is still a set. */
static void test_mhandle_kind_from_handle(void)
{
  struct fake_pair *p = pair(1, 2, 2);
  const struct mcp_mr_set *set = smh;
  struct mcp_mr_set one;
  struct mcp_mr *m;

  CHECK(mcp_mh_is_set(smh) && mcp_mh_is_set(rmh));
  for (int k = 0; k < 2; k++) {
    CHECK_EQ_INT(mcp_mh_lkey(smh, k), set->mr[k]->mr->lkey);
    CHECK_EQ_INT(mcp_mh_rkey(smh, k), set->mr[k]->mr->rkey);
  }
  CHECK(set->mr[0]->mr->lkey != set->mr[1]->mr->lkey); /* else the check above could not fail */
  CHECK_EQ_INT(mcp_mh_type(smh), NCCL_PTR_HOST);
  CHECK(mcp_mh_cpu_readable(smh));
  one = *set;
  one.n = 1;
  one.head.lkey = 0x1234;
  one.lkey[1] = 0x5678;
  CHECK(mcp_mh_is_set(&one));
  CHECK_EQ_INT(mcp_mh_lkey(&one, 0), 0x1234);
  CHECK_EQ_INT(mcp_mh_lkey(&one, 1), 0x5678);
  m = set->mr[1]; /* a cache entry itself: a one-device handle */
  CHECK(!mcp_mh_is_set(m));
  CHECK_EQ_INT(mcp_mh_lkey(m, 0), m->mr->lkey);
  CHECK_EQ_INT(mcp_mh_rkey(m, 0), m->mr->rkey);
  CHECK_EQ_INT(mcp_mh_lkey(m, 1), m->mr->lkey); /* no member 1: its own keys, never past its end */
  CHECK_EQ_INT(mcp_mh_rkey(m, 1), m->mr->rkey);
  pair_free(p);
}

/* A one-member link keeps what it had before fusion: the cache's registration is the
 * mhandle, and no rkey table is ever written (the clear-to-send bytes are unchanged); nor
 * does its sender's ring keep room for one (issue 37: 8 KiB of every send comm before). */
static void test_one_member_unchanged(void)
{
  struct fake_pair *p = pair(2, 1, 1);
  const struct fake_post *log;
  int n, i;

  CHECK_EQ_INT(p->send->ring_bytes, MCP_CTS_RKEYS_OFFSET);
  CHECK_EQ_INT(p->send->ring_bytes, 16384);
  CHECK(!mcp_mh_is_set(smh) && !mcp_mh_is_set(rmh));
  CHECK(one_message(p, 0, 100, 1));
  n = fake_posts(&log);
  for (i = 0; i < n; i++)
    if (log[i].side == FAKE_RECV_SIDE && log[i].opcode == IBV_WR_RDMA_WRITE)
      CHECK(log[i].len == sizeof(struct mcp_cts_elem)); /* one element, no table */
  pair_free(p);
}

/* A stall on a fused comm is reported with every physical member and each member's
 * port counters, not member 0's alone. */
static void test_watchdog_names_members(void)
{
  struct fake_pair *p = pair(1, 2, 2);
  void *data = rbuf, *mh = rmh, *r = (void *)0xbad, *s = NULL;
  size_t rsize = 1 << 20;
  int tag = 5;
  uint64_t t = 5000000000000ull;

  CHECK_EQ_INT(mcp_net_irecv(p->recv, 1, &data, &rsize, &tag, &mh, &r), ncclSuccess);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  fake_pair_hold(p, FAKE_SEND_SIDE, 1, 1);
  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, rsize, tag, smh, &s), ncclSuccess);
  CHECK(s != NULL);
  CHECK_EQ_INT(mcp_xfer_watchdog(p->send, t, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(p->send, t + MCP_NS_PER_S / 2, 1), 0);
  CHECK_EQ_INT(mcp_xfer_watchdog(p->send, t + MCP_NS_PER_S, 1), 1);
  CHECK(strstr(fake_lastwarn, "on fake0 port 1 (fused with fake0_m1 port 1): no progress") != NULL);
  CHECK(strstr(fake_lastwarn, "counters since the comm connected: fake0 port 1: ") != NULL);
  CHECK(strstr(fake_lastwarn, "; fake0_m1 port 1: ") != NULL);
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 0);
  fake_pair_hold(p, FAKE_SEND_SIDE, 1, 0);
  CHECK_EQ_INT(fake_wait_done(s, NULL, POLLS), 1);
  CHECK_EQ_INT(fake_wait_done(r, NULL, POLLS), 1);
  pair_free(p);
}

/* What the handshake carries for a fused end: the endpoint names every member (name,
 * port, LID) with the ring's rkey on that member, travels as a frame of this version
 * (members exist from version 3 on, authentication from 4), and the peer's link_up takes
 * one ring rkey per member from it. A one-member end's endpoint fits version 2 when
 * asked for; a fused one does not. */
static void test_endpoint_members(void)
{
  struct fake_pair *p = pair(1, 1, 3);
  struct mcp_wire_msg m, out;
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len;
  int k;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_ACK;
  fake_comm_endpoint(p->recv, &m.u.conn_ack);
  CHECK_EQ_INT(m.u.conn_ack.ndevs, 3);
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), 0);
  CHECK_EQ_INT(buf[4], MCP_WIRE_VERSION);
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), 0);
  CHECK_EQ_INT(out.u.conn_ack.ndevs, 3);
  m.version = 2;
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  CHECK(strcmp(out.u.conn_ack.dev_name, "fake1") == 0);
  CHECK(strcmp(out.u.conn_ack.more[0].dev_name, "fake1_m1") == 0);
  CHECK(strcmp(out.u.conn_ack.more[1].dev_name, "fake1_m2") == 0);
  CHECK_EQ_INT(out.u.conn_ack.more[1].lid, 16 * 2 + 2);
  CHECK(out.u.conn_ack.ring_rkey == p->recv->ring_mrs[0]->rkey);
  for (k = 1; k < 3; k++) {
    CHECK(out.u.conn_ack.more[k - 1].ring_rkey == p->recv->ring_mrs[k]->rkey);
    CHECK(p->recv->ring_mrs[k]->rkey != p->recv->ring_mrs[0]->rkey);
  }
  memset(p->send->remote_rkeys, 0, sizeof(p->send->remote_rkeys));
  p->send->link.remote = out.u.conn_ack;
  p->send->link.remote_ndevs = out.u.conn_ack.ndevs;
  mcp_xfer_link_ops.link_up(&p->send->link);
  for (k = 0; k < 3; k++)
    CHECK(p->send->remote_rkeys[k] == p->recv->ring_mrs[k]->rkey);
  /* The one-member end (the sender here) fits version 2. */
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REQ;
  m.version = 2;
  fake_comm_endpoint(p->send, &m.u.conn_req.ep);
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), 0);
  CHECK_EQ_INT(buf[4], 2);
  pair_free(p);
}

/* GPU memory on a fused comm is registered on every member, and refused, naming the
 * member, when one of them cannot reach GPU memory; nothing stays registered then. */
static void test_gpu_registration_every_member(void)
{
  struct fake_pair *p = pair(1, 1, 2);
  int live = fake_mrs_live();
  void *g;

  fake_pair_member_info(p, FAKE_RECV_SIDE, 0)->ptr_support = NCCL_PTR_HOST | NCCL_PTR_CUDA;
  fake_pair_member_info(p, FAKE_RECV_SIDE, 1)->ptr_support = NCCL_PTR_HOST;
  fake_warns = 0;
  CHECK(fake_pair_reg_mh(p, FAKE_RECV_SIDE, rbuf, 4096, NCCL_PTR_CUDA) == NULL);
  CHECK_EQ_INT(fake_warns, 1);
  CHECK(strstr(fake_lastwarn, "member 1 (fake1_m1) has no GPU peer-memory module") != NULL);
  CHECK_EQ_INT(fake_mrs_live(), live);
  fake_pair_member_info(p, FAKE_RECV_SIDE, 1)->ptr_support = NCCL_PTR_HOST | NCCL_PTR_CUDA;
  g = fake_pair_reg_mh(p, FAKE_RECV_SIDE, rbuf, 4096, NCCL_PTR_CUDA);
  CHECK(g != NULL);
  CHECK_EQ_INT(fake_mrs_live(), live + 2);
  fake_pair_dereg_mh(p, FAKE_RECV_SIDE, g);
  CHECK_EQ_INT(fake_mrs_live(), live);
  pair_free(p);
}

/* regMr's result on a fused comm is the one-device path's for the same failure: GPU
 * memory a member cannot reach is a usage error either way, and a refusal by the
 * adapter (whatever its errno, even one that looks like a kind of the library's own) is
 * a system error, as NCCL's own transport reports it. Both paths end in
 * mcp_net_result. */
static ncclResult_t reg_result(int devs, int gpu_on_last, int fail_errno, int dmabuf)
{
  static unsigned char other[4 * 4096] __attribute__((aligned(4096)));
  struct fake_pair *p = pair(1, devs, devs);
  void *mh = (void *)0x1;
  ncclResult_t rc;

  for (int k = 0; k < devs; k++)
    fake_pair_member_info(p, FAKE_SEND_SIDE, k)->ptr_support =
      NCCL_PTR_HOST | (k < devs - 1 || gpu_on_last ? NCCL_PTR_CUDA : 0);
  if (fail_errno != 0)
    fake_fail_next_reg(fail_errno);
  rc = dmabuf
    ? mcp_net_reg_mr_dmabuf(p->send, other, sizeof(other), NCCL_PTR_CUDA, 0, 3, &mh)
    : mcp_net_reg_mr(p->send, other, sizeof(other), fail_errno ? NCCL_PTR_HOST : NCCL_PTR_CUDA, &mh);
  CHECK(rc == ncclSuccess ? mh != NULL : mh == NULL);
  if (mh != NULL && mh != (void *)0x1)
    mcp_net_dereg_mr(p->send, mh);
  fake_fail_next_reg(0);
  pair_free(p);
  return rc;
}

static void test_registration_results_match(void)
{
  static const int errs[] = {ENOMEM, EFAULT, ECONNRESET, EOVERFLOW};

  /* GPU memory where the (last) member has no peer-memory module. */
  CHECK_EQ_INT(reg_result(1, 0, 0, 0), ncclInvalidUsage);
  CHECK_EQ_INT(reg_result(2, 0, 0, 0), ncclInvalidUsage);
  CHECK_EQ_INT(reg_result(2, 1, 0, 0), ncclSuccess);
  /* The adapter refuses the registration (host memory; DMA-BUF). */
  for (unsigned i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
    for (int dmabuf = 0; dmabuf <= 1; dmabuf++) {
      ncclResult_t one = reg_result(1, 1, errs[i], dmabuf), fused = reg_result(2, 1, errs[i], dmabuf);

      if (one != ncclSystemError || fused != one)
        fprintf(stderr, "errno %d%s: one device %d, fused %d\n", errs[i], dmabuf ? " (DMA-BUF)" : "", one,
                fused);
      CHECK_EQ_INT(one, ncclSystemError);
      CHECK_EQ_INT(fused, one);
    }
  }
}

int main(void)
{
  setvbuf(stdout, NULL, _IONBF, 0);
  sbuf = aligned_alloc(4096, BUFSZ);
  rbuf = aligned_alloc(4096, BUFSZ);
  mcp_log_set_logger(fake_warn_capture);
  mcp_clock_test_set(test_clock);
  RUN_TEST(test_striped_over_two_members);
  RUN_TEST(test_member_rkeys_are_needed);
  RUN_TEST(test_different_member_counts);
  RUN_TEST(test_grouped_on_every_member);
  RUN_TEST(test_eight_members);
  RUN_TEST(test_flush_every_member);
  RUN_TEST(test_one_member_unchanged);
  RUN_TEST(test_mhandle_kind_from_handle);
  RUN_TEST(test_watchdog_names_members);
  RUN_TEST(test_endpoint_members);
  RUN_TEST(test_gpu_registration_every_member);
  RUN_TEST(test_registration_results_match);
  free(sbuf);
  free(rbuf);
  return TEST_EXIT();
}
