/*
 * top_view.c - a node's view: every live status segment under the directory, read twice
 * a short interval apart. One read says what each comm last published; the second says
 * whether its counters moved meanwhile, which is the only way to tell a comm that
 * completes work from one that sits still when its process never waits (a process that
 * never waits runs no liveness check, so nothing in its segment carries a time).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "top.h"

static double age_s(uint64_t now_ms, uint64_t then_ms)
{
  if (then_ms == 0)
    return -1;
  return now_ms > then_ms ? (double)(now_ms - then_ms) / 1000.0 : 0.0;
}

static void comm_from_status(const struct mcp_status_comm *s, uint64_t now_ms, struct top_comm *c)
{
  memset(c, 0, sizeof(*c));
  c->kind = (int)s->kind;
  c->id = s->id;
  c->stream = s->stream_id;
  c->peer_stream = s->peer_stream;
  c->dev = s->dev;
  c->port = s->port;
  c->ndevs = s->ndevs;
  c->nqps = s->nqps;
  snprintf(c->ibdev, sizeof(c->ibdev), "%s", s->ibdev);
  snprintf(c->gid, sizeof(c->gid), "%s", s->gid);
  snprintf(c->peer_host, sizeof(c->peer_host), "%s", s->peer_host);
  c->peer_pid = s->peer_pid;
  c->peer_local_rank = s->peer_local_rank;
  snprintf(c->peer_addr, sizeof(c->peer_addr), "%s", s->peer_addr);
  c->state = (int)s->state;
  c->state_s = age_s(now_ms, s->state_ms);
  if (c->state_s < 0)
    c->state_s = 0;
  c->posted = s->count.posted;
  c->done = s->count.done;
  c->bytes = s->count.bytes;
  c->check_age_s = age_s(now_ms, s->check_ms);
  /* The stall and "none completed" clocks are the last check's: they hold now only while
   * the counters are what the check saw (the caller compares the two reads). */
  c->stall_s = s->check_ms == 0 ? -1 : s->stall_ms == 0 ? c->check_age_s : age_s(now_ms, s->stall_ms);
  c->idle_done_s = s->done_ms != 0 && s->done_mark == s->count.done ? age_s(now_ms, s->done_ms) : -1;
  c->wait = (int)s->wait;
  c->wait_seq = s->wait_seq;
  c->wait_count = s->wait_count;
  snprintf(c->wait_text, sizeof(c->wait_text), "%s", s->wait_text);
  c->recoveries = s->recoveries;
  snprintf(c->cause, sizeof(c->cause), "%s", s->cause);
}

void top_proc_from_status(const struct mcp_status_proc *sp, uint64_t now_ms, struct top_proc *p)
{
  const struct mcp_status_head *h = &sp->head;

  memset(p, 0, sizeof(*p));
  snprintf(p->host, sizeof(p->host), "%s", h->host);
  p->pid = h->pid;
  p->rank = h->rank;
  p->local_rank = h->local_rank;
  snprintf(p->name, sizeof(p->name), "%s", h->name);
  snprintf(p->addr, sizeof(p->addr), "%s", h->addr);
  snprintf(p->version, sizeof(p->version), "%s", h->version);
  p->stopped = sp->stopped;
  p->pstate = sp->pstate;
  p->check_age_s = age_s(now_ms, h->check_ms);
  p->unshown = h->unshown;
  p->comm = calloc(sp->ncomm > 0 ? (size_t)sp->ncomm : 1, sizeof(*p->comm));
  if (p->comm == NULL)
    return;
  for (int i = 0; i < sp->ncomm; i++)
    comm_from_status(&sp->comm[i], now_ms, &p->comm[p->ncomm++]);
}

struct reader {
  struct mcp_status_proc *sp;
  int n, cap;
  int dead, unreadable;
  char why[160];
};

static int read_one(const char *path, void *arg)
{
  struct reader *r = arg;
  char err[160];

  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 16;
    struct mcp_status_proc *sp = realloc(r->sp, (size_t)cap * sizeof(*sp));

    if (sp == NULL)
      return -1;
    r->sp = sp;
    r->cap = cap;
  }
  if (mcp_status_read(path, &r->sp[r->n], err, sizeof(err)) != 0) {
    if (r->unreadable++ == 0)
      snprintf(r->why, sizeof(r->why), "%.60s: %.90s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
               err);
    return 0;
  }
  if (!r->sp[r->n].alive) {
    r->dead++;
    mcp_status_proc_free(&r->sp[r->n]);
    return 0;
  }
  r->n++;
  return 0;
}

static void reader_free(struct reader *r)
{
  for (int i = 0; i < r->n; i++)
    mcp_status_proc_free(&r->sp[i]);
  free(r->sp);
  memset(r, 0, sizeof(*r));
}

static const struct mcp_status_proc *find_proc(const struct reader *r, uint32_t pid)
{
  for (int i = 0; i < r->n; i++)
    if (r->sp[i].head.pid == pid)
      return &r->sp[i];
  return NULL;
}

int top_view_read(const char *dir, double sample_s, struct top_view *v, char *err, size_t errlen)
{
  struct reader first = {0}, second = {0}, *use;
  struct timespec ts;
  uint64_t now_ms;
  int rc;

  memset(v, 0, sizeof(*v));
  if (gethostname(v->host, sizeof(v->host) - 1) != 0)
    snprintf(v->host, sizeof(v->host), "?");
  rc = mcp_status_scan(dir, read_one, &first);
  if (rc < 0) {
    snprintf(err, errlen, "cannot read %s: %s", dir, strerror(-rc));
    reader_free(&first);
    return rc;
  }
  if (sample_s > 0 && first.n > 0) {
    ts.tv_sec = (time_t)sample_s;
    ts.tv_nsec = (long)((sample_s - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
    mcp_status_scan(dir, read_one, &second);
    v->sample_s = sample_s;
  }
  now_ms = mcp_clock_ms();
  /* The second read is the view (the newer); the first says what moved. A process that
   * came between the two is shown without the comparison. */
  use = sample_s > 0 && first.n > 0 ? &second : &first;
  v->ndead = use->dead;
  v->nunreadable = use->unreadable;
  snprintf(v->unreadable_why, sizeof(v->unreadable_why), "%s", use->why);
  v->proc = calloc(use->n > 0 ? (size_t)use->n : 1, sizeof(*v->proc));
  if (v->proc == NULL) {
    reader_free(&first);
    reader_free(&second);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  for (int i = 0; i < use->n; i++) {
    const struct mcp_status_proc *now = &use->sp[i];
    const struct mcp_status_proc *before = use == &second ? find_proc(&first, now->head.pid) : NULL;
    struct top_proc *p = &v->proc[v->nproc++];

    top_proc_from_status(now, now_ms, p);
    for (int k = 0; k < p->ncomm && before != NULL; k++) {
      struct top_comm *c = &p->comm[k];

      for (int j = 0; j < before->ncomm; j++) {
        const struct mcp_status_comm *b = &before->comm[j];

        if (b->id == c->id && b->kind == (uint32_t)c->kind && b->stream_id == c->stream) {
          c->moved = b->count.done != c->done || b->count.posted != c->posted;
          break;
        }
      }
    }
  }
  reader_free(&first);
  reader_free(&second);
  return 0;
}

void top_view_free(struct top_view *v)
{
  for (int i = 0; i < v->nproc; i++)
    free(v->proc[i].comm);
  free(v->proc);
  memset(v, 0, sizeof(*v));
}
