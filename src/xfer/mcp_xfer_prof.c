/*
 * mcp_xfer_prof.c - NCCL's profiler events for the work requests mcpnet posts.
 *
 * NCCL (net API v10 on) hands init a callback and isend/irecv a parent handle per
 * request: its proxy step, under which a profiler plugin that asked for net events
 * (ncclProfileNetPlugin) records what the network did. NCCL's IB transport starts one
 * event per work request it posts and stops it at the completion, with its descriptor
 * (plugin id NCCL_PROFILER_NET_TYPE_IB | 1, type ncclProfileQp: device, wr_id, opcode,
 * QP number, length), so NCCL's example profiler decodes ours unchanged.
 *
 * NCCL's proxy gives a parent handle with every call, whether a profiler wants the events
 * or not; the callback then does nothing and leaves the event handle NULL. So each comm
 * watches what the callback does: PROF_PROBES starts in a row that no profiler took make
 * it stop asking (its calls then go the plain way: net tests the mode), and its liveness
 * check lets it ask again every 10 s, since a profiler may turn its events on later. A
 * call without a parent handle, or on a comm with no callback, never comes here.
 *
 * The events are started from notes of what the call posted (mcp_xfer_*_notes), after
 * it posted them, so the posting code has no profiler in it; they stop when NCCL's test
 * finds the request done or failed, or when the comm closes with it outstanding. The
 * clear-to-send write's event stops when its receive completes (the data's arrival is
 * what proves it landed: most are unsignalled).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "xfer/comm.h"

/* NCCL's descriptor of a QP event (net_ib_v1.h), written from its fields: a type byte,
 * then the event's fields aligned as a struct of an int, a u64, two ints and a size_t. */
struct prof_qp_descr {
  uint8_t type; /* 1: ncclProfileQp */
  struct {
    int device; /* the member of the fused device (NCCL: the merged device's index) */
    uint64_t wr_id;
    int opcode;
    int qp_num;
    size_t length;
  } qp;
};
_Static_assert(offsetof(struct prof_qp_descr, qp.device) == 8 &&
                 offsetof(struct prof_qp_descr, qp.wr_id) == 16 &&
                 offsetof(struct prof_qp_descr, qp.opcode) == 24 &&
                 offsetof(struct prof_qp_descr, qp.qp_num) == 28 &&
                 offsetof(struct prof_qp_descr, qp.length) == 32 && sizeof(struct prof_qp_descr) == 40,
               "the layout of NCCL's ncclProfilerNetIbDescr_v1_t on LP64");

#define PROF_PLUGIN_ID ((1 << 16) | 1) /* NCCL_PROFILER_NET_TYPE_IB | NCCL_PROFILER_NET_IB_VER */
#define PROF_EVENT_START 0             /* ncclProfilerNetEventStart */
#define PROF_EVENT_STOP 1              /* ncclProfilerNetEventStop */
#define PROF_TYPE_QP 1                 /* ncclProfileQp */

/* A comm's mode (enum mcp_prof_mode): PROBING until a start is taken (ON) or PROF_PROBES
 * in a row are not (OFF, asked again PROF_RETRY_NS later). */
#define PROF_PROBES 16
#define PROF_RETRY_NS 10000000000ull

static ncclProfilerCallback_t prof_fn;

void mcp_xfer_prof_set(ncclProfilerCallback_t fn) { prof_fn = fn; }

void mcp_xfer_prof_init(struct mcp_comm *c)
{
  c->prof_mode = prof_fn != NULL ? MCP_PROF_PROBING : MCP_PROF_OFF;
}

void mcp_xfer_prof_tick(struct mcp_comm *c, uint64_t now_ns)
{
  if (c->prof_mode != MCP_PROF_OFF || prof_fn == NULL)
    return;
  if (c->prof_retry_ns == 0) {
    c->prof_retry_ns = now_ns + PROF_RETRY_NS;
  } else if (now_ns >= c->prof_retry_ns) {
    c->prof_retry_ns = 0;
    c->prof_count = 0;
    c->prof_mode = MCP_PROF_PROBING; /* a profiler may have turned net events on since */
  }
}

/* Whether this call should start events: a callback, a parent and a profiler that takes
 * them (or might). */
static int prof_wanted(struct mcp_comm *c, const void *parent)
{
  return prof_fn != NULL && parent != NULL && c->prof_mode != MCP_PROF_OFF;
}

/* The comm's wrapper of request r; the wrappers are made with the first. */
static struct mcp_prof_req *prof_req_of(struct mcp_comm *c, struct mcp_request *r)
{
  struct mcp_prof_req *p;
  int i;

  if (c->prof_reqs == NULL) {
    c->prof_reqs = calloc((size_t)c->nreqs, sizeof(*c->prof_reqs));
    if (c->prof_reqs == NULL)
      return NULL; /* the work goes on unprofiled */
    for (i = 0; i < c->nreqs; i++) {
      c->prof_reqs[i].head.kind = MCP_REQ_PROF;
      c->prof_reqs[i].head.comm = c;
      c->prof_reqs[i].head.index = (uint16_t)i;
    }
  }
  p = &c->prof_reqs[r->index];
  p->inner = r;
  p->nev = 0;
  return p;
}

/* Starts the events of what the call posted; a start no profiler took is no event. */
static void prof_start(struct mcp_comm *c, struct mcp_prof_req *p, void *parent, const struct mcp_wr_note *w,
                       int n)
{
  int i;

  for (i = 0; i < n && p->nev < MCP_PROF_EVENTS; i++) {
    struct prof_qp_descr d;
    void *h = NULL;

    memset(&d, 0, sizeof(d));
    d.type = PROF_TYPE_QP;
    d.qp.device = w[i].member;
    d.qp.wr_id = w[i].wr_id;
    d.qp.opcode = w[i].opcode;
    d.qp.qp_num = (int)w[i].qp_num;
    d.qp.length = w[i].length;
    prof_fn(&h, PROF_EVENT_START, parent, PROF_PLUGIN_ID, &d);
    if (h != NULL) {
      p->ev[p->nev++] = h;
      c->prof_mode = MCP_PROF_ON;
    } else if (c->prof_mode == MCP_PROF_PROBING && ++c->prof_count >= PROF_PROBES) {
      c->prof_mode = MCP_PROF_OFF;
      c->prof_count = 0;
    }
  }
}

static void prof_stop(struct mcp_prof_req *p)
{
  int i;

  for (i = 0; i < p->nev; i++)
    prof_fn(&p->ev[i], PROF_EVENT_STOP, NULL, 0, NULL);
  p->nev = 0;
}

/* What NCCL holds for r: its wrapper when events were started, else r itself. */
static void *prof_hand(struct mcp_prof_req *p, struct mcp_request *r)
{
  if (p->nev == 0) {
    p->inner = NULL;
    return r;
  }
  return p;
}

int mcp_xfer_isend_prof(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                        void **request)
{
  struct mcp_comm *c = send_comm;
  struct mcp_wr_note w[MCP_PROF_EVENTS];
  struct mcp_prof_req *p;
  struct mcp_request *r;
  uint32_t seq = c->seq;
  int rc, n;

  rc = mcp_xfer_isend(send_comm, data, size, tag, mhandle, request);
  if (rc != 0 || *request == NULL || !prof_wanted(c, phandle))
    return rc;
  r = *request;
  if ((p = prof_req_of(c, r)) == NULL)
    return 0;
  p->parent = phandle;
  n = mcp_xfer_send_notes(c, r, seq == r->seq && c->seq == r->seq + 1, w, MCP_PROF_EVENTS);
  prof_start(c, p, phandle, w, n);
  *request = prof_hand(p, r);
  return 0;
}

int mcp_xfer_irecv_prof(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                        void **phandles, void **request)
{
  struct mcp_comm *c = recv_comm;
  struct mcp_wr_note w[MCP_PROF_EVENTS];
  struct mcp_prof_req *p;
  struct mcp_request *r;
  void *parent = phandles != NULL ? phandles[0] : NULL;
  int rc, nw;

  rc = mcp_xfer_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
  if (rc != 0 || *request == NULL || !prof_wanted(c, parent))
    return rc;
  r = *request;
  if ((p = prof_req_of(c, r)) == NULL)
    return 0;
  p->parent = parent;
  p->key = data[0];
  nw = mcp_xfer_recv_notes(c, r, w, MCP_PROF_EVENTS);
  prof_start(c, p, parent, w, nw);
  *request = prof_hand(p, r);
  return 0;
}

void mcp_xfer_prof_flush(struct mcp_comm *c, struct mcp_request *r, const void *data0, void **request)
{
  struct mcp_wr_note w[MCP_PROF_EVENTS];
  struct mcp_prof_req *p;
  void *parent = c->prof_flush_parent;
  int n;

  /* NCCL flushes a receive right after its test found it done, with its buffers. */
  c->prof_flush_parent = NULL;
  if (data0 != c->prof_flush_key || !prof_wanted(c, parent) || (p = prof_req_of(c, r)) == NULL)
    return;
  p->parent = parent;
  n = mcp_xfer_flush_notes(c, r, w, MCP_PROF_EVENTS);
  prof_start(c, p, parent, w, n);
  *request = prof_hand(p, r);
}

int mcp_xfer_prof_test(struct mcp_request *wrapper, int *done, int *sizes)
{
  struct mcp_prof_req *p = (struct mcp_prof_req *)(void *)wrapper;
  struct mcp_request *r = p->inner;
  struct mcp_comm *c = r->comm;
  int rc, kind = r->kind;

  rc = mcp_xfer_test(r, done, sizes);
  if (rc == 0 && !*done)
    return 0;
  prof_stop(p);
  p->inner = NULL;
  if (rc == 0 && kind == MCP_REQ_RECV) {
    c->prof_flush_parent = p->parent; /* for the flush NCCL may post next */
    c->prof_flush_key = p->key;
  }
  return rc;
}

void mcp_xfer_prof_release(struct mcp_comm *c)
{
  int i;

  for (i = 0; c->prof_reqs != NULL && i < c->nreqs; i++)
    if (c->prof_reqs[i].inner != NULL)
      prof_stop(&c->prof_reqs[i]); /* NCCL never tested it again: its events end with the comm */
  free(c->prof_reqs);
  c->prof_reqs = NULL;
}
