/*
 * mcp_conn_qp.c - queue pairs of a comm: creation, the INIT/RTR/RTS walk with the
 * configured timeout, retries, MTU, SL/TC and P_Key index, and teardown; the setup
 * threads that walk, rebuild and look our GID up, whose GID answers the comms of a
 * device share.
 *
 * Errors name the device, port, GID index and both GIDs, the peer and the QP state that
 * failed, with what to try: a wrong GID index or an unreachable peer shows up here
 * first on RoCE.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "fabric/fabric_gid.h"
#include "conn/link.h"

#define QP_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

void mcp_comm_fail(struct mcp_link *c, int code, const char *fmt, ...)
{
  va_list ap;

  if (c->error != 0)
    return;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
  va_end(ap);
  c->error = code;
  mcp_link_status_failed(c);
  MCP_WARN("%s", c->errmsg);
  if (c->cfg.abort_on_error) {
    MCP_WARN("MCPNET_ABORT_ON_ERROR=1: aborting for a core dump");
    abort();
  }
}

uint16_t mcp_comm_next_id(void)
{
  static atomic_uint next;
  unsigned id;

  do
    id = atomic_fetch_add(&next, 1) + 1;
  while ((uint16_t)id == 0);
  return (uint16_t)id;
}

static uint32_t random_psn(void)
{
  uint32_t v = 0;

  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
    v = (uint32_t)time(NULL) ^ (uint32_t)clock();
  return v & 0xffffff;
}

int mcp_qp_create_all(struct mcp_link *c, int nqps, int sq_depth, int rq_depth)
{
  int k;

  /* Every member at setup (failover may leave some out later). */
  c->up = c->live = mcp_link_members_all(c->ndevs);
  c->remote_up = c->remote_live = mcp_link_members_all(c->remote_ndevs);
  mcp_link_place(c);
  /* Each member's CQ holds the completions of its own QPs: at most a queue's depth each.
   * A fused link's members have room for every QP of the link, which failover may move
   * to any of them. A receive comm's flush QP shares it (its reads are few: one per GPU
   * receive, and the clear-to-send writes are signalled one in 16), so the receive side
   * keeps 16 spare; a send comm needs none, and an entry past a power of two would
   * double rxe's CQ (issue 16). */
  for (k = 0; k < c->ndevs; k++) {
    struct mcp_link_dev *m = &c->devs[k];
    int mine = c->ndevs > 1 ? nqps : nqps / c->ndevs + (k < nqps % c->ndevs);
    int spare = c->kind == MCP_COMM_RECV ? 16 : 0;

    m->cq = mcp_ibv.create_cq(m->dc->ctx, mine * (sq_depth + rq_depth) + spare, c, NULL, 0);
    if (m->cq == NULL) {
      int rc = -errno;

      MCP_WARN("%s: ibv_create_cq failed: %s", m->dc->info->name, strerror(-rc));
      return rc;
    }
    m->sgid_index = m->dc->info->gid.index;
    m->port_up_seen = atomic_load(&m->dc->port_up_gen);
  }
  c->nqps = nqps;
  c->sq_depth = sq_depth;
  c->rq_depth = rq_depth;
  return mcp_qp_create_qps(c);
}

/* The comm's QPs, QP i on member dev[i]'s CQ, at INIT, with fresh PSNs, into qp[], psn[]
 * and *max_inline: at setup into the comm's own, in recovery into the rebuild job's on
 * its thread (it reads only what setup fixed: depths, inline size, members). */
static int create_qps(struct mcp_link *c, const uint8_t *dev, struct ibv_qp **qp, uint32_t *psn,
                      int *max_inline)
{
  int inline_try[3] = {256, 64, 0};
  int i, t, rc, sq_depth = c->sq_depth, rq_depth = c->rq_depth, nqps = c->nqps;

  if (c->inline_want > 0) {
    inline_try[0] = c->inline_want;
    inline_try[1] = c->inline_want < 64 ? 0 : 64;
  }
  for (i = 0; i < nqps; i++) {
    const struct mcp_link_dev *m = &c->devs[dev[i]];
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;

    for (t = 0; t < 3; t++) {
      memset(&init, 0, sizeof(init));
      init.qp_context = c; /* async events on this QP reach the comm */
      init.send_cq = m->cq;
      init.recv_cq = m->cq;
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = (uint32_t)sq_depth;
      init.cap.max_recv_wr = (uint32_t)rq_depth;
      init.cap.max_send_sge = 1;
      init.cap.max_recv_sge = 1;
      init.cap.max_inline_data = (uint32_t)inline_try[t];
      qp[i] = mcp_ibv.create_qp(m->dc->pd, &init);
      if (qp[i] != NULL)
        break;
    }
    if (qp[i] == NULL) {
      rc = -errno;
      MCP_WARN("%s: ibv_create_qp failed: %s (send queue %d, receive queue %d)", m->dc->info->name,
               strerror(-rc), sq_depth, rq_depth);
      return rc;
    }
    *max_inline = (int)init.cap.max_inline_data;
    psn[i] = random_psn();
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = (uint16_t)m->dc->info->pkey_index;
    attr.port_num = (uint8_t)m->dc->info->port;
    attr.qp_access_flags = QP_ACCESS;
    rc =
      mcp_ibv.modify_qp(qp[i], &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
      rc = rc > 0 ? -rc : -errno; /* libibverbs returns the errno; some providers set it too */
      MCP_WARN("%s port %d: QP %#x RESET->INIT failed: %s (P_Key 0x%04x at index %d)", m->dc->info->name,
               m->dc->info->port, qp[i]->qp_num, strerror(-rc), m->dc->info->pkey, m->dc->info->pkey_index);
      return rc;
    }
  }
  return 0;
}

int mcp_qp_create_qps(struct mcp_link *c) { return create_qps(c, c->qp_dev, c->qp, c->psn, &c->max_inline); }

static void fill_av(const struct mcp_link *c, const struct mcp_net_dev *d, int sgid_index,
                    struct ibv_ah_attr *ah, const uint8_t *dgid, uint16_t dlid)
{
  memset(ah, 0, sizeof(*ah));
  ah->port_num = (uint8_t)d->port;
  ah->sl = (uint8_t)c->sl;
  if (d->link_layer == IBV_LINK_LAYER_ETHERNET) {
    ah->is_global = 1;
    memcpy(ah->grh.dgid.raw, dgid, 16);
    ah->grh.sgid_index = (uint8_t)sgid_index; /* recovery may find the GID elsewhere */
    ah->grh.hop_limit = 255;
    ah->grh.traffic_class = (uint8_t)c->tc;
  } else {
    ah->dlid = dlid;
  }
}

/* Test hook: the wait between retries (NULL: nanosleep). */
static void (*retry_sleep_fn)(unsigned ms);

void mcp_qp_test_set_retry_sleep(void (*fn)(unsigned ms)) { retry_sleep_fn = fn; }

/* ibv_modify_qp, retried as NCCL 2.30 retries it (misc/ibvwrap.cc) when retry is set:
 * after ETIMEDOUT (the peer's neighbour not resolved yet), or any error with
 * NCCL_IB_MQP_RETRY_ALL, up to NCCL_IB_MQP_RETRY_CNT times, the k-th after k x
 * NCCL_IB_MQP_RETRY_SLEEP_MSEC. Only a setup thread's walk sets retry: it may sleep, NCCL's
 * thread may not. -errno (errno set too) on failure. */
static int modify_qp(const struct mcp_link *c, struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
                     int retry, const char *step)
{
  const struct mcp_link_cfg *cfg = &c->cfg;
  int max = retry ? cfg->ib_mqp_retry_cnt : 0, rc, e;

  for (int attempt = 1;; attempt++) {
    rc = mcp_ibv.modify_qp(qp, attr, mask);
    if (rc == 0)
      return 0;
    e = rc > 0 ? rc : errno; /* libibverbs returns the errno; some providers set it too */
    if (attempt > max || (e != ETIMEDOUT && !cfg->ib_mqp_retry_all)) {
      errno = e;
      return -e;
    }
    {
      unsigned ms = (unsigned)cfg->ib_mqp_retry_sleep_ms * (unsigned)attempt;

      MCP_INFO(NCCL_NET, "QP %#x %s toward %s failed: %s; retry %d/%d in %u ms (NCCL_IB_MQP_RETRY_*)",
               qp->qp_num, step, c->peer_name, strerror(e), attempt, max, ms);
      if (retry_sleep_fn != NULL) {
        retry_sleep_fn(ms);
      } else {
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
          ;
      }
    }
  }
}

/* RESET/INIT -> RTR -> RTS toward a destination QP, on the port of d (the QP's member).
 * The GID index is the caller's: a walk on a job's thread must not read a member's
 * sgid_index, which a later round rewrites. retry: a connection's first walk, on its
 * setup thread (modify_qp). */
static int qp_to_rts(const struct mcp_link *c, const struct mcp_net_dev *d, int sgid_index, struct ibv_qp *qp,
                     uint32_t my_psn, uint32_t dqpn, uint32_t dpsn, const uint8_t *dgid, uint16_t dlid,
                     int retry)
{
  const struct mcp_link_cfg *cfg = &c->cfg;
  struct ibv_qp_attr attr;
  char lgid[64], rgid[64];
  const char *step = "INIT->RTR";
  int rc;

  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = (enum ibv_mtu)c->mtu;
  attr.dest_qp_num = dqpn;
  attr.rq_psn = dpsn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = (uint8_t)cfg->min_rnr_timer;
  fill_av(c, d, sgid_index, &attr.ah_attr, dgid, dlid);
  rc = modify_qp(c, qp, &attr,
                 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                 retry, step);
  if (rc != 0)
    goto fail;
  step = "RTR->RTS";
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = (uint8_t)cfg->ib_timeout;
  attr.retry_cnt = (uint8_t)cfg->ib_retry_cnt;
  attr.rnr_retry = (uint8_t)cfg->rnr_retry;
  attr.sq_psn = my_psn;
  attr.max_rd_atomic = 1;
  rc = modify_qp(c, qp, &attr,
                 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                   IBV_QP_MAX_QP_RD_ATOMIC,
                 retry, step);
  if (rc != 0)
    goto fail;
  return 0;
fail:
  mcp_gid_format(d->gid.raw, lgid, sizeof(lgid));
  mcp_gid_format(dgid, rgid, sizeof(rgid));
  MCP_WARN("%s port %d: QP %#x %s toward QP %#x of %s failed: %s. Local GID %d %s, remote GID %s, "
           "MTU %d, SL %d, TC %d. %s",
           d->name, d->port, qp->qp_num, step, dqpn, c->peer_name, strerror(errno), sgid_index, lgid, rgid,
           mcp_fabric_mtu_bytes(c->mtu), c->sl, c->tc,
           errno == ETIMEDOUT ? "The peer's address did not resolve: is it reachable from this port's netdev?"
             : errno == EINVAL ? "Check NCCL_IB_GID_INDEX and the P_Key index."
                               : "");
  return rc;
}

int mcp_qp_to_rts_member(struct mcp_link *c, int k, struct ibv_qp *qp, uint32_t my_psn, uint32_t dqpn,
                         uint32_t dpsn, const uint8_t *dgid, uint16_t dlid)
{
  const struct mcp_link_dev *m = &c->devs[k];

  return qp_to_rts(c, m->dc->info, m->sgid_index, qp, my_psn, dqpn, dpsn, dgid, dlid, 0);
}

int mcp_qp_to_rts(struct mcp_link *c, struct ibv_qp *qp, uint32_t my_psn, uint32_t dqpn, uint32_t dpsn,
                  const uint8_t *dgid, uint16_t dlid)
{
  return mcp_qp_to_rts_member(c, 0, qp, my_psn, dqpn, dpsn, dgid, dlid);
}

uint8_t mcp_link_members_all(int ndevs)
{
  return ndevs >= 8 ? 0xff : (uint8_t)((1u << (ndevs > 1 ? ndevs : 1)) - 1u);
}

int mcp_link_member_of(uint8_t live, int ndevs, int qp)
{
  int nlive = 0, want, k;

  live &= mcp_link_members_all(ndevs);
  if (live == 0)
    live = mcp_link_members_all(ndevs);
  for (k = 0; k < ndevs; k++)
    nlive += (live >> k) & 1;
  want = qp % nlive;
  for (k = 0; k < ndevs; k++)
    if (((live >> k) & 1) && want-- == 0)
      return k;
  return 0;
}

void mcp_link_place(struct mcp_link *l)
{
  int i, ndevs = l->ndevs > 0 ? l->ndevs : 1, rdevs = l->remote_ndevs > 0 ? l->remote_ndevs : 1;

  for (i = 0; i < MCP_MAX_QPS; i++) {
    l->qp_dev[i] = (uint8_t)mcp_link_member_of(l->live, ndevs, i);
    l->qp_rdev[i] = (uint8_t)mcp_link_member_of(l->remote_live, rdevs, i);
  }
}

void mcp_link_masks(int ndevs, int rdevs, uint8_t up, uint8_t rup, uint8_t *live, uint8_t *rlive)
{
  uint8_t mine = up & mcp_link_members_all(ndevs), theirs = rup & mcp_link_members_all(rdevs);

  if (mine == 0)
    mine = mcp_link_members_all(ndevs);
  if (theirs == 0)
    theirs = mcp_link_members_all(rdevs);
  if (ndevs == rdevs && (mine & theirs) != 0)
    mine = theirs = mine & theirs;
  *live = mine;
  *rlive = theirs;
}

void mcp_link_set_remote_ndevs(struct mcp_link *l, int rdevs)
{
  l->remote_ndevs = rdevs > 1 ? rdevs : 1;
  l->remote_up = l->remote_live = mcp_link_members_all(l->remote_ndevs);
  mcp_link_place(l);
}

int mcp_link_qp_count(int qps_per_conn, int local_ndevs, int remote_ndevs)
{
  int n = qps_per_conn * (local_ndevs > remote_ndevs ? local_ndevs : remote_ndevs);

  return n > MCP_MAX_QPS ? MCP_MAX_QPS : n;
}

/* The peer's member k's address: member 0 is the endpoint's own fields. */
static void remote_member_addr(const struct mcp_wire_endpoint *ep, int k, const uint8_t **gid, uint16_t *lid)
{
  if (k == 0 || k >= ep->ndevs) {
    *gid = ep->gid;
    *lid = ep->lid;
  } else {
    *gid = ep->more[k - 1].gid;
    *lid = ep->more[k - 1].lid;
  }
}

struct mcp_qp_job {
  atomic_int state;   /* MCP_QP_THREAD_RUNNING, then _OK or _FAILED */
  atomic_int refs;    /* the comm's and the thread's */
  int abandoned;      /* set by the comm before it lets go: the QPs are the job's to destroy */
  struct mcp_link *c; /* referenced until the job is freed */
  int nqps, first;
  /* A recovery round's rebuild: destroy old_qp[], then create qp[] (the job's to destroy
   * until mcp_qp_rebuild_take hands them to the comm). */
  int rebuild, max_inline;
  struct ibv_qp *old_qp[MCP_MAX_QPS];
  int lookup;          /* look each member's GID up first (recovery): it may have moved */
  uint8_t gid_members; /* ... each of these members' (the live ones) */
  int ndevs;
  struct mcp_devctx *dc[MCP_LINK_MAX_DEVS];
  int sgid_index[MCP_LINK_MAX_DEVS];    /* each member's: when the job began, or as looked up */
  unsigned gid_need[MCP_LINK_MAX_DEVS]; /* the answer a lookup job waits for (mcp_qp_gid_need) */
  struct ibv_qp *qp[MCP_MAX_QPS];
  uint32_t psn[MCP_MAX_QPS], dqpn[MCP_MAX_QPS], dpsn[MCP_MAX_QPS];
  uint8_t dev[MCP_MAX_QPS], rdev[MCP_MAX_QPS]; /* QP i: our member, the peer's (link.h) */
  int remote_ndevs;
  uint8_t dgid[MCP_LINK_MAX_DEVS][16]; /* per remote member */
  uint16_t dlid[MCP_LINK_MAX_DEVS];
  /* A rebuild's failover: the link's masks when it began, and what the thread found. */
  uint8_t prev_up, remote_up, up, live;
};

static void comm_free(struct mcp_link *c);

static void comm_unref(struct mcp_link *c)
{
  if (atomic_fetch_sub(&c->refs, 1) == 0)
    comm_free(c);
}

/* The last of the comm and the thread frees the job; an abandoned job's QPs go first,
 * then the comm reference that kept their CQ alive. */
static void job_unref(struct mcp_qp_job *j)
{
  struct mcp_link *c = j->c;
  int i;

  if (atomic_fetch_sub(&j->refs, 1) != 1)
    return;
  if (j->abandoned || j->rebuild)
    for (i = 0; i < j->nqps; i++)
      if (j->qp[i] != NULL)
        mcp_ibv.destroy_qp(j->qp[i]);
  free(j);
  comm_unref(c);
}

/* Every member's port error counters when the comm connected, for a failed completion's
 * WARN (mcp_xfer_wc_diagnose compares with them). Read from sysfs, so off NCCL's thread;
 * on the heap, so a link pays for the snapshots of the members it has only. */
static void counters_base(struct mcp_link *c)
{
  int k;

  for (k = 0; k < c->ndevs; k++) {
    struct mcp_link_dev *m = &c->devs[k];
    const struct mcp_net_dev *d = m->dc->info;
    /* Read whole on this thread's stack (4.7 KB; a setup thread has megabytes) and kept
     * trimmed to the counters the port has (a few dozen of the 64 a snapshot holds:
     * ~1.5 KB per member and comm; mcp_cnt_diff reads only the first n): one allocation.
     * Not realloc of a whole one: shrinking leaves a 3 KB hole per comm in the setup
     * threads' arena that the next comm's whole snapshot does not fit. Read once, by the
     * first walk, before the comm can be diagnosed. */
    struct mcp_cnt_snapshot full, *kept = NULL;

    if (mcp_cnt_snapshot_read(mcp_verbs_sysfs_root(), d->ibdev, d->port, d->driver, &full) == 0) {
      size_t bytes = offsetof(struct mcp_cnt_snapshot, e) + (size_t)full.n * sizeof(full.e[0]);
      if ((kept = malloc(bytes)) != NULL)
        memcpy(kept, &full, bytes);
    }
    free(m->cnt_base);
    m->cnt_base = kept;
    m->cnt_base_ok = kept != NULL;
  }
}

/* Our GID's index on dc's port, as a lookup that began at or after number `need` found
 * it (need: the device's next number when the job started). A lookup under way may be
 * that one, or end before a later one is due: the job waits for it rather than read the
 * table too, and reads it itself only when none is under way. So when every comm of a
 * port starts a round at once (a link flap), one lookup, two at most, answers them all.
 * Each lookup (fabric's mcp_fabric_gid_refind; negative: not there) is numbered when it
 * begins and published on the device when it ends, unless one that began later was
 * published first. Only job_main calls this: NCCL's thread reads the answers. */
static int gid_lookup_shared(struct mcp_devctx *dc, int index_in_use, unsigned need)
{
  unsigned number;
  int index;

  pthread_mutex_lock(&dc->gid_lock);
  while ((int)(dc->gid_done - need) < 0 && dc->gid_looking > 0)
    pthread_cond_wait(&dc->gid_cond, &dc->gid_lock);
  if ((int)(dc->gid_done - need) >= 0) {
    index = dc->gid_index;
  } else {
    number = ++dc->gid_started;
    dc->gid_looking++;
    pthread_mutex_unlock(&dc->gid_lock);
    index = mcp_fabric_gid_refind(dc->info, dc->ctx, mcp_verbs_sysfs_root(), index_in_use);
    pthread_mutex_lock(&dc->gid_lock);
    if ((int)(number - dc->gid_done) > 0) {
      dc->gid_done = number;
      dc->gid_index = index;
    }
    dc->gid_looking--;
    pthread_cond_broadcast(&dc->gid_cond);
  }
  dc->gid_running--;
  pthread_mutex_unlock(&dc->gid_lock);
  return index;
}

/* A lookup job is counted as running on each member's device from its start until its
 * thread has published (or could not start): a waiting comm then starts no other. */
static void gid_running_add(struct mcp_qp_job *j, int delta)
{
  int i;

  for (i = 0; j->lookup && i < j->ndevs; i++) {
    if (!((j->gid_members >> i) & 1))
      continue;
    pthread_mutex_lock(&j->dc[i]->gid_lock);
    j->dc[i]->gid_running += delta;
    pthread_mutex_unlock(&j->dc[i]->gid_lock);
  }
}

/* The members a rebuild puts the QPs on, as far as this end knows: those whose port is
 * active (a down one would fail the round, and every round after it while it stays
 * down). Every member without failover or while none is active (the link recovers as a
 * whole, waiting for its ports); without port recovery, none that was left out before. */
static uint8_t rebuild_members_up(const struct mcp_qp_job *j)
{
  const struct mcp_link_cfg *cfg = &j->c->cfg;
  uint8_t all = mcp_link_members_all(j->ndevs), allowed, up = 0;
  int k;

  if (j->ndevs < 2 || !cfg->ib_port_failover)
    return all;
  allowed = cfg->ib_port_recovery ? all : j->prev_up & all;
  for (k = 0; k < j->ndevs; k++) {
    struct ibv_port_attr attr;

    if (((allowed >> k) & 1) &&
        mcp_verbs_query_port(j->dc[k]->ctx, (uint8_t)j->dc[k]->info->port, &attr) == 0 &&
        attr.state == IBV_PORT_ACTIVE)
      up |= (uint8_t)(1u << k);
  }
  return up != 0 ? up : allowed;
}

static void *job_main(void *arg)
{
  struct mcp_qp_job *j = arg;
  int i, ok = 1, missing = 0;
  uint8_t rlive;

  if (j->rebuild) {
    /* rxe's destroy waits for the QP's work in flight to drain, which a port that is
     * down (here or at the peer) can hold until the link is back: here, not on NCCL's
     * thread. */
    for (i = 0; i < j->nqps; i++)
      if (j->old_qp[i] != NULL)
        mcp_ibv.destroy_qp(j->old_qp[i]);
    j->up = rebuild_members_up(j);
    mcp_link_masks(j->ndevs, j->remote_ndevs, j->up, j->remote_up, &j->live, &rlive);
    for (i = 0; i < j->nqps; i++)
      j->dev[i] = (uint8_t)mcp_link_member_of(j->live, j->ndevs, i);
    ok = create_qps(j->c, j->dev, j->qp, j->psn, &j->max_inline) == 0;
    atomic_store(&j->state, ok ? MCP_QP_THREAD_OK : MCP_QP_THREAD_FAILED);
    job_unref(j);
    return NULL;
  }

  /* The lookup queries the kernel (netlink sockets with a receive timeout, sysfs): here,
   * not on NCCL's thread. The poller reads the indices after the state says done; the
   * device's other comms read the answer from the device (mcp_qp_gid_poll). */
  for (i = 0; j->lookup && i < j->ndevs; i++) {
    if (!((j->gid_members >> i) & 1))
      continue; /* a member failover left out: its port may be down, its GID gone */
    j->sgid_index[i] = gid_lookup_shared(j->dc[i], j->sgid_index[i], j->gid_need[i]);
    if (j->sgid_index[i] < 0)
      missing = 1;
  }
  if (missing) {
    atomic_store(&j->state, MCP_QP_THREAD_NO_GID);
    job_unref(j);
    return NULL;
  }
  if (j->first)
    counters_base(j->c); /* the port's error counters at connect, off NCCL's thread */
  /* A connection's first walk retries as NCCL does (NCCL_IB_MQP_RETRY_*); a recovery
   * round's does not: the round itself is retried until MCPNET_RECOVERY_TIMEOUT. */
  for (i = 0; i < j->nqps && ok; i++)
    ok = qp_to_rts(j->c, j->dc[j->dev[i]]->info, j->sgid_index[j->dev[i]], j->qp[i], j->psn[i], j->dqpn[i],
                   j->dpsn[i], j->dgid[j->rdev[i]], j->dlid[j->rdev[i]], j->first) == 0;
  atomic_store(&j->state, ok ? MCP_QP_THREAD_OK : MCP_QP_THREAD_FAILED);
  job_unref(j);
  return NULL;
}

/* Library code must stay mapped while an abandoned walk may still return into it: NCCL
 * may finalize and dlclose us meanwhile. Pinned only then, so a normal life still
 * unloads at dlclose. */
static void pin_library(void)
{
  static atomic_int pinned;
  Dl_info info;

  if (atomic_exchange(&pinned, 1))
    return;
  if (dladdr((void *)pin_library, &info) == 0 || info.dli_fname == NULL ||
      dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == NULL)
    MCP_INFO(NCCL_NET,
             "could not pin the plugin in memory for a QP setup thread still running; "
             "do not dlclose it before that thread ends");
}

/* Starts j's detached thread with a reference on the comm; j becomes the comm's job. */
static int job_launch(struct mcp_link *c, struct mcp_qp_job *j)
{
  pthread_attr_t attr;
  pthread_t tid;
  int rc;

  atomic_fetch_add(&c->refs, 1);
  gid_running_add(j, 1);
  rc = pthread_attr_init(&attr);
  if (rc == 0) {
    rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (rc == 0)
      rc = pthread_create(&tid, &attr, job_main, j);
    pthread_attr_destroy(&attr);
  }
  if (rc != 0) {
    gid_running_add(j, -1);
    atomic_fetch_sub(&c->refs, 1);
    free(j);
    return -rc; /* pthread's errno */
  }
  c->qp_job = j;
  return 0;
}

/* A job for c, the comm's previous one let go of; NULL without memory. */
static struct mcp_qp_job *job_new(struct mcp_link *c)
{
  struct mcp_qp_job *j;

  if (c->qp_job != NULL)
    mcp_qp_connect_abandon(c);
  j = calloc(1, sizeof(*j));
  if (j == NULL)
    return NULL;
  atomic_init(&j->state, MCP_QP_THREAD_RUNNING);
  atomic_init(&j->refs, 2);
  j->c = c;
  return j;
}

/* What every job knows of the link's members: ours, and the peer's count. */
static void job_members(struct mcp_link *c, struct mcp_qp_job *j)
{
  int i;

  j->ndevs = c->ndevs;
  for (i = 0; i < c->ndevs; i++) {
    j->dc[i] = c->devs[i].dc;
    j->sgid_index[i] = c->devs[i].sgid_index;
  }
  j->remote_ndevs = c->remote_ndevs > 1 ? c->remote_ndevs : 1;
}

/* walk: RTR/RTS of the comm's QPs; lookup: each live member's GID first. */
static int job_start(struct mcp_link *c, int walk, int lookup)
{
  struct mcp_qp_job *j = job_new(c);
  int i;

  if (j == NULL)
    return -ENOMEM;
  j->nqps = walk ? c->nqps : 0;
  j->lookup = lookup;
  j->gid_members = c->live;
  job_members(c, j);
  for (i = 0; lookup && i < c->ndevs; i++)
    if ((c->live >> i) & 1)
      j->gid_need[i] = mcp_qp_gid_need(c, i);
  j->first = walk && c->rec.round == 0;
  for (i = 0; i < j->nqps; i++) {
    j->qp[i] = c->qp[i];
    j->psn[i] = c->psn[i];
    j->dqpn[i] = c->remote.qps[i].qpn;
    j->dpsn[i] = c->remote.qps[i].psn;
    j->dev[i] = c->qp_dev[i];
    j->rdev[i] = c->qp_rdev[i];
  }
  for (i = 0; i < j->remote_ndevs; i++) {
    const uint8_t *gid;

    remote_member_addr(&c->remote, i, &gid, &j->dlid[i]);
    memcpy(j->dgid[i], gid, 16);
  }
  return job_launch(c, j);
}

int mcp_qp_connect_start(struct mcp_link *c) { return job_start(c, 1, 0); }

int mcp_qp_connect_start_gid(struct mcp_link *c) { return job_start(c, 1, 1); }

unsigned mcp_qp_gid_need(struct mcp_link *c, int k)
{
  struct mcp_devctx *dc = c->devs[k].dc;
  unsigned need;

  pthread_mutex_lock(&dc->gid_lock);
  need = dc->gid_started + 1;
  pthread_mutex_unlock(&dc->gid_lock);
  return need;
}

#define GID_LOOKUP_EVERY_NS 100000000ull

int mcp_qp_gid_poll(struct mcp_link *c, int k, unsigned need, int *index)
{
  struct mcp_devctx *dc = c->devs[k].dc;
  uint64_t now = mcp_clock_ns();
  int start = 0, rc;

  if (dc->info->link_layer != IBV_LINK_LAYER_ETHERNET) {
    *index = c->devs[k].sgid_index; /* InfiniBand: GID 0, routed by LID; nothing to look up */
    return 1;
  }
  pthread_mutex_lock(&dc->gid_lock);
  if ((int)(dc->gid_done - need) >= 0) {
    *index = dc->gid_index;
    pthread_mutex_unlock(&dc->gid_lock);
    return 1;
  }
  /* None that began after the caller asked is under way: start one for the device on
   * this comm, unless the device's last began less than 100 ms ago or the comm's own
   * setup thread is still busy. */
  if (dc->gid_running == 0 && now >= dc->gid_next_ns &&
      (c->qp_job == NULL || atomic_load(&c->qp_job->state) != MCP_QP_THREAD_RUNNING)) {
    dc->gid_next_ns = now + GID_LOOKUP_EVERY_NS;
    start = 1;
  }
  pthread_mutex_unlock(&dc->gid_lock);
  if (start && (rc = job_start(c, 0, 1)) != 0)
    return rc;
  return 0;
}

int mcp_qp_rebuild_start(struct mcp_link *c)
{
  struct mcp_qp_job *j = job_new(c);
  int i, rc;

  if (j == NULL)
    return -ENOMEM;
  j->rebuild = 1;
  j->nqps = c->nqps;
  job_members(c, j);
  j->prev_up = c->up;
  j->remote_up = c->remote_up;
  for (i = 0; i < c->nqps; i++)
    j->old_qp[i] = c->qp[i];
  if ((rc = job_launch(c, j)) != 0)
    return rc; /* the old QPs stay the comm's */
  for (i = 0; i < c->nqps; i++)
    c->qp[i] = NULL;
  return 0;
}

int mcp_qp_rebuild_poll(struct mcp_link *c)
{
  struct mcp_qp_job *j = c->qp_job;
  int st;

  if (j == NULL || !j->rebuild)
    return -EINVAL;
  st = atomic_load(&j->state);
  if (st == MCP_QP_THREAD_RUNNING)
    return 0;
  if (st == MCP_QP_THREAD_OK)
    return 1;
  c->qp_job = NULL;
  job_unref(j); /* destroys what it created */
  return -EIO;
}

void mcp_qp_rebuild_take(struct mcp_link *c)
{
  struct mcp_qp_job *j = c->qp_job;
  int i;

  for (i = 0; i < j->nqps; i++) {
    c->qp[i] = j->qp[i];
    c->psn[i] = j->psn[i];
    j->qp[i] = NULL;
  }
  c->up = j->up;
  c->live = j->live;
  mcp_link_place(c); /* our QPs' members; the peer's stay until its RECOVER */
  c->max_inline = j->max_inline;
  c->qp_job = NULL;
  job_unref(j);
}

int mcp_qp_connect_poll_gid(struct mcp_link *c, int *gid_index)
{
  struct mcp_qp_job *j = c->qp_job;
  int k, st;

  if (j == NULL)
    return -EINVAL;
  st = atomic_load(&j->state);
  if (st == MCP_QP_THREAD_RUNNING)
    return 0;
  for (k = 0; gid_index != NULL && k < j->ndevs; k++)
    gid_index[k] = j->sgid_index[k];
  c->qp_job = NULL;
  job_unref(j);
  return st == MCP_QP_THREAD_OK ? 1 : st == MCP_QP_THREAD_NO_GID ? MCP_QP_NO_GID : -EIO;
}

int mcp_qp_connect_poll(struct mcp_link *c)
{
  int st = mcp_qp_connect_poll_gid(c, NULL);

  return st < 0 ? -EIO : st;
}

int mcp_qp_connect_abandon(struct mcp_link *c)
{
  struct mcp_qp_job *j = c->qp_job;
  int i, running;

  if (j == NULL)
    return 0;
  c->qp_job = NULL;
  running = atomic_load(&j->state) == MCP_QP_THREAD_RUNNING;
  if (running) {
    /* Its QPs may be inside ibv_modify_qp: they leave the comm with the job (a rebuild's
     * are the job's already). */
    for (i = 0; !j->rebuild && i < j->nqps; i++)
      if (c->qp[i] == j->qp[i])
        c->qp[i] = NULL;
    j->abandoned = 1;
    pin_library();
  }
  job_unref(j);
  return running;
}

int mcp_qp_post_recvs(struct mcp_link *c, int qp, int count)
{
  struct ibv_recv_wr wr[MCP_CQ_BATCH], *bad;
  int i, rc, done = 0;

  while (done < count) {
    int k = count - done < MCP_CQ_BATCH ? count - done : MCP_CQ_BATCH;
    for (i = 0; i < k; i++) {
      wr[i].wr_id = mcp_link_wr(c, MCP_WR_RECV, (uint32_t)qp);
      wr[i].sg_list = NULL;
      wr[i].num_sge = 0;
      wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
    }
    rc = ibv_post_recv(c->qp[qp], wr, &bad);
    if (rc != 0)
      return rc > 0 ? -rc : -EIO; /* verbs returns the errno */
    done += k;
  }
  c->recv_posted[qp] += count;
  return 0;
}

/* MCPNET_VERSION "major.minor.patch" as major<<16 | minor<<8 | patch. */
uint32_t mcp_version_number(void)
{
  unsigned major = 0, minor = 0, patch = 0;

  sscanf(MCPNET_VERSION, "%u.%u.%u", &major, &minor, &patch);
  return (major << 16) | ((minor & 0xff) << 8) | (patch & 0xff);
}

void mcp_comm_fill_endpoint(struct mcp_link *c)
{
  const struct mcp_link_cfg *cfg = &c->cfg;
  /* Member 0 in the endpoint's own fields, the others in more[] (wire version 3). */
  const struct mcp_link_dev *m = mcp_link_dev_of(c, 0);
  const struct mcp_net_dev *d = m->dc->info;
  struct mcp_wire_endpoint *ep = &c->local;
  int i;

  memset(ep, 0, sizeof(*ep));
  ep->stream_id = mcp_oob_stream_id(c->stream);
  snprintf(ep->dev_name, sizeof(ep->dev_name), "%s", d->name);
  ep->port = (uint8_t)d->port;
  ep->link_layer = d->link_layer == IBV_LINK_LAYER_ETHERNET ? MCP_WIRE_LINK_ETHERNET : MCP_WIRE_LINK_IB;
  ep->active_mtu = (uint8_t)d->active_mtu;
  if (cfg->mtu > 0 && mcp_fabric_mtu_enum(cfg->mtu) < ep->active_mtu)
    ep->active_mtu = (uint8_t)mcp_fabric_mtu_enum(cfg->mtu);
  ep->gid_index = (uint8_t)m->sgid_index;
  memcpy(ep->gid, d->gid.raw, 16);
  ep->lid = d->lid;
  ep->nqps = (uint8_t)c->nqps;
  for (i = 0; i < c->nqps; i++) {
    ep->qps[i].qpn = c->qp[i]->qp_num;
    ep->qps[i].psn = c->psn[i];
  }
  ep->ring_addr = c->ring_addr;
  ep->ring_rkey = c->ring_rkey;
  ep->ring_slots = MCP_SLOTS;
  ep->fp.plugin_version = mcp_version_number();
  ep->fp.gid_type = d->link_layer == IBV_LINK_LAYER_ETHERNET
    ? (d->gid.type == MCP_GID_TYPE_ROCE_V2 ? MCP_WIRE_GID_ROCE_V2 : MCP_WIRE_GID_ROCE_V1)
    : MCP_WIRE_GID_IB;
  ep->fp.gid_family = d->link_layer == IBV_LINK_LAYER_ETHERNET ? (uint8_t)d->gid.family : 0;
  ep->fp.pkey = d->pkey;
  ep->fp.sl = (uint8_t)c->sl;
  ep->fp.tc = (uint8_t)c->tc;
  ep->fp.timeout = (uint8_t)cfg->ib_timeout;
  ep->fp.retry = (uint8_t)cfg->ib_retry_cnt;
  ep->fp.rnr_retry = (uint8_t)cfg->rnr_retry;
  ep->fp.qps_per_conn = (uint8_t)c->nqps;
  ep->fp.speed_mbps = (uint32_t)d->speed_mbps;
  ep->fp.max_message = (uint32_t)MCP_MAX_P2P_BYTES;
  ep->ndevs = (uint8_t)c->ndevs;
  for (i = 1; i < c->ndevs; i++) {
    const struct mcp_link_dev *mk = &c->devs[i];
    const struct mcp_net_dev *dk = mk->dc->info;
    struct mcp_wire_member *mb = &ep->more[i - 1];

    snprintf(mb->dev_name, sizeof(mb->dev_name), "%s", dk->name);
    mb->port = (uint8_t)dk->port;
    mb->active_mtu = (uint8_t)dk->active_mtu;
    if (cfg->mtu > 0 && mcp_fabric_mtu_enum(cfg->mtu) < mb->active_mtu)
      mb->active_mtu = (uint8_t)mcp_fabric_mtu_enum(cfg->mtu);
    mb->gid_index = (uint8_t)mk->sgid_index;
    memcpy(mb->gid, dk->gid.raw, 16);
    mb->lid = dk->lid;
    mb->ring_rkey = c->ring_rkeys[i];
  }
}

void mcp_comm_destroy(struct mcp_link *c)
{
  if (c == NULL)
    return;
  /* A setup thread still in ibv_modify_qp (a link down, a peer gone) is never waited
   * for: it keeps the comm until it returns. The peer hears of the close now. */
  mcp_qp_connect_abandon(c);
  if (c->stream != NULL)
    mcp_oob_stream_close(c->stream, 1);
  c->stream = NULL;
  comm_unref(c);
}

/* The last reference: the owner's close, or an abandoned setup thread that returned. */
static void comm_free(struct mcp_link *c)
{
  int i;

  for (i = 0; i < c->nqps; i++)
    if (c->qp[i] != NULL)
      mcp_ibv.destroy_qp(c->qp[i]);
  /* The upper layer's state (its flush QP shares member 0's CQ) goes before the CQs. */
  if (c->ops != NULL)
    c->ops->release(c);
  for (i = 0; i < c->ndevs; i++) {
    if (c->devs[i].cq != NULL)
      mcp_ibv.destroy_cq(c->devs[i].cq);
    free(c->devs[i].cnt_base);
    mcp_devctx_put(c->devs[i].dc);
  }
  mcp_link_status_close(c);
  free(c);
  mcp_oob_release();
  mcp_fabric_comm_unref();
}
