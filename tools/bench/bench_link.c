/*
 * bench_link.c - the plugin connections a run measures over, opened the way NCCL's
 * service thread opens them (listen, swap handles, connect and accept polled from one
 * thread), each with a registered ring of slots per direction. Memory is allocated,
 * touched and registered here, once, so the measured path never allocates.
 *
 * In a pair, one more connection is the control channel: small messages in strict
 * alternation (plan, ready, status) keep the two sides on the same point without a
 * second transport. It is idle while data moves, so it never competes with it.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define HELLO_MAGIC "mcpnet-bench-hello/1"
#define CTL_MAGIC 0x6d637062u /* "mcpb" */
#define CTL_BUF 4096
#define CONNECT_TIMEOUT 120

/* What the two sides of a pair swap before connecting. */
struct bench_hello {
  char magic[32];
  char signature[512];
  uint32_t nhandles;
  char handles[BENCH_MAX_CONNS + 1][NCCL_NET_HANDLE_MAXSIZE];
};

static uint8_t *ring_alloc(size_t bytes)
{
  size_t len = (bytes + 4095) & ~(size_t)4095;
  uint8_t *p = aligned_alloc(4096, len ? len : 4096);

  /* Touch every page now: first-touch faults must not land inside a measurement. */
  if (p != NULL)
    memset(p, 0, len ? len : 4096);
  return p;
}

static int conn_buffers(struct bench_link *l, struct bench_conn *c, size_t bytes, int idx)
{
  c->ring_bytes = bytes;
  c->sbuf = ring_alloc(bytes);
  c->rbuf = ring_alloc(bytes);
  if (c->sbuf == NULL || c->rbuf == NULL) {
    fprintf(stderr, "mcpnet-bench: out of memory for two %zu-byte rings (connection %d); lower --mem or -e\n",
            bytes, idx);
    return -1;
  }
  if (drv_regmr(l->d, c->sc, c->sbuf, bytes ? bytes : 4096, &c->smh) != ncclSuccess ||
      drv_regmr(l->d, c->rc, c->rbuf, bytes ? bytes : 4096, &c->rmh) != ncclSuccess) {
    fprintf(stderr, "mcpnet-bench: regMr of %zu bytes failed on connection %d (ulimit -l?)\n", bytes, idx);
    return -1;
  }
  return 0;
}

static void conn_free(struct bench_link *l, struct bench_conn *c)
{
  if (c->smh != NULL)
    drv_deregmr(l->d, c->sc, c->smh);
  if (c->rmh != NULL)
    drv_deregmr(l->d, c->rc, c->rmh);
  if (c->sc != NULL)
    drv_close_send(l->d, c->sc);
  if (c->rc != NULL)
    drv_close_recv(l->d, c->rc);
  free(c->sbuf);
  free(c->rbuf);
  memset(c, 0, sizeof(*c));
}

int bench_link_open(struct bench_link *l, struct mcp_drive *d, const struct bench_opts *o,
                    struct bench_xchg *x, size_t ring_bytes)
{
  struct bench_hello *mine = NULL, *peer = NULL;
  void *lc[BENCH_MAX_CONNS + 1] = {0};
  int n, i, rc = -1;

  memset(l, 0, sizeof(*l));
  l->d = d;
  l->nconns = o->conns;
  l->has_ctl = o->role != BENCH_SELF;
  n = l->nconns + l->has_ctl;
  l->conns = calloc((size_t)l->nconns, sizeof(*l->conns));
  mine = calloc(1, sizeof(*mine));
  peer = calloc(1, sizeof(*peer));
  if (l->conns == NULL || mine == NULL || peer == NULL)
    goto out;

  snprintf(mine->magic, sizeof(mine->magic), "%s", HELLO_MAGIC);
  bench_opts_describe(o, mine->signature, sizeof(mine->signature));
  mine->nhandles = (uint32_t)n;
  for (i = 0; i < n; i++) {
    if (drv_listen(d, o->dev, mine->handles[i], &lc[i]) != ncclSuccess || lc[i] == NULL) {
      fprintf(stderr, "mcpnet-bench: listen on device %d failed\n", o->dev);
      goto out;
    }
  }
  if (l->has_ctl) {
    if (bench_xchg_swap(x, o, mine, peer, sizeof(*mine), o->timeout_s) != 0)
      goto out;
    if (strcmp(peer->magic, HELLO_MAGIC) != 0) {
      fprintf(stderr, "mcpnet-bench: the peer is not an mcpnet-bench of this version\n");
      goto out;
    }
    if (strcmp(peer->signature, mine->signature) != 0 || peer->nhandles != mine->nhandles) {
      fprintf(stderr,
              "mcpnet-bench: the two roles were started with different options:\n  this side: %s\n"
              "  peer:      %s\n",
              mine->signature, peer->signature);
      goto out;
    }
  } else {
    memcpy(peer, mine, sizeof(*mine));
  }
  for (i = 0; i < n; i++) {
    struct bench_conn *c = i < l->nconns ? &l->conns[i] : &l->ctl;
    /* Both call orders happen in NCCL; alternate them as the conformance suite does. */
    if (drv_connect_pair(d, o->dev, peer->handles[i], lc[i], &c->sc, &c->rc, CONNECT_TIMEOUT, i % 2) != 0) {
      fprintf(stderr, "mcpnet-bench: connection %d of %d did not come up\n", i, n);
      goto out;
    }
  }
  if (x != NULL)
    bench_xchg_tidy(x);
  for (i = 0; i < l->nconns; i++)
    if (conn_buffers(l, &l->conns[i], ring_bytes, i) != 0)
      goto out;
  if (l->has_ctl && conn_buffers(l, &l->ctl, CTL_BUF, -1) != 0)
    goto out;
  l->ctl_sbuf = l->ctl.sbuf;
  l->ctl_rbuf = l->ctl.rbuf;
  rc = 0;
out:
  for (i = 0; i < n; i++)
    if (lc[i] != NULL)
      drv_close_listen(d, lc[i]);
  free(mine);
  free(peer);
  return rc;
}

void bench_link_close(struct bench_link *l)
{
  int i;

  for (i = 0; l->conns != NULL && i < l->nconns; i++)
    conn_free(l, &l->conns[i]);
  if (l->has_ctl)
    conn_free(l, &l->ctl);
  free(l->conns);
  l->conns = NULL;
}

static int ctl_wait(struct bench_link *l, void *req, int *size, int timeout_s, const char *what)
{
  double deadline = drv_now() + timeout_s;
  int done = 0;

  while (!done) {
    if (drv_test(l->d, req, &done, size) != ncclSuccess) {
      fprintf(stderr, "mcpnet-bench: control %s failed in test\n", what);
      return -1;
    }
    if (!done && drv_now() > deadline) {
      fprintf(stderr, "mcpnet-bench: control %s did not complete within %d s (peer gone?)\n", what,
              timeout_s);
      return -1;
    }
    if (!done)
      sched_yield(); /* the control channel waits; the CPU is better used elsewhere */
  }
  return 0;
}

int bench_ctl_send(struct bench_link *l, struct bench_ctl_msg *m, int timeout_s)
{
  double deadline = drv_now() + timeout_s;
  void *req = NULL;

  m->magic = CTL_MAGIC;
  memcpy(l->ctl_sbuf, m, sizeof(*m));
  while (req == NULL) {
    if (drv_isend(l->d, l->ctl.sc, l->ctl_sbuf, sizeof(*m), 0, l->ctl.smh, &req) != ncclSuccess) {
      fprintf(stderr, "mcpnet-bench: control isend failed\n");
      return -1;
    }
    if (req == NULL && drv_now() > deadline) {
      fprintf(stderr, "mcpnet-bench: the peer posted no control receive within %d s (peer gone?)\n",
              timeout_s);
      return -1;
    }
    if (req == NULL)
      sched_yield();
  }
  return ctl_wait(l, req, NULL, timeout_s, "send");
}

int bench_ctl_recv(struct bench_link *l, struct bench_ctl_msg *m, int timeout_s)
{
  double deadline = drv_now() + timeout_s;
  size_t cap = CTL_BUF;
  int tag = 0, got = -1;
  void *req = NULL, *buf = l->ctl_rbuf;

  while (req == NULL) {
    if (drv_irecv(l->d, l->ctl.rc, 1, &buf, &cap, &tag, &l->ctl.rmh, &req) != ncclSuccess) {
      fprintf(stderr, "mcpnet-bench: control irecv failed\n");
      return -1;
    }
    if (req == NULL && drv_now() > deadline) {
      fprintf(stderr, "mcpnet-bench: could not post a control receive within %d s\n", timeout_s);
      return -1;
    }
    if (req == NULL)
      sched_yield();
  }
  if (ctl_wait(l, req, &got, timeout_s, "receive") != 0)
    return -1;
  memcpy(m, l->ctl_rbuf, sizeof(*m));
  if (got != (int)sizeof(*m) || m->magic != CTL_MAGIC) {
    fprintf(stderr, "mcpnet-bench: malformed control message (%d bytes)\n", got);
    return -1;
  }
  return 0;
}
