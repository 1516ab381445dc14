/*
 * mcp_conn_recover.c - surviving a transient loss of the RDMA path.
 *
 * A link that goes down for a few seconds moves the connection's QPs to the error
 * state (the host that lost its link sees IBV_WC_LOC_QP_OP_ERR, its peer
 * IBV_WC_RETRY_EXC_ERR, both then IBV_WC_WR_FLUSH_ERR), but the peer process is alive
 * and its out-of-band TCP connection rides out the outage. Instead of failing the
 * comm, each end re-creates its QPs and the two resume:
 *
 *   either end, on a recoverable completion error or the peer's RECOVER:
 *     bump the epoch (completions of the old QPs are dropped from now on),
 *     destroy and re-create the QPs, repost receive WRs, reset partial slots,
 *     send RECOVER {round, new QPs, GID, the slots this receiver completed}
 *   on the peer's RECOVER of the same round:
 *     on the setup thread: look our GID up again by address among the entries that
 *     are ours (the rule discovery used), then RTR/RTS toward the new QPs,
 *     send RECOVER {round, READY}
 *   on our RTS and the peer's READY:
 *     receiver: rewrite the clear-to-send of every slot still waiting;
 *     sender: complete the sends the receiver reports done, write the others again.
 *
 * The replay is exact because a receive slot is reused only after its data landed
 * (docs/architecture.md, section 11): the sender's CTS ring still holds the
 * destination of every incomplete receive, rewriting a message rewrites the same bytes
 * into a buffer NCCL has not been given back, and the receiver counts a slot's
 * completions from zero again. NCCL sees isend/irecv return no request and test report
 * "not yet" while this runs; it gives up after MCPNET_RECOVERY_TIMEOUT seconds with
 * the cause in the message. A dead peer process (its connection closed) is never
 * recovered from.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "fabric/devctx.h"
#include "fabric/fabric_sysfs.h"
#include "conn/link.h"

#define RETRY_NS 100000000ull /* frames and events are read every tenth of it */

static uint64_t mono_ns(void) { return mcp_clock_ns(); }

static const char *dir_words(const struct mcp_link *c)
{
  return c->kind == MCP_COMM_SEND ? "send to" : "receive from";
}

/* The statuses of a path that broke, as opposed to a bug or a protection error. */
int mcp_recover_status_recoverable(int wc_status)
{
  switch (wc_status) {
  case IBV_WC_RETRY_EXC_ERR: /* the peer never acknowledged: path lost */
  case IBV_WC_LOC_QP_OP_ERR: /* rxe on the host whose link went down */
  case IBV_WC_WR_FLUSH_ERR:  /* the work queued behind either */
  case IBV_WC_RNR_RETRY_EXC_ERR: /* the peer's receive queue stayed empty */ return 1;
  default: return 0;
  }
}

/* The link's members whose port is not ACTIVE now, as "; not active here: rxe1 port 1
 * DOWN": on a fused link the failure then names the physical port that kept it down.
 * Empty when every port is up (the trouble is the peer's or the path's). */
static void members_not_active(const struct mcp_link *c, char *out, size_t len)
{
  size_t used = 0;
  int k;

  out[0] = '\0';
  for (k = 0; k < c->ndevs; k++) {
    const struct mcp_net_dev *d = c->devs[k].dc->info;
    const struct mcp_sysfs_port *p;
    struct mcp_sysfs_dev sys;
    char err[256];
    int w;

    memset(&sys, 0, sizeof(sys));
    if (mcp_sysfs_dev_read(mcp_verbs_sysfs_root(), d->ibdev, &sys, err, sizeof(err)) != 0 ||
        (p = mcp_sysfs_port_find(&sys, d->port)) == NULL || p->state == IBV_PORT_ACTIVE)
      continue;
    w = snprintf(out + used, len - used, "%s%s port %d %s", used == 0 ? "; not active here: " : ", ",
                 d->ibdev, d->port, p->state_name[0] ? p->state_name : "(state unreadable)");
    if (w < 0 || (size_t)w >= len - used)
      return;
    used += (size_t)w;
  }
}

static void rec_fail(struct mcp_link *c, const char *what)
{
  const struct mcp_link_cfg *cfg = &c->cfg;
  double spent = (double)(mono_ns() - c->rec.start_ns) / 1e9;
  char down[256];

  c->rec.phase = MCP_REC_NONE;
  members_not_active(c, down, sizeof(down));
  mcp_comm_fail(c, MCP_ERR_REMOTE,
                "%s %s: recovery from \"%s\" failed after %.1f s (round %u, "
                "MCPNET_RECOVERY_TIMEOUT=%d): %s%s",
                dir_words(c), c->peer_name, c->rec.cause, spent, c->rec.round, cfg->recovery_timeout_s, what,
                down);
}

/* The rebuild thread has destroyed the old QPs and built new ones: count what the old
 * ones completed, move to a new epoch, and take the new QPs. */
static int adopt_qps(struct mcp_link *c)
{
  int i, rc;

  /* The destroyed QPs add nothing more to the CQ. What they completed successfully
   * still counts: a receive whose data landed was acknowledged, so its sender may have
   * finished with it and will not write it again. Errors are ignored (phase is set).
   * qp[] is all NULL meanwhile, so no receive WR is reposted on the way. */
  while (c->error == 0 && c->ops->poll(c) > 0)
    ;
  if (c->error != 0)
    return c->error;
  mcp_link_set_epoch(c, (uint8_t)(c->epoch + 1));
  for (i = 0; i < c->nqps; i++) {
    c->recv_posted[i] = 0;
    c->recv_consumed[i] = 0;
  }
  mcp_qp_rebuild_take(c);
  if (c->kind == MCP_COMM_RECV) {
    for (i = 0; i < c->nqps; i++)
      if ((rc = mcp_qp_post_recvs(c, i, MCP_RQ_DEPTH)) != 0)
        return rc;
  }
  c->ops->qps_replaced(c);
  return 0;
}

static int send_recover(struct mcp_link *c, uint32_t step)
{
  struct mcp_wire_msg m;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_RECOVER;
  m.u.recover.round = c->rec.round;
  m.u.recover.step = step;
  m.u.recover.next_seq = c->ops->next_seq(c);
  if (c->kind == MCP_COMM_RECV)
    c->ops->done_table(c, m.u.recover.done);
  mcp_comm_fill_endpoint(c);
  m.u.recover.ep = c->local;
  m.u.recover.up = c->up;
  m.u.recover.live = c->live;
  return mcp_oob_stream_send(c->stream, &m);
}

/* Starts round `round` (the peer's, when it asked first). */
static void begin_round(struct mcp_link *c, uint32_t round, const char *cause)
{
  const struct mcp_link_cfg *cfg = &c->cfg;
  uint64_t now = mono_ns();

  if (c->rec.phase == MCP_REC_NONE) {
    c->rec.live_before = c->live;
    c->rec.remote_live_before = c->remote_live;
    c->rec.start_ns = now;
    c->rec.deadline_ns = now + (uint64_t)cfg->recovery_timeout_s * 1000000000ull;
    snprintf(c->rec.cause, sizeof(c->rec.cause), "%s", cause);
    mcp_link_status_recovering(c);
    MCP_WARN("%s %s: %s; re-creating the connection's %d QP(s) (round %u, giving up after %d s)",
             dir_words(c), c->peer_name, cause, c->nqps, round, cfg->recovery_timeout_s);
  } else {
    MCP_INFO(NCCL_NET, "%s %s: recovery round %u: %s", dir_words(c), c->peer_name, round, cause);
  }
  /* The rebuild of an earlier round is still destroying its QPs (a port down holds the
   * driver's drain): this round goes on from there and sends its QPs when it is done. */
  if (c->rec.phase == MCP_REC_REBUILD) {
    c->rec.round = round;
    c->rec.peer_ready = 0;
    c->rec.peer.round = 0;
    return;
  }
  /* A setup thread of an earlier round may still be inside ibv_modify_qp, resolving a
   * neighbour behind a link that is down: never wait for it. It takes the QPs it walks
   * along and destroys them when it returns; this round builds new ones. A GID lookup
   * awaited (after an event, or for a GID that had not come back) is moot now: the round
   * looks again. */
  if (c->rec.gid_probe || c->rec.gid_missing) {
    c->rec.gid_probe = 0;
    mcp_qp_connect_abandon(c);
  } else if (mcp_qp_connect_abandon(c))
    MCP_INFO(NCCL_NET,
             "%s %s: round %u: the QP setup of the previous round is still running; it "
             "finishes in the background",
             dir_words(c), c->peer_name, round);
  c->rec.round = round;
  c->rec.gid_missing = 0;
  c->rec.peer_ready = 0;
  c->rec.peer.round = 0;
  c->rec.phase = MCP_REC_REBUILD;
  if (mcp_qp_rebuild_start(c) != 0)
    rec_fail(c, "cannot start a thread for the QP setup");
}

/* REBUILD: once the thread is done, the new QPs go to the peer in RECOVER. */
static int rebuilt(struct mcp_link *c)
{
  int st = mcp_qp_rebuild_poll(c);

  if (st == 0)
    return 0;
  if (st < 0 || adopt_qps(c) != 0) {
    rec_fail(c, "the QPs could not be re-created");
    return c->error;
  }
  c->rec.phase = MCP_REC_WAIT_PEER;
  if (send_recover(c, MCP_WIRE_RECOVER_QPS) != 0) {
    rec_fail(c, "the RECOVER frame could not be queued on the out-of-band connection");
    return c->error;
  }
  return 0;
}

void mcp_recover_start(struct mcp_link *c, const char *cause)
{
  if (c->error != 0)
    return;
  if (c->rec.phase != MCP_REC_NONE && c->rec.phase != MCP_REC_WAIT_READY &&
      c->rec.phase != MCP_REC_CONNECTING) {
    return; /* old QPs' errors while we already wait for the peer */
  }
  begin_round(c, c->rec.round + 1, cause);
}

/* Frames of the peer about recovery; others do not travel on a connected stream. */
static void on_frame(struct mcp_link *c, const struct mcp_wire_msg *m)
{
  const struct mcp_wire_recover *r = &m->u.recover;

  if (m->type != MCP_WIRE_RECOVER) {
    MCP_INFO(NCCL_NET, "%s %s: unexpected %s frame on a connected stream; ignored", dir_words(c),
             c->peer_name, mcp_wire_type_name(m->type));
    return;
  }
  if (r->round < c->rec.round || (r->round == c->rec.round && c->rec.phase == MCP_REC_NONE))
    return; /* a round both ends already finished */
  if (r->step == MCP_WIRE_RECOVER_QPS && (r->ep.ndevs > 1 ? r->ep.ndevs : 1) != c->remote_ndevs) {
    /* Its members are its device's, fixed at setup: another count is not this link. */
    mcp_comm_fail(c, MCP_ERR_REMOTE,
                  "%s %s: recovery round %u refused: member count mismatch (the peer's new QPs are on "
                  "a device of %u member(s); the connection was set up with %d)",
                  dir_words(c), c->peer_name, r->round, r->ep.ndevs > 1 ? r->ep.ndevs : 1, c->remote_ndevs);
    return;
  }
  /* What the peer found up is what the rounds from now on place QPs by (mcp_link_masks). */
  if (r->step == MCP_WIRE_RECOVER_QPS)
    c->remote_up = r->up;
  if (r->round > c->rec.round || c->rec.phase == MCP_REC_NONE) {
    if (r->step != MCP_WIRE_RECOVER_QPS)
      return; /* READY of a round we never saw the QPs of: cannot happen on one TCP stream */
    begin_round(c, r->round, "the peer lost the connection's RDMA path and re-created its QPs");
    if (c->error != 0)
      return;
  }
  if (r->step == MCP_WIRE_RECOVER_READY)
    c->rec.peer_ready = 1;
  else
    c->rec.peer = *r;
}

void mcp_recover_poll_stream(struct mcp_link *c)
{
  struct mcp_wire_msg m;

  while (c->error == 0 && mcp_oob_stream_recv(c->stream, &m))
    on_frame(c, &m);
}

/* Toward the peer's new QPs: our GIDs are looked up again and the QPs walked on the
 * setup thread; CONNECTING collects both (connected). */
static int connect_round(struct mcp_link *c)
{
  const struct mcp_wire_endpoint *ep = &c->rec.peer.ep;
  uint8_t live, rlive;
  int i, k;

  if (ep->nqps != c->nqps) {
    rec_fail(c, "the peer re-created a different number of QPs");
    return c->error;
  }
  /* Both ends placed their QPs by what they knew was up at the other (mcp_link_masks);
   * if either knew too little (both ports' news crossed), both see it here and place
   * again in a new round, now knowing each other's. */
  mcp_link_masks(c->ndevs, c->remote_ndevs, c->up, c->rec.peer.up, &live, &rlive);
  if (live != c->live || rlive != c->rec.peer.live) {
    begin_round(c, c->rec.round + 1, "the members carrying the connection change");
    return c->error;
  }
  c->remote_up = c->rec.peer.up;
  c->remote_live = c->rec.peer.live;
  mcp_link_place(c);
  c->remote.lid = ep->lid;
  memcpy(c->remote.gid, ep->gid, 16);
  /* A fused peer: each member's address, looked up again on its side too. */
  for (k = 1; k < c->remote.ndevs && k < ep->ndevs; k++) {
    c->remote.more[k - 1].lid = ep->more[k - 1].lid;
    memcpy(c->remote.more[k - 1].gid, ep->more[k - 1].gid, 16);
  }
  for (i = 0; i < c->nqps; i++)
    c->remote.qps[i] = ep->qps[i];
  if (mcp_qp_connect_start_gid(c) != 0) {
    rec_fail(c, "cannot start a thread for the QP setup");
    return c->error;
  }
  c->rec.phase = MCP_REC_CONNECTING;
  return 0;
}

/* Each member waits for its device's next GID lookup, one that begins after this. */
static void gid_ask(struct mcp_link *c)
{
  int k;

  for (k = 0; k < c->ndevs; k++)
    if (mcp_link_is_live(c, k))
      c->devs[k].gid_need = mcp_qp_gid_need(c, k);
}

/* Whether every member's awaited lookup has answered (index[k], negative: GID not there). */
static int gid_answered(struct mcp_link *c, int *index)
{
  int k;

  for (k = 0; k < c->ndevs; k++) {
    index[k] = c->devs[k].sgid_index; /* a member failover left out keeps its own */
    if (mcp_link_is_live(c, k) && mcp_qp_gid_poll(c, k, c->devs[k].gid_need, &index[k]) != 1)
      return 0; /* under way, or no thread now: the next call looks again */
  }
  return 1;
}

/* The setup thread's verdict: 0 not yet (or our GID is not back: WAIT_PEER waits for
 * the device's lookups to find it), 1 at RTS with the GID indices it found, < 0 the walk
 * failed. */
static int connected(struct mcp_link *c)
{
  const struct mcp_wire_endpoint *ep = &c->rec.peer.ep;
  int k, index[MCP_LINK_MAX_DEVS], st = mcp_qp_connect_poll_gid(c, index);

  if (st == MCP_QP_NO_GID) {
    /* The QPs stay at INIT, with the comm, until a lookup of the device (shared by its
     * comms: each reads the port's whole GID table) finds our GID again (gid_back). */
    gid_ask(c);
    for (k = 0; k < c->ndevs && !c->rec.gid_missing; k++) {
      const struct mcp_net_dev *d = c->devs[k].dc->info;

      if (index[k] < 0 && mcp_link_is_live(c, k))
        MCP_INFO(NCCL_NET,
                 "%s %s: round %u: our GID %s is not in the GID table of %s port %d (yet); "
                 "waiting for it, looked up again every 100 ms",
                 dir_words(c), c->peer_name, c->rec.round, d->gid.text, d->ibdev, d->port);
    }
    c->rec.gid_missing = 1;
    c->rec.phase = MCP_REC_WAIT_PEER;
    return 0;
  }
  if (st <= 0)
    return st;
  for (k = 0; k < c->ndevs; k++) {
    struct mcp_link_dev *m = &c->devs[k];

    if (index[k] != m->sgid_index)
      MCP_INFO(NCCL_NET, "%s %s: GID %s moved from index %d to %d", dir_words(c), c->peer_name,
               m->dc->info->gid.text, m->sgid_index, index[k]);
    m->sgid_index = index[k]; /* what the new QPs use, and the endpoint says */
  }
  c->rec.gid_missing = 0;
  MCP_INFO(NCCL_NET, "%s %s: round %u: QP %#x (PSN %#x) toward the peer's QP %#x (PSN %#x), GID index %d",
           dir_words(c), c->peer_name, c->rec.round, c->qp[0]->qp_num, c->psn[0], ep->qps[0].qpn,
           ep->qps[0].psn, mcp_link_dev_of(c, 0)->sgid_index);
  return 1;
}

/* WAIT_PEER after a lookup that did not find our GID: whether a lookup of the device
 * since then (one every 100 ms at most, shared by its comms) found it on every member. */
static int gid_back(struct mcp_link *c)
{
  int k, index[MCP_LINK_MAX_DEVS];

  if (!c->rec.gid_missing)
    return 1;
  if (!gid_answered(c, index))
    return 0;
  for (k = 0; k < c->ndevs; k++)
    if (index[k] < 0) {
      c->devs[k].gid_need = mcp_qp_gid_need(c, k); /* not yet: wait for its next one */
      return 0;
    }
  return 1;
}

/* A fused link's members after a round, for its WARN: "" while every member of both ends
 * carries QPs and did before; else which of ours carry them, which do not, and how many
 * of the peer's do. */
static void members_words(const struct mcp_link *c, char *out, size_t len)
{
  uint8_t all = mcp_link_members_all(c->ndevs), rall = mcp_link_members_all(c->remote_ndevs);
  size_t used;
  int k, w;

  out[0] = '\0';
  if (c->live == all && c->remote_live == rall) {
    if (c->rec.live_before != all || c->rec.remote_live_before != rall)
      snprintf(out, len, "; every member of both ends carries the connection again");
    return;
  }
  w = snprintf(out, len, "; carried by");
  for (k = 0, used = w > 0 ? (size_t)w : 0; k < c->ndevs && used < len; k++)
    if (mcp_link_is_live(c, k)) {
      w = snprintf(out + used, len - used, " %s", c->devs[k].dc->info->ibdev);
      used += w > 0 ? (size_t)w : 0;
    }
  for (k = 0; k < c->ndevs && used < len; k++)
    if (!mcp_link_is_live(c, k)) {
      w = snprintf(out + used, len - used, ", without %s port %d (%s)", c->devs[k].dc->info->ibdev,
                   c->devs[k].dc->info->port,
                   (c->up >> k) & 1 ? "left out as the peer's member is" : "port down");
      used += w > 0 ? (size_t)w : 0;
    }
  if (used < len)
    snprintf(out + used, len - used, ", and %d of the peer's %d member(s)",
             __builtin_popcount(c->remote_live), c->remote_ndevs);
}

static int finish_round(struct mcp_link *c)
{
  double spent = (double)(mono_ns() - c->rec.start_ns) / 1e9;
  char members[256];
  int rc;

  /* The QPs' members are final for this round: the layer above takes their keys first. */
  c->ops->members_moved(c);
  rc = c->ops->replay(c, c->rec.peer.done);
  if (rc != 0)
    return rc;
  c->rec.phase = MCP_REC_NONE;
  c->rec.count++;
  mcp_link_status_recovered(c);
  members_words(c, members, sizeof(members));
  MCP_WARN("%s %s: recovered from \"%s\" in %.2f s (round %u, recovery %d of this connection)%s",
           dir_words(c), c->peer_name, c->rec.cause, spent, c->rec.round, c->rec.count, members);
  return 1;
}

#define VERDICT_NS 200000000ull /* how long a failed completion waits for the peer's FIN */

void mcp_recover_await_verdict(struct mcp_link *c, const struct ibv_wc *wc)
{
  if (c->error != 0 || c->rec.phase == MCP_REC_VERDICT)
    return;
  c->rec.verdict_wc = *wc;
  c->rec.verdict_ns = mono_ns() + VERDICT_NS;
  c->rec.next_try_ns = 0;
  c->rec.phase = MCP_REC_VERDICT;
}

/* No recovery here: the comm fails either way, only the message is open. */
static int verdict(struct mcp_link *c)
{
  uint64_t now = mono_ns();
  int gone;

  if (now >= c->rec.next_try_ns) {
    c->rec.next_try_ns = now + RETRY_NS / 10;
    mcp_oob_progress();
  }
  gone = mcp_oob_stream_gone(c->stream);
  if (!gone && now < c->rec.verdict_ns)
    return 0;
  c->rec.phase = MCP_REC_NONE;
  c->ops->fail_wc(c, &c->rec.verdict_wc, gone);
  return c->error != 0 ? c->error : MCP_ERR_REMOTE;
}

int mcp_recover_progress(struct mcp_link *c)
{
  uint64_t now;
  int st, k;

  if (c->error != 0)
    return c->error;
  if (c->rec.phase == MCP_REC_NONE)
    return 1;
  if (c->rec.phase == MCP_REC_VERDICT)
    return verdict(c);
  if (mcp_oob_stream_dead(c->stream)) {
    rec_fail(c, mcp_oob_stream_dead_reason(c->stream));
    return c->error;
  }
  now = mono_ns();
  if (now >= c->rec.next_try_ns) {
    c->rec.next_try_ns = now + RETRY_NS / 10;
    /* ibv_destroy_qp returns only once the QP's async events are acknowledged: while the
     * rebuild thread destroys, read them (the liveness check that does otherwise waits
     * for the round), or a QP_FATAL a driver raised with the error holds the round. */
    for (k = 0; c->rec.phase == MCP_REC_REBUILD && k < c->ndevs; k++)
      mcp_devctx_poll_events(c->devs[k].dc);
    mcp_recover_poll_stream(c);
    if (c->error != 0)
      return c->error;
  }
  switch (c->rec.phase) {
  case MCP_REC_REBUILD:
    if (rebuilt(c) != 0)
      return c->error;
    break;
  case MCP_REC_WAIT_PEER:
    if (c->rec.peer.round == c->rec.round && gid_back(c) && connect_round(c) != 0)
      return c->error;
    break;
  case MCP_REC_CONNECTING:
    st = connected(c);
    if (st < 0) {
      /* The path may still be down (address resolution): a fresh round retries. */
      begin_round(c, c->rec.round + 1, c->rec.cause);
      break;
    }
    if (st > 0) {
      if (send_recover(c, MCP_WIRE_RECOVER_READY) != 0) {
        rec_fail(c, "the RECOVER frame could not be queued");
        return c->error;
      }
      c->rec.phase = MCP_REC_WAIT_READY;
    }
    break;
  case MCP_REC_WAIT_READY:
    if (c->rec.peer_ready)
      return finish_round(c);
    break;
  default: break;
  }
  if (c->error != 0)
    return c->error;
  if (c->rec.phase != MCP_REC_NONE && now >= c->rec.deadline_ns) {
    rec_fail(c,
             c->rec.phase == MCP_REC_REBUILD && c->rec.peer.round != c->rec.round
               ? "the peer never answered with its new QPs (its host or link is still down), and the old "
                 "QPs were still being destroyed (the driver drains their work in flight, which a "
                 "port that is down holds)"
               : c->rec.phase == MCP_REC_REBUILD
               ? "the old QPs were still being destroyed (the driver drains their work in flight, "
                 "which a port that is down holds)"
               : c->rec.phase == MCP_REC_WAIT_PEER && c->rec.peer.round != c->rec.round
               ? "the peer never answered with its new QPs (its host or link is still down)"
               : c->rec.phase == MCP_REC_WAIT_PEER || c->rec.gid_missing
               ? "this host's GID did not come back on its port"
               : c->rec.phase == MCP_REC_CONNECTING ? "the new QPs did not reach RTS"
                                                    : "the peer's QPs never became ready");
    return c->error;
  }
  return c->rec.phase == MCP_REC_NONE ? 1 : 0;
}

void mcp_comm_async_qp_event(void *comm, uint32_t qpn, int event_type)
{
  struct mcp_link *c = comm;

  (void)qpn;
  atomic_store(&c->qp_event, event_type + 1);
}

/* A GID change event on a member's port: whether our GID left its index takes a lookup
 * (netlink, sysfs) that begins after the event, on a setup thread, shared by the
 * device's comms (mcp_qp_gid_poll); a later check collects the answer and starts a round
 * if it moved. Events during a round are moot: the round looks again. */
static void gid_events(struct mcp_link *c)
{
  unsigned gen[MCP_LINK_MAX_DEVS];
  int index[MCP_LINK_MAX_DEVS], k, changed = 0;
  char cause[256];

  for (k = 0; k < c->ndevs; k++) {
    gen[k] = atomic_load(&c->devs[k].dc->gid_gen);
    changed |= gen[k] != c->devs[k].gid_seen;
  }
  if (changed) {
    if (c->rec.phase == MCP_REC_NONE) {
      gid_ask(c);
      c->rec.gid_probe = 1;
    }
    for (k = 0; k < c->ndevs; k++)
      c->devs[k].gid_seen = gen[k];
  }
  if (!c->rec.gid_probe || !gid_answered(c, index))
    return;
  c->rec.gid_probe = 0;
  for (k = 0; k < c->ndevs; k++) {
    const struct mcp_link_dev *m = &c->devs[k];

    if (index[k] != m->sgid_index) {
      snprintf(cause, sizeof(cause), "GID %s is no longer at index %d of %s port %d (GID change event)",
               m->dc->info->gid.text, m->sgid_index, m->dc->info->ibdev, m->dc->info->port);
      mcp_recover_start(c, cause);
      return;
    }
  }
}

void mcp_recover_check_events(struct mcp_link *c)
{
  unsigned gen;
  int ev, k;
  char cause[256];

  /* Every member's device and port: the messages name the physical one. */
  for (k = 0; k < c->ndevs; k++) {
    struct mcp_link_dev *m = &c->devs[k];

    mcp_devctx_poll_events(m->dc);
    if (atomic_load(&m->dc->fatal)) {
      mcp_comm_fail(c, MCP_ERR_SYSTEM, "%s %s: %s reported a fatal device error; the adapter needs a reset",
                    dir_words(c), c->peer_name, m->dc->info->ibdev);
      return;
    }
  }
  if (c->cfg.recovery_timeout_s <= 0)
    return; /* without recovery, completions with errors decide */
  for (k = 0; k < c->ndevs; k++) {
    struct mcp_link_dev *m = &c->devs[k];

    /* A member failover left out is taken again once its port is back (port recovery):
     * a round places the QPs on it if the port is still active then. */
    gen = atomic_load(&m->dc->port_up_gen);
    if (gen != m->port_up_seen) {
      m->port_up_seen = gen;
      if (!((c->up >> k) & 1) && c->cfg.ib_port_recovery && c->rec.phase == MCP_REC_NONE) {
        snprintf(cause, sizeof(cause), "%s port %d is active again (port event); taking the member back",
                 m->dc->info->ibdev, m->dc->info->port);
        mcp_recover_start(c, cause);
        return;
      }
    }
    gen = atomic_load(&m->dc->port_err_gen);
    if (gen != m->port_err_seen) {
      m->port_err_seen = gen;
      if (c->rec.phase == MCP_REC_NONE && mcp_link_is_live(c, k)) {
        snprintf(cause, sizeof(cause), "%s port %d went down (port error event)", m->dc->info->ibdev,
                 m->dc->info->port);
        mcp_recover_start(c, cause);
        return;
      }
    }
  }
  ev = atomic_exchange(&c->qp_event, 0);
  if (ev != 0 && c->rec.phase == MCP_REC_NONE) {
    snprintf(cause, sizeof(cause), "async event \"%s\" on one of the connection's QPs",
             mcp_ibv.event_type_str != NULL ? mcp_ibv.event_type_str((enum ibv_event_type)(ev - 1))
                                            : "QP error");
    mcp_recover_start(c, cause);
    return;
  }
  gid_events(c);
}
