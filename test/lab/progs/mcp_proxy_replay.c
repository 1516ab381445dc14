/*
 * mcp_proxy_replay.c - calls the plugin the way NCCL 2.28.9's proxy threads do, for
 * minutes, and checks every byte.
 *
 *   mcp-proxy-replay [--plugin SO] [--abi N] [--seconds S] [--seed N] [--max-recvs N]
 *                    [--require-cuda] self | pair --role a|b --xchg DIR
 *
 * Why: the conformance suite calls the tables as we imagined NCCL does. This program
 * replays what NCCL's src/transport/net.cc really does (sendProxyProgress and
 * recvProxyProgress, and src/proxy.cc's progress loop, read for facts),
 * so a plugin that passes it survives NCCL's call patterns:
 *
 * - Threads: per node one "progress" thread makes every data-path call (isend, irecv,
 *   test, iflush) for all of the node's comms; one "service" thread makes listen,
 *   connect/accept (retried while they return NULL, interleaved), closeListen, regMr,
 *   extra regMr/deregMr during traffic, and deregMr/close at the end.
 * - Ticks: a sender sub does one thing per tick (grant a credit, isend the next ready
 *   step, or test its oldest send); a receiver posts, tests, tests the flush, then
 *   waits for consumption, returning as soon as a phase did anything. Request slots
 *   are NCCL's 8-entry arrays ((base+k)%8 on send, posted%8 on receive), never
 *   cleared: *request holds a stale value before every call, (void *)0x1 when NCCL
 *   sets the optional-completion hint (LL/LL128, one buffer).
 * - Two comm pairs per direction: a "ring" connection (one sub; ops of SIMPLE with
 *   sliceSteps 2 and chunkSteps 4 in 512 KiB steps, LL in 64 KiB steps, LL128 in
 *   614400 B steps, 0-byte steps included) and a "PXN" connection shared by three
 *   local ranks (tags 1, 2, 3), each sending on its own chain with its own random
 *   readiness (jitter, slow, long stalls), received as maxRecvs-grouped irecvs whose n
 *   shrinks as subs run out of steps. A NULL request is retried on a later tick.
 * - Memory: SIMPLE buffers are registered NCCL_PTR_CUDA when the plugin advertises it
 *   and then made unreadable (PROT_NONE); the harness (the stand-in GPU) opens them
 *   only to fill or check, between plugin calls. iflush is called as NCCL does (SIMPLE,
 *   GPU receive, bytes > 0); a NULL flush counts as done. LL/LL128 receive into host
 *   memory with the hint and are checked as NCCL's GPU does: by polling the per-line
 *   flags (step+1), not by test().
 * - Ends when --seconds have passed: the sender marks its last op in the data of the
 *   op's last step, so the receiver knows without any other channel.
 *
 * NCCL_NET_OPTIONAL_RECV_COMPLETION=0 turns the hint off, as it does in NCCL.
 *
 * Output: a line every 10 s per node, then "replay: ok: ..." per node; exit 0 only if
 * every byte arrived intact and no call returned an error. "replay: FAIL: ..." names
 * the call, the op and the step otherwise.
 */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mcp_drive.h"

#define STEPS 8         /* NCCL_STEPS */
#define SHARED_STEPS 16 /* NCCL_SHARED_STEPS */
#define NPXN 3          /* local ranks behind one PXN proxy */
#define PROXY_MAX_SUBS 64
#define P2P_SLOT (128u * 1024) /* NCCL_P2P_NET_CHUNKSIZE: one shared-pool slot */
#define POOL_SIZE (16u * P2P_SLOT)
#define GUARD 64 /* bytes after a SIMPLE receive that must stay untouched */
#define POISON 0xee
#define STALL_S 150.0 /* no progress for this long is a failure (a link flap is 5 s) */
#define MAX_EXTRA 4

enum { P_LL, P_LL128, P_SIMPLE, NPROTO };
enum { C_RING, C_PXN };
static const size_t step_size[NPROTO] = {65536, 614400, 524288};
static const size_t buff_size[NPROTO] = {8 * 65536, 8 * 614400, 8 * 524288};
static const char *proto_name[NPROTO] = {"LL", "LL128", "SIMPLE"};

static struct mcp_drive drv;
static int g_cuda; /* the plugin advertises NCCL_PTR_CUDA: SIMPLE/LL128 are GPU-like */
static int g_maxrecvs;
static int g_hint = 1; /* NCCL_NET_OPTIONAL_RECV_COMPLETION, as NCCL reads it (default 1) */
static uint64_t g_seed = 12345;
static double g_end;
static pthread_mutex_t g_out = PTHREAD_MUTEX_INITIALIZER;

/* ---- output ------------------------------------------------------------------------ */

static void say(const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock(&g_out);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
  pthread_mutex_unlock(&g_out);
}

/* A failure ends the process at once: the other threads may be inside the plugin. */
static void fail(const char *node, const char *fmt, ...)
{
  struct timespec ts;
  va_list ap;

  clock_gettime(CLOCK_REALTIME, &ts);
  pthread_mutex_lock(&g_out);
  printf("replay: FAIL: node %s: ", node);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf(" at %lld.%03ld\n", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
  fflush(stdout);
  fflush(stderr);
  _exit(1);
}

/* ---- deterministic plans and patterns (both ends compute the same) ------------------ */

static uint64_t mix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t *s)
{
  *s = mix64(*s);
  return *s;
}

static uint64_t rnd_below(uint64_t *s, uint64_t n) { return n ? rnd(s) % n : 0; }

struct plan {
  int proto, slice, chunk_steps, nsubs;
  int nsteps[NPXN];       /* per sub, in steps (a request covers `slice` of them) */
  size_t cap[NPXN];       /* irecv size per request */
  size_t pxn_chunk[NPXN]; /* PXN: bytes per step */
  uint64_t nbytes[NPXN];  /* PXN: message size */
};

static uint64_t plan_key(int from, int comm, long op, int sub, long step)
{
  return mix64(g_seed ^
               mix64(((uint64_t)from << 60) ^ ((uint64_t)comm << 56) ^ ((uint64_t)sub << 52) ^
                     ((uint64_t)op << 20) ^ (uint64_t)step));
}

static void plan_op(int from, int comm, long op, struct plan *p)
{
  uint64_t s = plan_key(from, comm, op, 15, 0xfffff);
  int i;

  memset(p, 0, sizeof(*p));
  if (comm == C_RING) {
    uint64_t r = rnd_below(&s, 100);
    p->nsubs = 1;
    p->proto = r < 45 ? P_SIMPLE : r < 75 ? P_LL : P_LL128;
    if (p->proto == P_SIMPLE) { /* ring allreduce: 2/4 slice/chunk steps, 1 MiB requests */
      p->slice = 2;
      p->chunk_steps = 4;
      p->nsteps[0] = 4 * (int)(1 + rnd_below(&s, 3));
    } else {
      p->slice = 1;
      p->chunk_steps = 1;
      p->nsteps[0] = (int)(1 + rnd_below(&s, p->proto == P_LL ? 24 : 12));
    }
    p->cap[0] = step_size[p->proto] * (size_t)p->slice;
    return;
  }
  /* PXN p2p: SIMPLE, one step per request; each local rank has its own message. */
  p->nsubs = NPXN;
  p->proto = P_SIMPLE;
  p->slice = 1;
  p->chunk_steps = 1;
  for (i = 0; i < NPXN; i++) {
    uint64_t r = rnd_below(&s, 100), n;
    size_t chunk = P2P_SLOT;
    n = r < 15 ? 0
      : r < 35 ? 1 + rnd_below(&s, 4096)
      : r < 70 ? 4097 + rnd_below(&s, 512 * 1024)
               : rnd_below(&s, 2u << 20) + 1;
    if (i == 0) { /* sub 0's last step carries the "last op" mark: at least 64 bytes */
      if (n < 64)
        n = 64 + rnd_below(&s, 4000);
    }
    /* network peers: a quarter chunk below one step, half below eight steps */
    if (n < P2P_SLOT)
      chunk = P2P_SLOT / 4;
    else if (n < 8ull * P2P_SLOT)
      chunk = P2P_SLOT / 2;
    if (i == 0 && n % chunk != 0 && n % chunk < 64)
      n += 64;
    p->nbytes[i] = n;
    p->pxn_chunk[i] = chunk;
    p->nsteps[i] = n == 0 ? 1 : (int)((n + chunk - 1) / chunk);
    p->cap[i] = n < chunk ? n : chunk;
  }
}

/* Bytes the sender sends for request `step` (a step index, multiple of slice). */
static size_t plan_size(int from, int comm, long op, int sub, int step, const struct plan *p)
{
  uint64_t s = plan_key(from, comm, op, sub, step), r;
  int last = step + p->slice >= p->nsteps[sub];
  size_t v;

  if (comm == C_PXN) {
    uint64_t off = (uint64_t)step * p->pxn_chunk[sub];
    return p->nbytes[sub] == 0                   ? 0
      : p->nbytes[sub] - off < p->pxn_chunk[sub] ? (size_t)(p->nbytes[sub] - off)
                                                 : p->pxn_chunk[sub];
  }
  r = rnd_below(&s, 100);
  if (p->proto == P_SIMPLE) { /* real bytes: full, empty, tiny (inline-sized) or anything */
    v = r < 50 ? p->cap[0] : r < 62 ? 0 : r < 78 ? 1 + rnd_below(&s, 64) : 1 + rnd_below(&s, p->cap[0]);
    if (last && v < 64)
      v = 64 + rnd_below(&s, p->cap[0] - 64);
  } else if (p->proto == P_LL) { /* 16-byte lines */
    size_t lines = r < 40 ? 4096 : r < 55 ? 0 : 1 + rnd_below(&s, 4096);
    if (last && lines < 4)
      lines = 4;
    v = 16 * lines;
  } else { /* whole 2048-byte warp slices */
    size_t k = r < 40 ? 300 : r < 55 ? 0 : 1 + rnd_below(&s, 300);
    if (last && k < 1)
      k = 1;
    v = 2048 * k;
  }
  return v;
}

static uint64_t data_seed(int from, int comm, long op, int sub, int step, int last)
{
  return plan_key(from, comm, op, sub + 4, step) ^ (last ? 0x5aa5c33c0ff01234ull : 0);
}

/* The data pattern: one word per 8 bytes, unique per (seed, position), and cheap, since
 * the lab's emulated CPUs fill and check every byte. */
static inline uint64_t pat(uint64_t seed, uint64_t w)
{
  uint64_t v = (seed + w) * 0x9e3779b97f4a7c15ull;
  return v ^ (v >> 29);
}

/* SIMPLE: raw bytes, one 64-bit pattern word per 8 bytes. */
static void fill_simple(uint8_t *p, size_t n, uint64_t seed)
{
  size_t w;

  for (w = 0; w * 8 < n; w++) {
    uint64_t v = pat(seed, w);
    memcpy(p + w * 8, &v, n - w * 8 < 8 ? n - w * 8 : 8);
  }
}

/* Index of the first wrong byte, or n. */
static size_t check_simple(const uint8_t *p, size_t n, uint64_t seed)
{
  size_t w, k;

  for (w = 0; w * 8 < n; w++) {
    uint64_t v = pat(seed, w);
    size_t len = n - w * 8 < 8 ? n - w * 8 : 8;
    if (memcmp(p + w * 8, &v, len) != 0) {
      for (k = 0; k < len; k++)
        if (p[w * 8 + k] != ((uint8_t *)&v)[k])
          return w * 8 + k;
    }
  }
  return n;
}

/* LL: 16-byte lines of two (4-byte data, 4-byte flag) units, each stored as one 8-byte
 * write as the GPU does. */
static void fill_ll(uint8_t *p, size_t n, uint64_t seed, uint32_t flag)
{
  uint64_t *u = (uint64_t *)p;
  size_t i;

  for (i = 0; i < n / 8; i++) {
    uint64_t d = pat(seed, i) & 0xffffffffu;
    __atomic_store_n(&u[i], d | ((uint64_t)flag << 32), __ATOMIC_RELAXED);
  }
}

/* 0: every flag and its data are in; 1: a flag is still missing; 2: a unit carries its
 * flag but wrong data (its index in *bad). */
static int check_ll(const uint8_t *p, size_t n, uint64_t seed, uint32_t flag, size_t from, size_t *bad,
                    size_t *upto)
{
  const uint64_t *u = (const uint64_t *)p;
  size_t i;

  for (i = from; i < n / 8; i++) {
    uint64_t v = __atomic_load_n(&u[i], __ATOMIC_ACQUIRE);
    if ((uint32_t)(v >> 32) != flag) {
      *upto = i;
      return 1;
    }
    if ((uint32_t)v != (uint32_t)pat(seed, i)) {
      *bad = i;
      *upto = i;
      return 2;
    }
  }
  *upto = i;
  return 0;
}

/* LL128: 128-byte lines, 120 bytes of data and an 8-byte flag at the end. */
static void fill_ll128(uint8_t *p, size_t n, uint64_t seed, uint64_t flag)
{
  uint64_t *u = (uint64_t *)p;
  size_t line, j;

  for (line = 0; line < n / 128; line++) {
    for (j = 0; j < 15; j++)
      u[line * 16 + j] = pat(seed, line * 16 + j);
    __atomic_store_n(&u[line * 16 + 15], flag, __ATOMIC_RELEASE);
  }
}

static int check_ll128(const uint8_t *p, size_t n, uint64_t seed, uint64_t flag, size_t from, size_t *bad,
                       size_t *upto)
{
  const uint64_t *u = (const uint64_t *)p;
  size_t line, j;

  for (line = from; line < n / 128; line++) {
    if (__atomic_load_n(&u[line * 16 + 15], __ATOMIC_ACQUIRE) != flag) {
      *upto = line;
      return 1;
    }
    for (j = 0; j < 15; j++)
      if (__atomic_load_n(&u[line * 16 + j], __ATOMIC_RELAXED) != pat(seed, line * 16 + j)) {
        *bad = line * 128 + j * 8;
        *upto = line;
        return 2;
      }
  }
  *upto = line;
  return 0;
}

/* ---- memory: host, or GPU-like (registered as CUDA, then unreadable by the CPU) ------ */

struct mem {
  uint8_t *p;
  size_t size;
  int cuda;
};

static void mem_alloc(struct mem *m, size_t size, int cuda, const char *node)
{
  long pg = sysconf(_SC_PAGESIZE);

  m->size = (size + (size_t)pg - 1) & ~((size_t)pg - 1);
  m->cuda = cuda;
  m->p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m->p == MAP_FAILED)
    fail(node, "mmap of %zu bytes: %s", m->size, strerror(errno));
  memset(m->p, POISON, m->size);
}

static void mem_prot(struct mem *m, size_t off, size_t len, int prot, const char *node)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), a, b;

  if (!m->cuda || len == 0)
    return;
  a = off & ~(pg - 1);
  b = (off + len + pg - 1) & ~(pg - 1);
  if (b > m->size)
    b = m->size;
  if (mprotect(m->p + a, b - a, prot) != 0)
    fail(node, "mprotect: %s", strerror(errno));
}

/* After registration: from now on only the stand-in GPU touches it, between calls. */
static void mem_seal(struct mem *m, const char *node) { mem_prot(m, 0, m->size, PROT_NONE, node); }
static void mem_open(struct mem *m, size_t off, size_t len, const char *node)
{
  mem_prot(m, off, len, PROT_READ | PROT_WRITE, node);
}
static void mem_close(struct mem *m, size_t off, size_t len, const char *node)
{
  mem_prot(m, off, len, PROT_NONE, node);
}

static ncclResult_t regmr(void *comm, struct mem *m, int type, void **mh)
{
  if (drv.v11)
    return drv.v11->regMr(comm, m->p, m->size, type, mh);
  if (drv.v10)
    return drv.v10->regMr(comm, m->p, m->size, type, mh);
  if (drv.v9)
    return drv.v9->regMr(comm, m->p, m->size, type, mh);
  return drv.v8->regMr(comm, m->p, m->size, type, mh);
}

/* ---- nodes, chains and args ---------------------------------------------------------- */

struct stats {
  long ops[NPROTO], pxn_ops, sends, recvs, isend_null, irecv_null, flushes, flush_null, hint_recvs;
  long pxn_n[NPXN + 1]; /* PXN irecvs posted, by n */
  long zero_steps, ahead_tries, ahead_null, ahead_ok, stalls, extra_regs, flag_before_data;
  unsigned long long bytes_sent, bytes_checked;
};

struct sargs { /* one sub: NCCL's send args of a ring op, or one PXN local rank's op */
  int active, last, nsteps, slice, chunk_steps, proto, mode, stall_at;
  long op;
  struct plan pl;
  uint64_t base;
  int posted, transmitted, done;
  double ready_at[STEPS];
  int filled[STEPS]; /* step id whose data the GPU wrote into this slot, or -1 */
  double prev_ready;
};

struct schain {
  int comm, sub, tag;
  void *sc;
  struct mem *buf[NPROTO];
  void *mh[NPROTO];
  uint64_t step; /* NCCL's resources->step */
  long next_op;
  int finished;
  void *req[STEPS]; /* NCCL's sub->requests: never cleared */
  struct sargs a;
};

struct rsub {
  int nsteps, tag, sub;
  size_t cap;
  uint64_t base;
  int posted, received, transmitted, done, gpu;
  double consume_at;
  int armed;
  size_t ll_upto; /* lines already seen complete in the current LL step */
  double bad_since;
  struct mem *buf;
  void *mh;
  size_t got[STEPS]; /* sizes test() reported, by request slot */
};

struct rargs {
  int active, proto, slice, chunk_steps, nsubs, maxdepth, last_seen;
  long op;
  struct plan pl;
  struct rsub s[NPXN];
  int gsize[NPXN];
  int hint[NPXN][STEPS];
};

struct rchain {
  int comm;
  void *rc;
  struct mem *buf[NPROTO];
  void *mh[NPROTO];
  void *pxn_mh[NPXN];
  uint64_t step;
  long next_op;
  int finished;
  void *req[NPXN][STEPS]; /* per group: the first sub's request slots */
  struct rargs a;
};

struct node {
  const char *name;
  int id, peer;
  char handles[1 + NPXN][NCCL_NET_HANDLE_MAXSIZE];
  char peer_handles[1 + NPXN][NCCL_NET_HANDLE_MAXSIZE];
  const char *xchg;       /* pair mode */
  struct node *peer_node; /* self mode */
  volatile int handles_ready;
  void *lc[1 + NPXN];
  struct mem sring[NPROTO], rring[NPROTO], spool[NPXN], rpool;
  struct schain ring_s, pxn_s[NPXN];
  struct rchain ring_r, pxn_r;
  long pxn_final; /* the PXN senders' last op, -1 until time is up */
  volatile int progress_done;
  uint64_t rng;
  struct stats st;
  pthread_t service, progress;
};

static double now(void) { return drv_now(); }

static void dump_state(struct node *n);

static void check(struct node *n, ncclResult_t r, const char *what, long op, int step)
{
  if (r != ncclSuccess) {
    dump_state(n); /* where every chain of this node stood */
    fail(n->name, "%s returned %d (op %ld, step %d)", what, (int)r, op, step);
  }
}

/* ---- sender (sendProxyProgress) ------------------------------------------------------ */

static void send_start(struct node *n, struct schain *c)
{
  struct sargs *a = &c->a;
  int i;

  memset(a, 0, sizeof(*a));
  a->op = c->next_op++;
  plan_op(n->id, c->comm, a->op, &a->pl);
  a->proto = a->pl.proto;
  a->slice = a->pl.slice;
  a->chunk_steps = a->pl.chunk_steps;
  a->nsteps = a->pl.nsteps[c->sub];
  if (c->comm == C_RING) {
    a->last = now() >= g_end;
  } else {
    /* The PXN chains run apart: the first to see the time up names an op that none has
     * started yet, so every chain knows before it sends any of that op. */
    if (n->pxn_final < 0 && now() >= g_end) {
      long top = a->op;
      for (i = 0; i < NPXN; i++)
        if (n->pxn_s[i].next_op - 1 > top)
          top = n->pxn_s[i].next_op - 1;
      n->pxn_final = top + 1;
    }
    a->last = n->pxn_final == a->op;
  }
  /* resources->step rounded up to chunkSteps, as NCCL does per op */
  a->base = (c->step + (uint64_t)a->chunk_steps - 1) / (uint64_t)a->chunk_steps * (uint64_t)a->chunk_steps;
  c->step = a->base + (uint64_t)a->nsteps;
  for (i = 0; i < STEPS; i++)
    a->filled[i] = -1;
  /* the stand-in GPU's pace for this op: at once, jitter, slow, or one long stall */
  a->mode = (int)rnd_below(&n->rng, 4);
  a->stall_at = a->mode == 3 ? (int)rnd_below(&n->rng, (uint64_t)a->nsteps) : -1;
  if (a->mode == 3)
    n->st.stalls++;
  a->prev_ready = now();
  a->active = 1;
}

static uint8_t *send_ptr(struct schain *c, int t, struct mem **m, size_t *off)
{
  struct sargs *a = &c->a;
  int slot = (int)((a->base + (uint64_t)t) % STEPS);

  *m = c->buf[a->proto];
  *off = c->comm == C_PXN ? (size_t)(t % STEPS) * P2P_SLOT : (size_t)slot * step_size[a->proto];
  return (*m)->p + *off;
}

/* The stand-in GPU: writes a step's data once it has a credit and its time came. */
static void send_gpu(struct node *n, struct schain *c)
{
  struct sargs *a = &c->a;
  int t;

  for (t = a->transmitted; t < a->posted; t += a->slice) {
    int slot = (int)((a->base + (uint64_t)t) % STEPS), last;
    size_t size, off;
    struct mem *m;
    uint8_t *p;
    uint64_t seed;

    if (a->filled[slot] == t)
      continue;
    if (now() < a->ready_at[slot])
      return; /* in order, as the GPU writes them */
    size = plan_size(n->id, c->comm, a->op, c->sub, t, &a->pl);
    last = a->last && c->sub == 0 && t + a->slice >= a->nsteps;
    seed = data_seed(n->id, c->comm, a->op, c->sub, t, last);
    p = send_ptr(c, t, &m, &off);
    mem_open(m, off, size, n->name);
    if (a->proto == P_SIMPLE)
      fill_simple(p, size, seed);
    else if (a->proto == P_LL)
      fill_ll(p, size, seed, (uint32_t)(a->base + (uint64_t)t + 1));
    else
      fill_ll128(p, size, seed, a->base + (uint64_t)t + 1);
    mem_close(m, off, size, n->name);
    a->filled[slot] = t;
  }
}

static double ready_delay(struct node *n, struct sargs *a, int t)
{
  switch (a->mode) {
  case 1: return (double)rnd_below(&n->rng, 1000) * 1e-6;
  case 2: return (double)(2000 + rnd_below(&n->rng, 13000)) * 1e-6;
  case 3: return t == a->stall_at ? 0.2 + (double)rnd_below(&n->rng, 200) * 1e-3 : 0;
  default: return 0;
  }
}

/* Is another PXN rank of this op behind this step? Then this isend is "ahead". */
static int pxn_ahead(struct node *n, struct schain *c, int t)
{
  int i;

  if (c->comm != C_PXN)
    return 0;
  for (i = 0; i < NPXN; i++) {
    struct schain *o = &n->pxn_s[i];
    if (o == c || o->finished)
      continue;
    if (!o->a.active || o->a.op < c->a.op)
      return 1; /* still in an earlier op, or not started this one */
    if (o->a.op == c->a.op && o->a.transmitted < t && o->a.transmitted < o->a.nsteps)
      return 1;
  }
  return 0;
}

/* One tick of one sub: returns 1 if it did something. */
static int send_tick(struct node *n, struct schain *c)
{
  struct sargs *a = &c->a;
  int maxdepth = STEPS < SHARED_STEPS / 1 ? STEPS : SHARED_STEPS; /* nsubs = 1 */
  ncclResult_t r;

  if (a->done == a->nsteps)
    return 0;
  if (a->posted < a->nsteps && a->posted < a->done + maxdepth) { /* credit to the GPU */
    int slot = (int)((a->base + (uint64_t)a->posted) % STEPS);
    double t = now() + ready_delay(n, a, a->posted);
    a->ready_at[slot] = t > a->prev_ready ? t : a->prev_ready;
    a->prev_ready = a->ready_at[slot];
    a->posted += a->slice;
    return 1;
  }
  if (a->transmitted < a->posted && a->transmitted < a->done + STEPS) {
    int t = a->transmitted, slot = (int)((a->base + (uint64_t)t) % STEPS), ready = a->filled[slot] == t;
    size_t size = plan_size(n->id, c->comm, a->op, c->sub, t, &a->pl), off, i;
    struct mem *m;
    uint8_t *p = send_ptr(c, t, &m, &off);

    if (ready && a->proto == P_LL) { /* NCCL checks every flag of an LL step */
      uint32_t flag = (uint32_t)(a->base + (uint64_t)t + 1);
      for (i = 0; i < size / 8 && ready; i++)
        ready = (uint32_t)(__atomic_load_n((uint64_t *)p + i, __ATOMIC_ACQUIRE) >> 32) == flag;
    } else if (ready && a->proto == P_LL128 && !m->cuda) { /* host LL128: every line's flag */
      for (i = 0; i < size / 128 && ready; i++)
        ready = __atomic_load_n((uint64_t *)p + i * 16 + 15, __ATOMIC_ACQUIRE) == a->base + (uint64_t)t + 1;
    }
    if (ready) {
      int ahead = pxn_ahead(n, c, t);
      r = drv_isend(&drv, c->sc, p, size, c->tag, c->mh[a->proto], &c->req[slot]);
      check(n, r, c->comm == C_PXN ? "isend on the PXN comm" : "isend on the ring comm", a->op, t);
      n->st.ahead_tries += ahead;
      if (c->req[slot] != NULL) {
        n->st.ahead_ok += ahead;
        n->st.sends++;
        n->st.bytes_sent += size;
        n->st.zero_steps += size == 0;
        a->transmitted += a->slice;
        return 1;
      }
      n->st.isend_null++;
      n->st.ahead_null += ahead;
      /* NULL: nothing moves; fall through and test the oldest send */
    }
  }
  if (a->done < a->transmitted) {
    int slot = (int)((a->base + (uint64_t)a->done) % STEPS), done = 0, size = -1;
    r = drv_test(&drv, c->req[slot], &done, &size);
    check(n, r, c->comm == C_PXN ? "test of a send on the PXN comm" : "test of a send on the ring comm",
          a->op, a->done);
    if (done) { /* the size is ignored, as NCCL does */
      a->done += a->slice;
      return 1;
    }
  }
  return 0;
}

/* ---- receiver (recvProxyProgress) ---------------------------------------------------- */

static void recv_start(struct node *n, struct rchain *c)
{
  struct rargs *a = &c->a;
  int i, g;

  memset(a, 0, sizeof(*a));
  a->op = c->next_op++;
  plan_op(n->peer, c->comm, a->op, &a->pl);
  a->proto = a->pl.proto;
  a->slice = a->pl.slice;
  a->chunk_steps = a->pl.chunk_steps;
  a->nsubs = a->pl.nsubs;
  a->maxdepth = STEPS < SHARED_STEPS / a->nsubs ? STEPS : SHARED_STEPS / a->nsubs;
  a->last_seen = -1;
  /* one base for all subs: they share the connection's step counter only on the ring;
   * on PXN each sub is its own connection, but all share the comm, so any base works
   * as long as both ends agree: flags are not used there */
  for (i = 0; i < a->nsubs; i++) {
    struct rsub *s = &a->s[i];
    s->sub = i;
    s->nsteps = a->pl.nsteps[i];
    s->cap = a->pl.cap[i];
    s->tag = c->comm == C_RING ? 100 + n->peer : i + 1;
    s->base = (c->step + (uint64_t)a->chunk_steps - 1) / (uint64_t)a->chunk_steps * (uint64_t)a->chunk_steps;
    s->buf = c->comm == C_RING ? c->buf[a->proto] : c->buf[P_SIMPLE];
    s->mh = c->comm == C_RING ? c->mh[a->proto] : c->pxn_mh[i];
  }
  c->step = a->s[0].base + (uint64_t)a->s[0].nsteps;
  /* groups of up to maxRecvs subs that share the recvComm (all of them here) */
  for (i = 0; i < a->nsubs; i += g) {
    int k;
    g = a->nsubs - i < g_maxrecvs ? a->nsubs - i : g_maxrecvs;
    for (k = 0; k < g; k++)
      a->gsize[i + k] = g;
  }
  a->active = 1;
}

static size_t recv_off(struct rchain *c, struct rsub *s, int j)
{
  struct rargs *a = &c->a;

  if (c->comm == C_PXN)
    return P2P_SLOT * (size_t)((j % a->maxdepth) * a->nsubs + s->sub);
  return (size_t)((s->base + (uint64_t)j) % STEPS) * step_size[a->proto];
}

/* The stand-in GPU of the receiver: consumes steps (checks them, then moves head). */
static void recv_gpu(struct node *n, struct rchain *c)
{
  struct rargs *a = &c->a;
  int i;

  for (i = 0; i < a->nsubs; i++) {
    struct rsub *s = &a->s[i];
    int j = s->gpu, lastcand, res;
    size_t size, off, bad = 0, upto = 0;
    uint64_t seed0, seed1, seed;
    uint8_t *p;

    if (j >= s->nsteps)
      continue;
    size = plan_size(n->peer, c->comm, a->op, i, j, &a->pl);
    lastcand = i == 0 && j + a->slice >= s->nsteps;
    seed0 = data_seed(n->peer, c->comm, a->op, i, j, 0);
    seed1 = data_seed(n->peer, c->comm, a->op, i, j, 1);
    off = recv_off(c, s, j);
    p = s->buf->p + off;
    if (a->proto == P_SIMPLE) {
      size_t w, chk = size + GUARD <= s->cap ? size + GUARD : s->cap;
      if (s->transmitted <= j) /* tail not published yet */
        continue;
      if (!s->armed) {
        s->armed = 1;
        s->consume_at = now() + (rnd_below(&n->rng, 8) == 0 ? (double)rnd_below(&n->rng, 20000) * 1e-6 : 0);
      }
      if (now() < s->consume_at)
        continue;
      mem_open(s->buf, off, chk, n->name);
      seed = seed0;
      if (lastcand && size >= 8 && check_simple(p, 8, seed1) == 8)
        seed = seed1, a->last_seen = 1;
      else if (lastcand)
        a->last_seen = 0;
      w = check_simple(p, size, seed);
      if (w != size)
        fail(n->name,
             "%s op %ld (%s) sub %d step %d: byte %zu of %zu is %#x, expected another value "
             "(from %s)",
             c->comm == C_PXN ? "PXN" : "ring", a->op, proto_name[a->proto], i, j, w, size, p[w],
             c->comm == C_PXN ? "its tag's sender" : "the peer");
      for (w = size; w < chk; w++)
        if (p[w] != POISON)
          fail(n->name, "%s op %ld sub %d step %d: byte %zu past the %zu sent bytes was written",
               c->comm == C_PXN ? "PXN" : "ring", a->op, i, j, w, size);
      memset(p, POISON, chk); /* a stale copy must not pass next time */
      mem_close(s->buf, off, chk, n->name);
      s->armed = 0;
    } else {
      /* LL/LL128: NCCL's GPU polls the flags once the receive is posted */
      uint64_t flag = s->base + (uint64_t)j + 1;
      if (s->posted <= j)
        continue;
      if (lastcand && a->last_seen < 0 && size > 0) {
        size_t b2, u2;
        int r1 = a->proto == P_LL ? check_ll(p, 16, seed1, (uint32_t)flag, 0, &b2, &u2)
                                  : check_ll128(p, 128, seed1, flag, 0, &b2, &u2);
        int r0 = a->proto == P_LL ? check_ll(p, 16, seed0, (uint32_t)flag, 0, &b2, &u2)
                                  : check_ll128(p, 128, seed0, flag, 0, &b2, &u2);
        if (r1 == 1)
          continue;               /* first line not in yet */
        if (r1 != 0 && r0 != 0) { /* neither: maybe the data is still landing */
          if (s->bad_since == 0)
            s->bad_since = now();
          if (now() - s->bad_since < 2.0)
            continue;
          r0 = 0; /* the full check below names the bad byte */
        }
        a->last_seen = r1 == 0 ? 1 : 0;
        s->bad_since = 0;
      }
      seed = lastcand && a->last_seen == 1 ? seed1 : seed0;
      res = a->proto == P_LL ? check_ll(p, size, seed, (uint32_t)flag, s->ll_upto, &bad, &upto)
                             : check_ll128(p, size, seed, flag, s->ll_upto, &bad, &upto);
      s->ll_upto = upto;
      if (res == 1)
        continue;
      if (res == 2) {
        /* flag seen before its data: NCCL assumes 8-byte units land whole and lines
         * front to back; give the writer a moment before calling it corruption */
        if (s->bad_since == 0) {
          s->bad_since = now();
          n->st.flag_before_data++;
        }
        if (now() - s->bad_since < 2.0)
          continue;
        fail(n->name, "ring op %ld (%s) step %d: the line at byte %zu of %zu carries its flag but wrong data",
             a->op, proto_name[a->proto], j, bad * (a->proto == P_LL ? 8 : 1), size);
      }
      s->ll_upto = 0;
      s->bad_since = 0;
    }
    n->st.recvs++;
    n->st.bytes_checked += size;
    s->gpu += a->slice;
  }
}

static int recv_tick(struct node *n, struct rchain *c)
{
  struct rargs *a = &c->a;
  int g, i, idle = 1;
  ncclResult_t r;

  /* 1. post: one irecv per group, n = the subs that still have steps */
  for (g = 0; g < a->nsubs; g += a->gsize[g]) {
    struct rsub *first = &a->s[g];
    void *ptrs[PROXY_MAX_SUBS], *mhs[PROXY_MAX_SUBS];
    size_t sizes[PROXY_MAX_SUBS];
    int tags[PROXY_MAX_SUBS], cnt = 0;

    for (i = 0; i < a->gsize[g]; i++) {
      struct rsub *s = first + i;
      if (s->posted < s->nsteps) {
        if (s->posted >= s->done + a->maxdepth) {
          cnt = 0;
          break;
        }
        ptrs[cnt] = s->buf->p + recv_off(c, s, s->posted);
        sizes[cnt] = s->cap;
        tags[cnt] = s->tag;
        mhs[cnt] = s->mh;
        cnt++;
      }
    }
    if (cnt) {
      void **req = &c->req[g][first->posted % STEPS];
      int hint = (a->proto == P_LL || a->proto == P_LL128) && cnt == 1 && g_hint &&
        drv.abi >= 9; /* v8 shims drop it */
      if (hint)
        *req = (void *)0x1; /* NCCL_NET_OPTIONAL_RECV_COMPLETION */
      r = drv_irecv(&drv, c->rc, cnt, ptrs, sizes, tags, mhs, req);
      check(n, r, c->comm == C_PXN ? "irecv on the PXN comm" : "irecv on the ring comm", a->op,
            first->posted);
      if (*req != NULL) {
        a->hint[g][first->posted % STEPS] = hint;
        n->st.hint_recvs += hint;
        if (c->comm == C_PXN)
          n->st.pxn_n[cnt]++;
        for (i = 0; i < a->gsize[g]; i++)
          first[i].posted += a->slice;
        idle = 0;
      } else {
        n->st.irecv_null++;
      }
    }
  }
  if (!idle)
    return 1;
  /* 2. test the oldest receive of each group; flush SIMPLE into GPU memory */
  for (g = 0; g < a->nsubs; g += a->gsize[g]) {
    struct rsub *first = &a->s[g];
    int step = first->received, slot = step % STEPS, done = 0, total = 0, cnt = 0;
    int sizes[PROXY_MAX_SUBS];
    void *ptrs[PROXY_MAX_SUBS], *mhs[PROXY_MAX_SUBS];

    if (first->posted <= first->received)
      continue;
    memset(sizes, 0, sizeof(sizes));
    r = drv_test(&drv, c->req[g][slot], &done, sizes);
    check(n, r, c->comm == C_PXN ? "test of a receive on the PXN comm" : "test of a receive on the ring comm",
          a->op, step);
    if (!done)
      continue;
    for (i = 0; i < PROXY_MAX_SUBS; i++)
      total += sizes[i];
    for (i = 0; i < a->gsize[g]; i++) {
      struct rsub *s = first + i;
      if (step < s->nsteps) {
        size_t want = plan_size(n->peer, c->comm, a->op, s->sub, step, &a->pl);
        if (!a->hint[g][slot] && (size_t)sizes[cnt] != want)
          fail(n->name, "%s op %ld sub %d (tag %d) step %d: test reported %d bytes, %zu were sent",
               c->comm == C_PXN ? "PXN" : "ring", a->op, s->sub, s->tag, step, sizes[cnt], want);
        ptrs[cnt] = s->buf->p + recv_off(c, s, step);
        mhs[cnt] = s->mh;
        cnt++;
      }
      s->received += a->slice;
    }
    c->req[g][slot] = NULL;
    if (total > 0 && a->proto == P_SIMPLE && first->buf->cuda) {
      r = drv_iflush(&drv, c->rc, cnt, ptrs, sizes, mhs, &c->req[g][slot]);
      check(n, r, "iflush", a->op, step);
      n->st.flushes++;
      n->st.flush_null += c->req[g][slot] == NULL;
    }
    idle = 0;
  }
  if (!idle)
    return 1;
  /* 3. test the flush; then publish the tail */
  for (g = 0; g < a->nsubs; g += a->gsize[g]) {
    struct rsub *first = &a->s[g];
    int step = first->transmitted, done = 1;
    void *req;

    if (first->received <= first->transmitted)
      continue;
    req = c->req[g][step % STEPS];
    if (req != NULL) {
      r = drv_test(&drv, req, &done, NULL);
      check(n, r, "test of a flush", a->op, step);
    }
    if (done) {
      for (i = 0; i < a->gsize[g]; i++)
        first[i].transmitted += a->slice;
      idle = 0;
    }
  }
  if (!idle)
    return 1;
  /* 4. the GPU consumed: done moves, never past what was transmitted */
  for (i = 0; i < a->nsubs; i++) {
    struct rsub *s = &a->s[i];
    while (s->done < s->nsteps && s->gpu > s->done && s->transmitted > s->done) {
      s->done += a->slice;
      idle = 0;
    }
  }
  return !idle;
}

static int recv_finished(struct rargs *a)
{
  int i;

  for (i = 0; i < a->nsubs; i++)
    if (a->s[i].done < a->s[i].nsteps)
      return 0;
  return 1;
}

/* ---- the progress thread --------------------------------------------------------------- */

static void report(struct node *n, const char *tag)
{
  struct stats *st = &n->st;

  say(
    "replay: %s: node %s: ops ring SIMPLE %ld LL %ld LL128 %ld, PXN %ld; %ld sends (%llu bytes), "
    "%ld receives checked (%llu bytes); isend NULL %ld (PXN sends ahead of another rank: %ld tried, %ld NULL, "
    "%ld taken); irecv NULL %ld; iflush %ld (NULL %ld); hint receives %ld; 0-byte steps %ld; GPU stalls %ld; "
    "extra regMr %ld; flag before data %ld; PXN irecvs by n: 3: %ld, 2: %ld, 1: %ld; memory: %s\n",
    tag, n->name, st->ops[P_SIMPLE], st->ops[P_LL], st->ops[P_LL128], st->pxn_ops, st->sends, st->bytes_sent,
    st->recvs, st->bytes_checked, st->isend_null, st->ahead_tries, st->ahead_null, st->ahead_ok,
    st->irecv_null, st->flushes, st->flush_null, st->hint_recvs, st->zero_steps, st->stalls, st->extra_regs,
    st->flag_before_data, st->pxn_n[3], st->pxn_n[2], st->pxn_n[1],
    g_cuda ? "GPU-like (NCCL_PTR_CUDA, PROT_NONE)" : "host (the plugin has no NCCL_PTR_CUDA)");
}

static void dump_state(struct node *n)
{
  int i;

  say(
    "replay: state of node %s: ring send op %ld (%s) posted %d transmitted %d done %d of %d; ring recv op %ld (%s)",
    n->name, n->ring_s.a.op, proto_name[n->ring_s.a.proto], n->ring_s.a.posted, n->ring_s.a.transmitted,
    n->ring_s.a.done, n->ring_s.a.nsteps, n->ring_r.a.op, proto_name[n->ring_r.a.proto]);
  for (i = 0; i < n->ring_r.a.nsubs; i++)
    say(" [p%d r%d t%d d%d g%d of %d]", n->ring_r.a.s[i].posted, n->ring_r.a.s[i].received,
        n->ring_r.a.s[i].transmitted, n->ring_r.a.s[i].done, n->ring_r.a.s[i].gpu, n->ring_r.a.s[i].nsteps);
  for (i = 0; i < NPXN; i++)
    say("; PXN send %d op %ld p%d t%d d%d of %d", i, n->pxn_s[i].a.op, n->pxn_s[i].a.posted,
        n->pxn_s[i].a.transmitted, n->pxn_s[i].a.done, n->pxn_s[i].a.nsteps);
  say("; PXN recv op %ld", n->pxn_r.a.op);
  for (i = 0; i < n->pxn_r.a.nsubs; i++)
    say(" [p%d r%d t%d d%d g%d of %d]", n->pxn_r.a.s[i].posted, n->pxn_r.a.s[i].received,
        n->pxn_r.a.s[i].transmitted, n->pxn_r.a.s[i].done, n->pxn_r.a.s[i].gpu, n->pxn_r.a.s[i].nsteps);
  say("\n");
}

static void *progress_main(void *arg)
{
  struct node *n = arg;
  struct schain *sch[1 + NPXN];
  double last_progress = now(), last_report = now();
  unsigned long pass = 0;
  unsigned long long marker = 0;
  int i, idle_passes = 0;

  sch[0] = &n->ring_s;
  for (i = 0; i < NPXN; i++)
    sch[1 + i] = &n->pxn_s[i];
  for (;;) {
    int busy = 0, all = 1;
    unsigned long long m;

    /* New ops are picked up every 8 passes or when idle, as NCCL's progress loop does. */
    if (pass % 8 == 0 || idle_passes > 0) {
      for (i = 0; i < 1 + NPXN; i++) {
        struct schain *c = sch[i];
        if (c->finished || (c->a.active && c->a.done < c->a.nsteps))
          continue;
        if (c->a.active) { /* an op just drained */
          c->a.active = 0;
          if (c->comm == C_RING)
            n->st.ops[c->a.proto]++;
          if (c->a.last) {
            c->finished = 1;
            continue;
          }
        }
        send_start(n, c);
      }
      {
        struct rchain *rcs[2] = {&n->ring_r, &n->pxn_r};
        for (i = 0; i < 2; i++) {
          struct rchain *c = rcs[i];
          if (c->finished || (c->a.active && !recv_finished(&c->a)))
            continue;
          if (c->a.active) {
            c->a.active = 0;
            if (c->comm == C_PXN)
              n->st.pxn_ops++;
            if (c->a.last_seen == 1) {
              c->finished = 1;
              continue;
            }
          }
          recv_start(n, c);
        }
      }
    }
    for (i = 0; i < 1 + NPXN; i++)
      if (sch[i]->a.active && !sch[i]->finished) {
        send_gpu(n, sch[i]);
        busy |= send_tick(n, sch[i]);
      }
    if (n->ring_r.a.active && !n->ring_r.finished) {
      recv_gpu(n, &n->ring_r);
      busy |= recv_tick(n, &n->ring_r);
    }
    if (n->pxn_r.a.active && !n->pxn_r.finished) {
      recv_gpu(n, &n->pxn_r);
      busy |= recv_tick(n, &n->pxn_r);
    }
    for (i = 0; i < 1 + NPXN; i++)
      all &= sch[i]->finished;
    all &= n->ring_r.finished && n->pxn_r.finished;
    if (all)
      break;
    pass++;
    m = n->st.recvs + (unsigned long long)n->st.sends * 1000003ull;
    if (m != marker) {
      marker = m;
      last_progress = now();
    } else if (now() - last_progress > STALL_S) {
      dump_state(n);
      fail(n->name, "no send or receive completed for %.0f s", STALL_S);
    }
    if (now() - last_report >= 10) {
      report(n, "progress");
      last_report = now();
    }
    /* The lab's guests have two emulated CPUs: an idle pass gives them back. */
    if (busy) {
      idle_passes = 0;
    } else if (++idle_passes > 64) {
      usleep(50);
    } else {
      sched_yield();
    }
  }
  n->progress_done = 1;
  return NULL;
}

/* ---- the service thread ------------------------------------------------------------------ */

static void publish_handles(struct node *n)
{
  char name[64];

  if (n->xchg == NULL) {
    __atomic_store_n(&n->handles_ready, 1, __ATOMIC_RELEASE);
    return;
  }
  snprintf(name, sizeof(name), "%s.replay.handles", n->name);
  if (drv_file_put(n->xchg, name, n->handles, sizeof(n->handles), NULL, 0) != 0)
    fail(n->name, "publishing the listen handles");
}

static void fetch_handles(struct node *n)
{
  char name[64];
  double deadline = now() + 300;

  if (n->xchg == NULL) {
    while (!__atomic_load_n(&n->peer_node->handles_ready, __ATOMIC_ACQUIRE))
      if (now() > deadline)
        fail(n->name, "the other node never listened");
      else
        usleep(1000);
    memcpy(n->peer_handles, n->peer_node->handles, sizeof(n->peer_handles));
    return;
  }
  snprintf(name, sizeof(name), "%s.replay.handles", n->id == 0 ? "b" : "a");
  if (drv_file_get(n->xchg, name, n->peer_handles, sizeof(n->peer_handles), 300) != 0)
    fail(n->name, "the peer's listen handles");
}

static void reg(struct node *n, void *comm, struct mem *m, size_t size, int cuda, void **mh, const char *what)
{
  mem_alloc(m, size, cuda, n->name);
  if (regmr(comm, m, cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST, mh) != ncclSuccess || *mh == NULL)
    fail(n->name, "regMr of the %s (%zu bytes, %s)", what, m->size, cuda ? "CUDA" : "host");
}

struct extra {
  struct mem m;
  void *comm, *mh;
};

static void *service_main(void *arg)
{
  struct node *n = arg;
  void *sring = NULL, *spxn = NULL, *rring = NULL, *rpxn = NULL;
  struct extra ex[MAX_EXTRA];
  int i, winner, nex = 0, turn = 0;
  double deadline;
  ncclResult_t r;

  memset(n->handles, 0, sizeof(n->handles));
  for (i = 0; i < 1 + NPXN; i++)
    if (drv_listen(&drv, 0, n->handles[i], &n->lc[i]) != ncclSuccess)
      fail(n->name, "listen %d", i);
  publish_handles(n);
  fetch_handles(n);
  /* The peer's local ranks race for the shared PXN send comm: one of them wins and
   * connects with its own handle; the receiver accepts on every one of its listen
   * comms, interleaved with everything else, until one yields the comm. */
  winner = (int)(mix64(g_seed + (uint64_t)n->id) % NPXN);
  deadline = now() + 300;
  while (sring == NULL || spxn == NULL || rring == NULL || rpxn == NULL) {
    if (sring == NULL && (r = drv_connect(&drv, 0, n->peer_handles[0], &sring)) != ncclSuccess)
      fail(n->name, "connect (ring) returned %d", (int)r);
    if (spxn == NULL && (r = drv_connect(&drv, 0, n->peer_handles[1 + winner], &spxn)) != ncclSuccess)
      fail(n->name, "connect (PXN) returned %d", (int)r);
    if (rring == NULL && (r = drv_accept(&drv, n->lc[0], &rring)) != ncclSuccess)
      fail(n->name, "accept (ring) returned %d", (int)r);
    if (rpxn == NULL && (r = drv_accept(&drv, n->lc[1 + turn++ % NPXN], &rpxn)) != ncclSuccess)
      fail(n->name, "accept (PXN) returned %d", (int)r);
    if (now() > deadline)
      fail(n->name, "connect/accept did not finish within 300 s");
    usleep(200);
  }
  for (i = 0; i < 1 + NPXN; i++)
    drv_close_listen(&drv, n->lc[i]);

  /* Buffers, registered as NCCL does right after connect/accept: LL, LL128, SIMPLE. */
  n->ring_s.sc = sring;
  n->ring_s.comm = C_RING;
  n->ring_s.tag = 100 + n->id;
  reg(n, sring, &n->sring[P_LL], buff_size[P_LL], 0, &n->ring_s.mh[P_LL], "sender's LL buffer");
  reg(n, sring, &n->sring[P_LL128], buff_size[P_LL128], g_cuda, &n->ring_s.mh[P_LL128],
      "sender's LL128 buffer");
  reg(n, sring, &n->sring[P_SIMPLE], buff_size[P_SIMPLE], g_cuda, &n->ring_s.mh[P_SIMPLE],
      "sender's SIMPLE buffer");
  for (i = 0; i < NPROTO; i++)
    n->ring_s.buf[i] = &n->sring[i];
  n->ring_r.rc = rring;
  n->ring_r.comm = C_RING;
  reg(n, rring, &n->rring[P_LL], buff_size[P_LL], 0, &n->ring_r.mh[P_LL], "receiver's LL buffer");
  reg(n, rring, &n->rring[P_LL128], buff_size[P_LL128], 0, &n->ring_r.mh[P_LL128], "receiver's LL128 buffer");
  reg(n, rring, &n->rring[P_SIMPLE], buff_size[P_SIMPLE], g_cuda, &n->ring_r.mh[P_SIMPLE],
      "receiver's SIMPLE buffer");
  for (i = 0; i < NPROTO; i++)
    n->ring_r.buf[i] = &n->rring[i];
  for (i = 0; i < NPXN; i++) { /* each local rank's pool on the one shared send comm */
    struct schain *c = &n->pxn_s[i];
    c->sc = spxn;
    c->comm = C_PXN;
    c->sub = i;
    c->tag = i + 1;
    reg(n, spxn, &n->spool[i], POOL_SIZE, g_cuda, &c->mh[P_SIMPLE], "PXN sender's pool");
    c->buf[P_SIMPLE] = &n->spool[i];
  }
  /* the receiver's pool, registered once per receive connection on the same comm */
  n->pxn_r.rc = rpxn;
  n->pxn_r.comm = C_PXN;
  reg(n, rpxn, &n->rpool, POOL_SIZE, g_cuda, &n->pxn_r.pxn_mh[0], "PXN receiver's pool");
  for (i = 1; i < NPXN; i++)
    if (regmr(rpxn, &n->rpool, g_cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &n->pxn_r.pxn_mh[i]) != ncclSuccess)
      fail(n->name, "regMr of the PXN receiver's pool again (registration %d)", i + 1);
  n->pxn_r.buf[P_SIMPLE] = &n->rpool;
  for (i = 0; i < NPROTO; i++) {
    mem_seal(&n->sring[i], n->name);
    mem_seal(&n->rring[i], n->name);
  }
  for (i = 0; i < NPXN; i++)
    mem_seal(&n->spool[i], n->name);
  mem_seal(&n->rpool, n->name);
  say("replay: node %s connected: ring and PXN comms both ways, buffers registered (%s)\n", n->name,
      g_cuda ? "SIMPLE and LL128 as NCCL_PTR_CUDA" : "all host");

  if (pthread_create(&n->progress, NULL, progress_main, n) != 0)
    fail(n->name, "cannot start the progress thread");
  /* During traffic: user-buffer style registrations come and go on the same comms. */
  while (!__atomic_load_n(&n->progress_done, __ATOMIC_ACQUIRE)) {
    usleep((useconds_t)(20000 + rnd_below(&n->rng, 60000)));
    if (nex < MAX_EXTRA && rnd_below(&n->rng, 2) == 0) {
      void *comms[4] = {sring, spxn, rring, rpxn};
      struct extra *e = &ex[nex];
      int cuda = g_cuda && rnd_below(&n->rng, 2) == 0;
      e->comm = comms[rnd_below(&n->rng, 4)];
      mem_alloc(&e->m, 65536 + rnd_below(&n->rng, 2u << 20), cuda, n->name);
      if (regmr(e->comm, &e->m, cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &e->mh) != ncclSuccess)
        fail(n->name, "regMr of an extra buffer during traffic");
      mem_seal(&e->m, n->name);
      nex++;
      n->st.extra_regs++;
    } else if (nex > 0) {
      if (drv_deregmr(&drv, ex[0].comm, ex[0].mh) != ncclSuccess)
        fail(n->name, "deregMr of an extra buffer during traffic");
      munmap(ex[0].m.p, ex[0].m.size);
      memmove(&ex[0], &ex[1], sizeof(ex[0]) * (size_t)(nex - 1));
      nex--;
    }
  }
  pthread_join(n->progress, NULL);
  report(n, "ok");
  if (n->xchg == NULL) { /* both ends done before either closes */
    double deadline2 = now() + 600;
    while (!__atomic_load_n(&n->peer_node->progress_done, __ATOMIC_ACQUIRE))
      if (now() > deadline2)
        fail(n->name, "the other node never finished");
      else
        usleep(1000);
  } else {
    char name[64], peer_name[64], buf[1];
    snprintf(name, sizeof(name), "%s.replay.done", n->name);
    snprintf(peer_name, sizeof(peer_name), "%s.replay.done", n->id == 0 ? "b" : "a");
    drv_file_put(n->xchg, name, "1", 1, NULL, 0);
    if (drv_file_get(n->xchg, peer_name, buf, 1, 600) != 0)
      fail(n->name, "the peer never finished");
  }
  for (i = 0; i < nex; i++)
    drv_deregmr(&drv, ex[i].comm, ex[i].mh);
  for (i = 0; i < NPROTO; i++) {
    check(n, drv_deregmr(&drv, sring, n->ring_s.mh[i]), "deregMr", -1, -1);
    check(n, drv_deregmr(&drv, rring, n->ring_r.mh[i]), "deregMr", -1, -1);
  }
  for (i = 0; i < NPXN; i++) {
    check(n, drv_deregmr(&drv, spxn, n->pxn_s[i].mh[P_SIMPLE]), "deregMr", -1, -1);
    check(n, drv_deregmr(&drv, rpxn, n->pxn_r.pxn_mh[i]), "deregMr", -1, -1);
  }
  check(n, drv_close_send(&drv, sring), "closeSend", -1, -1);
  check(n, drv_close_send(&drv, spxn), "closeSend", -1, -1);
  check(n, drv_close_recv(&drv, rring), "closeRecv", -1, -1);
  check(n, drv_close_recv(&drv, rpxn), "closeRecv", -1, -1);
  return NULL;
}

static void node_init(struct node *n, int id, const char *xchg)
{
  int i, k;

  memset(n, 0, sizeof(*n));
  n->id = id;
  n->peer = 1 - id;
  n->name = id == 0 ? "a" : "b";
  n->xchg = xchg;
  n->pxn_final = -1;
  n->rng = mix64(g_seed * 31 + (uint64_t)id + (uint64_t)getpid());
  /* NCCL's request arrays are recycled without clearing: start them with junk */
  for (k = 0; k < STEPS; k++) {
    n->ring_s.req[k] = (void *)(uintptr_t)(0xdead0000u + 16u * (unsigned)k);
    for (i = 0; i < NPXN; i++) {
      n->pxn_s[i].req[k] = (void *)(uintptr_t)(0xdeae0000u + 256u * (unsigned)i + 16u * (unsigned)k);
      n->ring_r.req[i][k] = (void *)(uintptr_t)(0xdeaf0000u + 256u * (unsigned)i + 16u * (unsigned)k);
      n->pxn_r.req[i][k] = (void *)(uintptr_t)(0xdeb00000u + 256u * (unsigned)i + 16u * (unsigned)k);
    }
  }
}

int main(int argc, char **argv)
{
  const char *plugin = "libnccl-net-mcp.so", *xchg = NULL, *mode = NULL;
  int abi = 11, i, ndev = 0, require_cuda = 0, maxrecvs = 0, self;
  double seconds = 60, t0;
  char role = 0;
  ncclNetProperties_v12_t props;
  static struct node nodes[2];

  for (i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
      plugin = argv[++i];
    else if (!strcmp(argv[i], "--abi") && i + 1 < argc)
      abi = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
      g_seed = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--max-recvs") && i + 1 < argc)
      maxrecvs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--require-cuda"))
      require_cuda = 1;
    else if (!strcmp(argv[i], "--role") && i + 1 < argc)
      role = argv[++i][0];
    else if (!strcmp(argv[i], "--xchg") && i + 1 < argc)
      xchg = argv[++i];
    else if (mode == NULL && (!strcmp(argv[i], "self") || !strcmp(argv[i], "pair")))
      mode = argv[i];
    else
      mode = "";
  }
  if (mode == NULL || (strcmp(mode, "self") && strcmp(mode, "pair")) || (abi < 8 || abi > 11) ||
      (!strcmp(mode, "pair") && ((role != 'a' && role != 'b') || xchg == NULL))) {
    fprintf(stderr,
            "usage: %s [--plugin SO] [--abi 8..11] [--seconds S] [--seed N] [--max-recvs N] "
            "[--require-cuda] self | pair --role a|b --xchg DIR\n",
            argv[0]);
    return 2;
  }
  self = !strcmp(mode, "self");
  if (getenv("NCCL_NET_OPTIONAL_RECV_COMPLETION") != NULL)
    g_hint = atoi(getenv("NCCL_NET_OPTIONAL_RECV_COMPLETION")) != 0;
  if (drv_open(&drv, plugin, abi) != 0 || drv_init(&drv) != ncclSuccess ||
      drv_devices(&drv, &ndev) != ncclSuccess || ndev < 1)
    fail(self ? "self" : (role == 'a' ? "a" : "b"), "plugin init");
  if (drv_props(&drv, 0, &props) != ncclSuccess)
    fail("-", "getProperties");
  g_cuda = (props.ptrSupport & NCCL_PTR_CUDA) != 0;
  g_maxrecvs = props.maxRecvs < 1 ? 1 : props.maxRecvs;
  if (maxrecvs > 0 && maxrecvs < g_maxrecvs)
    g_maxrecvs = maxrecvs;
  if (require_cuda && !g_cuda)
    fail("-", "--require-cuda: %s advertises no NCCL_PTR_CUDA (ptrSupport %#x); is nvidia_peermem loaded?",
         props.name, props.ptrSupport);
  say(
    "replay: %s mode, plugin %s (v%d table), device %s, ptrSupport %#x, maxRecvs %d (grouping by %d), %.0f s, "
    "seed %llu, optional-completion hint %s\n",
    mode, drv.name, abi, props.name, props.ptrSupport, props.maxRecvs, g_maxrecvs, seconds,
    (unsigned long long)g_seed,
    !g_hint      ? "off (NCCL_NET_OPTIONAL_RECV_COMPLETION=0)"
      : abi >= 9 ? "on"
                 : "on, but the v8 table never sees it");
  t0 = now();
  g_end = t0 + seconds;
  if (self) {
    node_init(&nodes[0], 0, NULL);
    node_init(&nodes[1], 1, NULL);
    nodes[0].peer_node = &nodes[1];
    nodes[1].peer_node = &nodes[0];
    for (i = 0; i < 2; i++)
      if (pthread_create(&nodes[i].service, NULL, service_main, &nodes[i]) != 0)
        fail(nodes[i].name, "cannot start the service thread");
    for (i = 0; i < 2; i++)
      pthread_join(nodes[i].service, NULL);
  } else {
    node_init(&nodes[0], role == 'a' ? 0 : 1, xchg);
    if (pthread_create(&nodes[0].service, NULL, service_main, &nodes[0]) != 0)
      fail(nodes[0].name, "cannot start the service thread");
    pthread_join(nodes[0].service, NULL);
  }
  drv_finalize(&drv);
  say("replay: ok: %s mode, %.1f s, every byte verified, no call returned an error\n", mode, now() - t0);
  return 0;
}
