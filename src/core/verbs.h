/*
 * verbs.h - libibverbs, loaded at run time.
 *
 * NCCL dlopens the plugin with RTLD_NOW; linking libibverbs directly would make the
 * plugin fail to load on a machine without rdma-core, with a dlerror that names
 * nothing useful. Instead mcp_verbs_load() dlopens libibverbs.so.1 on first init and
 * fills this table; init then fails with one clear WARN when it is missing. The
 * fast-path verbs (ibv_post_send, ibv_post_recv, ibv_poll_cq) are inline functions of
 * verbs.h that call through the device context, so they need no entry here.
 */
#ifndef MCPNET_VERBS_H
#define MCPNET_VERBS_H

#include <infiniband/verbs.h>

struct mcp_verbs {
  struct ibv_device **(*get_device_list)(int *num);
  void (*free_device_list)(struct ibv_device **list);
  const char *(*get_device_name)(struct ibv_device *dev);
  struct ibv_context *(*open_device)(struct ibv_device *dev);
  int (*close_device)(struct ibv_context *ctx);
  int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
  int (*query_port)(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr);
  int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
  int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index, struct ibv_gid_entry *entry,
                      uint32_t flags, size_t entry_size);
  int (*query_pkey)(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                 unsigned int access);
  struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                                  int access);
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
                              struct ibv_comp_channel *channel, int comp_vector);
  int (*destroy_cq)(struct ibv_cq *cq);
  struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
  int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init);
  int (*destroy_qp)(struct ibv_qp *qp);
  int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *event);
  void (*ack_async_event)(struct ibv_async_event *event);
  int (*fork_init)(void);
  enum ibv_fork_status (*is_fork_initialized)(void); /* rdma-core >= 35; NULL before */
  /* rdma-core >= 62 (IBVERBS_1.16): the port's effective speed in 100 Mb/s; NULL before. */
  int (*query_port_speed)(struct ibv_context *ctx, uint32_t port, uint64_t *speed);
  const char *(*wc_status_str)(enum ibv_wc_status status);
  const char *(*event_type_str)(enum ibv_event_type type);
};

extern struct mcp_verbs mcp_ibv;

#define MCP_VERBS_DEFAULT_LIBRARY "libibverbs.so.1"

/* Loads libibverbs once (or library, MCPNET_VERBS_LIBRARY's value as the caller's
 * configuration holds it, when not NULL or ""); 0 on success, else -ENOENT (not loadable)
 * or -ENOSYS (a symbol missing) with the reason in why. Thread-safe. */
int mcp_verbs_load(const char *library, char *why, size_t whylen);
/* Drops the library when nothing uses it any more (process teardown). */
void mcp_verbs_unload(void);
/* The library loaded (or to be loaded): "libibverbs.so.1" unless MCPNET_VERBS_LIBRARY. */
const char *mcp_verbs_library(void);
/*
 * The sysfs root every reader of a device's sysfs view uses (its GID table, ports,
 * netdevs, counters, the GPU peer-memory module): "/sys", or the tree the loaded
 * library generated and names through its optional
 *   const char *mcpnet_verbs_sysfs_root(void);
 * (the userspace device, test/uverbs). Valid after mcp_verbs_load.
 */
const char *mcp_verbs_sysfs_root(void);

/* Port attributes through the table (the verbs.h macro calls a symbol directly). */
int mcp_verbs_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);

/*
 * Port attributes in rdma-core 50's layout, whatever headers this is built with: the
 * fields Debian 12's headers (libibverbs 44) declare fill bytes 0..51, then rdma-core 50
 * appended active_speed_ex (u32 at byte 52), the speed code of links too fast for the
 * 8-bit active_speed (XDR is 0x100). Older headers lack the field, newer ones have it
 * inside struct ibv_port_attr, so it is read by its ABI offset (mcp_port_attr_speed_ex).
 * A library whose layout ends earlier zeroes the whole buffer and fills only its own
 * part: 0 there means "use active_speed".
 */
#define MCP_PORT_ATTR_SPEED_EX_OFFSET 52
struct mcp_port_attr {
  struct ibv_port_attr attr;
  uint8_t ext[8]; /* room for what newer libraries append */
};

/* active_speed_ex of an mcp_verbs_query_port_ex answer; 0 when the library has none. */
uint32_t mcp_port_attr_speed_ex(const struct mcp_port_attr *a);

/*
 * Queries the extended layout: through the context's query_port op with our size
 * (libibverbs fills what it knows and zeroes the rest), else the old entry point with
 * active_speed_ex 0. 0 or an errno value, as ibv_query_port.
 */
int mcp_verbs_query_port_ex(struct ibv_context *ctx, uint8_t port, struct mcp_port_attr *attr);

#endif
