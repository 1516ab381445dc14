/*
 * devctx.h - an opened RDMA device shared by the comms of this process: the verbs
 * context, one protection domain and the registration cache of that domain.
 * Opened by the first comm on a device and closed with the last one, so no file
 * descriptor of ours outlives the last communicator.
 */
#ifndef MCPNET_DEVCTX_H
#define MCPNET_DEVCTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "core/list.h"
#include "fabric/fabric.h"

struct mcp_mr;

struct mcp_devctx {
  int dev; /* index into the fabric */
  const struct mcp_net_dev *info;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  int refs; /* under the devctx table lock */
  pthread_mutex_t mr_lock;
  struct mcp_list mrs; /* the registration cache (struct mcp_mr), newest first */
  size_t mr_bytes;     /* registered bytes, for memlock diagnostics */
  int mr_count;
  unsigned data_access;  /* NCCL's buffers' access: the fabric's (struct mcp_fabric_cfg) */
  atomic_int ro_refused; /* its driver refused relaxed ordering once: never asked again */
  /* Async events, read without a thread by whichever comm checks first (every 100 ms
   * while it waits): generation counters the comms compare with what they last saw. */
  pthread_mutex_t ev_lock;
  atomic_uint port_err_gen; /* our port went down */
  atomic_uint port_up_gen;  /* ... and came back (a failover may take its member again) */
  atomic_uint gid_gen;      /* the port's GID table changed */
  atomic_int fatal;         /* the device reported a fatal error */
  /* Lookups of our GID's index on the port (netlink and sysfs: a recovery's, or after a
   * GID change event), shared by the device's comms so that a thousand comms waiting
   * for a GID to come back make one lookup, not a thousand (mcp_qp_gid_poll, conn).
   * Under gid_lock. */
  pthread_mutex_t gid_lock;
  pthread_cond_t gid_cond; /* signalled when a lookup ends */
  unsigned gid_started;    /* lookups begun, numbered from 1 */
  unsigned gid_done;       /* the number of the newest lookup finished: gid_index is its answer */
  int gid_index;           /* -1: our GID was not in the port's table */
  int gid_running;         /* jobs that look up or wait for a lookup, from their start */
  int gid_looking;         /* lookups reading the table now */
  uint64_t gid_next_ns;    /* no lookup starts for a waiting comm before this */
};

/* Reads and acknowledges the device's pending async events; never blocks. Events for a
 * QP are handed to the handler the layer above registered (conn: the QP's context is
 * its comm); without one they are only acknowledged. */
void mcp_devctx_poll_events(struct mcp_devctx *dc);
typedef void (*mcp_devctx_qp_event_fn)(void *qp_context, uint32_t qpn, int event_type);
/* Registers that handler, process-wide (conn does, before it creates a QP). */
void mcp_devctx_set_qp_event_handler(mcp_devctx_qp_event_fn fn);

/* What the data path reads of a memory handle, first in both kinds NCCL may hold
 * (struct mcp_mr below, and a fused comm's struct mcp_mr_set in comm.h): member 0's
 * keys and whether the CPU may read the memory, one load each whatever the kind. Set
 * once, when the handle is made. */
struct mcp_mh_head {
  uint32_t lkey, rkey;  /* member 0's, as in its ibv_mr */
  uint8_t cpu_readable; /* host memory registered without DMA-BUF: an inline copy may read it */
  uint8_t set;          /* the handle is a struct mcp_mr_set */
};

/* A registration: the mhandle NCCL holds. */
struct mcp_mr {
  struct mcp_mh_head head; /* first: what the data path reads (comm.h's mcp_mh_*) */
  struct mcp_devctx *dc;
  struct ibv_mr *mr;
  uintptr_t base; /* page-aligned range the MR covers */
  size_t len;
  int type;   /* NCCL_PTR_HOST or NCCL_PTR_CUDA */
  int dmabuf; /* never found by address */
  int refs;
  struct mcp_list link; /* on dc->mrs */
};

struct mcp_devctx *mcp_devctx_get(const struct mcp_fabric *fab, int dev);
void mcp_devctx_put(struct mcp_devctx *dc);

/* The registration cache (mcp_fabric_mr.c). */
int mcp_mr_register(struct mcp_devctx *dc, void *data, size_t size, int type, struct mcp_mr **out);
int mcp_mr_register_dmabuf(struct mcp_devctx *dc, void *data, size_t size, int type, uint64_t offset, int fd,
                           struct mcp_mr **out);
void mcp_mr_release(struct mcp_mr *mr);
/* Registers an internal buffer (rings, records) outside the cache; never with relaxed
 * ordering, whatever access asks. */
struct ibv_mr *mcp_mr_internal(struct mcp_devctx *dc, void *data, size_t size, int access);
/* The access flags of NCCL's buffers (regMr, regMrDmaBuf) under cfg, and whether they
 * carry IBV_ACCESS_RELAXED_ORDERING (NCCL_IB_PCI_RELAXED_ORDERING). */
struct mcp_config;
unsigned mcp_mr_data_access(const struct mcp_config *cfg);
int mcp_mr_relaxed_ordering(const struct mcp_config *cfg);

#endif
