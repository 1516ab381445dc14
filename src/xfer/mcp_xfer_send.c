/*
 * mcp_xfer_send.c - isend: wait for the receiver's clear-to-send, then RDMA-write.
 *
 * The sender never sends unsolicited data: until the CTS entry for the next sequence
 * number is in its ring, isend returns a NULL request and NCCL calls again. A single
 * receive is written with WRITE_WITH_IMM, striped over the connection's QPs when the
 * message is large; a grouped receive is written element by element on one QP and
 * closed by a write of its sizes record with the immediate. No allocation, no lock,
 * no log on this path unless something is wrong.
 *
 * Matching follows NCCL's own IB transport: a send looks only at the head receive (the
 * oldest advertised, single or grouped) and takes a free element with its tag there.
 * Under PXN several local ranks share this comm, each with its own tag and its own
 * pace, so a tag's next step can come before another tag's current one: that send gets
 * a NULL request and NCCL calls again; it never looks ahead to a later receive.
 * Data is inlined (a CPU copy in the provider) only from host-memory registrations:
 * GPU memory (NCCL_PTR_CUDA, DMA-BUF) is never touched by the CPU. A small message from
 * host memory to a receive advertised for it lands instead (struct mcp_landing): one
 * inline write into the receiver's record ring, done, like every send, when its
 * completion says the receiver's adapter acknowledged it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "xfer/comm.h"

static uint32_t load_seq(const struct mcp_cts_elem *e) { return __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE); }

/* Kept out of line: the message is built only when a post failed. */
static __attribute__((noinline, cold)) int post_failed(struct mcp_comm *c, int qp, int rc)
{
  mcp_comm_fail(&c->link, MCP_ERR_SYSTEM, "%s: ibv_post_send on QP %#x toward %s failed: %s",
                mcp_link_dev_of(&c->link, qp)->dc->info->name, c->link.qp[qp]->qp_num, c->link.peer_name,
                strerror(rc));
  return rc > 0 ? -rc : MCP_ERR_SYSTEM; /* verbs returns the errno */
}

static inline int post(struct mcp_comm *c, int qp, struct ibv_send_wr *wr)
{
  struct ibv_send_wr *bad;
  int rc = ibv_post_send(c->link.qp[qp], wr, &bad);

  return __builtin_expect(rc == 0, 1) ? 0 : post_failed(c, qp, rc);
}

/* The rkey of element idx (e) for what QP qp writes: the key of the receiver's member the
 * QP lands on (each member is its own protection domain); member 0's is in the element,
 * the others in the rkey table a fused receiver wrote next to the entry. The table is
 * indexed by the element's place in the entry, which this side knows, never by the idx
 * the peer wrote into the element (a peer's 255 would read past the ring). */
static uint32_t elem_rkey(const struct mcp_comm *c, const struct mcp_cts_elem *e, int idx, uint32_t seq,
                          int qp)
{
  int rm = mcp_link_remote_dev(&c->link, qp);

  if (rm == 0)
    return e->rkey;
  return mcp_cts_rkeys_of(c->ring, c->cts_rkeys_n, (int)(seq % MCP_SLOTS))[idx * c->cts_rkeys_n + rm];
}

/* A data write on QP qp: our key of the member the QP is on, theirs of the member it reaches. */
static void wr_fill(struct mcp_comm *c, struct ibv_send_wr *wr, struct ibv_sge *sge, void *addr, size_t len,
                    const void *mh, int qp, uint64_t raddr, uint32_t rkey)
{
  memset(wr, 0, sizeof(*wr));
  wr->wr.rdma.remote_addr = raddr;
  wr->wr.rdma.rkey = rkey;
  if (len == 0)
    return;
  sge->addr = (uintptr_t)addr;
  sge->length = (uint32_t)len;
  sge->lkey = mcp_mh_lkey(mh, mcp_link_dev_index(&c->link, qp));
  wr->sg_list = sge;
  wr->num_sge = 1;
  if ((int)len <= c->data_inline && mcp_mh_cpu_readable(mh))
    wr->send_flags = IBV_SEND_INLINE;
}

/* A single receive in one write (no striping): the common case of small messages, with
 * only the fields an RDMA write reads set (no memset of the work request). Same wire
 * and wr_id as the striped loop with k = 1. */
static inline __attribute__((always_inline)) int send_one(struct mcp_comm *c, struct mcp_request *r,
                                                          void *data, size_t size, const void *mh,
                                                          const struct mcp_cts_elem *e, int qp)
{
  struct ibv_send_wr wr;
  struct ibv_sge sge;

  r->pending = 1;
  wr.wr_id = mcp_link_wr(&c->link, MCP_WR_SEND, r->index);
  wr.next = NULL;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(MCP_IMM(r->seq, 1, 0));
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = e->addr;
  wr.wr.rdma.rkey = c->link.remote_ndevs > 1 ? elem_rkey(c, e, 0, r->seq, qp) : e->rkey;
  wr.qp_type.xrc.remote_srqn = 0;
  wr.sg_list = NULL;
  wr.num_sge = 0;
  if (size > 0) {
    int k = c->link.ndevs > 1 ? mcp_link_dev_index(&c->link, qp) : 0;

    sge.lkey = mcp_mh_lkey(mh, k);
    sge.addr = (uintptr_t)data;
    sge.length = (uint32_t)size;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    /* Inline is a CPU copy: host memory only, never GPU memory or DMA-BUF. */
    if ((int)size <= c->data_inline && mcp_mh_cpu_readable(mh))
      wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  }
  return post(c, qp, &wr);
}

/* Whether a single receive's message lands (struct mcp_landing): small, from host memory,
 * into a receive advertised for it. isend decides with it, and a recovery's replay again
 * with the same answer: the element stays in the ring until the slot's next message, and
 * land_max is set once, at link_up. */
static inline int lands(const struct mcp_comm *c, const struct mcp_cts_elem *e, size_t size, const void *mh)
{
  return (int)size <= c->land_max && (e->flags & MCP_CTS_LAND) && (size == 0 || mcp_mh_cpu_readable(mh));
}

/* Posts request r's landing line of slot (already in c->records, ending at the
 * trailer): its size bytes and the trailer, inline, signalled on QP 0, with the request
 * in wr_id as any send's write. */
static inline int post_land(struct mcp_comm *c, const struct mcp_request *r, int slot)
{
  struct ibv_send_wr wr;
  struct ibv_sge sge;
  uint64_t off = (uint64_t)slot * sizeof(struct mcp_record) + MCP_LAND_TRAILER - (uint32_t)r->size;

  sge.addr = (uintptr_t)c->records + off;
  sge.length = (uint32_t)r->size + 8;
  sge.lkey = c->records_mr->lkey;
  wr.wr_id = mcp_link_wr(&c->link, MCP_WR_SEND, r->index);
  wr.next = NULL;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.imm_data = 0;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  wr.qp_type.xrc.remote_srqn = 0;
  wr.wr.rdma.remote_addr = c->remote_ring + off;
  wr.wr.rdma.rkey = c->remote_rkey;
  return post(c, 0, &wr);
}

/* A landing (struct mcp_landing): the message into this comm's copy of the slot's line,
 * then one inline write of it. The copy stays until the slot's next message, which the
 * receiver advertises only once it has this one: a recovery writes it again from there. */
static inline __attribute__((always_inline)) int isend_land(struct mcp_comm *c, struct mcp_request *r,
                                                            int slot)
{
  struct mcp_landing *ld = mcp_landing_of(c->records, slot);

  r->pending = 1;
  if (r->size > 0)
    memcpy(ld->data + MCP_LAND_TRAILER - r->size, r->data, (size_t)r->size);
  ld->size = (uint32_t)r->size;
  ld->seq = r->seq;
  return post_land(c, r, slot);
}

/* How a single receive's message of size bytes for seq goes out on more than one QP:
 * from QP *base on, in k chunks of *chunk bytes (the last one shorter); k = 1: whole,
 * on *base. Shared by the post and by the profiler's account of it (stripe_notes). */
static int stripe_plan(const struct mcp_comm *c, uint32_t seq, size_t size, int *base, size_t *chunk)
{
  int k;

  *base = (int)(seq % (uint32_t)c->link.nqps);
  *chunk = size;
  if (size < 2 * MCP_STRIPE_MIN)
    return 1;
  k = (int)(size / MCP_STRIPE_MIN) < c->link.nqps ? (int)(size / MCP_STRIPE_MIN) : c->link.nqps;
  *chunk = ((size + (size_t)k - 1) / (size_t)k + 127) & ~(size_t)127;
  return (int)((size + *chunk - 1) / *chunk);
}

/* A single receive: K chunks on K QPs, each a signalled WRITE_WITH_IMM. */
static int send_single(struct mcp_comm *c, struct mcp_request *r, void *data, size_t size, const void *mh,
                       const struct mcp_cts_elem *e)
{
  size_t chunk, off = 0;
  int k, j, base, rc;

  if (c->link.nqps == 1)
    return send_one(c, r, data, size, mh, e, 0);
  k = stripe_plan(c, r->seq, size, &base, &chunk);
  if (k == 1)
    return send_one(c, r, data, size, mh, e, base);
  r->pending = k;
  for (j = 0; j < k; j++) {
    size_t len = size - off < chunk ? size - off : chunk;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    int qp = (base + j) % c->link.nqps;

    wr_fill(c, &wr, &sge, (char *)data + off, len, mh, qp, e->addr + off, elem_rkey(c, e, 0, r->seq, qp));
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(MCP_IMM(r->seq, k, 0));
    wr.send_flags |= IBV_SEND_SIGNALED;
    wr.wr_id = mcp_link_wr(&c->link, MCP_WR_SEND, r->index);
    if ((rc = post(c, qp, &wr)) != 0)
      return rc;
    off += len;
  }
  return 0;
}

/* One element of a grouped receive: an unsignalled write on the group's QP. */
static int send_group_part(struct mcp_comm *c, struct mcp_request *r, void *data, size_t size, const void *mh,
                           const struct mcp_cts_elem *e)
{
  struct ibv_send_wr wr;
  struct ibv_sge sge;
  int qp = (int)(r->seq % (uint32_t)c->link.nqps);

  if (size == 0)
    return 0;
  wr_fill(c, &wr, &sge, data, size, mh, qp, e->addr, elem_rkey(c, e, r->elem, r->seq, qp));
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr_id = mcp_link_wr(&c->link, MCP_WR_SEND, r->index);
  return post(c, qp, &wr);
}

/* The group is complete: write the sizes record with the immediate, signalled; its
 * completion completes every request of the group (chained through group_next). */
static int send_group_final(struct mcp_comm *c, struct mcp_send_slot *ss, int slot)
{
  struct mcp_record *rec = &c->records[slot];
  struct ibv_send_wr wr;
  struct ibv_sge sge;
  int i, qp = (int)(ss->seq % (uint32_t)c->link.nqps);

  memset(rec, 0, sizeof(*rec));
  rec->seq = ss->seq;
  rec->n = (uint32_t)ss->n;
  for (i = 0; i < ss->n; i++) {
    rec->sizes[i] = (uint32_t)ss->reqs[i]->size;
    ss->reqs[i]->group_next = i + 1 < ss->n ? (int16_t)ss->reqs[i + 1]->index : -1;
    ss->reqs[i]->pending = 1;
  }
  memset(&wr, 0, sizeof(wr));
  sge.addr = (uintptr_t)rec;
  sge.length = sizeof(*rec);
  sge.lkey = c->records_mrs[mcp_link_dev_index(&c->link, qp)]->lkey;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(MCP_IMM(ss->seq, 1, 1));
  wr.send_flags = IBV_SEND_SIGNALED | (c->link.max_inline >= (int)sizeof(*rec) ? IBV_SEND_INLINE : 0);
  wr.wr.rdma.remote_addr = c->remote_ring + (uint64_t)slot * sizeof(struct mcp_record);
  wr.wr.rdma.rkey = c->remote_rkeys[mcp_link_remote_dev(&c->link, qp)];
  wr.wr_id = mcp_link_wr(&c->link, MCP_WR_GROUP, ss->reqs[0]->index);
  return post(c, qp, &wr);
}

/* The failures isend finds in what it was given, out of line (the success path keeps
 * its registers). */
static __attribute__((noinline, cold)) int isend_corrupt(struct mcp_comm *c, int n, uint32_t seq)
{
  mcp_comm_fail(&c->link, MCP_ERR_REMOTE, "send to %s: corrupt clear-to-send entry (n=%d) for seq %u",
                c->link.peer_name, n, seq);
  return MCP_ERR_REMOTE;
}

/* An element whose idx is not its place in the entry: the receiver wrote something else
 * than a clear-to-send (the index would have chosen a member's rkey). */
static __attribute__((noinline, cold)) int isend_bad_index(struct mcp_comm *c, int at, int idx, uint32_t seq)
{
  mcp_comm_fail(&c->link, MCP_ERR_REMOTE,
                "send to %s: corrupt clear-to-send entry for seq %u: element %d says it is element %d "
                "(protocol error)",
                c->link.peer_name, seq, at, idx);
  return MCP_ERR_REMOTE;
}

static __attribute__((noinline, cold)) int isend_too_big(struct mcp_comm *c, size_t size, uint64_t room,
                                                         uint32_t seq, int tag)
{
  mcp_comm_fail(&c->link, MCP_ERR_USAGE,
                "send of %zu bytes to %s is larger than the posted receive "
                "buffer of %llu bytes (seq %u, tag %d)",
                size, c->link.peer_name, (unsigned long long)room, seq, tag);
  return MCP_ERR_USAGE;
}

static __attribute__((noinline, cold)) int isend_no_handle(struct mcp_comm *c, size_t size)
{
  mcp_comm_fail(&c->link, MCP_ERR_ARG, "send of %zu bytes to %s without a memory handle", size,
                c->link.peer_name);
  return MCP_ERR_ARG;
}

/* Not yet: the head receive has no free buffer for this tag (PXN ranks out of step).
 * Remembered for the watchdog, which names who waits for whom if it lasts. */
static __attribute__((noinline)) int isend_refused(struct mcp_comm *c, int tag, uint32_t seq)
{
  c->tag_refused = tag;
  c->tag_refused_seq = seq;
  return mcp_xfer_not_yet(c);
}

/* A request for element elem of message seq's n receives; NULL when every one is out. */
static inline __attribute__((always_inline)) struct mcp_request *
send_req(struct mcp_comm *c, uint32_t seq, size_t size, int n, int elem, void *data, void *mhandle)
{
  struct mcp_request *r = mcp_req_get(c);

  if (r != NULL) {
    r->kind = MCP_REQ_SEND;
    r->seq = seq;
    r->size = (int)size;
    r->n = n;
    r->elem = (uint8_t)elem;
    r->data = data;
    r->mh = mhandle;
  }
  return r;
}

int mcp_xfer_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request)
{
  struct mcp_comm *c = send_comm;
  uint32_t seq = c->seq;
  int slot = (int)(seq % MCP_SLOTS);
  const struct mcp_cts_elem *e = c->ring_elems[slot].e;
  struct mcp_send_slot *ss;
  struct mcp_request *r;
  int n, i, rc;

  *request = NULL;
  if ((rc = mcp_xfer_gate(c, MCP_GATE_POST)) != MCP_GATE_OPEN)
    return rc;
  if (load_seq(&e[0]) != seq)
    return mcp_xfer_not_yet(c);
  n = e[0].n;
  if (n == 1) {
    /* A fused receiver's element indexes its rkey table. */
    if (c->link.remote_ndevs > 1 && e[0].idx != 0)
      return isend_bad_index(c, 0, e[0].idx, seq);
    /* A single receive (every small message): its one element, no per-slot matching
     * state, straight to the write. */
    if (e[0].tag != tag)
      return isend_refused(c, tag, seq);
    if (size > e[0].size)
      return isend_too_big(c, size, e[0].size, seq, tag);
    if (size > 0 && mhandle == NULL)
      return isend_no_handle(c, size);
    /* Every request is out (MCP_SEND_REQS): not yet, as for a clear-to-send still on its
     * way; nothing above changed state that a later call would not set up the same way. */
    r = send_req(c, seq, size, 1, 0, data, mhandle);
    if (r == NULL)
      return mcp_xfer_not_yet(c);
    /* Host memory to host memory and small: a landing. Else on one QP the one-write
     * path straight from here (no call); on more, striping decides. */
    if (lands(c, &e[0], size, mhandle))
      rc = isend_land(c, r, slot);
    else if (c->link.nqps == 1)
      rc = send_one(c, r, data, size, mhandle, &e[0], 0);
    else
      rc = send_single(c, r, data, size, mhandle, &e[0]);
    if (rc != 0)
      return c->link.error;
    c->seq = seq + 1;
    c->wd_progress++;
    mcp_status_posted(c->cnt);
    *request = r;
    return 0;
  }
  if (n < 1 || n > MCP_MAX_RECVS)
    return isend_corrupt(c, n, seq);
  for (i = 1; i < n; i++)
    if (load_seq(&e[i]) != seq)
      return 0; /* the entry is still arriving */
  for (i = 0; i < n; i++)
    if (e[i].idx != i || e[i].n != n)
      return e[i].idx != i ? isend_bad_index(c, i, e[i].idx, seq) : isend_corrupt(c, e[i].n, seq);
  ss = &c->sslots[slot];
  if (ss->seq != seq) {
    memset(ss, 0, sizeof(*ss));
    ss->seq = seq;
    ss->n = n;
  }
  for (i = 0; i < n; i++)
    if (!ss->used[i] && e[i].tag == tag)
      break;
  if (i == n)
    return isend_refused(c, tag, seq);
  if (size > e[i].size)
    return isend_too_big(c, size, e[i].size, seq, tag);
  if (size > 0 && mhandle == NULL)
    return isend_no_handle(c, size);
  r = send_req(c, seq, size, n, i, data, mhandle);
  if (r == NULL)
    return mcp_xfer_not_yet(c);
  if (send_group_part(c, r, data, size, mhandle, &e[i]) != 0)
    return c->link.error;
  ss->used[i] = 1;
  ss->reqs[i] = r;
  r->pending = 1;
  if (++ss->matched == n) {
    if (send_group_final(c, ss, slot) != 0)
      return c->link.error;
    c->seq = seq + 1;
  }
  c->wd_progress++;
  mcp_status_posted(c->cnt);
  *request = r;
  return 0;
}

int mcp_xfer_send_notes(const struct mcp_comm *c, const struct mcp_request *r, int finished,
                        struct mcp_wr_note *w, int max)
{
  const struct mcp_link *l = &c->link;
  int slot = (int)(r->seq % MCP_SLOTS), qp = (int)(r->seq % (uint32_t)l->nqps), n = 0, k = 1, j;
  uint64_t wr_id = mcp_link_wr(l, MCP_WR_SEND, r->index);
  size_t size = (size_t)r->size, chunk = size;

  if (r->n == 1) {
    if (lands(c, &c->ring_elems[slot].e[0], size, r->mh))
      return max > 0 ? mcp_wr_note_on(w, l, 0, wr_id, IBV_WR_RDMA_WRITE, size + 8) : 0;
    if (l->nqps == 1)
      qp = 0;
    else
      k = stripe_plan(c, r->seq, size, &qp, &chunk);
    for (j = 0; j < k && n < max; j++)
      n += mcp_wr_note_on(&w[n], l, (qp + j) % l->nqps, wr_id, IBV_WR_RDMA_WRITE_WITH_IMM,
                          j + 1 < k ? chunk : size - (size_t)j * chunk);
    return n;
  }
  if (size > 0 && n < max)
    n += mcp_wr_note_on(&w[n], l, qp, wr_id, IBV_WR_RDMA_WRITE, size);
  if (finished && n < max)
    n += mcp_wr_note_on(&w[n], l, qp, mcp_link_wr(l, MCP_WR_GROUP, c->sslots[slot].reqs[0]->index),
                        IBV_WR_RDMA_WRITE_WITH_IMM, sizeof(struct mcp_record));
  return n;
}

/* A send's completion on the old QPs may have been lost although its data landed:
 * the receiver's table says (per slot, the last seq completed there). */
static int receiver_has(const uint32_t *done, uint32_t seq)
{
  return (int32_t)(done[seq % MCP_SLOTS] - seq) >= 0;
}

/* After recovery: complete what the receiver already has, write the rest again from
 * the CTS ring, which still holds the destination of every incomplete receive (a
 * landing from its line's copy). A group is written again whole (parts, then the
 * record when all parts are matched). */
int mcp_xfer_send_replay(struct mcp_comm *c, const uint32_t *done)
{
  int i, j, rc, replayed = 0, completed = 0;

  for (i = 0; i < c->nreqs; i++) {
    struct mcp_request *r = &c->reqs[i];
    const struct mcp_cts_slot *cs;
    struct mcp_send_slot *ss;
    int slot;

    if (!r->in_use || r->kind != MCP_REQ_SEND || r->done)
      continue;
    slot = (int)(r->seq % MCP_SLOTS);
    cs = &c->ring_elems[slot];
    ss = &c->sslots[slot];
    if (receiver_has(done, r->seq)) {
      r->pending = 0;
      r->done = 1;
      completed++;
      continue;
    }
    if (r->n == 1) {
      if ((rc = lands(c, &cs->e[0], (size_t)r->size, r->mh)
             ? post_land(c, r, slot)
             : send_single(c, r, r->data, (size_t)r->size, r->mh, &cs->e[0])) != 0)
        return rc;
      replayed++;
      continue;
    }
    for (j = 0; j < ss->n && !ss->used[j]; j++)
      ;
    if (ss->seq != r->seq || j == ss->n || ss->reqs[j] != r)
      continue; /* a group is replayed once, from its first matched element */
    for (j = 0; j < ss->n; j++)
      if (ss->used[j] && ss->reqs[j] != NULL &&
          (rc = send_group_part(c, ss->reqs[j], ss->reqs[j]->data, (size_t)ss->reqs[j]->size, ss->reqs[j]->mh,
                                &cs->e[ss->reqs[j]->elem])) != 0)
        return rc;
    if (ss->matched == ss->n && (rc = send_group_final(c, ss, slot)) != 0)
      return rc;
    replayed++;
  }
  MCP_INFO(NCCL_NET,
           "send to %s: after recovery %d message(s) written again, %d completed by the "
           "receiver's table",
           c->link.peer_name, replayed, completed);
  return 0;
}
