/*
 * doctor_pair.c - the two-node check: `--listen` on one host, `--peer HOST` on the
 * other. In order, each step bounded by --timeout and reported whichever way it ends:
 *   1. the TCP control connection (a refusal, silence or no route is the finding);
 *   2. both summaries swapped and compared (doctor_summary.c);
 *   3. the plugin loaded as NCCL loads it, its listen handles swapped, and a send and
 *      a receive comm connected through its own handshake (connect/accept polled from
 *      one thread, as NCCL's proxy does);
 *   4. one message each way, filled with a pattern and checked byte by byte;
 *   5. bandwidth (the --peer side sends, pipelined DEPTH deep) and latency (ping-pong
 *      of 8 bytes) for about --seconds, in rounds the peer side announces over the
 *      control connection so both know how many messages to expect.
 * The peer side measures and sends the figures to the listener; both print them.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor_ctl.h"
#include "core/text.h"
#include "doctor_plugin.h"
#include "conn/wire.h"

#define DEPTH 8
#define LAT_SIZE 8
#define MAX_ROUND_MSGS 200000L
#define SEED_LISTENER 0xa5
#define SEED_PEER 0x5a

struct pair {
  struct doctor_report *r;
  const struct doctor_opts *o;
  struct doctor_ctl ctl;
  int listener;
  struct doctor_plugin pl;
  size_t size;
  uint8_t *sbuf, *rbuf; /* DEPTH slots of size bytes each */
  void *smh, *rmh;
  char them[128];                /* "host lab-b (192.0.2.2)" */
  char oob[MCP_SOCKADDR_STRLEN]; /* the peer plugin's out-of-band listener */
  int oob_port;
};

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
  for (size_t i = 0; i < len; i++)
    buf[i] = (uint8_t)(((i * 2654435761u) >> 13) ^ seed ^ (i >> 10));
}

/* How many bytes differ from the pattern; *first gets the first such offset. */
static size_t check(const uint8_t *buf, size_t len, unsigned seed, size_t *first)
{
  size_t bad = 0;

  for (size_t i = 0; i < len; i++) {
    if (buf[i] != (uint8_t)(((i * 2654435761u) >> 13) ^ seed ^ (i >> 10))) {
      if (bad++ == 0)
        *first = i;
    }
  }
  return bad;
}

/* ---- The data path through the plugin ---------------------------------------------------- */

static int req_test(struct pair *p, void **req, int *size, char *err, size_t len)
{
  int done = 0;

  if (drv_test(&p->pl.d, *req, &done, size) != ncclSuccess) {
    snprintf(err, len, "test failed: %s", doctor_plugin_warnings());
    return -1;
  }
  if (done)
    *req = NULL;
  return done;
}

static int try_send(struct pair *p, uint8_t *buf, size_t n, void **req, char *err, size_t len)
{
  if (drv_isend(&p->pl.d, p->pl.sc, buf, n, 0, p->smh, req) != ncclSuccess) {
    snprintf(err, len, "isend failed: %s", doctor_plugin_warnings());
    return -1;
  }
  return *req != NULL;
}

static int try_recv(struct pair *p, uint8_t *buf, size_t n, void **req, char *err, size_t len)
{
  void *data[1] = {buf}, *mh[1] = {p->rmh};
  size_t sizes[1] = {n};
  int tags[1] = {0};

  if (drv_irecv(&p->pl.d, p->pl.rc, 1, data, sizes, tags, mh, req) != ncclSuccess) {
    snprintf(err, len, "irecv failed: %s", doctor_plugin_warnings());
    return -1;
  }
  return *req != NULL;
}

/* Streams n messages DEPTH deep, as sender or receiver; *secs is the sender's time. */
static int stream(struct pair *p, int send, long n, size_t size, double *secs, int *last_size, char *err,
                  size_t len)
{
  void *req[DEPTH] = {0};
  long posted = 0, done = 0;
  double t0 = drv_now(), progress = t0;

  while (done < n) {
    int rc = 0;

    if (posted < n && posted - done < DEPTH) {
      uint8_t *slot = (send ? p->sbuf : p->rbuf) + (size_t)(posted % DEPTH) * p->size;

      rc = send ? try_send(p, slot, size, &req[posted % DEPTH], err, len)
                : try_recv(p, slot, size, &req[posted % DEPTH], err, len);
      if (rc < 0)
        return -1;
      posted += rc;
    }
    if (done < posted) {
      rc = req_test(p, &req[done % DEPTH], last_size, err, len);
      if (rc < 0)
        return -1;
      if (rc > 0) {
        done++;
        progress = drv_now();
      }
    }
    if (drv_now() - progress > p->o->timeout_s) {
      snprintf(err, len, "no progress for %d s after %ld of %ld messages (%s)", p->o->timeout_s, done, n,
               send ? "the receiver stopped posting buffers, or data is lost" : "no data arrives");
      return -1;
    }
    if (rc == 0)
      sched_yield();
  }
  if (secs != NULL)
    *secs = drv_now() - t0;
  return 0;
}

/* One message each way, both posted before either is awaited. */
static int exchange(struct pair *p, size_t size, char *err, size_t len)
{
  void *sreq = NULL, *rreq = NULL;
  int sent = 0, got = 0, rsize = -1, rc;
  double deadline = drv_now() + p->o->timeout_s;

  while ((rc = try_recv(p, p->rbuf, size, &rreq, err, len)) == 0)
    if (drv_now() > deadline)
      break;
  if (rc < 0)
    return -1;
  while (!sent || !got) {
    if (sreq == NULL && !sent && (rc = try_send(p, p->sbuf, size, &sreq, err, len)) < 0)
      return -1;
    if (sreq != NULL && (rc = req_test(p, &sreq, NULL, err, len)) != 0) {
      if (rc < 0)
        return -1;
      sent = 1;
    }
    if (rreq != NULL && (rc = req_test(p, &rreq, &rsize, err, len)) != 0) {
      if (rc < 0)
        return -1;
      got = 1;
    }
    if (drv_now() > deadline) {
      snprintf(err, len, "the %s did not complete within %d s", !sent ? "send" : "receive", p->o->timeout_s);
      return -1;
    }
    sched_yield();
  }
  if (rsize != (int)size) {
    snprintf(err, len, "received %d bytes, expected %zu", rsize, size);
    return -1;
  }
  return 0;
}

static int setup_buffers(struct pair *p, char *err, size_t len)
{
  size_t bytes = (size_t)DEPTH * p->size;

  p->sbuf = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
  p->rbuf = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
  if (p->sbuf == NULL || p->rbuf == NULL) {
    snprintf(err, len, "out of memory for 2 x %zu bytes", bytes);
    return -1;
  }
  memset(p->rbuf, 0, bytes);
  for (int i = 0; i < DEPTH; i++)
    fill(p->sbuf + (size_t)i * p->size, p->size, p->listener ? SEED_LISTENER : SEED_PEER);
  if (drv_regmr(&p->pl.d, p->pl.sc, p->sbuf, bytes, &p->smh) != ncclSuccess ||
      drv_regmr(&p->pl.d, p->pl.rc, p->rbuf, bytes, &p->rmh) != ncclSuccess) {
    snprintf(err, len, "registering 2 x %zu bytes failed: %s", bytes, doctor_plugin_warnings());
    return -1;
  }
  return 0;
}

static void free_buffers(struct pair *p)
{
  if (p->smh != NULL)
    drv_deregmr(&p->pl.d, p->pl.sc, p->smh);
  if (p->rmh != NULL)
    drv_deregmr(&p->pl.d, p->pl.rc, p->rmh);
  free(p->sbuf);
  free(p->rbuf);
  p->smh = p->rmh = NULL;
  p->sbuf = p->rbuf = NULL;
}

/* ---- Steps both sides run in step ---------------------------------------------------------- */

/* Swap a step's outcome: 0 when both succeeded. The peer's failure lands in peer_err. */
static int step_swap(struct pair *p, const char *mine, char *peer_err, size_t len)
{
  char buf[1024];
  size_t n = 0;
  int rc = doctor_ctl_send(&p->ctl, DOCTOR_MSG_STEP, mine, strlen(mine), p->o->timeout_s);

  if (rc == 0)
    rc = doctor_ctl_recv(&p->ctl, DOCTOR_MSG_STEP, buf, sizeof(buf) - 1, &n, p->o->timeout_s * 2);
  if (rc != 0) {
    snprintf(peer_err, len, "the control connection to %s broke (%s)", p->them, strerror(-rc));
    return -1;
  }
  buf[n] = '\0';
  snprintf(peer_err, len, "%s", buf);
  return strcmp(mine, "ok") == 0 && strcmp(buf, "ok") == 0 ? 0 : -1;
}

static void say_listening(const char *addr, void *arg)
{
  const struct doctor_opts *o = arg;

  if (o->drawn_token[0] != '\0')
    fprintf(stderr,
            "mcpnet-doctor: listening on %s for up to %d s: run\n  %s=%s mcpnet-doctor --peer THIS_HOST:%d\n"
            "on the other host (a doctor without this run's token is ignored)\n",
            addr, o->wait_s, DOCTOR_TOKEN_ENV, o->drawn_token, o->port);
  else
    fprintf(stderr,
            "mcpnet-doctor: listening on %s for up to %d s: run mcpnet-doctor --peer THIS_HOST:%d "
            "on the other host, with the same %s\n",
            addr, o->wait_s, o->port, DOCTOR_TOKEN_ENV);
}

static int control_connect(struct pair *p)
{
  struct doctor_report *r = p->r;
  const struct doctor_opts *o = p->o;
  char fix[512];

  if (p->listener) {
    if (doctor_ctl_accept(&p->ctl, o->bind, o->port, o->wait_s, say_listening, (void *)o) != 0) {
      doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "control", NULL,
                 "start mcpnet-doctor --peer THIS_HOST on the other host within --wait seconds, and "
                 "check that its connection reaches this port (firewall)",
                 "%s", p->ctl.msg);
      return -1;
    }
    snprintf(r->pair.peer_addr, sizeof(r->pair.peer_addr), "%s", p->ctl.peer);
    return 0;
  }
  if (doctor_ctl_connect(&p->ctl, o->peer, o->port, o->timeout_s) == 0) {
    snprintf(r->pair.peer_addr, sizeof(r->pair.peer_addr), "%s", p->ctl.peer);
    return 0;
  }
  switch (p->ctl.fail) {
  case DOCTOR_CTL_REFUSED:
    snprintf(fix, sizeof(fix),
             "start mcpnet-doctor --listen --port %d on that host first (or give "
             "--peer HOST:PORT with the port it listens on)",
             p->ctl.port);
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "refused", p->ctl.peer, fix,
               "nothing listens on %s: the connection was refused", p->ctl.peer);
    break;
  case DOCTOR_CTL_NO_ANSWER:
    snprintf(fix, sizeof(fix),
             "open TCP port %d on the path to that host (its nft/iptables rules, "
             "security groups) and check the route (ip route get ADDRESS); the plugin's own ports "
             "(MCPNET_OOB_PORT_RANGE) need the same",
             p->ctl.port);
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "no-answer", p->ctl.peer, fix,
               "no answer from %s within %.1f s: a firewall or routing problem drops traffic to TCP "
               "port %d",
               p->ctl.peer, p->ctl.elapsed, p->ctl.port);
    break;
  case DOCTOR_CTL_UNREACHABLE:
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "unreachable", p->ctl.peer,
               "check the address and this host's routes (ip route get ADDRESS), and "
               "NCCL_SOCKET_IFNAME on both hosts",
               "%s", p->ctl.msg);
    break;
  case DOCTOR_CTL_AUTH:
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "token", p->ctl.peer,
               "give both sides the same MCPNET_DOCTOR_TOKEN (the one mcpnet-doctor --listen printed, or the "
               "job's)",
               "%s", p->ctl.msg);
    break;
  default:
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "control", o->peer, "check the address given to --peer", "%s",
               p->ctl.msg);
    break;
  }
  return -1;
}

static int swap_summaries(struct pair *p)
{
  struct doctor_report *r = p->r;
  char buf[DOCTOR_CTL_MAX];
  size_t n = 0;
  int len, rc;

  doctor_summary_fill(r, p->o->dev, &r->pair.local);
  len = doctor_summary_encode(&r->pair.local, buf, sizeof(buf));
  rc = len < 0 ? -EMSGSIZE : doctor_ctl_send(&p->ctl, DOCTOR_MSG_SUMMARY, buf, (size_t)len, p->o->timeout_s);
  if (rc == 0)
    rc = doctor_ctl_recv(&p->ctl, DOCTOR_MSG_SUMMARY, buf, sizeof(buf) - 1, &n, p->o->timeout_s);
  if (rc == 0) {
    buf[n] = '\0';
    rc = doctor_summary_decode(buf, &r->pair.peer) == 0 ? 0 : -EBADMSG;
  }
  if (rc != 0) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "control", p->ctl.peer,
               "run the same mcpnet-doctor version on both hosts; check that neither was stopped",
               "no summary from %s: %s", p->ctl.peer,
               rc == -EBADMSG || rc == -EPROTO ? "it is not a "
                                                 "doctor of this version"
                                               : strerror(-rc));
    return -1;
  }
  r->pair.have_peer = 1;
  snprintf(p->them, sizeof(p->them), "host %.63s (%.56s)", r->pair.peer.host, p->ctl.peer);
  doctor_summary_compare(r, &r->pair.local, &r->pair.peer);
  return 0;
}

/* The plugin loaded, listening, handles swapped, comms connected. */
static int plugin_connect(struct pair *p)
{
  struct doctor_report *r = p->r;
  uint8_t mine[1 + NCCL_NET_HANDLE_MAXSIZE + 512], theirs[sizeof(mine)];
  char err[1024] = "", peer_err[1024], fix[512];
  size_t n = 0;
  int rc;

  doctor_config_export_nccl_conf(r);
  memset(mine, 0, sizeof(mine));
  if (doctor_plugin_open(&p->pl, p->o, err, sizeof(err)) == 0 &&
      doctor_plugin_listen(&p->pl, p->o->dev, mine + 1, err, sizeof(err)) == 0)
    mine[0] = 1;
  else
    snprintf((char *)mine + 1, sizeof(mine) - 1, "%.600s", err);
  snprintf(r->pair.plugin_path, sizeof(r->pair.plugin_path), "%s", p->pl.path);
  rc = doctor_ctl_send(&p->ctl, DOCTOR_MSG_HANDLE, mine, sizeof(mine), p->o->timeout_s);
  if (rc == 0)
    rc = doctor_ctl_recv(&p->ctl, DOCTOR_MSG_HANDLE, theirs, sizeof(theirs), &n, p->o->timeout_s * 2);
  if (!mine[0])
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "plugin", p->pl.path,
               "run mcpnet-doctor without --listen/--peer here and fix what it reports", "%s", err);
  if (rc != 0 || n != sizeof(theirs)) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "control", p->them,
               "check whether the other side is still running", "no plugin handle from %s: %s", p->them,
               rc ? strerror(-rc) : "short message");
    return -1;
  }
  if (!theirs[0]) {
    theirs[sizeof(theirs) - 1] = '\0';
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "plugin", p->them,
               "read the other host's report: it names the cause", "the plugin on %s cannot start: %s",
               p->them, (char *)theirs + 1);
  }
  if (!mine[0] || !theirs[0])
    return -1;
  {
    struct mcp_wire_handle h;
    union mcp_sockaddr a;
    char werr[MCP_WIRE_ERRLEN];

    if (mcp_wire_handle_decode(theirs + 1, &h, werr, sizeof(werr)) == 0) {
      mcp_wire_handle_get_sockaddr(&h, &a);
      mcp_sockaddr_format(&a, p->oob, sizeof(p->oob));
      p->oob_port = h.port;
    }
  }
  rc = doctor_plugin_connect(&p->pl, p->o->dev, theirs + 1, p->o->timeout_s, err, sizeof(err));
  if (step_swap(p, rc == 0 ? "ok" : err, peer_err, sizeof(peer_err)) == 0) {
    r->pair.connected = 1;
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_PEER, "handshake", p->them, NULL,
               "connected to %s through the plugin's own handshake (%s here, %s there; its "
               "out-of-band listener %s)",
               p->them, p->pl.props.name ? p->pl.props.name : "?", r->pair.peer.dev, p->oob);
    return 0;
  }
  if (p->oob_port > 0)
    snprintf(fix, sizeof(fix),
             "if a firewall sits between the hosts, open the plugin's out-of-band "
             "ports (set MCPNET_OOB_PORT_RANGE on both hosts and open it; here TCP %d), and check that "
             "NCCL_SOCKET_IFNAME picks an interface the other host reaches",
             p->oob_port);
  else
    snprintf(fix, sizeof(fix), "read the message; NCCL_DEBUG=INFO on a real job shows the same");
  if (rc != 0)
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "handshake", p->them, fix,
               "the plugin's handshake with %s (its out-of-band listener %s) failed here: %s", p->them,
               p->oob[0] ? p->oob : "?", err);
  else
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "handshake", p->them, fix,
               "the plugin's handshake failed on %s: %s", p->them, peer_err);
  return -1;
}

static int verified_message(struct pair *p)
{
  struct doctor_report *r = p->r;
  char err[1024] = "", peer_err[1024];
  size_t first = 0, bad;
  int rc = setup_buffers(p, err, sizeof(err));

  if (rc == 0)
    rc = exchange(p, p->size, err, sizeof(err));
  if (rc == 0 && (bad = check(p->rbuf, p->size, p->listener ? SEED_PEER : SEED_LISTENER, &first)) > 0) {
    snprintf(err, sizeof(err),
             "the message from %s arrived with %zu of %zu bytes wrong, the first at "
             "offset %zu",
             p->them, bad, p->size, first);
    rc = -1;
  }
  if (step_swap(p, rc == 0 ? "ok" : err, peer_err, sizeof(peer_err)) == 0) {
    r->pair.verified = 1;
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_PEER, "message", p->them, NULL,
               "a %zu-byte message went each way and arrived intact", p->size);
    return 0;
  }
  doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "message", p->them,
             "compare with perftest between the same GIDs (ib_write_bw -x GID_INDEX on both hosts); "
             "check MTU, P_Key and the fabric's lossless settings",
             "moving a message between the hosts failed %s: %s", rc != 0 ? "here" : "there",
             rc != 0 ? err : peer_err);
  return -1;
}

/* ---- Measurement: the --peer side leads ----------------------------------------------------- */

static int plan(struct pair *p, const char *text)
{
  return doctor_ctl_send(&p->ctl, DOCTOR_MSG_PLAN, text, strlen(text), p->o->timeout_s);
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return x < y ? -1 : x > y;
}

/* Posts until the peer's side lets it through: 0, or -1 with err (also at the deadline). */
static int post_until(struct pair *p, int send, uint8_t *buf, size_t n, void **req, double deadline,
                      char *err, size_t len)
{
  int rc;

  while ((rc = send ? try_send(p, buf, n, req, err, len) : try_recv(p, buf, n, req, err, len)) == 0) {
    if (drv_now() > deadline) {
      snprintf(err, len, "a %s could not be posted within %d s", send ? "send" : "receive", p->o->timeout_s);
      return -1;
    }
  }
  return rc < 0 ? -1 : 0;
}

static int wait_until(struct pair *p, void **req, int *size, double deadline, const char *what, char *err,
                      size_t len)
{
  int rc;

  while ((rc = req_test(p, req, size, err, len)) == 0) {
    if (drv_now() > deadline) {
      snprintf(err, len, "a %s did not complete within %d s", what, p->o->timeout_s);
      return -1;
    }
  }
  return rc < 0 ? -1 : 0;
}

static int ping(struct pair *p, double *rtt, char *err, size_t len)
{
  void *sreq = NULL, *rreq = NULL;
  double t0 = drv_now(), deadline = t0 + p->o->timeout_s;

  if (post_until(p, 0, p->rbuf, LAT_SIZE, &rreq, deadline, err, len) != 0 ||
      post_until(p, 1, p->sbuf, LAT_SIZE, &sreq, deadline, err, len) != 0 ||
      wait_until(p, &sreq, NULL, deadline, "ping", err, len) != 0 ||
      wait_until(p, &rreq, NULL, deadline, "pong", err, len) != 0)
    return -1;
  *rtt = drv_now() - t0;
  return 0;
}

static int pong(struct pair *p, char *err, size_t len)
{
  void *req = NULL;
  double deadline = drv_now() + p->o->timeout_s;

  if (post_until(p, 0, p->rbuf, LAT_SIZE, &req, deadline, err, len) != 0 ||
      wait_until(p, &req, NULL, deadline, "ping", err, len) != 0 ||
      post_until(p, 1, p->sbuf, LAT_SIZE, &req, deadline, err, len) != 0 ||
      wait_until(p, &req, NULL, deadline, "pong", err, len) != 0)
    return -1;
  return 0;
}

static long next_count(long n, double secs, double budget)
{
  double rate = secs > 0 ? (double)n / secs : (double)n;
  long want = (long)(rate * budget);

  return want < 4 ? 4 : want > MAX_ROUND_MSGS ? MAX_ROUND_MSGS : want;
}

static int lead(struct pair *p, char *err, size_t len)
{
  struct doctor_pair_result *res = &p->r->pair;
  double bw_budget = p->o->seconds * 0.7, lat_budget = p->o->seconds * 0.3, secs = 0, *rtt = NULL;
  char text[128], peer_err[512];
  long n = 4, total = 0;
  double total_secs = 0;
  int last = 0;

  /* Bandwidth: a short round to learn the rate, then one that fills the budget; the
   * figure counts both. */
  for (int round = 0; round < 2; round++) {
    snprintf(text, sizeof(text), "bw %ld %zu", n, p->size);
    if (plan(p, text) != 0 || stream(p, 1, n, p->size, &secs, &last, err, len) != 0)
      return -1;
    if (step_swap(p, "ok", peer_err, sizeof(peer_err)) != 0) {
      snprintf(err, len, "the receiver on %s: %s", p->them, peer_err);
      return -1;
    }
    total += n;
    total_secs += secs;
    res->bw_msgs = total;
    res->bw_seconds = total_secs;
    res->bw_size = p->size;
    res->bw_mbs = (double)total * (double)p->size / total_secs / 1e6;
    if (total_secs >= bw_budget * 0.8)
      break;
    n = next_count(n, secs, bw_budget - total_secs);
  }
  /* Latency: the same, with round trips of LAT_SIZE bytes. */
  n = 10;
  for (int round = 0; round < 2; round++) {
    double t0 = drv_now();

    free(rtt);
    rtt = calloc((size_t)n, sizeof(*rtt));
    snprintf(text, sizeof(text), "lat %ld", n);
    if (rtt == NULL || plan(p, text) != 0)
      goto fail;
    for (long i = 0; i < n; i++)
      if (ping(p, &rtt[i], err, len) != 0)
        goto fail;
    secs = drv_now() - t0;
    qsort(rtt, (size_t)n, sizeof(*rtt), cmp_double);
    res->lat_us = rtt[n / 2] * 1e6 / 2.0;
    res->lat_rounds = n;
    if (secs >= lat_budget * 0.8)
      break;
    n = next_count(n, secs, lat_budget - secs);
  }
  free(rtt);
  snprintf(text, sizeof(text),
           "bw_mbs=%.4f\nbw_size=%zu\nbw_msgs=%ld\nbw_seconds=%.4f\nlat_us=%.3f\nlat_rounds=%ld\n",
           res->bw_mbs, res->bw_size, res->bw_msgs, res->bw_seconds, res->lat_us, res->lat_rounds);
  if (plan(p, "end") != 0 ||
      doctor_ctl_send(&p->ctl, DOCTOR_MSG_RESULT, text, strlen(text), p->o->timeout_s) != 0) {
    snprintf(err, len, "the control connection to %s broke", p->them);
    return -1;
  }
  return 0;
fail:
  free(rtt);
  return -1;
}

int doctor_plan_parse(const char *text, size_t max_size, long *count, size_t *size)
{
  char tail;

  *count = 0;
  *size = 0;
  if (strcmp(text, "end") == 0)
    return DOCTOR_PLAN_END;
  /* A count the other side could never have meant (or one that would index the ring
   * backwards) is refused like an unknown plan. */
  if (sscanf(text, "bw %ld %zu%c", count, size, &tail) == 2 && *count >= 1 &&
      *count <= DOCTOR_PLAN_MAX_COUNT && *size <= max_size)
    return DOCTOR_PLAN_BW;
  if (sscanf(text, "lat %ld%c", count, &tail) == 1 && *count >= 1 && *count <= DOCTOR_PLAN_MAX_COUNT)
    return DOCTOR_PLAN_LAT;
  return DOCTOR_PLAN_BAD;
}

static int follow(struct pair *p, char *err, size_t len)
{
  struct doctor_pair_result *res = &p->r->pair;
  char text[512], peer_err[512];
  size_t n = 0;

  for (;;) {
    long count = 0;
    size_t size = 0;
    int kind,
      rc = doctor_ctl_recv(&p->ctl, DOCTOR_MSG_PLAN, text, sizeof(text) - 1, &n, p->o->timeout_s + 60);

    if (rc != 0) {
      snprintf(err, len, "no plan from %s: %s", p->them, strerror(-rc));
      return -1;
    }
    text[n] = '\0';
    if (doctor_plan_parse(text, p->size, &count, &size) == DOCTOR_PLAN_END)
      break;
    kind = doctor_plan_parse(text, p->size, &count, &size);
    if (kind == DOCTOR_PLAN_BW) {
      int last = 0;
      size_t first = 0;

      rc = stream(p, 0, count, size, NULL, &last, err, len);
      if (rc == 0 &&
          (last != (int)size ||
           check(p->rbuf + (size_t)((count - 1) % DEPTH) * p->size, size, SEED_PEER, &first) != 0)) {
        snprintf(err, len, "message %ld of %ld arrived wrong (%d bytes, first bad byte at %zu)", count, count,
                 last, first);
        rc = -1;
      }
      if (step_swap(p, rc == 0 ? "ok" : err, peer_err, sizeof(peer_err)) != 0)
        return -1;
    } else if (kind == DOCTOR_PLAN_LAT) {
      for (long i = 0; i < count; i++)
        if (pong(p, err, len) != 0)
          return -1;
    } else {
      char shown[160];

      snprintf(err, len, "unknown plan '%s' from %s", mcp_text_escape(text, n, shown, sizeof(shown)),
               p->them);
      return -1;
    }
  }
  if (doctor_ctl_recv(&p->ctl, DOCTOR_MSG_RESULT, text, sizeof(text) - 1, &n, p->o->timeout_s) == 0) {
    text[n] = '\0';
    sscanf(text, "bw_mbs=%lf\nbw_size=%zu\nbw_msgs=%ld\nbw_seconds=%lf\nlat_us=%lf\nlat_rounds=%ld",
           &res->bw_mbs, &res->bw_size, &res->bw_msgs, &res->bw_seconds, &res->lat_us, &res->lat_rounds);
  }
  return 0;
}

static void measure(struct pair *p)
{
  struct doctor_report *r = p->r;
  struct doctor_pair_result *res = &r->pair;
  char err[1024] = "";
  int rc = p->listener ? follow(p, err, sizeof(err)) : lead(p, err, sizeof(err));

  if (rc != 0) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "measure", p->them,
               "compare with perftest between the same GIDs (ib_write_bw) and look for packet loss "
               "(rdma statistic show; switch counters)",
               "measuring against %s failed: %s", p->them, err);
    return;
  }
  if (res->bw_mbs <= 0)
    return;
  doctor_add(r, DOCTOR_OK, DOCTOR_SEC_PEER, "performance", p->them, NULL,
             "bandwidth %.2f MB/s with %zu-byte messages (%ld in %.2f s, host %s to host %s), latency "
             "%.1f us one-way (%d bytes, median of %ld round trips)",
             res->bw_mbs, res->bw_size, res->bw_msgs, res->bw_seconds,
             p->listener ? res->peer.host : res->local.host, p->listener ? res->local.host : res->peer.host,
             res->lat_us, LAT_SIZE, res->lat_rounds);
}

void doctor_pair_run(struct doctor_report *r)
{
  struct pair *p = calloc(1, sizeof(*p));

  if (p == NULL)
    return;
  p->r = r;
  p->o = r->o;
  p->listener = r->o->listen;
  p->size = r->o->size;
  p->ctl.fd = -1;
  r->pair.ran = 1;
  if (control_connect(p) == 0) {
    snprintf(p->them, sizeof(p->them), "%s", p->ctl.peer);
    if (swap_summaries(p) == 0 && plugin_connect(p) == 0 && verified_message(p) == 0)
      measure(p);
  }
  free_buffers(p);
  doctor_plugin_close(&p->pl);
  doctor_ctl_close(&p->ctl);
  free(p);
}
