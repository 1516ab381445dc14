/*
 * mcp_scale.c - what N comm pairs cost, for the scale scenario (issue 16).
 *
 *   mcp-scale [--plugin SO] [--pairs N] [--msgs M]
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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>

#include "mcp_drive.h"

#define SIZE_BIG 4096
#define SIZE_SMALL 8

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

int main(int argc, char **argv)
{
  const char *plugin = "libnccl-net-mcp.so";
  int n = 256, msgs = 2, i, m, ndev = 0, bad = 0;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  struct mcp_drive drv;
  void *lc = NULL, **sc, **rc, **smh, **rmh;
  uint8_t *sbuf, *rbuf;
  struct snap s0, s1, s2, s3;
  double t0, t_open, t_data, t_close, deadline;

  for (i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
      plugin = argv[++i];
    else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--msgs") && i + 1 < argc)
      msgs = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--plugin SO] [--pairs N] [--msgs M]\n", argv[0]);
      return 2;
    }
  }
  if (n < 1 || msgs < 1) {
    fprintf(stderr, "mcp-scale: --pairs and --msgs must be at least 1\n");
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

  /* Open: one pair at a time, connect and accept alternating until both exist. */
  t0 = drv_now();
  deadline = t0 + 60 + (double)n;
  for (i = 0; i < n; i++) {
    while (sc[i] == NULL || rc[i] == NULL) {
      if ((sc[i] == NULL && drv_connect(&drv, 0, handle, &sc[i]) != ncclSuccess) ||
          (rc[i] == NULL && drv_accept(&drv, lc, &rc[i]) != ncclSuccess)) {
        printf("scale: FAIL: connect/accept of pair %d returned an error\n", i);
        return 1;
      }
      if (drv_now() > deadline) {
        printf("scale: FAIL: pair %d not open in time (%d opened)\n", i, i);
        return 1;
      }
    }
  }
  t_open = drv_now() - t0;
  take(&s1);
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

  /* Close: deregister, then every comm, as NCCL does at teardown. */
  t0 = drv_now();
  for (i = 0; i < n; i++) {
    if (drv_deregmr(&drv, sc[i], smh[i]) != ncclSuccess || drv_deregmr(&drv, rc[i], rmh[i]) != ncclSuccess ||
        drv_close_send(&drv, sc[i]) != ncclSuccess || drv_close_recv(&drv, rc[i]) != ncclSuccess) {
      printf("scale: FAIL: closing pair %d returned an error\n", i);
      return 1;
    }
  }
  t_close = drv_now() - t0;
  take(&s3);
  printf("scale: closed %d pairs in %.2f s (%.2f ms per pair)\n", n, t_close, 1000 * t_close / n);
  report("left after close", &s0, &s3, n);
  drv_close_listen(&drv, lc);
  drv_finalize(&drv);
  printf("scale: ok: %d pairs opened, moved verified data and closed\n", n);
  return 0;
}
