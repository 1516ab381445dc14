/*
 * uv.h - the userspace verbs device's insides (test infrastructure, never installed).
 *
 * libmcp-uverbs.so provides the verbs mcpnet resolves from libibverbs.so.1 and emulates
 * RoCE v2 reliable-connected semantics between processes of one host, so that mcpnet's
 * two-process tests (and real NCCL on a GPU host without RDMA) run on a host whose
 * kernel has no RDMA at all. Each process is one adapter ("NIC") with one or more
 * devices of one port each; a device is reached at a UNIX socket in a fabric folder that
 * every process of a job shares, named by its 24-bit fabric id (which its GIDs carry).
 *
 * Threads (the adapter's, never the caller's): per device an accept thread; per
 * destination device ("path") a transmit thread that sends the requests of every QP
 * bound to it, runs their retransmission and RNR timers, and a receive thread for the
 * responses; per accepted connection a responder thread that executes requests on
 * this process's memory and answers them on the same connection; one service thread
 * for the control socket (faults on demand, mcp-uverbs-ctl) and the counter files.
 * One lock (uv.lock) guards every table and queue; memory is copied outside it.
 *
 * Memory is touched the way an adapter's DMA touches it, never by the caller's CPU
 * mappings: host registrations through /proc/self/mem (which ignores the page
 * protection a test puts on "GPU-like" buffers), DMA-BUF registrations through the
 * adapter's own mapping of the buffer, CUDA memory with CUDA copies (libcuda, looked
 * up only when a registration finds the process already using it).
 */
#ifndef UV_H
#define UV_H

#include <infiniband/verbs.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#define UV_MAX_DEVS 4
#define UV_MAX_SGE 16
#define UV_MAX_INLINE 512
#define UV_MAX_QP_WR 32768
#define UV_MAX_CQE 4194303
#define UV_GIDS 4
#define UV_CHUNK (1u << 20) /* bytes a thread moves between socket and memory at once */
#define UV_PSN_MASK 0xffffffu

#define UV_DEV_PREFIX "mcpuv"

/* Counters of a device's port, shown in its sysfs tree (counters/, hw_counters/). */
enum uv_cnt {
  UV_CNT_XMIT_BYTES,
  UV_CNT_RCV_BYTES,
  UV_CNT_XMIT_PKTS,
  UV_CNT_RCV_PKTS,
  UV_CNT_LINK_DOWNED,
  UV_CNT_ACK_TIMEOUT, /* retransmissions after a timeout */
  UV_CNT_RETRY_EXC,   /* QPs whose retries ran out */
  UV_CNT_RNR_NAK,     /* RNR NAKs received (the requester waited) */
  UV_CNT_RNR_EXC,
  UV_CNT_OUT_OF_SEQ, /* requests dropped for a PSN ahead of the expected one */
  UV_CNT_DUPLICATE,  /* requests seen again (re-acknowledged) */
  UV_CNT_REM_ACCESS, /* requests refused for their rkey or range */
  UV_CNT_LOC_PROT,   /* local key or range errors */
  UV_CNT_DROPPED,    /* packets a fault dropped */
  UV_CNT_N
};

struct uv_dev;
struct uv_path;

struct uv_pd {
  struct ibv_pd pd;
  struct uv_dev *dev;
  int refs; /* MRs and QPs on it */
};

enum uv_mem_kind { UV_MEM_HOST, UV_MEM_MAPPED, UV_MEM_CUDA };

struct uv_mr {
  struct ibv_mr mr;
  struct uv_dev *dev;
  struct uv_pd *pd;
  unsigned access;
  uint64_t iova;
  size_t len;
  int kind;
  uintptr_t base; /* HOST: the registered address; MAPPED: our mapping's start of it;
                       * CUDA: the device pointer */
  void *map;      /* MAPPED: the mapping to unmap */
  size_t map_len;
  void *cuda_ctx; /* CUDA: the context to copy in */
  int busy;       /* copies in flight (dereg waits) */
  int dead;
  uint32_t slot;
};

struct uv_cqe {
  struct ibv_wc wc;
  struct uv_qp *qp; /* NULL once the QP is gone */
  int sq_retire, rq_retire;
};

struct uv_cq {
  struct ibv_cq cq;
  struct uv_dev *dev;
  int depth, head, count;
  struct uv_cqe *ring;
  int overrun;
  int qps; /* QPs using it */
};

enum uv_wqe_state { UV_W_POSTED, UV_W_SENDING, UV_W_SENT, UV_W_ACKED, UV_W_DONE };

struct uv_swqe {
  uint64_t wr_id;
  int opcode; /* enum ibv_wr_opcode */
  unsigned flags;
  uint32_t imm; /* as posted: network order */
  uint64_t raddr;
  uint32_t rkey;
  int nsge;
  struct ibv_sge sge[UV_MAX_SGE];
  uint32_t len;
  int inl; /* the payload is in inl_data */
  unsigned char *inl_data;
  int state;
  int has_psn;
  uint32_t psn, npkts;
  int retries, rnr_retries;
  uint64_t sent_ns, eligible_ns;
  int delayed; /* a path delay was applied */
};

struct uv_rwqe {
  uint64_t wr_id;
  int nsge;
  struct ibv_sge sge[UV_MAX_SGE];
};

struct uv_qp {
  struct ibv_qp qp;
  struct uv_dev *dev;
  struct uv_pd *pd;
  struct uv_cq *scq, *rcq;
  struct uv_qp *hnext; /* the device's hash by QPN */
  struct uv_qp *pnext; /* the path's list */
  struct uv_path *path;
  int state; /* enum ibv_qp_state */
  int sq_sig_all;
  /* caps, as granted */
  int max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
  /* attributes */
  int port, pkey_index;
  unsigned access;
  int path_mtu;
  uint32_t dest_qpn;
  struct ibv_ah_attr ah;
  uint32_t dest_id; /* the destination device's fabric id (from the GID) */
  uint32_t rq_psn, sq_psn;
  int timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic;
  /* send queue: [sq_head, sq_tail) outstanding, next_send the first not yet sent */
  struct uv_swqe *sq;
  unsigned char *inl_pool;
  uint64_t sq_head, sq_tail, next_send;
  int sq_used;       /* entries not yet retired by a polled completion */
  int sq_done_unsig; /* done unsignalled since the last completion: the next retires them */
  uint32_t next_psn;
  /* receive queue */
  struct uv_rwqe *rq;
  uint64_t rq_head, rq_tail;
  int rq_used;
  /* responder */
  uint32_t epsn;
  /* per-QP faults */
  int drop_pct, delay_ms;
  /* bookkeeping */
  int busy;       /* an adapter thread works outside the lock on its behalf */
  uint32_t epoch; /* bumped on reset/error: work in flight for an older one is void */
  int events;     /* async events not yet acknowledged */
};

/* An async event queued on a context (struct uv_ctx). */
struct uv_event {
  struct ibv_async_event ev;
  struct uv_event *next;
};

struct uv_ctx {
  struct ibv_context ctx;
  struct uv_dev *dev;
  int pipe_w; /* ctx.async_fd is the read end: one byte per queued event */
  struct uv_event *ev_head, *ev_tail;
  struct uv_ctx *next;
};

struct uv_dev {
  struct ibv_device ibdev;
  int index;
  uint32_t id;
  uint64_t guid; /* host order */
  union ibv_gid gid[UV_GIDS];
  char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  int listen_fd;
  int port_state; /* IBV_PORT_ACTIVE or IBV_PORT_DOWN */
  int fatal;
  struct uv_ctx *ctxs;
  struct uv_qp *qp_hash[1024];
  uint32_t next_qpn;
  struct uv_mr **mrs;
  uint8_t *mr_gen;
  uint32_t nmr;
  uint64_t cnt[UV_CNT_N];
};

/* Faults on demand (mcp-uverbs-ctl): toward one peer process, or every one (pid 0). */
struct uv_fault {
  int pid;
  int down, drop_pct, delay_ms;
};
#define UV_MAX_FAULTS 16

struct uv_adapter {
  pthread_mutex_t lock;
  int ready;
  int peermem;       /* the tree shows a GPU peer-memory module (UVERBS_PEERMEM, default on) */
  char fabric[80];   /* short enough for socket paths below it */
  char sysroot[128]; /* <fabric>/sys.<pid> */
  int ndev;
  struct uv_dev dev[UV_MAX_DEVS];
  struct uv_path *paths;
  struct uv_fault fault[UV_MAX_FAULTS];
  int nfault;
  int ctl_fd;
  char ctl_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  int cnt_dirty;
  uint64_t rng;
};

extern struct uv_adapter uv;

/* Exported beside libibverbs' verbs (uv_verbs.c): the sysfs view mcpnet reads
 * (src/core/mcp_verbs.c), and rdma-core 62's port speed (100 Mb/s units). */
const char *mcpnet_verbs_sysfs_root(void);
int ibv_query_port_speed(struct ibv_context *ctx, uint32_t port, uint64_t *speed);

/* uv_adapter.c: setup, the fabric, threads and the wire protocol. */
int uv_init(void); /* once; 0 or -errno */
uint64_t uv_now_ns(void);
int uv_dev_by_gid(const union ibv_gid *gid, uint32_t *id);
struct uv_path *uv_path_get(struct uv_dev *dev, uint32_t dest_id); /* under uv.lock */
void uv_path_kick(struct uv_path *p);                              /* under uv.lock */
void uv_path_attach_qp(struct uv_path *p, struct uv_qp *qp);       /* under uv.lock */
void uv_path_detach_qp(struct uv_qp *qp);                          /* under uv.lock */
const struct uv_fault *uv_fault_for(int pid);                      /* under uv.lock; NULL: none */
int uv_rand_pct(void);                                             /* 0..99, under uv.lock */
void uv_rm_tree(const char *path);

/* uv_qp.c: QPs, CQs and completions (everything under uv.lock unless said). */
struct uv_qp *uv_qp_find(struct uv_dev *dev, uint32_t qpn);
void uv_cq_push(struct uv_cq *cq, const struct ibv_wc *wc, struct uv_qp *qp, int sq_retire, int rq_retire);
void uv_qp_error(struct uv_qp *qp); /* to ERROR: flush both queues */
void uv_sq_complete_ready(struct uv_qp *qp);
void uv_sq_fail(struct uv_qp *qp, struct uv_swqe *w, enum ibv_wc_status st); /* w and the QP fail */
void uv_qp_event(struct uv_qp *qp, enum ibv_event_type type);
void uv_dev_event(struct uv_dev *dev, enum ibv_event_type type, int port);
uint64_t uv_qp_timeout_ns(const struct uv_qp *qp);
uint64_t uv_rnr_delay_ns(int code);
int uv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int uv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int uv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
struct uv_mr *uv_mr_find(struct uv_dev *dev, uint32_t key); /* live MR with this key, or NULL */
int uv_modify_qp_locked(struct uv_qp *qp, struct ibv_qp_attr *a, int mask); /* 0 or an errno value */
void uv_qp_wait_idle(struct uv_qp *qp); /* waits for busy == 0 (drops the lock) */
extern pthread_cond_t uv_idle_cond;

/* uv_mem.c: the adapter's memory access. */
int uv_mem_open(void);
int uv_mem_reg_addr(struct uv_mr *m, void *addr, size_t len);
int uv_mem_reg_dmabuf(struct uv_mr *m, int fd, uint64_t offset, size_t len);
void uv_mem_unreg(struct uv_mr *m);
/* Copies between registered memory at offset off (from the MR's iova) and a buffer of
 * the adapter's; 0 or -errno. Outside uv.lock, with the MR busy. */
int uv_mem_read(struct uv_mr *m, uint64_t off, void *dst, size_t len);
int uv_mem_write(struct uv_mr *m, uint64_t off, const void *src, size_t len);
const char *uv_mem_cuda_error(void);

/* uv_sysfs.c: the device's sysfs view. */
int uv_sysfs_build(void);
void uv_sysfs_port(struct uv_dev *dev); /* the port's state files, after a change */
void uv_sysfs_counters(void);           /* every device's counter files */
void uv_sysfs_remove(void);

/* uv_ctl.c: the service thread (control socket, counter files). */
int uv_ctl_start(void);
int uv_ctl_apply(char *cmd, char *reply, size_t len); /* one command line; 0 or -1 */

#endif
