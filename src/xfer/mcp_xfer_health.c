/*
 * mcp_xfer_health.c - what a comm says when it is in trouble.
 *
 * A failed work completion alone ("transport retry counter exceeded") does not tell an
 * unreachable peer from a lossy path or a bad buffer. So each comm snapshots its port's
 * error counters when its queue pairs are connected (on the setup thread, off NCCL's),
 * and the first failed completion reads them again: the WARN names the port state, the
 * counters that moved since, the likely cause and what to try (fabric_counters.h).
 *
 * The watchdog reports a comm whose waiting calls made no progress for
 * MCPNET_WATCHDOG_SEC: once per stall, saying who waits for what (a send whose
 * receive buffer the peer never advertised, data written but not acknowledged, a
 * receive advertised but never filled). It never fails the comm, owns no thread and
 * no timer: the data path only counts progress (one increment per post or polled
 * batch); the 100 ms liveness check, which already runs only while a caller waits,
 * compares that count and reads the clock. The same diagnosis, as a kind
 * (mcp_xfer_wait_describe), is what mcpnet-top shows of a waiting comm.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "xfer/comm.h"

#define SYSFS_ROOT mcp_verbs_sysfs_root() /* the loaded verbs library's view */
/* A comm nobody waited on for this long was idle, not stalled: its clock restarts. */
#define WD_IDLE_GAP_NS 2000000000ull

/* "rxe0 port 1 ACTIVE (LinkUp)": member m's port. */
static void port_text(const struct mcp_link_dev *m, const struct mcp_cnt_snapshot *s, int ok, char *buf,
                      size_t len)
{
  const struct mcp_net_dev *d = m->dc->info;

  if (!ok || s->state_name[0] == '\0')
    snprintf(buf, len, "%s port %d (state unreadable)", d->ibdev, d->port);
  else
    snprintf(buf, len, "%s port %d %s%s%s%s", d->ibdev, d->port, s->state_name,
             s->phys_state_name[0] ? " (" : "", s->phys_state_name, s->phys_state_name[0] ? ")" : "");
}

/* The counters of member m's port that moved since connect, or why there are none to show. */
static void counters_text(const struct mcp_link_dev *m, const struct mcp_cnt_snapshot *now, int now_ok,
                          struct mcp_cnt_diff *d, char *buf, size_t len)
{
  if (!m->cnt_base_ok || !now_ok) {
    d->n = 0;
    d->kinds = 0;
    snprintf(buf, len, "not readable from %s/class/infiniband", SYSFS_ROOT);
    return;
  }
  mcp_cnt_diff(m->cnt_base, now, d);
  mcp_cnt_format(d, buf, len);
}

enum mcp_cnt_cause mcp_xfer_wc_diagnose(struct mcp_comm *c, const struct mcp_link_dev *m, int wc_status,
                                        char *buf, size_t len)
{
  const struct mcp_net_dev *dev = m->dc->info;
  struct mcp_cnt_snapshot now; /* 4 KiB: the error path runs on NCCL's thread, not the setup one */
  struct mcp_cnt_diff d;
  char port[128], moved[768];
  enum mcp_cnt_cause cause;
  int ok = mcp_cnt_snapshot_read(SYSFS_ROOT, dev->ibdev, dev->port, dev->driver, &now) == 0;

  memset(&d, 0, sizeof(d));
  port_text(m, &now, ok, port, sizeof(port));
  counters_text(m, &now, ok, &d, moved, sizeof(moved));
  cause = mcp_cnt_classify(&d, wc_status, ok ? now.state : 0);
  snprintf(buf, len, "%s; %s error counters since the comm connected: %s; likely cause: %s: %s. Try: %s",
           port, ok ? now.table : "port", moved, mcp_cnt_cause_name(cause), mcp_cnt_cause_why(cause),
           mcp_cnt_cause_try(cause));
  return cause;
}

static int seq_before(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }

/* Appends "; " and the formatted text to buf at *used. */
static void part(char *buf, size_t len, size_t *used, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
static void part(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (*used + 1 >= len)
    return;
  if (*used > 0) {
    n = snprintf(buf + *used, len - *used, "; ");
    *used += n > 0 ? (size_t)n : 0;
    if (*used >= len) {
      *used = len - 1;
      return;
    }
  }
  va_start(ap, fmt);
  n = vsnprintf(buf + *used, len - *used, fmt, ap);
  va_end(ap);
  *used += n > 0 ? (size_t)n : 0;
  if (*used >= len)
    *used = len - 1;
}

/* The first thing a description names is what the comm waits for (mcpnet-top's kind). */
static void wait_is(struct mcp_xfer_wait *w, unsigned kind, uint32_t seq, int count)
{
  if (w->kind != MCP_WAIT_NONE)
    return;
  w->kind = kind;
  w->seq = seq;
  w->count = count;
}

static void describe_send(const struct mcp_comm *c, struct mcp_xfer_wait *w, char *buf, size_t len,
                          size_t *used)
{
  const struct mcp_request *oldest = NULL;
  const struct mcp_cts_elem *e = c->ring_elems[c->seq % MCP_SLOTS].e;
  const struct mcp_send_slot *ss = &c->sslots[c->seq % MCP_SLOTS];
  int written = 0, i, n, arrived = 0;

  for (i = 0; i < c->nreqs; i++) {
    const struct mcp_request *r = &c->reqs[i];
    if (!r->in_use || r->done || r->kind != MCP_REQ_SEND)
      continue;
    written++;
    if (oldest == NULL || seq_before(r->seq, oldest->seq))
      oldest = r;
  }
  if (written > 0) {
    wait_is(w, MCP_WAIT_ACK, oldest->seq, written);
    part(buf, len, used,
         "%d send(s) written but not acknowledged by the peer's adapter (oldest seq %u, "
         "%d write(s) of it unacknowledged): the data left, no ACK came back",
         written, oldest->seq, oldest->pending);
  }
  if (__atomic_load_n(&e[0].seq, __ATOMIC_ACQUIRE) != c->seq) {
    wait_is(w, MCP_WAIT_CTS, c->seq, 1);
    part(buf, len, used,
         "the send of seq %u waits for its receive buffer, which was never advertised by "
         "the peer (no clear-to-send): the peer has not posted the matching irecv",
         c->seq);
    return;
  }
  n = e[0].n >= 1 && e[0].n <= MCP_MAX_RECVS ? e[0].n : 1;
  for (i = 0; i < n; i++)
    arrived += __atomic_load_n(&e[i].seq, __ATOMIC_ACQUIRE) == c->seq;
  if (arrived < n) {
    wait_is(w, MCP_WAIT_CTS, c->seq, n - arrived);
    part(buf, len, used, "the clear-to-send of seq %u arrived for %d of its %d buffers", c->seq, arrived, n);
  } else if (ss->seq == c->seq && ss->matched > 0) {
    wait_is(w, MCP_WAIT_GROUP, c->seq, n - ss->matched);
    part(buf, len, used,
         "the grouped receive of seq %u has %d of its %d buffers sent; the others wait "
         "for isend with their tags",
         c->seq, ss->matched, n);
  }
  if (arrived == n && c->tag_refused_seq == c->seq) {
    char tags[MCP_MAX_RECVS * 20] = "";
    size_t t = 0;
    for (i = 0; i < n && t < sizeof(tags); i++)
      t += (size_t)snprintf(tags + t, sizeof(tags) - t, "%s%d%s", i ? "," : "", e[i].tag,
                            n > 1 && ss->seq == c->seq && ss->used[i] ? "(sent)" : "");
    wait_is(w, MCP_WAIT_TAG, c->seq, 1);
    part(buf, len, used,
         "isend with tag %d finds no free buffer for its tag in the oldest receive "
         "(seq %u, tags %s): it is retried until the sends of that receive's other tags arrive",
         c->tag_refused, c->seq, tags);
  } else if (written == 0) {
    wait_is(w, MCP_WAIT_ISEND, c->seq, 1);
    part(buf, len, used, "the peer advertised its receive buffer for seq %u, but no isend took it", c->seq);
  }
}

static void describe_recv(const struct mcp_comm *c, struct mcp_xfer_wait *w, char *buf, size_t len,
                          size_t *used)
{
  const struct mcp_recv_slot *oldest = NULL;
  int advertised = 0, flushes = 0, i;

  for (i = 0; i < MCP_SLOTS; i++) {
    const struct mcp_recv_slot *rs = &c->rslots[i];
    if (rs->req == NULL)
      continue;
    advertised++;
    if (oldest == NULL || seq_before(rs->seq, oldest->seq))
      oldest = rs;
  }
  for (i = 0; i < c->nreqs; i++)
    flushes += c->reqs[i].in_use && !c->reqs[i].done && c->reqs[i].kind == MCP_REQ_FLUSH;
  if (advertised > 0) {
    wait_is(w, oldest->got == 0 ? MCP_WAIT_DATA : MCP_WAIT_PARTIAL, oldest->seq, advertised);
    if (oldest->got == 0)
      part(buf, len, used,
           "%d receive(s) advertised to the peer but no data arrived (oldest seq %u, "
           "%d buffer(s)): the peer has not sent to them",
           advertised, oldest->seq, oldest->req->n);
    else
      part(buf, len, used,
           "%d receive(s) advertised to the peer; the oldest (seq %u) got %d of its %d "
           "writes: the rest never arrived",
           advertised, oldest->seq, oldest->got, oldest->expected);
  }
  if (c->inflight == MCP_RECV_INFLIGHT) {
    wait_is(w, MCP_WAIT_TEST, c->seq, c->inflight);
    part(buf, len, used, "irecv cannot advertise seq %u: %d receives are in flight, the most a comm keeps",
         c->seq, MCP_RECV_INFLIGHT);
  } else if (c->rslots[c->seq % MCP_SLOTS].req != NULL) {
    wait_is(w, MCP_WAIT_TEST, c->seq, c->inflight);
    part(buf, len, used, "irecv cannot advertise seq %u: its slot still waits for the data of seq %u", c->seq,
         c->seq - MCP_SLOTS);
  }
  if (flushes > 0) {
    wait_is(w, MCP_WAIT_FLUSH, c->seq, flushes);
    part(buf, len, used, "%d flush read(s) not completed by the local adapter", flushes);
  }
}

size_t mcp_xfer_wait_describe(const struct mcp_comm *c, struct mcp_xfer_wait *w, char *buf, size_t len)
{
  size_t used = 0;

  w->kind = MCP_WAIT_NONE;
  w->seq = 0;
  w->count = 0;
  if (len == 0)
    return 0;
  buf[0] = '\0';
  if (c->link.kind == MCP_COMM_SEND)
    describe_send(c, w, buf, len, &used);
  else
    describe_recv(c, w, buf, len, &used);
  if (used == 0)
    part(buf, len, &used, "nothing is in flight on this comm");
  return used;
}

size_t mcp_xfer_watchdog_describe(const struct mcp_comm *c, char *buf, size_t len)
{
  struct mcp_xfer_wait w;

  return mcp_xfer_wait_describe(c, &w, buf, len);
}

int mcp_xfer_watchdog(struct mcp_comm *c, uint64_t now_ns, int seconds)
{
  /* A stall is the comm's, not one QP's: named by member 0, and on a fused comm by
   * every other member too, each with its own port's counters. */
  const struct mcp_link_dev *wd_dev = mcp_link_dev_of(&c->link, 0);
  char what[768], extra[900] = "", fused[200] = "";
  uint64_t stalled;
  int k;

  /* The stall is measured even when nothing is reported (MCPNET_WATCHDOG_SEC=0): mcpnet-top
   * reads its start (mcp_xfer_status.c). */
  if (c->wd_progress != c->wd_seen || now_ns - c->wd_last_ns > WD_IDLE_GAP_NS) {
    c->wd_seen = c->wd_progress;
    c->wd_since_ns = now_ns;
    c->wd_warned = 0;
    c->wd_last_ns = now_ns;
    return 0;
  }
  c->wd_last_ns = now_ns;
  stalled = now_ns - c->wd_since_ns;
  if (seconds <= 0 || c->wd_warned || stalled < (uint64_t)seconds * 1000000000ull)
    return 0;
  c->wd_warned = 1;
  mcp_xfer_watchdog_describe(c, what, sizeof(what));
  /* Unacknowledged data: the port's counters tell a lossy path from a silent peer. */
  for (k = 1; k < c->link.ndevs; k++) {
    size_t used = strlen(fused);

    snprintf(fused + used, sizeof(fused) - used, "%s%s port %d%s", k == 1 ? " (fused with " : ", ",
             c->link.devs[k].dc->info->ibdev, c->link.devs[k].dc->info->port,
             k + 1 == c->link.ndevs ? ")" : "");
  }
  if (strstr(what, "not acknowledged") != NULL) {
    size_t used;

    snprintf(extra, sizeof(extra), " Port error counters since the comm connected:");
    for (k = 0; k < c->link.ndevs; k++) {
      const struct mcp_link_dev *m = &c->link.devs[k];
      const struct mcp_net_dev *dev = m->dc->info;
      struct mcp_cnt_snapshot now;
      struct mcp_cnt_diff d;
      char moved[700];
      int ok = mcp_cnt_snapshot_read(SYSFS_ROOT, dev->ibdev, dev->port, dev->driver, &now) == 0;

      counters_text(m, &now, ok, &d, moved, sizeof(moved));
      used = strlen(extra);
      if (c->link.ndevs == 1)
        snprintf(extra + used, sizeof(extra) - used, " %s.", moved);
      else
        snprintf(extra + used, sizeof(extra) - used, " %s port %d: %s%s", dev->ibdev, dev->port, moved,
                 k + 1 == c->link.ndevs ? "." : ";");
    }
  }
  MCP_WARN("watchdog: %s %s on %s port %d%s: no progress for %" PRIu64 " s (MCPNET_WATCHDOG_SEC=%d): %s.%s "
           "The comm stays open; this is reported once per stall",
           c->link.kind == MCP_COMM_SEND ? "send to" : "receive from", c->link.peer_name,
           wd_dev->dc->info->ibdev, wd_dev->dc->info->port, fused, (uint64_t)(stalled / 1000000000ull),
           seconds, what, extra);
  return 1;
}
