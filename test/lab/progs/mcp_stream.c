/*
 * mcp_stream.c - a verified stream between two hosts, for the fault scenarios.
 *
 *   mcp-stream [--plugin SO] --role a|b --xchg DIR [--msgs N] [--window W] [--from a|b] [--small] [--gpu]
 *              [--late idle|accept|connect:SECONDS] [--finish-together] [--fuse LIST] [--linger S]
 *              [--pace MS]
 *
 * Both hosts connect to each other (handles swapped through files in DIR, as the
 * conformance suite does) and then send N messages each way at once (only from one
 * host with --from), the way NCCL's
 * proxy does: up to W receives posted ahead and W sends in flight, each on its own
 * buffer slot. Sizes cycle from 4 KiB to over 1 MiB (with --small: 2 KiB to 64 KiB,
 * 32 KiB on average; all larger than the lab's 1 KiB MTU), every message carries a pattern derived from its index and sender, and every
 * received byte is checked, so a lost, duplicated, reordered or misdirected write shows
 * up as a wrong byte or a wrong size. Any error returned through the ABI fails the run.
 * After the first 64 messages each way it creates DIR/<role>.streaming, the cue for
 * a scenario to inject its fault. Output: a progress line every 2 s, then one
 * "stream: ..." summary line, and exit 0 only if everything arrived intact.
 *
 * With --gpu the buffers are GPU-like, as the conformance suite's --gpu makes them:
 * registered with regMr(NCCL_PTR_CUDA) and mprotect'ed PROT_NONE except while this
 * program fills a send slot or checks a received one, so a CPU access by the plugin
 * (during a recovery's replay, say) crashes. Each completed receive is then flushed
 * with iflush, as NCCL does for GPU memory, and checked once the flush completes.
 * Needs a peer-memory module (the lab's nvidia_peermem stand-in).
 *
 * --late makes this host the late peer of a large job (the other host is called
 * promptly and must wait for it): "idle:S" makes no call into the plugin for S seconds
 * after publishing its handle (a busy process: its kernel holds the peer's TCP
 * connection unanswered); "accept:S" connects, then calls accept only S seconds after
 * its first connect call; "connect:S" accepts, then calls connect only S seconds after
 * its first accept call. Between its calls it makes none at all. "stream: connected
 * after X s" says how long connecting took. --finish-together (on both hosts) makes
 * each wait for the other to have everything before closing.
 *
 * --fuse LIST (comma-separated physical device indices, e.g. 0,1) makes a virtual
 * device over them with makeVDevice, as NCCL does for NCCL_NET_FORCE_MERGE, and streams
 * over it instead of device 0; "stream: fused ..." names it and its members.
 *
 * --ring PREV,NEXT makes this host (its --role, any letter a..f) one rank of a ring: it
 * sends to NEXT (connecting to NEXT's handle) and receives from PREV (accepting PREV's
 * connection), N messages each way, as the ranks of a ring all-reduce step do; a rank
 * that stops stalls its neighbours' comms to it, which is what mcpnet-top --fleet finds.
 * --stop-at N makes this host stop itself (SIGSTOP) once N messages went either way, so
 * that its peers still have work for it whatever the hosts' relative speed.
 *
 * --pace MS posts a send at most every MS milliseconds (calling into the plugin meanwhile,
 * as a proxy waiting for the GPU does), so a stream lasts at least N x MS: long enough to
 * see a link go down and come back during one connection.
 *
 * --linger S keeps the listen it published open through the stream (as NCCL's runtime
 * connect keeps listens waiting for their connections), then keeps calling into the
 * plugin for S seconds after the stream, as a proxy busy connecting its next comms does
 * (accept on that listen, every 10 ms), then prints "stream: resources: ..." with its
 * open descriptors and heap in use when it marked DIR/<role>.streaming and after the
 * linger: what a stranger flood left behind (hub_hostile.sh).
 */
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mcp_drive.h"

/* This process's open descriptors and heap in use. */
static void resources(long *fds, long *heap)
{
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;

  *fds = 0;
  while (d != NULL && (e = readdir(d)) != NULL)
    *fds += e->d_name[0] != '.';
  if (d != NULL)
    closedir(d);
  *heap = (long)mallinfo2().uordblks;
}

static void sleep_until(double t)
{
  while (drv_now() < t)
    usleep(100000);
}

#define MAX_WINDOW 8
#define MAX_MSG ((1u << 20) + 4096)

/* Sizes cycle through one of these lists; "small" averages 32 KiB, for many messages. */
static const size_t large_sizes[] = {4096, 65536, 262144 + 13, 1u << 20, 100000, 1u << 20};
static const size_t small_sizes[] = {4096, 65536, 8192, 49152, 2053, 65536};
static const size_t *sizes = large_sizes;
#define NSIZES 6

static uint8_t pattern(uint32_t seed, size_t i)
{
  uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 11);
  return (uint8_t)(x >> 13);
}

static int gpu;

/* The program's turn (open) or the plugin's (hidden) on one GPU-like slot; slots are
 * whole pages (MAX_MSG is a multiple of 4096), so each is hidden on its own. */
static void slot_access(uint8_t *base, int slot, int open)
{
  if (gpu &&
      mprotect(base + (size_t)slot * MAX_MSG, MAX_MSG, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
    perror("stream: mprotect");
    exit(3);
  }
}

static uint32_t seed_of(char role, long msg)
{
  return (role == 'a' ? 0x51000000u : role == 'b' ? 0x52000000u : (uint32_t)role << 24) + (uint32_t)msg;
}

/* The wall-clock time goes with it, so a scenario can tell how long after its fault. */
static int fail(const char *what, long msg)
{
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(stderr, "stream: FAIL: %s (message %ld) at %lld.%03ld\n", what, msg, (long long)ts.tv_sec,
          ts.tv_nsec / 1000000);
  printf("stream: FAIL: %s (message %ld) at %lld.%03ld\n", what, msg, (long long)ts.tv_sec,
         ts.tv_nsec / 1000000);
  fflush(stdout);
  return 1;
}

int main(int argc, char **argv)
{
  const char *plugin = "libnccl-net-mcp.so", *xchg = NULL;
  char role = 0, from = 0, peer = 0, next = 0, name[64], handle[NCCL_NET_HANDLE_MAXSIZE],
       peer_handle[NCCL_NET_HANDLE_MAXSIZE];
  long nmsg = 2000, nsend, nrecv, posted_r = 0, done_r = 0, posted_s = 0, done_s = 0, filled = -1,
       stop_at = -1;
  int window = MAX_WINDOW, i, ndev = 0, marked = 0;
  struct mcp_drive drv;
  void *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *rmh = NULL;
  void *rreq[MAX_WINDOW] = {0}, *sreq[MAX_WINDOW] = {0}, *freq[MAX_WINDOW] = {0};
  int rgot[MAX_WINDOW];
  long flushes = 0;
  uint8_t *sbuf, *rbuf;
  double t0, last, deadline;
  unsigned long long bytes = 0;
  const char *late = NULL;
  int late_s = 0, together = 0, dev = 0, nfuse = 0, fuse[NCCL_NET_MAX_DEVS_PER_NIC], linger_s = 0;
  double pace = 0, next_send = 0;
  long fds0 = 0, heap0 = 0, fds1, heap1;

  for (i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
      plugin = argv[++i];
    else if (!strcmp(argv[i], "--role") && i + 1 < argc)
      role = argv[++i][0];
    else if (!strcmp(argv[i], "--xchg") && i + 1 < argc)
      xchg = argv[++i];
    else if (!strcmp(argv[i], "--msgs") && i + 1 < argc)
      nmsg = atol(argv[++i]);
    else if (!strcmp(argv[i], "--window") && i + 1 < argc)
      window = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--from") && i + 1 < argc)
      from = argv[++i][0];
    else if (!strcmp(argv[i], "--small"))
      sizes = small_sizes;
    else if (!strcmp(argv[i], "--gpu"))
      gpu = 1;
    else if (!strcmp(argv[i], "--stop-at") && i + 1 < argc)
      stop_at = atol(argv[++i]);
    else if (!strcmp(argv[i], "--finish-together"))
      together = 1;
    else if (!strcmp(argv[i], "--fuse") && i + 1 < argc) {
      char *p = argv[++i], *end;
      for (nfuse = 0; nfuse < NCCL_NET_MAX_DEVS_PER_NIC && *p != '\0'; nfuse++) {
        fuse[nfuse] = (int)strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0'))
          break;
        p = *end == ',' ? end + 1 : end;
      }
      if (*p != '\0' || nfuse < 1) {
        fprintf(stderr, "mcp-stream: --fuse takes 1..%d device indices, comma-separated (0,1)\n",
                NCCL_NET_MAX_DEVS_PER_NIC);
        return 2;
      }
    } else if (!strcmp(argv[i], "--linger") && i + 1 < argc) {
      linger_s = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--pace") && i + 1 < argc) {
      pace = atof(argv[++i]) / 1000.0;
    } else if (!strcmp(argv[i], "--ring") && i + 1 < argc && strlen(argv[i + 1]) == 3 &&
               argv[i + 1][1] == ',') {
      peer = argv[++i][0];
      next = argv[i][2];
    } else if (!strcmp(argv[i], "--late") && i + 1 < argc && strchr(argv[i + 1], ':') != NULL) {
      late = argv[++i];
      late_s = atoi(strchr(late, ':') + 1);
    } else {
      fprintf(stderr,
              "usage: %s [--plugin SO] --role a|b --xchg DIR [--msgs N] [--window 1..8] [--from a|b] "
              "[--small] [--gpu] [--late idle|accept|connect:SECONDS] [--finish-together] [--fuse LIST] "
              "[--linger S] [--pace MS] [--ring PREV,NEXT] [--stop-at N]\n",
              argv[0]);
      return 2;
    }
  }
  if ((next == 0 ? role != 'a' && role != 'b' : role < 'a' || role > 'f' || next == role || peer == role) ||
      xchg == NULL || nmsg < 1 || window < 1 || window > MAX_WINDOW) {
    fprintf(stderr, "mcp-stream: --role a|b (a..f with --ring) and --xchg DIR are required; --window 1..%d\n",
            MAX_WINDOW);
    return 2;
  }
  if (next == 0)
    peer = next = role == 'a' ? 'b' : 'a';
  nsend = from == 0 || from == role ? nmsg : 0;
  nrecv = from == 0 || from == peer ? nmsg : 0;
  if (drv_open(&drv, plugin, 11) != 0 || drv_init(&drv) != ncclSuccess ||
      drv_devices(&drv, &ndev) != ncclSuccess || ndev < 1)
    return fail("plugin init", 0);
  if (nfuse > 0) {
    ncclNetProperties_v12_t props;
    if (drv_make_vdevice(&drv, nfuse, fuse, &dev) != ncclSuccess)
      return fail("makeVDevice for --fuse", 0);
    if (drv_props(&drv, dev, &props) != ncclSuccess)
      return fail("getProperties of the fused device", 0);
    printf("stream: fused %d device(s) into device %d: %s, %d Mb/s, vProps {%d: %d %d %d %d}\n", nfuse, dev,
           props.name, props.speed, props.vProps.ndevs, props.vProps.devs[0], props.vProps.devs[1],
           props.vProps.devs[2], props.vProps.devs[3]);
    fflush(stdout);
  }
  memset(handle, 0, sizeof(handle));
  if (drv_listen(&drv, dev, handle, &lc) != ncclSuccess)
    return fail("listen", 0);
  snprintf(name, sizeof(name), "%c.stream.handle", role);
  if (drv_file_put(xchg, name, handle, sizeof(handle), NULL, 0) != 0)
    return fail("publishing the handle", 0);
  snprintf(name, sizeof(name), "%c.stream.handle", next); /* whom this host sends to */
  if (drv_file_get(xchg, name, peer_handle, sizeof(peer_handle), 120) != 0)
    return fail("the peer's handle", 0);
  t0 = drv_now();
  if (late != NULL && !strncmp(late, "idle:", 5)) {
    sleep_until(t0 + late_s);
    late = NULL;
  }
  if (late == NULL) {
    if (drv_connect_pair(&drv, dev, peer_handle, lc, &sc, &rc, 300, role == 'a') != 0)
      return fail("connect", 0);
  } else {
    int accept_late = !strncmp(late, "accept:", 7);
    while (sc == NULL && rc == NULL) {
      if (drv_now() > t0 + 120)
        return fail("the first comm of --late within 120 s", 0);
      if ((accept_late ? drv_connect(&drv, dev, peer_handle, &sc) : drv_accept(&drv, lc, &rc)) != ncclSuccess)
        return fail(accept_late ? "connect returned an error" : "accept returned an error", 0);
      usleep(1000);
    }
    sleep_until(t0 + late_s);
    while (sc == NULL || rc == NULL) {
      if (drv_now() > t0 + late_s + 120)
        return fail("the second comm of --late within 120 s", 0);
      if ((accept_late ? drv_accept(&drv, lc, &rc) : drv_connect(&drv, dev, peer_handle, &sc)) != ncclSuccess)
        return fail(accept_late ? "accept returned an error" : "connect returned an error", 0);
      usleep(1000);
    }
  }
  printf("stream: connected after %.1f s\n", drv_now() - t0);
  fflush(stdout);
  if (linger_s == 0) {
    drv_close_listen(&drv, lc);
    lc = NULL;
  }
  if (gpu) {
    sbuf =
      mmap(NULL, (size_t)MAX_WINDOW * MAX_MSG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    rbuf =
      mmap(NULL, (size_t)MAX_WINDOW * MAX_MSG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sbuf == MAP_FAILED || rbuf == MAP_FAILED)
      return fail("mmap of the GPU-like buffers", 0);
  } else {
    sbuf = aligned_alloc(4096, (size_t)MAX_WINDOW * MAX_MSG);
    rbuf = aligned_alloc(4096, (size_t)MAX_WINDOW * MAX_MSG);
  }
  if (sbuf == NULL || rbuf == NULL ||
      drv_regmr_type(&drv, sc, sbuf, (size_t)MAX_WINDOW * MAX_MSG, gpu ? NCCL_PTR_CUDA : NCCL_PTR_HOST,
                     &smh) != ncclSuccess ||
      drv_regmr_type(&drv, rc, rbuf, (size_t)MAX_WINDOW * MAX_MSG, gpu ? NCCL_PTR_CUDA : NCCL_PTR_HOST,
                     &rmh) != ncclSuccess)
    return fail(gpu ? "regMr(NCCL_PTR_CUDA) of the buffers (is nvidia_peermem loaded?)" : "buffers", 0);
  for (i = 0; gpu && i < MAX_WINDOW; i++) {
    slot_access(sbuf, i, 0);
    slot_access(rbuf, i, 0);
  }
  if (gpu)
    printf("stream: GPU-like memory: regMr(NCCL_PTR_CUDA), slots PROT_NONE while the plugin holds them\n");

  t0 = last = drv_now();
  deadline = t0 + 600;
  while (done_r < nrecv || done_s < nsend) {
    int done = 0, got = -1, tag = 1;
    double now = drv_now();

    if (now > deadline)
      return fail("no end within 600 s", done_r);
    if (now - last >= 2) {
      if (gpu && done_r < posted_r && rreq[done_r % window] == NULL && freq[done_r % window] != NULL)
        printf("stream: %ld received, %ld sent, %.1f s; waiting for the flush of message %ld\n", done_r,
               done_s, now - t0, done_r);
      else
        printf("stream: %ld received, %ld sent, %.1f s\n", done_r, done_s, now - t0);
      fflush(stdout);
      last = now;
    }
    /* Receives ahead, as NCCL posts them. */
    while (posted_r < nrecv && posted_r - done_r < window) {
      int slot = (int)(posted_r % window);
      void *buf = rbuf + (size_t)slot * MAX_MSG;
      size_t cap = MAX_MSG;
      if (drv_irecv(&drv, rc, 1, &buf, &cap, &tag, &rmh, &rreq[slot]) != ncclSuccess)
        return fail("irecv returned an error", posted_r);
      if (rreq[slot] == NULL)
        break;
      posted_r++;
    }
    /* One send per turn, retried with the same arguments while it returns no request. */
    if (posted_s < nsend && posted_s - done_s < window && (pace == 0 || now >= next_send)) {
      int slot = (int)(posted_s % window);
      size_t size = sizes[posted_s % NSIZES], k;
      uint8_t *p = sbuf + (size_t)slot * MAX_MSG;
      if (filled != posted_s) {
        slot_access(sbuf, slot, 1);
        for (k = 0; k < size; k++)
          p[k] = pattern(seed_of(role, posted_s), k);
        slot_access(sbuf, slot, 0);
        filled = posted_s;
      }
      if (drv_isend(&drv, sc, p, size, tag, smh, &sreq[slot]) != ncclSuccess)
        return fail("isend returned an error", posted_s);
      if (sreq[slot] != NULL) {
        posted_s++;
        next_send = now + pace;
      }
    }
    if (done_r < posted_r) {
      int slot = (int)(done_r % window);
      if (rreq[slot] != NULL) {
        if (drv_test(&drv, rreq[slot], &done, &got) != ncclSuccess)
          return fail("test of a receive returned an error", done_r);
        if (done) {
          rreq[slot] = NULL;
          rgot[slot] = got;
          /* GPU memory: NCCL flushes a completed receive before the GPU reads it. */
          if (gpu) {
            void *buf = rbuf + (size_t)slot * MAX_MSG;
            int fsize = got;
            if (drv_iflush(&drv, rc, 1, &buf, &fsize, &rmh, &freq[slot]) != ncclSuccess)
              return fail("iflush returned an error", done_r);
            if (freq[slot] == NULL && got > 0)
              return fail("iflush of GPU memory returned no request", done_r);
            done = freq[slot] == NULL;
          }
        }
      } else if (freq[slot] != NULL) {
        if (drv_test(&drv, freq[slot], &done, NULL) != ncclSuccess)
          return fail("test of a flush returned an error", done_r);
        if (done) {
          freq[slot] = NULL;
          flushes++;
        }
      }
      if (done) {
        size_t want = sizes[done_r % NSIZES], k;
        const uint8_t *p = rbuf + (size_t)slot * MAX_MSG;
        got = rgot[slot];
        if ((size_t)got != want)
          return fail("a receive reported the wrong size", done_r);
        slot_access(rbuf, slot, 1);
        for (k = 0; k < want; k++)
          if (p[k] != pattern(seed_of(peer, done_r), k)) {
            fprintf(stderr, "stream: message %ld byte %zu is %#x, expected %#x\n", done_r, k, p[k],
                    pattern(seed_of(peer, done_r), k));
            return fail("a received byte differs", done_r);
          }
        memset(rbuf + (size_t)slot * MAX_MSG, 0, want); /* a stale copy must not pass next time */
        slot_access(rbuf, slot, 0);
        bytes += want;
        done_r++;
      }
    }
    done = 0;
    if (done_s < posted_s) {
      int slot = (int)(done_s % window);
      if (drv_test(&drv, sreq[slot], &done, &got) != ncclSuccess)
        return fail("test of a send returned an error", done_s);
      if (done) {
        if ((size_t)got != sizes[done_s % NSIZES])
          return fail("a send reported the wrong size", done_s);
        done_s++;
      }
    }
    if (stop_at >= 0 && (done_r >= stop_at || done_s >= stop_at)) {
      printf("stream: stopping itself after %ld received, %ld sent\n", done_r, done_s);
      fflush(stdout);
      stop_at = -1;
      raise(SIGSTOP);
    }
    if (!marked && done_r >= (nrecv < 64 ? nrecv : 64) && done_s >= (nsend < 64 ? nsend : 64)) {
      resources(&fds0, &heap0);
      snprintf(name, sizeof(name), "%c.streaming", role);
      drv_file_put(xchg, name, "1", 1, NULL, 0);
      marked = 1;
    }
  }
  printf("stream: ok: %ld messages sent, %ld received, %llu bytes received and verified in %.1f s%s\n", nsend,
         nrecv, bytes, drv_now() - t0, gpu ? " (GPU-like memory, every receive flushed)" : "");
  if (gpu && flushes != nrecv)
    return fail("not every receive was flushed", flushes);
  if (linger_s > 0) {
    void *never = NULL;
    double until = drv_now() + linger_s;

    while (drv_now() < until) {
      if (drv_accept(&drv, lc, &never) != ncclSuccess || never != NULL)
        return fail("accept during --linger", 0);
      usleep(10000);
    }
    drv_close_listen(&drv, lc);
    resources(&fds1, &heap1);
    printf("stream: resources: %ld descriptors and %ld bytes of heap when streaming began, %ld and %ld after "
           "%d s of linger\n",
           fds0, heap0, fds1, heap1, linger_s);
    fflush(stdout);
  }
  /* With --finish-together, both ends finish before either closes: a receiver that exits as soon
   * as it has everything can close the channel before the sender has polled its last
   * completions (a race the liveness check's drain now closes: architecture.md section
   * 3.7), and this test is not about teardown. NCCL's own teardown does not close comms under a peer's pending sends. */
  if (together) {
    char flag;
    snprintf(name, sizeof(name), "%c.finished", role);
    drv_file_put(xchg, name, "1", 1, NULL, 0);
    snprintf(name, sizeof(name), "%c.finished", peer);
    if (drv_file_get(xchg, name, &flag, 1, 300) != 0)
      return fail("the peer did not finish", done_r);
  }
  drv_deregmr(&drv, sc, smh);
  drv_deregmr(&drv, rc, rmh);
  drv_close_send(&drv, sc);
  drv_close_recv(&drv, rc);
  drv_finalize(&drv);
  return 0;
}
