/*
 * mcp_fake_flight.c - the flights and streams of mcp_fake_flight.h (see there for why).
 */
#include <stdio.h>
#include <string.h>

#include "mcp_fake_flight.h"
#include "mcp_test_util.h"
#include "conn/oob.h"
#include "xfer/comm.h"
#include "net/net.h"

unsigned char fake_flight_sbuf[FAKE_FLIGHT_N * 4096], fake_flight_rbuf[FAKE_FLIGHT_N * 4096];

void fake_streams_close(struct fake_pair *p, struct mcp_oob_stream *ss, struct mcp_oob_stream *rs)
{
  if (rs != NULL)
    mcp_oob_stream_close(rs, 0);
  if (ss != NULL)
    mcp_oob_stream_close(ss, 0);
  fake_pair_attach_streams(p, p->stub[0], p->stub[1]);
}

int fake_streams_open(struct fake_pair *p, struct mcp_oob_stream **ss, struct mcp_oob_stream **rs)
{
  struct mcp_oob_listener *l = mcp_oob_listener_add();
  struct mcp_oob_request *req = NULL;
  struct mcp_wire_msg m;
  union mcp_sockaddr addr;
  uint64_t nonce;
  int turn;

  *rs = NULL;
  if (l == NULL)
    return -1;
  mcp_oob_local(&addr, &nonce);
  *ss = mcp_oob_stream_open_to(&addr, nonce, &l->cred);
  if (*ss == NULL)
    return -1;
  for (turn = 0; turn < FAKE_FLIGHT_TURNS && mcp_oob_stream_ready(*ss) == 0; turn++)
    mcp_test_nap();
  if (mcp_oob_stream_ready(*ss) != 1)
    return -1;
  fake_pair_attach_streams(p, *ss, p->stub[1]);
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REQ; /* the channel proves the listen's key */
  fake_comm_endpoint(p->send, &m.u.conn_req.ep);
  m.u.conn_req.ep.stream_id = mcp_oob_stream_id(*ss);
  if (mcp_oob_stream_send(*ss, &m) != 0)
    return -1;
  for (turn = 0; turn < FAKE_FLIGHT_TURNS && !mcp_oob_listener_take(l, &req); turn++) {
    mcp_oob_progress();
    mcp_test_nap();
  }
  if (req == NULL)
    return -1;
  *rs = mcp_oob_stream_open_for(req);
  mcp_oob_request_free(req);
  mcp_oob_listener_remove(l);
  if (*rs == NULL)
    return -1;
  mcp_oob_stream_set_remote_id(*ss, mcp_oob_stream_id(*rs)); /* what the CONN_ACK tells the connecting side */
  fake_pair_attach_streams(p, *ss, *rs);
  return 0;
}

int fake_flight_recvs(struct fake_pair *p, void *rmh, struct fake_flight *f, size_t size0, unsigned pat0)
{
  int i, failed = 0;

  memset(f, 0, sizeof(*f));
  f->left = 2 * FAKE_FLIGHT_N;
  memset(fake_flight_rbuf, 0, sizeof(fake_flight_rbuf));
  for (i = 0; i < FAKE_FLIGHT_N; i++) {
    void *data = fake_flight_rbuf + i * 4096, *mh = rmh;
    size_t size = 4096;
    int tag = 1;

    f->r[i] = (void *)0xbad;
    if (mcp_net_irecv(p->recv, 1, &data, &size, &tag, &mh, &f->r[i]) != ncclSuccess || f->r[i] == NULL) {
      fprintf(stderr, "fake flight: irecv %d failed\n", i);
      failed++;
    }
    fake_pattern(fake_flight_sbuf + i * 4096, size0 + (size_t)i, pat0 + (unsigned)i);
  }
  return failed;
}

int fake_flight_sends(struct fake_pair *p, void *smh, struct fake_flight *f, size_t size0)
{
  int i, failed = 0;

  for (i = 0; i < FAKE_FLIGHT_N; i++) {
    f->s[i] = NULL;
    if (mcp_net_isend(p->send, fake_flight_sbuf + i * 4096, size0 + (size_t)i, 1, smh, &f->s[i]) !=
          ncclSuccess ||
        f->s[i] == NULL) {
      fprintf(stderr, "fake flight: isend %d failed\n", i);
      failed++;
    }
  }
  return failed;
}

int fake_flight_test(struct fake_pair *p, struct fake_flight *f, int past_failure)
{
  int i, failed = 0;

  for (i = 0; i < FAKE_FLIGHT_N && (past_failure || failed == 0); i++) {
    int done = 0, size = -1;
    ncclResult_t rc;

    if (!f->rdone[i]) {
      fake_comm_check_due(p->recv);
      rc = mcp_net_test(f->r[i], &done, &size);
      failed += rc != ncclSuccess;
      if (rc == ncclSuccess && done) {
        f->rdone[i] = 1;
        f->rsize[i] = size;
        f->left--;
      }
    }
    if (!f->sdone[i] && (past_failure ? fake_comm_error(p->send) == 0 : failed == 0)) {
      fake_comm_check_due(p->send);
      rc = mcp_net_test(f->s[i], &done, NULL);
      failed += rc != ncclSuccess;
      if (rc == ncclSuccess && done) {
        f->sdone[i] = 1;
        f->left--;
      }
    }
  }
  return failed;
}

int fake_flight_verify(const struct fake_flight *f, size_t size0, unsigned pat0)
{
  int i, failed = 0;

  for (i = 0; i < FAKE_FLIGHT_N; i++) {
    if (!f->rdone[i] || !f->sdone[i] || f->rsize[i] != (int)(size0 + (size_t)i) ||
        !fake_same(fake_flight_rbuf + i * 4096, size0 + (size_t)i, pat0 + (unsigned)i)) {
      fprintf(stderr, "fake flight: message %d: received %d, sent %d, size %d (want %zu), pattern %s\n", i,
              f->rdone[i], f->sdone[i], f->rsize[i], size0 + (size_t)i,
              fake_same(fake_flight_rbuf + i * 4096, size0 + (size_t)i, pat0 + (unsigned)i) ? "ok" : "wrong");
      failed++;
    }
  }
  return failed;
}

void fake_flight_writes(uint32_t first, int again[FAKE_FLIGHT_N])
{
  const struct fake_post *log;
  int i, n = fake_posts(&log);

  memset(again, 0, FAKE_FLIGHT_N * sizeof(*again));
  for (i = 0; i < n; i++) {
    uint32_t m = (MCP_IMM_SEQ(log[i].imm) - first) & 0xffffu; /* the immediate carries 16 bits */

    if (log[i].side == FAKE_SEND_SIDE && log[i].opcode == IBV_WR_RDMA_WRITE_WITH_IMM && m < FAKE_FLIGHT_N)
      again[m]++;
  }
}
