/*
 * mcp_xfer_poll.c - completions and test().
 *
 * test() of a receive advertised for landing first looks at its slot's landing line
 * (struct mcp_landing). Otherwise it polls the comm's completion queue in batches and
 * turns work completions into finished requests: a send when all its signalled writes are acknowledged, a receive
 * when all the immediates of its slot have arrived (the size being the sum of the
 * writes, or the sizes record of a grouped receive), a flush when its read returns.
 * Receive WRs consumed by immediates are reposted in batches. Every 100 ms a waiting
 * comm also looks at the out-of-band connection, which is how a dead peer process is
 * noticed even when the RDMA side would only time out much later, and lets the
 * watchdog see whether it is still making progress (mcp_xfer_health.c).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "xfer/comm.h"

#define ALIVE_CHECK_NS 100000000ull

/* Whether a caller that waits on this comm waits on the peer: on a send comm it always
 * does (for a clear-to-send or a write's acknowledgement); on a receive comm while a
 * receive's data has not all arrived. A flush reads our own memory through a loopback
 * QP: it needs nothing from the peer. */
static int waits_on_peer(const struct mcp_comm *c)
{
  int i;

  if (c->link.kind == MCP_COMM_SEND)
    return 1;
  for (i = 0; i < c->nreqs; i++)
    if (c->reqs[i].in_use && !c->reqs[i].done && c->reqs[i].kind != MCP_REQ_FLUSH)
      return 1;
  return 0;
}

int mcp_xfer_check_alive(struct mcp_comm *c)
{
  uint64_t now = mcp_clock_coarse_ns();
  int rc;

  if (c->link.rec.phase == MCP_REC_VERDICT) /* a failed completion's verdict decides, at once */
    return (rc = mcp_recover_progress(&c->link)) < 0 ? rc : 0;
  if (now < c->next_alive_check_ns)
    return 0;
  c->next_alive_check_ns = now + ALIVE_CHECK_NS;
  mcp_oob_poll(100);
  /* Only callers that wait get here. A peer that exits or closes right after its last
   * receive leaves completions in our queue behind its FIN or CLOSE: take them all, and
   * when that finished anything, let the caller look again before the peer's going
   * counts as lost work (the next check, 100 ms on, decides). */
  if (mcp_oob_stream_gone(c->link.stream)) {
    int n, got = 0;
    while ((n = mcp_xfer_poll(c)) > 0)
      got += n;
    if (c->link.error != 0)
      return c->link.error;
    if (got > 0)
      return 0;
  }
  if (mcp_oob_stream_dead(c->link.stream)) {
    mcp_comm_fail(&c->link, MCP_ERR_REMOTE, "%s %s: %s",
                  c->link.kind == MCP_COMM_SEND ? "send to" : "receive from", c->link.peer_name,
                  mcp_oob_stream_dead_reason(c->link.stream));
    return c->link.error;
  }
  if (mcp_oob_stream_closed_by_peer(c->link.stream)) {
    if (!waits_on_peer(c)) {
      /* Only flush reads are left, local work the peer's close does not touch. The
       * link to the peer is not needed again, so nothing on it starts a recovery; the
       * flush QP's own retry, bounded by MCPNET_RECOVERY_TIMEOUT, covers its port. */
      mcp_xfer_watchdog(c, now, c->link.cfg.watchdog_s);
      return 0;
    }
    mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                  "%s %s: the peer closed its end of this connection with work "
                  "still pending here",
                  c->link.kind == MCP_COMM_SEND ? "send to" : "receive from", c->link.peer_name);
    return c->link.error;
  }
  /* A peer that lost the RDMA path asks for a recovery on the stream; the device's
   * async events may ask for one too (a port that went down, a QP error, a GID moved). */
  mcp_recover_poll_stream(&c->link);
  if (c->link.error == 0)
    mcp_recover_check_events(&c->link);
  if (c->link.error != 0)
    return c->link.error;
  mcp_xfer_watchdog(c, now, c->link.cfg.watchdog_s);
  mcp_xfer_status_check(c, now);
  mcp_xfer_prof_tick(c, now);
  return 0;
}

/* What buffer i of the receive in slot was posted with: the clear-to-send's own copy,
 * which only this side writes. */
static inline uint64_t posted_size(const struct mcp_comm *c, int slot, int i)
{
  return c->staging[slot].e[i].size;
}

/* The peer says it wrote more than the buffer holds (or its NIC did): a protocol
 * violation, never a size NCCL is told. */
static __attribute__((noinline, cold)) void recv_too_big(struct mcp_comm *c, uint32_t seq, int i,
                                                         uint64_t size, uint64_t posted)
{
  mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                "receive from %s: %llu bytes arrived for buffer %d of seq %u, posted for %llu "
                "(protocol error)",
                c->link.peer_name, (unsigned long long)size, i, seq, (unsigned long long)posted);
}

static __attribute__((noinline, cold)) void immediate_bad_count(struct mcp_comm *c, uint32_t imm, int slot)
{
  mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                "receive from %s: data for seq %u at slot %d announces %u writes on a connection of %d QPs "
                "(protocol error)",
                c->link.peer_name, MCP_IMM_SEQ(imm), slot, MCP_IMM_K(imm), c->link.nqps);
}

/* A grouped receive's sizes come from the record the sender wrote into our ring; a
 * striped one's size is the sum of its writes. Out of line: a receive of one write,
 * almost every small message, completes in on_immediate without it. */
static __attribute__((noinline)) void complete_recv(struct mcp_comm *c, struct mcp_recv_slot *rs, int slot,
                                                    int record)
{
  struct mcp_request *r = rs->req;
  int i;

  if (record) {
    const struct mcp_record *rec = &c->ring_records[slot];
    if (rec->seq != rs->seq || (int)rec->n != r->n) {
      mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                    "receive from %s: the sizes record of seq %u says seq %u, "
                    "%u buffers (protocol error)",
                    c->link.peer_name, rs->seq, rec->seq, rec->n);
      return;
    }
    /* The peer wrote these sizes into our ring: none may exceed what its buffer holds. */
    for (i = 0; i < r->n; i++) {
      uint32_t size = rec->sizes[i];

      if (size > posted_size(c, slot, i)) {
        recv_too_big(c, rs->seq, i, size, posted_size(c, slot, i));
        return;
      }
      r->sizes[i] = (int)size;
    }
  } else {
    if (rs->bytes > posted_size(c, slot, 0)) {
      recv_too_big(c, rs->seq, 0, rs->bytes, posted_size(c, slot, 0));
      return;
    }
    r->sizes[0] = (int)rs->bytes;
  }
  rs->req = NULL;
  r->done = 1;
}

/* Consumed receive WRs go back once per MCP_CQ_BATCH immediates of a QP (not while a
 * recovery drains: the QP is gone). < 0: the comm failed. */
static __attribute__((noinline)) int repost_recvs(struct mcp_comm *c, int qp)
{
  if (c->link.qp[qp] == NULL)
    return 0;
  if (mcp_qp_post_recvs(&c->link, qp, c->link.recv_consumed[qp]) != 0) {
    mcp_comm_fail(&c->link, MCP_ERR_SYSTEM, "%s: reposting receive WRs failed",
                  mcp_link_dev_of(&c->link, qp)->dc->info->name);
    return MCP_ERR_SYSTEM;
  }
  c->link.recv_consumed[qp] = 0;
  return 0;
}

static __attribute__((noinline, cold)) void immediate_mismatch(struct mcp_comm *c, uint32_t imm, int slot)
{
  const struct mcp_recv_slot *rs = &c->rslots[slot];

  mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                "receive from %s: data for seq %u (low bits) arrived at slot "
                "%d, which waits for %u (protocol error)",
                c->link.peer_name, MCP_IMM_SEQ(imm), slot, rs->req ? rs->seq : 0);
}

static inline __attribute__((always_inline)) void on_immediate(struct mcp_comm *c, const struct ibv_wc *wc)
{
  uint32_t imm = ntohl(wc->imm_data);
  int qp = (int)MCP_WR_IDX(wc->wr_id);
  int slot = (int)(MCP_IMM_SEQ(imm) % MCP_SLOTS);
  struct mcp_recv_slot *rs = &c->rslots[slot];
  struct mcp_request *r;

  if (__builtin_expect(++c->link.recv_consumed[qp] >= MCP_CQ_BATCH, 0) && repost_recvs(c, qp) != 0)
    return;
  r = rs->req;
  if (__builtin_expect(r == NULL || (rs->seq & 0xffffu) != MCP_IMM_SEQ(imm), 0)) {
    immediate_mismatch(c, imm, slot);
    return;
  }
  /* The only write of its receive (one completion expected, no record, none counted
   * yet): complete now, with what the counts below would find, without keeping them. */
  if (__builtin_expect((imm >> 16) == 1 && rs->got == 0, 1)) {
    if (__builtin_expect(wc->byte_len > posted_size(c, slot, 0), 0)) {
      recv_too_big(c, rs->seq, 0, wc->byte_len, posted_size(c, slot, 0));
      return;
    }
    r->sizes[0] = (int)wc->byte_len;
    rs->req = NULL;
    r->done = 1;
    return;
  }
  if (MCP_IMM_K(imm) < 1 || (int)MCP_IMM_K(imm) > c->link.nqps) {
    immediate_bad_count(c, imm, slot);
    return;
  }
  rs->expected = (int)MCP_IMM_K(imm);
  rs->got++;
  rs->bytes += wc->byte_len;
  if (rs->got == rs->expected)
    complete_recv(c, rs, slot, (int)MCP_IMM_REC(imm));
}

/* The first failed completion fails the comm (later ones find c->link.error set: one WARN per
 * comm), then a second WARN gives the port's side of the story: its state, the error
 * counters that moved since the comm connected, the likely cause and what to try. With
 * peer_gone, the peer's process is known to have gone: that is the cause. */
void mcp_xfer_fail_wc(struct mcp_comm *c, const struct ibv_wc *wc, int peer_gone)
{
  const char *dir = c->link.kind == MCP_COMM_SEND ? "send to" : "receive from";
  const struct mcp_link_dev *m = mcp_link_dev_of_qpn(&c->link, wc->qp_num);
  enum mcp_cnt_cause cause;
  char diag[1600];

  if (c->link.error != 0)
    return;
  if (peer_gone) {
    mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                  "%s %s: %s; its adapter refused the work in flight (%s on QP %#x, "
                  "seq %u)",
                  dir, c->link.peer_name,
                  mcp_oob_stream_dead(c->link.stream) ? mcp_oob_stream_dead_reason(c->link.stream)
                                                      : "the peer closed this connection",
                  mcp_ibv.wc_status_str(wc->status), wc->qp_num, c->seq);
    return;
  }
  cause = mcp_xfer_wc_diagnose(c, m, wc->status, diag, sizeof(diag));
  if (c->link.cfg.abort_on_error) /* the failure below aborts: say it first */
    MCP_WARN("%s %s: %s", dir, c->link.peer_name, diag);
  mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                "%s %s: work completion error %s (%d), vendor error %#x, on QP %#x "
                "(%s, seq %u); local %s port %d GID %d %s, timeout %d retry %d; likely cause: %s",
                dir, c->link.peer_name, mcp_ibv.wc_status_str(wc->status), wc->status, wc->vendor_err,
                wc->qp_num, mcp_wr_kind_name(MCP_WR_KIND(wc->wr_id)), c->seq, m->dc->info->name,
                m->dc->info->port, m->dc->info->gid.index, m->dc->info->gid.text, c->link.cfg.ib_timeout,
                c->link.cfg.ib_retry_cnt, mcp_cnt_cause_name(cause));
  MCP_WARN("%s %s: %s", dir, c->link.peer_name, diag);
}

static void on_error(struct mcp_comm *c, const struct ibv_wc *wc)
{
  if (c->link.error != 0 || c->link.rec.phase == MCP_REC_VERDICT)
    return;
  if (mcp_recover_status_recoverable(wc->status) && c->link.cfg.recovery_timeout_s > 0 &&
      !mcp_oob_stream_gone(c->link.stream)) {
    const struct mcp_link_dev *m = mcp_link_dev_of_qpn(&c->link, wc->qp_num);
    char why[256];

    if (c->link.rec.phase != MCP_REC_NONE && c->link.rec.phase != MCP_REC_CONNECTING &&
        c->link.rec.phase != MCP_REC_WAIT_READY)
      return;
    snprintf(why, sizeof(why), "work completion error %s (%d) on QP %#x (%s), local %s port %d",
             mcp_ibv.wc_status_str(wc->status), wc->status, wc->qp_num,
             mcp_wr_kind_name(MCP_WR_KIND(wc->wr_id)), m->dc->info->name, m->dc->info->port);
    mcp_recover_start(&c->link, why);
    return;
  }
  /* A peer process that dies with writes in flight has its adapter refuse them (its QPs
   * and registrations are gone) moments before its TCP FIN arrives here. The out-of-band
   * channel gets up to 200 ms to tell "peer gone" from a real fault, without a wait on
   * NCCL's thread: the verdict comes from the calls that follow (mcp_recover_progress). */
  if (wc->status == IBV_WC_REM_ACCESS_ERR || wc->status == IBV_WC_REM_INV_REQ_ERR ||
      wc->status == IBV_WC_REM_OP_ERR || mcp_recover_status_recoverable(wc->status)) {
    mcp_oob_progress();
    if (mcp_oob_stream_gone(c->link.stream))
      mcp_xfer_fail_wc(c, wc, 1);
    else
      mcp_recover_await_verdict(&c->link, wc);
    return;
  }
  mcp_xfer_fail_wc(c, wc, 0);
}

/* A flush read's completion. The loopback QP is not part of the link to the peer, so
 * recovery does not rebuild it: a read its port failed is posted again on a new one. */
static void on_flush(struct mcp_comm *c, const struct ibv_wc *wc)
{
  struct mcp_request *r = &c->reqs[MCP_WR_IDX(wc->wr_id)];

  if (MCP_WR_EPOCH(wc->wr_id) != c->flush_gen || !r->in_use || r->kind != MCP_REQ_FLUSH || r->repost)
    return; /* from a flush QP that was replaced: the read was posted again */
  if (wc->status == IBV_WC_SUCCESS) {
    if (--r->pending > 0)
      return; /* a fused comm reads through every member */
    r->done = 1;
    if (c->flush_reposts == 0)
      c->flush_lost_ns = 0; /* the new flush QP works */
    return;
  }
  if (mcp_recover_status_recoverable(wc->status) && c->link.cfg.recovery_timeout_s > 0) {
    mcp_xfer_flush_lost(c, mcp_clock_coarse_ns());
    return;
  }
  on_error(c, wc);
}

/* Every completion the fast test of poll_dev does not take: another comm's, a flush
 * read, an old epoch's, a failure, a group's record, a clear-to-send write. */
static __attribute__((noinline)) void on_other(struct mcp_comm *c, const struct ibv_wc *w)
{
  struct mcp_request *r;

  if (MCP_WR_COMM(w->wr_id) != c->link.id)
    return; /* not this comm's: only possible once comms share a completion queue */
  if (MCP_WR_KIND(w->wr_id) == MCP_WR_FLUSH) {
    on_flush(c, w);
    return;
  }
  if (MCP_WR_EPOCH(w->wr_id) != c->link.epoch)
    return; /* from QPs a recovery replaced: their work is replayed */
  if (w->status != IBV_WC_SUCCESS) {
    on_error(c, w);
    return;
  }
  switch (MCP_WR_KIND(w->wr_id)) {
  case MCP_WR_SEND:
    r = &c->reqs[MCP_WR_IDX(w->wr_id)];
    if (--r->pending == 0)
      r->done = 1;
    break;
  case MCP_WR_GROUP:
    for (r = &c->reqs[MCP_WR_IDX(w->wr_id)]; r != NULL;
         r = r->group_next >= 0 ? &c->reqs[r->group_next] : NULL) {
      r->pending = 0;
      r->done = 1;
    }
    break;
  case MCP_WR_RECV: on_immediate(c, w); break;
  default: break; /* signalled clear-to-send writes only free send-queue space */
  }
}

/* One batch from member m's CQ. Inlined into the poll of every member, which test
 * inlines too: one call less per test that finds work done. The two completions of
 * every message (a receive's immediate, a send's write) are told from the rest by one
 * compare of wr_id's upper half (kind, epoch, comm) and the status; the rest go
 * through on_other, in the order the CQ gave them. */
static inline __attribute__((always_inline)) int poll_dev(struct mcp_comm *c, struct mcp_link_dev *m)
{
  struct ibv_wc wc[MCP_CQ_BATCH];
  uint32_t self = (uint32_t)(c->link.wr_self >> 32);
  int n, i;

  n = ibv_poll_cq(m->cq, MCP_CQ_BATCH, wc);
  if (n < 0) {
    mcp_comm_fail(&c->link, MCP_ERR_SYSTEM, "%s: ibv_poll_cq failed (%d)", m->dc->info->name, n);
    return MCP_ERR_SYSTEM;
  }
  c->wd_progress += (uint64_t)n;
  for (i = 0; i < n; i++) {
    const struct ibv_wc *w = &wc[i];
    uint32_t hi = (uint32_t)(w->wr_id >> 32);

    if (__builtin_expect(w->status == IBV_WC_SUCCESS, 1)) {
      if (hi == ((uint32_t)MCP_WR_RECV << 24 | self)) {
        on_immediate(c, w);
        continue;
      }
      if (hi == ((uint32_t)MCP_WR_SEND << 24 | self)) {
        struct mcp_request *r = &c->reqs[MCP_WR_IDX(w->wr_id)];
        if (--r->pending == 0)
          r->done = 1;
        continue;
      }
    }
    on_other(c, w);
  }
  return n;
}

/* A batch from every member's CQ; the completions found in all, or a negative errno. */
static inline __attribute__((always_inline)) int poll_all(struct mcp_comm *c)
{
  int k, n, total;

  if (c->link.ndevs == 1) /* one device: no loop */
    return poll_dev(c, &c->link.devs[0]);
  for (k = 0, total = 0; k < c->link.ndevs; k++) {
    n = poll_dev(c, &c->link.devs[k]);
    if (n < 0)
      return n;
    total += n;
  }
  return total;
}

int mcp_xfer_poll(struct mcp_comm *c) { return poll_all(c); }

/* test() on something that is not a request in flight: a request NCCL's profiler
 * follows (mcp_xfer_prof.c), or a caller's bug, said once here. */
static __attribute__((noinline, cold)) int test_bad_request(void *request, int *done, int *sizes)
{
  struct mcp_request *r = request;

  if (r != NULL && r->kind == MCP_REQ_PROF && ((struct mcp_prof_req *)request)->inner != NULL)
    return mcp_xfer_prof_test(r, done, sizes);
  MCP_WARN("test on %p: not a request of mcpnet that is in flight", request);
  return MCP_ERR_ARG;
}

/* After the poll, for a request it did not finish: flush retry and liveness. Also
 * test_progress's tail; out of line, since a working comm's test rarely needs it. */
static __attribute__((noinline)) int test_waiting(struct mcp_comm *c, struct mcp_request *r)
{
  if (!r->done && c->link.error == 0 && c->flush_lost_ns != 0)
    mcp_xfer_flush_retry(c, mcp_clock_coarse_ns());
  if (!r->done && c->link.error == 0)
    mcp_xfer_check_alive(c);
  if (!r->done && c->link.error != 0)
    return c->link.error;
  return 0;
}

/* The request is not done yet and a recovery ended in this call (mcp_xfer_gate): poll,
 * flush retry and liveness, in that order. */
static __attribute__((noinline)) int test_progress(struct mcp_comm *c, struct mcp_request *r)
{
  if (c->link.error == 0)
    poll_all(c);
  return test_waiting(c, r);
}

static __attribute__((noinline, cold)) void land_bad(struct mcp_comm *c, const struct mcp_request *r,
                                                     uint32_t size)
{
  mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                "receive from %s: a landing of %u bytes for seq %u, larger than the %d the receive "
                "takes that way (protocol error)",
                c->link.peer_name, size, r->seq, r->size);
}

/* A receive advertised for landing: done when its line's trailer carries its seq (the
 * sender's one write put the data there first), the data then copied to the user's host
 * buffer. Every MCP_CQ_BATCH such receives the CQ is polled, which the clear-to-send
 * writes' completions need (their send queue frees no space until they are polled). */
static inline __attribute__((always_inline)) int land_arrived(struct mcp_comm *c, struct mcp_request *r)
{
  int slot = (int)(r->seq % MCP_SLOTS);
  const struct mcp_landing *ld = mcp_landing_of(c->ring_records, slot);
  uint32_t size;

  if (!mcp_landing_arrived(ld, r->seq))
    return 0;
  size = ld->size;
  if (__builtin_expect(size > (uint32_t)r->size, 0)) {
    land_bad(c, r, size);
    return 0;
  }
  if (size > 0)
    memcpy(r->data, ld->data + MCP_LAND_TRAILER - size, size);
  r->sizes[0] = (int)size;
  c->rslots[slot].req = NULL;
  r->done = 1;
  c->wd_progress++;
  if (__builtin_expect(++c->land_unpolled >= MCP_CQ_BATCH, 0)) {
    c->land_unpolled = 0;
    if (c->link.rec.phase == MCP_REC_NONE && c->link.error == 0)
      mcp_xfer_poll(c);
  }
  return 1;
}

/* The request is not done: past the gate (a failed comm's error; a recovery still
 * under way: not done yet, the replay is still to come) a working comm polls, one whose
 * recovery just ended goes through test_progress. Inline in test_not_done: a send's test
 * that polls makes one call into the plugin's code, not two. */
static inline __attribute__((always_inline)) int test_poll(struct mcp_comm *c, struct mcp_request *r)
{
  int rc = mcp_xfer_gate(c, MCP_GATE_TEST);

  if (__builtin_expect(rc == MCP_GATE_OPEN, 1)) {
    poll_all(c);
    if (!r->done && r->land) /* it may have landed meanwhile */
      land_arrived(c, r);
    return r->done ? 0 : test_waiting(c, r);
  }
  return rc == MCP_GATE_REOPENED ? test_progress(c, r) : rc;
}

/* A done request: its sizes to NCCL, and back to the pool. */
static inline __attribute__((always_inline)) int test_finish(struct mcp_request *r, int *done, int *sizes)
{
  struct mcp_comm *c = r->comm;
  int i;

  *done = 1;
  if (r->kind == MCP_REQ_RECV) {
    uint64_t bytes = (uint64_t)r->sizes[0];

    if (sizes != NULL)
      sizes[0] = r->sizes[0];
    for (i = 1; i < r->n; i++) {
      if (sizes != NULL)
        sizes[i] = r->sizes[i];
      bytes += (uint64_t)r->sizes[i];
    }
    c->inflight--;
    mcp_status_done(c->cnt, bytes);
  } else if (r->kind == MCP_REQ_SEND) {
    if (sizes != NULL)
      sizes[0] = r->size;
    mcp_status_done(c->cnt, (uint64_t)r->size);
  }
  mcp_req_put(r);
  return 0;
}

/* The request was not done at the call: a landing, else the poll. Out of line, so that
 * test of a request already done (polled by an earlier call) needs no frame at all. */
static __attribute__((noinline)) int test_not_done(struct mcp_request *r, int *done, int *sizes)
{
  struct mcp_comm *c = r->comm;
  int rc;

  if (!(r->land && land_arrived(c, r))) {
    rc = test_poll(c, r);
    if (rc != 0 || !r->done) {
      *done = 0;
      return rc;
    }
  }
  return test_finish(r, done, sizes);
}

int mcp_xfer_test(void *request, int *done, int *sizes)
{
  struct mcp_request *r = request;

  if (__builtin_expect(r == NULL || !r->in_use, 0)) {
    *done = 0;
    return test_bad_request(request, done, sizes);
  }
  if (!r->done)
    return test_not_done(r, done, sizes);
  return test_finish(r, done, sizes);
}
