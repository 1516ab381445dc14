/*
 * top_graph.c - what mcpnet-top concludes, with no I/O: each comm's activity and its
 * sentence, a node's verdict, and across nodes the roots of the wait-for graph.
 *
 * A comm waits on its peer (a send for a clear-to-send, a receive for data, a connect
 * for the accept) or on something of its own (its link, a flush, the other tags of a PXN
 * group, its process's tests). Waiting on the peer is an edge to the peer's process,
 * found by the (host, pid) its HELLO proved and the stream ids both ends published; a
 * process that is itself blocked passes the wait on through its own waiting comms. A
 * chain ends at a root: a stopped process, a process that posts nothing on the comm its
 * peer waits on, a link that does not acknowledge, a failed comm, a wait inside one
 * process, a peer nobody reported, or a cycle. Unit tests drive this file with synthetic
 * views (test/unit/test_top_graph.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top.h"

#define FRESH_CHECK_S 2.0 /* a process waiting on a comm checks it every 0.1 s */

const char *top_activity_name(int a)
{
  static const char *const names[] = {
    [TOP_IDLE] = "idle",         [TOP_MOVING] = "moving",    [TOP_WAITING] = "waiting",
    [TOP_UNTESTED] = "untested", [TOP_SETUP] = "connecting", [TOP_RECOVERING] = "recovering",
    [TOP_FAILED] = "failed",
  };

  return a >= 0 && a <= TOP_FAILED ? names[a] : "unknown";
}

static int outstanding(const struct top_comm *c)
{
  return c->posted >= c->done ? (int)(c->posted - c->done) : 0;
}

void top_classify(struct top_view *v, double stall_s)
{
  for (int i = 0; i < v->nproc; i++) {
    struct top_proc *p = &v->proc[i];

    for (int k = 0; k < p->ncomm; k++) {
      struct top_comm *c = &p->comm[k];
      int fresh = c->check_age_s >= 0 && c->check_age_s <= FRESH_CHECK_S;

      c->waited_s = 0;
      switch (c->state) {
      case MCP_STATUS_FAILED: c->activity = TOP_FAILED; break;
      case MCP_STATUS_RECOVERING:
        c->activity = TOP_RECOVERING;
        c->waited_s = c->state_s;
        break;
      case MCP_STATUS_CONNECTING:
      case MCP_STATUS_WAIT_ACCEPT:
      case MCP_STATUS_WAIT_CONNECT:
        c->activity = TOP_SETUP;
        c->waited_s = c->state_s;
        break;
      default:
        if (c->moved)
          c->activity = TOP_MOVING;
        else if (fresh && p->stopped != 1) {
          /* A fresh check means a call waits on this comm right now, with work posted or
           * not: an isend that finds no clear-to-send has none outstanding. */
          c->activity = c->stall_s >= stall_s ? TOP_WAITING : TOP_MOVING;
          c->waited_s = c->stall_s;
        } else if (outstanding(c) == 0)
          c->activity = TOP_IDLE;
        else {
          /* Work posted and no call that waits on it: nothing says for how long beyond the
           * last check (or, without one, the time mcpnet-top watched). */
          c->activity = TOP_UNTESTED;
          c->waited_s = c->check_age_s > v->sample_s ? c->check_age_s : v->sample_s;
        }
      }
    }
  }
  /* What counts as a wait: a comm that makes no progress for the threshold, one that
   * failed or is recovering, a setup the peer leaves waiting, work nobody tests. */
  for (int i = 0; i < v->nproc; i++)
    for (int k = 0; k < v->proc[i].ncomm; k++) {
      struct top_comm *c = &v->proc[i].comm[k];

      c->waits = c->activity == TOP_WAITING || c->activity == TOP_FAILED || c->activity == TOP_RECOVERING ||
        ((c->activity == TOP_SETUP || c->activity == TOP_UNTESTED) &&
         (c->waited_s >= stall_s || v->proc[i].stopped == 1));
    }
}

void top_proc_name(const struct top_proc *p, char *buf, size_t len)
{
  if (p->rank >= 0 && p->local_rank >= 0)
    snprintf(buf, len, "rank %d (pid %u, local rank %d)", p->rank, p->pid, p->local_rank);
  else if (p->rank >= 0)
    snprintf(buf, len, "rank %d (pid %u)", p->rank, p->pid);
  else if (p->local_rank >= 0)
    snprintf(buf, len, "pid %u (local rank %d)", p->pid, p->local_rank);
  else
    snprintf(buf, len, "pid %u", p->pid);
}

static void peer_name(const struct top_comm *c, char *buf, size_t len)
{
  if (c->peer_host[0] != '\0' && c->peer_pid != 0)
    snprintf(buf, len, "%s pid %u (%s)", c->peer_host, c->peer_pid, c->peer_addr[0] ? c->peer_addr : "?");
  else
    snprintf(buf, len, "%s", c->peer_addr[0] ? c->peer_addr : "a peer not known yet");
}

void top_comm_name(const struct top_comm *c, char *buf, size_t len)
{
  char peer[200];

  peer_name(c, peer, sizeof(peer));
  snprintf(buf, len, "%s comm %s %s", c->kind == 1 ? "send" : "recv", c->kind == 1 ? "to" : "from", peer);
}

/* "94 s", "12 min 3 s", "2 h 5 min". */
static void duration(double s, char *buf, size_t len)
{
  long t = s < 0 ? 0 : (long)(s + 0.5);

  if (t < 120)
    snprintf(buf, len, "%ld s", t);
  else if (t < 7200)
    snprintf(buf, len, "%ld min %ld s", t / 60, t % 60);
  else
    snprintf(buf, len, "%ld h %ld min", t / 3600, (t % 3600) / 60);
}

static void bytes_text(uint64_t b, char *buf, size_t len)
{
  if (b >= (1ull << 30))
    snprintf(buf, len, "%.1f GiB", (double)b / (double)(1ull << 30));
  else if (b >= (1ull << 20))
    snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ull << 20));
  else if (b >= 1024)
    snprintf(buf, len, "%.1f KiB", (double)b / 1024.0);
  else
    snprintf(buf, len, "%llu B", (unsigned long long)b);
}

void top_comm_says(const struct top_comm *c, char *buf, size_t len)
{
  char d[32], d2[32], b[32];
  size_t n;

  duration(c->waited_s, d, sizeof(d));
  bytes_text(c->bytes, b, sizeof(b));
  switch (c->activity) {
  case TOP_IDLE:
    snprintf(buf, len, "is idle with nothing posted (%llu message(s), %s so far)",
             (unsigned long long)c->done, b);
    break;
  case TOP_MOVING:
    snprintf(buf, len, "is moving: %d request(s) in flight, %llu done, %s", outstanding(c),
             (unsigned long long)c->done, b);
    break;
  case TOP_WAITING:
    n = (size_t)snprintf(buf, len, "has waited %s for %s", d, mcp_status_wait_name((unsigned)c->wait));
    if (n < len && c->wait != MCP_WAIT_NONE)
      n += (size_t)snprintf(buf + n, len - n, " (seq %u)", c->wait_seq);
    if (n < len && c->wait_text[0] != '\0')
      n += (size_t)snprintf(buf + n, len - n, ": %s", c->wait_text);
    if (n < len && c->idle_done_s >= 0) {
      duration(c->idle_done_s, d2, sizeof(d2));
      snprintf(buf + n, len - n, "; %d request(s) outstanding, none completed for %s", outstanding(c), d2);
    } else if (n < len)
      snprintf(buf + n, len - n, "; %d request(s) outstanding", outstanding(c));
    break;
  case TOP_UNTESTED:
    snprintf(
      buf, len,
      "has %d request(s) posted that its process does not test (no call that waits on them for at least "
      "%s)",
      outstanding(c), d);
    break;
  case TOP_SETUP:
    if (c->state == MCP_STATUS_WAIT_ACCEPT)
      snprintf(buf, len,
               "has waited %s for the peer's accept: its host holds the connection, its process has not "
               "accepted",
               d);
    else if (c->state == MCP_STATUS_WAIT_CONNECT)
      snprintf(buf, len, "has waited %s for the peer's connect to finish (no READY from it)", d);
    else
      snprintf(buf, len, "has been connecting for %s", d);
    break;
  case TOP_RECOVERING:
    snprintf(buf, len, "has been recovering for %s after: %s", d,
             c->cause[0] ? c->cause : "(no cause given)");
    break;
  default:
    duration(c->state_s, d, sizeof(d));
    snprintf(buf, len, "failed %s ago: %s", d, c->cause[0] ? c->cause : "(no error text)");
  }
  n = strlen(buf);
  if (c->recoveries > 0 && c->activity != TOP_RECOVERING && n < len)
    snprintf(buf + n, len - n, " [%u recovery(ies) so far, the last after: %s]", c->recoveries, c->cause);
}

int top_verdict(const struct top_view *v, void (*line)(const char *text, void *arg), void *arg)
{
  char who[120], name[240], says[900], text[1400];
  int problems = 0, moving = 0, idle = 0, comms = 0;

  for (int i = 0; i < v->nproc; i++) {
    const struct top_proc *p = &v->proc[i];
    int waits = 0, idles = 0, posted = 0;

    top_proc_name(p, who, sizeof(who));
    for (int k = 0; k < p->ncomm; k++) {
      const struct top_comm *c = &p->comm[k];

      comms++;
      idles += c->activity == TOP_IDLE;
      moving += c->activity == TOP_MOVING;
      posted += outstanding(c) > 0;
      waits += c->waits;
    }
    idle += idles;
    /* A stopped process first: its comms' waits are its stop's. */
    if (p->stopped == 1) {
      snprintf(
        text, sizeof(text),
        "%s (%s) is stopped (state %c: SIGSTOP or a debugger): it makes no call into NCCL; %d of its %d "
        "comm(s) have work posted that waits for it to run",
        who, p->name, p->pstate, posted, p->ncomm);
      line(text, arg);
    }
    problems += p->stopped == 1 ? 1 : waits;
    for (int k = 0; k < p->ncomm; k++) {
      const struct top_comm *c = &p->comm[k];

      if (!c->waits)
        continue;
      top_comm_name(c, name, sizeof(name));
      top_comm_says(c, says, sizeof(says));
      snprintf(text, sizeof(text), "%s's %s on %s:%d %s", who, name, c->ibdev, c->port, says);
      line(text, arg);
    }
    if (p->stopped != 1 && waits == 0 && p->ncomm > 0 && idles == p->ncomm) {
      snprintf(text, sizeof(text),
               "all of %s's %d comm(s) are idle with nothing posted: the process is not calling NCCL "
               "(look at the GPU or the framework)",
               who, p->ncomm);
      line(text, arg);
    }
  }
  if (problems == 0 && v->nproc > 0) {
    snprintf(text, sizeof(text), "nothing waits: %d process(es), %d comm(s): %d moving, %d idle", v->nproc,
             comms, moving, idle);
    line(text, arg);
  }
  return problems;
}

/* ---- The fleet's wait-for graph ---------------------------------------------------------- */

struct gproc {
  int node, proc;
  int state; /* 0 not visited, 1 on the stack, 2 done */
  int *roots;
  int nroots, cap;
};

struct graph {
  struct top_view *views;
  int nviews;
  struct gproc *procs;
  int nprocs;
  struct top_root *roots;
  int nroots, cap;
};

static struct gproc *gproc_of(struct graph *g, int node, int proc)
{
  for (int i = 0; i < g->nprocs; i++)
    if (g->procs[i].node == node && g->procs[i].proc == proc)
      return &g->procs[i];
  return NULL;
}

static const struct top_proc *proc_at(const struct graph *g, int node, int proc)
{
  return &g->views[node].proc[proc];
}

static void where_proc(const struct graph *g, int node, int proc, char *buf, size_t len)
{
  char who[120];

  top_proc_name(proc_at(g, node, proc), who, sizeof(who));
  snprintf(buf, len, "node %s %s", g->views[node].host, who);
}

/* The root of that kind and place, added when new; its index or -1. */
static int root_add(struct graph *g, int kind, int node, int proc, int comm, const char *where,
                    const char *why)
{
  struct top_root *r;

  for (int i = 0; i < g->nroots; i++)
    if (g->roots[i].kind == kind && strcmp(g->roots[i].where, where) == 0)
      return i;
  if (g->nroots == g->cap) {
    int cap = g->cap ? 2 * g->cap : 8;
    struct top_root *n = realloc(g->roots, (size_t)cap * sizeof(*n));

    if (n == NULL)
      return -1;
    g->roots = n;
    g->cap = cap;
  }
  r = &g->roots[g->nroots];
  memset(r, 0, sizeof(*r));
  r->kind = kind;
  r->node = node;
  r->proc = proc;
  r->comm = comm;
  snprintf(r->where, sizeof(r->where), "%s", where);
  snprintf(r->why, sizeof(r->why), "%.1399s", why);
  return g->nroots++;
}

static void set_add(struct gproc *gp, int root)
{
  if (root < 0)
    return;
  for (int i = 0; i < gp->nroots; i++)
    if (gp->roots[i] == root)
      return;
  if (gp->nroots == gp->cap) {
    int cap = gp->cap ? 2 * gp->cap : 4;
    int *n = realloc(gp->roots, (size_t)cap * sizeof(*n));

    if (n == NULL)
      return;
    gp->roots = n;
    gp->cap = cap;
  }
  gp->roots[gp->nroots++] = root;
}

/* The process a comm's peer is: by the host and pid its HELLO proved, else by address. */
static int find_peer(const struct graph *g, const struct top_comm *c, int *node, int *proc)
{
  int found = 0;

  for (int n = 0; n < g->nviews; n++)
    for (int p = 0; p < g->views[n].nproc; p++) {
      const struct top_proc *q = &g->views[n].proc[p];
      size_t alen = strlen(c->peer_addr);

      if (c->peer_pid != 0 ? q->pid == c->peer_pid && strcmp(q->host, c->peer_host) == 0
                           : alen > 0 && strncmp(q->addr, c->peer_addr, alen) == 0 &&
              (q->addr[alen] == ':' || q->addr[alen] == '\0')) {
        *node = n;
        *proc = p;
        found++;
      }
    }
  return found == 1;
}

/* The comm at the other end of c in process (node, proc), or -1. */
static int find_peer_comm(const struct graph *g, const struct top_comm *c, const struct top_proc *owner,
                          int node, int proc)
{
  const struct top_proc *q = proc_at(g, node, proc);

  for (int k = 0; k < q->ncomm; k++) {
    const struct top_comm *o = &q->comm[k];

    if (o->kind == c->kind)
      continue;
    if (c->peer_stream != 0 && o->stream == c->peer_stream &&
        (o->peer_stream == 0 || o->peer_stream == c->stream))
      return k;
  }
  for (int k = 0; k < q->ncomm; k++) {
    const struct top_comm *o = &q->comm[k];

    if (o->kind != c->kind && o->peer_pid == owner->pid && strcmp(o->peer_host, owner->host) == 0 &&
        (c->peer_stream == 0 || o->stream == c->peer_stream))
      return k;
  }
  return -1;
}

static void proc_roots(struct graph *g, struct gproc *gp, const struct top_comm *via,
                       const struct top_proc *from);

/* Where the wait of comm k of (node, proc) leads: the roots go into acc. */
static void comm_roots(struct graph *g, int node, int proc, int k, struct gproc *acc)
{
  const struct top_proc *p = proc_at(g, node, proc);
  const struct top_comm *c = &p->comm[k];
  char where[200], why[1400], says[900], name[240];
  int qn = -1, qp = -1, kind = 0;

  where_proc(g, node, proc, where, sizeof(where));
  top_comm_says(c, says, sizeof(says));
  top_comm_name(c, name, sizeof(name));
  if (p->stopped == 1) {
    snprintf(why, sizeof(why), "stopped (state %c: SIGSTOP or a debugger): it makes no call into NCCL",
             p->pstate);
    set_add(acc, root_add(g, TOP_ROOT_STOPPED, node, proc, -1, where, why));
    return;
  }
  switch (c->activity) {
  case TOP_FAILED: kind = TOP_ROOT_FAILED; break;
  case TOP_UNTESTED: kind = TOP_ROOT_UNTESTED; break;
  case TOP_RECOVERING: kind = TOP_ROOT_LINK; break;
  case TOP_WAITING:
    if (c->wait == MCP_WAIT_ACK || c->wait == MCP_WAIT_PARTIAL)
      kind = TOP_ROOT_LINK;
    else if (c->wait != MCP_WAIT_CTS && c->wait != MCP_WAIT_DATA)
      kind = TOP_ROOT_LOCAL;
    break;
  default: break; /* a setup waits on the peer's process */
  }
  if (kind == TOP_ROOT_LINK) {
    const char *a = g->views[node].host, *b = c->peer_host[0] ? c->peer_host : c->peer_addr;

    /* One link, whichever end saw it. */
    snprintf(where, sizeof(where), "the link between %s and %s", strcmp(a, b) < 0 ? a : b,
             strcmp(a, b) < 0 ? b : a);
    snprintf(why, sizeof(why), "%.64s's %.239s %.899s", g->views[node].host, name, says);
    set_add(acc, root_add(g, kind, node, proc, k, where, why));
    return;
  }
  if (kind != 0) {
    snprintf(why, sizeof(why), "its %.239s %.899s", name, says);
    set_add(acc, root_add(g, kind, node, proc, kind == TOP_ROOT_UNTESTED ? -1 : k, where, why));
    return;
  }
  if (!find_peer(g, c, &qn, &qp)) {
    char peer[200];

    snprintf(peer, sizeof(peer), "%s", name + strlen(c->kind == 1 ? "send comm to " : "recv comm from "));
    snprintf(where, sizeof(where), "%s", peer);
    snprintf(
      why, sizeof(why),
      "no view has this process: its node did not report to node 0, or the process is gone (waited on by "
      "a %s comm)",
      c->kind == 1 ? "send" : "recv");
    set_add(acc, root_add(g, TOP_ROOT_MISSING, -1, -1, -1, where, why));
    return;
  }
  proc_roots(g, gproc_of(g, qn, qp), c, p);
  for (int i = 0; i < gproc_of(g, qn, qp)->nroots; i++)
    set_add(acc, gproc_of(g, qn, qp)->roots[i]);
}

/* The roots a wait reaching process gp ends at (memoized; a process met again on the
 * way is a cycle). via: the comm (of process from) whose wait led here. */
static void proc_roots(struct graph *g, struct gproc *gp, const struct top_comm *via,
                       const struct top_proc *from)
{
  const struct top_proc *q = proc_at(g, gp->node, gp->proc);
  char where[200], why[1400];
  int waits = 0;

  where_proc(g, gp->node, gp->proc, where, sizeof(where));
  if (gp->state == 1) {
    snprintf(why, sizeof(why), "processes wait on each other in a cycle through this one (a deadlock)");
    set_add(gp, root_add(g, TOP_ROOT_CYCLE, gp->node, gp->proc, -1, where, why));
    return;
  }
  if (gp->state == 2)
    return;
  gp->state = 1;
  if (q->stopped == 1) {
    snprintf(why, sizeof(why), "stopped (state %c: SIGSTOP or a debugger): it makes no call into NCCL",
             q->pstate);
    set_add(gp, root_add(g, TOP_ROOT_STOPPED, gp->node, gp->proc, -1, where, why));
  } else {
    for (int k = 0; k < q->ncomm; k++)
      if (q->comm[k].waits) {
        waits++;
        comm_roots(g, gp->node, gp->proc, k, gp);
      }
    if (waits == 0) {
      int k = find_peer_comm(g, via, from, gp->node, gp->proc);
      char says[900] = "", name[240] = "";

      if (k >= 0) {
        top_comm_name(&q->comm[k], name, sizeof(name));
        top_comm_says(&q->comm[k], says, sizeof(says));
      }
      if (k >= 0)
        snprintf(why, sizeof(why),
                 "has not %s, and waits on nothing itself: its %s %s (it is not calling NCCL for this "
                 "connection: look at the GPU or the framework)",
                 via->kind == 1 ? "posted the receive its peer's send waits for"
                                : "sent what its peer's receive waits for",
                 name, says);
      else
        snprintf(why, sizeof(why),
                 "has not %s, and has no comm for that connection (not connected yet, or closed)",
                 via->kind == 1 ? "posted the receive its peer's send waits for"
                                : "sent what its peer's receive waits for");
      set_add(gp, root_add(g, TOP_ROOT_NOT_CALLING, gp->node, gp->proc, k, where, why));
    }
  }
  gp->state = 2;
}

static void waiter_add(struct top_root *r, const char *text)
{
  if (r->nwaiters < TOP_MAX_WAITERS)
    snprintf(r->waiters[r->nwaiters], sizeof(r->waiters[0]), "%.1399s", text);
  r->nwaiters++;
}

struct top_root *top_fleet_roots(struct top_view *views, int nviews, int *nroots, int *nwaiting)
{
  struct graph g = {.views = views, .nviews = nviews};
  char who[120], name[240], says[900], text[1400];

  *nroots = 0;
  *nwaiting = 0;
  for (int n = 0; n < nviews; n++)
    g.nprocs += views[n].nproc;
  g.procs = calloc(g.nprocs > 0 ? (size_t)g.nprocs : 1, sizeof(*g.procs));
  if (g.procs == NULL)
    return NULL;
  g.nprocs = 0;
  for (int n = 0; n < nviews; n++)
    for (int p = 0; p < views[n].nproc; p++) {
      g.procs[g.nprocs].node = n;
      g.procs[g.nprocs].proc = p;
      g.nprocs++;
    }
  /* Every waiting comm: the roots its chain ends at, and it is their waiter (a root's own
   * comms are not listed as waiting on it). */
  for (int n = 0; n < nviews; n++)
    for (int p = 0; p < views[n].nproc; p++) {
      const struct top_proc *q = &views[n].proc[p];

      for (int k = 0; k < q->ncomm; k++) {
        struct gproc acc = {.node = n, .proc = p};

        if (!q->comm[k].waits)
          continue;
        (*nwaiting)++;
        comm_roots(&g, n, p, k, &acc);
        top_proc_name(q, who, sizeof(who));
        top_comm_name(&q->comm[k], name, sizeof(name));
        top_comm_says(&q->comm[k], says, sizeof(says));
        snprintf(text, sizeof(text), "%s %s: %s %s", views[n].host, who, name, says);
        for (int i = 0; i < acc.nroots; i++) {
          struct top_root *r = &g.roots[acc.roots[i]];

          if (r->node == n && r->proc == p && r->kind != TOP_ROOT_LINK && r->kind != TOP_ROOT_FAILED)
            continue;
          if ((r->kind == TOP_ROOT_LINK || r->kind == TOP_ROOT_FAILED) && r->node == n && r->proc == p &&
              r->comm == k)
            continue;
          waiter_add(r, text);
        }
        free(acc.roots);
      }
    }
  for (int i = 0; i < g.nprocs; i++)
    free(g.procs[i].roots);
  free(g.procs);
  *nroots = g.nroots;
  return g.roots;
}
