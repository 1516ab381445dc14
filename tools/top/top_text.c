/*
 * top_text.c - mcpnet-top's text: one line per process, one per comm, then the verdict
 * in sentences (top_graph.c says them); and, for --fleet, the roots with their waiters.
 * The --json and Prometheus forms of the same figures are in top_json.c and top_prom.c.
 */
#include <stdio.h>
#include <string.h>

#include "top.h"

static void say(const char *text, void *arg) { fprintf(arg, "  %s\n", text); }

static void short_wait(const struct top_comm *c, char *buf, size_t len)
{
  if (c->activity == TOP_WAITING)
    snprintf(buf, len, "%.0f s for %s", c->waited_s, mcp_status_wait_name((unsigned)c->wait));
  else if (c->activity == TOP_UNTESTED || c->activity == TOP_SETUP || c->activity == TOP_RECOVERING)
    snprintf(buf, len, "%.0f s", c->waited_s);
  else
    snprintf(buf, len, "-");
}

void top_text_write(const struct top_view *v, const struct top_out_opts *o, FILE *f)
{
  char who[120], peer[240], wait[96], dev[80];
  int comms = 0, waits = 0;

  for (int i = 0; i < v->nproc; i++) {
    comms += v->proc[i].ncomm;
    for (int k = 0; k < v->proc[i].ncomm; k++)
      waits += v->proc[i].comm[k].waits;
  }
  fprintf(f, "mcpnet-top on %s: %d process(es), %d comm(s), %d waiting", v->host, v->nproc, comms, waits);
  if (v->sample_s > 0)
    fprintf(f, "; counters compared over %.1f s", v->sample_s);
  fprintf(f, "\n");
  if (v->ndead > 0)
    fprintf(f, "(%d status file(s) of dead processes ignored)\n", v->ndead);
  if (v->nunreadable > 0)
    fprintf(f, "(%d status file(s) not readable by this user, e.g. %s: run as their owner or root)\n",
            v->nunreadable, v->unreadable_why);
  for (int i = 0; i < v->nproc; i++) {
    const struct top_proc *p = &v->proc[i];

    top_proc_name(p, who, sizeof(who));
    fprintf(f, "%s %s on %s (%s): %d comm(s)%s%s\n", who, p->name, p->host,
            p->addr[0] ? p->addr : "no address", p->ncomm, p->stopped == 1 ? ", STOPPED" : "",
            p->unshown > 0 ? ", more comms than the status file holds" : "");
    fprintf(f, "  %-4s %-44s %-14s %-10s %6s %10s %10s  %s\n", "KIND", "PEER", "DEVICE", "STATE", "OUTST",
            "DONE", "BYTES", "WAITED");
    for (int k = 0; k < p->ncomm; k++) {
      const struct top_comm *c = &p->comm[k];
      char bytes[32];

      if (o != NULL && !o->all && c->activity == TOP_IDLE)
        continue;
      top_comm_name(c, peer, sizeof(peer));
      snprintf(dev, sizeof(dev), "%s:%d", c->ibdev[0] ? c->ibdev : "?", c->port);
      short_wait(c, wait, sizeof(wait));
      snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)c->bytes);
      fprintf(f, "  %-4s %-44s %-14s %-10s %6lld %10llu %10s  %s\n", c->kind == 1 ? "send" : "recv",
              peer + strlen(c->kind == 1 ? "send comm to " : "recv comm from "), dev,
              top_activity_name(c->activity), (long long)(c->posted >= c->done ? c->posted - c->done : 0),
              (unsigned long long)c->done, bytes, wait);
    }
  }
  if (v->nproc == 0)
    fprintf(f, "no mcpnet process publishes its comms here (MCPNET_STATUS_DIR; MCPNET_STATUS=1)\n");
  fprintf(f, "verdict:\n");
  if (top_verdict(v, say, f) == 0 && v->nproc == 0)
    fprintf(f, "  nothing to say: no process\n");
}

void top_roots_text(const struct top_root *r, int nroots, int nwaiting, int nodes, int reported, FILE *f)
{
  static const char *const kinds[] = {
    [TOP_ROOT_STOPPED] = "stopped",      [TOP_ROOT_NOT_CALLING] = "not calling",
    [TOP_ROOT_UNTESTED] = "not testing", [TOP_ROOT_LINK] = "link",
    [TOP_ROOT_FAILED] = "failed",        [TOP_ROOT_LOCAL] = "inside a process",
    [TOP_ROOT_MISSING] = "not reported", [TOP_ROOT_CYCLE] = "cycle",
  };

  fprintf(f, "fleet: %d of %d node(s) reported; %d comm(s) wait; %d root(s)\n", reported, nodes, nwaiting,
          nroots);
  for (int i = 0; i < nroots; i++) {
    fprintf(f, "root %d of %d (%s): %s: %s\n", i + 1, nroots,
            r[i].kind >= TOP_ROOT_STOPPED && r[i].kind <= TOP_ROOT_CYCLE ? kinds[r[i].kind] : "?", r[i].where,
            r[i].why);
    for (int w = 0; w < r[i].nwaiters && w < TOP_MAX_WAITERS; w++)
      fprintf(f, "  waited on by %s\n", r[i].waiters[w]);
    if (r[i].nwaiters > TOP_MAX_WAITERS)
      fprintf(f, "  ... and %d more\n", r[i].nwaiters - TOP_MAX_WAITERS);
  }
  if (nroots == 0)
    fprintf(f, "fleet: nothing waits%s\n", reported < nodes ? " among the nodes that reported" : "");
}
