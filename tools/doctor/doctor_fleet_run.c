/*
 * doctor_fleet_run.c - the network side of `mcpnet-doctor --fleet`.
 *
 * Every node runs the one-node report, loads the plugin as NCCL would and connects to
 * node 0's control port with a HELLO carrying its FAILs and its plugin device count.
 * Node 0 forks a member for rank 0 (so that rank takes part in pairs like any other,
 * while the parent only coordinates) and accepts members until all N arrived or --wait
 * ran out. Then, one pair at a time, it tells both ends which rail to use, relays their
 * plugin listen handles, and collects each step's outcome (listen, connect, message)
 * from both, sending "go" or "stop" between steps so both ends stay in step even when
 * one fails or stops answering. Last it prints the table (doctor_fleet.c) and sends
 * each node its verdict. Every wait has a deadline built from --timeout or --wait.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "doctor_ctl.h"
#include "doctor_fleet.h"
#include "core/text.h"
#include "doctor_plugin.h"

#define HANDLE_MSG (1 + NCCL_NET_HANDLE_MAXSIZE + 512)
#define SEED 0x3c

/* ---- A member: any node, node 0's included ------------------------------------------------ */

struct member {
  const struct doctor_opts *o;
  struct doctor_report *r;
  struct doctor_ctl ctl;
  struct doctor_plugin pl;
  int plugin_ok;
  int rank, nodes, quiet;
  uint8_t *sbuf, *rbuf;
  void *smh, *rmh;
};

static void pattern(uint8_t *buf, size_t len, unsigned seed)
{
  for (size_t i = 0; i < len; i++)
    buf[i] = (uint8_t)(((i * 2654435761u) >> 11) ^ seed ^ (i >> 9));
}

static size_t wrong_bytes(const uint8_t *buf, size_t len, unsigned seed, size_t *first)
{
  size_t bad = 0;

  for (size_t i = 0; i < len; i++)
    if (buf[i] != (uint8_t)(((i * 2654435761u) >> 11) ^ seed ^ (i >> 9)) && bad++ == 0)
      *first = i;
  return bad;
}

/* Polls a request until done, an error or the deadline: 0, or -1 with err. */
static int finish(struct member *m, void **req, int *size, double deadline, const char *what, char *err,
                  size_t len)
{
  while (*req != NULL) {
    int done = 0;

    if (drv_test(&m->pl.d, *req, &done, size) != ncclSuccess) {
      snprintf(err, len, "the %s's test failed: %s", what, doctor_plugin_warnings());
      return -1;
    }
    if (done)
      *req = NULL;
    else if (drv_now() > deadline) {
      snprintf(err, len, "the %s did not complete within %d s", what, m->o->timeout_s);
      return -1;
    } else
      usleep(100);
  }
  return 0;
}

/* One message each way over the pair's comms, checked byte by byte. */
static int message(struct member *m, int rank_peer, char *err, size_t len)
{
  size_t size = m->o->size, first = 0, bad;
  size_t bytes = (size + 4095) & ~(size_t)4095;
  void *sreq = NULL, *rreq = NULL, *data[1], *mh[1];
  size_t sizes[1] = {size};
  int tags[1] = {0}, got = -1;
  double deadline = drv_now() + m->o->timeout_s;

  m->sbuf = aligned_alloc(4096, bytes);
  m->rbuf = aligned_alloc(4096, bytes);
  if (m->sbuf == NULL || m->rbuf == NULL) {
    snprintf(err, len, "out of memory for 2 x %zu bytes", bytes);
    return -1;
  }
  /* Each side sends a pattern seeded with its own rank, so a crossed or stale message
   * shows as wrong bytes. */
  pattern(m->sbuf, size, SEED ^ (unsigned)m->rank);
  memset(m->rbuf, 0, bytes);
  if (drv_regmr(&m->pl.d, m->pl.sc, m->sbuf, bytes, &m->smh) != ncclSuccess ||
      drv_regmr(&m->pl.d, m->pl.rc, m->rbuf, bytes, &m->rmh) != ncclSuccess) {
    snprintf(err, len, "registering 2 x %zu bytes failed: %s", bytes, doctor_plugin_warnings());
    return -1;
  }
  data[0] = m->rbuf;
  mh[0] = m->rmh;
  while (rreq == NULL) {
    if (drv_irecv(&m->pl.d, m->pl.rc, 1, data, sizes, tags, mh, &rreq) != ncclSuccess) {
      snprintf(err, len, "irecv failed: %s", doctor_plugin_warnings());
      return -1;
    }
    if (rreq == NULL && drv_now() > deadline) {
      snprintf(err, len, "a receive could not be posted within %d s", m->o->timeout_s);
      return -1;
    }
  }
  while (sreq == NULL) {
    if (drv_isend(&m->pl.d, m->pl.sc, m->sbuf, size, 0, m->smh, &sreq) != ncclSuccess) {
      snprintf(err, len, "isend failed: %s", doctor_plugin_warnings());
      return -1;
    }
    if (sreq == NULL && drv_now() > deadline) {
      snprintf(err, len, "the send could not be posted within %d s (the peer posted no receive)",
               m->o->timeout_s);
      return -1;
    }
    if (sreq == NULL)
      usleep(100);
  }
  if (finish(m, &sreq, NULL, deadline, "send", err, len) != 0 ||
      finish(m, &rreq, &got, deadline, "receive", err, len) != 0)
    return -1;
  if (got != (int)size) {
    snprintf(err, len, "received %d bytes, expected %zu", got, size);
    return -1;
  }
  if ((bad = wrong_bytes(m->rbuf, size, SEED ^ (unsigned)rank_peer, &first)) > 0) {
    snprintf(err, len, "the message arrived with %zu of %zu bytes wrong, the first at offset %zu", bad, size,
             first);
    return -1;
  }
  return 0;
}

/* Closes the pair's comms and buffers; the plugin stays loaded for the next pair. */
static void pair_close(struct member *m)
{
  if (m->smh != NULL)
    drv_deregmr(&m->pl.d, m->pl.sc, m->smh);
  if (m->rmh != NULL)
    drv_deregmr(&m->pl.d, m->pl.rc, m->rmh);
  m->smh = m->rmh = NULL;
  free(m->sbuf);
  free(m->rbuf);
  m->sbuf = m->rbuf = NULL;
  if (m->pl.sc != NULL)
    drv_close_send(&m->pl.d, m->pl.sc);
  if (m->pl.rc != NULL)
    drv_close_recv(&m->pl.d, m->pl.rc);
  if (m->pl.lc != NULL)
    drv_close_listen(&m->pl.d, m->pl.lc);
  m->pl.sc = m->pl.rc = m->pl.lc = NULL;
}

/* Long enough for node 0 to finish a step with the other end (see coord_pair). */
static int step_wait(const struct doctor_opts *o) { return 4 * o->timeout_s + 30; }

static int send_text(struct doctor_ctl *c, uint32_t type, const char *text, int timeout_s)
{
  return doctor_ctl_send(c, type, text, strlen(text), timeout_s);
}

static int recv_text(struct doctor_ctl *c, uint32_t type, char *buf, size_t cap, int timeout_s)
{
  size_t n = 0;
  int rc = doctor_ctl_recv(c, type, buf, cap - 1, &n, timeout_s);

  buf[rc == 0 ? n : 0] = '\0';
  return rc;
}

/* One pair, this node's end: listen, swap handles through node 0, connect, message. */
static int member_pair(struct member *m, int rail, int peer)
{
  uint8_t mine[HANDLE_MSG], theirs[HANDLE_MSG];
  char err[FLEET_LINE] = "", go[32];
  size_t n = 0;
  int rc;

  memset(mine, 0, sizeof(mine));
  if (!m->plugin_ok)
    snprintf((char *)mine + 1, sizeof(mine) - 1, "its plugin did not load (see its own check)");
  else if (doctor_plugin_listen(&m->pl, rail, mine + 1, err, sizeof(err)) == 0)
    mine[0] = 1;
  else
    snprintf((char *)mine + 1, sizeof(mine) - 1, "%.390s", err);
  rc = doctor_ctl_send(&m->ctl, DOCTOR_MSG_HANDLE, mine, sizeof(mine), m->o->timeout_s);
  if (rc == 0)
    rc = doctor_ctl_recv(&m->ctl, DOCTOR_MSG_HANDLE, theirs, sizeof(theirs), &n, step_wait(m->o));
  if (rc != 0)
    return rc;
  if (!mine[0] || n != sizeof(theirs) || !theirs[0])
    snprintf(err, sizeof(err), "skip");
  else if (doctor_plugin_connect(&m->pl, rail, theirs + 1, m->o->timeout_s, err, sizeof(err)) == 0)
    snprintf(err, sizeof(err), "ok");
  if ((rc = send_text(&m->ctl, DOCTOR_MSG_STEP, err, m->o->timeout_s)) != 0 ||
      (rc = recv_text(&m->ctl, DOCTOR_MSG_STEP, go, sizeof(go), step_wait(m->o))) != 0)
    return rc;
  if (strcmp(go, "go") == 0) {
    if (message(m, peer, err, sizeof(err)) == 0)
      snprintf(err, sizeof(err), "ok");
    rc = send_text(&m->ctl, DOCTOR_MSG_STEP, err, m->o->timeout_s);
  }
  pair_close(m);
  return rc;
}

static void one_line(char *s)
{
  for (; *s != '\0'; s++)
    if (*s == '\n' || *s == '\r')
      *s = ' ';
}

static int hello(struct member *m)
{
  struct doctor_report *r = m->r;
  char buf[DOCTOR_CTL_MAX], line[FLEET_LINE];
  int len, nown = doctor_count(r, DOCTOR_FAIL), k = 0;

  len = snprintf(buf, sizeof(buf), "rank=%d\nnodes=%d\nhost=%s\naddr=%s\nndev=%d\nnown=%d\n", m->rank,
                 m->nodes, r->host, r->oob_addr, m->plugin_ok ? m->pl.ndev : 0, nown);
  for (int i = 0; i < r->nfind && k < FLEET_OWN_MAX; i++) {
    const struct doctor_finding *f = &r->find[i];

    if (f->level != DOCTOR_FAIL)
      continue;
    snprintf(line, sizeof(line), "%s%s%s: %s", f->check, f->subject[0] ? " " : "", f->subject, f->message);
    one_line(line);
    len += snprintf(buf + len, sizeof(buf) - (size_t)len, "fail=%s\n", line);
    k++;
  }
  return doctor_ctl_send(&m->ctl, DOCTOR_MSG_FLEET_HELLO, buf, (size_t)len, m->o->timeout_s);
}

/* Connects to node 0, retrying until --wait: node 0 may start after this node. */
static int member_connect(struct member *m, const char *spec)
{
  double deadline = doctor_ctl_now() + m->o->wait_s;

  for (;;) {
    if (doctor_ctl_connect(&m->ctl, spec, m->o->port, m->o->timeout_s) == 0)
      return 0;
    if (m->ctl.fail == DOCTOR_CTL_BAD_ADDRESS || m->ctl.fail == DOCTOR_CTL_AUTH ||
        doctor_ctl_now() + 1 > deadline)
      return -1;
    sleep(1);
  }
}

static void print_own_fails(const struct doctor_report *r)
{
  for (int i = 0; i < r->nfind; i++)
    if (r->find[i].level == DOCTOR_FAIL)
      printf("  its own check: %s%s%s: %s\n", r->find[i].check, r->find[i].subject[0] ? " " : "",
             r->find[i].subject, r->find[i].message);
}

static int member_run(const struct doctor_opts *o, const struct fleet_conf *fc, const char *spec, int quiet)
{
  static struct member mm;
  struct member *m = &mm;
  char err[1024] = "", cmd[DOCTOR_CTL_MAX];
  int status = DOCTOR_EXIT_FAIL, rc;

  m->o = o;
  m->rank = fc->rank;
  m->nodes = fc->nodes;
  m->quiet = quiet;
  m->ctl.fd = -1;
  m->r = calloc(1, sizeof(*m->r));
  if (m->r == NULL)
    return DOCTOR_EXIT_FAIL;
  doctor_report_init(m->r, o);
  doctor_log_setup(o->verbose);
  doctor_config_load(m->r);
  doctor_devices_scan(m->r);
  doctor_devices_check(m->r);
  doctor_select_run(m->r);
  doctor_host_check(m->r);
  doctor_config_export_nccl_conf(m->r);
  if (doctor_plugin_open(&m->pl, o, err, sizeof(err)) == 0)
    m->plugin_ok = 1;
  else
    doctor_add(m->r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "plugin", m->pl.path,
               "run mcpnet-doctor without --fleet here and fix what it reports", "%s", err);
  if (member_connect(m, spec) != 0) {
    if (!quiet) {
      printf("fleet: node %d (%s): could not reach node 0 at %s: %s\n", m->rank, m->r->host, spec,
             m->ctl.msg);
      print_own_fails(m->r);
    }
    goto out;
  }
  if (hello(m) != 0)
    goto out;
  for (;;) {
    int rail, peer;

    /* Node 0 may spend three steps on every pair (at most 2 per node and rail) before it
     * gets to this node again; capped at a week so the sum stays an int. */
    long long idle = o->wait_s + 6LL * m->nodes * (m->plugin_ok ? m->pl.ndev : 1) * step_wait(o);

    rc = recv_text(&m->ctl, DOCTOR_MSG_FLEET_CMD, cmd, sizeof(cmd), idle < 604800 ? (int)idle : 604800);
    if (rc != 0) {
      if (!quiet)
        printf("fleet: node %d (%s): node 0 stopped answering (%s)\n", m->rank, m->r->host, strerror(-rc));
      break;
    }
    /* An older node 0 adds " accept_first=N", which no longer matters. */
    if (sscanf(cmd, "pair rail=%d peer=%d", &rail, &peer) == 2) {
      if (member_pair(m, rail, peer) != 0) {
        if (!quiet)
          printf("fleet: node %d (%s): the control connection to node 0 broke during a pair\n", m->rank,
                 m->r->host);
        break;
      }
      continue;
    }
    if (strncmp(cmd, "verdict healthy", 15) == 0) {
      if (!quiet)
        printf("fleet: node %d (%s): healthy (node 0 checked %d nodes)\n", m->rank, m->r->host, m->nodes);
      status = DOCTOR_EXIT_OK;
    } else if (!quiet) {
      const char *nl = strchr(cmd, '\n');
      char shown[sizeof(cmd) * 4];

      printf("fleet: node %d (%s): PROBLEMS, as node 0 names them:\n", m->rank, m->r->host);
      /* Node 0's words, lines kept; anything else that is not printable is escaped. */
      for (const char *q = nl ? nl + 1 : cmd; *q != '\0';) {
        size_t line = strcspn(q, "\n");

        printf("%s\n", mcp_text_escape(q, line, shown, sizeof(shown)));
        q += line + (q[line] == '\n');
      }
    }
    break;
  }
out:
  fflush(stdout);
  pair_close(m);
  doctor_plugin_close(&m->pl);
  doctor_ctl_close(&m->ctl);
  doctor_report_free(m->r);
  free(m->r);
  return status;
}

/* ---- Node 0: the coordinator --------------------------------------------------------------- */

struct coord {
  const struct doctor_opts *o;
  struct fleet f;
  struct doctor_ctl *ctl; /* per rank; fd < 0 when absent or gone */
  char (*gone)[FLEET_LINE];
};

/* "192.0.2.2:41234" or "[fd00::2]:41234" without the port. */
static void strip_port(const char *in, char *out, size_t len)
{
  const char *end = in[0] == '[' ? strchr(in, ']') : strrchr(in, ':');

  if (in[0] == '[')
    in++;
  snprintf(out, len, "%.*s", end != NULL ? (int)(end - in) : (int)strlen(in), in);
}

static void refuse(struct doctor_ctl *c, const char *why, int timeout_s)
{
  char text[FLEET_LINE + 32];

  fprintf(stderr, "mcpnet-doctor: fleet: a doctor from %s was turned away: %s\n", c->peer, why);
  snprintf(text, sizeof(text), "verdict problems\nnode 0 turned this node away: %s", why);
  send_text(c, DOCTOR_MSG_FLEET_CMD, text, timeout_s);
  doctor_ctl_close(c);
}

static void coord_collect(struct coord *k, int lfd)
{
  const struct doctor_opts *o = k->o;
  double deadline = doctor_ctl_now() + o->wait_s;
  int arrived = 0;

  while (arrived < k->f.n) {
    struct doctor_ctl c;
    char buf[DOCTOR_CTL_MAX], why[FLEET_LINE];
    struct fleet_node nd;
    int rank = -1, nodes = -1;

    if (doctor_ctl_accept_on(&c, lfd, deadline) != 0)
      break;
    memset(&nd, 0, sizeof(nd));
    if (recv_text(&c, DOCTOR_MSG_FLEET_HELLO, buf, sizeof(buf), o->timeout_s) != 0) {
      fprintf(stderr, "mcpnet-doctor: fleet: %s connected but sent no fleet report\n", c.peer);
      doctor_ctl_close(&c);
      continue;
    }
    doctor_fleet_parse_hello(&nd, buf, &rank, &nodes);
    if (rank < 0 || rank >= k->f.n || nodes != k->f.n) {
      snprintf(why, sizeof(why), "it says node %d of %d, node 0 expects ranks 0..%d of %d", rank, nodes,
               k->f.n - 1, k->f.n);
      refuse(&c, why, o->timeout_s);
      continue;
    }
    if (k->f.node[rank].present) {
      snprintf(why, sizeof(why), "node %d already reported from %s (%s): two nodes have the same rank", rank,
               k->f.node[rank].addr, k->f.node[rank].host);
      refuse(&c, why, o->timeout_s);
      continue;
    }
    nd.present = 1;
    if (nd.addr[0] == '\0')
      strip_port(c.peer, nd.addr, sizeof(nd.addr));
    k->f.node[rank] = nd;
    k->ctl[rank] = c;
    arrived++;
  }
  for (int r = 0; r < k->f.n; r++)
    if (!k->f.node[r].present)
      snprintf(
        k->f.node[r].missing, FLEET_LINE,
        "it did not connect within --wait %d s: is mcpnet-doctor --fleet running there with --nodes %d, "
        "and does it reach node 0 on TCP port %d?",
        o->wait_s, k->f.n, o->port);
}

static void lost(struct coord *k, int rank, const char *what, int rc)
{
  if (k->ctl[rank].fd < 0)
    return;
  snprintf(k->gone[rank], FLEET_LINE, "node %d stopped answering node 0 (%s: %s)", rank, what, strerror(-rc));
  doctor_ctl_close(&k->ctl[rank]);
}

static void fail_pair(struct fleet_pair *p, const char *step, int said_by, const char *err)
{
  if (!p->ok && p->step[0] != '\0')
    return; /* the first failure is the one that explains the rest */
  p->ok = 0;
  snprintf(p->step, sizeof(p->step), "%s", step);
  p->said_by = said_by;
  snprintf(p->err, sizeof(p->err), "%.399s", err);
}

/* Drives one pair: both ends are told the rail, their handles relayed, each step's
 * outcome collected; an end that stops answering is dropped and named. */
static void coord_pair(struct coord *k, struct fleet_pair *p)
{
  const struct doctor_opts *o = k->o;
  int end[2] = {p->a, p->b}, wait = 2 * o->timeout_s + 10;
  uint8_t h[2][HANDLE_MSG];
  char step[2][FLEET_LINE], cmd[96];
  size_t n;

  p->ran = 1;
  p->ok = 1;
  p->step[0] = '\0';
  for (int i = 0; i < 2; i++) {
    memset(h[i], 0, sizeof(h[i]));
    snprintf(cmd, sizeof(cmd), "pair rail=%d peer=%d", p->rail, end[!i]);
    if (k->ctl[end[i]].fd >= 0) {
      int rc = send_text(&k->ctl[end[i]], DOCTOR_MSG_FLEET_CMD, cmd, o->timeout_s);

      if (rc == 0)
        rc = doctor_ctl_recv(&k->ctl[end[i]], DOCTOR_MSG_HANDLE, h[i], sizeof(h[i]), &n, wait);
      if (rc != 0)
        lost(k, end[i], "its listen handle", rc);
    }
    if (k->ctl[end[i]].fd < 0) {
      h[i][0] = 0;
      fail_pair(p, "control", -1, k->gone[end[i]]);
    } else if (!h[i][0]) {
      h[i][sizeof(h[i]) - 1] = '\0';
      fail_pair(p, "listen", end[i], (char *)h[i] + 1);
    }
  }
  for (int i = 0; i < 2; i++) {
    if (k->ctl[end[i]].fd >= 0) {
      int rc = doctor_ctl_send(&k->ctl[end[i]], DOCTOR_MSG_HANDLE, h[!i], sizeof(h[!i]), o->timeout_s);

      if (rc != 0)
        lost(k, end[i], "the peer's handle", rc);
    }
  }
  /* connect, then message: each end answers "ok", "skip" or what went wrong. */
  for (int s = 0; s < 2; s++) {
    int all_ok = 1;

    for (int i = 0; i < 2; i++) {
      snprintf(step[i], FLEET_LINE, "skip");
      if (k->ctl[end[i]].fd >= 0) {
        int rc = recv_text(&k->ctl[end[i]], DOCTOR_MSG_STEP, step[i], FLEET_LINE, wait);

        if (rc != 0)
          lost(k, end[i], s == 0 ? "the connect step" : "the message step", rc);
      }
      if (k->ctl[end[i]].fd < 0)
        fail_pair(p, "control", -1, k->gone[end[i]]);
      else if (strcmp(step[i], "ok") != 0 && strcmp(step[i], "skip") != 0)
        fail_pair(p, s == 0 ? "connect" : "message", end[i], step[i]);
      all_ok &= k->ctl[end[i]].fd >= 0 && strcmp(step[i], "ok") == 0;
    }
    if (s == 1)
      break;
    for (int i = 0; i < 2; i++)
      if (k->ctl[end[i]].fd >= 0 &&
          send_text(&k->ctl[end[i]], DOCTOR_MSG_STEP, all_ok ? "go" : "stop", o->timeout_s) != 0)
        lost(k, end[i], "go or stop", -EPIPE);
    if (!all_ok) {
      if (p->ok) /* both said "skip" without a reason: cannot happen, but never report a bare ok */
        fail_pair(p, "connect", -1, "the pair did not connect");
      return;
    }
  }
}

static void coord_verdicts(struct coord *k)
{
  static char lines[64][FLEET_LINE * 2];
  char text[DOCTOR_CTL_MAX];

  for (int r = 0; r < k->f.n; r++) {
    int nl, len;

    if (k->ctl[r].fd < 0)
      continue;
    if (!k->f.node[r].problems) {
      send_text(&k->ctl[r], DOCTOR_MSG_FLEET_CMD, "verdict healthy", k->o->timeout_s);
      continue;
    }
    nl = doctor_fleet_node_lines(&k->f, r, lines, 64);
    len = snprintf(text, sizeof(text), "verdict problems");
    for (int i = 0; i < nl && len < (int)sizeof(text) - 8; i++)
      len += snprintf(text + len, sizeof(text) - (size_t)len, "\n  %s", lines[i]);
    if (len >= (int)sizeof(text))
      len = (int)sizeof(text) - 1;
    doctor_ctl_send(&k->ctl[r], DOCTOR_MSG_FLEET_CMD, text, (size_t)len, k->o->timeout_s);
  }
}

static int coordinator(const struct doctor_opts *o, const struct fleet_conf *fc, int port)
{
  struct coord k;
  char bound[MCP_SOCKADDR_STRLEN], msg[MCP_SOCK_MSGLEN], self[300];
  int lfd = -1, bport = 0, status = DOCTOR_EXIT_FAIL, *ndev = NULL, cap, named;
  pid_t child;

  memset(&k, 0, sizeof(k));
  k.o = o;
  k.f.n = fc->nodes;
  k.f.node = calloc((size_t)k.f.n, sizeof(*k.f.node));
  k.ctl = calloc((size_t)k.f.n, sizeof(*k.ctl));
  k.gone = calloc((size_t)k.f.n, sizeof(*k.gone));
  ndev = calloc((size_t)k.f.n, sizeof(*ndev));
  if (k.f.node == NULL || k.ctl == NULL || k.gone == NULL || ndev == NULL) {
    fputs("mcpnet-doctor: out of memory\n", stderr);
    goto out;
  }
  for (int r = 0; r < k.f.n; r++)
    k.ctl[r].fd = -1;
  if (doctor_ctl_listen(o->bind, port, &lfd, bound, sizeof(bound), &bport, msg, sizeof(msg)) != 0) {
    fprintf(stderr, "mcpnet-doctor: fleet node 0 cannot listen on port %d: %s\n", port, msg);
    goto out;
  }
  fprintf(stderr, "mcpnet-doctor: fleet node 0 listening on %s for %d nodes, up to %d s\n", bound, k.f.n,
          o->wait_s);
  fflush(stdout);
  fflush(stderr);
  /* Rank 0's own member runs in a child, so node 0 takes part in pairs like any node. */
  child = fork();
  if (child == 0) {
    struct fleet_conf mine = *fc;

    close(lfd);
    mine.rank = 0;
    if (o->bind != NULL && strchr(o->bind, ':') != NULL)
      snprintf(self, sizeof(self), "[%s]:%d", o->bind, bport);
    else
      snprintf(self, sizeof(self), "%s:%d", o->bind != NULL ? o->bind : "127.0.0.1", bport);
    _exit(member_run(o, &mine, self, 1));
  }
  if (child < 0)
    fprintf(stderr, "mcpnet-doctor: fleet: cannot start node 0's own member: %s\n", strerror(errno));
  coord_collect(&k, lfd);
  close(lfd);
  lfd = -1;
  for (int r = 0; r < k.f.n; r++)
    ndev[r] = k.f.node[r].present ? k.f.node[r].ndev : -1;
  cap = 1;
  for (int r = 0; r < k.f.n; r++)
    if (ndev[r] > cap)
      cap = ndev[r];
  cap = doctor_fleet_pairs_cap(k.f.n, cap);
  k.f.pair = calloc((size_t)cap, sizeof(*k.f.pair));
  if (k.f.pair == NULL || (k.f.npair = doctor_fleet_pairs(k.f.n, ndev, k.f.pair, cap)) < 0) {
    fputs("mcpnet-doctor: out of memory\n", stderr);
    k.f.npair = 0;
    goto out;
  }
  for (int i = 0; i < k.f.npair; i++) {
    if (o->verbose)
      fprintf(stderr, "mcpnet-doctor: fleet: pair %d of %d: node %d and node %d on rail %d\n", i + 1,
              k.f.npair, k.f.pair[i].a, k.f.pair[i].b, k.f.pair[i].rail);
    coord_pair(&k, &k.f.pair[i]);
  }
  named = doctor_fleet_attribute(&k.f);
  if (o->json)
    doctor_fleet_table_json(&k.f, stdout);
  else
    doctor_fleet_table_text(&k.f, stdout);
  fflush(stdout);
  coord_verdicts(&k);
  status = named == 0 ? DOCTOR_EXIT_OK : DOCTOR_EXIT_FAIL;
  for (int r = 0; r < k.f.n; r++)
    doctor_ctl_close(&k.ctl[r]);
  if (child > 0) {
    if (!k.f.node[0].present)
      kill(child, SIGTERM); /* it never reached us; do not leave it retrying */
    waitpid(child, NULL, 0);
  }
out:
  free(k.f.node);
  free(k.f.pair);
  free(k.ctl);
  free(k.gone);
  free(ndev);
  return status;
}

/* ---- Entry ------------------------------------------------------------------------------------ */

static const char *env(const char *name) { return getenv(name); }

int doctor_fleet_main(const struct doctor_opts *o, const struct fleet_opts *fo)
{
  struct fleet_conf fc;
  char err[600];
  int port;

  if (doctor_fleet_resolve(fo, env, &fc, err, sizeof(err)) != 0) {
    fprintf(stderr, "mcpnet-doctor: %s\n", err);
    return DOCTOR_EXIT_USAGE;
  }
  if (doctor_ctl_run_token("mcpnet-doctor", "--fleet", NULL, 0) != 0)
    return DOCTOR_EXIT_USAGE;
  if (fc.rank != 0)
    return member_run(o, &fc, fc.coordinator, 0);
  if ((port = doctor_fleet_listen_port(&fc, o->port, err, sizeof(err))) < 0) {
    fprintf(stderr, "mcpnet-doctor: %s\n", err);
    return DOCTOR_EXIT_USAGE;
  }
  return coordinator(o, &fc, port);
}
