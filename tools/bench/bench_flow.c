/*
 * bench_flow.c - the measured path: isend/irecv/test driven as NCCL's proxy progress
 * thread drives them. Per connection, receives are posted ahead up to the depth (NCCL
 * keeps NCCL_STEPS = 8 posted), sends are pipelined up to the same depth, an isend or
 * irecv that returns no request is simply retried on the next pass, and only the
 * oldest request of each side is tested, in order, as the proxy does. One pass visits
 * every connection, so several connections progress together from one thread.
 *
 * A step is one irecv of `group` buffers matched by `group` isends with tags
 * 0..group-1, all in one slot of the connection's registered ring. The same loop
 * measures latency: a gate lets a side send transfer t only after it has received
 * transfer t (initiator) or t+1 (responder), which makes the flow a ping-pong with the
 * receives still posted ahead. Nothing here allocates, logs or sleeps on success; a
 * pass that moved nothing yields the CPU, as NCCL's proxy does.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define MAX_REPORTED_WRONG 5

void bench_geom_make(const struct bench_opts *o, size_t size, struct bench_geom *g)
{
  memset(g, 0, sizeof(*g));
  g->size = size;
  g->group = o->group;
  if (o->nccl_steps) {
    /* NCCL's Simple protocol: a buffer of NCCL_STEPS slots of one step each; a
     * transfer walks through it step by step, the last step shorter. */
    g->step = o->step_size;
    g->nmsg = size ? (size + g->step - 1) / g->step : 1;
    g->slot_bytes = g->step;
    g->post_bytes = g->step;
    g->nslots = BENCH_MAX_DEPTH;
    g->depth = o->depth;
  } else {
    size_t per_conn = o->mem_max / (size_t)o->conns;
    size_t slots = per_conn / ((size_t)o->group * (size ? size : 1));

    g->step = size;
    g->nmsg = 1;
    g->slot_bytes = size;
    g->post_bytes = size;
    /* Large messages get fewer slots: the pipe stays full with two 64 MiB messages in
     * flight, and a 512 MiB ring per connection would not fit small machines. */
    g->nslots = slots < 1 ? 1 : slots > (size_t)o->depth ? o->depth : (int)slots;
    g->depth = g->nslots;
  }
}

size_t bench_ring_measure(const struct bench_geom *g)
{
  return (size_t)g->nslots * (size_t)g->group * g->slot_bytes;
}

static inline size_t step_len(const struct bench_geom *g, uint64_t j)
{
  size_t off = (size_t)(j % g->nmsg) * g->step;

  return g->size - off < g->step ? g->size - off : g->step;
}

static inline uint8_t *slot_ptr(uint8_t *ring, const struct bench_geom *g, uint64_t j, int elem)
{
  return ring + ((size_t)(j % (uint64_t)g->nslots) * (size_t)g->group + (size_t)elem) * g->slot_bytes;
}

static int post_recvs(struct bench_flow *f, struct bench_conn *c)
{
  const struct bench_geom *g = &f->g;

  while (c->r_posted < c->r_total && c->r_posted - c->r_done < (uint64_t)g->depth) {
    void *data[BENCH_MAX_GROUP], *mh[BENCH_MAX_GROUP], *req = NULL;
    size_t sizes[BENCH_MAX_GROUP];
    int tags[BENCH_MAX_GROUP], e;

    for (e = 0; e < g->group; e++) {
      data[e] = slot_ptr(c->rbuf, g, c->r_posted, e);
      sizes[e] = g->post_bytes;
      tags[e] = e;
      mh[e] = c->rmh;
    }
    if (drv_irecv(f->d, c->rc, g->group, data, sizes, tags, mh, &req) != ncclSuccess) {
      snprintf(f->err, sizeof(f->err), "irecv of step %llu (%d x %zu bytes) failed",
               (unsigned long long)c->r_posted, g->group, g->post_bytes);
      return -1;
    }
    if (req == NULL)
      return 0; /* not now: NCCL retries on its next pass, so do we */
    c->rreq[c->r_posted % BENCH_MAX_DEPTH] = req;
    c->r_posted++;
  }
  return 0;
}

static void verify(struct bench_flow *f, struct bench_conn *c, int idx, uint64_t j, const int *sizes)
{
  const struct bench_geom *g = &f->g;
  size_t len = step_len(g, j);
  int e;

  for (e = 0; e < g->group; e++) {
    long bad = -1;
    int size_ok = sizes[e] == (int)len;

    if (f->check && size_ok)
      bad = bench_pattern_check(slot_ptr(c->rbuf, g, j, e), len, bench_pattern_derive(f->peer_id, idx, j, e));
    f->checked++;
    if (size_ok && bad < 0)
      continue;
    if (f->wrong++ < MAX_REPORTED_WRONG) {
      if (!size_ok)
        fprintf(stderr,
                "mcpnet-bench: WRONG: connection %d step %llu element %d: test reported %d bytes, sent %zu\n",
                idx, (unsigned long long)j, e, sizes[e], len);
      else
        fprintf(stderr,
                "mcpnet-bench: WRONG: connection %d step %llu element %d (%zu bytes): byte %ld differs\n",
                idx, (unsigned long long)j, e, len, bad);
    }
  }
}

/* Tests the oldest posted receive, and the next ones while they are done. */
static int reap_recvs(struct bench_flow *f, struct bench_conn *c, int idx, int *progress)
{
  while (c->r_done < c->r_posted) {
    int done = 0, sizes[BENCH_MAX_GROUP];

    if (drv_test(f->d, c->rreq[c->r_done % BENCH_MAX_DEPTH], &done, sizes) != ncclSuccess) {
      snprintf(f->err, sizeof(f->err), "test of receive step %llu on connection %d failed",
               (unsigned long long)c->r_done, idx);
      return -1;
    }
    if (!done)
      return 0;
    verify(f, c, idx, c->r_done, sizes);
    c->r_done++;
    *progress = 1;
    if (f->stamps != NULL && idx == 0 && c->r_done % f->g.nmsg == 0)
      f->stamps[f->nstamps++] = drv_now();
  }
  return 0;
}

static int post_sends(struct bench_flow *f, struct bench_conn *c, int idx, int *progress)
{
  const struct bench_geom *g = &f->g;
  uint64_t limit = c->s_total;

  if (f->gate >= 0) {
    uint64_t allowed = (c->r_done / g->nmsg + (uint64_t)f->gate) * g->nmsg;
    if (allowed < limit)
      limit = allowed;
  }
  while (c->s_posted < limit && c->s_posted - c->s_done < (uint64_t)g->depth) {
    uint64_t j = c->s_posted;
    size_t len = step_len(g, j);

    if (f->check && !c->s_filled) {
      int e;
      for (e = 0; e < g->group; e++)
        bench_pattern_fill(slot_ptr(c->sbuf, g, j, e), len, bench_pattern_derive(f->my_id, idx, j, e));
      c->s_filled = 1;
    }
    for (; c->s_part < g->group; c->s_part++) {
      void *req = NULL;
      if (drv_isend(f->d, c->sc, slot_ptr(c->sbuf, g, j, c->s_part), len, c->s_part, c->smh, &req) !=
          ncclSuccess) {
        snprintf(f->err, sizeof(f->err), "isend of step %llu element %d (%zu bytes) on connection %d failed",
                 (unsigned long long)j, c->s_part, len, idx);
        return -1;
      }
      if (req == NULL)
        return 0; /* the receiver has not posted yet: retry on the next pass */
      c->sreq[j % BENCH_MAX_DEPTH][c->s_part] = req;
      *progress = 1;
    }
    c->s_part = 0;
    c->s_filled = 0;
    c->s_posted++;
  }
  return 0;
}

static int reap_sends(struct bench_flow *f, struct bench_conn *c, int idx, int *progress)
{
  while (c->s_done < c->s_posted) {
    void **reqs = c->sreq[c->s_done % BENCH_MAX_DEPTH];
    for (; c->s_tested < f->g.group; c->s_tested++) {
      int done = 0, size = -1;
      if (drv_test(f->d, reqs[c->s_tested], &done, &size) != ncclSuccess) {
        snprintf(f->err, sizeof(f->err), "test of send step %llu element %d on connection %d failed",
                 (unsigned long long)c->s_done, c->s_tested, idx);
        return -1;
      }
      if (!done)
        return 0;
    }
    c->s_tested = 0;
    c->s_done++;
    *progress = 1;
  }
  return 0;
}

int bench_flow_begin(struct bench_flow *f, uint64_t s_steps, uint64_t r_steps)
{
  int i;

  f->checked = f->wrong = 0;
  f->nstamps = 0;
  f->err[0] = '\0';
  for (i = 0; i < f->nconns; i++) {
    struct bench_conn *c = &f->conns[i];
    c->s_total = s_steps;
    c->r_total = r_steps;
    c->s_posted = c->s_done = c->r_posted = c->r_done = 0;
    c->s_part = c->s_filled = c->s_tested = 0;
    if (post_recvs(f, c) != 0)
      return -1;
  }
  return 0;
}

int bench_flow_run(struct bench_flow *f, double *elapsed)
{
  double t0 = drv_now(), last = t0, now;
  unsigned spins = 0;
  int i, busy = 1, progress = 0;

  if (f->stamps != NULL)
    f->stamps[f->nstamps++] = t0;
  while (busy) {
    int moved = 0;
    busy = 0;
    for (i = 0; i < f->nconns; i++) {
      struct bench_conn *c = &f->conns[i];
      /* Reply first, refill after: a send the gate just opened is not queued behind
       * the irecv that re-advertises a buffer 8 steps ahead. */
      if (c->r_done < c->r_total && reap_recvs(f, c, i, &moved) != 0)
        return -1;
      if (c->s_done < c->s_total && post_sends(f, c, i, &moved) != 0)
        return -1;
      if (c->r_done < c->r_total && post_recvs(f, c) != 0)
        return -1;
      if (c->s_done < c->s_total && reap_sends(f, c, i, &moved) != 0)
        return -1;
      busy |= c->r_done < c->r_total || c->s_done < c->s_total;
    }
    progress |= moved;
    /* NCCL's progress thread yields after a pass that moved nothing, which leaves
     * the CPU to whoever completes the work (soft-RoCE's kernel threads, the peer
     * process on the same host); --spin measures without that courtesy. */
    if (!moved && f->yield)
      sched_yield();
    /* The clock is read rarely: a stall is a matter of seconds, not of passes. */
    if (busy && ++spins % 4096 == 0) {
      now = drv_now();
      if (progress) {
        last = now;
        progress = 0;
      } else if (now - last > f->timeout_s) {
        struct bench_conn *c = &f->conns[0];
        snprintf(
          f->err, sizeof(f->err),
          "no progress for %d s (connection 0: sent %llu/%llu posted %llu, received %llu/%llu posted %llu)",
          f->timeout_s, (unsigned long long)c->s_done, (unsigned long long)c->s_total,
          (unsigned long long)c->s_posted, (unsigned long long)c->r_done, (unsigned long long)c->r_total,
          (unsigned long long)c->r_posted);
        return -1;
      }
    }
  }
  *elapsed = drv_now() - t0;
  return 0;
}
