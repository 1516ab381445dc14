/*
 * top_json.c - mcpnet-top --json: the node's view (every process and comm, with what
 * each does and the verdict's sentences) and, with --fleet, the roots, as one JSON
 * object for scripts. Strings go through the tools' one JSON writer (mcp_json_str).
 */
#include <stdio.h>

#include "mcp_json.h"
#include "top.h"

struct verdict_json {
  FILE *f;
  int n;
};

static void verdict_line(const char *text, void *arg)
{
  struct verdict_json *j = arg;

  fprintf(j->f, "%s\n    ", j->n++ ? "," : "");
  mcp_json_str(j->f, text);
}

static void num(FILE *f, const char *key, double v)
{
  fprintf(f, ", \"%s\": ", key);
  if (v < 0)
    fprintf(f, "null");
  else
    fprintf(f, "%.1f", v);
}

static void comm_json(const struct top_comm *c, FILE *f)
{
  fprintf(f, "{\"kind\": \"%s\", \"id\": %u, \"stream\": %u, \"peer_stream\": %u",
          c->kind == 1 ? "send" : "recv", c->id, c->stream, c->peer_stream);
  fprintf(f, ", \"device\": ");
  mcp_json_str(f, c->ibdev);
  fprintf(f, ", \"port\": %d, \"dev\": %d, \"gid\": ", c->port, c->dev);
  mcp_json_str(f, c->gid);
  fprintf(f, ", \"peer\": {\"host\": ");
  mcp_json_str(f, c->peer_host);
  fprintf(f, ", \"pid\": %u, \"local_rank\": %d, \"addr\": ", c->peer_pid, c->peer_local_rank);
  mcp_json_str(f, c->peer_addr);
  fprintf(f, "}, \"state\": \"%s\", \"activity\": \"%s\", \"waits\": %s",
          mcp_status_state_name((unsigned)c->state), top_activity_name(c->activity),
          c->waits ? "true" : "false");
  num(f, "waited_s", c->waited_s);
  num(f, "state_s", c->state_s);
  fprintf(f, ", \"posted\": %llu, \"done\": %llu, \"outstanding\": %llu, \"bytes\": %llu",
          (unsigned long long)c->posted, (unsigned long long)c->done,
          (unsigned long long)(c->posted >= c->done ? c->posted - c->done : 0), (unsigned long long)c->bytes);
  fprintf(f, ", \"moved\": %s", c->moved ? "true" : "false");
  num(f, "stall_s", c->stall_s);
  num(f, "none_completed_s", c->idle_done_s);
  num(f, "check_age_s", c->check_age_s);
  fprintf(f, ", \"wait\": \"%s\", \"wait_seq\": %u, \"wait_count\": %d, \"wait_text\": ",
          mcp_status_wait_name((unsigned)c->wait), c->wait_seq, c->wait_count);
  mcp_json_str(f, c->wait_text);
  fprintf(f, ", \"recoveries\": %u, \"cause\": ", c->recoveries);
  mcp_json_str(f, c->cause);
  fprintf(f, "}");
}

void top_json_write(const struct top_view *v, FILE *f)
{
  struct verdict_json j = {f, 0};
  int problems;

  fprintf(f, "{\"tool\": \"mcpnet-top\", \"host\": ");
  mcp_json_str(f, v->host);
  fprintf(f, ", \"sample_s\": %.1f, \"dead_segments\": %d, \"unreadable_segments\": %d,\n  \"processes\": [",
          v->sample_s, v->ndead, v->nunreadable);
  for (int i = 0; i < v->nproc; i++) {
    const struct top_proc *p = &v->proc[i];

    fprintf(f, "%s\n   {\"pid\": %u, \"rank\": %d, \"local_rank\": %d, \"host\": ", i ? "," : "", p->pid,
            p->rank, p->local_rank);
    mcp_json_str(f, p->host);
    fprintf(f, ", \"program\": ");
    mcp_json_str(f, p->name);
    fprintf(f, ", \"addr\": ");
    mcp_json_str(f, p->addr);
    fprintf(f, ", \"version\": ");
    mcp_json_str(f, p->version);
    fprintf(f, ", \"stopped\": %s, \"process_state\": \"%c\", \"unshown_comms\": %u",
            p->stopped == 1     ? "true"
              : p->stopped == 0 ? "false"
                                : "null",
            p->pstate >= 0x21 ? p->pstate : '?', p->unshown);
    num(f, "check_age_s", p->check_age_s);
    fprintf(f, ",\n    \"comms\": [");
    for (int k = 0; k < p->ncomm; k++) {
      fprintf(f, "%s\n     ", k ? "," : "");
      comm_json(&p->comm[k], f);
    }
    fprintf(f, "]}");
  }
  fprintf(f, "],\n  \"verdict\": [");
  problems = top_verdict(v, verdict_line, &j);
  fprintf(f, "],\n  \"problems\": %d}\n", problems);
}

void top_roots_json(const struct top_root *r, int nroots, int nwaiting, int nodes, int reported, FILE *f)
{
  static const char *const kinds[] = {
    [TOP_ROOT_STOPPED] = "stopped",   [TOP_ROOT_NOT_CALLING] = "not_calling",
    [TOP_ROOT_UNTESTED] = "untested", [TOP_ROOT_LINK] = "link",
    [TOP_ROOT_FAILED] = "failed",     [TOP_ROOT_LOCAL] = "local",
    [TOP_ROOT_MISSING] = "missing",   [TOP_ROOT_CYCLE] = "cycle",
  };

  fprintf(
    f,
    "{\"tool\": \"mcpnet-top\", \"fleet\": {\"nodes\": %d, \"reported\": %d, \"waiting\": %d},\n  \"roots\": [",
    nodes, reported, nwaiting);
  for (int i = 0; i < nroots; i++) {
    fprintf(f, "%s\n   {\"kind\": \"%s\", \"where\": ", i ? "," : "",
            r[i].kind >= TOP_ROOT_STOPPED && r[i].kind <= TOP_ROOT_CYCLE ? kinds[r[i].kind] : "unknown");
    mcp_json_str(f, r[i].where);
    fprintf(f, ", \"why\": ");
    mcp_json_str(f, r[i].why);
    fprintf(f, ", \"waiters\": %d, \"waited_on_by\": [", r[i].nwaiters);
    for (int w = 0; w < r[i].nwaiters && w < TOP_MAX_WAITERS; w++) {
      fprintf(f, "%s", w ? ", " : "");
      mcp_json_str(f, r[i].waiters[w]);
    }
    fprintf(f, "]}");
  }
  fprintf(f, "]}\n");
}
