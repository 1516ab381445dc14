/*
 * mcp_scale.c - what N comm pairs cost, for the scale scenario (issue 16).
 *
 *   mcp-scale [--plugin SO] [--pairs N] [--msgs M] [--busy-msgs M [--busy-cost]]
 *
 * A rank of a large job holds thousands of comms, so their memory per comm matters as
 * much as their speed. This program loads the plugin as NCCL does (mcp_drive), listens
 * once on device 0 and opens N send/recv comm pairs to itself (connect and accept polled
 * from one thread, as NCCL's bootstrap does), moves M verified messages on each pair
 * (sizes alternate 8 B and 4 KiB, a pattern of the pair and the message, every byte
 * checked), then closes them all. It prints what the pairs cost: resident memory
 * (VmRSS) per pair after opening and after the data moved (the verbs queues mapped into
 * the process are counted when touched), the part of it in the device's mappings
 * (/dev/infiniband in smaps), the drop of the system's MemAvailable per pair (kernel-side
 * queues are not all resident in the process), file descriptors, and the time to open
 * and to close. Buffers are allocated and touched before the first figure, so they are
 * not counted. Exit 0 only when every pair opened, moved its data intact and closed;
 * "scale: ok" then ends the output.
 *
 * With --busy-msgs M it also asks whether idle comms slow a busy one (a rank holds
 * thousands of comms, few of them busy at a time): rounds of M messages of 8 B on pair
 * 0 with receives posted ahead, five while pair 0 is the only one open, five with all N
 * open (after their data moved) and five more after the other N-1 closed, so the second
 * figure is bracketed by the first in the same process. It prints each phase's median
 * messages/s, the range of its rounds, and the calls made; the verdict compares the
 * median among all with the median of the ten rounds alone. With --busy-cost (one round
 * a phase) every call is made only once its work is done (as mcpnet-bench --cpu-cost
 * does), so that under callgrind, collecting in drv_isend/drv_irecv/drv_test, each
 * phase's dump (CALLGRIND_DUMP_STATS_AT "busy ...") holds the plugin's instructions for
 * exactly M messages.
 *
 * With --busy-turns IN,OUT,lead|follow the rate is measured by two processes in turns
 * instead (mcp-scale --pairs 1024 and mcp-scale --pairs 1, say), so that the guest's
 * slow spells, which last seconds, fall on both alike: each opens its pairs and moves
 * their data, then runs BUSY_TURN_ROUNDS rounds on pair 0, one at a time, passing a
 * byte through two FIFOs (IN to wait for its turn, OUT to give it back): the follower
 * says it is ready, then lead and follow alternate, lead first. The phases before and
 * after are left out; each process prints its rounds' rates, which the caller pairs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_DUMP_STATS_AT
#define CALLGRIND_DUMP_STATS_AT(what) ((void)(what)) /* no valgrind headers: no dumps */
#endif

#include "mcp_drive.h"

#define SIZE_BIG 4096
#define SIZE_SMALL 8
#define BUSY_DEPTH 8 /* receives posted ahead on the busy pair, as NCCL's steps allow */
#define BUSY_SIZE 8
#define BUSY_MAX_SETTLE_NS 20000000L
#define BUSY_ROUNDS 5         /* rounds a phase, when measuring the rate */
#define BUSY_TURN_ROUNDS 15   /* rounds in turns with another process (--busy-turns) */
#define BUSY_TURN_FIRST_S 300 /* the first turn waits while the other opens its pairs */
#define BUSY_TURN_NEXT_S 60   /* a round lasts a fraction of a second */

static long status_kib(const char *path, const char *key)
{
  char line[256];
  size_t len = strlen(key);
  long v = -1;
  FILE *f = fopen(path, "r");

  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (!strncmp(line, key, len) && line[len] == ':') {
      v = atol(line + len + 1);
      break;
    }
  fclose(f);
  return v;
}

/* Resident KiB of the process's mappings of verbs devices (queues the provider mmaps). */
static long verbs_rss_kib(void)
{
  char line[512];
  long kib = 0;
  int in_verbs = 0;
  FILE *f = fopen("/proc/self/smaps", "r");

  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2) /* a mapping's first line; its fields follow */
      in_verbs = strstr(line, "/dev/infiniband") != NULL;
    else if (in_verbs && !strncmp(line, "Rss:", 4))
      kib += atol(line + 4);
  }
  fclose(f);
  return kib;
}

static int count_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n - 1; /* the directory's own */
}

struct snap {
  long rss, verbs, avail;
  int fds;
};

static void take(struct snap *s)
{
  s->rss = status_kib("/proc/self/status", "VmRSS");
  s->verbs = verbs_rss_kib();
  s->avail = status_kib("/proc/meminfo", "MemAvailable");
  s->fds = count_fds();
}

static uint8_t pattern(int pair, int msg, size_t i)
{
  uint32_t x = (uint32_t)pair * 2654435761u + (uint32_t)msg * 40503u + (uint32_t)i * 97u;
  return (uint8_t)(x >> 11);
}

static void report(const char *what, const struct snap *a, const struct snap *b, int n)
{
  printf("scale: memory %s: VmRSS %+.1f KiB per pair (verbs mappings %+.1f), MemAvailable %+.1f KiB per "
         "pair, fds %+d\n",
         what, (double)(b->rss - a->rss) / n, (double)(b->verbs - a->verbs) / n,
         (double)(b->avail - a->avail) / n, b->fds - a->fds);
}

/* What one busy phase did: each round's time, calls made, and those that found their
 * work unfinished (a NULL request, or test not done). */
struct busy_stats {
  double start[BUSY_TURN_ROUNDS], secs[BUSY_TURN_ROUNDS];
  int rounds;
  long calls, misses, bad;
};

/* --busy-cost: wait before a call until its work is surely done; a miss doubles the wait. */
static void busy_settle(long *settle_ns, int missed)
{
  struct timespec ts;

  if (missed && *settle_ns < BUSY_MAX_SETTLE_NS)
    *settle_ns *= 2;
  ts.tv_sec = 0;
  ts.tv_nsec = *settle_ns;
  nanosleep(&ts, NULL);
}

/* One round: M messages of 8 B on one pair, BUSY_DEPTH receives posted ahead, every
 * byte checked; its time and calls are added to st. Streaming (cost 0): post and test as
 * fast as the calls allow, for messages/s. Cost 1: one message at a time, each call made
 * once its work is done. -1 on a plugin error. */
static int busy_run(struct mcp_drive *d, void *sc, void *rc, void *smh, void *rmh, uint8_t *sb, uint8_t *rb,
                    int msgs, int cost, struct busy_stats *st)
{
  void *rreq[BUSY_DEPTH], *sreq[BUSY_DEPTH];
  int rdone[BUSY_DEPTH], sdone[BUSY_DEPTH];
  int posted = 0, sent = 0, done = 0, tag = 7, j;
  long settle_ns = 200000;
  double t0 = drv_now();

  while (done < msgs) {
    int k, missed = 0;

    /* Receives ahead: in cost mode only as the previous message finishes, as NCCL does. */
    while (posted < msgs && posted - done < BUSY_DEPTH) {
      void *data = rb + (size_t)(posted % BUSY_DEPTH) * BUSY_SIZE, *req = NULL;
      size_t size = BUSY_SIZE;

      st->calls++;
      if (drv_irecv(d, rc, 1, &data, &size, &tag, &rmh, &req) != ncclSuccess)
        return -1;
      if (req == NULL) {
        st->misses++;
        break;
      }
      rreq[posted % BUSY_DEPTH] = req;
      rdone[posted % BUSY_DEPTH] = 0;
      posted++;
    }
    while (sent < posted && (!cost || sent == done)) {
      uint8_t *s = sb + (size_t)(sent % BUSY_DEPTH) * BUSY_SIZE;
      void *req = NULL;

      for (j = 0; j < BUSY_SIZE; j++)
        s[j] = pattern(-1, sent, (size_t)j);
      if (cost)
        busy_settle(&settle_ns, 0); /* the clear-to-send is in */
      st->calls++;
      if (drv_isend(d, sc, s, BUSY_SIZE, tag, smh, &req) != ncclSuccess)
        return -1;
      if (req == NULL) {
        st->misses++;
        missed = 1;
        break;
      }
      sreq[sent % BUSY_DEPTH] = req;
      sdone[sent % BUSY_DEPTH] = 0;
      sent++;
    }
    if (done == sent) {
      if (cost)
        busy_settle(&settle_ns, missed);
      continue;
    }
    k = done % BUSY_DEPTH;
    if (cost)
      busy_settle(&settle_ns, missed); /* the data landed and was acknowledged */
    if (!rdone[k]) {
      int got = -1;

      st->calls++;
      if (drv_test(d, rreq[k], &rdone[k], &got) != ncclSuccess)
        return -1;
      if (!rdone[k])
        st->misses++;
      else if (got != BUSY_SIZE)
        st->bad++;
    }
    if (rdone[k] && !sdone[k]) {
      int sz = -1;

      st->calls++;
      if (drv_test(d, sreq[k], &sdone[k], &sz) != ncclSuccess)
        return -1;
      if (!sdone[k])
        st->misses++;
    }
    if (rdone[k] && sdone[k]) {
      const uint8_t *r = rb + (size_t)k * BUSY_SIZE;

      for (j = 0; j < BUSY_SIZE; j++)
        if (r[j] != pattern(-1, done, (size_t)j)) {
          st->bad++;
          break;
        }
      done++;
    } else if (cost && settle_ns < BUSY_MAX_SETTLE_NS) {
      settle_ns *= 2;
    }
  }
  st->start[st->rounds] = t0;
  st->secs[st->rounds++] = drv_now() - t0;
  return 0;
}

/* A phase: `rounds` rounds back to back (one under --busy-cost, whose callgrind dump
 * must hold exactly M messages). A round of 3,000 messages lasts about 0.1 s in the lab,
 * where one round's rate moved by half from the next: the phases compare medians. */
static int busy_phase(struct mcp_drive *d, void *sc, void *rc, void *smh, void *rmh, uint8_t *sb, uint8_t *rb,
                      int msgs, int cost, struct busy_stats *st)
{
  int r, rounds = cost ? 1 : BUSY_ROUNDS;

  memset(st, 0, sizeof(*st));
  for (r = 0; r < rounds; r++)
    if (busy_run(d, sc, rc, smh, rmh, sb, rb, msgs, cost, st) != 0)
      return -1;
  return 0;
}

/* --busy-turns: the FIFO to wait on for our turn, the one to give it back through. */
struct busy_turns {
  int in, out, lead;
};

/* "IN,OUT,lead|follow". Both FIFOs are opened read-write, which never waits for the
 * other process; so that one that went away does not leave us waiting, each turn is
 * waited for with a deadline instead (the first while the other opens its pairs). */
static int busy_turns_open(const char *spec, struct busy_turns *t)
{
  char in[256], out[256], role[16];

  if (sscanf(spec, "%255[^,],%255[^,],%15s", in, out, role) != 3 ||
      (strcmp(role, "lead") != 0 && strcmp(role, "follow") != 0)) {
    printf("scale: FAIL: --busy-turns takes IN,OUT,lead or IN,OUT,follow, not \"%s\"\n", spec);
    return -1;
  }
  t->lead = !strcmp(role, "lead");
  t->out = open(out, O_RDWR);
  t->in = t->out < 0 ? -1 : open(in, O_RDWR);
  if (t->in < 0) {
    printf("scale: FAIL: --busy-turns: cannot open %s: %s\n", t->out < 0 ? out : in, strerror(errno));
    return -1;
  }
  return 0;
}

/* Waits up to secs for our turn: 0 when it came, -1 (said why) when it did not. */
static int busy_turn_wait(const struct busy_turns *t, int secs)
{
  struct pollfd p = {.fd = t->in, .events = POLLIN};
  double end = drv_now() + secs;
  char b;
  int n;

  for (;;) {
    n = poll(&p, 1, 1000);
    if (n == 1 && read(t->in, &b, 1) == 1)
      return 0;
    if (n < 0 && errno != EINTR)
      break;
    if (drv_now() > end) {
      printf("scale: FAIL: --busy-turns: the other process did not give the turn within %d s\n", secs);
      return -1;
    }
  }
  printf("scale: FAIL: --busy-turns: waiting for the turn: %s\n", strerror(errno));
  return -1;
}

static int busy_turn_give(const struct busy_turns *t)
{
  char b = 't';

  if (write(t->out, &b, 1) == 1)
    return 0;
  printf("scale: FAIL: --busy-turns: giving the turn back: %s\n", strerror(errno));
  return -1;
}

/* BUSY_TURN_ROUNDS rounds, each in our turn: the follower first says it is ready (its
 * pairs are open), then the two alternate, lead first, and the lead goes on only once
 * the follower's last round is over. */
static int busy_phase_turns(struct mcp_drive *d, void *sc, void *rc, void *smh, void *rmh, uint8_t *sb,
                            uint8_t *rb, int msgs, const struct busy_turns *t, struct busy_stats *st)
{
  int r;

  memset(st, 0, sizeof(*st));
  if (!t->lead && busy_turn_give(t) != 0)
    return -1;
  for (r = 0; r < BUSY_TURN_ROUNDS; r++) {
    if (busy_turn_wait(t, r == 0 ? BUSY_TURN_FIRST_S : BUSY_TURN_NEXT_S) != 0)
      return -1;
    if (busy_run(d, sc, rc, smh, rmh, sb, rb, msgs, 0, st) != 0) {
      printf("scale: FAIL: busy pair in turns: a call returned an error\n");
      return -1;
    }
    if (busy_turn_give(t) != 0)
      return -1;
  }
  /* The lead waits out the follower's last round: its close must not run beside it. */
  return t->lead ? busy_turn_wait(t, BUSY_TURN_NEXT_S) : 0;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return x < y ? -1 : x > y;
}

/* The median of the rates (messages/s) of the rounds of phases a and b (b may be NULL);
 * lo and hi, when not NULL, get the slowest and fastest round. */
static double busy_median(int msgs, const struct busy_stats *a, const struct busy_stats *b, double *lo,
                          double *hi)
{
  double rate[2 * BUSY_TURN_ROUNDS];
  int n = 0, i;

  for (i = 0; i < a->rounds; i++)
    rate[n++] = a->secs[i] > 0 ? msgs / a->secs[i] : 0.0;
  for (i = 0; b != NULL && i < b->rounds; i++)
    rate[n++] = b->secs[i] > 0 ? msgs / b->secs[i] : 0.0;
  qsort(rate, (size_t)n, sizeof(rate[0]), cmp_double);
  if (lo != NULL)
    *lo = rate[0];
  if (hi != NULL)
    *hi = rate[n - 1];
  return n % 2 ? rate[n / 2] : (rate[n / 2 - 1] + rate[n / 2]) / 2;
}

static void busy_report(const char *when, int open, int msgs, const struct busy_stats *st)
{
  double lo, hi, med = busy_median(msgs, st, NULL, &lo, &hi);

  printf("scale: busy: %s (%d %s open): %d messages of %d B a round, %d round(s): median %.0f msg/s "
         "(rounds %.0f-%.0f); calls %.2f per message, %ld found their work unfinished\n",
         when, open, open == 1 ? "pair" : "pairs", msgs, BUSY_SIZE, st->rounds, med, lo, hi,
         (double)st->calls / msgs / st->rounds, st->misses);
  fflush(stdout);
}

int main(int argc, char **argv)
{
  const char *plugin = "libnccl-net-mcp.so";
  int n = 256, msgs = 2, i, m, ndev = 0, bad = 0, busy_msgs = 0, busy_cost = 0, j;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  struct mcp_drive drv;
  void *lc = NULL, **sc, **rc, **smh, **rmh;
  uint8_t *sbuf, *rbuf;
  struct snap s0, s1, s2, s3;
  double t0, t_open, t_data, t_close, deadline, left;
  struct busy_stats busy[3];
  struct busy_turns turns;
  const char *turns_spec = NULL;
  void *bsmh = NULL, *brmh = NULL;
  uint8_t *bsbuf = NULL, *brbuf = NULL;

  for (i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
      plugin = argv[++i];
    else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--msgs") && i + 1 < argc)
      msgs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--busy-msgs") && i + 1 < argc)
      busy_msgs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--busy-cost"))
      busy_cost = 1;
    else if (!strcmp(argv[i], "--busy-turns") && i + 1 < argc)
      turns_spec = argv[++i];
    else {
      fprintf(stderr,
              "usage: %s [--plugin SO] [--pairs N] [--msgs M] [--busy-msgs M [--busy-cost | --busy-turns "
              "IN,OUT,lead|follow]]\n",
              argv[0]);
      return 2;
    }
  }
  if (n < 1 || msgs < 1 || busy_msgs < 0 || (busy_msgs > 0 && n < 2 && turns_spec == NULL) ||
      (turns_spec != NULL && (busy_msgs == 0 || busy_cost))) {
    fprintf(stderr,
            "mcp-scale: --pairs and --msgs must be at least 1, --busy-msgs at least 0 (and then "
            "--pairs at least 2, or 1 with --busy-turns); --busy-turns needs --busy-msgs and not "
            "--busy-cost\n");
    return 2;
  }
  sc = calloc((size_t)n, sizeof(*sc));
  rc = calloc((size_t)n, sizeof(*rc));
  smh = calloc((size_t)n, sizeof(*smh));
  rmh = calloc((size_t)n, sizeof(*rmh));
  sbuf = aligned_alloc(4096, (size_t)n * SIZE_BIG);
  rbuf = aligned_alloc(4096, (size_t)n * SIZE_BIG);
  if (sc == NULL || rc == NULL || smh == NULL || rmh == NULL || sbuf == NULL || rbuf == NULL) {
    printf("scale: FAIL: no memory for %d pairs' state\n", n);
    return 1;
  }
  memset(sbuf, 0, (size_t)n * SIZE_BIG);
  memset(rbuf, 0, (size_t)n * SIZE_BIG);
  if (busy_msgs > 0) {
    bsbuf = aligned_alloc(4096, 4096);
    brbuf = aligned_alloc(4096, 4096);
    if (bsbuf == NULL || brbuf == NULL) {
      printf("scale: FAIL: no memory for the busy pair's buffers\n");
      return 1;
    }
    memset(bsbuf, 0, 4096);
    memset(brbuf, 0, 4096);
  }
  if (drv_open(&drv, plugin, 11) != 0 || drv_init(&drv) != ncclSuccess ||
      drv_devices(&drv, &ndev) != ncclSuccess || ndev < 1) {
    printf("scale: FAIL: plugin init\n");
    return 1;
  }
  memset(handle, 0, sizeof(handle));
  if (drv_listen(&drv, 0, handle, &lc) != ncclSuccess) {
    printf("scale: FAIL: listen\n");
    return 1;
  }
  take(&s0);

  /* Open: one pair at a time, connect and accept alternating until both exist. With
   * --busy-msgs, pair 0 first runs alone (its time is not counted as opening). */
  t0 = drv_now();
  t_open = 0;
  deadline = t0 + 60 + (double)n;
  for (i = 0; i < n; i++) {
    if (i == 1 && busy_msgs > 0 && turns_spec == NULL) {
      t_open += drv_now() - t0;
      if (drv_regmr(&drv, sc[0], bsbuf, 4096, &bsmh) != ncclSuccess ||
          drv_regmr(&drv, rc[0], brbuf, 4096, &brmh) != ncclSuccess) {
        printf("scale: FAIL: regMr of the busy pair's buffers\n");
        return 1;
      }
      CALLGRIND_DUMP_STATS_AT("before busy alone");
      if (busy_phase(&drv, sc[0], rc[0], bsmh, brmh, bsbuf, brbuf, busy_msgs, busy_cost, &busy[0]) != 0) {
        printf("scale: FAIL: busy pair alone: a call returned an error\n");
        return 1;
      }
      CALLGRIND_DUMP_STATS_AT("busy alone");
      busy_report("alone", 1, busy_msgs, &busy[0]);
      t0 = drv_now();
      deadline = t0 + 60 + (double)n;
    }
    left = deadline - drv_now();
    if (drv_connect_pair(&drv, 0, handle, lc, &sc[i], &rc[i], left > 1 ? (int)left : 1, 0) != 0) {
      printf("scale: FAIL: pair %d not open (%d opened)\n", i, i);
      return 1;
    }
  }
  t_open += drv_now() - t0;
  take(&s1);
  if (turns_spec != NULL &&
      (drv_regmr(&drv, sc[0], bsbuf, 4096, &bsmh) != ncclSuccess ||
       drv_regmr(&drv, rc[0], brbuf, 4096, &brmh) != ncclSuccess)) {
    printf("scale: FAIL: regMr of the busy pair's buffers\n");
    return 1;
  }
  printf("scale: opened %d pairs in %.2f s (%.2f ms per pair)\n", n, t_open, 1000 * t_open / n);
  fflush(stdout);

  /* Data: on every pair, M messages, each checked byte by byte. */
  t0 = drv_now();
  for (i = 0; i < n; i++) {
    uint8_t *s = sbuf + (size_t)i * SIZE_BIG, *r = rbuf + (size_t)i * SIZE_BIG;

    if (drv_regmr(&drv, sc[i], s, SIZE_BIG, &smh[i]) != ncclSuccess ||
        drv_regmr(&drv, rc[i], r, SIZE_BIG, &rmh[i]) != ncclSuccess) {
      printf("scale: FAIL: regMr on pair %d\n", i);
      return 1;
    }
    for (m = 0; m < msgs; m++) {
      size_t size = m % 2 == 0 ? SIZE_SMALL : SIZE_BIG, k, rsize = SIZE_BIG;
      void *sreq = NULL, *rreq = NULL, *rdata = r;
      int tag = 1, sdone = 0, rdone = 0, got = -1;

      for (k = 0; k < size; k++)
        s[k] = pattern(i, m, k);
      memset(r, 0, SIZE_BIG);
      while (rreq == NULL || sreq == NULL) {
        if ((rreq == NULL &&
             drv_irecv(&drv, rc[i], 1, &rdata, &rsize, &tag, &rmh[i], &rreq) != ncclSuccess) ||
            (sreq == NULL && rreq != NULL &&
             drv_isend(&drv, sc[i], s, size, tag, smh[i], &sreq) != ncclSuccess)) {
          printf("scale: FAIL: irecv/isend on pair %d message %d returned an error\n", i, m);
          return 1;
        }
        if (drv_now() > deadline + 120) {
          printf("scale: FAIL: pair %d message %d never posted\n", i, m);
          return 1;
        }
      }
      while (!sdone || !rdone) {
        int sz = -1;
        if ((!sdone && drv_test(&drv, sreq, &sdone, &sz) != ncclSuccess) ||
            (!rdone && drv_test(&drv, rreq, &rdone, &got) != ncclSuccess)) {
          printf("scale: FAIL: test on pair %d message %d returned an error\n", i, m);
          return 1;
        }
        if (drv_now() > deadline + 120) {
          printf("scale: FAIL: pair %d message %d never completed\n", i, m);
          return 1;
        }
      }
      if (got != (int)size) {
        printf("scale: FAIL: pair %d message %d: received %d bytes, sent %zu\n", i, m, got, size);
        return 1;
      }
      for (k = 0; k < size; k++)
        if (r[k] != pattern(i, m, k)) {
          if (bad++ < 5)
            printf("scale: FAIL: pair %d message %d: byte %zu is %#x, not %#x\n", i, m, k, r[k],
                   pattern(i, m, k));
          break;
        }
    }
  }
  t_data = drv_now() - t0;
  take(&s2);
  if (bad != 0) {
    printf("scale: FAIL: %d message(s) arrived wrong\n", bad);
    return 1;
  }
  printf("scale: data: %d pairs moved %d verified message(s) each (8 B and 4 KiB) in %.2f s\n", n, msgs,
         t_data);
  report("after open", &s0, &s1, n);
  report("after data", &s0, &s2, n);
  fflush(stdout);
  if (turns_spec != NULL) {
    if (busy_turns_open(turns_spec, &turns) != 0 ||
        busy_phase_turns(&drv, sc[0], rc[0], bsmh, brmh, bsbuf, brbuf, busy_msgs, &turns, &busy[1]) != 0)
      return 1;
    busy_report("in turns", n, busy_msgs, &busy[1]);
  } else if (busy_msgs > 0) {
    CALLGRIND_DUMP_STATS_AT("before busy among all");
    if (busy_phase(&drv, sc[0], rc[0], bsmh, brmh, bsbuf, brbuf, busy_msgs, busy_cost, &busy[1]) != 0) {
      printf("scale: FAIL: busy pair among %d: a call returned an error\n", n);
      return 1;
    }
    CALLGRIND_DUMP_STATS_AT("busy among all");
    busy_report("among all", n, busy_msgs, &busy[1]);
  }

  /* Close: deregister, then every comm, as NCCL does at teardown. With --busy-msgs,
   * pair 0 runs alone once more before it closes (not counted as closing). */
  t0 = drv_now();
  t_close = 0;
  for (j = 1; j <= n; j++) {
    i = j % n; /* pair 0 last */
    if (i == 0 && busy_msgs > 0 && turns_spec == NULL) {
      t_close += drv_now() - t0;
      CALLGRIND_DUMP_STATS_AT("before busy alone again");
      if (busy_phase(&drv, sc[0], rc[0], bsmh, brmh, bsbuf, brbuf, busy_msgs, busy_cost, &busy[2]) != 0) {
        printf("scale: FAIL: busy pair alone again: a call returned an error\n");
        return 1;
      }
      CALLGRIND_DUMP_STATS_AT("busy alone again");
      busy_report("alone again", 1, busy_msgs, &busy[2]);
      t0 = drv_now();
    }
    if (i == 0 && busy_msgs > 0) {
      if (drv_deregmr(&drv, sc[0], bsmh) != ncclSuccess || drv_deregmr(&drv, rc[0], brmh) != ncclSuccess) {
        printf("scale: FAIL: deregMr of the busy pair's buffers\n");
        return 1;
      }
    }
    if (drv_deregmr(&drv, sc[i], smh[i]) != ncclSuccess || drv_deregmr(&drv, rc[i], rmh[i]) != ncclSuccess ||
        drv_close_send(&drv, sc[i]) != ncclSuccess || drv_close_recv(&drv, rc[i]) != ncclSuccess) {
      printf("scale: FAIL: closing pair %d returned an error\n", i);
      return 1;
    }
  }
  t_close += drv_now() - t0;
  take(&s3);
  printf("scale: closed %d pairs in %.2f s (%.2f ms per pair)\n", n, t_close, 1000 * t_close / n);
  report("left after close", &s0, &s3, n);
  drv_close_listen(&drv, lc);
  drv_finalize(&drv);
  if (turns_spec != NULL) {
    if (busy[1].bad > 0) {
      printf("scale: FAIL: busy pair: %ld message(s) arrived wrong\n", busy[1].bad);
      return 1;
    }
    printf("scale: busy: %d verified messages per round, in turns with %d %s open; msg/s per round:",
           busy_msgs, n, n == 1 ? "pair" : "pairs");
    for (i = 0; i < busy[1].rounds; i++)
      printf(" %.0f", busy[1].secs[i] > 0 ? busy_msgs / busy[1].secs[i] : 0.0);
    /* The rounds' times on the guest's monotonic clock, which both processes share: that
     * the two took turns can be checked. */
    printf("\nscale: busy: in turns, each round's start and end (CLOCK_MONOTONIC s):");
    for (i = 0; i < busy[1].rounds; i++)
      printf(" %.6f-%.6f", busy[1].start[i], busy[1].start[i] + busy[1].secs[i]);
    printf("\n");
  } else if (busy_msgs > 0) {
    double lo, hi, among = busy_median(busy_msgs, &busy[1], NULL, &lo, &hi);
    double alone = busy_median(busy_msgs, &busy[0], &busy[2], NULL, NULL);

    if (busy[0].bad + busy[1].bad + busy[2].bad > 0) {
      printf("scale: FAIL: busy pair: %ld message(s) arrived wrong\n",
             busy[0].bad + busy[1].bad + busy[2].bad);
      return 1;
    }
    printf("scale: busy: %d verified messages per round; with %d pairs open the busy pair ran at %.2f times "
           "its rate alone (median of %d round(s) among them against the median of %d alone, before and "
           "after; single rounds %.2f-%.2f), calls per message %.2f vs %.2f\n",
           busy_msgs, n, alone > 0 ? among / alone : 0.0, busy[1].rounds, busy[0].rounds + busy[2].rounds,
           alone > 0 ? lo / alone : 0.0, alone > 0 ? hi / alone : 0.0,
           (double)busy[1].calls / busy_msgs / busy[1].rounds,
           (double)(busy[0].calls + busy[2].calls) / busy_msgs / (busy[0].rounds + busy[2].rounds));
  }
  printf("scale: ok: %d pairs opened, moved verified data and closed\n", n);
  return 0;
}
