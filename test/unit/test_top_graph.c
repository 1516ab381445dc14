/*
 * test_top_graph.c - mcpnet-top's conclusions on synthetic views (tools/top/top_graph.c
 * and its text, wire and Prometheus forms): what each comm is doing (idle, moving,
 * waiting, untested, setting up, recovering, failed) and when that counts as a wait;
 * the sentences a node's verdict says; where every waiting chain of a fleet ends (a
 * stopped rank, a rank that does not call NCCL, a link, a peer nobody reported, a
 * cycle, a chain through a blocked rank); the view carried to node 0 and back, trusting
 * nothing; and Prometheus series bounded per peer node and device.
 */
#include <stdlib.h>
#include <string.h>

#include "mcp_test.h"
#include "top.h"

static struct top_proc *add_proc(struct top_view *v, const char *host, unsigned pid, int rank)
{
  struct top_proc *p;

  /* Room for every process and comm a test makes, so pointers to them stay valid. */
  if (v->proc == NULL)
    v->proc = calloc(8, sizeof(*v->proc));
  p = &v->proc[v->nproc++];
  memset(p, 0, sizeof(*p));
  p->comm = calloc(16, sizeof(*p->comm));
  snprintf(p->host, sizeof(p->host), "%s", host);
  snprintf(p->name, sizeof(p->name), "train");
  snprintf(p->addr, sizeof(p->addr), "192.0.2.%u:41000", pid / 100);
  p->pid = pid;
  p->rank = rank;
  p->local_rank = -1;
  p->pstate = 'S';
  p->check_age_s = 0.1;
  return p;
}

/* A connected comm of p toward (peer_host, peer_pid), idle, its streams as given. */
static struct top_comm *add_comm(struct top_proc *p, int kind, unsigned stream, const char *peer_host,
                                 unsigned peer_pid, unsigned peer_stream)
{
  struct top_comm *c;

  c = &p->comm[p->ncomm++];
  memset(c, 0, sizeof(*c));
  c->kind = kind;
  c->stream = stream;
  c->peer_stream = peer_stream;
  snprintf(c->peer_host, sizeof(c->peer_host), "%s", peer_host);
  c->peer_pid = peer_pid;
  snprintf(c->peer_addr, sizeof(c->peer_addr), "192.0.2.%u", peer_pid / 100);
  snprintf(c->ibdev, sizeof(c->ibdev), "rxe0");
  c->port = 1;
  c->state = MCP_STATUS_READY;
  c->posted = c->done = 100;
  c->bytes = 100 * 4096;
  c->check_age_s = -1;
  c->stall_s = -1;
  c->idle_done_s = -1;
  return c;
}

/* It waits on its peer: work posted, checked 0.1 s ago, no progress for `secs`. */
static void waiting(struct top_comm *c, int wait, double secs)
{
  c->posted = c->done + 8;
  c->check_age_s = 0.1;
  c->stall_s = secs;
  c->idle_done_s = secs;
  c->wait = wait;
  c->wait_seq = 101;
  snprintf(c->wait_text, sizeof(c->wait_text), "%s",
           wait == MCP_WAIT_CTS
             ? "the send of seq 101 waits for its receive buffer, which was never advertised by "
               "the peer (no clear-to-send): the peer has not posted the matching irecv"
             : "8 receive(s) advertised to the peer but no data arrived (oldest seq 101, 1 "
               "buffer(s)): the peer has not sent to them");
}

static void view_init(struct top_view *v, const char *host)
{
  memset(v, 0, sizeof(*v));
  snprintf(v->host, sizeof(v->host), "%s", host);
  v->sample_s = 1.0;
}

static void test_classify(void)
{
  struct top_view v;
  struct top_proc *p;
  struct top_comm *c[9];
  char says[1000];

  view_init(&v, "lab-a");
  p = add_proc(&v, "lab-a", 100, 0);
  c[0] = add_comm(p, 1, 1, "lab-b", 200, 11); /* idle */
  c[1] = add_comm(p, 1, 2, "lab-b", 200, 12); /* moving: counters changed between the reads */
  c[1]->posted += 3;
  c[1]->moved = 1;
  c[2] = add_comm(p, 1, 3, "lab-b", 200, 13);
  waiting(c[2], MCP_WAIT_CTS, 12);
  c[2]->posted = c[2]->done;                  /* an isend without a clear-to-send holds no request */
  c[3] = add_comm(p, 2, 4, "lab-b", 200, 14); /* a wait shorter than --stall */
  waiting(c[3], MCP_WAIT_DATA, 2);
  c[4] = add_comm(p, 2, 5, "lab-b", 200, 15); /* posted, and no check for 30 s */
  c[4]->posted += 4;
  c[4]->check_age_s = 30;
  c[5] = add_comm(p, 1, 6, "lab-b", 200, 0);
  c[5]->state = MCP_STATUS_WAIT_ACCEPT;
  c[5]->state_s = 80;
  c[6] = add_comm(p, 1, 7, "lab-b", 200, 0);
  c[6]->state = MCP_STATUS_CONNECTING;
  c[6]->state_s = 1;
  c[7] = add_comm(p, 1, 8, "lab-b", 200, 18);
  c[7]->state = MCP_STATUS_RECOVERING;
  c[7]->state_s = 3;
  snprintf(c[7]->cause, sizeof(c[7]->cause), "work completion error Transport Retry Counter Exceeded (12)");
  c[8] = add_comm(p, 2, 9, "lab-b", 200, 19);
  c[8]->state = MCP_STATUS_FAILED;
  c[8]->state_s = 60;
  snprintf(c[8]->cause, sizeof(c[8]->cause), "receive from lab-b: the peer closed its end");
  top_classify(&v, 5.0);
  {
    const int act[9] = {TOP_IDLE,  TOP_MOVING, TOP_WAITING,    TOP_MOVING, TOP_UNTESTED,
                        TOP_SETUP, TOP_SETUP,  TOP_RECOVERING, TOP_FAILED};
    const int waits[9] = {0, 0, 1, 0, 1, 1, 0, 1, 1};

    for (int i = 0; i < 9; i++) {
      CHECK_EQ_INT(p->comm[i].activity, act[i]);
      CHECK_EQ_INT(p->comm[i].waits, waits[i]);
    }
  }
  CHECK(p->comm[2].waited_s == 12);
  CHECK(p->comm[4].waited_s == 30);
  top_comm_says(&p->comm[2], says, sizeof(says));
  CHECK(strstr(says, "has waited 12 s for a clear-to-send (seq 101): the send of seq 101 waits") == says);
  CHECK(strstr(says, "; 0 request(s) outstanding, none completed for 12 s") != NULL);
  top_comm_says(&p->comm[4], says, sizeof(says));
  CHECK(strstr(says, "has 4 request(s) posted that its process does not test") == says);
  top_comm_says(&p->comm[5], says, sizeof(says));
  CHECK(strstr(says, "has waited 80 s for the peer's accept") == says);
  top_comm_says(&p->comm[7], says, sizeof(says));
  CHECK(strstr(says, "has been recovering for 3 s after: work completion error") == says);
  top_comm_says(&p->comm[8], says, sizeof(says));
  CHECK(strstr(says, "failed 60 s ago: receive from lab-b") == says);
  top_comm_name(&p->comm[2], says, sizeof(says));
  CHECK_EQ_STR(says, "send comm to lab-b pid 200 (192.0.2.2)");
  /* A stopped process: its posted work is untested and counts as a wait whatever the
   * times (its last check was fresh); a comm with nothing posted is idle. */
  p->stopped = 1;
  p->pstate = 'T';
  top_classify(&v, 5.0);
  CHECK_EQ_INT(p->comm[3].activity, TOP_UNTESTED);
  CHECK_EQ_INT(p->comm[3].waits, 1);
  CHECK_EQ_INT(p->comm[2].activity, TOP_IDLE);
  CHECK_EQ_INT(p->comm[0].activity, TOP_IDLE);
  top_view_free(&v);
}

struct lines {
  int n;
  char text[16][1500];
};

static void collect(const char *text, void *arg)
{
  struct lines *l = arg;

  if (l->n < 16)
    snprintf(l->text[l->n++], sizeof(l->text[0]), "%s", text);
}

static void test_verdict(void)
{
  struct top_view v;
  struct top_proc *a, *b, *c;
  struct lines l = {0};

  view_init(&v, "lab-b");
  a = add_proc(&v, "lab-b", 200, 1); /* stopped */
  add_comm(a, 2, 11, "lab-a", 100, 3)->posted += 8;
  add_comm(a, 1, 12, "lab-c", 300, 21);
  a->stopped = 1;
  a->pstate = 'T';
  b = add_proc(&v, "lab-b", 201, 3); /* every comm idle */
  add_comm(b, 1, 13, "lab-c", 301, 22);
  add_comm(b, 2, 14, "lab-c", 301, 23);
  c = add_proc(&v, "lab-b", 202, 5); /* one comm waits */
  waiting(add_comm(c, 1, 15, "lab-a", 101, 4), MCP_WAIT_CTS, 94);
  top_classify(&v, 5.0);
  CHECK_EQ_INT(top_verdict(&v, collect, &l), 2);
  CHECK_EQ_INT(l.n, 4);
  CHECK(strstr(l.text[0],
               "rank 1 (pid 200) (train) is stopped (state T: SIGSTOP or a debugger): it makes no "
               "call into NCCL; 1 of its 2 comm(s) have work posted") == l.text[0]);
  /* ...and which comm of it waits, on whom: the peer named. */
  CHECK(
    strstr(l.text[1],
           "rank 1 (pid 200)'s recv comm from lab-a pid 100 (192.0.2.1) on rxe0:1 has 8 request(s) posted "
           "that its process does not test") == l.text[1]);
  CHECK(strstr(l.text[2],
               "all of rank 3 (pid 201)'s 2 comm(s) are idle with nothing posted: the process is "
               "not calling NCCL") == l.text[2]);
  CHECK(strstr(l.text[3],
               "rank 5 (pid 202)'s send comm to lab-a pid 101 (192.0.2.1) on rxe0:1 has waited "
               "94 s for a clear-to-send") == l.text[3]);
  top_view_free(&v);
  /* Nothing waits: one line that says so. */
  memset(&l, 0, sizeof(l));
  view_init(&v, "lab-b");
  add_comm(add_proc(&v, "lab-b", 200, 1), 1, 1, "lab-a", 100, 2)->moved = 1;
  top_classify(&v, 5.0);
  CHECK_EQ_INT(top_verdict(&v, collect, &l), 0);
  CHECK_EQ_STR(l.text[0], "nothing waits: 1 process(es), 1 comm(s): 1 moving, 0 idle");
  top_view_free(&v);
}

/* Three nodes on a ring, rank r on node r: a sends to b, b to c, c to a; streams are
 * 10 * rank + 1 for a send, 10 * rank + 2 for a receive. */
static void ring(struct top_view *v, struct top_comm **c)
{
  static const char *hosts[3] = {"lab-a", "lab-b", "lab-c"};

  for (int r = 0; r < 3; r++) {
    struct top_proc *p;
    int next = (r + 1) % 3, prev = (r + 2) % 3;

    view_init(&v[r], hosts[r]);
    p = add_proc(&v[r], hosts[r], 100u * (unsigned)(r + 1), r);
    c[2 * r] = add_comm(p, 1, 10u * (unsigned)r + 1, hosts[next], 100u * (unsigned)(next + 1),
                        10u * (unsigned)next + 2);
    c[2 * r + 1] = add_comm(p, 2, 10u * (unsigned)r + 2, hosts[prev], 100u * (unsigned)(prev + 1),
                            10u * (unsigned)prev + 1);
  }
}

static void classify_all(struct top_view *v, int n)
{
  for (int i = 0; i < n; i++)
    top_classify(&v[i], 5.0);
}

static void free_all(struct top_view *v, int n)
{
  for (int i = 0; i < n; i++)
    top_view_free(&v[i]);
}

static void test_fleet_stopped_rank(void)
{
  struct top_view v[3];
  struct top_comm *c[6];
  struct top_root *r;
  int nroots, nwaiting;

  ring(v, c);
  waiting(c[0], MCP_WAIT_CTS, 20);  /* a's send to b: no clear-to-send */
  waiting(c[5], MCP_WAIT_DATA, 19); /* c's receive from b: no data */
  c[2]->posted += 2;                /* b's: work posted that nobody tests */
  c[3]->posted += 8;
  v[1].proc[0].stopped = 1;
  v[1].proc[0].pstate = 'T';
  classify_all(v, 3);
  r = top_fleet_roots(v, 3, &nroots, &nwaiting);
  CHECK_EQ_INT(nroots, 1);
  CHECK_EQ_INT(nwaiting, 4);
  CHECK_EQ_INT(r[0].kind, TOP_ROOT_STOPPED);
  CHECK_EQ_STR(r[0].where, "node lab-b rank 1 (pid 200)");
  CHECK(strstr(r[0].why, "stopped (state T") == r[0].why);
  CHECK_EQ_INT(r[0].nwaiters, 2); /* its own comms are not listed as waiting on it */
  CHECK(strstr(r[0].waiters[0],
               "lab-a rank 0 (pid 100): send comm to lab-b pid 200 (192.0.2.2) has waited "
               "20 s for a clear-to-send") == r[0].waiters[0]);
  CHECK(strstr(r[0].waiters[1],
               "lab-c rank 2 (pid 300): recv comm from lab-b pid 200 (192.0.2.2) has waited "
               "19 s for data") == r[0].waiters[1]);
  free(r);
  /* The same with b running but not calling NCCL: its comms to a and c are idle. */
  c[2]->posted = c[2]->done;
  c[3]->posted = c[3]->done;
  v[1].proc[0].stopped = 0;
  v[1].proc[0].pstate = 'R';
  classify_all(v, 3);
  r = top_fleet_roots(v, 3, &nroots, &nwaiting);
  CHECK_EQ_INT(nroots, 1);
  CHECK_EQ_INT(nwaiting, 2);
  CHECK_EQ_INT(r[0].kind, TOP_ROOT_NOT_CALLING);
  CHECK_EQ_STR(r[0].where, "node lab-b rank 1 (pid 200)");
  CHECK(strstr(r[0].why, "its recv comm from lab-a pid 100 (192.0.2.1) is idle with nothing posted") != NULL);
  CHECK(
    strstr(r[0].why, "has not posted the receive its peer's send waits for, and waits on nothing itself") ==
    r[0].why);
  CHECK(strstr(r[0].why, "look at the GPU or the framework") != NULL);
  CHECK_EQ_INT(r[0].nwaiters, 2);
  free(r);
  free_all(v, 3);
}

static void test_fleet_chain_cycle_missing_link(void)
{
  struct top_view v[3];
  struct top_comm *c[6];
  struct top_root *r;
  int nroots, nwaiting;

  /* a waits on b, b is blocked on c, c is stopped: the chain ends at c. */
  ring(v, c);
  waiting(c[0], MCP_WAIT_CTS, 30);
  waiting(c[2], MCP_WAIT_CTS, 25);
  v[2].proc[0].stopped = 1;
  v[2].proc[0].pstate = 'T';
  classify_all(v, 3);
  r = top_fleet_roots(v, 3, &nroots, &nwaiting);
  CHECK_EQ_INT(nroots, 1);
  CHECK_EQ_INT(r[0].kind, TOP_ROOT_STOPPED);
  CHECK_EQ_STR(r[0].where, "node lab-c rank 2 (pid 300)");
  CHECK_EQ_INT(r[0].nwaiters, 2);
  free(r);
  /* c sends to a and waits too: a cycle, no process outside it to blame. */
  v[2].proc[0].stopped = 0;
  waiting(c[4], MCP_WAIT_CTS, 25);
  classify_all(v, 3);
  r = top_fleet_roots(v, 3, &nroots, &nwaiting);
  CHECK(nroots >= 1);
  CHECK_EQ_INT(r[0].kind, TOP_ROOT_CYCLE);
  free(r);
  /* Only a and c reported: what a waits on is named as missing. */
  free_all(v, 3);
  ring(v, c);
  waiting(c[0], MCP_WAIT_CTS, 30);
  classify_all(v, 3);
  {
    struct top_view two[2] = {v[0], v[2]};

    r = top_fleet_roots(two, 2, &nroots, &nwaiting);
  }
  CHECK_EQ_INT(nroots, 1);
  CHECK_EQ_INT(r[0].kind, TOP_ROOT_MISSING);
  CHECK_EQ_STR(r[0].where, "lab-b pid 200 (192.0.2.2)");
  free(r);
  /* Written, never acknowledged, and the receiving end missing part of a message: one
   * link, whichever end reported it. */
  waiting(c[0], MCP_WAIT_ACK, 30);
  waiting(c[3], MCP_WAIT_PARTIAL, 30);
  c[5]->state = MCP_STATUS_READY;
  classify_all(v, 3);
  r = top_fleet_roots(v, 3, &nroots, &nwaiting);
  CHECK_EQ_INT(nroots, 1);
  CHECK_EQ_INT(r[0].kind, TOP_ROOT_LINK);
  CHECK_EQ_STR(r[0].where, "the link between lab-a and lab-b");
  free(r);
  free_all(v, 3);
}

static void test_wire(void)
{
  struct top_view v, back;
  struct top_comm *c;
  char *buf = NULL, err[200];
  size_t len = 0, cap = 0;

  view_init(&v, "lab-a");
  c = add_comm(add_proc(&v, "lab-a", 100, 0), 1, 7, "lab-b", 200, 8);
  waiting(c, MCP_WAIT_CTS, 12);
  snprintf(c->cause, sizeof(c->cause), "a cause with = signs and spaces");
  top_classify(&v, 5.0);
  CHECK_EQ_INT(top_wire_encode(&v, &buf, &len, &cap), 0);
  CHECK_EQ_INT(top_wire_decode(buf, len, &back, err, sizeof(err)), 0);
  CHECK_EQ_STR(back.host, "lab-a");
  CHECK_EQ_INT(back.nproc, 1);
  CHECK_EQ_INT(back.proc[0].pid, 100);
  CHECK_EQ_INT(back.proc[0].ncomm, 1);
  c = &back.proc[0].comm[0];
  CHECK_EQ_INT(c->stream, 7);
  CHECK_EQ_INT(c->peer_stream, 8);
  CHECK_EQ_INT(c->peer_pid, 200);
  CHECK_EQ_STR(c->peer_host, "lab-b");
  CHECK_EQ_INT(c->activity, TOP_WAITING);
  CHECK_EQ_INT(c->waits, 1);
  CHECK(c->waited_s == 12);
  CHECK_EQ_INT(c->wait, MCP_WAIT_CTS);
  CHECK_EQ_STR(c->cause, "a cause with = signs and spaces");
  CHECK_EQ_STR(c->wait_text, v.proc[0].comm[0].wait_text);
  top_view_free(&back);
  top_view_free(&v);
  /* What a stranger might send: no harm, nothing out of range, nothing unprintable. */
  {
    static const char bad[] =
      "garbage\n"
      "C\tkind=1\tid=1\n" /* a comm before any process: dropped */
      "P\tpid=-5\thost=ev\x01il\tstopped=7\tcheck=1e300\n"
      "C\tkind=9\tstate=99\tact=42\twait=1000\tposted=-1\tphost=x\x1b[2J\twaited=nan\n"
      "P\tpid=3\n";

    CHECK_EQ_INT(top_wire_decode(bad, sizeof(bad) - 1, &back, err, sizeof(err)), 0);
    CHECK_EQ_INT(back.nproc, 2);
    CHECK_EQ_INT(back.proc[0].pid, 0);
    CHECK_EQ_STR(back.proc[0].host, "ev?il");
    CHECK_EQ_INT(back.proc[0].stopped, -1);
    CHECK(back.proc[0].check_age_s == -1);
    CHECK_EQ_INT(back.proc[0].ncomm, 1);
    c = &back.proc[0].comm[0];
    CHECK_EQ_INT(c->kind, 1);
    CHECK_EQ_INT(c->state, MCP_STATUS_READY);
    CHECK_EQ_INT(c->activity, TOP_IDLE);
    CHECK_EQ_INT(c->wait, MCP_WAIT_NONE);
    CHECK_EQ_INT(c->posted, 0);
    CHECK_EQ_STR(c->peer_host, "x?[2J");
    top_view_free(&back);
  }
  free(buf);
}

static void test_prometheus(void)
{
  struct top_view v;
  struct top_proc *p;
  char *text = NULL;
  size_t len = 0;
  FILE *f;

  view_init(&v, "lab-a");
  p = add_proc(&v, "lab-a", 100, 0);
  /* Three comms to lab-b on rxe0 port 1 (two sends, one receive) and one to a host with
   * a quote in its name: three series per figure, not four. */
  waiting(add_comm(p, 1, 1, "lab-b", 200, 2), MCP_WAIT_CTS, 42);
  add_comm(p, 1, 3, "lab-b", 200, 4);
  add_comm(p, 2, 5, "lab-b", 200, 6);
  add_comm(p, 1, 7, "we\"ird\\host", 300, 8);
  top_classify(&v, 5.0);
  f = open_memstream(&text, &len);
  top_prom_write(&v, f);
  fclose(f);
  CHECK(strstr(text, "mcpnet_processes{state=\"running\"} 1\n") != NULL);
  CHECK(strstr(text, "mcpnet_messages_total{peer=\"lab-b\",device=\"rxe0:1\",direction=\"send\"} 200\n") !=
        NULL);
  CHECK(
    strstr(text, "mcpnet_requests_outstanding{peer=\"lab-b\",device=\"rxe0:1\",direction=\"send\"} 8\n") !=
    NULL);
  CHECK(
    strstr(text,
           "mcpnet_comms{peer=\"lab-b\",device=\"rxe0:1\",direction=\"send\",activity=\"waiting\"} 1\n") !=
    NULL);
  CHECK(
    strstr(text, "mcpnet_longest_wait_seconds{peer=\"lab-b\",device=\"rxe0:1\",direction=\"send\"} 42.0\n") !=
    NULL);
  CHECK(strstr(text, "peer=\"we\\\"ird\\\\host\"") != NULL);
  {
    int series = 0;

    for (const char *s = text; (s = strstr(s, "\nmcpnet_bytes_total{")) != NULL; s++)
      series++;
    CHECK_EQ_INT(series, 3);
  }
  free(text);
  top_view_free(&v);
}

int main(void)
{
  RUN_TEST(test_classify);
  RUN_TEST(test_verdict);
  RUN_TEST(test_fleet_stopped_rank);
  RUN_TEST(test_fleet_chain_cycle_missing_link);
  RUN_TEST(test_wire);
  RUN_TEST(test_prometheus);
  return TEST_EXIT();
}
