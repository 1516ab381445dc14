/*
 * uv_adapter.c - the emulated adapter: the fabric folder, devices and their fabric ids,
 * and the wire between processes with the RC transport's rules.
 *
 * A device listens on <fabric>/d<id>.sock; its GIDs carry the id (::ffff:127.a.b.c and
 * fe80::ff:fea:bbcc), so the destination GID of a QP names the socket to reach. Each
 * (local device, destination device) pair is a path: one connection, a transmit thread
 * that sends every request of the QPs bound to it in posting order per QP, and a
 * receive thread for the responses. The responder side of a connection is one thread
 * that executes the requests in arrival order on this process's memory and answers
 * each on the same connection. So per QP, as on RC:
 *
 * - Every request carries its PSN (one per MTU-sized packet of the message, as the
 *   wire would count them). The responder executes only the PSN it expects; one behind
 *   it is a duplicate (acknowledged again, a read executed again), one ahead of it is
 *   dropped (a packet before it was lost).
 * - Rkeys, ranges, access rights and the protection domain are checked by the
 *   responder: a refused request is NAKed (the requester completes it with
 *   IBV_WC_REM_ACCESS_ERR and its QP goes to error) and the responder's QP goes to
 *   error with IBV_EVENT_QP_ACCESS_ERR, as on RC. Local keys are checked by the
 *   requester when it sends (IBV_WC_LOC_PROT_ERR).
 * - A write with immediate or a send with no receive posted is NAKed "receiver not
 *   ready": the requester waits the responder's min_rnr_timer and sends it again,
 *   rnr_retry times (7: for ever), then IBV_WC_RNR_RETRY_EXC_ERR.
 * - A request not acknowledged within the QP's timeout (4.096 us << timeout) is sent
 *   again with everything after it (go-back-N), retry_cnt times, then
 *   IBV_WC_RETRY_EXC_ERR and the QP goes to error. A lost packet, a link that is down,
 *   a port that is down, a peer process that died (its socket is gone): nothing answers,
 *   and that is how each of them looks to the requester, as on a real fabric.
 * - Completions are generated in posting order per QP; unsignalled work completes
 *   silently unless it fails.
 *
 * Faults (uv_ctl.c) act here: a port down or a link down drops every packet of the
 * device or toward a peer process, both ways; a drop percentage loses packets at
 * random; a delay holds each request before it leaves.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "uv.h"

struct uv_adapter uv = {.lock = PTHREAD_MUTEX_INITIALIZER, .ctl_fd = -1};

#define UV_MAGIC 0x55564231u /* "UVB1" */

enum { F_HELLO = 1, F_REQ, F_ACK, F_READ_RESP };
enum { NAK_NONE = 0, NAK_RNR, NAK_ACCESS, NAK_INVALID, NAK_OPERATION };

/* One frame on a connection; a payload of len bytes follows REQ (write, send) and
 * READ_RESP. Host byte order: both ends are on this host. */
struct uv_frame {
  uint32_t magic;
  uint8_t type, opcode, syndrome, rnr_timer;
  uint32_t id, pid; /* HELLO: the sender's device id and process */
  uint32_t dst_qpn; /* REQ: the responder's QP; responses: the requester's */
  uint32_t src_qpn; /* REQ: the requester's QP */
  uint32_t psn, npkts;
  uint32_t len, rkey, imm;
  uint32_t pad;
  uint64_t raddr;
};

struct uv_conn {
  int fd;
  int refs;
  int dead;
  int peer_pid;
};

struct uv_path {
  struct uv_path *next;
  struct uv_dev *dev;
  uint32_t dest_id;
  struct uv_conn *conn;
  int peer_pid; /* learnt from the peer's HELLO; 0 until then */
  pthread_cond_t cond;
  struct uv_qp *qps, *rr;
  int kicked;
};

uint64_t uv_now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int uv_rand_pct(void)
{
  uv.rng ^= uv.rng << 13;
  uv.rng ^= uv.rng >> 7;
  uv.rng ^= uv.rng << 17;
  return (int)(uv.rng % 100);
}

/* ---- GIDs and fabric ids ---- */

static void gids_of(uint32_t id, union ibv_gid *gid)
{
  int i;

  for (i = 0; i < UV_GIDS; i++)
    memset(gid[i].raw, 0, 16);
  /* 0, 1: link-local from a made-up MAC 02:00:00:<id>; 2, 3: ::ffff:127.<id> (RoCE v1, v2) */
  for (i = 0; i < 2; i++) {
    gid[i].raw[0] = 0xfe;
    gid[i].raw[1] = 0x80;
    gid[i].raw[11] = 0xff;
    gid[i].raw[12] = 0xfe;
    gid[i].raw[13] = (uint8_t)(id >> 16);
    gid[i].raw[14] = (uint8_t)(id >> 8);
    gid[i].raw[15] = (uint8_t)id;
  }
  for (i = 2; i < 4; i++) {
    gid[i].raw[10] = gid[i].raw[11] = 0xff;
    gid[i].raw[12] = 127;
    gid[i].raw[13] = (uint8_t)(id >> 16);
    gid[i].raw[14] = (uint8_t)(id >> 8);
    gid[i].raw[15] = (uint8_t)id;
  }
}

int uv_dev_by_gid(const union ibv_gid *gid, uint32_t *id)
{
  static const uint8_t ll[13] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe};
  static const uint8_t v4[13] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127};

  if (memcmp(gid->raw, ll, 13) != 0 && memcmp(gid->raw, v4, 13) != 0)
    return -1;
  *id = (uint32_t)gid->raw[13] << 16 | (uint32_t)gid->raw[14] << 8 | gid->raw[15];
  return 0;
}

/* ---- plain I/O ---- */

/* A peer that stops reading (a stopped process) must not hold a thread of ours for
 * ever: a write that makes no progress for this long breaks the connection, and what
 * it carried counts as lost (the QP's timers take over, as on a wire). */
static void send_timeout(int fd)
{
  struct timeval tv = {.tv_sec = 5, .tv_usec = 0};

  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int write_all(int fd, const void *buf, size_t len)
{
  size_t done = 0;

  while (done < len) {
    ssize_t n = send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    done += (size_t)n;
  }
  return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
  size_t done = 0;

  while (done < len) {
    ssize_t n = recv(fd, (char *)buf + done, len - done, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    done += (size_t)n;
  }
  return 0;
}

static int discard(int fd, size_t len, char *buf)
{
  while (len > 0) {
    size_t k = len < UV_CHUNK ? len : UV_CHUNK;
    if (read_all(fd, buf, k) != 0)
      return -1;
    len -= k;
  }
  return 0;
}

static void conn_put(struct uv_conn *c)
{
  if (--c->refs > 0)
    return;
  close(c->fd);
  free(c);
}

/* ---- faults ---- */

const struct uv_fault *uv_fault_for(int pid)
{
  int i;

  for (i = 0; i < uv.nfault; i++)
    if (uv.fault[i].pid == pid && pid != 0)
      return &uv.fault[i];
  for (i = 0; i < uv.nfault; i++)
    if (uv.fault[i].pid == 0)
      return &uv.fault[i];
  return NULL;
}

/* Is a packet between dev and the process pid lost (link or port down, or a drop)? */
static int packet_lost(struct uv_dev *dev, int pid, int qp_drop)
{
  const struct uv_fault *f = uv_fault_for(pid);

  if (dev->port_state != IBV_PORT_ACTIVE || dev->fatal || (f != NULL && f->down))
    return 1;
  if ((f != NULL && f->drop_pct > 0 && uv_rand_pct() < f->drop_pct) ||
      (qp_drop > 0 && uv_rand_pct() < qp_drop))
    return 1;
  return 0;
}

/* ---- paths ---- */

static void *path_tx_main(void *arg);

struct uv_path *uv_path_get(struct uv_dev *dev, uint32_t dest_id)
{
  struct uv_path *p;
  pthread_condattr_t ca;
  pthread_t t;

  for (p = uv.paths; p != NULL; p = p->next)
    if (p->dev == dev && p->dest_id == dest_id)
      return p;
  p = calloc(1, sizeof(*p));
  if (p == NULL)
    return NULL;
  p->dev = dev;
  p->dest_id = dest_id;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&t, NULL, path_tx_main, p) != 0) {
    free(p);
    return NULL;
  }
  pthread_detach(t);
  p->next = uv.paths;
  uv.paths = p;
  return p;
}

void uv_path_kick(struct uv_path *p)
{
  if (p == NULL)
    return;
  p->kicked = 1;
  pthread_cond_signal(&p->cond);
}

void uv_path_attach_qp(struct uv_path *p, struct uv_qp *qp)
{
  qp->path = p;
  qp->pnext = p->qps;
  p->qps = qp;
}

void uv_path_detach_qp(struct uv_qp *qp)
{
  struct uv_path *p = qp->path;
  struct uv_qp **pp;

  if (p == NULL)
    return;
  for (pp = &p->qps; *pp != NULL; pp = &(*pp)->pnext)
    if (*pp == qp) {
      *pp = qp->pnext;
      break;
    }
  if (p->rr == qp)
    p->rr = NULL;
  qp->path = NULL;
  qp->pnext = NULL;
}

static uint32_t npkts_of(const struct uv_qp *qp, uint32_t len)
{
  uint32_t mtu = 128u << (qp->path_mtu ? qp->path_mtu : IBV_MTU_1024);

  return len == 0 ? 1 : (len + mtu - 1) / mtu;
}

/* Everything from the head on that was sent goes again (go-back-N), after `after` ns. */
static void rewind_from(struct uv_qp *qp, uint64_t from, uint64_t eligible)
{
  uint64_t i;

  for (i = from; i < qp->next_send; i++) {
    struct uv_swqe *w = &qp->sq[i % (uint64_t)qp->max_send_wr];
    if (w->state == UV_W_SENT || w->state == UV_W_SENDING) {
      w->state = UV_W_POSTED;
      w->eligible_ns = eligible;
    }
  }
  if (from < qp->next_send)
    qp->next_send = from;
}

static struct uv_swqe *swqe_at(struct uv_qp *qp, uint64_t i)
{
  return &qp->sq[i % (uint64_t)qp->max_send_wr];
}

/* Timers of the QP's oldest request: a timeout sends everything again, or fails the QP
 * once its retries ran out. Returns when it next needs a look. */
static uint64_t qp_timers(struct uv_qp *qp, uint64_t now)
{
  uint64_t t = uv_qp_timeout_ns(qp), i;

  for (i = qp->sq_head; i < qp->next_send; i++) {
    struct uv_swqe *w = swqe_at(qp, i);
    if (w->state == UV_W_ACKED)
      continue;
    if (w->state != UV_W_SENT || t == UINT64_MAX)
      return UINT64_MAX;
    if (now - w->sent_ns < t)
      return w->sent_ns + t;
    if (w->retries >= qp->retry_cnt) {
      qp->dev->cnt[UV_CNT_RETRY_EXC]++;
      uv.cnt_dirty = 1;
      uv_sq_fail(qp, w, IBV_WC_RETRY_EXC_ERR);
      return UINT64_MAX;
    }
    w->retries++;
    qp->dev->cnt[UV_CNT_ACK_TIMEOUT]++;
    uv.cnt_dirty = 1;
    rewind_from(qp, i, now);
    return now;
  }
  return UINT64_MAX;
}

/* The next request of qp to send now, or NULL (with *when: when one may be). */
static struct uv_swqe *qp_next(struct uv_path *p, struct uv_qp *qp, uint64_t now, uint64_t *when)
{
  const struct uv_fault *f = uv_fault_for(p->peer_pid);
  int delay_ms = qp->delay_ms > 0 ? qp->delay_ms : f != NULL ? f->delay_ms : 0;
  struct uv_swqe *w;

  while (qp->next_send < qp->sq_tail && swqe_at(qp, qp->next_send)->state == UV_W_ACKED)
    qp->next_send++;
  if (qp->next_send == qp->sq_tail)
    return NULL;
  w = swqe_at(qp, qp->next_send);
  if (w->state != UV_W_POSTED)
    return NULL;
  if (delay_ms > 0 && !w->delayed) {
    w->delayed = 1;
    w->eligible_ns = now + (uint64_t)delay_ms * 1000000ull;
  }
  if (w->eligible_ns > now) {
    if (w->eligible_ns < *when)
      *when = w->eligible_ns;
    return NULL;
  }
  return w;
}

/* What the transmit thread sends, copied under the lock (the slot may be reused once
 * the lock is let go, should the QP be reset or fail meanwhile). */
struct tx_job {
  struct uv_frame f;
  int nsge;
  struct uv_mr *mr[UV_MAX_SGE];
  uint64_t off[UV_MAX_SGE];
  uint32_t len[UV_MAX_SGE];
  unsigned char inl[UV_MAX_INLINE];
  int inl_len;
};

/* Checks the local keys of w and fills the job; 0, or the status w fails with. */
static int tx_prepare(struct uv_qp *qp, struct uv_swqe *w, struct tx_job *j)
{
  int i;

  memset(&j->f, 0, sizeof(j->f));
  j->nsge = 0;
  j->inl_len = 0;
  if (w->inl) {
    memcpy(j->inl, w->inl_data, w->len);
    j->inl_len = (int)w->len;
  } else {
    for (i = 0; i < w->nsge; i++) {
      const struct ibv_sge *s = &w->sge[i];
      struct uv_mr *m;

      if (s->length == 0)
        continue;
      m = uv_mr_find(qp->dev, s->lkey);
      if (m == NULL || m->pd != qp->pd || s->addr < m->iova || s->addr + s->length > m->iova + m->len ||
          (w->opcode == IBV_WR_RDMA_READ && !(m->access & IBV_ACCESS_LOCAL_WRITE)))
        return IBV_WC_LOC_PROT_ERR;
      j->mr[j->nsge] = m;
      j->off[j->nsge] = s->addr - m->iova;
      j->len[j->nsge] = s->length;
      j->nsge++;
    }
  }
  if (!w->has_psn) {
    w->has_psn = 1;
    w->psn = qp->next_psn;
    w->npkts = npkts_of(qp, w->len);
    qp->next_psn = (qp->next_psn + w->npkts) & UV_PSN_MASK;
  }
  j->f.magic = UV_MAGIC;
  j->f.type = F_REQ;
  j->f.opcode = (uint8_t)w->opcode;
  j->f.dst_qpn = qp->dest_qpn;
  j->f.src_qpn = qp->qp.qp_num;
  j->f.psn = w->psn;
  j->f.npkts = w->npkts;
  j->f.len = w->len;
  j->f.rkey = w->rkey;
  j->f.imm = w->imm;
  j->f.raddr = w->raddr;
  return 0;
}

static void *path_rx_main(void *arg);

struct rx_arg {
  struct uv_path *p;
  struct uv_conn *c;
};

/* A connection to the path's device: HELLO both ways, then a receive thread. NULL when
 * the device is not there (its process is gone: the packet is lost). Unlocked. */
static struct uv_conn *path_connect(struct uv_path *p)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  struct uv_frame h;
  struct uv_conn *c;
  struct rx_arg *ra;
  pthread_t t;
  int fd;

  snprintf(a.sun_path, sizeof(a.sun_path), "%s/d%06x.sock", uv.fabric, p->dest_id);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return NULL;
  memset(&h, 0, sizeof(h));
  h.magic = UV_MAGIC;
  h.type = F_HELLO;
  h.id = p->dev->id;
  h.pid = (uint32_t)getpid();
  send_timeout(fd);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || write_all(fd, &h, sizeof(h)) != 0 ||
      read_all(fd, &h, sizeof(h)) != 0 || h.magic != UV_MAGIC || h.type != F_HELLO) {
    close(fd);
    return NULL;
  }
  c = calloc(1, sizeof(*c));
  ra = calloc(1, sizeof(*ra));
  if (c == NULL || ra == NULL) {
    free(c);
    free(ra);
    close(fd);
    return NULL;
  }
  c->fd = fd;
  c->refs = 2; /* the path's and the receive thread's */
  c->peer_pid = (int)h.pid;
  ra->p = p;
  ra->c = c;
  if (pthread_create(&t, NULL, path_rx_main, ra) != 0) {
    free(ra);
    close(fd);
    free(c);
    return NULL;
  }
  pthread_detach(t);
  return c;
}

/* Sends job j on the path's connection (connecting first if need be); 0, or -1 when the
 * packet was lost on the way (no connection, a broken one, unreadable local memory is
 * sent as what could be read: the local error shows at the requester instead). */
static int tx_send(struct uv_path *p, struct tx_job *j, char *buf, int *mem_err)
{
  struct uv_conn *c;
  int i, rc = 0;

  pthread_mutex_lock(&uv.lock);
  c = p->conn;
  if (c != NULL && c->dead) {
    p->conn = NULL;
    conn_put(c);
    c = NULL;
  }
  if (c != NULL)
    c->refs++;
  pthread_mutex_unlock(&uv.lock);
  if (c == NULL) {
    c = path_connect(p);
    if (c == NULL)
      return -1;
    pthread_mutex_lock(&uv.lock);
    if (p->conn != NULL) /* cannot happen: only this thread connects */
      conn_put(p->conn);
    p->conn = c;
    p->peer_pid = c->peer_pid;
    c->refs++;
    pthread_mutex_unlock(&uv.lock);
  }
  if (write_all(c->fd, &j->f, sizeof(j->f)) != 0)
    rc = -1;
  if (rc == 0 && j->f.opcode != IBV_WR_RDMA_READ) {
    if (j->inl_len > 0) {
      rc = write_all(c->fd, j->inl, (size_t)j->inl_len);
    } else {
      for (i = 0; i < j->nsge && rc == 0; i++) {
        uint64_t done = 0;
        while (done < j->len[i] && rc == 0) {
          size_t k = j->len[i] - done < UV_CHUNK ? j->len[i] - done : UV_CHUNK;
          if (uv_mem_read(j->mr[i], j->off[i] + done, buf, k) != 0) {
            memset(buf, 0, k);
            *mem_err = 1;
          }
          rc = write_all(c->fd, buf, k);
          done += k;
        }
      }
    }
  }
  pthread_mutex_lock(&uv.lock);
  if (rc != 0 && !c->dead) {
    c->dead = 1;
    shutdown(c->fd, SHUT_RDWR);
  }
  conn_put(c);
  pthread_mutex_unlock(&uv.lock);
  return rc;
}

static void *path_tx_main(void *arg)
{
  struct uv_path *p = arg;
  char *buf = malloc(UV_CHUNK);
  struct tx_job *j = malloc(sizeof(*j));

  if (buf == NULL || j == NULL)
    abort(); /* the adapter cannot work without its buffers */
  pthread_mutex_lock(&uv.lock);
  for (;;) {
    uint64_t now = uv_now_ns(), when = now + 100000000ull;
    struct uv_qp *qp, *pick = NULL, *start;
    struct uv_swqe *w = NULL;
    struct timespec ts;

    p->kicked = 0;
    for (qp = p->qps; qp != NULL; qp = qp->pnext)
      if (qp->state == IBV_QPS_RTS) {
        uint64_t t = qp_timers(qp, now);
        if (t < when)
          when = t;
      }
    /* Round robin over the QPs, one request each turn. */
    start = p->rr != NULL ? p->rr->pnext : NULL;
    if (start == NULL)
      start = p->qps;
    for (qp = start; qp != NULL && pick == NULL;) {
      if (qp->state == IBV_QPS_RTS && (w = qp_next(p, qp, now, &when)) != NULL)
        pick = qp;
      qp = qp->pnext != NULL ? qp->pnext : p->qps;
      if (qp == start)
        break;
    }
    if (pick != NULL) {
      uint32_t epoch = pick->epoch;
      int st, i, mem_err = 0, lost;

      p->rr = pick;
      st = tx_prepare(pick, w, j);
      if (st != 0) {
        pick->dev->cnt[UV_CNT_LOC_PROT]++;
        uv.cnt_dirty = 1;
        uv_sq_fail(pick, w, (enum ibv_wc_status)st);
        continue;
      }
      w->state = UV_W_SENDING;
      pick->next_send++;
      lost = packet_lost(pick->dev, p->peer_pid, pick->drop_pct);
      if (!lost) {
        pick->busy++;
        for (i = 0; i < j->nsge; i++)
          j->mr[i]->busy++;
        pthread_mutex_unlock(&uv.lock);
        lost = tx_send(p, j, buf, &mem_err) != 0;
        pthread_mutex_lock(&uv.lock);
        for (i = 0; i < j->nsge; i++)
          j->mr[i]->busy--;
        pick->busy--;
        pthread_cond_broadcast(&uv_idle_cond);
      }
      if (lost) {
        pick->dev->cnt[UV_CNT_DROPPED]++;
      } else {
        pick->dev->cnt[UV_CNT_XMIT_PKTS] += j->f.npkts;
        pick->dev->cnt[UV_CNT_XMIT_BYTES] += j->f.len;
      }
      uv.cnt_dirty = 1;
      if (pick->epoch == epoch && w->state == UV_W_SENDING) {
        w->state = UV_W_SENT;
        w->sent_ns = uv_now_ns();
        if (mem_err)
          uv_sq_fail(pick, w, IBV_WC_LOC_PROT_ERR);
      }
      continue;
    }
    if (p->kicked)
      continue;
    ts.tv_sec = (time_t)(when / 1000000000ull);
    ts.tv_nsec = (long)(when % 1000000000ull);
    pthread_cond_timedwait(&p->cond, &uv.lock, &ts);
  }
  return NULL;
}

/* The requests before w that are not reads were executed: the responder answers in
 * order, so an answer to w acknowledges them too (RC's coalesced ACK). */
static void ack_before(struct uv_qp *qp, struct uv_swqe *w)
{
  uint64_t i;

  for (i = qp->sq_head; i < qp->next_send; i++) {
    struct uv_swqe *x = swqe_at(qp, i);
    if (x == w)
      break;
    if ((x->state == UV_W_SENT || x->state == UV_W_SENDING) && x->opcode != IBV_WR_RDMA_READ)
      x->state = UV_W_ACKED;
  }
}

/* An answer that moved the QP on restarts the transport timer of what is still out, as
 * RC's timer restarts on every acknowledgement that makes progress: a peer that is slow
 * but answering is not taken for a lost path. */
static void timer_restart(struct uv_qp *qp, uint64_t now)
{
  uint64_t i;

  for (i = qp->sq_head; i < qp->next_send; i++) {
    struct uv_swqe *x = swqe_at(qp, i);
    if (x->state == UV_W_SENT && x->sent_ns < now)
      x->sent_ns = now;
  }
}

static struct uv_swqe *find_sent(struct uv_qp *qp, uint32_t psn)
{
  uint64_t i;

  for (i = qp->sq_head; i < qp->next_send; i++) {
    struct uv_swqe *w = swqe_at(qp, i);
    /* SENDING too: the answer can beat the transmit thread back to the lock. */
    if (w->has_psn && w->psn == psn && (w->state == UV_W_SENT || w->state == UV_W_SENDING))
      return w;
  }
  return NULL;
}

/* A read's data: into the local buffers of w, which were checked when it was sent. */
static int read_resp_land(struct uv_qp *qp, struct uv_swqe *w, int fd, uint32_t len, char *buf)
{
  struct uv_mr *mr[UV_MAX_SGE];
  uint64_t off[UV_MAX_SGE];
  uint32_t sl[UV_MAX_SGE];
  uint32_t epoch = qp->epoch, left = len;
  int n = 0, i, rc = 0;

  for (i = 0; i < w->nsge; i++) {
    struct uv_mr *m = w->sge[i].length > 0 ? uv_mr_find(qp->dev, w->sge[i].lkey) : NULL;
    if (m == NULL)
      continue;
    mr[n] = m;
    off[n] = w->sge[i].addr - m->iova;
    sl[n] = w->sge[i].length;
    m->busy++;
    n++;
  }
  qp->busy++;
  pthread_mutex_unlock(&uv.lock);
  for (i = 0; i < n && rc == 0 && left > 0; i++) {
    uint64_t done = 0, want = sl[i] < left ? sl[i] : left;
    while (done < want && rc == 0) {
      size_t k = want - done < UV_CHUNK ? want - done : UV_CHUNK;
      rc = read_all(fd, buf, k);
      if (rc == 0)
        uv_mem_write(mr[i], off[i] + done, buf, k);
      done += k;
    }
    left -= (uint32_t)want;
  }
  if (rc == 0 && left > 0)
    rc = discard(fd, left, buf);
  pthread_mutex_lock(&uv.lock);
  for (i = 0; i < n; i++)
    mr[i]->busy--;
  qp->busy--;
  pthread_cond_broadcast(&uv_idle_cond);
  if (rc != 0)
    return -1;
  return qp->epoch == epoch ? 1 : 0;
}

static void *path_rx_main(void *arg)
{
  struct rx_arg *ra = arg;
  struct uv_path *p = ra->p;
  struct uv_conn *c = ra->c;
  char *buf = malloc(UV_CHUNK);
  struct uv_frame f;

  free(ra);
  while (buf != NULL && read_all(c->fd, &f, sizeof(f)) == 0 && f.magic == UV_MAGIC) {
    struct uv_qp *qp;
    struct uv_swqe *w;
    uint32_t payload = f.type == F_READ_RESP ? f.len : 0;

    pthread_mutex_lock(&uv.lock);
    qp = uv_qp_find(p->dev, f.dst_qpn);
    if (packet_lost(p->dev, c->peer_pid, 0) || qp == NULL || qp->path != p || qp->state != IBV_QPS_RTS ||
        (w = find_sent(qp, f.psn)) == NULL) {
      pthread_mutex_unlock(&uv.lock);
      if (discard(c->fd, payload, buf) != 0)
        break;
      continue;
    }
    p->dev->cnt[UV_CNT_RCV_PKTS]++;
    uv.cnt_dirty = 1;
    if (f.type == F_READ_RESP && f.syndrome == NAK_NONE) {
      int r = read_resp_land(qp, w, c->fd, f.len, buf);
      if (r < 0) {
        pthread_mutex_unlock(&uv.lock);
        break;
      }
      if (r > 0 && (w->state == UV_W_SENT || w->state == UV_W_SENDING)) {
        ack_before(qp, w);
        w->state = UV_W_ACKED;
        uv_sq_complete_ready(qp);
        timer_restart(qp, uv_now_ns());
      }
    } else if (f.syndrome == NAK_NONE) {
      if (w->opcode != IBV_WR_RDMA_READ) {
        ack_before(qp, w);
        w->state = UV_W_ACKED;
        uv_sq_complete_ready(qp);
        timer_restart(qp, uv_now_ns());
      }
    } else if (f.syndrome == NAK_RNR) {
      p->dev->cnt[UV_CNT_RNR_NAK]++;
      ack_before(qp, w);
      uv_sq_complete_ready(qp);
      if (qp->rnr_retry != 7 && w->rnr_retries >= qp->rnr_retry) {
        p->dev->cnt[UV_CNT_RNR_EXC]++;
        uv_sq_fail(qp, w, IBV_WC_RNR_RETRY_EXC_ERR);
      } else {
        uint64_t i;
        w->rnr_retries++;
        for (i = qp->sq_head; i < qp->next_send && swqe_at(qp, i) != w; i++)
          ;
        rewind_from(qp, i, uv_now_ns() + uv_rnr_delay_ns(f.rnr_timer));
        uv_path_kick(p);
      }
    } else {
      uv_sq_fail(qp, w,
                 f.syndrome == NAK_ACCESS      ? IBV_WC_REM_ACCESS_ERR
                   : f.syndrome == NAK_INVALID ? IBV_WC_REM_INV_REQ_ERR
                                               : IBV_WC_REM_OP_ERR);
    }
    pthread_mutex_unlock(&uv.lock);
    if (f.type == F_READ_RESP && f.syndrome != NAK_NONE && discard(c->fd, payload, buf) != 0)
      break;
  }
  free(buf);
  pthread_mutex_lock(&uv.lock);
  if (!c->dead) {
    c->dead = 1;
    shutdown(c->fd, SHUT_RDWR);
  }
  conn_put(c);
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&uv.lock);
  return NULL;
}

/* ---- the responder ---- */

struct resp {
  struct uv_dev *dev;
  int fd;
  int peer_pid;
  char *buf;
};

static int respond(struct resp *r, const struct uv_frame *req, int type, int syndrome, int rnr_timer)
{
  struct uv_frame a;

  memset(&a, 0, sizeof(a));
  a.magic = UV_MAGIC;
  a.type = (uint8_t)type;
  a.syndrome = (uint8_t)syndrome;
  a.rnr_timer = (uint8_t)rnr_timer;
  a.dst_qpn = req->src_qpn;
  a.psn = req->psn;
  a.len = type == F_READ_RESP && syndrome == NAK_NONE ? req->len : 0;
  return write_all(r->fd, &a, sizeof(a));
}

/* The MR rkey grants for [raddr, raddr+len) with `right` on qp's PD, or NULL. */
static struct uv_mr *rkey_check(struct uv_qp *qp, uint32_t rkey, uint64_t raddr, uint32_t len, unsigned right)
{
  struct uv_mr *m = uv_mr_find(qp->dev, rkey);

  if (m == NULL || m->pd != qp->pd || !(m->access & right) || !(qp->access & right) || raddr < m->iova ||
      raddr + len > m->iova + m->len || raddr + len < raddr)
    return NULL;
  return m;
}

/* A refused request: the requester hears why, and this QP fails with an async event. */
static int refuse(struct resp *r, struct uv_qp *qp, const struct uv_frame *f, int syndrome)
{
  r->dev->cnt[UV_CNT_REM_ACCESS] += syndrome == NAK_ACCESS;
  uv.cnt_dirty = 1;
  uv_qp_event(qp, syndrome == NAK_ACCESS ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR);
  uv_qp_error(qp);
  pthread_mutex_unlock(&uv.lock);
  if (f->opcode != IBV_WR_RDMA_READ && discard(r->fd, f->len, r->buf) != 0)
    return -1;
  return respond(r, f, f->opcode == IBV_WR_RDMA_READ ? F_READ_RESP : F_ACK, syndrome, 0);
}

/* Reads len payload bytes from the connection into the destinations (MRs held busy). */
static int land(struct resp *r, struct uv_mr **mr, const uint64_t *off, const uint32_t *sl, int n,
                uint32_t len)
{
  int i;

  for (i = 0; i < n && len > 0; i++) {
    uint64_t done = 0, want = sl[i] < len ? sl[i] : len;
    while (done < want) {
      size_t k = want - done < UV_CHUNK ? want - done : UV_CHUNK;
      if (read_all(r->fd, r->buf, k) != 0)
        return -1;
      uv_mem_write(mr[i], off[i] + done, r->buf, k);
      done += k;
    }
    len -= (uint32_t)want;
  }
  return len > 0 ? discard(r->fd, len, r->buf) : 0;
}

/* Executes one request the responder expects (under the lock, which it lets go). */
static int execute(struct resp *r, struct uv_qp *qp, const struct uv_frame *f)
{
  struct uv_mr *mr[UV_MAX_SGE];
  uint64_t off[UV_MAX_SGE];
  uint32_t sl[UV_MAX_SGE];
  struct uv_rwqe rw;
  uint32_t epoch = qp->epoch;
  int n = 0, i, rc, consume = f->opcode != IBV_WR_RDMA_WRITE && f->opcode != IBV_WR_RDMA_READ;
  int is_send = f->opcode == IBV_WR_SEND || f->opcode == IBV_WR_SEND_WITH_IMM;
  struct ibv_wc wc;

  if (f->opcode != IBV_WR_RDMA_WRITE && f->opcode != IBV_WR_RDMA_WRITE_WITH_IMM && !is_send &&
      f->opcode != IBV_WR_RDMA_READ)
    return refuse(r, qp, f, NAK_INVALID);
  if (!is_send && f->len > 0) {
    unsigned right = f->opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
    if ((mr[0] = rkey_check(qp, f->rkey, f->raddr, f->len, right)) == NULL)
      return refuse(r, qp, f, NAK_ACCESS);
    off[0] = f->raddr - mr[0]->iova;
    sl[0] = f->len;
    n = 1;
  }
  if (consume) {
    if (qp->rq_head == qp->rq_tail) {
      /* Receiver not ready: no data lands, and the same PSN is expected again. */
      int timer = qp->min_rnr_timer;
      pthread_mutex_unlock(&uv.lock);
      if (discard(r->fd, f->len, r->buf) != 0)
        return -1;
      return respond(r, f, F_ACK, NAK_RNR, timer);
    }
    rw = qp->rq[qp->rq_head % (uint64_t)qp->max_recv_wr];
    if (is_send) {
      uint64_t room = 0;
      for (i = 0; i < rw.nsge; i++) {
        struct uv_mr *m = rw.sge[i].length > 0 ? uv_mr_find(qp->dev, rw.sge[i].lkey) : NULL;
        if (rw.sge[i].length == 0)
          continue;
        if (m == NULL || m->pd != qp->pd || !(m->access & IBV_ACCESS_LOCAL_WRITE) ||
            rw.sge[i].addr < m->iova || rw.sge[i].addr + rw.sge[i].length > m->iova + m->len) {
          n = -1;
          break;
        }
        mr[n] = m;
        off[n] = rw.sge[i].addr - m->iova;
        sl[n] = rw.sge[i].length;
        room += rw.sge[i].length;
        n++;
      }
      if (n < 0 || room < f->len) {
        /* The receive buffer is too small (or not ours): the receive fails here, the
         * request at the requester. */
        memset(&wc, 0, sizeof(wc));
        wc.wr_id = rw.wr_id;
        wc.status = n < 0 ? IBV_WC_LOC_PROT_ERR : IBV_WC_LOC_LEN_ERR;
        wc.opcode = IBV_WC_RECV;
        wc.qp_num = qp->qp.qp_num;
        qp->rq_head++;
        uv_cq_push(qp->rcq, &wc, qp, 0, 1);
        return refuse(r, qp, f, NAK_INVALID);
      }
    }
    qp->rq_head++;
  }
  if (f->opcode == IBV_WR_RDMA_READ) {
    qp->epsn = (qp->epsn + f->npkts) & UV_PSN_MASK;
    if (n > 0)
      mr[0]->busy++;
    qp->busy++;
    pthread_mutex_unlock(&uv.lock);
    rc = respond(r, f, F_READ_RESP, NAK_NONE, 0);
    for (uint32_t done = 0; rc == 0 && done < f->len;) {
      size_t k = f->len - done < UV_CHUNK ? f->len - done : UV_CHUNK;
      if (uv_mem_read(mr[0], off[0] + done, r->buf, k) != 0)
        memset(r->buf, 0, k);
      rc = write_all(r->fd, r->buf, k);
      done += (uint32_t)k;
    }
    pthread_mutex_lock(&uv.lock);
    if (n > 0)
      mr[0]->busy--;
    qp->busy--;
    pthread_cond_broadcast(&uv_idle_cond);
    pthread_mutex_unlock(&uv.lock);
    return rc;
  }
  for (i = 0; i < n; i++)
    mr[i]->busy++;
  qp->busy++;
  pthread_mutex_unlock(&uv.lock);
  rc = land(r, mr, off, sl, n, f->len);
  pthread_mutex_lock(&uv.lock);
  for (i = 0; i < n; i++)
    mr[i]->busy--;
  qp->busy--;
  pthread_cond_broadcast(&uv_idle_cond);
  if (rc != 0) {
    pthread_mutex_unlock(&uv.lock);
    return -1;
  }
  if (qp->epoch != epoch) {
    /* Reset or failed while the data came: the receive it took is flushed. */
    if (consume && qp->state == IBV_QPS_ERR) {
      memset(&wc, 0, sizeof(wc));
      wc.wr_id = rw.wr_id;
      wc.status = IBV_WC_WR_FLUSH_ERR;
      wc.opcode = IBV_WC_RECV;
      wc.qp_num = qp->qp.qp_num;
      uv_cq_push(qp->rcq, &wc, qp, 0, 1);
    }
    pthread_mutex_unlock(&uv.lock);
    return 0;
  }
  qp->epsn = (qp->epsn + f->npkts) & UV_PSN_MASK;
  if (consume) {
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = rw.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = is_send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM;
    wc.byte_len = f->len;
    wc.qp_num = qp->qp.qp_num;
    wc.src_qp = f->src_qpn;
    if (f->opcode == IBV_WR_RDMA_WRITE_WITH_IMM || f->opcode == IBV_WR_SEND_WITH_IMM) {
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = f->imm;
    }
    uv_cq_push(qp->rcq, &wc, qp, 0, 1);
  }
  pthread_mutex_unlock(&uv.lock);
  return respond(r, f, F_ACK, NAK_NONE, 0);
}

static void *responder_main(void *arg)
{
  struct resp *r = arg;
  struct uv_frame f;

  r->buf = malloc(UV_CHUNK);
  if (r->buf == NULL || read_all(r->fd, &f, sizeof(f)) != 0 || f.magic != UV_MAGIC || f.type != F_HELLO)
    goto out;
  r->peer_pid = (int)f.pid;
  f.id = r->dev->id;
  f.pid = (uint32_t)getpid();
  if (write_all(r->fd, &f, sizeof(f)) != 0)
    goto out;
  while (read_all(r->fd, &f, sizeof(f)) == 0 && f.magic == UV_MAGIC && f.type == F_REQ) {
    uint32_t payload = f.opcode == IBV_WR_RDMA_READ ? 0 : f.len, d;
    struct uv_qp *qp;

    pthread_mutex_lock(&uv.lock);
    qp = uv_qp_find(r->dev, f.dst_qpn);
    if (packet_lost(r->dev, r->peer_pid, qp != NULL ? qp->drop_pct : 0) || qp == NULL ||
        (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS)) {
      /* Lost, or for a QP that is not there or not ready: silently dropped. */
      r->dev->cnt[UV_CNT_DROPPED]++;
      uv.cnt_dirty = 1;
      pthread_mutex_unlock(&uv.lock);
      if (discard(r->fd, payload, r->buf) != 0)
        break;
      continue;
    }
    r->dev->cnt[UV_CNT_RCV_PKTS] += f.npkts;
    r->dev->cnt[UV_CNT_RCV_BYTES] += f.len;
    uv.cnt_dirty = 1;
    d = (f.psn - qp->epsn) & UV_PSN_MASK;
    if (d == 0) {
      if (execute(r, qp, &f) != 0)
        break;
      continue;
    }
    if (d < (1u << 23)) {
      /* Ahead of what is expected: a packet before it was lost. */
      r->dev->cnt[UV_CNT_OUT_OF_SEQ]++;
      pthread_mutex_unlock(&uv.lock);
      if (discard(r->fd, payload, r->buf) != 0)
        break;
      continue;
    }
    /* A duplicate: executed before, its answer lost. Said again; a read is read again. */
    r->dev->cnt[UV_CNT_DUPLICATE]++;
    if (f.opcode == IBV_WR_RDMA_READ) {
      uint32_t keep = qp->epsn;
      qp->epsn = f.psn;
      if (execute(r, qp, &f) != 0)
        break;
      pthread_mutex_lock(&uv.lock);
      qp->epsn = keep;
      pthread_mutex_unlock(&uv.lock);
      continue;
    }
    pthread_mutex_unlock(&uv.lock);
    if (discard(r->fd, payload, r->buf) != 0 || respond(r, &f, F_ACK, NAK_NONE, 0) != 0)
      break;
  }
out:
  close(r->fd);
  free(r->buf);
  free(r);
  return NULL;
}

static void *accept_main(void *arg)
{
  struct uv_dev *dev = arg;

  for (;;) {
    int fd = accept4(dev->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    struct resp *r;
    pthread_t t;

    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
        continue;
      return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
      close(fd);
      continue;
    }
    r->dev = dev;
    r->fd = fd;
    send_timeout(fd);
    if (pthread_create(&t, NULL, responder_main, r) != 0) {
      close(fd);
      free(r);
      continue;
    }
    pthread_detach(t);
  }
}

/* ---- setup ---- */

static int env_int(const char *name, int def, int lo, int hi)
{
  const char *v = getenv(name);
  char *end;
  long x;

  if (v == NULL || *v == '\0')
    return def;
  x = strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi) {
    fprintf(stderr, "mcp-uverbs: %s=%s is not in %d..%d; using %d\n", name, v, lo, hi, def);
    return def;
  }
  return (int)x;
}

void uv_rm_tree(const char *path)
{
  DIR *d = opendir(path);
  struct dirent *de;

  if (d != NULL) {
    while ((de = readdir(d)) != NULL) {
      char sub[PATH_MAX];
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
        continue;
      if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub))
        continue;
      if (de->d_type == DT_DIR)
        uv_rm_tree(sub);
      else
        unlink(sub);
    }
    closedir(d);
  }
  rmdir(path);
}

static int pid_dead(int pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

/* What processes that are gone left in the fabric folder. */
static void clean_stale(void)
{
  DIR *d = opendir(uv.fabric);
  struct dirent *de;

  if (d == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    char path[PATH_MAX], text[32] = "";
    unsigned id;
    int pid = 0;
    FILE *f;

    if (sscanf(de->d_name, "d%6x.pid", &id) == 1 && strstr(de->d_name, ".pid") != NULL) {
      snprintf(path, sizeof(path), "%s/%s", uv.fabric, de->d_name);
      f = fopen(path, "re");
      if (f != NULL) {
        if (fgets(text, sizeof(text), f) != NULL)
          pid = atoi(text);
        fclose(f);
      }
      if (pid_dead(pid)) {
        unlink(path);
        snprintf(path, sizeof(path), "%s/d%06x.sock", uv.fabric, id);
        unlink(path);
      }
    } else if (sscanf(de->d_name, "sys.%d", &pid) == 1 && pid_dead(pid)) {
      snprintf(path, sizeof(path), "%s/%s", uv.fabric, de->d_name);
      uv_rm_tree(path);
    } else if (sscanf(de->d_name, "ctl.%d.sock", &pid) == 1 && pid_dead(pid)) {
      snprintf(path, sizeof(path), "%s/%s", uv.fabric, de->d_name);
      unlink(path);
    }
  }
  closedir(d);
}

/* Binds device dev to a fabric id of its own: derived from the pid, another when that
 * one is taken by a live process. */
static int dev_listen(struct uv_dev *dev)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  uint32_t id = ((uint32_t)getpid() * UV_MAX_DEVS + (uint32_t)dev->index) & UV_PSN_MASK;
  int tries, fd;

  for (tries = 0; tries < 64; tries++) {
    char pidpath[PATH_MAX];
    FILE *f;

    if (id < 0x10000)
      id += 0x10000; /* 127.0.x.y: keep clear of 127.0.0.1 */
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return -errno;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/d%06x.sock", uv.fabric, id);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 128) == 0) {
      dev->id = id;
      dev->listen_fd = fd;
      snprintf(dev->sock_path, sizeof(dev->sock_path), "%s", a.sun_path);
      snprintf(pidpath, sizeof(pidpath), "%s/d%06x.pid", uv.fabric, id);
      f = fopen(pidpath, "we");
      if (f != NULL) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
      }
      return 0;
    }
    close(fd);
    id = ((uint32_t)uv_rand_pct() * 167773u + (uint32_t)tries * 7919u + (uint32_t)uv_now_ns()) & UV_PSN_MASK;
  }
  return -EADDRINUSE;
}

static void uv_cleanup(void)
{
  int i;

  for (i = 0; i < uv.ndev; i++) {
    char pidpath[PATH_MAX];
    unlink(uv.dev[i].sock_path);
    snprintf(pidpath, sizeof(pidpath), "%s/d%06x.pid", uv.fabric, uv.dev[i].id);
    unlink(pidpath);
  }
  if (uv.ctl_path[0] != '\0')
    unlink(uv.ctl_path);
  uv_sysfs_remove();
}

int uv_init(void)
{
  const char *fab;
  int i, rc = 0;

  pthread_mutex_lock(&uv.lock);
  if (uv.ready) {
    pthread_mutex_unlock(&uv.lock);
    return 0;
  }
  uv.rng = uv_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
  fab = getenv("UVERBS_FABRIC");
  if (fab != NULL && fab[0] != '\0')
    snprintf(uv.fabric, sizeof(uv.fabric), "%s", fab);
  else
    snprintf(uv.fabric, sizeof(uv.fabric), "/tmp/mcp-uverbs-%u", (unsigned)getuid());
  if (strlen(fab != NULL ? fab : uv.fabric) > 72) {
    fprintf(stderr, "mcp-uverbs: UVERBS_FABRIC=%s is too long for a socket path (72 at most)\n",
            fab != NULL ? fab : "");
    rc = -ENAMETOOLONG;
    goto out;
  }
  if (mkdir(uv.fabric, 0700) != 0 && errno != EEXIST) {
    rc = -errno;
    fprintf(stderr, "mcp-uverbs: cannot make the fabric folder %s: %s\n", uv.fabric, strerror(errno));
    goto out;
  }
  clean_stale();
  uv.ndev = env_int("UVERBS_DEVICES", 1, 1, UV_MAX_DEVS);
  uv.peermem = env_int("UVERBS_PEERMEM", 1, 0, 1);
  uv_mem_open();
  for (i = 0; i < uv.ndev; i++) {
    struct uv_dev *dev = &uv.dev[i];

    dev->index = i;
    if ((rc = dev_listen(dev)) != 0) {
      fprintf(stderr, "mcp-uverbs: no socket for device %d in %s: %s\n", i, uv.fabric, strerror(-rc));
      goto out;
    }
    gids_of(dev->id, dev->gid);
    dev->guid = 0x020000fffe000000ull | dev->id;
    dev->port_state = IBV_PORT_ACTIVE;
    dev->next_qpn = (uint32_t)(uv_rand_pct() * 4096 + 0x100);
    dev->ibdev.node_type = IBV_NODE_CA;
    dev->ibdev.transport_type = IBV_TRANSPORT_IB;
    snprintf(dev->ibdev.name, sizeof(dev->ibdev.name), UV_DEV_PREFIX "%d", i);
    snprintf(dev->ibdev.dev_name, sizeof(dev->ibdev.dev_name), UV_DEV_PREFIX "%d", i);
  }
  snprintf(uv.sysroot, sizeof(uv.sysroot), "%s/sys.%d", uv.fabric, (int)getpid());
  for (i = 0; i < uv.ndev; i++) {
    snprintf(uv.dev[i].ibdev.ibdev_path, sizeof(uv.dev[i].ibdev.ibdev_path), "%s/class/infiniband/%s",
             uv.sysroot, uv.dev[i].ibdev.name);
    snprintf(uv.dev[i].ibdev.dev_path, sizeof(uv.dev[i].ibdev.dev_path), "%s", uv.dev[i].ibdev.ibdev_path);
  }
  if ((rc = uv_sysfs_build()) != 0) {
    fprintf(stderr, "mcp-uverbs: cannot write the sysfs view under %s: %s\n", uv.sysroot, strerror(-rc));
    goto out;
  }
  for (i = 0; i < uv.ndev; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, accept_main, &uv.dev[i]) != 0) {
      rc = -EAGAIN;
      goto out;
    }
    pthread_detach(t);
  }
  if ((rc = uv_ctl_start()) != 0)
    goto out;
  atexit(uv_cleanup);
  uv.ready = 1;
out:
  pthread_mutex_unlock(&uv.lock);
  return rc;
}
