/*
 * top_prom.c - the node's figures as Prometheus text (node_exporter's textfile collector
 * reads a *.prom file; --prometheus FILE writes one, atomically).
 *
 * A job has thousands of comms per node; a series per comm would bury any monitoring
 * system. So every series is summed per peer node, local device and direction (a node
 * talks to a bounded set of peers over a few devices); which comm waits for what stays
 * in mcpnet-top itself. Messages and bytes count the comms open now: they fall when
 * comms close, which Prometheus reads as a counter reset.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "top.h"

struct agg {
  char peer[MCP_STATUS_HOST_MAX];
  char dev[80];
  int dir; /* 1 send, 2 recv */
  int activity[TOP_FAILED + 1];
  unsigned long long messages, bytes, outstanding, recoveries;
  double longest_wait;
};

/* A label value: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *s)
{
  for (; *s != '\0'; s++) {
    if (*s == '\\' || *s == '"')
      fputc('\\', f);
    if (*s == '\n')
      fputs("\\n", f);
    else
      fputc(*s, f);
  }
}

static void labels(FILE *f, const struct agg *a)
{
  fputs("{peer=\"", f);
  label(f, a->peer);
  fputs("\",device=\"", f);
  label(f, a->dev);
  fprintf(f, "\",direction=\"%s\"", a->dir == 1 ? "send" : "recv");
}

void top_prom_write(const struct top_view *v, FILE *f)
{
  struct agg *a = NULL;
  int n = 0, cap = 0, stopped = 0, running = 0;

  for (int i = 0; i < v->nproc; i++) {
    const struct top_proc *p = &v->proc[i];

    stopped += p->stopped == 1;
    running += p->stopped != 1;
    for (int k = 0; k < p->ncomm; k++) {
      const struct top_comm *c = &p->comm[k];
      char dev[80];
      const char *peer = c->peer_host[0] ? c->peer_host : c->peer_addr[0] ? c->peer_addr : "unknown";
      int j;

      snprintf(dev, sizeof(dev), "%s:%d", c->ibdev[0] ? c->ibdev : "?", c->port);
      for (j = 0; j < n; j++)
        if (a[j].dir == c->kind && strcmp(a[j].peer, peer) == 0 && strcmp(a[j].dev, dev) == 0)
          break;
      if (j == n) {
        if (n == cap) {
          struct agg *b = realloc(a, (size_t)(cap ? 2 * cap : 16) * sizeof(*a));

          if (b == NULL)
            continue;
          a = b;
          cap = cap ? 2 * cap : 16;
        }
        memset(&a[n], 0, sizeof(a[n]));
        snprintf(a[n].peer, sizeof(a[n].peer), "%s", peer);
        snprintf(a[n].dev, sizeof(a[n].dev), "%s", dev);
        a[n].dir = c->kind;
        n++;
      }
      if (c->activity >= 0 && c->activity <= TOP_FAILED)
        a[j].activity[c->activity]++;
      a[j].messages += c->done;
      a[j].bytes += c->bytes;
      a[j].outstanding += c->posted >= c->done ? c->posted - c->done : 0;
      a[j].recoveries += c->recoveries;
      if (c->waits && c->waited_s > a[j].longest_wait)
        a[j].longest_wait = c->waited_s;
    }
  }
  fprintf(f,
          "# HELP mcpnet_processes mcpnet processes publishing on this node, by whether they are stopped\n"
          "# TYPE mcpnet_processes gauge\n"
          "mcpnet_processes{state=\"running\"} %d\nmcpnet_processes{state=\"stopped\"} %d\n",
          running, stopped);
  fprintf(f,
          "# HELP mcpnet_dead_status_files status files of dead processes, ignored\n"
          "# TYPE mcpnet_dead_status_files gauge\nmcpnet_dead_status_files %d\n",
          v->ndead);
  fprintf(f,
          "# HELP mcpnet_comms comms by peer node, device, direction and what they do\n"
          "# TYPE mcpnet_comms gauge\n");
  for (int j = 0; j < n; j++)
    for (int act = 0; act <= TOP_FAILED; act++)
      if (a[j].activity[act] > 0) {
        fputs("mcpnet_comms", f);
        labels(f, &a[j]);
        fprintf(f, ",activity=\"%s\"} %d\n", top_activity_name(act), a[j].activity[act]);
      }
  static const struct {
    const char *name, *type, *help;
    size_t off;
  } series[] = {
    {"mcpnet_messages_total", "counter", "messages completed on the comms open now",
     offsetof(struct agg, messages)},
    {"mcpnet_bytes_total", "counter", "bytes completed on the comms open now", offsetof(struct agg, bytes)},
    {"mcpnet_requests_outstanding", "gauge", "requests posted and not yet tested done",
     offsetof(struct agg, outstanding)},
    {"mcpnet_recoveries_total", "counter", "transport recoveries of the comms open now",
     offsetof(struct agg, recoveries)},
  };
  for (size_t s = 0; s < sizeof(series) / sizeof(series[0]); s++) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", series[s].name, series[s].help, series[s].name,
            series[s].type);
    for (int j = 0; j < n; j++) {
      fputs(series[s].name, f);
      labels(f, &a[j]);
      fprintf(f, "} %llu\n",
              *(const unsigned long long *)(const void *)((const char *)&a[j] + series[s].off));
    }
  }
  fprintf(f,
          "# HELP mcpnet_longest_wait_seconds the longest a comm has waited (0: none waits)\n"
          "# TYPE mcpnet_longest_wait_seconds gauge\n");
  for (int j = 0; j < n; j++) {
    fputs("mcpnet_longest_wait_seconds", f);
    labels(f, &a[j]);
    fprintf(f, "} %.1f\n", a[j].longest_wait);
  }
  free(a);
}

int top_prom_file(const struct top_view *v, const char *path)
{
  char tmp[600];
  FILE *f;
  int rc = 0;

  snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
  f = fopen(tmp, "w");
  if (f == NULL)
    return -errno;
  top_prom_write(v, f);
  if (fflush(f) != 0 || ferror(f))
    rc = -EIO;
  if (fclose(f) != 0 && rc == 0)
    rc = -errno;
  if (rc == 0 && rename(tmp, path) != 0)
    rc = -errno;
  if (rc != 0)
    unlink(tmp);
  return rc;
}
