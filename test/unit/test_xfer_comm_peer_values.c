/*
 * test_xfer_comm_peer_values.c - what a peer's NIC writes into our memory is checked before
 * it is used (issue 35), on a fake connected pair (mcp_fake_verbs.c) whose rings the
 * test overwrites as a hostile or broken peer would:
 * - a fused receiver's clear-to-send element carrying idx 255 (it would index the rkey
 *   table 8 x 4 past the ring's end) fails the send comm, naming the peer, before any
 *   write is posted; so does a grouped entry whose element says another place;
 * - a sender that writes more than the receive was posted for (its own clear-to-send
 *   copy enlarged) fails the receive comm: NCCL is never told a size above its buffer;
 * - a grouped receive's sizes record claiming more than a buffer holds does the same.
 */
#include <stdlib.h>
#include <string.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/log.h"

#define BUFSZ (1 << 20)
#define POLLS 2000

static unsigned char *sbuf, *rbuf;
static void *smh, *rmh;

static struct fake_pair *pair(int send_devs, int recv_devs)
{
  struct fake_pair_opts o = {.nqps = 1, .ndevs = {send_devs, recv_devs}};
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(&o);
  smh = fake_pair_reg_mh(p, FAKE_SEND_SIDE, sbuf, BUFSZ, NCCL_PTR_HOST);
  rmh = fake_pair_reg_mh(p, FAKE_RECV_SIDE, rbuf, BUFSZ, NCCL_PTR_HOST);
  CHECK(smh != NULL && rmh != NULL);
  fake_posts_reset();
  return p;
}

static void pair_free(struct fake_pair *p)
{
  fake_pair_dereg_mh(p, FAKE_SEND_SIDE, smh);
  fake_pair_dereg_mh(p, FAKE_RECV_SIDE, rmh);
  fake_pair_free(p);
}

/* n receives of 4 KiB each (one grouped receive when n > 1); the request. */
static void *post_recv(struct fake_pair *p, int n)
{
  void *data[8], *mhs[8], *r = (void *)0xbad;
  size_t sizes[8];
  int tags[8];

  for (int i = 0; i < n; i++) {
    data[i] = rbuf + (size_t)i * 8192;
    mhs[i] = rmh;
    sizes[i] = 4096;
    tags[i] = 5 + i;
  }
  CHECK_EQ_INT(mcp_net_irecv(p->recv, n, data, sizes, tags, mhs, &r), ncclSuccess);
  CHECK(r != NULL);
  fake_progress(); /* the clear-to-send reaches the sender */
  return r;
}

static void test_cts_index_255(void)
{
  struct fake_pair *p = pair(1, 2);
  void *s = (void *)0xbad;
  int writes;

  post_recv(p, 1);
  fake_pair_poke_cts(p, fake_comm_seq(p->send), 0, 255, -1);
  writes = fake_count_data_writes();
  CHECK(mcp_net_isend(p->send, sbuf, 4096, 5, smh, &s) != ncclSuccess);
  CHECK(s == NULL);
  CHECK(fake_comm_error(p->send) != 0);
  CHECK(strstr(fake_comm_errmsg(p->send),
               "corrupt clear-to-send entry for seq 1: element 0 says it is element "
               "255 (protocol error)") != NULL);
  CHECK(strstr(fake_comm_errmsg(p->send), "send to ") == fake_comm_errmsg(p->send)); /* names the peer */
  CHECK_EQ_INT(fake_count_data_writes(), writes);
  pair_free(p);
}

static void test_grouped_cts_index(void)
{
  struct fake_pair *p = pair(1, 2);
  void *s = (void *)0xbad;

  post_recv(p, 3);
  fake_pair_poke_cts(p, fake_comm_seq(p->send), 2, 7, -1);
  CHECK(mcp_net_isend(p->send, sbuf, 100, 5, smh, &s) != ncclSuccess);
  CHECK(strstr(fake_comm_errmsg(p->send), "element 2 says it is element 7") != NULL);
  pair_free(p);
}

static void test_write_larger_than_posted(void)
{
  struct fake_pair *p = pair(1, 1);
  void *r, *s = NULL;
  int done = 0, sizes[1] = {-1}, i;

  r = post_recv(p, 1);
  fake_pair_poke_cts(p, fake_comm_seq(p->send), 0, -1, 8192); /* the sender believes 8 KiB */
  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, 8192, 5, smh, &s), ncclSuccess);
  CHECK(s != NULL);
  for (i = 0; i < POLLS && fake_comm_error(p->recv) == 0; i++)
    (void)mcp_net_test(r, &done, sizes);
  CHECK_EQ_INT(done, 0);
  CHECK(sizes[0] != 8192);
  CHECK(strstr(fake_comm_errmsg(p->recv), "8192 bytes arrived for buffer 0 of seq 1, posted for 4096") !=
        NULL);
  pair_free(p);
}

static void test_record_larger_than_posted(void)
{
  struct fake_pair *p = pair(1, 1);
  void *r, *s[2] = {NULL, NULL};
  int done = 0, sizes[2] = {-1, -1}, i;

  r = post_recv(p, 2);
  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, 100, 5, smh, &s[0]), ncclSuccess);
  CHECK_EQ_INT(mcp_net_isend(p->send, sbuf, 200, 6, smh, &s[1]), ncclSuccess);
  CHECK(s[0] != NULL && s[1] != NULL);
  fake_progress(); /* the parts and the record land; the record's completion waits */
  fake_pair_poke_record_size(p, 1, 1, 1u << 30);
  for (i = 0; i < POLLS && fake_comm_error(p->recv) == 0; i++)
    (void)mcp_net_test(r, &done, sizes);
  CHECK_EQ_INT(done, 0);
  CHECK(strstr(fake_comm_errmsg(p->recv),
               "1073741824 bytes arrived for buffer 1 of seq 1, posted for 4096") != NULL);
  pair_free(p);
}

int main(void)
{
  sbuf = calloc(1, BUFSZ);
  rbuf = calloc(1, BUFSZ);
  mcp_log_set_logger(mcp_test_log_quiet);
  RUN_TEST(test_cts_index_255);
  RUN_TEST(test_grouped_cts_index);
  RUN_TEST(test_write_larger_than_posted);
  RUN_TEST(test_record_larger_than_posted);
  free(sbuf);
  free(rbuf);
  return TEST_EXIT();
}
