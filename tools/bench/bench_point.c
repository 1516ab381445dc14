/*
 * bench_point.c - one measurement of one series at one size, whichever process holds
 * which part of it. In one process the flow sends to itself. In a pair, role b is the
 * active side (it sends the bandwidth stream, starts each ping, runs perftest clients,
 * keeps the clock) and role a follows b's plan over the control channel:
 *
 *   b: PLAN(series, size, iters) ->   a: posts its receives (or starts the perftest
 *   b: <- READY                          server and waits until it listens)
 *   b: measures                       a: takes part
 *   b: <- STATUS(checked, wrong)      a: reports what it verified
 *
 * so the clock starts only once the other side is ready, and a's verification results
 * reach the report. With --check an mcpnet point is two passes of the same plan: one
 * that fills and verifies every byte, untimed, then the timed one that touches no byte,
 * so mcpnet's figures are taken as perftest's are (perftest verifies nothing). Bandwidth counts every byte of every connection over the time from
 * the first isend to the last send completion (a write completes once the peer has
 * it); latency is the median over round trips of half a round trip.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define PT_LISTEN_TIMEOUT 30

/* Bounded copy into the fixed fields of control messages and cells. */
static void str_copy(char *dst, size_t len, const char *src)
{
  size_t n = strnlen(src, len - 1);

  memcpy(dst, src, n);
  dst[n] = '\0';
}

static int is_mcp(enum bench_kind k) { return k == BENCH_MCP_BW || k == BENCH_MCP_LAT; }

static void remember_cmd(struct bench_results *r, const char *line)
{
  int i;

  for (i = 0; i < r->ncmds; i++)
    if (strcmp(r->cmds[i], line) == 0)
      return;
  if (r->ncmds < BENCH_MAX_CMDS && (r->cmds[r->ncmds] = strdup(line)) != NULL)
    r->ncmds++;
}

/* Shapes the flow for this side of the point; returns the steps to send and receive. */
static void flow_setup(struct bench_ctx *c, enum bench_kind k, size_t size, uint64_t iters, int check,
                       uint64_t *s_steps, uint64_t *r_steps)
{
  const struct bench_opts *o = c->o;
  struct bench_flow *f = &c->flow;
  enum bench_role role = o->role;
  uint64_t steps;

  f->d = &c->drv;
  f->conns = c->link.conns;
  f->check = check;
  f->timeout_s = o->timeout_s;
  f->yield = !o->spin;
  f->my_id = role == BENCH_ROLE_B ? 2 : 1;
  f->peer_id = role == BENCH_ROLE_A ? 2 : 1;
  bench_geom_make(o, size, &f->g);
  steps = iters * f->g.nmsg;
  if (k == BENCH_MCP_BW) {
    f->nconns = o->conns;
    f->gate = -1;
    f->stamps = NULL;
    *s_steps = role == BENCH_ROLE_A ? 0 : steps;
    *r_steps = role == BENCH_ROLE_B ? 0 : steps;
  } else {
    /* Ping-pong over connection 0. One process plays both ends: 2 x iters transfers. */
    f->nconns = 1;
    f->gate = role == BENCH_ROLE_A ? 0 : 1;
    f->stamps = role == BENCH_ROLE_A ? NULL : c->lat_stamps;
    *s_steps = *r_steps = role == BENCH_SELF ? 2 * steps : steps;
  }
}

/* From the stamps of completed transfers to one-way latencies in microseconds. */
static void lat_result(struct bench_ctx *c, double *value, double *mean)
{
  struct bench_flow *f = &c->flow;
  double *t = f->stamps, sum = 0.0;
  /* A pair's transfer k completes a round trip; one process sees one-way hops. */
  double per = c->o->role == BENCH_SELF ? 1.0 : 2.0;
  uint64_t i, n = f->nstamps - 1;

  for (i = 0; i < n; i++) {
    t[i] = (t[i + 1] - t[i]) / per * 1e6;
    sum += t[i];
  }
  *mean = n ? sum / (double)n : 0.0;
  *value = bench_median_find(t, (size_t)n); /* t is sorted from here on */
  c->lat_p25 = n ? t[n / 4] : 0.0;
  c->lat_p75 = n ? t[n * 3 / 4] : 0.0;
}

static int flow_fail(struct bench_ctx *c, enum bench_kind k, size_t size)
{
  fprintf(stderr, "mcpnet-bench: %s at %zu bytes: %s\n", bench_series_lookup(k)->name, size, c->flow.err);
  return -1;
}

static int ctl_expect(struct bench_ctx *c, struct bench_ctl_msg *m, uint32_t kind)
{
  if (bench_ctl_recv(&c->link, m, c->o->timeout_s) != 0)
    return -1;
  if (m->seq != c->seq || (m->kind != kind && m->kind != BENCH_CTL_STATUS)) {
    fprintf(stderr, "mcpnet-bench: control message out of step (kind %u seq %u, expected kind %u seq %u)\n",
            m->kind, m->seq, kind, c->seq);
    return -1;
  }
  return 0;
}

/* Role b tells role a what to run next: the series, size and iteration count. */
static int send_plan(struct bench_ctx *c, struct bench_ctl_msg *m, enum bench_kind k, size_t size,
                     uint64_t iters, int check)
{
  memset(m, 0, sizeof(*m));
  m->kind = BENCH_CTL_PLAN;
  m->seq = ++c->seq;
  m->series = (uint32_t)k;
  m->size = size;
  m->iters = iters;
  m->check = check;
  return bench_ctl_send(&c->link, m, c->o->timeout_s);
}

/* One pass of an mcpnet point on role b's side (or both, in one process). The timed
 * pass still compares every size test reports, so its wrong count joins the cell's;
 * its messages count as checked only when no verifying pass ran. */
static int mcp_pass(struct bench_ctx *c, enum bench_kind k, size_t size, uint64_t iters, int check,
                    double *elapsed, struct bench_cell *cell)
{
  const struct bench_opts *o = c->o;
  struct bench_flow *f = &c->flow;
  struct bench_ctl_msg m;
  uint64_t s_steps, r_steps;
  int counted = check || !o->check;

  flow_setup(c, k, size, iters, check, &s_steps, &r_steps);
  if (o->role == BENCH_ROLE_B && send_plan(c, &m, k, size, iters, check) != 0)
    return -1;
  if (bench_flow_begin(f, s_steps, r_steps) != 0)
    return flow_fail(c, k, size);
  if (o->role == BENCH_ROLE_B) {
    if (ctl_expect(c, &m, BENCH_CTL_READY) != 0)
      return -1;
    if (m.kind != BENCH_CTL_READY) {
      fprintf(stderr, "mcpnet-bench: role a could not start the point: %s\n", m.text);
      return -1;
    }
  }
  if (bench_flow_run(f, elapsed) != 0)
    return flow_fail(c, k, size);
  cell->checked += counted ? f->checked : 0;
  cell->wrong += f->wrong;
  if (o->role == BENCH_ROLE_B) {
    if (ctl_expect(c, &m, BENCH_CTL_STATUS) != 0)
      return -1;
    cell->checked += counted ? m.checked : 0;
    cell->wrong += m.wrong;
    if (m.status != 0) {
      fprintf(stderr, "mcpnet-bench: role a failed at %zu bytes: %s\n", size, m.text);
      return -1;
    }
  }
  return 0;
}

static int mcp_measure(struct bench_ctx *c, enum bench_kind k, size_t size, uint64_t iters, double *value,
                       double *mean, struct bench_cell *cell)
{
  const struct bench_opts *o = c->o;
  double elapsed;

  if (o->check && mcp_pass(c, k, size, iters, 1, &elapsed, cell) != 0)
    return -1;
  if (mcp_pass(c, k, size, iters, 0, &elapsed, cell) != 0)
    return -1;
  if (k == BENCH_MCP_BW) {
    double bytes = (double)o->conns * (double)iters * (double)size * (double)o->group;
    *value = elapsed > 0 ? bytes / elapsed / 1e6 : 0.0;
    *mean = *value;
  } else {
    lat_result(c, value, mean);
  }
  return 0;
}

static void pt_job_init(struct bench_ctx *c, struct bench_pt_job *j, enum bench_kind k, size_t size,
                        uint64_t iters, const char *host)
{
  memset(j, 0, sizeof(*j));
  j->kind = k;
  j->size = size;
  j->iters = iters;
  j->dev = c->dev_name;
  j->ib_port = c->ib_port;
  j->gid_index = c->gid_index;
  j->tcp_port = c->o->perftest_port;
  j->depth = bench_series_lookup(k)->is_bw ? c->o->pt_depth : 0;
  j->host = host;
}

/* A perftest failure spoils one sample, not the run: it is noted in the cell. */
static int pt_failed(struct bench_cell *cell, const char *why, const struct bench_pt_job *j)
{
  cell->failed++;
  str_copy(cell->note, sizeof(cell->note), why);
  if (j != NULL && j->out[0])
    fprintf(stderr, "mcpnet-bench: %s: %s; its output:\n%s\n", j->line, why, j->out);
  else
    fprintf(stderr, "mcpnet-bench: perftest: %s\n", why);
  return 1;
}

static int pt_measure_self(struct bench_ctx *c, enum bench_kind k, size_t size, uint64_t iters, double *value,
                           double *mean, struct bench_cell *cell)
{
  struct bench_pt_job srv, cli;
  int rc;

  pt_job_init(c, &srv, k, size, iters, NULL);
  pt_job_init(c, &cli, k, size, iters, c->peer_host);
  if (bench_perftest_start(&srv) != 0)
    return pt_failed(cell, "the server did not start", NULL);
  remember_cmd(c->res, srv.line);
  if (bench_perftest_wait_listen(&srv, PT_LISTEN_TIMEOUT) != 0) {
    bench_perftest_kill(&srv);
    return pt_failed(cell, "the server did not listen", &srv);
  }
  if (bench_perftest_start(&cli) != 0) {
    bench_perftest_kill(&srv);
    return pt_failed(cell, "the client did not start", NULL);
  }
  remember_cmd(c->res, cli.line);
  rc = bench_perftest_finish(&cli, c->o->timeout_s);
  if (rc != 0) {
    bench_perftest_kill(&srv);
    return pt_failed(cell, "the client failed", &cli);
  }
  if (bench_perftest_finish(&srv, PT_LISTEN_TIMEOUT) != 0)
    return pt_failed(cell, "the server failed", &srv);
  if (bench_perftest_parse(&cli, value, mean) != 0)
    return pt_failed(cell, "no result line in the client's output", &cli);
  return 0;
}

static int pt_measure_b(struct bench_ctx *c, enum bench_kind k, size_t size, uint64_t iters, double *value,
                        double *mean, struct bench_cell *cell)
{
  const struct bench_opts *o = c->o;
  struct bench_ctl_msg m;
  struct bench_pt_job cli;
  char line[300];
  const char *host;
  int rc;

  if (send_plan(c, &m, k, size, iters, 0) != 0 || ctl_expect(c, &m, BENCH_CTL_READY) != 0)
    return -1;
  if (m.kind == BENCH_CTL_STATUS)
    return pt_failed(cell, m.text[0] ? m.text : "role a's server failed", NULL);
  snprintf(line, sizeof(line), "[role a] %s", m.text);
  remember_cmd(c->res, line);
  host = c->peer_host[0] ? c->peer_host : m.host;
  pt_job_init(c, &cli, k, size, iters, host);
  if (bench_perftest_start(&cli) != 0)
    return -1;
  snprintf(line, sizeof(line), "[role b] %s", cli.line);
  remember_cmd(c->res, line);
  rc = bench_perftest_finish(&cli, o->timeout_s);
  /* Whatever the client did, a reports on its server: the channel stays in step. */
  if (ctl_expect(c, &m, BENCH_CTL_STATUS) != 0)
    return -1;
  if (rc != 0)
    return pt_failed(cell, "the client failed", &cli);
  if (m.status != 0)
    return pt_failed(cell, m.text[0] ? m.text : "role a's server failed", NULL);
  if (bench_perftest_parse(&cli, value, mean) != 0)
    return pt_failed(cell, "no result line in the client's output", &cli);
  return 0;
}

int bench_point_measure(struct bench_ctx *c, enum bench_kind k, size_t size, uint64_t iters, double *value,
                        double *mean, struct bench_cell *cell)
{
  *value = *mean = NAN;
  if (is_mcp(k))
    return mcp_measure(c, k, size, iters, value, mean, cell);
  if (c->o->role == BENCH_ROLE_B)
    return pt_measure_b(c, k, size, iters, value, mean, cell);
  return pt_measure_self(c, k, size, iters, value, mean, cell);
}

/* Role a's half of a perftest point: the server, then its exit status. */
static int pt_serve(struct bench_ctx *c, const struct bench_ctl_msg *plan)
{
  struct bench_ctl_msg m;
  struct bench_pt_job srv;
  int rc;

  memset(&m, 0, sizeof(m));
  m.seq = plan->seq;
  pt_job_init(c, &srv, (enum bench_kind)plan->series, plan->size, plan->iters, NULL);
  if (bench_perftest_start(&srv) != 0 || bench_perftest_wait_listen(&srv, PT_LISTEN_TIMEOUT) != 0) {
    bench_perftest_kill(&srv);
    m.kind = BENCH_CTL_STATUS;
    m.status = -1;
    snprintf(m.text, sizeof(m.text), "role a: %.130s did not start listening", srv.line);
    return bench_ctl_send(&c->link, &m, c->o->timeout_s);
  }
  if (c->o->verbose)
    fprintf(stderr, "mcpnet-bench: role a runs %s\n", srv.line);
  m.kind = BENCH_CTL_READY;
  str_copy(m.host, sizeof(m.host), c->gid_ip);
  str_copy(m.text, sizeof(m.text), srv.line);
  if (bench_ctl_send(&c->link, &m, c->o->timeout_s) != 0) {
    bench_perftest_kill(&srv);
    return -1;
  }
  rc = bench_perftest_finish(&srv, c->o->timeout_s);
  m.kind = BENCH_CTL_STATUS;
  m.status = rc;
  m.text[0] = '\0';
  if (rc != 0) {
    fprintf(stderr, "mcpnet-bench: %s failed; its output:\n%s\n", srv.line, srv.out);
    snprintf(m.text, sizeof(m.text), "role a: the server exited with %d", rc);
  }
  return bench_ctl_send(&c->link, &m, c->o->timeout_s);
}

static int mcp_serve(struct bench_ctx *c, const struct bench_ctl_msg *plan, struct bench_cell *cell)
{
  struct bench_flow *f = &c->flow;
  struct bench_ctl_msg m;
  enum bench_kind k = (enum bench_kind)plan->series;
  uint64_t s_steps, r_steps;
  double elapsed;
  int rc;

  memset(&m, 0, sizeof(m));
  m.seq = plan->seq;
  flow_setup(c, k, plan->size, plan->iters, plan->check, &s_steps, &r_steps);
  if (bench_flow_begin(f, s_steps, r_steps) != 0) {
    flow_fail(c, k, plan->size);
    m.kind = BENCH_CTL_STATUS;
    m.status = -1;
    str_copy(m.text, sizeof(m.text), f->err);
    bench_ctl_send(&c->link, &m, c->o->timeout_s);
    return -1;
  }
  m.kind = BENCH_CTL_READY;
  if (bench_ctl_send(&c->link, &m, c->o->timeout_s) != 0)
    return -1;
  rc = bench_flow_run(f, &elapsed);
  if (rc != 0)
    flow_fail(c, k, plan->size);
  cell->checked += plan->check || !c->o->check ? f->checked : 0;
  cell->wrong += f->wrong;
  m.kind = BENCH_CTL_STATUS;
  m.checked = f->checked;
  m.wrong = f->wrong;
  m.status = rc;
  str_copy(m.text, sizeof(m.text), f->err);
  if (bench_ctl_send(&c->link, &m, c->o->timeout_s) != 0)
    return -1;
  return rc;
}

int bench_point_serve(struct bench_ctx *c)
{
  struct bench_cell *tally = calloc(1, sizeof(*tally));
  struct bench_ctl_msg plan;
  int points = 0, rc = 0;

  if (tally == NULL)
    return -1;
  for (;;) {
    /* Between plans b may be busy with a long perftest client; wait generously. */
    if (bench_ctl_recv(&c->link, &plan, c->o->timeout_s * 4) != 0) {
      rc = -1;
      break;
    }
    if (plan.kind == BENCH_CTL_DONE)
      break;
    if (plan.kind != BENCH_CTL_PLAN || plan.series >= BENCH_KIND_COUNT) {
      fprintf(stderr, "mcpnet-bench: role a got an unexpected control message (kind %u)\n", plan.kind);
      rc = -1;
      break;
    }
    rc = is_mcp((enum bench_kind)plan.series) ? mcp_serve(c, &plan, tally) : pt_serve(c, &plan);
    if (rc != 0)
      break;
    points++;
  }
  c->res->checked += tally->checked;
  c->res->wrong += tally->wrong;
  printf("# role a served %d points\n", points);
  free(tally);
  return rc;
}

int bench_point_finish(struct bench_ctx *c)
{
  struct bench_ctl_msg m;

  memset(&m, 0, sizeof(m));
  m.kind = BENCH_CTL_DONE;
  m.seq = ++c->seq;
  return bench_ctl_send(&c->link, &m, c->o->timeout_s);
}
