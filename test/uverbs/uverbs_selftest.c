/*
 * uverbs_selftest.c - the userspace verbs device's RC semantics, checked between two
 * processes through the verbs alone (no mcpnet): what mcpnet and NCCL rely on an
 * adapter to do, and what the device must refuse as an adapter does.
 *
 *   uverbs-selftest [TEST...]      (ctest uverbs_selftest; UVERBS_FABRIC is set there)
 *
 * Process a (this one) posts the work; process b (the same program, started with
 * --peer) owns the remote memory and QP and answers a line protocol on its stdin and
 * stdout: create and connect a QP, post receives, poll, fill or check its buffer,
 * register it again (a new rkey), report async events. Tests:
 *
 *   states    the RC state machine refuses wrong transitions and attributes (EINVAL),
 *             posting in RESET is refused
 *   data      RDMA WRITE, WRITE_WITH_IMM (the receive completion carries the immediate
 *             and the length), READ, SEND into two scattered buffers, inline (the
 *             caller's buffer changed after the post does not matter), unsignalled work
 *             completing silently in order behind a signalled one
 *   depth     a send queue takes max_send_wr posts and refuses the next with ENOMEM
 *             until a completion is polled; the receive queue likewise
 *   rkey      a write past the registration fails with IBV_WC_REM_ACCESS_ERR, the work
 *             behind it is flushed (IBV_WC_WR_FLUSH_ERR), the responder's QP gets
 *             IBV_EVENT_QP_ACCESS_ERR and flushes its receives; a stale rkey (the
 *             region registered again) is refused the same way
 *   rnr       a write with immediate before any receive is posted waits (RNR) and lands
 *             once one is; with rnr_retry 0 it fails IBV_WC_RNR_RETRY_EXC_ERR
 *   cq        a CQ overrun gives IBV_EVENT_CQ_ERR and fails the QP (IBV_EVENT_QP_FATAL)
 *   gpulike   memory the CPU cannot touch: a host region the owner made PROT_NONE, and a
 *             DMA-BUF (memfd) registration whose address stays PROT_NONE, both written
 *             and read by the adapter
 *   faults    port down (IBV_EVENT_PORT_ERR, state DOWN in verbs and in the sysfs view)
 *             makes writes time out (IBV_WC_RETRY_EXC_ERR), port up (PORT_ACTIVE); a cut
 *             link that comes back within the retries loses nothing; 100% drop for a
 *             while is retransmitted (the counter file says so); a delayed QP's write
 *             is not there early
 *   peerdead  the peer process is killed: the write fails IBV_WC_RETRY_EXC_ERR
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *mcpnet_verbs_sysfs_root(void);

#define BUF (1u << 20)

static int failures;
#define CHECK(c)                                                            \
  do {                                                                      \
    if (!(c)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
      failures++;                                                           \
    }                                                                       \
  } while (0)

static double now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 9));
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(seed * 131u + i * 7u + (i >> 9)))
      return 0;
  return 1;
}

/* ---- one side's verbs objects ---- */

struct side {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  unsigned char *buf;
  struct ibv_mr *mr;
  union ibv_gid gid;
};

static void open_dev(struct side *s)
{
  int n = 0;
  struct ibv_device **l = ibv_get_device_list(&n);

  if (l == NULL || n < 1) {
    fprintf(stderr, "uverbs-selftest: no device (%s)\n", strerror(errno));
    exit(2);
  }
  s->ctx = ibv_open_device(l[0]);
  ibv_free_device_list(l);
  s->pd = ibv_alloc_pd(s->ctx);
  ibv_query_gid(s->ctx, 1, 3, &s->gid);
  fcntl(s->ctx->async_fd, F_SETFL, fcntl(s->ctx->async_fd, F_GETFL) | O_NONBLOCK);
}

static struct ibv_qp *qp_new(struct side *s, int sq, int rq, int inl)
{
  struct ibv_qp_init_attr a;

  memset(&a, 0, sizeof(a));
  a.send_cq = s->cq;
  a.recv_cq = s->cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = (uint32_t)sq;
  a.cap.max_recv_wr = (uint32_t)rq;
  a.cap.max_send_sge = 2;
  a.cap.max_recv_sge = 2;
  a.cap.max_inline_data = (uint32_t)inl;
  return ibv_create_qp(s->pd, &a);
}

static int to_init(struct ibv_qp *qp)
{
  struct ibv_qp_attr a;

  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

struct conn_opts {
  int timeout, retry, rnr_retry, rnr_timer;
};

static int to_rts(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *dgid, const struct conn_opts *o)
{
  struct ibv_qp_attr a;

  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dqpn;
  a.rq_psn = 0x123;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = (uint8_t)o->rnr_timer;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = *dgid;
  a.ah_attr.grh.sgid_index = 3;
  a.ah_attr.grh.hop_limit = 255;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = (uint8_t)o->timeout;
  a.retry_cnt = (uint8_t)o->retry;
  a.rnr_retry = (uint8_t)o->rnr_retry;
  a.sq_psn = 0x123;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
}

static void gid_hex(const union ibv_gid *g, char *out)
{
  for (int i = 0; i < 16; i++)
    sprintf(out + 2 * i, "%02x", g->raw[i]);
}

static void hex_gid(const char *h, union ibv_gid *g)
{
  for (int i = 0; i < 16; i++) {
    unsigned v;
    sscanf(h + 2 * i, "%2x", &v);
    g->raw[i] = (uint8_t)v;
  }
}

/* Polls cq until n completions or `seconds` pass; returns how many. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, double seconds)
{
  double end = now_s() + seconds;
  int got = 0;

  while (got < n && now_s() < end) {
    int k = ibv_poll_cq(cq, n - got, wc + got);
    if (k < 0)
      return got;
    got += k;
    if (k == 0)
      usleep(200);
  }
  return got;
}

static int next_event(struct ibv_context *ctx, double seconds, struct ibv_async_event *ev)
{
  double end = now_s() + seconds;

  while (now_s() < end) {
    if (ibv_get_async_event(ctx, ev) == 0)
      return 1;
    usleep(1000);
  }
  return 0;
}

/* ---- the peer (process b) ---- */

static int peer_main(void)
{
  struct side s;
  struct conn_opts o = {14, 7, 7, 1};
  char line[512];
  int memfd = -1;
  unsigned char *dma_view = NULL, *dma_addr = NULL;
  struct ibv_mr *dma_mr = NULL;

  setvbuf(stdout, NULL, _IOLBF, 0);
  memset(&s, 0, sizeof(s));
  open_dev(&s);
  s.cq = ibv_create_cq(s.ctx, 256, NULL, NULL, 0);
  s.buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  s.mr =
    ibv_reg_mr(s.pd, s.buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  while (fgets(line, sizeof(line), stdin) != NULL) {
    char gh[64], cmd[32];
    unsigned a, b, c;

    if (sscanf(line, "%31s", cmd) != 1)
      continue;
    if (strcmp(cmd, "qp") == 0 && sscanf(line, "qp %x %64s %u", &a, gh, &b) == 3) {
      union ibv_gid g;
      char mine[64];
      struct ibv_async_event ev;

      while (ibv_get_async_event(s.ctx, &ev) == 0) /* the last test's */
        ibv_ack_async_event(&ev);
      if (s.qp != NULL) {
        struct ibv_wc wc[64];
        ibv_destroy_qp(s.qp);
        while (ibv_poll_cq(s.cq, 64, wc) > 0)
          ;
      }
      hex_gid(gh, &g);
      o.rnr_timer = (int)b;
      s.qp = qp_new(&s, 64, 64, 0);
      if (s.qp == NULL || to_init(s.qp) != 0 || to_rts(s.qp, a, &g, &o) != 0) {
        printf("error %s\n", strerror(errno));
        continue;
      }
      gid_hex(&s.gid, mine);
      printf("%x %s %llx %x %d\n", s.qp->qp_num, mine, (unsigned long long)(uintptr_t)s.buf, s.mr->rkey,
             (int)getpid());
    } else if (sscanf(line, "recv %u %u %u", &a, &b, &c) == 3) {
      /* a receives of b bytes at offset c, then c + b, ... */
      int rc = 0;
      for (unsigned i = 0; i < a && rc == 0; i++) {
        struct ibv_sge sge = {(uintptr_t)s.buf + c + i * b, b, s.mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = 1000 + i, .sg_list = &sge, .num_sge = b > 0}, *bad;
        rc = ibv_post_recv(s.qp, &wr, &bad);
      }
      printf("%s\n", rc == 0 ? "ok" : strerror(rc));
    } else if (sscanf(line, "poll %u %u", &a, &b) == 2) {
      struct ibv_wc wc[64];
      int n = poll_n(s.cq, wc, (int)a, b / 1000.0);
      printf("%d", n);
      for (int i = 0; i < n; i++)
        printf(" %d:%d:%u:%x:%llu", wc[i].status, wc[i].opcode, wc[i].byte_len,
               wc[i].wc_flags & IBV_WC_WITH_IMM ? ntohl(wc[i].imm_data) : 0, (unsigned long long)wc[i].wr_id);
      printf("\n");
    } else if (sscanf(line, "fill %u %u %u", &a, &b, &c) == 3) {
      pattern(s.buf + a, b, c);
      printf("ok\n");
    } else if (sscanf(line, "check %u %u %u", &a, &b, &c) == 3) {
      printf("%s\n", same(s.buf + a, b, c) ? "ok" : "bad");
    } else if (strcmp(cmd, "rereg") == 0) {
      ibv_dereg_mr(s.mr);
      s.mr = ibv_reg_mr(s.pd, s.buf, BUF,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
      printf("%x\n", s.mr->rkey);
    } else if (sscanf(line, "event %u", &a) == 1) {
      struct ibv_async_event ev;
      if (next_event(s.ctx, a / 1000.0, &ev)) {
        printf("%d\n", ev.event_type);
        ibv_ack_async_event(&ev);
      } else {
        printf("none\n");
      }
    } else if (strcmp(cmd, "hide") == 0) {
      /* The owner makes its buffer unreachable by the CPU, as a GPU's memory is. */
      printf("%s\n", mprotect(s.buf, BUF, PROT_NONE) == 0 ? "ok" : strerror(errno));
    } else if (strcmp(cmd, "show") == 0) {
      printf("%s\n", mprotect(s.buf, BUF, PROT_READ | PROT_WRITE) == 0 ? "ok" : strerror(errno));
    } else if (strcmp(cmd, "dmabuf") == 0) {
      /* A DMA-BUF of a memfd: the address stays PROT_NONE; our own view checks it. */
      memfd = memfd_create("uverbs-selftest", MFD_CLOEXEC);
      if (memfd < 0 || ftruncate(memfd, BUF) != 0) {
        printf("error memfd\n");
        continue;
      }
      dma_addr = mmap(NULL, BUF, PROT_NONE, MAP_SHARED, memfd, 0);
      dma_view = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
      dma_mr = ibv_reg_dmabuf_mr(s.pd, 0, BUF, (uintptr_t)dma_addr, memfd,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
      close(memfd); /* as NCCL does: the registration keeps what it needs */
      if (dma_mr == NULL)
        printf("error %s\n", strerror(errno));
      else
        printf("%llx %x\n", (unsigned long long)(uintptr_t)dma_addr, dma_mr->rkey);
    } else if (sscanf(line, "dmacheck %u %u %u", &a, &b, &c) == 3) {
      printf("%s\n", dma_view != NULL && same(dma_view + a, b, c) ? "ok" : "bad");
    } else if (sscanf(line, "dmafill %u %u %u", &a, &b, &c) == 3) {
      pattern(dma_view + a, b, c);
      printf("ok\n");
    } else if (strcmp(cmd, "exit") == 0) {
      break;
    } else {
      printf("error unknown %s\n", cmd);
    }
  }
  return 0;
}

/* ---- the driver (process a) ---- */

static FILE *to_b, *from_b;
static pid_t b_pid;
static struct side A;
static uint32_t b_qpn, b_rkey;
static uint64_t b_addr;
static int b_real_pid;
static union ibv_gid b_gid;

static void ask(char *reply, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ask(char *reply, size_t len, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vfprintf(to_b, fmt, ap);
  va_end(ap);
  fputc('\n', to_b);
  fflush(to_b);
  if (fgets(reply, (int)len, from_b) == NULL) {
    fprintf(stderr, "uverbs-selftest: the peer process stopped answering\n");
    exit(3);
  }
  reply[strcspn(reply, "\n")] = '\0';
}

static void start_peer(const char *self)
{
  int in[2], out[2];

  if (pipe(in) != 0 || pipe(out) != 0)
    exit(2);
  b_pid = fork();
  if (b_pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl(self, self, "--peer", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  to_b = fdopen(in[1], "w");
  from_b = fdopen(out[0], "r");
}

/* A fresh QP pair: ours, and b's connected to it. */
static int connect_pair(const struct conn_opts *o, int sq, int inl, int b_rnr_timer)
{
  char reply[256], gh[64];

  if (A.qp != NULL) {
    struct ibv_wc wc[64];
    struct ibv_async_event ev;
    while (ibv_get_async_event(A.ctx, &ev) == 0)
      ibv_ack_async_event(&ev);
    ibv_destroy_qp(A.qp);
    while (ibv_poll_cq(A.cq, 64, wc) > 0)
      ;
  }
  A.qp = qp_new(&A, sq, 64, inl);
  if (A.qp == NULL || to_init(A.qp) != 0)
    return -1;
  gid_hex(&A.gid, gh);
  ask(reply, sizeof(reply), "qp %x %s %d", A.qp->qp_num, gh, b_rnr_timer);
  {
    unsigned q, k;
    unsigned long long ad;
    char bg[64];
    if (sscanf(reply, "%x %64s %llx %x %d", &q, bg, &ad, &k, &b_real_pid) != 5) {
      fprintf(stderr, "peer: %s\n", reply);
      return -1;
    }
    b_qpn = q;
    b_addr = ad;
    b_rkey = k;
    hex_gid(bg, &b_gid);
  }
  return to_rts(A.qp, b_qpn, &b_gid, o);
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *local, uint32_t len,
                uint64_t raddr, uint32_t rkey, unsigned flags, uint32_t imm)
{
  struct ibv_sge sge = {(uintptr_t)local, len, A.mr->lkey};
  struct ibv_send_wr wr, *bad;

  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

static const struct conn_opts normal = {14, 7, 7, 1}; /* 67 ms timeout, 7 retries */
static const struct conn_opts quick = {12, 2, 7, 1};  /* 17 ms, 2 retries: fails fast */

static void test_states(void)
{
  struct ibv_qp *qp = qp_new(&A, 4, 4, 0);
  struct ibv_qp_attr a;
  char buf[8];

  CHECK(qp != NULL);
  CHECK(post(qp, IBV_WR_RDMA_WRITE, 1, buf, 0, 0, 0, IBV_SEND_SIGNALED, 0) == EINVAL); /* RESET */
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL); /* RESET -> RTR */
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) ==
        EINVAL); /* no access flags */
  a.port_num = 2;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ==
        EINVAL);
  a.port_num = 1;
  a.pkey_index = 3;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ==
        EINVAL);
  CHECK(to_init(qp) == 0);
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = 5;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = A.gid;
  a.ah_attr.grh.sgid_index = 3;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC) == EINVAL); /* no min_rnr_timer */
  a.ah_attr.is_global = 0;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == EINVAL); /* RoCE needs a GRH */
  CHECK(to_rts(qp, 5, &A.gid, &normal) == 0);
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL); /* RTS -> INIT */
  {
    struct ibv_qp_init_attr init;
    CHECK(ibv_query_qp(qp, &a, IBV_QP_STATE, &init) == 0 && a.qp_state == IBV_QPS_RTS && a.dest_qp_num == 5);
  }
  a.qp_state = IBV_QPS_RESET;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
  CHECK(ibv_destroy_qp(qp) == 0);
}

static void test_data(void)
{
  struct ibv_wc wc[8];
  char reply[512];
  unsigned char *l = A.buf;
  int n;

  CHECK(connect_pair(&normal, 64, 64, 1) == 0);
  /* WRITE: b sees the bytes. */
  pattern(l, 100000, 1);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 11, l, 100000, b_addr, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 11 &&
        wc[0].opcode == IBV_WC_RDMA_WRITE);
  ask(reply, sizeof(reply), "check 0 100000 1");
  CHECK(strcmp(reply, "ok") == 0);
  /* WRITE_WITH_IMM: b's receive completes with the immediate and the length. */
  ask(reply, sizeof(reply), "recv 1 0 0");
  pattern(l, 5000, 2);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 12, l, 5000, b_addr + 200000, b_rkey, IBV_SEND_SIGNALED,
             0xabcd) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS);
  ask(reply, sizeof(reply), "poll 1 5000");
  CHECK(strcmp(reply, "1 0:129:5000:abcd:1000") == 0); /* IBV_WC_RECV_RDMA_WITH_IMM */
  ask(reply, sizeof(reply), "check 200000 5000 2");
  CHECK(strcmp(reply, "ok") == 0);
  /* READ: b's bytes come back. */
  ask(reply, sizeof(reply), "fill 300000 70000 3");
  memset(l, 0, 70000);
  CHECK(post(A.qp, IBV_WR_RDMA_READ, 13, l, 70000, b_addr + 300000, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_READ &&
        wc[0].byte_len == 70000);
  CHECK(same(l, 70000, 3));
  /* SEND into two receives' worth: the first receive (4000 B) takes it. */
  ask(reply, sizeof(reply), "recv 2 4000 400000");
  pattern(l, 3000, 4);
  CHECK(post(A.qp, IBV_WR_SEND, 14, l, 3000, 0, 0, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_SEND);
  ask(reply, sizeof(reply), "poll 1 5000");
  CHECK(strcmp(reply, "1 0:128:3000:0:1000") == 0); /* IBV_WC_RECV */
  ask(reply, sizeof(reply), "check 400000 3000 4");
  CHECK(strcmp(reply, "ok") == 0);
  /* Inline: the bytes are taken at the post. */
  pattern(l, 40, 5);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 15, l, 40, b_addr + 500000, b_rkey, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
             0) == 0);
  memset(l, 0xee, 40);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS);
  ask(reply, sizeof(reply), "check 500000 40 5");
  CHECK(strcmp(reply, "ok") == 0);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 16, l, 65, b_addr, b_rkey, IBV_SEND_INLINE, 0) == EINVAL); /* > 64 */
  /* Unsignalled work completes silently, in order, behind the signalled one. */
  for (int i = 0; i < 5; i++) {
    pattern(l + i * 1000, 1000, 10 + (unsigned)i);
    CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 20 + (uint64_t)i, l + i * 1000, 1000,
               b_addr + 600000 + (uint64_t)i * 1000, b_rkey, i == 4 ? IBV_SEND_SIGNALED : 0, 0) == 0);
  }
  n = poll_n(A.cq, wc, 1, 10);
  CHECK(n == 1 && wc[0].wr_id == 24);
  CHECK(poll_n(A.cq, wc, 1, 0.2) == 0);
  for (int i = 0; i < 5; i++) {
    ask(reply, sizeof(reply), "check %d 1000 %d", 600000 + i * 1000, 10 + i);
    CHECK(strcmp(reply, "ok") == 0);
  }
}

static void test_depth(void)
{
  struct ibv_wc wc[8];
  char reply[256];
  int i;

  CHECK(connect_pair(&normal, 4, 0, 1) == 0);
  for (i = 0; i < 4; i++)
    CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 30 + (uint64_t)i, A.buf, 8, b_addr, b_rkey,
               i == 3 ? IBV_SEND_SIGNALED : 0, 0) == 0);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 34, A.buf, 8, b_addr, b_rkey, IBV_SEND_SIGNALED, 0) == ENOMEM);
  usleep(100000); /* done at the peer by now, but not polled: still full */
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 34, A.buf, 8, b_addr, b_rkey, IBV_SEND_SIGNALED, 0) == ENOMEM);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].wr_id == 33);
  for (i = 0; i < 4; i++) /* the signalled completion gave all four back */
    CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 40 + (uint64_t)i, A.buf, 8, b_addr, b_rkey, IBV_SEND_SIGNALED, 0) ==
          0);
  CHECK(poll_n(A.cq, wc, 4, 10) == 4);
  /* b's receive queue is 64 deep. */
  ask(reply, sizeof(reply), "recv 64 0 0");
  CHECK(strcmp(reply, "ok") == 0);
  ask(reply, sizeof(reply), "recv 1 0 0");
  CHECK(strcmp(reply, strerror(ENOMEM)) == 0);
}

static void test_rkey(void)
{
  struct ibv_wc wc[8];
  char reply[256];
  uint32_t old;

  CHECK(connect_pair(&normal, 16, 0, 1) == 0);
  ask(reply, sizeof(reply), "recv 2 0 0");
  /* Past the end of b's 1 MiB registration. */
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 50, A.buf, 4096, b_addr + BUF - 100, b_rkey, IBV_SEND_SIGNALED, 0) ==
        0);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 51, A.buf, 8, b_addr, b_rkey, 0, 0) == 0);
  CHECK(poll_n(A.cq, wc, 2, 10) == 2);
  CHECK(wc[0].wr_id == 50 && wc[0].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(wc[1].wr_id == 51 && wc[1].status == IBV_WC_WR_FLUSH_ERR);
  ask(reply, sizeof(reply), "event 5000");
  CHECK(atoi(reply) == IBV_EVENT_QP_ACCESS_ERR);
  ask(reply, sizeof(reply), "poll 2 5000"); /* b's receives flushed with its QP */
  CHECK(strncmp(reply, "2 5:128:", 8) == 0);
  /* A stale rkey: b registered its buffer again. */
  CHECK(connect_pair(&normal, 16, 0, 1) == 0);
  old = b_rkey;
  ask(reply, sizeof(reply), "rereg");
  b_rkey = (uint32_t)strtoul(reply, NULL, 16);
  CHECK(b_rkey != old);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 52, A.buf, 8, b_addr, old, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR);
  ask(reply, sizeof(reply), "event 5000");
  CHECK(atoi(reply) == IBV_EVENT_QP_ACCESS_ERR);
}

static void test_rnr(void)
{
  struct conn_opts no_rnr = normal;
  struct ibv_wc wc[4];
  char reply[256];

  /* min_rnr_timer 14: 1.28 ms between tries; 7: for ever. */
  CHECK(connect_pair(&normal, 16, 0, 14) == 0);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 60, A.buf, 8, b_addr, b_rkey, IBV_SEND_SIGNALED, 7) == 0);
  CHECK(poll_n(A.cq, wc, 1, 0.2) == 0); /* no receive at b: waits */
  ask(reply, sizeof(reply), "recv 1 0 0");
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS);
  ask(reply, sizeof(reply), "poll 1 5000");
  CHECK(strncmp(reply, "1 0:129:8:7:", 12) == 0);
  no_rnr.rnr_retry = 0;
  CHECK(connect_pair(&no_rnr, 16, 0, 14) == 0);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 61, A.buf, 8, b_addr, b_rkey, IBV_SEND_SIGNALED, 7) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR);
}

static void test_cq(void)
{
  struct side s = A;
  struct ibv_async_event ev;
  struct ibv_cq *small = ibv_create_cq(A.ctx, 2, NULL, NULL, 0);
  struct ibv_wc wc[4];
  int i, fatal = 0, cqerr = 0;

  s.cq = small;
  CHECK(connect_pair(&normal, 16, 0, 1) == 0); /* b's side; ours is made below */
  {
    struct ibv_qp *qp = qp_new(&s, 16, 4, 0);
    char reply[256], gh[64];
    unsigned q, k;
    unsigned long long ad;
    char bg[64];

    CHECK(qp != NULL && to_init(qp) == 0);
    gid_hex(&A.gid, gh);
    ask(reply, sizeof(reply), "qp %x %s 1", qp->qp_num, gh);
    CHECK(sscanf(reply, "%x %64s %llx %x", &q, bg, &ad, &k) == 4);
    CHECK(to_rts(qp, q, &b_gid, &normal) == 0);
    for (i = 0; i < 3; i++)
      CHECK(post(qp, IBV_WR_RDMA_WRITE, 70 + (uint64_t)i, A.buf, 8, ad, k, IBV_SEND_SIGNALED, 0) == 0);
    for (i = 0; i < 2 && next_event(A.ctx, 5, &ev); i++) {
      cqerr += ev.event_type == IBV_EVENT_CQ_ERR;
      fatal += ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == qp;
      ibv_ack_async_event(&ev);
    }
    CHECK(cqerr == 1 && fatal == 1);
    CHECK(ibv_poll_cq(small, 4, wc) == 2); /* the two it held */
    CHECK(ibv_destroy_qp(qp) == 0);
  }
  CHECK(ibv_destroy_cq(small) == 0);
}

static void test_gpulike(void)
{
  struct ibv_wc wc[2];
  char reply[256];
  unsigned long long dma_addr;
  unsigned dma_rkey;

  CHECK(connect_pair(&normal, 16, 0, 1) == 0);
  /* b hides its buffer: the adapter still writes and reads it. */
  ask(reply, sizeof(reply), "hide");
  CHECK(strcmp(reply, "ok") == 0);
  pattern(A.buf, 50000, 21);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 80, A.buf, 50000, b_addr + 1000, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS);
  memset(A.buf, 0, 50000);
  CHECK(post(A.qp, IBV_WR_RDMA_READ, 81, A.buf, 50000, b_addr + 1000, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS && same(A.buf, 50000, 21));
  ask(reply, sizeof(reply), "show");
  ask(reply, sizeof(reply), "check 1000 50000 21");
  CHECK(strcmp(reply, "ok") == 0);
  /* A DMA-BUF whose address is PROT_NONE for good. */
  ask(reply, sizeof(reply), "dmabuf");
  CHECK(sscanf(reply, "%llx %x", &dma_addr, &dma_rkey) == 2);
  pattern(A.buf, 80000, 22);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 82, A.buf, 80000, dma_addr + 4096, dma_rkey, IBV_SEND_SIGNALED, 0) ==
        0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS);
  ask(reply, sizeof(reply), "dmacheck 4096 80000 22");
  CHECK(strcmp(reply, "ok") == 0);
  ask(reply, sizeof(reply), "dmafill 0 30000 23");
  memset(A.buf, 0, 30000);
  CHECK(post(A.qp, IBV_WR_RDMA_READ, 83, A.buf, 30000, dma_addr, dma_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS && same(A.buf, 30000, 23));
}

static int ctl(int pid, const char *cmd)
{
  char line[512];
  const char *bin = getenv("UVERBS_CTL");

  snprintf(line, sizeof(line), "%s %d %s > /dev/null", bin != NULL ? bin : "mcp-uverbs-ctl", pid, cmd);
  return system(line);
}

static int read_counter(const char *name)
{
  char path[512], text[32] = "";
  FILE *f;

  snprintf(path, sizeof(path), "%s/class/infiniband/mcpuv0/ports/1/hw_counters/%s", mcpnet_verbs_sysfs_root(),
           name);
  f = fopen(path, "re");
  if (f == NULL)
    return -1;
  if (fgets(text, sizeof(text), f) == NULL)
    text[0] = '\0';
  fclose(f);
  return atoi(text);
}

static void test_faults(void)
{
  struct ibv_async_event ev;
  struct ibv_port_attr pa;
  struct ibv_wc wc[2];
  char reply[256], path[512], state[32] = "";
  FILE *f;
  int before;

  /* Port down: an event, DOWN in verbs and in the sysfs view, nothing goes through. */
  CHECK(connect_pair(&quick, 16, 0, 1) == 0);
  CHECK(ctl(getpid(), "port 0 down") == 0);
  CHECK(next_event(A.ctx, 5, &ev) && ev.event_type == IBV_EVENT_PORT_ERR && ev.element.port_num == 1);
  ibv_ack_async_event(&ev);
  CHECK(ibv_query_port(A.ctx, 1, &pa) == 0 && pa.state == IBV_PORT_DOWN);
  snprintf(path, sizeof(path), "%s/class/infiniband/mcpuv0/ports/1/state", mcpnet_verbs_sysfs_root());
  if ((f = fopen(path, "re")) != NULL) {
    if (fgets(state, sizeof(state), f) == NULL)
      state[0] = '\0';
    fclose(f);
  }
  CHECK(strncmp(state, "1: DOWN", 7) == 0);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 90, A.buf, 8, b_addr, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_RETRY_EXC_ERR);
  CHECK(ctl(getpid(), "port 0 up") == 0);
  CHECK(next_event(A.ctx, 5, &ev) && ev.event_type == IBV_EVENT_PORT_ACTIVE);
  ibv_ack_async_event(&ev);
  /* A cut link that comes back within the retries (7 x 67 ms) loses nothing. */
  CHECK(connect_pair(&normal, 16, 0, 1) == 0);
  CHECK(ctl(getpid(), "link all down") == 0);
  pattern(A.buf, 9000, 31);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 91, A.buf, 9000, b_addr + 7000, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 0.1) == 0);
  CHECK(ctl(getpid(), "link all up") == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS);
  ask(reply, sizeof(reply), "check 7000 9000 31");
  CHECK(strcmp(reply, "ok") == 0);
  /* Dropped packets are sent again after the timeout: the counter shows it. */
  before = read_counter("local_ack_timeout_err");
  CHECK(ctl(getpid(), "drop all 100") == 0);
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 92, A.buf, 100, b_addr, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  usleep(150000);
  CHECK(ctl(getpid(), "drop all 0") == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS);
  usleep(300000); /* the service thread rewrites the counter files every 100 ms */
  CHECK(read_counter("local_ack_timeout_err") > before);
  /* A delayed QP: its write is not there early. */
  {
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "qp %u delay 2000", A.qp->qp_num);
    CHECK(ctl(getpid(), cmd) == 0);
  }
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 93, A.buf, 100, b_addr, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 0.2) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS);
  CHECK(ctl(getpid(), "clear") == 0);
}

static void test_peerdead(void)
{
  struct ibv_wc wc[2];
  int st;

  CHECK(connect_pair(&quick, 16, 0, 1) == 0);
  kill(b_pid, SIGKILL);
  waitpid(b_pid, &st, 0);
  b_pid = 0;
  CHECK(post(A.qp, IBV_WR_RDMA_WRITE, 99, A.buf, 8, b_addr, b_rkey, IBV_SEND_SIGNALED, 0) == 0);
  CHECK(poll_n(A.cq, wc, 1, 10) == 1 && wc[0].status == IBV_WC_RETRY_EXC_ERR);
}

static const struct {
  const char *name;
  void (*fn)(void);
} tests[] = {
  {"states", test_states},   {"data", test_data},     {"depth", test_depth},
  {"rkey", test_rkey},       {"rnr", test_rnr},       {"cq", test_cq},
  {"gpulike", test_gpulike}, {"faults", test_faults}, {"peerdead", test_peerdead},
};

int main(int argc, char **argv)
{
  int i, k, ran = 0;

  if (argc > 1 && strcmp(argv[1], "--peer") == 0)
    return peer_main();
  memset(&A, 0, sizeof(A));
  open_dev(&A);
  A.cq = ibv_create_cq(A.ctx, 256, NULL, NULL, 0);
  A.buf = aligned_alloc(4096, BUF);
  A.mr =
    ibv_reg_mr(A.pd, A.buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  start_peer(argv[0]);
  for (k = 0; k < (int)(sizeof(tests) / sizeof(tests[0])); k++) {
    int want = argc == 1;
    for (i = 1; i < argc; i++)
      want |= strcmp(argv[i], tests[k].name) == 0;
    if (!want || (b_pid == 0 && strcmp(tests[k].name, "peerdead") != 0))
      continue;
    {
      int before = failures;
      double t0 = now_s();
      tests[k].fn();
      printf("%s %s (%.1f s)\n", failures == before ? "ok  " : "FAIL", tests[k].name, now_s() - t0);
      fflush(stdout);
      ran++;
    }
  }
  if (b_pid > 0) {
    fprintf(to_b, "exit\n");
    fflush(to_b);
    waitpid(b_pid, NULL, 0);
  }
  printf("%d test(s), %d failed check(s)\n", ran, failures);
  return failures == 0 && ran > 0 ? 0 : 1;
}
