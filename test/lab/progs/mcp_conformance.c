/*
 * mcp_conformance.c - the conformance suite: drives the plugin through its exported
 * tables as NCCL's proxy threads do and checks every byte.
 *
 *   mcp-conformance [--plugin SO] [--abi 8|9|10|11|12] [--dev N] self TEST...
 *   mcp-conformance ... pair --role a|b --xchg DIR TEST...
 *
 * In "self" one process connects to itself; in "pair" two processes (one per lab
 * guest) swap listen handles through files in DIR and move data both ways at once.
 * Tests: sizes, grouped, optional, flush, many, inflight-close, reload, watchdog, diag,
 * fork, vdevice, ... (see each function and tests[] at the end). Output: one "ok"/"FAIL"
 * line per test, then "N passed, N failed".
 *
 * With --gpu (or CONF_GPU=1) data buffers are GPU-like, as with GPUDirect RDMA: mmap'ed,
 * registered with regMr(NCCL_PTR_CUDA) and then made unreachable by the CPU
 * (mprotect PROT_NONE), so any CPU access by the plugin is a crash. The harness opens
 * them only to fill and check, while no plugin call is in flight on them. The adapter
 * (soft-RoCE in the lab) moves the pages it pinned at registration, which mprotect does
 * not touch. Needs a peer-memory module (the lab's nvidia_peermem stand-in); only the
 * tests that say so run in this mode (props, sizes, grouped, flush, many).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "mcp_drive.h"
#include "core/sock.h"
#include "conn/wire.h"

#define MAX_SIZE (64u << 20)
#define CANARY 0xa5
#define CONNECT_TIMEOUT 120

static const char *plugin_path = "libnccl-net-mcp.so";
static int abi = 11, dev = 0, pair_mode = 0;
static const char *role = "a", *xchg = NULL;
static struct mcp_drive drv;
static int passed, failed, expect_init_fail, gpu_mode;

#define FAILF(...)                            \
  do {                                        \
    fprintf(stderr, "  error: " __VA_ARGS__); \
    fputc('\n', stderr);                      \
    return -1;                                \
  } while (0)

static uint8_t pattern(uint32_t seed, size_t i)
{
  uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 11);
  return (uint8_t)(x >> 13);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
  size_t i;
  for (i = 0; i < n; i++)
    p[i] = pattern(seed, i);
}

static long check(const uint8_t *p, size_t n, uint32_t seed)
{
  size_t i;
  for (i = 0; i < n; i++)
    if (p[i] != pattern(seed, i))
      return (long)i;
  return -1;
}

static uint32_t role_seed(const char *r) { return r[0] == 'a' ? 0x1000 : 0x2000; }
static const char *peer_role(void) { return pair_mode ? (role[0] == 'a' ? "b" : "a") : role; }

/* ---- GPU-like memory ---- */

/* Host buffers come from aligned_alloc; GPU-like ones are whole pages of their own, so
 * mprotect covers exactly them. */
static size_t page_round(size_t n) { return (n + 4095) & ~(size_t)4095; }

static void *buf_alloc(size_t cap)
{
  void *p;

  if (!gpu_mode)
    return aligned_alloc(4096, page_round(cap));
  p = mmap(NULL, page_round(cap), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void buf_free(void *p, size_t cap)
{
  if (p == NULL)
    return;
  if (gpu_mode)
    munmap(p, page_round(cap));
  else
    free(p);
}

static ncclResult_t buf_reg(void *comm, void *p, size_t cap, void **mh)
{
  return drv_regmr_type(&drv, comm, p, cap, gpu_mode ? NCCL_PTR_CUDA : NCCL_PTR_HOST, mh);
}

/* Opens (the harness fills or checks) or hides (the plugin may be working on it) a
 * GPU-like buffer; nothing in host mode. A failing mprotect is the harness's fault. */
static void buf_access(void *p, size_t cap, int open)
{
  if (!gpu_mode || p == NULL)
    return;
  if (mprotect(p, page_round(cap), open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
    fprintf(stderr, "mcp-conformance: mprotect of %p+%zu: %s\n", p, cap, strerror(errno));
    exit(3);
  }
}

/* What was running, for the crash report: a CPU access to a hidden buffer is a SIGSEGV.
 * The size is per thread ('threads' drives links from several), and the handler runs on
 * the thread that faulted. */
static const char *volatile cur_test = "setup";
static _Thread_local volatile size_t cur_size;

static void gpu_segv(int sig, siginfo_t *si, void *uc)
{
  char msg[256];
  int n;

  (void)uc;
  n = snprintf(msg, sizeof(msg),
               "mcp-conformance: SIGSEGV at %p in test %s, message of %zu bytes: a CPU access "
               "to memory the CPU cannot reach (with --gpu: GPU-like memory)\n",
               si->si_addr, cur_test, cur_size);
  if (n > 0 && write(2, msg, (size_t)n) < 0)
    n = 0;
  signal(sig, SIG_DFL);
  raise(sig);
}

static void gpu_segv_install(void)
{
  struct sigaction sa;

  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = gpu_segv;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigaction(SIGSEGV, &sa, NULL);
}

/* Whether the CPU can read the byte at p: write(2) from it into a pipe fails with
 * EFAULT when it cannot, without a signal. Proves the hiding is real. */
static int cpu_can_read(const void *p)
{
  int fd[2], ok;

  if (pipe(fd) != 0)
    return 1;
  ok = write(fd[1], p, 1) == 1;
  close(fd[0]);
  close(fd[1]);
  return ok;
}

/* ---- connection setup ---- */

static int write_file(const char *name, const void *data, size_t len)
{
  return drv_file_put(xchg, name, data, len, NULL, 0);
}

static int read_file(const char *name, void *data, size_t len, int timeout_s)
{
  return drv_file_get(xchg, name, data, len, timeout_s);
}

static int conn_counter;

/* A send comm toward the peer (or ourselves) and a receive comm from it. */
static int open_link(void **sc, void **rc)
{
  char handle[NCCL_NET_HANDLE_MAXSIZE], peer[NCCL_NET_HANDLE_MAXSIZE], name[64];
  void *lc = NULL;
  int rcode;

  memset(handle, 0, sizeof(handle));
  if (drv_listen(&drv, dev, handle, &lc) != ncclSuccess || lc == NULL)
    FAILF("listen on device %d failed", dev);
  if (pair_mode) {
    snprintf(name, sizeof(name), "%s.handle.%d", role, conn_counter);
    if (write_file(name, handle, sizeof(handle)) != 0)
      return -1;
    snprintf(name, sizeof(name), "%s.handle.%d", peer_role(), conn_counter);
    if (read_file(name, peer, sizeof(peer), CONNECT_TIMEOUT) != 0)
      return -1;
  } else {
    memcpy(peer, handle, sizeof(peer));
  }
  conn_counter++;
  /* Alternate the call order between connections: both orders must work. */
  rcode = drv_connect_pair(&drv, dev, peer, lc, sc, rc, CONNECT_TIMEOUT, conn_counter % 2);
  drv_close_listen(&drv, lc);
  return rcode;
}

static void close_link(void *sc, void *rc)
{
  if (sc != NULL)
    drv_close_send(&drv, sc);
  if (rc != NULL)
    drv_close_recv(&drv, rc);
}

/* ---- one exchange: each side sends one message and receives one ---- */

struct link {
  void *sc, *rc;
  uint8_t *sbuf, *rbuf;
  size_t cap;
  void *smh, *rmh;
};

static int link_open(struct link *l, size_t cap)
{
  memset(l, 0, sizeof(*l));
  if (open_link(&l->sc, &l->rc) != 0)
    return -1;
  l->cap = cap;
  l->sbuf = buf_alloc(cap);
  l->rbuf = buf_alloc(cap);
  if (l->sbuf == NULL || l->rbuf == NULL)
    FAILF("out of memory for %zu-byte buffers", cap);
  if (buf_reg(l->sc, l->sbuf, cap, &l->smh) != ncclSuccess ||
      buf_reg(l->rc, l->rbuf, cap, &l->rmh) != ncclSuccess)
    FAILF("regMr of %zu bytes of %s memory failed", cap, gpu_mode ? "GPU-like (NCCL_PTR_CUDA)" : "host");
  if (gpu_mode) {
    memset(l->sbuf, 0, cap); /* the first fill would do it; keeps the check below honest */
    buf_access(l->sbuf, cap, 0);
    buf_access(l->rbuf, cap, 0);
    if (cpu_can_read(l->sbuf) || cpu_can_read(l->rbuf))
      FAILF("a GPU-like buffer is still readable by the CPU after mprotect(PROT_NONE)");
  }
  return 0;
}

/* The harness's turn (open) or the plugin's (hidden) on both buffers of a link. */
static void link_open_bufs(struct link *l) { buf_access(l->sbuf, l->cap, 1), buf_access(l->rbuf, l->cap, 1); }
static void link_hide_bufs(struct link *l) { buf_access(l->sbuf, l->cap, 0), buf_access(l->rbuf, l->cap, 0); }

static void link_close(struct link *l)
{
  if (l->smh)
    drv_deregmr(&drv, l->sc, l->smh);
  if (l->rmh)
    drv_deregmr(&drv, l->rc, l->rmh);
  close_link(l->sc, l->rc);
  buf_free(l->sbuf, l->cap);
  buf_free(l->rbuf, l->cap);
  memset(l, 0, sizeof(*l));
}

static int wait_req(void *req, int *sizes, const char *what)
{
  double deadline = drv_now() + 120;
  int done = 0;

  while (!done) {
    ncclResult_t r = drv_test(&drv, req, &done, sizes);
    if (r != ncclSuccess)
      FAILF("test of %s returned %d", what, r);
    if (drv_now() > deadline)
      FAILF("%s did not complete within 120 s", what);
  }
  return 0;
}

/* Post a receive of cap bytes and a send of size bytes; wait for both; verify. */
static int exchange(struct link *l, size_t size, size_t cap, uint32_t msg)
{
  void *sreq = NULL, *rreq = NULL;
  int tag = 7, rsize = -1, ssize = -1;
  double deadline = drv_now() + 120;
  long bad;
  size_t i;

  cur_size = size;
  link_open_bufs(l);
  fill(l->sbuf, size, role_seed(role) + msg);
  memset(l->rbuf, CANARY, cap);
  link_hide_bufs(l);
  if (drv_irecv(&drv, l->rc, 1, (void **)&l->rbuf, &cap, &tag, &l->rmh, &rreq) != ncclSuccess || rreq == NULL)
    FAILF("irecv of %zu bytes failed", cap);
  while (sreq == NULL) {
    if (drv_isend(&drv, l->sc, l->sbuf, size, tag, l->smh, &sreq) != ncclSuccess)
      FAILF("isend of %zu bytes failed", size);
    if (drv_now() > deadline)
      FAILF("isend of %zu bytes never found the peer's receive", size);
  }
  if (wait_req(sreq, &ssize, "send") != 0 || wait_req(rreq, &rsize, "receive") != 0)
    return -1;
  link_open_bufs(l);
  if (ssize != (int)size)
    FAILF("send of %zu bytes reported %d", size, ssize);
  if (rsize != (int)size)
    FAILF("receive of a %zu-byte message reported %d bytes", size, rsize);
  bad = check(l->rbuf, size, role_seed(peer_role()) + msg);
  if (bad >= 0)
    FAILF("message of %zu bytes: byte %ld differs", size, bad);
  for (i = size; i < cap; i++)
    if (l->rbuf[i] != CANARY)
      FAILF("message of %zu bytes into a %zu-byte buffer: byte %zu past the end was written", size, cap, i);
  return 0;
}

/* Every size from 0 to 64 MiB: powers of two and odd sizes, into larger buffers. */
static int test_sizes(void)
{
  static const size_t odd[] = {3, 7, 100, 1000, 4095, 4097, 65535, 65537, 1048575, 3145733, 9999991};
  struct link l;
  uint32_t msg = 0;
  size_t s, max = getenv("CONF_MAX_SIZE") ? strtoul(getenv("CONF_MAX_SIZE"), NULL, 0) : MAX_SIZE;
  unsigned i;
  int rc = 0;

  if (link_open(&l, max + 8192) != 0)
    return -1;
  if (exchange(&l, 0, 64, msg++) != 0)
    rc = -1;
  for (s = 1; rc == 0 && s <= max; s *= 2)
    rc = exchange(&l, s, s + 4096, msg++);
  for (i = 0; rc == 0 && i < sizeof(odd) / sizeof(odd[0]); i++)
    if (odd[i] <= max)
      rc = exchange(&l, odd[i], odd[i] + 13, msg++);
  /* Exactly the posted size, back to back. */
  for (i = 0; rc == 0 && i < 64; i++)
    rc = exchange(&l, 4096, 4096, msg++);
  link_close(&l);
  return rc;
}

/* Grouped receives: n = 1..8 buffers, tags shuffled, sends in another order. */
static int test_grouped(void)
{
  struct link l;
  int n, rc = 0;
  const size_t chunk = 256 * 1024;

  if (link_open(&l, 8 * chunk) != 0)
    return -1;
  for (n = 1; rc == 0 && n <= 8; n++) {
    void *data[8], *mh[8], *sreq[8] = {0}, *rreq = NULL;
    size_t sizes[8];
    int tags[8], got[8], i, order[8];
    double deadline = drv_now() + 120;

    link_open_bufs(&l);
    memset(l.rbuf, CANARY, 8 * chunk);
    for (i = 0; i < n; i++) {
      data[i] = l.rbuf + (size_t)i * chunk;
      sizes[i] = chunk;
      tags[i] = 100 + (i + n / 2) % n; /* a rotation of 100..100+n-1 */
      mh[i] = l.rmh;
      order[i] = n - 1 - i; /* sends in reverse tag order */
    }
    for (i = 0; i < n; i++) {
      int t = 100 + i;
      size_t len = (size_t)(t * 997 + n * 13) % chunk;
      if (i == 1)
        len = 0; /* one empty element */
      fill(l.sbuf + (size_t)i * chunk, len, role_seed(role) + (uint32_t)(t * 16 + n));
    }
    link_hide_bufs(&l);
    if (drv_irecv(&drv, l.rc, n, data, sizes, tags, mh, &rreq) != ncclSuccess || rreq == NULL)
      FAILF("grouped irecv of %d buffers failed", n);
    for (i = 0; i < n; i++) {
      int t = 100 + order[i];
      size_t len = order[i] == 1 ? 0 : (size_t)(t * 997 + n * 13) % chunk;
      while (sreq[i] == NULL) {
        if (drv_isend(&drv, l.sc, l.sbuf + (size_t)order[i] * chunk, len, t, l.smh, &sreq[i]) != ncclSuccess)
          FAILF("isend with tag %d failed", t);
        if (drv_now() > deadline)
          FAILF("isend with tag %d never matched", t);
      }
    }
    for (i = 0; i < n; i++)
      if (wait_req(sreq[i], NULL, "grouped send") != 0)
        return -1;
    if (wait_req(rreq, got, "grouped receive") != 0)
      return -1;
    link_open_bufs(&l);
    for (i = 0; i < n; i++) {
      int t = tags[i];
      size_t len = t - 100 == 1 ? 0 : (size_t)(t * 997 + n * 13) % chunk;
      long bad;
      if (got[i] != (int)len)
        FAILF("group of %d: buffer %d (tag %d) reports %d bytes, sent %zu", n, i, t, got[i], len);
      bad = check((uint8_t *)data[i], len, role_seed(peer_role()) + (uint32_t)(t * 16 + n));
      if (bad >= 0)
        FAILF("group of %d: buffer %d (tag %d) byte %ld differs", n, i, t, bad);
      if (len < chunk && ((uint8_t *)data[i])[len] != CANARY)
        FAILF("group of %d: buffer %d written past %zu bytes", n, i, len);
    }
  }
  link_close(&l);
  return rc;
}

/* The optional-completion hint: the receive may complete at once; the data lands anyway. */
static int test_optional(void)
{
  struct link l;
  int i, rc = 0;

  if (link_open(&l, 1 << 16) != 0)
    return -1;
  for (i = 0; rc == 0 && i < 100; i++) {
    void *rreq = (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION, *sreq = NULL;
    size_t cap = 1 << 16, size = 8 + (size_t)i * 64;
    int tag = 1, done = 0, sz[1];
    double deadline = drv_now() + 60;

    memset(l.rbuf, CANARY, cap);
    fill(l.sbuf, size, role_seed(role) + 500 + (uint32_t)i);
    if (drv_irecv(&drv, l.rc, 1, (void **)&l.rbuf, &cap, &tag, &l.rmh, &rreq) != ncclSuccess)
      FAILF("irecv with the optional-completion hint failed");
    if (rreq == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION)
      FAILF("irecv left the 0x1 hint in *request");
    if (rreq == NULL)
      FAILF("irecv returned no request with the hint");
    while (sreq == NULL)
      if (drv_isend(&drv, l.sc, l.sbuf, size, tag, l.smh, &sreq) != ncclSuccess || drv_now() > deadline)
        FAILF("isend failed");
    while (!done)
      if (drv_test(&drv, rreq, &done, sz) != ncclSuccess)
        FAILF("test of an optional receive failed");
    if (wait_req(sreq, NULL, "send") != 0)
      return -1;
    /* Whether or not test waited, the data must be there (poll the memory itself). */
    while (check(l.rbuf, size, role_seed(peer_role()) + 500 + (uint32_t)i) >= 0) {
      if (drv_now() > deadline)
        FAILF("optional receive %d: the data never landed", i);
      usleep(100);
    }
  }
  /* The comm still works normally afterwards (released slots were recycled). */
  for (i = 0; rc == 0 && i < 80; i++)
    rc = exchange(&l, 1000, 1 << 16, 900 + (uint32_t)i);
  link_close(&l);
  return rc;
}

/* iflush through the loopback read (MCPNET_FORCE_FLUSH=1 makes host memory use it). */
static int test_flush(void)
{
  struct link l;
  int i, rc = 0;

  if (link_open(&l, 1 << 20) != 0)
    return -1;
  for (i = 0; rc == 0 && i < 20; i++) {
    void *freq = NULL;
    int size = 4096 * (i + 1);
    if (exchange(&l, (size_t)size, 1 << 20, 700 + (uint32_t)i) != 0)
      return -1;
    link_hide_bufs(&l);
    if (drv_iflush(&drv, l.rc, 1, (void **)&l.rbuf, &size, &l.rmh, &freq) != ncclSuccess)
      FAILF("iflush failed");
    if (getenv("MCPNET_FORCE_FLUSH") != NULL && freq == NULL)
      FAILF("iflush returned no request although MCPNET_FORCE_FLUSH=1");
    if (gpu_mode && freq == NULL)
      FAILF("iflush of GPU memory returned no request (the data may not be visible to the GPU yet)");
    if (freq != NULL && wait_req(freq, NULL, "flush") != 0)
      return -1;
  }
  link_close(&l);
  return rc;
}

/* Many connections at once on one device, each moving verified data. */
static int test_many(void)
{
  int n = getenv("CONF_CONNS") ? atoi(getenv("CONF_CONNS")) : 256, i, rc = 0;
  struct link *ls = calloc((size_t)n, sizeof(*ls));

  if (ls == NULL)
    return -1;
  for (i = 0; i < n; i++)
    if (link_open(&ls[i], 65536) != 0)
      FAILF("connection %d of %d could not be opened", i, n);
  for (i = 0; rc == 0 && i < n; i++)
    rc = exchange(&ls[i], 65536 - (size_t)i, 65536, 1000 + (uint32_t)i);
  for (i = 0; i < n; i++)
    link_close(&ls[i]);
  free(ls);
  return rc;
}

/* Closing comms with requests in flight returns promptly and crashes nothing. */
static int test_inflight_close(void)
{
  struct link l;
  int i;
  double t0;

  if (link_open(&l, 1 << 22) != 0)
    return -1;
  for (i = 0; i < 8; i++) {
    void *req = NULL;
    size_t cap = 1 << 19;
    int tag = 3;
    void *buf = l.rbuf + (size_t)i * cap;
    if (drv_irecv(&drv, l.rc, 1, &buf, &cap, &tag, &l.rmh, &req) != ncclSuccess)
      FAILF("irecv failed");
  }
  for (i = 0; i < 4; i++) {
    void *req = NULL;
    drv_isend(&drv, l.sc, l.sbuf + (size_t)i * (1 << 19), 1 << 19, 3, l.smh, &req);
  }
  t0 = drv_now();
  link_close(&l);
  if (drv_now() - t0 > 1.0)
    FAILF("closing comms with requests in flight took %.2f s", drv_now() - t0);
  return 0;
}

/* ---- allocation counter: the data path must not allocate ---- */

/* The counter lives in libmcp-alloc-count.so, preloaded for this test only, so the
 * sanitizer and valgrind runs keep their own malloc. */
struct alloc_counter {
  void (*enable)(int on);
  long (*count)(void);
  void (*reset)(void);
};

static int alloc_counter_find(struct alloc_counter *a)
{
  a->enable = (void (*)(int))dlsym(RTLD_DEFAULT, "mcp_alloc_count_enable");
  a->count = (long (*)(void))dlsym(RTLD_DEFAULT, "mcp_alloc_count");
  a->reset = (void (*)(void))dlsym(RTLD_DEFAULT, "mcp_alloc_count_reset");
  return a->enable && a->count && a->reset ? 0 : -1;
}

/* isend/irecv/test without a single malloc or free after warm-up (100,000 calls). */
static int test_noalloc(void)
{
  struct alloc_counter ac;
  struct link l;
  long calls = 0, allocs;
  int tag = 9, i;

  if (alloc_counter_find(&ac) != 0)
    FAILF("run this test with LD_PRELOAD=<build>/lib/libmcp-alloc-count.so");
  if (link_open(&l, 1 << 16) != 0)
    return -1;
  for (i = 0; i < 200; i++)
    if (exchange(&l, 64, 4096, 2000 + (uint32_t)i) != 0)
      return -1;
  /* The counter must see the plugin's own allocations: a registration makes one. */
  {
    void *mh = NULL, *probe = aligned_alloc(4096, 4096); /* not covered by a cached MR */
    ac.reset();
    ac.enable(1);
    drv_regmr(&drv, l.sc, probe, 4096, &mh);
    drv_deregmr(&drv, l.sc, mh);
    ac.enable(0);
    free(probe);
    if (ac.count() == 0)
      FAILF("the allocation counter does not see the plugin's malloc calls");
    ac.reset();
  }
  ac.enable(1);
  while (calls < 100000) {
    void *sreq = NULL, *rreq = NULL;
    size_t cap = 4096;
    int sd = 0, rd = 0;
    if (drv_irecv(&drv, l.rc, 1, (void **)&l.rbuf, &cap, &tag, &l.rmh, &rreq) != ncclSuccess || rreq == NULL)
      break;
    calls++;
    while (sreq == NULL && drv_isend(&drv, l.sc, l.sbuf, 8, tag, l.smh, &sreq) == ncclSuccess)
      calls++;
    while (!sd || !rd) {
      if (!sd && drv_test(&drv, sreq, &sd, NULL) != ncclSuccess)
        break;
      if (!rd && drv_test(&drv, rreq, &rd, NULL) != ncclSuccess)
        break;
      calls += 2;
    }
  }
  ac.enable(0);
  allocs = ac.count();
  link_close(&l);
  if (calls < 100000)
    FAILF("a call failed after %ld calls", calls);
  if (allocs != 0)
    FAILF("%ld malloc/free calls during %ld isend/irecv/test calls", allocs, calls);
  printf("  %ld isend/irecv/test calls, %ld allocations\n", calls, allocs);
  return 0;
}

/* ---- properties ---- */

static int read_sysfs(const char *path, char *buf, size_t len)
{
  FILE *f = fopen(path, "r");
  if (f == NULL || fgets(buf, (int)len, f) == NULL) {
    if (f)
      fclose(f);
    return -1;
  }
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

/* Where the plugin reads sysfs: "/sys", or the tree of the verbs library
 * MCPNET_VERBS_LIBRARY names (the userspace device names one), which the plugin has
 * loaded by now. */
static const char *sysfs_root(void)
{
  const char *lib = getenv("MCPNET_VERBS_LIBRARY");
  const char *(*fn)(void);
  void *h;

  if (lib == NULL || lib[0] == '\0' || (h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) == NULL)
    return "/sys";
  fn = (const char *(*)(void))dlsym(h, "mcpnet_verbs_sysfs_root");
  return fn != NULL && fn() != NULL ? fn() : "/sys";
}

/* v12's rail and plane of a (physical) device: CONF_EXPECT_RAIL / CONF_EXPECT_PLANE when
 * set (what NCCL_IB_HCA's name:port:rail:plane or the rank map's rail=/plane= gave), else
 * NCCL_NET_ID_UNDEF; older tables have neither (drv_props leaves them undefined). */
static int rail_plane_check(const ncclNetProperties_v12_t *p)
{
  int rail = abi >= 12 && getenv("CONF_EXPECT_RAIL") ? atoi(getenv("CONF_EXPECT_RAIL")) : NCCL_NET_ID_UNDEF;
  int plane =
    abi >= 12 && getenv("CONF_EXPECT_PLANE") ? atoi(getenv("CONF_EXPECT_PLANE")) : NCCL_NET_ID_UNDEF;

  if (p->railId != rail || p->planeId != plane)
    FAILF("%s: railId %d planeId %d, want %d and %d", p->name, p->railId, p->planeId, rail, plane);
  return 0;
}

/* getProperties of every device: unique names, sysfs-backed pciPath and guid, sane limits,
 * and (v12) the rail and plane asked for. */
static int test_props(void)
{
  const char *root = sysfs_root();
  char peermem[512], nvpeer[512];

  int n = 0, i, j;
  ncclNetProperties_v12_t p[32];

  if (drv_devices(&drv, &n) != ncclSuccess || n <= 0 || n > 32)
    FAILF("devices() returned %d", n);
  for (i = 0; i < n; i++) {
    char path[512], guid[64], expect[64], dname[64];
    unsigned long long g;
    if (drv_props(&drv, i, &p[i]) != ncclSuccess)
      FAILF("getProperties(%d) failed", i);
    if (p[i].name == NULL || p[i].name[0] == '\0')
      FAILF("device %d has no name", i);
    for (j = 0; j < i; j++)
      if (strcmp(p[i].name, p[j].name) == 0)
        FAILF("devices %d and %d share the name %s", j, i, p[i].name);
    /* A fused device ("rxe1+rxe2") reports its first member's pciPath and guid. */
    snprintf(dname, sizeof(dname), "%.*s", (int)strcspn(p[i].name, ":+"), p[i].name);
    snprintf(path, sizeof(path), "%s/class/infiniband/%s/device", root, dname);
    if (access(path, F_OK) == 0) {
      /* NCCL's topology wants the NIC: the device's PCI path with the function digit
       * zeroed (a VF's PF under NCCL_IB_MERGE_VFS, which this lab has none of). */
      char *real = realpath(path, NULL);
      size_t plen = real ? strlen(real) : 0;
      if (plen >= 2 && real[plen - 2] == '.')
        real[plen - 1] = '0';
      if (p[i].pciPath == NULL || real == NULL || strcmp(real, p[i].pciPath) != 0)
        FAILF("%s: pciPath %s, expected the NIC's path %s", p[i].name, p[i].pciPath ? p[i].pciPath : "NULL",
              real ? real : "?");
      free(real);
    } else if (p[i].pciPath != NULL) {
      FAILF("%s has no sysfs device node but reports pciPath %s", p[i].name, p[i].pciPath);
    }
    snprintf(path, sizeof(path), "%s/class/infiniband/%s/sys_image_guid", root, dname);
    if (read_sysfs(path, guid, sizeof(guid)) != 0)
      FAILF("cannot read %s", path);
    g = p[i].guid;
    snprintf(expect, sizeof(expect), "%04llx:%04llx:%04llx:%04llx", (g >> 48) & 0xffff, (g >> 32) & 0xffff,
             (g >> 16) & 0xffff, g & 0xffff);
    if (strcmp(expect, guid) != 0)
      FAILF("%s: guid %s, sysfs sys_image_guid %s", p[i].name, expect, guid);
    if (p[i].speed <= 0 || p[i].port < 1 || p[i].regIsGlobal != 1 || p[i].maxRecvs != 8 || p[i].maxComms <= 0)
      FAILF("%s: speed %d port %d regIsGlobal %d maxRecvs %d maxComms %d", p[i].name, p[i].speed, p[i].port,
            p[i].regIsGlobal, p[i].maxRecvs, p[i].maxComms);
    /* NCCL takes equal (guid, port) for one physical port: distinct devices must differ. */
    for (j = 0; j < i; j++)
      if (p[j].guid == p[i].guid && p[j].port == p[i].port)
        FAILF("%s and %s both report guid %s port %d: NCCL would take them for one port", p[j].name,
              p[i].name, expect, p[i].port);
    if (abi >= 9 && (p[i].maxP2pBytes == 0 || p[i].maxP2pBytes > (1ULL << 40)))
      FAILF("%s: maxP2pBytes %zu", p[i].name, p[i].maxP2pBytes);
    if (!(p[i].ptrSupport & NCCL_PTR_HOST))
      FAILF("%s: ptrSupport %#x lacks HOST", p[i].name, p[i].ptrSupport);
    snprintf(peermem, sizeof(peermem), "%s/module/nvidia_peermem", root);
    snprintf(nvpeer, sizeof(nvpeer), "%s/module/nv_peer_mem", root);
    if ((p[i].ptrSupport & NCCL_PTR_CUDA) && access(peermem, F_OK) != 0 && access(nvpeer, F_OK) != 0)
      FAILF("%s: CUDA pointer support claimed without a peer-memory module", p[i].name);
    if (gpu_mode && !(p[i].ptrSupport & NCCL_PTR_CUDA))
      FAILF("%s: ptrSupport %#x lacks CUDA, which GPU-like memory needs (is nvidia_peermem loaded?)",
            p[i].name, p[i].ptrSupport);
    if (getenv("CONF_EXPECT_NO_DMABUF") && (p[i].ptrSupport & NCCL_PTR_DMABUF))
      FAILF("%s: DMA-BUF support claimed on a device that has none", p[i].name);
    if (rail_plane_check(&p[i]) != 0)
      return 1;
    printf("  %d: %s pciPath=%s guid=%s speed=%d port=%d ptrSupport=%#x maxComms=%d", i, p[i].name,
           p[i].pciPath ? p[i].pciPath : "NULL", expect, p[i].speed, p[i].port, p[i].ptrSupport,
           p[i].maxComms);
    if (abi >= 12)
      printf(" railId=%d planeId=%d", p[i].railId, p[i].planeId);
    printf("\n");
  }
  return 0;
}

/* ---- several QPs per connection: every QP carries traffic ---- */

struct qp_psn {
  unsigned qpn;
  unsigned long psn;
};

static int read_qp_psns(struct qp_psn *out, int max)
{
  char cmd[128], line[1024];
  FILE *f;
  int n = 0;

  snprintf(cmd, sizeof(cmd), "rdma res show qp pid %d 2>&1", (int)getpid());
  f = popen(cmd, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL && n < max) {
    char *q = strstr(line, "lqpn "), *s = strstr(line, "sq-psn ");
    if (q && s) {
      out[n].qpn = (unsigned)strtoul(q + 5, NULL, 10);
      out[n].psn = strtoul(s + 7, NULL, 10);
      n++;
    }
  }
  pclose(f);
  return n;
}

static int test_qps(void)
{
  struct qp_psn before[64], after[64];
  struct link l;
  int nb, na, i, j,
    advanced = 0,
    want = getenv("NCCL_IB_QPS_PER_CONNECTION") ? atoi(getenv("NCCL_IB_QPS_PER_CONNECTION")) : 1;

  if (link_open(&l, 8 << 20) != 0)
    return -1;
  nb = read_qp_psns(before, 64);
  if (nb < 2 * want)
    FAILF("rdma res show qp lists %d QPs of this process, expected %d", nb, 2 * want);
  for (i = 0; i < 16; i++)
    if (exchange(&l, i % 2 ? (size_t)(4 << 20) + (size_t)i : (size_t)(100 + i), 8 << 20,
                 3000 + (uint32_t)i) != 0)
      return -1;
  na = read_qp_psns(after, 64);
  for (i = 0; i < na; i++)
    for (j = 0; j < nb; j++)
      if (after[i].qpn == before[j].qpn && after[i].psn != before[j].psn)
        advanced++;
  printf("  %d QPs per connection: %d of %d QPs of this process advanced their send PSN\n", want, advanced,
         na);
  /* Every sender QP carries data, and the receiver's first QP carries clear-to-sends. */
  if (advanced < want + 1)
    FAILF("only %d QPs advanced their send PSN; %d sender QPs + 1 expected", advanced, want);
  link_close(&l);
  return 0;
}

/* ---- concurrency: two threads drive their own comms, a third registers memory ---- */

struct thread_arg {
  struct link *l;
  int id, rc;
  atomic_int *stop;
};

static void *thread_drive(void *p)
{
  struct thread_arg *a = p;
  int i;

  for (i = 0; i < 300 && a->rc == 0; i++)
    a->rc = exchange(a->l, (size_t)(1 + (i * 7919) % 200000), 1 << 18, (uint32_t)(a->id * 100000 + i));
  return NULL;
}

static void *thread_register(void *p)
{
  struct thread_arg *a = p;
  struct link *ls = a->l;
  int i = 0;

  while (!atomic_load(a->stop) && a->rc == 0) {
    struct link *l = &ls[i % 2];
    void *mh = NULL;
    /* Pages overlapping the buffers in flight, and fresh ones. */
    size_t off = (size_t)(i % 7) * 4096, len = 4096 * (size_t)(1 + i % 5);
    void *comm = i % 2 ? l->sc : l->rc;
    uint8_t *base = i % 3 ? l->rbuf : l->sbuf;
    if (drv_regmr(&drv, comm, base + off, len, &mh) != ncclSuccess || mh == NULL)
      a->rc = -1;
    else if (drv_deregmr(&drv, comm, mh) != ncclSuccess)
      a->rc = -1;
    i++;
  }
  return NULL;
}

static int test_threads(void)
{
  struct link ls[2];
  struct thread_arg a[3];
  pthread_t t[3];
  atomic_int stop = 0;
  int i, rc = 0;

  if (link_open(&ls[0], 1 << 18) != 0 || link_open(&ls[1], 1 << 18) != 0)
    return -1;
  for (i = 0; i < 3; i++) {
    a[i].l = i < 2 ? &ls[i] : ls;
    a[i].id = i + 1;
    a[i].rc = 0;
    a[i].stop = &stop;
    pthread_create(&t[i], NULL, i < 2 ? thread_drive : thread_register, &a[i]);
  }
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  atomic_store(&stop, 1);
  pthread_join(t[2], NULL);
  for (i = 0; i < 3; i++)
    if (a[i].rc != 0) {
      fprintf(stderr, "  error: thread %d failed\n", i);
      rc = -1;
    }
  link_close(&ls[0]);
  link_close(&ls[1]);
  return rc;
}

/* ---- lifecycle: nothing of the plugin outlives the last comm and dlclose ---- */

static int count_dir(const char *path)
{
  DIR *d = opendir(path);
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n - 1; /* opendir's own descriptor, or nothing for task */
}

static int count_rdma(const char *what)
{
  char cmd[128], line[1024];
  FILE *f;
  int n = 0;

  snprintf(cmd, sizeof(cmd), "rdma res show %s 2>/dev/null", what);
  f = popen(cmd, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    n++;
  pclose(f);
  return n;
}

struct footprint {
  int fds, tasks, qp, cq, mr, pd;
};

static void footprint(struct footprint *fp)
{
  fp->fds = count_dir("/proc/self/fd");
  fp->tasks = count_dir("/proc/self/task") + 1;
  fp->qp = count_rdma("qp");
  fp->cq = count_rdma("cq");
  fp->mr = count_rdma("mr");
  fp->pd = count_rdma("pd");
}

/* One whole life: dlopen, init, transfer, close, finalize, dlclose. */
static int one_life(int round)
{
  struct link l;
  int n = 0, rc = 0;
  void *again;

  double t0 = drv_now(), t1, t2, t3;

  if (drv_open(&drv, plugin_path, abi) != 0)
    FAILF("dlopen round %d failed", round);
  if (drv_init(&drv) != ncclSuccess || drv_devices(&drv, &n) != ncclSuccess || n <= 0)
    FAILF("init round %d failed", round);
  t1 = drv_now();
  if (link_open(&l, 1 << 20) != 0)
    return -1;
  rc = exchange(&l, 1 << 20, 1 << 20, 5000 + (uint32_t)round);
  t2 = drv_now();
  link_close(&l);
  drv_finalize(&drv);
  drv_close_lib(&drv);
  t3 = drv_now();
  printf("  round %d: init %.2f s, connect+transfer %.2f s, close+finalize+dlclose %.2f s\n", round, t1 - t0,
         t2 - t1, t3 - t2);
  again = dlopen(plugin_path, RTLD_NOW | RTLD_NOLOAD);
  if (again != NULL) {
    dlclose(again);
    FAILF("round %d: the plugin is still mapped after dlclose", round);
  }
  return rc;
}

static int test_reload(void)
{
  struct footprint base, after;
  int round;

  if (drv.lib != NULL)
    FAILF("reload must be the only test of its run: the plugin is already loaded");
  footprint(&base);
  for (round = 1; round <= 2; round++) {
    if (one_life(round) != 0)
      return -1;
    footprint(&after);
    printf("  after round %d: fds %d/%d threads %d/%d qp %d/%d cq %d/%d mr %d/%d pd %d/%d (now/baseline)\n",
           round, after.fds, base.fds, after.tasks, base.tasks, after.qp, base.qp, after.cq, base.cq,
           after.mr, base.mr, after.pd, base.pd);
    if (memcmp(&base, &after, sizeof(base)) != 0)
      FAILF("round %d left resources behind", round);
  }
  return 0;
}

/* ---- registration cache ---- */

/* A sub-range of a registered range is a hit; the last deregistration frees at once. */
static int test_mrcache(void)
{
  struct link l;
  void *a = NULL, *b = NULL, *c = NULL;
  uint8_t *buf;
  int base, n1, n2, n3, n4;

  if (link_open(&l, 4096) != 0)
    return -1;
  buf = aligned_alloc(4096, 1 << 20);
  base = count_rdma("mr");
  if (drv_regmr(&drv, l.sc, buf, 1 << 20, &a) != ncclSuccess)
    FAILF("regMr of 1 MiB failed");
  n1 = count_rdma("mr");
  if (drv_regmr(&drv, l.rc, buf + 8192, 65536, &b) != ncclSuccess)
    FAILF("regMr of a sub-range failed");
  n2 = count_rdma("mr");
  drv_deregmr(&drv, l.sc, a);
  n3 = count_rdma("mr");
  drv_deregmr(&drv, l.rc, b);
  n4 = count_rdma("mr");
  if (drv_regmr(&drv, l.sc, buf + 4096, 4096, &c) != ncclSuccess)
    FAILF("regMr after release failed");
  drv_deregmr(&drv, l.sc, c);
  printf("  MRs: baseline %d, +1 MiB %d, +sub-range %d, -first %d, -second %d\n", base, n1, n2, n3, n4);
  free(buf);
  link_close(&l);
  if (n1 != base + 1 || n2 != n1 || n3 != n1 || n4 != base)
    FAILF("the cache did not share the covering MR or did not free it with the last reference");
  return 0;
}

/* ---- connection setup never waits on the peer ---- */

/* connect toward an address nobody answers: no call waits for the peer, and the connect
 * fails at its deadline (MCPNET_CONNECT_TIMEOUT) naming address and port. A call that
 * waited would take at least until the kernel's first SYN retransmission (1 s); a call of
 * ours takes well under a millisecond, but a guest whose vCPU the host starves stretches
 * it (116.6 ms seen with two busy loops on the host), so the bound is 500 ms. */
static int test_unreachable(void)
{
  char handle[NCCL_NET_HANDLE_MAXSIZE], err[MCP_WIRE_ERRLEN];
  struct mcp_wire_handle h;
  union mcp_sockaddr addr;
  void *lc = NULL, *sc = NULL;
  double worst = 0, t0 = drv_now();
  ncclResult_t rc = ncclSuccess;
  int calls = 0;

  memset(handle, 0, sizeof(handle));
  if (drv_listen(&drv, dev, handle, &lc) != ncclSuccess)
    FAILF("listen failed");
  if (mcp_wire_handle_decode((uint8_t *)handle, &h, err, sizeof(err)) != 0)
    FAILF("cannot decode our own handle: %s", err);
  /* TEST-NET-1: routed nowhere in the guest; its SYNs go unanswered. */
  mcp_sockaddr_parse(getenv("CONF_UNREACHABLE") ? getenv("CONF_UNREACHABLE") : "192.0.2.99:9", &addr);
  mcp_wire_handle_set_sockaddr(&h, &addr);
  mcp_wire_handle_encode(&h, (uint8_t *)handle, err, sizeof(err));
  while (rc == ncclSuccess && sc == NULL && drv_now() - t0 < 60) {
    double c0 = drv_now(), dt;
    rc = drv_connect(&drv, dev, handle, &sc);
    dt = drv_now() - c0;
    worst = dt > worst ? dt : worst;
    calls++;
    usleep(1000);
  }
  drv_close_listen(&drv, lc);
  printf("  %d connect calls, slowest %.1f ms, failed after %.1f s with %d\n", calls, worst * 1e3,
         drv_now() - t0, rc);
  if (sc != NULL)
    FAILF("connect to an unreachable address succeeded");
  if (rc == ncclSuccess)
    FAILF("connect to an unreachable address did not fail within 60 s");
  if (worst > 0.5)
    FAILF("a connect call took %.1f ms (limit 500 ms: it waited for the peer)", worst * 1e3);
  return 0;
}

static int oob_addr_of(const char *handle, union mcp_sockaddr *addr)
{
  struct mcp_wire_handle h;
  char err[MCP_WIRE_ERRLEN];

  if (mcp_wire_handle_decode((const uint8_t *)handle, &h, err, sizeof(err)) != 0)
    return -1;
  mcp_wire_handle_get_sockaddr(&h, addr);
  return 0;
}

static int raw_connect(const union mcp_sockaddr *addr)
{
  int fd = socket(addr->sa.sa_family, SOCK_STREAM, 0);

  if (fd >= 0 && connect(fd, &addr->sa, mcp_sockaddr_len(addr)) != 0) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* Strangers on the out-of-band port: a silent client, random bytes, a truncated and a
 * wrong-magic frame. Each is refused; the listen is not consumed and still works. */
static int test_stray(void)
{
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  union mcp_sockaddr addr;
  void *lc = NULL, *sc = NULL, *rc = NULL;
  uint8_t junk[256];
  int fds[4], i;
  struct link l;

  memset(handle, 0, sizeof(handle));
  if (drv_listen(&drv, dev, handle, &lc) != ncclSuccess || oob_addr_of(handle, &addr) != 0)
    FAILF("listen failed");
  for (i = 0; i < (int)sizeof(junk); i++)
    junk[i] = (uint8_t)(i * 37 + 11);
  for (i = 0; i < 4; i++) {
    fds[i] = raw_connect(&addr);
    if (fds[i] < 0)
      FAILF("cannot connect to the out-of-band port");
  }
  /* 0: silent. 1: random bytes. 2: a valid magic, then nothing (truncated). 3: wrong magic. */
  if (write(fds[1], junk, sizeof(junk)) < 0 || write(fds[2], "NPCM\x01\x00", 6) < 0 ||
      write(fds[3], "XXXXXXXXXXXXXXXXXXXXXXXX", 24) < 0)
    FAILF("write to the out-of-band port failed");
  close(fds[2]);
  /* The accept must find nothing to accept, however often it is called. */
  for (i = 0; i < 50; i++) {
    if (drv_accept(&drv, lc, &rc) != ncclSuccess)
      FAILF("accept failed because of a stray connection");
    if (rc != NULL)
      FAILF("a stray connection was accepted as a comm");
    usleep(2000);
  }
  /* The same listen then serves a real connection. */
  if (drv_connect_pair(&drv, dev, handle, lc, &sc, &rc, CONNECT_TIMEOUT, 0) != 0)
    FAILF("the listen did not serve a real connection after the strays");
  drv_close_listen(&drv, lc);
  for (i = 0; i < 4; i++)
    if (i != 2)
      close(fds[i]);
  memset(&l, 0, sizeof(l));
  l.sc = sc;
  l.rc = rc;
  l.cap = 1 << 16;
  l.sbuf = aligned_alloc(4096, l.cap);
  l.rbuf = aligned_alloc(4096, l.cap);
  if (drv_regmr(&drv, sc, l.sbuf, l.cap, &l.smh) != ncclSuccess ||
      drv_regmr(&drv, rc, l.rbuf, l.cap, &l.rmh) != ncclSuccess)
    FAILF("regMr failed");
  i = exchange(&l, 1000, l.cap, 6000);
  link_close(&l);
  return i;
}

static int count_sockets(void)
{
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  char path[300], target[64];
  int n = 0;

  while (d != NULL && (e = readdir(d)) != NULL) {
    ssize_t k;
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    k = readlink(path, target, sizeof(target) - 1);
    if (k > 0) {
      target[k] = '\0';
      n += strncmp(target, "socket:", 7) == 0;
    }
  }
  if (d)
    closedir(d);
  return n;
}

/* 1,000 comms between two ends share a few sockets, not one each. */
static int test_sockets(void)
{
  int n = getenv("CONF_CONNS") ? atoi(getenv("CONF_CONNS")) : 500, i, rc = 0, socks;
  void **sc = calloc((size_t)n, sizeof(void *)), **rcv = calloc((size_t)n, sizeof(void *));

  for (i = 0; i < n; i++)
    if (open_link(&sc[i], &rcv[i]) != 0)
      FAILF("link %d of %d failed", i, n);
  socks = count_sockets();
  printf("  %d comms open, %d sockets in this process\n", 2 * n, socks);
  if (socks > 4) {
    fprintf(stderr, "  error: %d sockets for %d comms (expected at most 4)\n", socks, 2 * n);
    rc = -1;
  }
  for (i = 0; i < n; i++)
    close_link(sc[i], rcv[i]);
  free(sc);
  free(rcv);
  return rc;
}

/* ---- the peer host vanishes: close* still returns within 1 s ---- */

/* Role b opens the link, says it is ready and then waits to be powered off by its
 * scenario; role a posts work toward it, waits until b is gone, and closes. */
static int test_peergone(void)
{
  struct link l;
  char flag[8] = "x";
  double t0, dt;
  int i;

  if (!pair_mode)
    FAILF("peergone needs pair mode");
  if (link_open(&l, 1 << 20) != 0)
    return -1;
  if (role[0] == 'b') {
    if (read_file("a.posted", flag, 1, CONNECT_TIMEOUT) != 0)
      return -1;
    write_file("b.ready", "1", 1);
    printf("  host b: ready to vanish\n");
    sleep(600); /* powered off here */
    return -1;
  }
  for (i = 0; i < 4; i++) {
    void *req = NULL;
    size_t cap = 1 << 18;
    int tag = 5;
    void *buf = l.rbuf + (size_t)i * cap;
    if (drv_irecv(&drv, l.rc, 1, &buf, &cap, &tag, &l.rmh, &req) != ncclSuccess)
      FAILF("irecv failed");
  }
  write_file("a.posted", "1", 1);
  if (read_file("b.ready", flag, 1, CONNECT_TIMEOUT) != 0)
    return -1;
  sleep(5); /* b powers off meanwhile */
  t0 = drv_now();
  link_close(&l);
  dt = drv_now() - t0;
  printf("  closing both comms toward the vanished host took %.3f s\n", dt);
  if (dt > 1.0)
    FAILF("close took %.2f s with the peer host gone (limit 1 s)", dt);
  return 0;
}

/* ---- the plugin's own words: its log, captured through the logger init takes ---- */

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static char cap_buf[1 << 16];
static size_t cap_len;
static void *cap_ctx;

/* Prints like the driver's logger, and keeps every WARN for the test to read. */
static void cap_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                    ...)
{
  char msg[4096];
  va_list ap;
  size_t n;

  (void)flags;
  (void)file;
  (void)line;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN || getenv("MCP_DRIVE_VERBOSE") != NULL)
    fprintf(stderr, "[%s] %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
  if (level != NCCL_LOG_WARN)
    return;
  n = strlen(msg);
  pthread_mutex_lock(&cap_lock);
  if (cap_len + n + 2 < sizeof(cap_buf)) {
    memcpy(cap_buf + cap_len, msg, n);
    cap_len += n;
    cap_buf[cap_len++] = '\n';
    cap_buf[cap_len] = '\0';
  }
  pthread_mutex_unlock(&cap_lock);
}

/* Calls init once more through the loaded table with cap_log: the plugin keeps the last
 * logger it was given, as it must for NCCL, which may init once per communicator. */
static int cap_install(void)
{
  ncclResult_t rc;

  pthread_mutex_lock(&cap_lock);
  cap_len = 0;
  cap_buf[0] = '\0';
  pthread_mutex_unlock(&cap_lock);
  if (drv.v11 != NULL) {
    ncclNetCommConfig_v11_t cfg = {.trafficClass = -1};
    rc = cap_ctx != NULL ? ncclSuccess : drv.v11->init(&cap_ctx, 0x5678, &cfg, cap_log, NULL);
  } else if (drv.v10 != NULL) {
    rc = drv.v10->init(cap_log, NULL);
  } else {
    rc = drv.v9 != NULL ? drv.v9->init(cap_log) : drv.v8->init(cap_log);
  }
  return rc == ncclSuccess ? 0 : -1;
}

static void cap_release(void)
{
  if (cap_ctx != NULL && drv.v11 != NULL)
    drv.v11->finalize(cap_ctx);
  cap_ctx = NULL;
}

/* Captured WARN lines that contain every one of the given strings (NULL-terminated). */
static int cap_count(const char *first, ...)
{
  const char *line, *end;
  int n = 0;

  pthread_mutex_lock(&cap_lock);
  for (line = cap_buf; *line != '\0'; line = end + 1) {
    char one[4096];
    const char *want;
    va_list ap;
    int all = 1;

    end = strchr(line, '\n');
    snprintf(one, sizeof(one), "%.*s", (int)(end - line), line);
    va_start(ap, first);
    for (want = first; want != NULL; want = va_arg(ap, const char *))
      all &= strstr(one, want) != NULL;
    va_end(ap);
    n += all;
  }
  pthread_mutex_unlock(&cap_lock);
  return n;
}

static void cap_dump(void)
{
  pthread_mutex_lock(&cap_lock);
  fprintf(stderr, "  captured WARNs:\n%s", cap_buf);
  pthread_mutex_unlock(&cap_lock);
}

/* Sends size bytes on l and receives them, both already posted or not: waits for both. */
static int finish(struct link *l, void *rreq, size_t size, uint32_t msg, int tag)
{
  void *sreq = NULL;
  double deadline = drv_now() + 60;
  long bad;

  while (sreq == NULL) {
    if (drv_isend(&drv, l->sc, l->sbuf, size, tag, l->smh, &sreq) != ncclSuccess)
      FAILF("isend of %zu bytes failed", size);
    if (drv_now() > deadline)
      FAILF("isend never found the posted receive");
  }
  if (wait_req(sreq, NULL, "send") != 0 || wait_req(rreq, NULL, "receive") != 0)
    return -1;
  bad = check(l->rbuf, size, role_seed(role) + msg);
  if (bad >= 0)
    FAILF("byte %ld of %zu differs", bad, size);
  return 0;
}

/* The watchdog (MCPNET_WATCHDOG_SEC=1): a receive nobody sends to and a send whose peer
 * never posts, each left for 2.5 s, give exactly one WARN per comm saying who waits for
 * what; nothing fails, both complete once the other side acts, and a later stall is
 * reported again. */
static int test_watchdog(void)
{
  struct link a, b;
  void *rreq = NULL, *sreq = NULL;
  size_t cap = 4096;
  int tag = 11, done = 0, rc = 0;
  double t0;
  const char *wd = getenv("MCPNET_WATCHDOG_SEC");

  if (pair_mode)
    FAILF("watchdog runs in self mode");
  if (wd == NULL || atoi(wd) != 1)
    FAILF("run this test with MCPNET_WATCHDOG_SEC=1");
  if (link_open(&a, 1 << 16) != 0 || link_open(&b, 1 << 16) != 0)
    return -1;
  if (cap_install() != 0)
    FAILF("init with a capturing logger failed");
  fill(a.sbuf, 4096, role_seed(role) + 7000);
  fill(b.sbuf, 4096, role_seed(role) + 7001);
  /* The NIC writes these: defined bytes first, so valgrind can follow the check. */
  memset(a.rbuf, CANARY, a.cap);
  memset(b.rbuf, CANARY, b.cap);
  if (drv_irecv(&drv, a.rc, 1, (void **)&a.rbuf, &cap, &tag, &a.rmh, &rreq) != ncclSuccess || rreq == NULL)
    FAILF("irecv failed");
  for (t0 = drv_now(); drv_now() - t0 < 2.5;) {
    if (drv_test(&drv, rreq, &done, NULL) != ncclSuccess || done)
      FAILF("a receive with no sender returned %s", done ? "done" : "an error");
    if (drv_isend(&drv, b.sc, b.sbuf, 4096, tag, b.smh, &sreq) != ncclSuccess || sreq != NULL)
      FAILF("a send to a peer that never posted %s", sreq ? "was accepted" : "returned an error");
    usleep(1000);
  }
  printf("  after 2.5 s: %d receive-side and %d send-side watchdog WARNs\n",
         cap_count("watchdog: receive from", NULL), cap_count("watchdog: send to", NULL));
  if (cap_count("watchdog: receive from", "no progress for",
                "1 receive(s) advertised to the peer but no data "
                "arrived",
                "MCPNET_WATCHDOG_SEC=1", NULL) != 1 ||
      cap_count("watchdog: send to", "no progress for",
                "the send of seq 1 waits for its receive buffer, which "
                "was never advertised by the peer (no clear-to-send)",
                NULL) != 1 ||
      cap_count("watchdog:", NULL) != 2) {
    cap_dump();
    FAILF("expected exactly one stall WARN for the receiving comm and one for the sending comm");
  }
  /* Nothing failed: the stalled requests complete as soon as the other side acts. */
  if (finish(&a, rreq, 4096, 7000, tag) != 0)
    return -1;
  rreq = NULL;
  if (drv_irecv(&drv, b.rc, 1, (void **)&b.rbuf, &cap, &tag, &b.rmh, &rreq) != ncclSuccess || rreq == NULL)
    FAILF("irecv failed");
  if (finish(&b, rreq, 4096, 7001, tag) != 0)
    return -1;
  /* A new stall after progress is a new report. */
  rreq = NULL;
  if (drv_irecv(&drv, a.rc, 1, (void **)&a.rbuf, &cap, &tag, &a.rmh, &rreq) != ncclSuccess || rreq == NULL)
    FAILF("irecv failed");
  for (t0 = drv_now(); drv_now() - t0 < 1.8;) {
    if (drv_test(&drv, rreq, &done, NULL) != ncclSuccess || done)
      FAILF("the second stalled receive returned %s", done ? "done" : "an error");
    usleep(1000);
  }
  if (cap_count("watchdog: receive from", NULL) != 2 || cap_count("watchdog:", NULL) != 3) {
    cap_dump();
    FAILF("the second stall of the receiving comm was not reported once");
  }
  fill(a.sbuf, 4096, role_seed(role) + 7002);
  rc = finish(&a, rreq, 4096, 7002, tag);
  link_close(&a);
  link_close(&b);
  cap_release();
  return rc;
}

/* A failed completion explains itself: a send from memory outside its registration fails
 * the comm (a local protection error), with one error WARN and one WARN giving the port
 * state, the error counters since connect, the likely cause and what to try; asking
 * again repeats neither. */
static int test_diag(void)
{
  struct link l;
  uint8_t *outside = aligned_alloc(4096, 1 << 16);
  void *sreq = NULL, *rreq = NULL;
  size_t cap = 1 << 16;
  int tag = 12, done = 0, i;
  ncclResult_t r = ncclSuccess;
  double deadline;

  if (outside == NULL || link_open(&l, 1 << 16) != 0)
    return -1;
  if (cap_install() != 0)
    FAILF("init with a capturing logger failed");
  memset(outside, 0x5a, 1 << 16);
  if (drv_irecv(&drv, l.rc, 1, (void **)&l.rbuf, &cap, &tag, &l.rmh, &rreq) != ncclSuccess || rreq == NULL)
    FAILF("irecv failed");
  for (deadline = drv_now() + 60; sreq == NULL && drv_now() < deadline;)
    if (drv_isend(&drv, l.sc, outside, 1 << 16, tag, l.smh, &sreq) != ncclSuccess)
      FAILF("isend failed before anything was posted");
  for (deadline = drv_now() + 60; r == ncclSuccess && !done && drv_now() < deadline;)
    r = drv_test(&drv, sreq, &done, NULL);
  if (r != ncclRemoteError)
    FAILF("a send from unregistered memory gave %d (done=%d), expected ncclRemoteError", r, done);
  for (i = 0; i < 100; i++)
    if (drv_test(&drv, sreq, &done, NULL) != ncclRemoteError)
      FAILF("the failed comm did not keep its error");
  if (cap_count("work completion error", "likely cause: protection error", NULL) != 1 ||
      cap_count(" port 1 ACTIVE", "error counters since the comm connected: ",
                "likely cause: protection error: ", ". Try: ", NULL) != 1 ||
      cap_count("NET/MCP", NULL) != 2) {
    cap_dump();
    FAILF("expected one error WARN and one port diagnosis WARN");
  }
  cap_dump();
  link_close(&l);
  free(outside);
  cap_release();
  return 0;
}

/* libibverbs' view, from the library the plugin loaded. */
static const char *fork_status(void)
{
  void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  int (*is_init)(void) = lib ? (int (*)(void))dlsym(lib, "ibv_is_fork_initialized") : NULL;
  int st = is_init ? is_init() : -1;

  if (lib)
    dlclose(lib);
  return st == 0 ? "DISABLED"
    : st == 1    ? "ENABLED (MADV_DONTFORK)"
    : st == 2    ? "UNNEEDED (copy-on-fork kernel)"
                 : "unknown";
}

/* Fork safety: fork with registered buffers in use; the child writes garbage into its
 * copy of those pages for 1.5 s and exits, while the parent keeps sending and receiving
 * through the same registrations and checks every byte. Under MADV_DONTFORK
 * (ibv_fork_init on kernels before 5.13) the child has no copy at all: it says so. */
static int test_fork(void)
{
  struct link l;
  int p[2], status = 0, exchanges = 0, during = 0, rc = 0;
  uint32_t msg = 8000;
  double t0;
  pid_t pid;

  if (link_open(&l, 1 << 20) != 0)
    return -1;
  if (exchange(&l, 1 << 20, 1 << 20, msg++) != 0)
    return -1;
  printf("  libibverbs fork status: %s\n", fork_status());
  if (pipe(p) != 0)
    FAILF("pipe: %s", strerror(errno));
  pid = fork();
  if (pid < 0)
    FAILF("fork: %s", strerror(errno));
  if (pid == 0) {
    double start = drv_now();
    /* A write(2) from an unmapped page fails with EFAULT instead of crashing. */
    if (write(p[1], l.sbuf, 1) != 1)
      _exit(errno == EFAULT ? 3 : 4);
    while (drv_now() - start < 1.5) {
      memset(l.sbuf, 0xee, l.cap);
      memset(l.rbuf, 0xdd, l.cap);
    }
    _exit(0);
  }
  close(p[1]);
  t0 = drv_now();
  while (rc == 0 && (exchanges < 40 || drv_now() - t0 < 2.0)) {
    size_t size = exchanges % 3 == 0 ? (size_t)(1 << 20) : 4096 * (size_t)(1 + exchanges % 17) + 13;
    if (waitpid(pid, &status, WNOHANG) == 0)
      during++;
    else
      pid = 0;
    rc = exchange(&l, size, 1 << 20, msg++);
    exchanges++;
  }
  if (pid != 0 && waitpid(pid, &status, 0) != pid)
    FAILF("waitpid: %s", strerror(errno));
  close(p[0]);
  for (int i = 0; rc == 0 && i < 8; i++)
    rc = exchange(&l, 1 << 20, 1 << 20, msg++);
  link_close(&l);
  if (rc != 0)
    FAILF("a transfer after fork was wrong (%d exchanges, %d while the child ran)", exchanges, during);
  if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3))
    FAILF("the child ended with status %#x", status);
  printf("  child %s; parent verified %d exchanges, %d of them while the child ran\n",
         WEXITSTATUS(status) == 0 ? "wrote garbage into its copy of the registered pages for 1.5 s"
                                  : "found the registered pages absent (MADV_DONTFORK)",
         exchanges + 8, during);
  if (WEXITSTATUS(status) == 0 && during < 5)
    FAILF("only %d exchanges overlapped the child's writes", during);
  return 0;
}

/* makeVDevice through this table (v9+): the index comes right after the devices NCCL
 * counted, getProperties shows the members in vProps with the summed speed (v12: and
 * the rail and plane), refusals leave the count alone, and (v11, v12) the index survives
 * finalize/init, which gives the fabric back and discovers it again. v8 has no slot.
 * With two or more devices, the first two are fused as well. */
static int vdev_check(int vdev, int n, const int *members, const ncclNetProperties_v12_t *phys)
{
  ncclNetProperties_v12_t v;
  int speed = 0, ptr = ~0;

  if (drv_props(&drv, vdev, &v) != ncclSuccess)
    FAILF("getProperties(%d) of the virtual device failed", vdev);
  if (v.vProps.ndevs != n)
    FAILF("virtual device %d: vProps.ndevs %d, want %d", vdev, v.vProps.ndevs, n);
  for (int i = 0; i < n; i++) {
    if (v.vProps.devs[i] != members[i])
      FAILF("virtual device %d: vProps.devs[%d] = %d, want %d", vdev, i, v.vProps.devs[i], members[i]);
    speed += phys[members[i]].speed;
    ptr &= phys[members[i]].ptrSupport;
  }
  if (v.speed != speed || v.ptrSupport != ptr)
    FAILF("virtual device %d: speed %d ptrSupport %#x, want the sum %d and the intersection %#x", vdev,
          v.speed, v.ptrSupport, speed, ptr);
  if (n == 1 && strcmp(v.name, phys[members[0]].name) != 0)
    FAILF("virtual device %d over %s is named %s", vdev, phys[members[0]].name, v.name);
  if (n > 1 && strchr(v.name, '+') == NULL)
    FAILF("virtual device %d over %d devices is named %s, without '+'", vdev, n, v.name);
  /* v12: one device keeps its rail and plane; several have the first one's rail when all
   * share it (else none), and a plane set of their own (bit 14, NCCL's marker). */
  if (n == 1 && (v.railId != phys[members[0]].railId || v.planeId != phys[members[0]].planeId))
    FAILF("virtual device %d: railId %d planeId %d, want its member's %d and %d", vdev, v.railId, v.planeId,
          phys[members[0]].railId, phys[members[0]].planeId);
  if (n > 1 && abi >= 12) {
    int rail = phys[members[0]].railId;
    for (int i = 1; i < n; i++)
      if (phys[members[i]].railId != rail)
        rail = NCCL_NET_ID_UNDEF;
    if (v.railId != rail || !(v.planeId & 0x4000))
      FAILF("virtual device %d: railId %d planeId %#x, want rail %d and a fused plane set (0x4000)", vdev,
            v.railId, (unsigned)v.planeId, rail);
  }
  printf("  abi v%d: device %d = %s, %d Mb/s, vProps {%d:", abi, vdev, v.name, v.speed, v.vProps.ndevs);
  for (int i = 0; i < v.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
    printf(" %d", v.vProps.devs[i]);
  printf("}");
  if (abi >= 12)
    printf(" railId=%d planeId=%d", v.railId, v.planeId);
  printf("\n");
  return 0;
}

static int test_vdevice(void)
{
  ncclNetProperties_v12_t phys[32];
  int n = 0, m = 0, vdev = -1, vdev2 = -1;

  if (drv_devices(&drv, &n) != ncclSuccess || n <= 0 || n > 32)
    FAILF("devices() returned %d", n);
  if (abi == 8) {
    if (drv_make_vdevice(&drv, 1, (int[]){0}, &vdev) != ncclInvalidUsage)
      FAILF("the v8 table has no makeVDevice slot");
    printf("  abi v8: no makeVDevice slot, as NCCL 2.20-2.23 expect\n");
    return 0;
  }
  for (int i = 0; i < n; i++) {
    if (drv_props(&drv, i, &phys[i]) != ncclSuccess)
      FAILF("getProperties(%d) failed", i);
    if (abi >= 9 && (phys[i].vProps.ndevs != 1 || phys[i].vProps.devs[0] != i))
      FAILF("physical device %d: vProps {%d: %d}, want {1: %d}", i, phys[i].vProps.ndevs,
            phys[i].vProps.devs[0], i);
  }
  if (drv_make_vdevice(&drv, 2, (int[]){0, 0}, &vdev) == ncclSuccess)
    FAILF("makeVDevice accepted device 0 twice");
  if (drv_make_vdevice(&drv, 1, (int[]){n}, &vdev) == ncclSuccess)
    FAILF("makeVDevice accepted device %d, past the %d physical ones", n, n);
  if (drv_make_vdevice(&drv, 0, (int[]){0}, &vdev) == ncclSuccess)
    FAILF("makeVDevice accepted 0 devices");
  if (drv_devices(&drv, &m) != ncclSuccess || m != n)
    FAILF("refused makeVDevice calls changed devices() from %d to %d", n, m);
  if (drv_make_vdevice(&drv, 1, (int[]){0}, &vdev) != ncclSuccess)
    FAILF("makeVDevice over device 0 failed");
  if (vdev != n)
    FAILF("the first virtual device is %d, want %d (right after the physical ones)", vdev, n);
  if (drv_devices(&drv, &m) != ncclSuccess || m != n + 1)
    FAILF("devices() is %d after one makeVDevice, want %d", m, n + 1);
  if (vdev_check(vdev, 1, (int[]){0}, phys) != 0)
    return 1;
  if (drv_make_vdevice(&drv, 2, (int[]){vdev, 0}, &vdev2) == ncclSuccess)
    FAILF("makeVDevice nested virtual device %d", vdev);
  if (n >= 2) {
    if (drv_make_vdevice(&drv, 2, (int[]){1, 0}, &vdev2) != ncclSuccess || vdev2 != n + 1)
      FAILF("makeVDevice over devices 1 and 0 failed or gave %d, want %d", vdev2, n + 1);
    if (vdev_check(vdev2, 2, (int[]){1, 0}, phys) != 0)
      return 1;
  }
  if (abi >= 11) {
    /* The only context goes: the fabric is given back, then discovered again. */
    if (drv_finalize(&drv) != ncclSuccess || drv_init(&drv) != ncclSuccess)
      FAILF("finalize and init again failed");
    if (drv_devices(&drv, &m) != ncclSuccess || m != n + 1 + (n >= 2))
      FAILF("after finalize and init, devices() is %d, want %d", m, n + 1 + (n >= 2));
    if (vdev_check(vdev, 1, (int[]){0}, phys) != 0 ||
        (n >= 2 && vdev_check(vdev2, 2, (int[]){1, 0}, phys) != 0))
      return 1;
  }
  return 0;
}

/* NCCL's profiler callback as its example profiler answers it (net API v10 on): every
 * start gets a handle, every stop must name one started and not yet stopped. */
struct prof_ev {
  int stopped;
};
static struct prof_ev prof_evs[1 << 16];
static int prof_started, prof_stopped, prof_bad;

static ncclResult_t prof_count(void **eh, int type, void *parent, int64_t plugin, void *data)
{
  const unsigned char *d = data;

  if (type == 0) {
    /* NCCL's IB descriptor: plugin id NCCL_PROFILER_NET_TYPE_IB | 1, type ncclProfileQp. */
    if (parent == NULL || plugin != ((1 << 16) | 1) || d == NULL || d[0] != 1 ||
        prof_started == (int)(sizeof(prof_evs) / sizeof(prof_evs[0]))) {
      prof_bad++;
      return ncclSuccess;
    }
    *eh = &prof_evs[prof_started++];
  } else if (type == 1) {
    struct prof_ev *e = *eh;

    if (e == NULL || e < prof_evs || e >= prof_evs + prof_started || e->stopped)
      prof_bad++;
    else
      e->stopped = 1;
    prof_stopped++;
  }
  return ncclSuccess;
}

/* Profiler events (v10 on): sends and receives of every size class and their flushes
 * with NCCL's parent handle: each starts events, and every one started is stopped by the
 * time its comm is closed. */
static int test_profiler(void)
{
  static const size_t sizes[] = {0, 8, 4096, 65536, 1 << 20, 4 << 20};
  struct link l;
  int step = 0, i, rc = 0;
  unsigned k;

  if (abi < 10) {
    printf("  (profiler events need net API v10 or later; v%d has no parent handles)\n", abi);
    return 0;
  }
  prof_started = prof_stopped = prof_bad = 0;
  if (link_open(&l, 4 << 20) != 0)
    return -1;
  drv.phandle = &step;
  for (i = 0; rc == 0 && i < 4; i++)
    for (k = 0; rc == 0 && k < sizeof(sizes) / sizeof(sizes[0]); k++) {
      void *freq = NULL;
      int fsize = (int)sizes[k];

      rc = exchange(&l, sizes[k], 4 << 20, 6000 + (uint32_t)(i * 16 + (int)k));
      if (rc == 0 && sizes[k] > 0) {
        link_hide_bufs(&l);
        if (drv_iflush(&drv, l.rc, 1, (void **)&l.rbuf, &fsize, &l.rmh, &freq) != ncclSuccess)
          rc = -1;
        else if (freq != NULL)
          rc = wait_req(freq, NULL, "flush");
      }
    }
  drv.phandle = NULL;
  link_close(&l);
  printf("  profiler: %d events started, %d stopped, %d bad calls\n", prof_started, prof_stopped, prof_bad);
  if (rc != 0)
    return -1;
  if (prof_started < 2 * 4 * 6)
    FAILF("only %d profiler events for %d messages (a clear-to-send and a write each at least)", prof_started,
          4 * 6);
  if (prof_stopped != prof_started || prof_bad != 0)
    FAILF("%d profiler events started, %d stopped, %d bad calls", prof_started, prof_stopped, prof_bad);
  return 0;
}

struct test {
  const char *name;
  int (*fn)(void);
};

static const struct test tests[] = {
  {"sizes", test_sizes},
  {"grouped", test_grouped},
  {"optional", test_optional},
  {"flush", test_flush},
  {"many", test_many},
  {"inflight-close", test_inflight_close},
  {"noalloc", test_noalloc},
  {"props", test_props},
  {"qps", test_qps},
  {"threads", test_threads},
  {"reload", test_reload},
  {"mrcache", test_mrcache},
  {"unreachable", test_unreachable},
  {"stray", test_stray},
  {"sockets", test_sockets},
  {"peergone", test_peergone},
  {"watchdog", test_watchdog},
  {"diag", test_diag},
  {"fork", test_fork},
  {"vdevice", test_vdevice},
  {"profiler", test_profiler},
};

/* The tests written for GPU-like memory: they touch data buffers only between calls. */
static int gpu_capable(const char *name)
{
  static const char *const ok[] = {"props", "sizes", "grouped", "flush", "many", "profiler"};
  unsigned i;

  for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    if (strcmp(ok[i], name) == 0)
      return 1;
  return 0;
}

static int run(const char *name)
{
  unsigned i;
  double t0 = drv_now();

  for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
    if (strcmp(tests[i].name, name) != 0)
      continue;
    cur_test = name;
    cur_size = 0;
    if (gpu_mode && !gpu_capable(name)) {
      fprintf(stderr, "  error: %s does not run with GPU-like memory (--gpu / CONF_GPU)\n", name);
      printf("FAIL %s (abi v%d)\n", name, abi);
      failed++;
    } else if (tests[i].fn() == 0) {
      printf("ok   %s (abi v%d, %.1f s)\n", name, abi, drv_now() - t0);
      passed++;
    } else {
      printf("FAIL %s (abi v%d)\n", name, abi);
      failed++;
    }
    fflush(stdout);
    return 0;
  }
  fprintf(stderr, "unknown test '%s'\n", name);
  return -1;
}

int main(int argc, char **argv)
{
  int i = 1, n = 0;

  setvbuf(stdout, NULL, _IOLBF, 0);
  gpu_mode = getenv("CONF_GPU") != NULL && atoi(getenv("CONF_GPU")) != 0;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
      plugin_path = argv[++i];
    else if (!strcmp(argv[i], "--abi") && i + 1 < argc)
      abi = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dev") && i + 1 < argc)
      dev = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--expect-init-fail"))
      expect_init_fail = 1;
    else if (!strcmp(argv[i], "--gpu"))
      gpu_mode = 1;
    else {
      fprintf(stderr,
              "usage: %s [--plugin SO] [--abi N] [--dev N] [--gpu] self|pair [--role a|b --xchg DIR] "
              "TEST...\n",
              argv[0]);
      return 2;
    }
  }
  if (i < argc && !strcmp(argv[i], "pair")) {
    pair_mode = 1;
    for (i++; i + 1 < argc && argv[i][0] == '-'; i += 2) {
      if (!strcmp(argv[i], "--role"))
        role = argv[i + 1];
      else if (!strcmp(argv[i], "--xchg"))
        xchg = argv[i + 1];
    }
    if (xchg == NULL) {
      fprintf(stderr, "pair mode needs --xchg DIR\n");
      return 2;
    }
  } else if (i < argc && !strcmp(argv[i], "self")) {
    i++;
  }
  if (i < argc && !strcmp(argv[i], "reload")) {
    /* Measures the process before the plugin was ever loaded: nothing else may run. */
    run(argv[i]);
  } else {
    if (drv_open(&drv, plugin_path, abi) != 0)
      return 2;
    drv.prof = prof_count; /* as NCCL does; it gets events only with a parent handle */
    if (drv_init(&drv) != ncclSuccess || drv_devices(&drv, &n) != ncclSuccess || n <= 0) {
      drv_finalize(&drv);
      if (expect_init_fail) {
        printf("init failed, as expected\n1 passed, 0 failed\n");
        return 0;
      }
      fprintf(stderr, "plugin init failed or found no device\n");
      return 2;
    }
    if (expect_init_fail) {
      printf("FAIL init succeeded with %d device(s) although it should have failed\n0 passed, 1 failed\n", n);
      return 1;
    }
    if (gpu_mode) {
      printf("GPU-like memory: regMr(NCCL_PTR_CUDA), buffers PROT_NONE while the plugin holds them\n");
      gpu_segv_install();
    }
    for (; i < argc; i++)
      if (run(argv[i]) != 0)
        return 2;
    drv_finalize(&drv);
    drv_close_lib(&drv);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
