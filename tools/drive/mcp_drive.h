/*
 * mcp_drive.h - drives a net plugin through its exported ncclNetPlugin_v* table, the
 * way NCCL's proxy threads do: dlopen with RTLD_NOW|RTLD_LOCAL, dlsym the table of the
 * chosen ABI version, and call it. Used by the conformance suite and the benchmark so
 * both test the plugin exactly as NCCL sees it.
 */
#ifndef MCP_DRIVE_H
#define MCP_DRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/net.h"

struct mcp_drive {
  int abi; /* 8, 9, 10, 11 or 12 */
  void *lib;
  /* v12's slots are v11's slot for slot (the same types but for the properties and
   * vProps), so a v12 table is driven through v11 too, and through v12 where they differ. */
  const ncclNet_v12_t *v12;
  const ncclNet_v11_t *v11;
  const ncclNet_v10_t *v10;
  const ncclNet_v9_t *v9;
  const ncclNet_v8_t *v8;
  void *ctx; /* v11, v12 */
  const char *name;
  /* NCCL's profiler as NCCL passes it (v10 on): the callback init hands the plugin, and
   * the parent handle isend and irecv (every element) pass; NULL: none. MCP_DRIVE_PARENT=1
   * passes both as NCCL's proxy does when no profiler wants net events (a parent with
   * every call, a callback that takes nothing). */
  ncclProfilerCallback_t prof;
  void *phandle;
};

int drv_open(struct mcp_drive *d, const char *path, int abi);
void drv_close_lib(struct mcp_drive *d);
ncclResult_t drv_init(struct mcp_drive *d);
ncclResult_t drv_finalize(struct mcp_drive *d);
ncclResult_t drv_devices(struct mcp_drive *d, int *n);
/* Properties in v12's layout whatever the table (the widest: older tables leave railId and
 * planeId at NCCL_NET_ID_UNDEF, fields they lack at 0). */
ncclResult_t drv_props(struct mcp_drive *d, int dev, ncclNetProperties_v12_t *p);
/* makeVDevice over n physical devices (v9+; ncclInvalidUsage for v8, which has no slot, and
 * for more devices than the table's vProps hold: 4, or 8 in v12). */
ncclResult_t drv_make_vdevice(struct mcp_drive *d, int n, const int *devs, int *vdev);
ncclResult_t drv_listen(struct mcp_drive *d, int dev, void *handle, void **lc);
ncclResult_t drv_connect(struct mcp_drive *d, int dev, void *handle, void **sc);
ncclResult_t drv_accept(struct mcp_drive *d, void *lc, void **rc);
ncclResult_t drv_regmr(struct mcp_drive *d, void *comm, void *data, size_t size, void **mh);
ncclResult_t drv_regmr_type(struct mcp_drive *d, void *comm, void *data, size_t size, int type, void **mh);
ncclResult_t drv_deregmr(struct mcp_drive *d, void *comm, void *mh);
ncclResult_t drv_isend(struct mcp_drive *d, void *sc, void *data, size_t size, int tag, void *mh, void **req);
ncclResult_t drv_irecv(struct mcp_drive *d, void *rc, int n, void **data, size_t *sizes, int *tags, void **mh,
                       void **req);
ncclResult_t drv_iflush(struct mcp_drive *d, void *rc, int n, void **data, int *sizes, void **mh, void **req);
ncclResult_t drv_test(struct mcp_drive *d, void *req, int *done, int *sizes);
ncclResult_t drv_close_send(struct mcp_drive *d, void *sc);
ncclResult_t drv_close_recv(struct mcp_drive *d, void *rc);
ncclResult_t drv_close_listen(struct mcp_drive *d, void *lc);

/* Connects a send comm and a receive comm between two listen handles from one thread,
 * alternating connect and accept as NCCL's bootstrap does; gives up after timeout_s. */
int drv_connect_pair(struct mcp_drive *d, int dev, void *peer_handle, void *lc, void **sc, void **rc,
                     int timeout_s, int accept_first);

double drv_now(void);

/* Rendezvous through a folder both sides see (a shared file system, the lab's xchg share).
 * put writes DIR/NAME under a hidden name first, then renames it, so the reader never
 * sees half a file; path (may be NULL) receives the final name. get waits up to
 * timeout_s for DIR/NAME to hold exactly len bytes. Both print why they failed. */
int drv_file_put(const char *dir, const char *name, const void *data, size_t len, char *path, size_t plen);
int drv_file_get(const char *dir, const char *name, void *data, size_t len, int timeout_s);

#endif
