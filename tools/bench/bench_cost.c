/*
 * bench_cost.c - --cpu-cost: the data path's success path, with nothing else in it.
 *
 * The question is how many instructions isend + irecv + test cost per message when
 * they succeed, without the test() calls that find nothing done (how many of those a
 * proxy makes depends on the link, not on the plugin). So the calls here are made
 * only after their work is done: receives are posted 8 ahead as NCCL posts them, and
 * before each isend and each test the process sleeps until the adapter has had ample
 * time (the sleep doubles whenever a call still finds its work unfinished, and every
 * such call is counted and printed). Under callgrind with collection toggled on in
 * the benchmark's calls into the plugin, drv_isend/drv_irecv/drv_test
 * (tools/bench/mcpnet-cpu-cost), the totals divided by the message count are the cost per
 * message. Self-connected, one process.
 */
#include <stdio.h>
#include <time.h>

#include "bench.h"

#define COST_DEPTH BENCH_COST_DEPTH
#define COST_MAX_SETTLE_NS 20000000L

struct cost_state {
  struct mcp_drive *d;
  struct bench_conn *c;
  size_t size;
  long settle_ns;
  uint64_t calls_isend, calls_irecv, calls_test, misses_isend, misses_irecv, misses_test;
};

static void settle(struct cost_state *s)
{
  struct timespec ts = {0, s->settle_ns};

  nanosleep(&ts, NULL);
}

/* Work was still unfinished: wait longer before the next call of any kind. */
static void missed(struct cost_state *s, uint64_t *counter)
{
  (*counter)++;
  if (s->settle_ns < COST_MAX_SETTLE_NS)
    s->settle_ns *= 2;
}

static void *slot(uint8_t *ring, size_t size, uint64_t k) { return ring + (size_t)(k % COST_DEPTH) * size; }

static int post_recv(struct cost_state *s, uint64_t k)
{
  void *data = slot(s->c->rbuf, s->size, k), *mh = s->c->rmh, *req = NULL;
  size_t sz = s->size;
  int tag = 0;

  for (;;) {
    s->calls_irecv++;
    if (drv_irecv(s->d, s->c->rc, 1, &data, &sz, &tag, &mh, &req) != ncclSuccess)
      return -1;
    if (req != NULL)
      break;
    missed(s, &s->misses_irecv);
    settle(s);
  }
  s->c->rreq[k % COST_DEPTH] = req;
  return 0;
}

static int wait_test(struct cost_state *s, void *req, int *size)
{
  int done = 0;

  for (;;) {
    s->calls_test++;
    if (drv_test(s->d, req, &done, size) != ncclSuccess)
      return -1;
    if (done)
      return 0;
    missed(s, &s->misses_test);
    settle(s);
  }
}

int bench_cost_run(struct bench_ctx *ctx)
{
  const struct bench_opts *o = ctx->o;
  struct cost_state s = {.d = &ctx->drv, .c = &ctx->link.conns[0], .size = o->min_size, .settle_ns = 200000};
  uint64_t n = o->iters > 0 ? (uint64_t)o->iters : 2000, k;
  double t0 = drv_now();

  for (k = 0; k < COST_DEPTH && k < n; k++)
    if (post_recv(&s, k) != 0)
      goto fail;
  for (k = 0; k < n; k++) {
    void *req = NULL;
    int got = -1, sent = -1;

    settle(&s); /* the clear-to-send is in */
    for (;;) {
      s.calls_isend++;
      if (drv_isend(s.d, s.c->sc, slot(s.c->sbuf, s.size, k), s.size, 0, s.c->smh, &req) != ncclSuccess)
        goto fail;
      if (req != NULL)
        break;
      missed(&s, &s.misses_isend);
      settle(&s);
    }
    settle(&s); /* the data landed and was acknowledged */
    if (wait_test(&s, s.c->rreq[k % COST_DEPTH], &got) != 0 || wait_test(&s, req, &sent) != 0)
      goto fail;
    if (got != (int)s.size || sent != (int)s.size) {
      fprintf(stderr,
              "mcpnet-bench: --cpu-cost: message %llu: test reported %d bytes received, %d sent, "
              "of %zu\n",
              (unsigned long long)k, got, sent, s.size);
      return -1;
    }
    if (k + COST_DEPTH < n && post_recv(&s, k + COST_DEPTH) != 0)
      goto fail;
  }
  printf("# cpu-cost: %llu messages of %zu B, %d receives posted ahead, %.1f s\n", (unsigned long long)n,
         s.size, COST_DEPTH, drv_now() - t0);
  printf("# cpu-cost calls: isend %llu, irecv %llu, test %llu\n", (unsigned long long)s.calls_isend,
         (unsigned long long)s.calls_irecv, (unsigned long long)s.calls_test);
  printf("# cpu-cost calls that found their work unfinished: isend %llu, irecv %llu, test %llu "
         "(final wait %.2f ms)\n",
         (unsigned long long)s.misses_isend, (unsigned long long)s.misses_irecv,
         (unsigned long long)s.misses_test, (double)s.settle_ns / 1e6);
  return 0;
fail:
  fprintf(stderr, "mcpnet-bench: --cpu-cost: a plugin call failed at message %llu\n", (unsigned long long)k);
  return -1;
}
