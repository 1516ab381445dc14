/*
 * test_xfer_prof.c - NCCL's profiler events for mcpnet's work requests (issue 37), on the
 * fake verbs: every work request a profiled call posts has its event, with NCCL's IB
 * descriptor (read here at the byte offsets of NCCL's net_ib_v1.h, not through our
 * struct), under the parent handle NCCL gave, stopped once its request completes, fails
 * or is closed; a call without a parent makes no callback at all; a comm whose starts no
 * profiler takes stops asking, and asks again later.
 *
 * Why: NCCL's example profiler decodes the descriptor as its IB transport fills it, keeps
 * at most 8 events per proxy step, and expects every event it was given to be stopped;
 * and NCCL's proxy passes a parent with every call whether a profiler listens or not.
 */
#include <stdlib.h>
#include <string.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "xfer/comm.h"
#include "net/net.h"

/* ---- The fake profiler: NCCL's callback as the example profiler answers it ---------- */

struct ev {
  void *parent;
  int64_t plugin;
  uint8_t type;
  int device, opcode, qp_num;
  uint64_t wr_id;
  size_t length;
  int stopped, matched;
};

#define MAX_EV 20000
static struct ev evs[MAX_EV];
static int nstarted, nstops, ncalls, bad_stops, taking = 1;

static ncclResult_t fake_prof(void **eh, int type, void *parent, int64_t plugin, void *data)
{
  const unsigned char *d = data;
  struct ev *e;

  ncalls++;
  if (type == 0) { /* start */
    if (!taking || nstarted == MAX_EV)
      return ncclSuccess; /* no profiler wants net events: the handle stays NULL */
    e = &evs[nstarted++];
    memset(e, 0, sizeof(*e));
    e->parent = parent;
    e->plugin = plugin;
    /* NCCL's ncclProfilerNetIbDescr_v1_t on LP64: u8 type @0, then {int device @8,
     * u64 wr_id @16, int opcode @24, int qpNum @28, size_t length @32}. */
    e->type = d[0];
    memcpy(&e->device, d + 8, 4);
    memcpy(&e->wr_id, d + 16, 8);
    memcpy(&e->opcode, d + 24, 4);
    memcpy(&e->qp_num, d + 28, 4);
    memcpy(&e->length, d + 32, 8);
    *eh = e;
  } else if (type == 1) { /* stop */
    e = *eh;
    if (e == NULL || e < evs || e >= evs + nstarted || e->stopped)
      bad_stops++;
    else
      e->stopped = 1;
    nstops++;
  }
  return ncclSuccess;
}

static void prof_reset(int take)
{
  nstarted = nstops = ncalls = bad_stops = 0;
  taking = take;
}

static uint64_t now_ns = 1000000000000ull;
static uint64_t test_clock(void) { return now_ns; }

/* Every send work request of side posted since the log's index from, each matched with an
 * event started since event index ev0 under parent, with the posted fields. Returns how
 * many posts had no such event, and leaves the events counted in *nev. */
static int unmatched(int side, int from, int ev0, void *parent, int *nev)
{
  const struct fake_post *log;
  int n = fake_posts(&log), i, j, missing = 0;

  *nev = 0;
  for (i = from; i < n; i++) {
    if (log[i].side != side)
      continue;
    for (j = ev0; j < nstarted; j++) {
      struct ev *e = &evs[j];
      if (!e->matched && e->parent == parent && e->wr_id == log[i].wr_id && e->opcode == (int)log[i].opcode &&
          e->length == log[i].len && (uint32_t)e->qp_num == log[i].qp_num)
        break;
    }
    if (j == nstarted) {
      fprintf(stderr, "  no event for the post of opcode %d, %u bytes, wr_id %#llx on QP %#x\n",
              log[i].opcode, log[i].len, (unsigned long long)log[i].wr_id, log[i].qp_num);
      missing++;
    } else {
      evs[j].matched = 1;
      ++*nev;
    }
  }
  return missing;
}

static int posts_now(void)
{
  const struct fake_post *log;

  return fake_posts(&log);
}

static int all_stopped(void)
{
  int i, n = 0;

  for (i = 0; i < nstarted; i++)
    n += evs[i].stopped;
  return n == nstarted && nstops == nstarted && bad_stops == 0;
}

static char rbuf[4 << 20], sbuf[4 << 20];

struct shape {
  const char *name;
  int nqps, ndevs, nrecv; /* QPs per member, members per side, buffers per receive */
  size_t size;
  int gpu; /* the receive buffer is GPU memory: NCCL flushes it */
};

/* One message (nrecv of them, grouped) of the shape with parent handles: the receive's
 * clear-to-send and the sends' writes each have their event with the fields posted, under
 * the call's parent; none is stopped before its request is done, all are after; a GPU
 * receive's flush has its reads' events under the receive's parent. */
static void run_shape(const struct shape *sh)
{
  struct fake_pair_opts o = {.nqps = sh->nqps, .max_inline = 256, .ndevs = {sh->ndevs, sh->ndevs}};
  struct fake_pair *p;
  void *rmh, *smh, *rreq = NULL, *sreq[8], *fl = NULL, *rdata[8], *rmhs[8], *rparent[8];
  size_t rsizes[8];
  int tags[8], parents[9], i, from, ev0, nev, sizes[8];
  int gpu_sizes[8];

  fake_verbs_install();
  p = fake_pair_make(&o);
  for (i = 0; i < sh->ndevs; i++) /* every member reaches GPU memory (a peer-memory module) */
    fake_pair_member_info(p, FAKE_RECV_SIDE, i)->ptr_support |= NCCL_PTR_CUDA;
  rmh = fake_pair_reg_mh(p, FAKE_RECV_SIDE, rbuf, sizeof(rbuf), sh->gpu ? NCCL_PTR_CUDA : NCCL_PTR_HOST);
  smh = fake_pair_reg_mh(p, FAKE_SEND_SIDE, sbuf, sizeof(sbuf), NCCL_PTR_HOST);
  CHECK(rmh != NULL && smh != NULL);
  prof_reset(1);
  for (i = 0; i < sh->nrecv; i++) {
    rdata[i] = rbuf + (size_t)i * sh->size;
    rsizes[i] = sh->size;
    tags[i] = 10 + i;
    rmhs[i] = rmh;
    rparent[i] = &parents[1 + i];
  }
  fake_posts_reset();
  CHECK_EQ_INT(mcp_net_irecv_ph(p->recv, sh->nrecv, rdata, rsizes, tags, rmhs, rparent, &rreq), ncclSuccess);
  CHECK(rreq != NULL);
  /* The receive's clear-to-send, under its first element's parent. */
  CHECK_EQ_INT(unmatched(FAKE_RECV_SIDE, 0, 0, rparent[0], &nev), 0);
  CHECK_EQ_INT(nev, sh->ndevs > 1 ? 2 : 1);
  CHECK_EQ_INT(nstarted, nev);
  fake_progress();
  for (i = 0; i < sh->nrecv; i++) {
    from = posts_now();
    ev0 = nstarted;
    sreq[i] = NULL;
    CHECK_EQ_INT(
      mcp_net_isend_ph(p->send, sbuf + (size_t)i * sh->size, sh->size, 10 + i, smh, &parents[0], &sreq[i]),
      ncclSuccess);
    CHECK(sreq[i] != NULL);
    CHECK_EQ_INT(unmatched(FAKE_SEND_SIDE, from, ev0, &parents[0], &nev), 0);
    CHECK(nev >= 1);
    CHECK_EQ_INT(nstarted - ev0, nev); /* no event for work that was not posted */
  }
  for (i = 0; i < nstarted; i++)
    CHECK(evs[i].plugin == ((1 << 16) | 1) && evs[i].type == 1 && evs[i].device >= 0 &&
          evs[i].device < sh->ndevs && !evs[i].stopped);
  for (i = 0; i < sh->nrecv; i++)
    CHECK_EQ_INT(fake_wait_done(sreq[i], NULL, 1000), 1);
  CHECK_EQ_INT(fake_wait_done(rreq, sizes, 1000), 1);
  CHECK(all_stopped());
  if (sh->gpu) {
    /* NCCL flushes the GPU receive it just completed: the reads' events are its. */
    for (i = 0; i < sh->nrecv; i++)
      gpu_sizes[i] = (int)sh->size;
    from = posts_now();
    ev0 = nstarted;
    CHECK_EQ_INT(mcp_net_iflush(p->recv, sh->nrecv, rdata, gpu_sizes, rmhs, &fl), ncclSuccess);
    CHECK(fl != NULL);
    CHECK_EQ_INT(unmatched(FAKE_RECV_SIDE, from, ev0, rparent[0], &nev), 0);
    CHECK_EQ_INT(nev, sh->ndevs); /* a read through every member */
    CHECK_EQ_INT(fake_wait_done(fl, NULL, 1000), 1);
    CHECK(all_stopped());
  }
  printf("  %s: %d events, all stopped\n", sh->name, nstarted);
  fake_pair_dereg_mh(p, FAKE_RECV_SIDE, rmh);
  fake_pair_dereg_mh(p, FAKE_SEND_SIDE, smh);
  fake_pair_free(p);
}

static void test_every_work_request_has_its_event(void)
{
  static const struct shape shapes[] = {
    {"8 B, one QP", 1, 1, 1, 8, 0},
    {"4 KiB, one QP", 1, 1, 1, 4096, 0},
    {"1 MiB over 4 QPs", 4, 1, 1, 1 << 20, 0},
    {"grouped receive of 3", 2, 1, 3, 4096, 0},
    {"fused, 2 members", 1, 2, 1, 256 << 10, 0},
    {"GPU receive, flushed", 1, 1, 1, 4096, 1},
    {"fused GPU receive, flushed", 1, 2, 1, 4096, 1},
  };
  size_t i;

  for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
    run_shape(&shapes[i]);
}

/* A pair of one QP with host buffers registered (rmh, smh). */
static struct fake_pair *pair(void **rmh, void **smh)
{
  struct fake_pair_opts o = {.nqps = 1, .max_inline = 256};
  struct fake_pair *p;

  fake_verbs_install();
  p = fake_pair_make(&o);
  *rmh = fake_pair_reg_mh(p, FAKE_RECV_SIDE, rbuf, sizeof(rbuf), NCCL_PTR_HOST);
  *smh = fake_pair_reg_mh(p, FAKE_SEND_SIDE, sbuf, sizeof(sbuf), NCCL_PTR_HOST);
  return p;
}

static void unpair(struct fake_pair *p, void *rmh, void *smh)
{
  fake_pair_dereg_mh(p, FAKE_RECV_SIDE, rmh);
  fake_pair_dereg_mh(p, FAKE_SEND_SIDE, smh);
  fake_pair_free(p);
}

/* One message of 64 bytes, the calls given parent (NULL: the plain calls, as a table
 * without profiler handles makes them) or the profiled ones with that parent. 0 when it
 * completed. */
static int message(struct fake_pair *p, void *rmh, void *smh, void *parent, int plain)
{
  void *data = rbuf, *mh = rmh, *rreq = NULL, *sreq = NULL, *parents[1] = {parent};
  size_t size = 4096;
  int tag = 1;

  if (plain ? mcp_net_irecv(p->recv, 1, &data, &size, &tag, &mh, &rreq) != ncclSuccess
            : mcp_net_irecv_ph(p->recv, 1, &data, &size, &tag, &mh, parent != NULL ? parents : NULL, &rreq) !=
          ncclSuccess)
    return -1;
  fake_progress();
  if (plain ? mcp_net_isend(p->send, sbuf, 64, 1, smh, &sreq) != ncclSuccess
            : mcp_net_isend_ph(p->send, sbuf, 64, 1, smh, parent, &sreq) != ncclSuccess)
    return -1;
  return rreq != NULL && sreq != NULL && fake_wait_done(sreq, NULL, 1000) == 1 &&
      fake_wait_done(rreq, NULL, 1000) == 1
    ? 0
    : -1;
}

/* Without a parent handle (the v8/v9 tables; v10 on when NCCL gives none) the callback is
 * never called. */
static void test_no_parent_no_callback(void)
{
  void *rmh, *smh;
  struct fake_pair *p = pair(&rmh, &smh);
  int i;

  prof_reset(1);
  for (i = 0; i < 10; i++) {
    CHECK_EQ_INT(message(p, rmh, smh, NULL, 1), 0);
    CHECK_EQ_INT(message(p, rmh, smh, NULL, 0), 0);
  }
  CHECK_EQ_INT(ncalls, 0);
  unpair(p, rmh, smh);
}

/* Both comms' liveness checks, as a caller that waits makes them. */
static void liveness(struct fake_pair *p)
{
  fake_comm_check_due(p->send);
  fake_comm_check_due(p->recv);
  CHECK_EQ_INT(mcp_xfer_check_alive(p->send), 0);
  CHECK_EQ_INT(mcp_xfer_check_alive(p->recv), 0);
}

/* NCCL's proxy gives a parent with every call, profiler or not; its callback then leaves
 * the handle NULL. After 16 starts no profiler took, a comm stops asking (its calls go
 * the plain way); its liveness check lets it ask again 10 s later, and a profiler that
 * turned net events on in between gets them. */
static void test_profiler_that_takes_nothing(void)
{
  void *rmh, *smh;
  struct fake_pair *p = pair(&rmh, &smh);
  int parent, i, calls;

  prof_reset(0);
  for (i = 0; i < 100; i++)
    CHECK_EQ_INT(message(p, rmh, smh, &parent, 0), 0);
  CHECK_EQ_INT(ncalls, 32); /* 16 per comm, then none */
  calls = ncalls;
  liveness(p); /* the retry is armed: 10 s from now */
  now_ns += 9000000000ull;
  liveness(p);
  for (i = 0; i < 100; i++)
    CHECK_EQ_INT(message(p, rmh, smh, &parent, 0), 0);
  CHECK_EQ_INT(ncalls, calls); /* not yet */
  taking = 1;                  /* the profiler's mask now has net events */
  now_ns += 2000000000ull;
  liveness(p);
  for (i = 0; i < 100; i++)
    CHECK_EQ_INT(message(p, rmh, smh, &parent, 0), 0);
  CHECK_EQ_INT(nstarted, 100 * 2); /* every message again: its clear-to-send and its write */
  CHECK(all_stopped());
  unpair(p, rmh, smh);
}

/* The comm fails under a profiled send (its QP breaks, no recovery): test reports the
 * error and the send's events are stopped; a profiled receive still outstanding when
 * the comm closes has its events stopped by the close. */
static void test_events_stop_on_failure_and_close(void)
{
  void *rmh, *smh, *data = rbuf, *mh, *rreq = NULL, *sreq = NULL, *parents[1];
  struct fake_pair *p = pair(&rmh, &smh);
  size_t size = 4096;
  int parent, tag = 1, done = 0;

  prof_reset(1);
  parents[0] = &parent;
  mh = rmh;
  (mcp_param_process())->recovery_timeout_s = 0;
  fake_pair_configure(p); /* the pair exists: its comms take the change */
  CHECK_EQ_INT(mcp_net_irecv_ph(p->recv, 1, &data, &size, &tag, &mh, parents, &rreq), ncclSuccess);
  fake_progress();
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 1);
  CHECK_EQ_INT(mcp_net_isend_ph(p->send, sbuf, 4096, 1, smh, &parent, &sreq), ncclSuccess);
  CHECK(sreq != NULL && nstarted == 2);
  fake_pair_break(p, FAKE_SEND_SIDE, 0, 0);
  fake_pair_hold(p, FAKE_SEND_SIDE, 0, 0);
  /* The failed write waits a moment for the peer's own verdict (its FIN), then fails. */
  CHECK_EQ_INT(mcp_net_test(sreq, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 0);
  now_ns += 1000000000ull;
  fake_comm_check_due(p->send);
  CHECK(mcp_net_test(sreq, &done, NULL) != ncclSuccess);
  CHECK(evs[1].stopped && !evs[0].stopped);
  unpair(p, rmh, smh); /* the receive was never tested again */
  CHECK(all_stopped());
}

int main(void)
{
  mcp_log_set_logger(mcp_test_log_quiet);
  mcp_clock_test_set(test_clock);
  mcp_xfer_prof_set(fake_prof);
  RUN_TEST(test_every_work_request_has_its_event);
  RUN_TEST(test_no_parent_no_callback);
  RUN_TEST(test_profiler_that_takes_nothing);
  RUN_TEST(test_events_stop_on_failure_and_close);
  mcp_xfer_prof_set(NULL);
  return TEST_EXIT();
}
