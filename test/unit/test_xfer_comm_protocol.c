/*
 * test_xfer_comm_protocol.c - the slot protocol end to end on a fake connected pair
 * (mcp_fake_verbs.c): irecv writes clear-to-send entries into the sender's ring, isend
 * writes the data into the receiver's registered buffers, test reports what landed.
 *
 * Why: these are the rules a real job depends on and that used to be checked only on
 * soft-RoCE in the lab: the sequence numbers (and their wrap, in the ring of MCP_SLOTS
 * and in the 16-bit immediate), a stale entry never taken for a current one, slots
 * completing out of order, grouped receives matched by tag, CTS batching, sizes
 * records (inline or from registered memory), the optional-completion hint, and the
 * replay after a QP loss delivering each message exactly once. Every check is on what
 * is observable: bytes in buffers, sizes reported, requests done or NULL, the work
 * requests posted, errors. Nothing here reads a clock.
 */
#include <stdarg.h>
#include <stdlib.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/log.h"
#include "core/verbs.h"
#include "xfer/comm.h"

#define BUFSZ (1 << 20)
#define POLLS 64 /* test calls before a request counts as stuck: a count, not a time */

static unsigned char *sbuf, *rbuf;
static struct mcp_mr *smh, *rmh;

static struct fake_pair *pair(int nqps, int max_inline)
{
  struct fake_pair_opts o = {.nqps = nqps, .max_inline = max_inline};
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg(p, FAKE_SEND_SIDE, sbuf, BUFSZ, NCCL_PTR_HOST);
  rmh = fake_pair_reg(p, FAKE_RECV_SIDE, rbuf, BUFSZ, NCCL_PTR_HOST);
  memset(rbuf, 0, BUFSZ);
  fake_warns = 0;
  return p;
}

static void *irecv1(struct fake_pair *p, size_t off, size_t size, int tag, int hint)
{
  void *data = rbuf + off, *mh = rmh, *req = hint ? (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION : (void *)0xbad;

  CHECK_EQ_INT(mcp_net_irecv(p->recv, 1, &data, &size, &tag, &mh, &req), ncclSuccess);
  return req;
}

static void *irecvn(struct fake_pair *p, int n, const size_t *offs, const size_t *sizes, const int *tags)
{
  void *data[MCP_MAX_RECVS], *mh[MCP_MAX_RECVS], *req = (void *)0xbad;
  size_t sz[MCP_MAX_RECVS];
  int t[MCP_MAX_RECVS], i;

  for (i = 0; i < n; i++) {
    data[i] = rbuf + offs[i];
    mh[i] = rmh;
    sz[i] = sizes[i];
    t[i] = tags[i];
  }
  CHECK_EQ_INT(mcp_net_irecv(p->recv, n, data, sz, t, mh, &req), ncclSuccess);
  return req;
}

/* isend from sbuf+off; the sender's ring is filled by the fake when any CQ is polled,
 * so it first lets the receiver's CTS writes execute. */
static void *isend(struct fake_pair *p, size_t off, size_t size, int tag, ncclResult_t *rc)
{
  void *req = (void *)0xdead;

  fake_progress();
  *rc = mcp_net_isend(p->send, sbuf + off, size, tag, smh, &req);
  return req;
}

/* One message of size bytes through a receive of rsize bytes; returns the size reported. */
static int one_message(struct fake_pair *p, size_t size, size_t rsize, unsigned seed)
{
  ncclResult_t rc;
  int sizes[1] = {-1}, ss[1] = {-1};
  void *r, *s;

  fake_pattern(sbuf, size, seed);
  memset(rbuf, 0, rsize);
  r = irecv1(p, 0, rsize, 7, 0);
  s = isend(p, 0, size, 7, &rc);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK(s != NULL && r != NULL);
  if (s == NULL || r == NULL)
    return -2;
  CHECK_EQ_INT(fake_wait_done(r, sizes, POLLS), 1);
  CHECK_EQ_INT(fake_wait_done(s, ss, POLLS), 1);
  CHECK_EQ_INT(ss[0], size);
  CHECK(fake_same(rbuf, size, seed));
  return sizes[0];
}

/* Three trips around the ring of MCP_SLOTS; sizes are the bytes sent, not the buffer's. */
static void test_ring_wrap_sizes(void)
{
  struct fake_pair *p = pair(1, 0);
  int i;

  for (i = 0; i < 3 * MCP_SLOTS + 5; i++) {
    size_t size = (size_t)(i * 37) % 4000;
    CHECK_EQ_INT(one_message(p, size, 4096, (unsigned)i), size);
  }
  CHECK_EQ_INT(fake_comm_seq(p->send), 3 * MCP_SLOTS + 6);
  CHECK_EQ_INT(fake_comm_inflight(p->recv), 0);
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  CHECK_EQ_INT(fake_rnr_count(), 0);
  CHECK_EQ_INT(fake_warns, 0);
  fake_pair_free(p);
}

/* NCCL's pace: receives posted 8 ahead of the sends, 300 messages, around the ring's
 * end several times (the fake refuses a write past the sender's ring); each receive's
 * clear-to-send is its own write, posted by its irecv. */
static void test_pipelined_ring_wrap(void)
{
  struct fake_pair *p = pair(1, 0);
  void *r[8] = {NULL}, *s[8] = {NULL};
  int posted = 0, sent = 0, got = 0, turn, sizes[1];
  ncclResult_t rc;

  fake_posts_reset();

  for (turn = 0; turn < 10000 && got < 300; turn++) {
    int k;
    while (posted < 300 && posted - got < 8) {
      k = posted % 8;
      r[k] = irecv1(p, (size_t)k * 4096, 4096, 5, 0);
      posted++;
      CHECK_EQ_INT(fake_count_cts_writes(), posted);
    }
    if (sent < posted) {
      k = sent % 8;
      fake_pattern(sbuf + (size_t)k * 4096, 64 + (size_t)sent % 500, (unsigned)sent);
      s[k] = isend(p, (size_t)k * 4096, 64 + (size_t)sent % 500, 5, &rc);
      CHECK_EQ_INT(rc, ncclSuccess);
      if (s[k] != NULL)
        sent++;
    }
    k = got % 8;
    if (got < sent && fake_wait_done(r[k], sizes, POLLS) == 1) {
      CHECK_EQ_INT(sizes[0], 64 + got % 500);
      CHECK(fake_same(rbuf + (size_t)k * 4096, 64 + (size_t)got % 500, (unsigned)got));
      CHECK_EQ_INT(fake_wait_done(s[k], NULL, POLLS), 1);
      got++;
    }
    if (fake_comm_error(p->send) || fake_comm_error(p->recv))
      break;
  }
  CHECK_EQ_INT(got, 300);
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  CHECK_EQ_INT(fake_count_cts_writes(), 300);
  fake_pair_free(p);
}

/* The immediate carries 16 bits of seq; the seq itself is 32 bits: both wrap. */
static void test_seq_wraps(void)
{
  static const uint32_t starts[2] = {0x10000u - 40, 0xffffffffu - 40};
  int k, i;

  for (k = 0; k < 2; k++) {
    struct fake_pair *p = pair(1, 0);
    fake_pair_set_seq(p, starts[k]);
    for (i = 0; i < 100; i++)
      CHECK_EQ_INT(one_message(p, 100 + (size_t)i, 4096, (unsigned)i), 100 + i);
    CHECK_EQ_INT(fake_comm_seq(p->recv), starts[k] + 100);
    CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
    CHECK_EQ_INT(fake_warns, 0);
    fake_pair_free(p);
  }
}

/* After a full ring, the sender's slot for seq 65 still holds seq 1's entry: the send of
 * seq 65 must wait for its own entry, not write into seq 1's buffer. */
static void test_stale_cts_not_consumed(void)
{
  struct fake_pair *p = pair(1, 0);
  ncclResult_t rc;
  int i, writes, sizes[1];
  void *r, *s;

  for (i = 0; i < MCP_SLOTS; i++)
    one_message(p, 8, 4096, (unsigned)i);
  writes = fake_count_data_writes();
  for (i = 0; i < 3; i++) {
    CHECK(isend(p, 0, 8, 7, &rc) == NULL);
    CHECK_EQ_INT(rc, ncclSuccess);
  }
  CHECK_EQ_INT(fake_count_data_writes(), writes);
  CHECK_EQ_INT(fake_comm_seq(p->send), MCP_SLOTS + 1);
  /* Its receive comes: now it goes, to the new buffer. */
  fake_pattern(sbuf, 8, 99);
  r = irecv1(p, 8192, 4096, 7, 0);
  s = isend(p, 0, 8, 7, &rc);
  CHECK(s != NULL);
  CHECK_EQ_INT(fake_wait_done(r, sizes, POLLS), 1);
  CHECK(fake_same(rbuf + 8192, 8, 99));
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  fake_pair_free(p);
}

/* A grouped entry whose last element has not arrived yet (its CTS write is still in
 * flight, 2 of 3 elements landed): no send takes any of its elements until it is whole. */
static void test_partial_group_entry_waits(void)
{
  static const size_t offs[3] = {0, 4096, 8192}, sizes[3] = {4096, 4096, 4096};
  static const int tags[3] = {1, 2, 3};
  struct fake_pair *p = pair(1, 0);
  ncclResult_t rc;
  int writes, got[3] = {-1, -1, -1};
  void *r, *s = (void *)0xdead;

  fake_pair_hold(p, FAKE_RECV_SIDE, 0, 1);
  r = irecvn(p, 3, offs, sizes, tags);
  fake_pair_release_bytes(p, FAKE_RECV_SIDE, 0, 2 * sizeof(struct mcp_cts_elem));
  writes = fake_count_data_writes();
  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, 8, 1, smh, &s), ncclSuccess);
  CHECK(s == NULL);
  CHECK_EQ_INT(fake_count_data_writes(), writes);
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  fake_pair_hold(p, FAKE_RECV_SIDE, 0, 0);
  CHECK(isend(p, 0, 8, 1, &rc) != NULL);
  CHECK(isend(p, 0, 9, 2, &rc) != NULL);
  CHECK(isend(p, 0, 10, 3, &rc) != NULL);
  CHECK_EQ_INT(fake_wait_done(r, got, POLLS), 1);
  CHECK_EQ_INT(got[0], 8);
  CHECK_EQ_INT(got[1], 9);
  CHECK_EQ_INT(got[2], 10);
  fake_pair_free(p);
}

/* Two QPs: seq 1 rides QP 1, seq 2 QP 0. QP 1 is slow: seq 2 completes first. */
static void test_out_of_order_slots(void)
{
  struct fake_pair *p = pair(2, 0);
  ncclResult_t rc;
  int sizes[1] = {-1}, done = 0;
  void *r1, *r2, *s1, *s2;

  fake_pattern(sbuf, 300, 1);
  fake_pattern(sbuf + 4096, 200, 2);
  r1 = irecv1(p, 0, 4096, 1, 0);
  r2 = irecv1(p, 4096, 4096, 1, 0);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 1, 1);
  s1 = isend(p, 0, 300, 1, &rc);
  s2 = isend(p, 4096, 200, 1, &rc);
  CHECK(s1 != NULL && s2 != NULL);
  CHECK_EQ_INT(fake_wait_done(r2, sizes, POLLS), 1);
  CHECK_EQ_INT(sizes[0], 200);
  CHECK(fake_same(rbuf + 4096, 200, 2));
  CHECK_EQ_INT(mcp_net_test(r1, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  CHECK_EQ_INT(fake_wait_done(s2, NULL, POLLS), 1);
  fake_pair_hold(p, FAKE_SEND_SIDE, 1, 0);
  CHECK_EQ_INT(fake_wait_done(r1, sizes, POLLS), 1);
  CHECK_EQ_INT(sizes[0], 300);
  CHECK(fake_same(rbuf, 300, 1));
  CHECK_EQ_INT(fake_wait_done(s1, NULL, POLLS), 1);
  CHECK_EQ_INT(fake_comm_error(p->recv), 0);
  fake_pair_free(p);
}

/* A large single receive is striped over the QPs; its size is the sum of the writes. */
static void test_striped_size(void)
{
  struct fake_pair *p = pair(4, 0);
  size_t size = 512 * 1024 + 3;

  fake_posts_reset();
  CHECK_EQ_INT(one_message(p, size, BUFSZ, 5), size);
  CHECK_EQ_INT(fake_count_data_writes(), 4);
  fake_pair_free(p);
}

static void test_larger_than_receive_fails(void)
{
  struct fake_pair *p = pair(1, 0);
  ncclResult_t rc;

  irecv1(p, 0, 4096, 1, 0);
  fake_posts_reset();
  CHECK(isend(p, 0, 4097, 1, &rc) == NULL);
  CHECK_EQ_INT(rc, ncclInvalidUsage);
  CHECK_EQ_INT(fake_count_data_writes(), 0);
  CHECK(strstr(fake_comm_errmsg(p->send), "larger than the posted receive buffer of 4096 bytes") != NULL);
  /* The comm stays failed. */
  CHECK(isend(p, 0, 1, 1, &rc) == NULL);
  CHECK_EQ_INT(rc, ncclInvalidUsage);
  fake_pair_free(p);
}

/* A grouped receive of three tags, sent out of order: each buffer gets its own send's
 * bytes, the sizes come from the record, one record write closes the group. */
static void test_grouped_by_tag(void)
{
  static const size_t offs[3] = {0, 65536, 131072}, sizes[3] = {4096, 4096, 4096};
  static const int tags[3] = {10, 11, 12}, order[3] = {2, 0, 1}, lens[3] = {100, 0, 4096};
  struct fake_pair *p = pair(1, 0);
  void *r, *s[3];
  int got[3] = {-1, -1, -1}, i, done = 0;
  ncclResult_t rc;

  for (i = 0; i < 3; i++)
    fake_pattern(sbuf + offs[i], (size_t)lens[i], (unsigned)(20 + i));
  r = irecvn(p, 3, offs, sizes, tags);
  fake_posts_reset();
  for (i = 0; i < 3; i++) {
    int k = order[i];
    s[k] = isend(p, offs[k], (size_t)lens[k], tags[k], &rc);
    CHECK(s[k] != NULL);
    if (i < 2) { /* not complete before the group is */
      CHECK_EQ_INT(mcp_net_test(r, &done, got), ncclSuccess);
      CHECK_EQ_INT(done, 0);
    }
  }
  CHECK_EQ_INT(fake_count_records(), 1);
  CHECK_EQ_INT(fake_count_data_writes(), 2); /* the empty one writes nothing */
  CHECK_EQ_INT(fake_wait_done(r, got, POLLS), 1);
  for (i = 0; i < 3; i++) {
    CHECK_EQ_INT(got[i], lens[i]);
    CHECK(fake_same(rbuf + offs[i], (size_t)lens[i], (unsigned)(20 + i)));
    CHECK_EQ_INT(fake_wait_done(s[i], NULL, POLLS), 1);
  }
  fake_pair_free(p);
}

/* PXN: two local ranks share the comm with tags 1 and 2, out of step. Tag 1's second
 * send may not take seq 2's buffer while seq 1 waits for tag 2. */
static void test_pxn_head_only(void)
{
  static const size_t offs1[2] = {0, 4096}, offs2[2] = {8192, 12288}, sizes[2] = {4096, 4096};
  static const int tags[2] = {1, 2};
  struct fake_pair *p = pair(1, 0);
  void *r1, *r2, *a, *b, *a2, *b2;
  int got[2];
  char why[1024];
  ncclResult_t rc;

  r1 = irecvn(p, 2, offs1, sizes, tags);
  r2 = irecvn(p, 2, offs2, sizes, tags);
  fake_pattern(sbuf, 64, 1);
  fake_pattern(sbuf + 4096, 64, 2);
  a = isend(p, 0, 64, 1, &rc);
  CHECK(a != NULL);
  CHECK_EQ_INT(fake_req_seq(a), 1);
  a2 = isend(p, 4096, 64, 1, &rc); /* tag 1 again: its element of seq 1 is used */
  CHECK(a2 == NULL);
  CHECK_EQ_INT(rc, ncclSuccess);
  mcp_xfer_watchdog_describe(p->send, why, sizeof(why));
  CHECK(strstr(why,
               "isend with tag 1 finds no free buffer for its tag in the oldest receive (seq 1, "
               "tags 1(sent),2)") != NULL);
  b = isend(p, 0, 32, 2, &rc);
  CHECK(b != NULL);
  a2 = isend(p, 4096, 64, 1, &rc); /* now seq 2 is the head */
  CHECK(a2 != NULL);
  CHECK_EQ_INT(a2 != NULL ? fake_req_seq(a2) : 0, 2);
  b2 = isend(p, 0, 16, 2, &rc);
  CHECK(b2 != NULL);
  CHECK_EQ_INT(fake_wait_done(r1, got, POLLS), 1);
  CHECK_EQ_INT(got[0], 64);
  CHECK_EQ_INT(got[1], 32);
  CHECK(fake_same(rbuf, 64, 1));
  CHECK_EQ_INT(fake_wait_done(r2, got, POLLS), 1);
  CHECK_EQ_INT(got[0], 64);
  CHECK_EQ_INT(got[1], 16);
  CHECK(fake_same(rbuf + 8192, 64, 2));
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  CHECK_EQ_INT(fake_warns, 0);
  fake_pair_free(p);
}

/* A tag with no element in the head receive, and none in any later one: NULL, no error. */
static void test_unknown_tag_waits(void)
{
  struct fake_pair *p = pair(1, 0);
  ncclResult_t rc;
  int i;

  irecv1(p, 0, 4096, 3, 0);
  for (i = 0; i < 5; i++) {
    CHECK(isend(p, 0, 8, 4, &rc) == NULL);
    CHECK_EQ_INT(rc, ncclSuccess);
  }
  CHECK(isend(p, 0, 8, 3, &rc) != NULL);
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  fake_pair_free(p);
}

/* Receives posted 8 ahead: each irecv writes its own clear-to-send before it returns,
 * one element long (no batch: a later call might never come). */
static void test_cts_written_by_irecv(void)
{
  struct fake_pair *p = pair(1, 0);
  const struct fake_post *log;
  int i, n;

  fake_posts_reset();
  for (i = 0; i < 8; i++) {
    irecv1(p, (size_t)i * 4096, 4096, 1, 0);
    CHECK_EQ_INT(fake_count_cts_writes(), i + 1);
    n = fake_posts(&log);
    CHECK(n > 0 && log[n - 1].side == FAKE_RECV_SIDE && log[n - 1].len == sizeof(struct mcp_cts_elem));
  }
  fake_pair_free(p);
}

/* Five receives, then nothing on the receive comm: the sender can send all five, the
 * entries already being there; the receives then complete. */
static void test_cts_all_sendable_without_calls(void)
{
  struct fake_pair *p = pair(1, 0);
  ncclResult_t rc;
  void *r[5];
  int i, sizes[1];

  fake_posts_reset();
  for (i = 0; i < 5; i++)
    r[i] = irecv1(p, (size_t)i * 4096, 4096, 1, 0);
  CHECK_EQ_INT(fake_count_cts_writes(), 5);
  fake_progress(); /* the receiver's adapter, on its own */
  for (i = 0; i < 5; i++)
    CHECK(isend(p, 0, 10, 1, &rc) != NULL);
  for (i = 0; i < 5; i++)
    CHECK_EQ_INT(fake_wait_done(r[i], sizes, POLLS), 1);
  fake_pair_free(p);
}

/* The optional-completion hint (LL/LL128): the entry goes out at once, as every entry
 * does, and the receive is done only once its data landed. */
static void test_optional_completion_hint(void)
{
  struct fake_pair *p = pair(1, 0);
  ncclResult_t rc;
  void *r;
  int i, done = 0, sizes[1] = {-1};

  for (i = 0; i < 4; i++)
    irecv1(p, (size_t)i * 4096, 4096, 1, 0);
  fake_posts_reset();
  r = irecv1(p, 4 * 4096, 4096, 1, 1);
  CHECK(r != NULL && r != (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION);
  CHECK_EQ_INT(fake_count_cts_writes(), 1);
  for (i = 0; i < 3; i++) {
    CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclSuccess);
    CHECK_EQ_INT(done, 0);
  }
  for (i = 0; i < 4; i++)
    CHECK(isend(p, 0, 1, 1, &rc) != NULL);
  CHECK_EQ_INT(mcp_net_test(r, &done, sizes), ncclSuccess);
  CHECK_EQ_INT(done, 0); /* seqs 1..4 landed, not ours */
  fake_pattern(sbuf, 77, 3);
  CHECK(isend(p, 0, 77, 1, &rc) != NULL);
  CHECK_EQ_INT(fake_wait_done(r, sizes, POLLS), 1);
  CHECK_EQ_INT(sizes[0], 77);
  CHECK(fake_same(rbuf + 4 * 4096, 77, 3));
  fake_pair_free(p);
}

/* The sizes record of a group: inline when the provider takes 64 bytes inline, else
 * from the registered records buffer (the fake checks its lkey). Same result. */
static void test_record_inline_and_registered(void)
{
  static const size_t offs[2] = {0, 4096}, sizes[2] = {4096, 4096};
  static const int tags[2] = {1, 2};
  int k;

  for (k = 0; k < 2; k++) {
    struct fake_pair *p = pair(1, k == 0 ? 256 : 32);
    const struct fake_post *log;
    ncclResult_t rc;
    int got[2] = {-1, -1}, n, i, seen = 0;
    void *r = irecvn(p, 2, offs, sizes, tags);

    fake_posts_reset();
    CHECK(isend(p, 0, 5, 1, &rc) != NULL);
    CHECK(isend(p, 0, 9, 2, &rc) != NULL);
    n = fake_posts(&log);
    for (i = 0; i < n; i++)
      if (log[i].opcode == IBV_WR_RDMA_WRITE_WITH_IMM && MCP_IMM_REC(log[i].imm)) {
        seen++;
        CHECK_EQ_INT(log[i].send_flags & IBV_SEND_INLINE, k == 0 ? IBV_SEND_INLINE : 0);
        CHECK_EQ_INT(log[i].len, sizeof(struct mcp_record));
      }
    CHECK_EQ_INT(seen, 1);
    CHECK_EQ_INT(fake_wait_done(r, got, POLLS), 1);
    CHECK_EQ_INT(got[0], 5);
    CHECK_EQ_INT(got[1], 9);
    CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
    fake_pair_free(p);
  }
}

/* The link goes down with eight messages in flight: 1-3 were acknowledged, 4-5 landed
 * but their acknowledgements were lost, 6-8 never landed. After the QPs are re-created,
 * the receiver's done table completes 4-5 at the sender, 6-8 are written again once
 * each, and every receive reports its own bytes. */
static void test_replay_after_qp_loss(void)
{
  struct fake_pair *p = pair(1, 0);
  const struct fake_post *log;
  void *r[8], *s[8];
  int i, n, again[9] = {0}, sizes[1];
  ncclResult_t rc;

  for (i = 0; i < 8; i++) {
    r[i] = irecv1(p, (size_t)i * 4096, 4096, 1, 0);
    fake_pattern(sbuf + (size_t)i * 4096, 100 + (size_t)i, (unsigned)(40 + i));
  }
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  for (i = 0; i < 8; i++) {
    s[i] = isend(p, (size_t)i * 4096, 100 + (size_t)i, 1, &rc);
    CHECK(s[i] != NULL);
  }
  fake_pair_release_n(p, FAKE_SEND_SIDE, 0, 3);
  fake_pair_break(p, FAKE_SEND_SIDE, 0, 1);
  fake_pair_release_n(p, FAKE_SEND_SIDE, 0, 2);
  fake_pair_break(p, FAKE_SEND_SIDE, 0, 0);
  fake_pair_break(p, FAKE_RECV_SIDE, 0, 0);
  fake_posts_reset();
  CHECK_EQ_INT(fake_pair_recover(p), 0);
  n = fake_posts(&log);
  for (i = 0; i < n; i++)
    if (log[i].side == FAKE_SEND_SIDE && log[i].opcode == IBV_WR_RDMA_WRITE_WITH_IMM &&
        MCP_IMM_SEQ(log[i].imm) >= 1 && MCP_IMM_SEQ(log[i].imm) <= 8)
      again[MCP_IMM_SEQ(log[i].imm)]++;
  for (i = 1; i <= 5; i++)
    CHECK_EQ_INT(again[i], 0);
  for (i = 6; i <= 8; i++)
    CHECK_EQ_INT(again[i], 1);
  for (i = 0; i < 8; i++) {
    CHECK_EQ_INT(fake_wait_done(r[i], sizes, POLLS), 1);
    CHECK_EQ_INT(sizes[0], 100 + i);
    CHECK(fake_same(rbuf + (size_t)i * 4096, 100 + (size_t)i, (unsigned)(40 + i)));
    CHECK_EQ_INT(fake_wait_done(s[i], NULL, POLLS), 1);
  }
  /* And the connection works on. */
  CHECK_EQ_INT(one_message(p, 33, 4096, 77), 33);
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  fake_pair_free(p);
}

/* A group in flight when the link goes down is written again whole, record last. */
static void test_replay_group(void)
{
  static const size_t offs[2] = {0, 4096}, sizes[2] = {4096, 4096};
  static const int tags[2] = {1, 2};
  struct fake_pair *p = pair(1, 0);
  void *r, *a, *b;
  int got[2] = {-1, -1};
  ncclResult_t rc;

  r = irecvn(p, 2, offs, sizes, tags);
  fake_pattern(sbuf, 50, 1);
  fake_pattern(sbuf + 4096, 60, 2);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  a = isend(p, 0, 50, 1, &rc);
  b = isend(p, 4096, 60, 2, &rc);
  CHECK(a != NULL && b != NULL);
  fake_pair_break(p, FAKE_SEND_SIDE, 0, 0);
  fake_pair_break(p, FAKE_RECV_SIDE, 0, 0);
  fake_posts_reset();
  CHECK_EQ_INT(fake_pair_recover(p), 0);
  CHECK_EQ_INT(fake_count_records(), 1);
  CHECK_EQ_INT(fake_count_data_writes(), 2);
  CHECK_EQ_INT(fake_wait_done(r, got, POLLS), 1);
  CHECK_EQ_INT(got[0], 50);
  CHECK_EQ_INT(got[1], 60);
  CHECK(fake_same(rbuf, 50, 1));
  CHECK(fake_same(rbuf + 4096, 60, 2));
  CHECK_EQ_INT(fake_wait_done(a, NULL, POLLS), 1);
  CHECK_EQ_INT(fake_wait_done(b, NULL, POLLS), 1);
  fake_pair_free(p);
}

/* A post the provider refuses fails the comm with the reason. */
static void test_post_failure(void)
{
  struct fake_pair *p = pair(1, 0);
  ncclResult_t rc;

  irecv1(p, 0, 4096, 1, 0);
  fake_progress();
  fake_fail_next_post(ENOMEM);
  CHECK(isend(p, 0, 8, 1, &rc) == NULL);
  CHECK_EQ_INT(rc, ncclSystemError);
  CHECK(strstr(fake_comm_errmsg(p->send), "ibv_post_send on QP") != NULL);
  fake_pair_free(p);
}

/* A link whose QPs are on two device contexts (what NIC fusion will build): QP i lands
 * on member i % 2, on that member's PD and CQ, each CQ on its own context; a failed
 * completion's QP number finds its member; a fatal event on member 1's device fails the
 * comm naming that device. Today's links have one member, so only this test has two. */
static void test_link_members(void)
{
  struct fake_pair *p = fake_pair_make(NULL);
  struct mcp_link *l = calloc(1, sizeof(*l));
  int i;

  l->kind = MCP_COMM_SEND;
  snprintf(l->peer_name, sizeof(l->peer_name), "fake-peer");
  l->ndevs = 2;
  l->devs[0].dc = fake_pair_devctx(p, 0);
  l->devs[1].dc = fake_pair_devctx(p, 1);
  CHECK_EQ_INT(mcp_qp_create_all(l, 3, 8, 8), 0);
  for (i = 0; i < 2; i++) {
    CHECK(l->devs[i].cq != NULL);
    if (l->devs[i].cq != NULL)
      CHECK(l->devs[i].cq->context == l->devs[i].dc->ctx);
  }
  CHECK(l->devs[0].cq != l->devs[1].cq);
  for (i = 0; i < 3; i++) {
    CHECK(l->qp[i] != NULL);
    if (l->qp[i] == NULL)
      continue;
    CHECK(mcp_link_dev_of(l, i) == &l->devs[i % 2]);
    CHECK(l->qp[i]->pd == l->devs[i % 2].dc->pd);
    CHECK(fake_qp_send_cq(l->qp[i]) == l->devs[i % 2].cq);
    CHECK(mcp_link_dev_of_qpn(l, l->qp[i]->qp_num) == &l->devs[i % 2]);
  }
  CHECK(mcp_link_dev_of_qpn(l, 0xfffff0) == &l->devs[0]); /* not one of its QPs: member 0 */

  atomic_store(&l->devs[1].dc->fatal, 1);
  mcp_recover_check_events(l);
  atomic_store(&l->devs[1].dc->fatal, 0);
  CHECK(l->error != 0);
  CHECK(strstr(l->errmsg, "fake1 reported a fatal device error") != NULL);

  for (i = 0; i < 3; i++)
    if (l->qp[i] != NULL)
      mcp_ibv.destroy_qp(l->qp[i]);
  for (i = 0; i < 2; i++)
    if (l->devs[i].cq != NULL)
      mcp_ibv.destroy_cq(l->devs[i].cq);
  free(l);
  fake_pair_free(p);
}

/* A comm holds what NCCL can have outstanding (NCCL_NET_MAX_REQUESTS = 32 per comm), and
 * its queues are sized by that (issue 16): the 33rd receive in flight and the 33rd send
 * request get a NULL request, never an error, and both go through once the oldest are
 * tested. Five receives of 8 buffers give the sender 40 elements to fill. */
static void test_outstanding_bounds(void)
{
  static const int tags[MCP_MAX_RECVS] = {1, 2, 3, 4, 5, 6, 7, 8};
  size_t offs[MCP_MAX_RECVS], sizes[MCP_MAX_RECVS];
  void *rreq[64], *sreq[40], *extra;
  struct fake_pair *p = pair(1, 256);
  int i, g, accepted = 0, got[MCP_MAX_RECVS];
  ncclResult_t rc;

  for (i = 0; i < 64; i++)
    if ((rreq[i] = irecv1(p, (size_t)i * 4096, 4096, 7, 0)) != NULL)
      accepted++;
  CHECK_EQ_INT(accepted, NCCL_NET_MAX_REQUESTS);
  CHECK_EQ_INT(fake_comm_error(p->recv), 0);
  fake_pair_free(p);

  p = pair(1, 256);
  for (i = 0; i < MCP_MAX_RECVS; i++)
    sizes[i] = 64;
  for (g = 0; g < 5; g++) {
    for (i = 0; i < MCP_MAX_RECVS; i++)
      offs[i] = (size_t)(g * MCP_MAX_RECVS + i) * 4096;
    rreq[g] = irecvn(p, MCP_MAX_RECVS, offs, sizes, tags);
    CHECK(rreq[g] != NULL);
  }
  for (i = 0, accepted = 0; i < 40; i++) {
    sreq[i] = isend(p, (size_t)i * 64, 64, tags[i % MCP_MAX_RECVS], &rc);
    CHECK_EQ_INT(rc, ncclSuccess);
    if (sreq[i] == NULL)
      break;
    accepted++;
  }
  CHECK_EQ_INT(accepted, NCCL_NET_MAX_REQUESTS);
  CHECK_EQ_INT(fake_comm_error(p->send), 0);
  /* The first group's sends complete; their requests serve the next sends. */
  for (i = 0; i < MCP_MAX_RECVS; i++)
    CHECK_EQ_INT(fake_wait_done(sreq[i], got, POLLS), 1);
  extra = isend(p, (size_t)accepted * 64, 64, tags[accepted % MCP_MAX_RECVS], &rc);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK(extra != NULL);
  CHECK_EQ_INT(fake_wait_done(rreq[0], got, POLLS), 1);
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  CHECK_EQ_INT(fake_warns, 0);
  fake_pair_free(p);
}

/* The send queues never run out, with the fake's queues as deep as they were created
 * and an entry retired only by a polled signalled completion (mlx5's rule; an
 * unsignalled WR waits for the next signalled one). The receive side writes a
 * clear-to-send per receive (batch 1), signals one write in 16 and polls its CQ only
 * every 16 landings: 3,000 messages of 8 B with 8 receives posted ahead (as NCCL's
 * proxy posts them) and with 32 (all it may have), its queue holding more than one
 * signalling interval's worth (the rule at work) and never more than its depth. The
 * model itself: a QP's queue refuses the post past its depth until a signalled
 * completion is polled. */
static void test_send_queues_never_overrun(void)
{
  static const int aheads[] = {8, NCCL_NET_MAX_REQUESTS};
  struct fake_pair *p;
  struct fake_sq_use rq, sq;
  void *r[NCCL_NET_MAX_REQUESTS], *s;
  int a, i, k, sizes[1], got, ahead;
  ncclResult_t rc;

  for (a = 0; a < 2; a++) {
    ahead = aheads[a];
    p = pair(1, 0);
    for (k = 0; k < ahead; k++)
      r[k] = irecv1(p, (size_t)k * 64, 64, 1, 0);
    for (i = 0, got = 0; i < 3000; i++) {
      k = i % ahead;
      fake_pattern(sbuf + k * 64, 8, (unsigned)i);
      s = isend(p, (size_t)k * 64, 8, 1, &rc);
      CHECK_EQ_INT(rc, ncclSuccess);
      if (s == NULL || r[k] == NULL)
        break;
      CHECK_EQ_INT(fake_wait_done(s, NULL, POLLS), 1);
      if (fake_wait_done(r[k], sizes, POLLS) != 1 || sizes[0] != 8 ||
          !fake_same(rbuf + k * 64, 8, (unsigned)i))
        break;
      got++;
      r[k] = irecv1(p, (size_t)k * 64, 64, 1, 0);
    }
    CHECK_EQ_INT(got, 3000);
    CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
    rq = fake_pair_sq_use(p, FAKE_RECV_SIDE, 0);
    sq = fake_pair_sq_use(p, FAKE_SEND_SIDE, 0);
    CHECK_EQ_INT(rq.refused + sq.refused, 0);
    CHECK(rq.high > 16 && rq.high <= rq.depth);
    CHECK(sq.high >= 1 && sq.high <= sq.depth);
    fake_pair_free(p);
  }

  /* The model: unsignalled writes fill the queue, the next post is refused (ENOMEM),
   * and polling frees nothing until a signalled one's completion. */
  p = pair(1, 0);
  {
    struct ibv_qp *qp = fake_comm_qp(p->send, 0);
    struct ibv_send_wr wr, *bad;
    struct ibv_wc wc[4];
    int depth = fake_pair_sq_use(p, FAKE_SEND_SIDE, 0).depth, posted = 0;

    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_RDMA_WRITE;
    while (posted <= depth && ibv_post_send(qp, &wr, &bad) == 0)
      posted++;
    CHECK_EQ_INT(posted, depth);
    CHECK_EQ_INT(ibv_poll_cq(fake_qp_send_cq(qp), 4, wc), 0);
    CHECK_EQ_INT(ibv_post_send(qp, &wr, &bad), ENOMEM);
    CHECK_EQ_INT(fake_pair_sq_use(p, FAKE_SEND_SIDE, 0).refused, 2);
  }
  fake_pair_free(p);
}

/* A landing's request is done as any send's: when its write's completion says the
 * receiver's adapter acknowledged it (NCCL may close the comm, and the process end,
 * right after its last send is done). Held on the wire, it stays not done however often
 * it is tested; once released, it is done and the receive has its bytes. */
static void test_landing_done_when_acknowledged(void)
{
  struct fake_pair *p = pair(1, 0);
  const struct fake_post *log;
  void *r, *s;
  int sizes[1] = {-1}, i, n, done = 0;
  ncclResult_t rc;

  r = irecv1(p, 0, 4096, 1, 0);
  fake_pattern(sbuf, 8, 91);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  fake_posts_reset();
  s = isend(p, 0, 8, 1, &rc);
  CHECK(s != NULL);
  n = fake_posts(&log);
  CHECK_EQ_INT(n, 1);
  CHECK(n == 1 && log[0].opcode == IBV_WR_RDMA_WRITE && log[0].len == 16 &&
        (log[0].send_flags & IBV_SEND_SIGNALED));
  for (i = 0; i < POLLS; i++)
    CHECK_EQ_INT(mcp_net_test(s, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 0);
  fake_pair_release_n(p, FAKE_SEND_SIDE, 0, 1);
  CHECK_EQ_INT(fake_wait_done(s, NULL, 1), 1);
  CHECK_EQ_INT(fake_wait_done(r, sizes, POLLS), 1);
  CHECK_EQ_INT(sizes[0], 8);
  CHECK(fake_same(rbuf, 8, 91));
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  fake_pair_free(p);
}

/* test_replay_after_qp_loss with landings: 1-3 acknowledged, 4-5 landed with their
 * acknowledgements lost (the receiver has their lines but never tested them), 6-8
 * never landed. The receiver's table counts the lines that arrived, so 4-5 complete at
 * the sender without a write; 6-8 are written again once each, from the sender's copy
 * of their lines; every receive reports its own bytes. */
static void test_landing_replay(void)
{
  struct fake_pair *p = pair(1, 0);
  const struct fake_post *log;
  void *r[8], *s[8];
  int i, n, again[8] = {0}, sizes[1], done;
  ncclResult_t rc;

  for (i = 0; i < 8; i++) {
    r[i] = irecv1(p, (size_t)i * 4096, 4096, 1, 0);
    fake_pattern(sbuf + (size_t)i * 4096, 8 + (size_t)i, (unsigned)(60 + i));
  }
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  fake_posts_reset();
  for (i = 0; i < 8; i++) {
    s[i] = isend(p, (size_t)i * 4096, 8 + (size_t)i, 1, &rc);
    CHECK(s[i] != NULL);
  }
  n = fake_posts(&log);
  for (i = 0; i < n; i++) /* message i lands as its 8 + i bytes and the 8-byte trailer */
    if (log[i].side == FAKE_SEND_SIDE && log[i].opcode == IBV_WR_RDMA_WRITE && log[i].len >= 16 &&
        log[i].len < 24)
      again[log[i].len - 16]++;
  for (i = 0; i < 8; i++)
    CHECK_EQ_INT(again[i], 1);
  fake_pair_release_n(p, FAKE_SEND_SIDE, 0, 3);
  for (i = 0; i < 8; i++) { /* done exactly when acknowledged */
    done = -1;
    CHECK_EQ_INT(mcp_net_test(s[i], &done, NULL), ncclSuccess);
    CHECK_EQ_INT(done, i < 3);
  }
  fake_pair_break(p, FAKE_SEND_SIDE, 0, 1);
  fake_pair_release_n(p, FAKE_SEND_SIDE, 0, 2);
  fake_pair_break(p, FAKE_SEND_SIDE, 0, 0);
  fake_pair_break(p, FAKE_RECV_SIDE, 0, 0);
  fake_posts_reset();
  memset(again, 0, sizeof(again));
  CHECK_EQ_INT(fake_pair_recover(p), 0);
  n = fake_posts(&log);
  for (i = 0; i < n; i++)
    if (log[i].side == FAKE_SEND_SIDE && log[i].opcode == IBV_WR_RDMA_WRITE && log[i].len >= 16 &&
        log[i].len < 24)
      again[log[i].len - 16]++;
  for (i = 0; i < 8; i++)
    CHECK_EQ_INT(again[i], i >= 5);
  for (i = 0; i < 8; i++) {
    CHECK_EQ_INT(fake_wait_done(r[i], sizes, POLLS), 1);
    CHECK_EQ_INT(sizes[0], 8 + i);
    CHECK(fake_same(rbuf + (size_t)i * 4096, 8 + (size_t)i, (unsigned)(60 + i)));
    if (i >= 3)
      CHECK_EQ_INT(fake_wait_done(s[i], NULL, POLLS), 1);
  }
  CHECK_EQ_INT(fake_comm_inflight(p->recv), 0);
  CHECK_EQ_INT(one_message(p, 12, 4096, 78), 12);
  CHECK_EQ_INT(one_message(p, 20, 4096, 79), 20);
  CHECK_EQ_INT(fake_comm_error(p->send) | fake_comm_error(p->recv), 0);
  fake_pair_free(p);
}

/* Only host memory lands: a receive into GPU memory or a DMA-BUF registration is never
 * advertised for it (the receiver's CPU would copy into it), and takes the write with
 * immediate. Nor does a receive under the optional-completion hint (k = 3), whose buffer
 * the GPU polls for LL flags: only the NIC's write puts them there without a test. Nor
 * a connection of two QPs (k = 4: landings are built for NCCL's default of one). */
static void test_landing_host_only(void)
{
  int k;

  for (k = 0; k < 5; k++) {
    struct fake_pair *p = pair(k == 4 ? 2 : 1, 0);
    struct mcp_mr *kinds[5] = {rmh, fake_pair_reg(p, FAKE_RECV_SIDE, rbuf, BUFSZ, NCCL_PTR_CUDA),
                               fake_pair_reg_dmabuf(p, FAKE_RECV_SIDE, rbuf, BUFSZ, NCCL_PTR_HOST), rmh, rmh};
    void *data = rbuf, *mh = kinds[k], *req = k == 3 ? (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION : NULL, *s;
    const struct fake_post *log;
    size_t size = 4096;
    int tag = 1, i, n, lands = 0, imms = 0, sizes[1];
    ncclResult_t rc;

    CHECK_EQ_INT(mcp_net_irecv(p->recv, 1, &data, &size, &tag, &mh, &req), ncclSuccess);
    fake_pattern(sbuf, 8, 92);
    fake_posts_reset();
    s = isend(p, 0, 8, 1, &rc);
    CHECK(s != NULL);
    n = fake_posts(&log);
    for (i = 0; i < n; i++) {
      lands += log[i].side == FAKE_SEND_SIDE && log[i].opcode == IBV_WR_RDMA_WRITE;
      imms += log[i].side == FAKE_SEND_SIDE && log[i].opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    }
    CHECK_EQ_INT(lands, k == 0);
    CHECK_EQ_INT(imms, k != 0);
    CHECK_EQ_INT(fake_wait_done(req, sizes, POLLS), 1);
    CHECK_EQ_INT(sizes[0], 8);
    CHECK(fake_same(rbuf, 8, 92));
    CHECK_EQ_INT(fake_wait_done(s, NULL, POLLS), 1);
    fake_pair_free(p);
  }
}

int main(void)
{
  setvbuf(stdout, NULL, _IONBF, 0);
  sbuf = aligned_alloc(4096, BUFSZ);
  rbuf = aligned_alloc(4096, BUFSZ);
  mcp_log_set_logger(fake_warn_capture);
  RUN_TEST(test_ring_wrap_sizes);
  RUN_TEST(test_seq_wraps);
  RUN_TEST(test_pipelined_ring_wrap);
  RUN_TEST(test_stale_cts_not_consumed);
  RUN_TEST(test_partial_group_entry_waits);
  RUN_TEST(test_out_of_order_slots);
  RUN_TEST(test_striped_size);
  RUN_TEST(test_larger_than_receive_fails);
  RUN_TEST(test_grouped_by_tag);
  RUN_TEST(test_pxn_head_only);
  RUN_TEST(test_unknown_tag_waits);
  RUN_TEST(test_cts_written_by_irecv);
  RUN_TEST(test_cts_all_sendable_without_calls);
  RUN_TEST(test_optional_completion_hint);
  RUN_TEST(test_record_inline_and_registered);
  RUN_TEST(test_replay_after_qp_loss);
  RUN_TEST(test_replay_group);
  RUN_TEST(test_post_failure);
  RUN_TEST(test_link_members);
  RUN_TEST(test_outstanding_bounds);
  RUN_TEST(test_send_queues_never_overrun);
  RUN_TEST(test_landing_done_when_acknowledged);
  RUN_TEST(test_landing_replay);
  RUN_TEST(test_landing_host_only);
  free(sbuf);
  free(rbuf);
  return TEST_EXIT();
}
