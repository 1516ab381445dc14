/*
 * top_fleet.c - mcpnet-top --fleet: run once per node; node 0 joins every node's view.
 *
 * Node 0 is found as mcpnet-doctor --fleet finds it (doctor_fleet_resolve: the options,
 * then MCPNET_FLEET_*, Slurm's variables or a Kubernetes indexed Job) and talked to over
 * the doctor's control connection, whose two ends prove to each other that they know the
 * run's token (MCPNET_DOCTOR_TOKEN) before anything travels. Every other node connects,
 * says its rank and sends its view (top_wire.c) in frames, an empty frame last; node 0
 * accepts until every node came or --wait ran out, joins the views (top_fleet_roots),
 * prints the roots and sends each node the same text with the exit status, so every node
 * prints the answer and a script on any of them can act on it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doctor_ctl.h"
#include "doctor_fleet.h"
#include "top.h"

enum {
  TOP_MSG_HELLO = 32, /* node -> 0: "rank=R\nnodes=N\n" */
  TOP_MSG_VIEW = 33,  /* node -> 0: a part of its view; empty: the end */
  TOP_MSG_RESULT = 34 /* 0 -> node: "status=S\n" then the roots' text */
};
#define VIEW_MAX (64u << 20) /* bytes of one node's view node 0 takes */

static const char *env(const char *name) { return getenv(name); }

/* Sends text in frames of at most DOCTOR_CTL_MAX bytes, cut at line ends, then the end. */
static int send_view(struct doctor_ctl *c, const char *text, size_t len, int timeout_s)
{
  size_t off = 0;

  while (off < len) {
    size_t n = len - off > DOCTOR_CTL_MAX ? DOCTOR_CTL_MAX : len - off;
    int rc;

    if (off + n < len) {
      const char *nl = NULL;

      for (size_t i = n; i > 0 && nl == NULL; i--)
        if (text[off + i - 1] == '\n')
          nl = text + off + i - 1;
      if (nl != NULL)
        n = (size_t)(nl - (text + off)) + 1;
    }
    if ((rc = doctor_ctl_send(c, TOP_MSG_VIEW, text + off, n, timeout_s)) != 0)
      return rc;
    off += n;
  }
  return doctor_ctl_send(c, TOP_MSG_VIEW, "", 0, timeout_s);
}

static int recv_view(struct doctor_ctl *c, char **out, size_t *outlen, int timeout_s)
{
  static char part[DOCTOR_CTL_MAX];
  size_t cap = 0, len = 0, n;
  char *buf = NULL;
  int rc;

  for (;;) {
    if ((rc = doctor_ctl_recv(c, TOP_MSG_VIEW, part, sizeof(part), &n, timeout_s)) != 0)
      break;
    if (n == 0) {
      *out = buf;
      *outlen = len;
      return 0;
    }
    if (len + n > VIEW_MAX) {
      rc = -EMSGSIZE;
      break;
    }
    if (len + n > cap) {
      char *b = realloc(buf, cap = 2 * (len + n));

      if (b == NULL) {
        rc = -ENOMEM;
        break;
      }
      buf = b;
    }
    memcpy(buf + len, part, n);
    len += n;
  }
  free(buf);
  return rc;
}

static void result_text(struct top_view *views, int nodes, int reported, int json, char **text, size_t *len,
                        int *status)
{
  struct top_root *roots;
  int nroots = 0, nwaiting = 0;
  FILE *f = open_memstream(text, len);

  roots = top_fleet_roots(views, nodes, &nroots, &nwaiting);
  *status = nroots > 0 ? TOP_EXIT_WAITING : reported < nodes ? TOP_EXIT_PARTIAL : TOP_EXIT_OK;
  if (f == NULL)
    return;
  if (json)
    top_roots_json(roots, nroots, nwaiting, nodes, reported, f);
  else
    top_roots_text(roots, nroots, nwaiting, nodes, reported, f);
  fclose(f);
  free(roots);
}

static int member(struct top_view *v, const struct top_fleet_opts *o, const struct fleet_conf *fc)
{
  struct doctor_ctl c;
  char hello[64], *text = NULL, result[DOCTOR_CTL_MAX + 1];
  size_t len = 0, cap = 0, n = 0;
  double deadline = doctor_ctl_now() + o->wait_s;
  int rc, status = -1;

  for (;;) {
    if (doctor_ctl_connect(&c, fc->coordinator, o->port, o->timeout_s) == 0)
      break;
    if (c.fail == DOCTOR_CTL_BAD_ADDRESS || c.fail == DOCTOR_CTL_AUTH || doctor_ctl_now() + 1 > deadline) {
      fprintf(stderr, "mcpnet-top: fleet: node %d could not reach node 0 at %s: %s\n", fc->rank,
              fc->coordinator, c.msg);
      return TOP_EXIT_PARTIAL;
    }
    sleep(1);
  }
  snprintf(hello, sizeof(hello), "rank=%d\nnodes=%d\n", fc->rank, fc->nodes);
  if (top_wire_encode(v, &text, &len, &cap) != 0) {
    fprintf(stderr, "mcpnet-top: out of memory\n");
    doctor_ctl_close(&c);
    return TOP_EXIT_PARTIAL;
  }
  rc = doctor_ctl_send(&c, TOP_MSG_HELLO, hello, strlen(hello), o->timeout_s);
  if (rc == 0)
    rc = send_view(&c, text, len, o->timeout_s);
  free(text);
  /* Node 0 answers once every node came or its --wait ran out. */
  while (rc == 0) {
    rc = doctor_ctl_recv(&c, TOP_MSG_RESULT, result, sizeof(result) - 1, &n, o->wait_s + 60);
    if (rc != 0)
      break;
    result[n] = '\0';
    if (sscanf(result, "status=%d", &status) != 1)
      status = TOP_EXIT_PARTIAL;
    fputs(strchr(result, '\n') != NULL ? strchr(result, '\n') + 1 : "", stdout);
    break;
  }
  doctor_ctl_close(&c);
  if (rc != 0) {
    fprintf(stderr, "mcpnet-top: fleet: node %d: node 0 at %s did not answer: %s\n", fc->rank,
            fc->coordinator, strerror(-rc));
    return TOP_EXIT_PARTIAL;
  }
  return status >= 0 && status <= TOP_EXIT_PARTIAL ? status : TOP_EXIT_PARTIAL;
}

static int coordinator(struct top_view *own, const struct top_fleet_opts *o, const struct fleet_conf *fc,
                       int port)
{
  struct top_view *views = calloc((size_t)fc->nodes, sizeof(*views));
  struct doctor_ctl *ctl = calloc((size_t)fc->nodes, sizeof(*ctl));
  char bound[MCP_SOCKADDR_STRLEN], msg[MCP_SOCK_MSGLEN], *text = NULL;
  double deadline = doctor_ctl_now() + o->wait_s;
  int lfd = -1, bport = 0, reported = 1, status = TOP_EXIT_PARTIAL;
  size_t len = 0;

  if (views == NULL || ctl == NULL) {
    fprintf(stderr, "mcpnet-top: out of memory\n");
    goto out;
  }
  for (int r = 0; r < fc->nodes; r++)
    ctl[r].fd = -1;
  views[0] = *own;
  if (doctor_ctl_listen(NULL, port, &lfd, bound, sizeof(bound), &bport, msg, sizeof(msg)) != 0) {
    fprintf(stderr, "mcpnet-top: fleet node 0 cannot listen on port %d: %s\n", port, msg);
    goto out;
  }
  fprintf(stderr, "mcpnet-top: fleet node 0 listening on %s for %d node(s), up to %d s\n", bound, fc->nodes,
          o->wait_s);
  while (reported < fc->nodes) {
    struct doctor_ctl c;
    char hello[128], err[160], *vt = NULL;
    size_t n = 0, vlen = 0;
    int rank = -1, nodes = -1;

    if (doctor_ctl_accept_on(&c, lfd, deadline) != 0)
      break;
    if (doctor_ctl_recv(&c, TOP_MSG_HELLO, hello, sizeof(hello) - 1, &n, o->timeout_s) != 0) {
      doctor_ctl_close(&c);
      continue;
    }
    hello[n] = '\0';
    if (sscanf(hello, "rank=%d\nnodes=%d", &rank, &nodes) != 2 || rank < 1 || rank >= fc->nodes ||
        nodes != fc->nodes || ctl[rank].fd >= 0) {
      fprintf(stderr,
              "mcpnet-top: fleet: %s was turned away: it says node %d of %d (node 0 expects 1..%d of %d, "
              "each once)\n",
              c.peer, rank, nodes, fc->nodes - 1, fc->nodes);
      doctor_ctl_close(&c);
      continue;
    }
    if (recv_view(&c, &vt, &vlen, o->timeout_s) != 0 ||
        top_wire_decode(vt, vlen, &views[rank], err, sizeof(err)) != 0) {
      fprintf(stderr, "mcpnet-top: fleet: node %d's view from %s could not be read\n", rank, c.peer);
      top_view_free(&views[rank]);
      free(vt);
      doctor_ctl_close(&c);
      continue;
    }
    free(vt);
    ctl[rank] = c;
    reported++;
  }
  close(lfd);
  for (int r = 1; r < fc->nodes; r++)
    if (ctl[r].fd < 0)
      fprintf(stderr, "mcpnet-top: fleet: node %d did not report within --wait %d s\n", r, o->wait_s);
  result_text(views, fc->nodes, reported, o->json, &text, &len, &status);
  if (text != NULL) {
    fputs(text, stdout);
    fflush(stdout);
  }
  for (int r = 1; r < fc->nodes; r++) {
    if (ctl[r].fd < 0)
      continue;
    if (text != NULL) {
      char head[32];
      size_t hl = (size_t)snprintf(head, sizeof(head), "status=%d\n", status);
      size_t tl = len + hl > DOCTOR_CTL_MAX ? DOCTOR_CTL_MAX - hl : len;
      char *frame = malloc(hl + tl);

      if (frame != NULL) {
        memcpy(frame, head, hl);
        memcpy(frame + hl, text, tl);
        doctor_ctl_send(&ctl[r], TOP_MSG_RESULT, frame, hl + tl, o->timeout_s);
        free(frame);
      }
    }
    doctor_ctl_close(&ctl[r]);
  }
out:
  if (views != NULL)
    for (int r = 1; r < fc->nodes; r++)
      top_view_free(&views[r]);
  free(views);
  free(ctl);
  free(text);
  return status;
}

int top_fleet_main(struct top_view *v, const struct top_fleet_opts *fo)
{
  struct fleet_opts o = {fo->coordinator, fo->nodes, fo->rank};
  struct fleet_conf fc;
  char err[600];
  int port;

  if (doctor_fleet_resolve(&o, env, &fc, err, sizeof(err)) != 0) {
    fprintf(stderr, "mcpnet-top: %s\n", err);
    return TOP_EXIT_USAGE;
  }
  if (doctor_ctl_run_token("mcpnet-top", "--fleet", NULL, 0) != 0)
    return TOP_EXIT_USAGE;
  if (fc.rank != 0)
    return member(v, fo, &fc);
  if ((port = doctor_fleet_listen_port(&fc, fo->port, err, sizeof(err))) < 0) {
    fprintf(stderr, "mcpnet-top: %s\n", err);
    return TOP_EXIT_USAGE;
  }
  return coordinator(v, fo, &fc, port);
}
