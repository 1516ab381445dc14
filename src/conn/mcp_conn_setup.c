/*
 * mcp_conn_setup.c - listen, connect and accept as resumable state machines.
 *
 * NCCL calls connect and accept again and again until they hand out a comm, from one
 * thread that may alternate them (bootstrap over the net plugin does), so no call may
 * wait for the peer. connect keeps its comm in the tail of NCCL's handle buffer, which
 * stays at one address across the calls; accept keeps its comm in the listen comm.
 *
 *   connect: WAIT_OOB (TCP + HELLO) -> send CONN_REQ -> WAIT_ACK -> WAIT_QP (RTR/RTS) -> send READY -> done
 *   accept:  take CONN_REQ -> create QPs -> WAIT_QP (RTR/RTS) -> post receives, send CONN_ACK
 *            -> WAIT_READY -> done
 *
 * The move to RTR may resolve the peer's address inside the kernel (RoCE on most NICs)
 * and block for seconds when it is unreachable, so it runs on a short-lived thread of
 * its own (WAIT_QP) that the next call joins; no thread outlives the setup.
 *
 * The acceptor returns its comm only after READY, so by then the sender's QPs accept
 * the clear-to-send writes the first irecv makes.
 *
 * Late peers: neither side has a deadline for the other one's process. At scale a live
 * peer reaches its accept or connect minutes after us, and NCCL's own transport waits
 * for it. The TCP connect is bounded (mcp_sock, MCPNET_CONNECT_TIMEOUT: what cannot be
 * reached at all); after that a wait ends only when the channel dies (FIN/RST: the
 * process exited; keepalive: the host did) or the peer refuses. A long wait is said, not
 * failed: INFO after 10 s, WARN every 60 s (wait_notice).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "fabric/fabric_pkey.h"
#include "conn/link.h"

enum { ST_WAIT_OOB = 1, ST_WAIT_ACK, ST_WAIT_QP, ST_WAIT_READY, ST_DONE };

#define CONNECT_TAIL_MAGIC 0x4d435043u /* "MCPC" */

struct connect_tail {
  uint32_t magic;
  uint32_t pad;
  struct mcp_link *comm;
};
_Static_assert(MCP_LINK_MAX_DEVS <= MCP_WIRE_MAX_MEMBERS, "every member of a link travels in its endpoint");
_Static_assert(sizeof(struct connect_tail) <= MCP_WIRE_HANDLE_CAP_OFFSET - MCP_WIRE_HANDLE_TAIL_OFFSET,
               "connect state fits the handle tail and leaves the listener's capability alone");

/* NCCL_IB_SL / NCCL_IB_TC win; else the communicator's traffic class; else 0. A traffic
 * class is a TC (0..255) but only an SL when it fits the 4-bit field. */
static int choose_sl_tc(int configured, int traffic_class, int max)
{
  if (configured >= 0)
    return configured;
  return traffic_class >= 0 && traffic_class <= max ? traffic_class : 0;
}

int mcp_link_open_members(struct mcp_link *c, int dev)
{
  const struct mcp_fabric *fab = mcp_fabric_process();
  int members[MCP_VDEV_MAX_MEMBERS], n, k;

  /* The fabric resolves the members and refuses a set of mixed link layers (one RC link
   * cannot cross from InfiniBand to Ethernet), saying why, before any context is opened. */
  n = mcp_fabric_dev_members(fab, dev, members);
  if (n < 1 || n > MCP_LINK_MAX_DEVS)
    return -ENODEV;
  for (k = 0; k < n; k++) {
    struct mcp_link_dev *m = &c->devs[k];

    m->dc = mcp_devctx_get(fab, members[k]);
    if (m->dc == NULL)
      return -ENODEV;
    c->ndevs = k + 1;                                     /* what comm_free puts back */
    m->port_err_seen = atomic_load(&m->dc->port_err_gen); /* events before this comm are not its */
    m->gid_seen = atomic_load(&m->dc->gid_gen);
  }
  return 0;
}

void mcp_link_cfg_fill(struct mcp_link_cfg *lc, const struct mcp_config *cfg)
{
  lc->ib_timeout = cfg->ib_timeout;
  lc->ib_retry_cnt = cfg->ib_retry_cnt;
  lc->rnr_retry = cfg->rnr_retry;
  lc->min_rnr_timer = cfg->min_rnr_timer;
  lc->mtu = cfg->mtu;
  lc->ib_sl = cfg->ib_sl;
  lc->ib_tc = cfg->ib_tc;
  lc->ib_fifo_tc = cfg->ib_fifo_tc;
  lc->ib_pkey_index = cfg->ib_pkey_index;
  lc->ib_mqp_retry_all = cfg->ib_mqp_retry_all;
  lc->ib_mqp_retry_cnt = cfg->ib_mqp_retry_cnt;
  lc->ib_mqp_retry_sleep_ms = cfg->ib_mqp_retry_sleep_ms;
  lc->ib_port_failover = cfg->ib_port_failover;
  lc->ib_port_recovery = cfg->ib_port_recovery;
  lc->connect_timeout_s = cfg->connect_timeout_s;
  lc->recovery_timeout_s = cfg->recovery_timeout_s;
  lc->watchdog_s = cfg->watchdog_s;
  lc->inline_bytes = cfg->inline_bytes;
  lc->abort_on_error = cfg->abort_on_error;
  lc->force_flush = cfg->force_flush;
}

/* The parts of a comm that do not depend on the peer. Its settings are copied here, once,
 * from the configuration net's init loaded (struct mcp_link_cfg). */
static struct mcp_link *comm_new(int kind, int dev, int traffic_class, const struct mcp_link_ops *ops)
{
  const struct mcp_config *cfg = mcp_param_process();
  struct mcp_link *c = calloc(1, ops->comm_size); /* the upper layer's comm: the link comes first */
  struct mcp_link_dev *m;

  if (c == NULL)
    return NULL;
  mcp_link_cfg_fill(&c->cfg, cfg);
  if (mcp_oob_acquire(cfg) != 0) {
    free(c);
    return NULL;
  }
  mcp_fabric_comm_ref();
  c->kind = kind;
  c->dev = dev;
  c->ops = ops;
  c->id = mcp_comm_next_id();
  mcp_link_set_epoch(c, 0);
  mcp_link_status_open(c, cfg); /* what mcpnet-top sees; closed with the comm (comm_free) */
  /* A QP's async event reaches its comm through the handler conn registers with fabric. */
  mcp_devctx_set_qp_event_handler(mcp_comm_async_qp_event);
  c->traffic_class = traffic_class;
  /* The physical devices behind dev: itself, or the members of a fused device. */
  c->remote_ndevs = 1;
  if (mcp_link_open_members(c, dev) != 0)
    goto fail;
  m = &c->devs[0];
  /* The rank map's sl=/tc= for this device (member 0's) win over NCCL_IB_SL/NCCL_IB_TC. */
  c->sl = choose_sl_tc(m->dc->info->sl >= 0 ? m->dc->info->sl : c->cfg.ib_sl, traffic_class, 15);
  c->tc = choose_sl_tc(m->dc->info->tc >= 0 ? m->dc->info->tc : c->cfg.ib_tc, traffic_class, 255);
  return c;
fail:
  mcp_comm_destroy(c);
  return NULL;
}

/* The upper layer's state (it names the ring the handshake carries and the queue depths
 * its traffic needs), then the QPs. */
static int comm_resources(struct mcp_link *c, int nqps)
{
  int rc = c->ops->alloc(c);

  if (rc != 0)
    return rc;
  return mcp_qp_create_all(c, nqps, c->sq_depth, c->rq_depth);
}

static int qp_thread_start(struct mcp_link *c)
{
  int rc = mcp_qp_connect_start(c);

  if (rc != 0)
    return rc;
  c->state = ST_WAIT_QP;
  return 0;
}

/* 0 while the QPs are still being connected, 1 when they are at RTS, < 0 failed. */
static int qp_thread_poll(struct mcp_link *c) { return mcp_qp_connect_poll(c); }

/* Tells the other end why the connection is abandoned, so it fails now, not at its
 * connect timeout. */
static void send_reject(struct mcp_link *c, uint32_t code, const char *why)
{
  struct mcp_wire_msg m;

  if (c->stream == NULL || mcp_oob_stream_remote_id(c->stream) == 0)
    return;
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REJECT;
  m.u.reject.code = code;
  snprintf(m.u.reject.reason, sizeof(m.u.reject.reason), "%.256s", why);
  (void)mcp_oob_stream_send(c->stream, &m);
}

/* What only costs speed or changes when errors surface: said once per process. */
static void warn_fingerprint(const struct mcp_link *c, const struct mcp_wire_endpoint *l,
                             const struct mcp_wire_endpoint *r)
{
  static int rate_warned, timer_warned, version_warned;

  if (r->fp.speed_mbps != l->fp.speed_mbps && r->fp.speed_mbps != 0 && l->fp.speed_mbps != 0 &&
      !rate_warned) {
    rate_warned = 1;
    MCP_WARN("link rates differ: %u Mb/s on %s here, %u Mb/s on %s at %s: traffic runs at the slower one. "
             "Check cables, transceivers and the switch ports' speed",
             l->fp.speed_mbps, l->dev_name, r->fp.speed_mbps, r->dev_name, c->peer_name);
  }
  if ((r->fp.timeout != l->fp.timeout || r->fp.retry != l->fp.retry) && !timer_warned) {
    timer_warned = 1;
    MCP_WARN("QP timers differ: NCCL_IB_TIMEOUT=%u NCCL_IB_RETRY_CNT=%u here, %u and %u at %s: the two ends "
             "notice a dead path at different times. Set the same values on every node",
             l->fp.timeout, l->fp.retry, r->fp.timeout, r->fp.retry, c->peer_name);
  }
  if (r->fp.plugin_version != l->fp.plugin_version && !version_warned) {
    version_warned = 1;
    MCP_WARN("mcpnet versions differ: %u.%u.%u here, %u.%u.%u at %s. Deploy one version on every node",
             l->fp.plugin_version >> 16, (l->fp.plugin_version >> 8) & 0xff, l->fp.plugin_version & 0xff,
             r->fp.plugin_version >> 16, (r->fp.plugin_version >> 8) & 0xff, r->fp.plugin_version & 0xff,
             c->peer_name);
  }
}

/* What must agree between the two ends; mismatches that only cost speed are warned. */
static int check_peer(struct mcp_link *c, const struct mcp_wire_endpoint *r, char *why, size_t len)
{
  const struct mcp_wire_endpoint *l = &c->local;
  static int mtu_warned;

  if (r->link_layer != l->link_layer) {
    snprintf(why, len,
             "link layers differ: %s on %s here, %s on %s at %s. Select devices of one "
             "link type on both ends (NCCL_IB_HCA or MCPNET_RANK_MAP)",
             l->link_layer == MCP_WIRE_LINK_IB ? "InfiniBand" : "Ethernet", l->dev_name,
             r->link_layer == MCP_WIRE_LINK_IB ? "InfiniBand" : "Ethernet", r->dev_name, c->peer_name);
    return -EPROTO;
  }
  if (r->fp.gid_type != l->fp.gid_type) {
    snprintf(why, len,
             "GID types differ: RoCE v%d on %s here, RoCE v%d on %s at %s. Set "
             "NCCL_IB_ROCE_VERSION_NUM (or the GID index) the same on every node",
             l->fp.gid_type, l->dev_name, r->fp.gid_type, r->dev_name, c->peer_name);
    return -EPROTO;
  }
  if (!mcp_pkey_can_talk(l->fp.pkey & MCP_PKEY_FULL_MEMBER, r->fp.pkey & MCP_PKEY_FULL_MEMBER)) {
    snprintf(why, len,
             "both ends are limited members of partition 0x%04x (P_Key 0x%04x on %s here, "
             "0x%04x on %s at %s), and limited members cannot talk to each other. Make one end a full "
             "member of the partition",
             l->fp.pkey & MCP_PKEY_BASE_MASK, l->fp.pkey, l->dev_name, r->fp.pkey, r->dev_name, c->peer_name);
    return -EPROTO;
  }
  if ((l->fp.pkey & MCP_PKEY_BASE_MASK) != (r->fp.pkey & MCP_PKEY_BASE_MASK)) {
    snprintf(why, len,
             "P_Keys differ: 0x%04x on %s here, 0x%04x on %s at %s: the two ends are in different "
             "partitions. Set the same MCPNET_TENANT_PKEY (or rank map pkey=) on every node",
             l->fp.pkey, l->dev_name, r->fp.pkey, r->dev_name, c->peer_name);
    return -EPROTO;
  }
  if (r->ring_slots != MCP_SLOTS) {
    snprintf(why, len, "protocol mismatch: %u slots at %s, %d here (different mcpnet versions)",
             r->ring_slots, c->peer_name, MCP_SLOTS);
    return -EPROTO;
  }
  warn_fingerprint(c, l, r);
  c->mtu = r->active_mtu < l->active_mtu ? r->active_mtu : l->active_mtu;
  /* A fused end: one path MTU for all QPs, the smallest any member of either end takes. */
  for (int k = 1; k < l->ndevs; k++)
    if (l->more[k - 1].active_mtu < c->mtu)
      c->mtu = l->more[k - 1].active_mtu;
  for (int k = 1; k < r->ndevs; k++)
    if (r->more[k - 1].active_mtu < c->mtu)
      c->mtu = r->more[k - 1].active_mtu;
  if (r->active_mtu != l->active_mtu && !mtu_warned) {
    mtu_warned = 1;
    MCP_WARN("MTU %d on %s here, %d on %s at %s: this connection uses %d. Set the same MTU on both "
             "links for full speed",
             mcp_fabric_mtu_bytes(l->active_mtu), l->dev_name, mcp_fabric_mtu_bytes(r->active_mtu),
             r->dev_name, c->peer_name, mcp_fabric_mtu_bytes(c->mtu));
  }
  return 0;
}

int mcp_conn_listen(int dev, int traffic_class, const struct mcp_link_ops *ops, void *handle,
                    void **listen_comm)
{
  const struct mcp_fabric *fab = mcp_fabric_process();
  int members[MCP_VDEV_MAX_MEMBERS], nmembers = 0; /* a virtual (fused) index is valid too */
  struct mcp_listen_comm *lc;
  struct mcp_wire_handle h;
  union mcp_sockaddr addr;
  char err[MCP_WIRE_ERRLEN];

  *listen_comm = NULL;
  if (fab == NULL || (nmembers = mcp_fabric_dev_members(fab, dev, members)) < 0) {
    MCP_WARN("listen on device %d: there are %d device(s) (was init called?)", dev,
             fab ? mcp_fabric_vdev_count(fab) : 0);
    return MCP_ERR_ARG;
  }
  lc = calloc(1, sizeof(*lc));
  if (lc == NULL)
    return MCP_ERR_SYSTEM;
  if (mcp_oob_acquire(mcp_param_process()) != 0) {
    free(lc);
    return MCP_ERR_SYSTEM;
  }
  mcp_fabric_comm_ref();
  lc->kind = MCP_COMM_LISTEN;
  lc->dev = dev;
  lc->traffic_class = traffic_class;
  lc->ops = ops;
  lc->listener = mcp_oob_listener_add();
  if (lc->listener == NULL)
    goto fail;
  memset(&h, 0, sizeof(h));
  mcp_oob_local(&addr, &h.nonce);
  if (mcp_wire_handle_set_sockaddr(&h, &addr) != 0)
    goto fail;
  h.dev = dev;
  h.listen_id = lc->listener->cred.listen_id;
  h.listen_key[0] = lc->listener->cred.key[0];
  h.listen_key[1] = lc->listener->cred.key[1];
  /* The connecting side sizes its QPs by the larger end. */
  h.ndevs = (uint8_t)nmembers;
  if (mcp_wire_handle_encode(&h, handle, err, sizeof(err)) != 0) {
    MCP_WARN("listen: cannot encode the handle: %s", err);
    goto fail;
  }
  *listen_comm = lc;
  return 0;
fail:
  mcp_conn_close_listen(lc);
  return MCP_ERR_SYSTEM;
}

int mcp_conn_close_listen(void *listen_comm)
{
  struct mcp_listen_comm *lc = listen_comm;

  if (lc == NULL)
    return 0;
  if (lc->accepting != NULL)
    mcp_comm_destroy(lc->accepting);
  if (lc->listener != NULL)
    mcp_oob_listener_remove(lc->listener);
  free(lc);
  mcp_oob_release();
  mcp_fabric_comm_unref();
  return 0;
}

static struct mcp_link *connect_start(int dev, int tc, const struct mcp_link_ops *ops, const void *handle,
                                      int *rc)
{
  const struct mcp_fabric *fab = mcp_fabric_process();
  int members[MCP_VDEV_MAX_MEMBERS]; /* a virtual (fused) index is valid too */
  struct mcp_wire_handle h;
  union mcp_sockaddr addr;
  char err[MCP_WIRE_ERRLEN];
  struct mcp_link *c;

  if (fab == NULL || mcp_fabric_dev_members(fab, dev, members) < 0) {
    MCP_WARN("connect on device %d: there are %d device(s)", dev, fab ? mcp_fabric_vdev_count(fab) : 0);
    *rc = MCP_ERR_ARG;
    return NULL;
  }
  if (mcp_wire_handle_decode(handle, &h, err, sizeof(err)) != 0) {
    MCP_WARN("connect: the handle is not usable: %s", err);
    *rc = MCP_ERR_USAGE;
    return NULL;
  }
  c = comm_new(MCP_COMM_SEND, dev, tc, ops);
  if (c == NULL) {
    *rc = MCP_ERR_SYSTEM;
    return NULL;
  }
  mcp_wire_handle_get_sockaddr(&h, &addr);
  /* An older listener would take our request with its token in clear and cannot prove
   * itself: refuse it, saying so, rather than talk to whoever answers at its address. */
  if (h.version < MCP_WIRE_VERSION_AUTH) {
    mcp_sockaddr_format(&addr, c->peer_name, sizeof(c->peer_name));
    MCP_WARN("connect to %s: the listener runs an older mcpnet (wire version %u) whose connections cannot "
             "authenticate; this build needs version %d. Run one mcpnet version on every host",
             c->peer_name, h.version, MCP_WIRE_VERSION_AUTH);
    mcp_comm_destroy(c);
    *rc = MCP_ERR_USAGE;
    return NULL;
  }
  c->cred.listen_id = h.listen_id;
  c->cred.key[0] = h.listen_key[0];
  c->cred.key[1] = h.listen_key[1];
  /* The listener's members, until its answer confirms them: the upper layer lays out its
   * ring for them (a fused receiver's rkey tables) before the answer comes. */
  mcp_link_set_remote_ndevs(c, h.ndevs); /* every member up, as at setup */
  c->stream = mcp_oob_stream_open_to(&addr, h.nonce, &c->cred);
  if (c->stream == NULL ||
      comm_resources(
        c, mcp_link_qp_count(c->devs[0].dc->info->qps_per_conn, c->ndevs, h.ndevs ? h.ndevs : 1)) != 0) {
    mcp_comm_destroy(c);
    *rc = MCP_ERR_SYSTEM;
    return NULL;
  }
  mcp_sockaddr_format(&addr, c->peer_name, sizeof(c->peer_name));
  c->state = ST_WAIT_OOB;
  c->wait_since_ms = mcp_clock_coarse_ms();
  return c;
}

static int connect_send_request(struct mcp_link *c)
{
  struct mcp_wire_msg m;

  mcp_oob_stream_peer_name(c->stream, c->peer_name, sizeof(c->peer_name));
  mcp_comm_fill_endpoint(c);
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REQ; /* the channel adds the listen id and the MAC */
  m.u.conn_req.ep = c->local;
  if (mcp_oob_stream_send(c->stream, &m) != 0) {
    mcp_comm_fail(c, MCP_ERR_SYSTEM, "connect to %s: cannot send the request", c->peer_name);
    return MCP_ERR_SYSTEM;
  }
  c->state = ST_WAIT_ACK;
  return 0;
}

/* The acceptor's answer: check it, then connect the QPs off this thread. */
static int connect_on_answer(struct mcp_link *c, const struct mcp_wire_msg *m)
{
  char why[512];

  if (m->type == MCP_WIRE_CONN_REJECT) {
    mcp_comm_fail(c, MCP_ERR_REMOTE, "connect to %s refused: %s", c->peer_name, m->u.reject.reason);
    return MCP_ERR_REMOTE;
  }
  if (m->type != MCP_WIRE_CONN_ACK) {
    mcp_comm_fail(c, MCP_ERR_REMOTE, "connect to %s: unexpected %s", c->peer_name,
                  mcp_wire_type_name(m->type));
    return MCP_ERR_REMOTE;
  }
  c->remote = m->u.conn_ack;
  /* The ring was laid out for the members the handle named: an answer with another
   * count (the listener's devices were discovered anew in between) cannot be served. */
  if ((c->remote.ndevs > 1 ? c->remote.ndevs : 1) != c->remote_ndevs) {
    send_reject(c, MCP_WIRE_REJECT_MISMATCH, "member count differs from the handle's");
    mcp_comm_fail(c, MCP_ERR_REMOTE,
                  "connect to %s: the listener's handle named %d member device(s), its answer %d: its "
                  "devices changed between listen and accept; connect again",
                  c->peer_name, c->remote_ndevs, c->remote.ndevs > 1 ? c->remote.ndevs : 1);
    return MCP_ERR_REMOTE;
  }
  mcp_oob_stream_set_remote_id(c->stream, c->remote.stream_id);
  if (check_peer(c, &c->remote, why, sizeof(why)) != 0) {
    send_reject(c, MCP_WIRE_REJECT_MISMATCH, why);
    mcp_comm_fail(c, MCP_ERR_USAGE, "connect to %s: %s", c->peer_name, why);
    return MCP_ERR_USAGE;
  }
  if (c->remote.nqps != c->nqps) {
    send_reject(c, MCP_WIRE_REJECT_INTERNAL, "QP count mismatch");
    mcp_comm_fail(c, MCP_ERR_REMOTE, "connect to %s: the peer answered with %d QPs for our %d", c->peer_name,
                  c->remote.nqps, c->nqps);
    return MCP_ERR_REMOTE;
  }
  if (qp_thread_start(c) != 0) {
    send_reject(c, MCP_WIRE_REJECT_RESOURCES, "the connecting side could not start its QP setup");
    mcp_comm_fail(c, MCP_ERR_SYSTEM, "connect to %s: cannot start a thread for the QP setup", c->peer_name);
    return MCP_ERR_SYSTEM;
  }
  return 0;
}

/* The QPs are at RTS (or failed): tell the acceptor. */
static int connect_finish(struct mcp_link *c)
{
  struct mcp_wire_msg m;
  int st = qp_thread_poll(c);

  if (st == 0)
    return 0;
  if (st < 0) {
    send_reject(c, MCP_WIRE_REJECT_RESOURCES,
                "the connecting side could not bring its QPs to RTS (see its log)");
    mcp_comm_fail(c, MCP_ERR_SYSTEM, "connect to %s: queue pairs could not be connected", c->peer_name);
    return MCP_ERR_SYSTEM;
  }
  c->ops->link_up(c);
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_READY;
  if (mcp_oob_stream_send(c->stream, &m) != 0) {
    mcp_comm_fail(c, MCP_ERR_REMOTE, "connect to %s: cannot send READY", c->peer_name);
    return MCP_ERR_REMOTE;
  }
  c->state = ST_DONE;
  mcp_link_status_ready(c);
  MCP_INFO(NCCL_NET, "connected %s -> %s: %d QP(s) from %#x, MTU %d, SL %d, TC %d",
           mcp_link_dev_of(c, 0)->dc->info->name, c->peer_name, c->nqps, c->qp[0]->qp_num,
           mcp_fabric_mtu_bytes(c->mtu), c->sl, c->tc);
  return 1;
}

/* Says, at the intervals mcp_oob_wait_notice gives, that this end waits for a peer
 * whose host holds the TCP connection: who waits for whom, since when, and why that is
 * not a failure. what is "its accept" or "its connect to finish". */
static void wait_notice(struct mcp_link *c, const char *what)
{
  char self[200], peer[160];
  enum mcp_oob_phase ph = mcp_oob_stream_phase(c->stream);
  unsigned long long waited;
  int due;

  if (ph == MCP_OOB_DIALLING || ph == MCP_OOB_DEAD)
    return; /* the TCP connect has its own deadline; a dead one fails elsewhere */
  due = mcp_oob_wait_notice(c->wait_since_ms, mcp_clock_coarse_ms(), &c->wait_notices);
  if (due == 0)
    return;
  waited = (unsigned long long)((mcp_clock_coarse_ms() - c->wait_since_ms) / 1000u);
  mcp_oob_self_name(self, sizeof(self));
  mcp_oob_stream_peer_name(c->stream, peer, sizeof(peer));
  if (due == 1)
    MCP_INFO(NCCL_INIT | NCCL_NET,
             "%s %s: waiting %llu s for %s; this end is %s. Its host holds the "
             "TCP connection, so the process is alive but %s (a late or busy rank): still waiting",
             c->kind == MCP_COMM_SEND ? "connect to" : "accept from", peer, waited, what, self,
             ph == MCP_OOB_TCP_UP ? "has made no call into mcpnet since we dialled"
                                  : "has not got there yet");
  else
    MCP_WARN("%s %s: still waiting after %llu s for %s; this end is %s. The peer's host holds the TCP "
             "connection, so its process is alive but %s: a late rank, or one that hangs. Not a failure: "
             "the wait ends when it answers, its process exits, or its host stops answering TCP keepalive",
             c->kind == MCP_COMM_SEND ? "connect to" : "accept from", peer, waited, what, self,
             ph == MCP_OOB_TCP_UP ? "has made no call into mcpnet since we dialled"
                                  : "has not got there yet");
}

/* One step; 1 when connected, 0 when not yet, < 0 failed (c->error, c->errmsg say why). */
static int connect_step(struct mcp_link *c)
{
  struct mcp_wire_msg m;
  int ready, rc;

  if (c->state == ST_WAIT_OOB) {
    ready = mcp_oob_stream_ready(c->stream);
    if (ready < 0) {
      mcp_comm_fail(c, MCP_ERR_REMOTE, "connect to %s: %s", c->peer_name,
                    mcp_oob_stream_dead_reason(c->stream));
      return MCP_ERR_REMOTE;
    }
    if (ready > 0 && (rc = connect_send_request(c)) != 0)
      return rc;
  }
  if (c->state == ST_WAIT_ACK) {
    if (mcp_oob_stream_recv(c->stream, &m)) {
      if ((rc = connect_on_answer(c, &m)) != 0)
        return rc;
    } else if (mcp_oob_stream_dead(c->stream)) {
      mcp_comm_fail(c, MCP_ERR_REMOTE, "connect to %s: %s", c->peer_name,
                    mcp_oob_stream_dead_reason(c->stream));
      return MCP_ERR_REMOTE;
    } else if (mcp_oob_stream_closed_by_peer(c->stream)) {
      /* With no deadline here, an acceptor that gave up without a CONN_REJECT must not
       * leave us waiting: its comm's CLOSE is the last word. */
      mcp_comm_fail(c, MCP_ERR_REMOTE,
                    "connect to %s: the accepting side abandoned this connection "
                    "(CLOSE before its answer; see its log)",
                    c->peer_name);
      return MCP_ERR_REMOTE;
    }
  }
  if (c->state == ST_WAIT_QP) {
    mcp_link_status_setup(c, MCP_STATUS_CONNECTING);
    return connect_finish(c);
  }
  /* No deadline here: an unreachable address fails in the TCP connect, a dead process or
   * host kills the stream, and anything else is a peer that has not called accept yet. */
  mcp_link_status_setup(c,
                        c->state == ST_WAIT_ACK || mcp_oob_stream_phase(c->stream) == MCP_OOB_TCP_UP
                          ? MCP_STATUS_WAIT_ACCEPT
                          : MCP_STATUS_CONNECTING);
  wait_notice(c, "its accept");
  return 0;
}

int mcp_conn_connect(int dev, int traffic_class, const struct mcp_link_ops *ops, void *handle,
                     void **send_comm)
{
  struct connect_tail *tail = (struct connect_tail *)((char *)handle + MCP_WIRE_HANDLE_TAIL_OFFSET);
  int rc = 0;
  struct mcp_link *c;
  int step;

  *send_comm = NULL;
  if (tail->magic != CONNECT_TAIL_MAGIC) {
    c = connect_start(dev, traffic_class, ops, handle, &rc);
    if (c == NULL)
      return rc;
    tail->magic = CONNECT_TAIL_MAGIC;
    tail->comm = c;
  }
  c = tail->comm;
  step = connect_step(c);
  if (step == 0)
    return 0;
  tail->magic = 0;
  tail->comm = NULL;
  if (step < 0) {
    rc = c->error;
    mcp_comm_destroy(c);
    return rc;
  }
  *send_comm = c;
  return 0;
}

/* The receive side's traffic class: NCCL_IB_FIFO_TC on RoCE when set, else the data's. */
static int fifo_tc(const struct mcp_link *c, int data_tc)
{
  int fifo = c->cfg.ib_fifo_tc;

  if (fifo < 0 || c->devs[0].dc->info->link_layer != IBV_LINK_LAYER_ETHERNET)
    return data_tc;
  return fifo;
}

static int accept_start(struct mcp_listen_comm *lc, struct mcp_oob_request *req, int *rc)
{
  struct mcp_link *c = comm_new(MCP_COMM_RECV, lc->dev, lc->traffic_class, lc->ops);
  const struct mcp_wire_endpoint *r;
  char why[512];

  *rc = MCP_ERR_SYSTEM;
  if (c == NULL) {
    mcp_oob_request_reject(req, MCP_WIRE_REJECT_RESOURCES,
                           "the accepting side could not create a comm (see its log)");
    mcp_oob_request_free(req);
    return *rc;
  }
  c->remote = req->req.ep;
  r = &c->remote;
  mcp_link_set_remote_ndevs(c, r->ndevs);
  c->stream = mcp_oob_stream_open_for(req);
  if (c->stream == NULL)
    mcp_oob_request_reject(req, MCP_WIRE_REJECT_RESOURCES, "the accepting side is out of memory");
  mcp_oob_request_free(req);
  if (c->stream == NULL)
    goto fail;
  mcp_oob_stream_peer_name(c->stream, c->peer_name, sizeof(c->peer_name));
  /* The connecting side chooses SL/TC for both ends, as NCCL does; on RoCE,
   * NCCL_IB_FIFO_TC (when set) classes this side's QPs, whose only writes are the
   * clear-to-send entries: NCCL 2.30 gives its control FIFO's QPs the same class. */
  c->sl = r->fp.sl;
  c->tc = fifo_tc(c, r->fp.tc);
  if (r->nqps < 1 || r->nqps > MCP_MAX_QPS || comm_resources(c, r->nqps) != 0)
    goto fail;
  mcp_comm_fill_endpoint(c);
  if (check_peer(c, r, why, sizeof(why)) != 0) {
    send_reject(c, MCP_WIRE_REJECT_MISMATCH, why);
    mcp_comm_fail(c, MCP_ERR_USAGE, "accept from %s: %s", c->peer_name, why);
    *rc = MCP_ERR_USAGE;
    goto fail;
  }
  c->ops->link_up(c);
  c->deadline_ns = mcp_clock_ns() + (uint64_t)c->cfg.connect_timeout_s * 1000000000ull;
  if (qp_thread_start(c) != 0)
    goto fail;
  lc->accepting = c;
  return 0;
fail:
  if (c->error == 0) {
    MCP_WARN("accept on %s%s from %s failed while setting up the connection", c->devs[0].dc->info->name,
             c->ndevs > 1 ? " (fused)" : "", c->peer_name);
    send_reject(c, MCP_WIRE_REJECT_RESOURCES, "the accepting side could not set up its QPs (see its log)");
  }
  mcp_comm_destroy(c);
  return *rc;
}

/* The QPs are at RTS: post the receive WRs and answer with our endpoint. */
static void accept_answer(struct mcp_link *c)
{
  struct mcp_wire_msg m;
  int i, st = qp_thread_poll(c);

  if (st == 0)
    return;
  if (st < 0) {
    send_reject(c, MCP_WIRE_REJECT_RESOURCES,
                "the accepting side could not bring its QPs to RTS (see its log)");
    mcp_comm_fail(c, MCP_ERR_SYSTEM, "accept from %s: queue pairs could not be connected", c->peer_name);
    return;
  }
  for (i = 0; i < c->nqps; i++) {
    if (mcp_qp_post_recvs(c, i, MCP_RQ_DEPTH) != 0) {
      send_reject(c, MCP_WIRE_REJECT_RESOURCES, "the accepting side could not post receives");
      mcp_comm_fail(c, MCP_ERR_SYSTEM, "accept from %s: posting receive WRs failed", c->peer_name);
      return;
    }
  }
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_ACK;
  m.u.conn_ack = c->local;
  if (mcp_oob_stream_send(c->stream, &m) != 0) {
    mcp_comm_fail(c, MCP_ERR_REMOTE, "accept from %s: cannot send the answer", c->peer_name);
    return;
  }
  c->state = ST_WAIT_READY;
}

/* The listen's one accept slot waits for READY as long as the connector's TCP connection
 * stands (a late peer), unless another request waits on the same listen and this one has
 * had MCPNET_CONNECT_TIMEOUT: then the slot goes to the next one, so a connector that
 * holds the key but never finishes cannot block the listen. 1 when it gave way. */
int mcp_conn_accept_yields(uint64_t waited_ms, int connect_timeout_s, unsigned pending)
{
  return pending > 0 && waited_ms > (uint64_t)connect_timeout_s * 1000u;
}

static int accept_yield(struct mcp_listen_comm *lc, struct mcp_link *c)
{
  uint64_t waited_ms = mcp_clock_coarse_ms() - c->wait_since_ms;
  int limit_s = c->cfg.connect_timeout_s;

  if (!mcp_conn_accept_yields(waited_ms, limit_s, mcp_oob_listener_pending(lc->listener)))
    return 0;
  MCP_WARN("accept from %s: no READY after %llu s while another connection request waits on this listen; "
           "this one is abandoned for it (MCPNET_CONNECT_TIMEOUT=%d s)",
           c->peer_name, (unsigned long long)(waited_ms / 1000u), limit_s);
  send_reject(c, MCP_WIRE_REJECT_INTERNAL,
              "the accepting side took another request: this connection sent no READY in time");
  lc->accepting = NULL;
  mcp_comm_destroy(c);
  return 1;
}

int mcp_conn_accept(void *listen_comm, void **recv_comm)
{
  struct mcp_listen_comm *lc = listen_comm;
  struct mcp_oob_request *req;
  struct mcp_wire_msg m;
  struct mcp_link *c;
  int rc;

  *recv_comm = NULL;
  if (lc == NULL || lc->kind != MCP_COMM_LISTEN) {
    MCP_WARN("accept: %p is not a listen comm of mcpnet", listen_comm);
    return MCP_ERR_ARG;
  }
  if (lc->accepting == NULL) {
    if (!mcp_oob_listener_take(lc->listener, &req))
      return 0;
    if (accept_start(lc, req, &rc) != 0)
      return rc;
  }
  c = lc->accepting;
  if (c->state == ST_WAIT_QP)
    accept_answer(c);
  if (c->error == 0 && c->state == ST_WAIT_READY) {
    if (mcp_oob_stream_recv(c->stream, &m)) {
      if (m.type == MCP_WIRE_CONN_READY)
        c->state = ST_DONE;
      else
        mcp_comm_fail(c, MCP_ERR_REMOTE, "accept from %s: expected READY, got %s%s%s", c->peer_name,
                      mcp_wire_type_name(m.type), m.type == MCP_WIRE_CONN_REJECT ? ": " : "",
                      m.type == MCP_WIRE_CONN_REJECT ? m.u.reject.reason : "");
    } else if (mcp_oob_stream_dead(c->stream)) {
      mcp_comm_fail(c, MCP_ERR_REMOTE, "accept from %s: %s", c->peer_name,
                    mcp_oob_stream_dead_reason(c->stream));
    } else if (mcp_oob_stream_closed_by_peer(c->stream)) {
      mcp_comm_fail(c, MCP_ERR_REMOTE,
                    "accept from %s: the connecting side abandoned this connection "
                    "(CLOSE before READY; see its log)",
                    c->peer_name);
    }
  }
  if (c->error == 0 && c->state != ST_DONE) {
    /* Only our own setup thread has a deadline; the connector may be late to READY. */
    if (c->state == ST_WAIT_READY) {
      mcp_link_status_setup(c, MCP_STATUS_WAIT_CONNECT);
      if (c->wait_since_ms == 0)
        c->wait_since_ms = mcp_clock_coarse_ms();
      if (accept_yield(lc, c))
        return 0;
      wait_notice(c, "its connect to finish (READY)");
      return 0;
    }
    mcp_link_status_setup(c, MCP_STATUS_CONNECTING);
    if (mcp_clock_ns() <= c->deadline_ns)
      return 0;
    mcp_comm_fail(c, MCP_ERR_REMOTE,
                  "accept from %s: the queue pairs were not connected within "
                  "MCPNET_CONNECT_TIMEOUT=%d s",
                  c->peer_name, c->cfg.connect_timeout_s);
  }
  lc->accepting = NULL;
  if (c->error != 0) {
    send_reject(c, MCP_WIRE_REJECT_INTERNAL, c->errmsg);
    rc = c->error;
    mcp_comm_destroy(c);
    return rc;
  }
  mcp_link_status_ready(c);
  MCP_INFO(NCCL_NET, "accepted %s <- %s: %d QP(s) from %#x, MTU %d, SL %d, TC %d",
           mcp_link_dev_of(c, 0)->dc->info->name, c->peer_name, c->nqps, c->qp[0]->qp_num,
           mcp_fabric_mtu_bytes(c->mtu), c->sl, c->tc);
  *recv_comm = c;
  return 0;
}
