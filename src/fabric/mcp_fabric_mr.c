/*
 * mcp_fabric_mr.c - the registration cache of a protection domain (one per device
 * context, so it lives with the context in fabric: xfer registers its rings with it,
 * net registers NCCL's buffers).
 *
 * NCCL registers the same buffers again for every connection (user buffers once per
 * peer), so regMr looks for an MR of the same memory type that already covers the
 * page range and takes a reference on it; the last reference deregisters at once.
 * DMA-BUF registrations are never found by address: the same virtual range may be
 * backed by another buffer object later. Failures say what failed and what to try:
 * a low locked-memory limit is the usual cause.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"
#include "fabric/devctx.h"
#include "nccl/net_common.h"

#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* NCCL_IB_PCI_RELAXED_ORDERING as NCCL's IB transport reads it: 1 and 2 both mean "on
 * wherever libibverbs has ibv_reg_mr_iova2", the verb that carries optional access flags
 * (libibverbs drops them where the kernel cannot take them; an adapter without relaxed
 * ordering ignores the flag), and 0 means off. */
int mcp_mr_relaxed_ordering(const struct mcp_config *cfg)
{
  int mode = cfg->ib_pci_relaxed_ordering;

  return (mode == 1 || mode == 2) && mcp_ibv.reg_mr_iova2 != NULL;
}

/* The one place the access of NCCL's buffers is decided (host, GPU and DMA-BUF alike).
 * Relaxed ordering lets the adapter's writes into them land in any order; the completion
 * that tells NCCL a transfer is done still orders every write before it, and NCCL's own
 * transport registers its buffers so too. ibv_reg_dmabuf_mr passes the flag unmasked:
 * kernels that register DMA-BUFs all take optional access flags. */
unsigned mcp_mr_data_access(const struct mcp_config *cfg)
{
  return MR_ACCESS | (mcp_mr_relaxed_ordering(cfg) ? (unsigned)IBV_ACCESS_RELAXED_ORDERING : 0u);
}

/* The data access for this device: a device whose driver refused relaxed ordering is
 * asked without it. */
static unsigned device_access(struct mcp_devctx *dc)
{
  unsigned access = dc->data_access;

  return atomic_load(&dc->ro_refused) ? access & ~(unsigned)IBV_ACCESS_RELAXED_ORDERING : access;
}

/* Drivers must ignore optional access flags they cannot honour, but some refuse them
 * instead (EINVAL or EOPNOTSUPP: MANA until 2024, soft-RoCE briefly in 2023 development
 * kernels). A registration that asked for relaxed ordering and failed so is tried once
 * more without it (retry_strict); if that one succeeds, the flag was the cause, and the
 * device is asked without it from then on, said once. Any other failure is the
 * registration's own. */
static int retry_strict(unsigned access, int err)
{
  return (access & IBV_ACCESS_RELAXED_ORDERING) && (err == EINVAL || err == EOPNOTSUPP);
}

static void note_ro_refused(struct mcp_devctx *dc, int err)
{
  if (atomic_exchange(&dc->ro_refused, 1) == 0)
    MCP_WARN("%s refused a registration with IBV_ACCESS_RELAXED_ORDERING (%s), an optional flag its driver "
             "should ignore: it registers NCCL's buffers strictly ordered from now on. "
             "NCCL_IB_PCI_RELAXED_ORDERING=0 avoids the first try",
             dc->info->ibdev, strerror(err));
}

static void page_range(const void *data, size_t size, uintptr_t *base, size_t *len)
{
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)data & ~(page - 1);
  uintptr_t end = ((uintptr_t)data + (size ? size : 1) + page - 1) & ~(page - 1);

  *base = start;
  *len = end - start;
}

/* An adapter's refusal in the library's convention (src/core/err.h): the WARN named its
 * errno; what NCCL is told is a local system failure whatever that errno was (NCCL's own
 * transport says the same), so an errno that doubles as one of the convention's kinds
 * (EINVAL, EOPNOTSUPP, ...) must not reach net as that kind. Others pass unchanged. */
static int reg_errno(int err)
{
  int rc = -err;

  if (err <= 0 || rc == MCP_ERR_ARG || rc == MCP_ERR_USAGE || rc == MCP_ERR_REMOTE || rc == MCP_ERR_INTERNAL)
    return MCP_ERR_SYSTEM;
  return rc;
}

static void warn_reg_failure(struct mcp_devctx *dc, const char *what, void *data, size_t size, int type,
                             int err)
{
  struct rlimit rl;
  char limit[64] = "unknown";

  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    if (rl.rlim_cur == RLIM_INFINITY)
      snprintf(limit, sizeof(limit), "unlimited");
    else
      snprintf(limit, sizeof(limit), "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
  }
  MCP_WARN("%s of %p+%zu (%s memory) on %s failed: %s. Locked-memory limit (ulimit -l): %s; "
           "this process has %d MR(s), %zu bytes registered on %s. %s",
           what, data, size, type == NCCL_PTR_CUDA ? "GPU" : "host", dc->info->ibdev, strerror(err), limit,
           dc->mr_count, dc->mr_bytes, dc->info->ibdev,
           err == ENOMEM     ? "Raise the limit (ulimit -l unlimited; containers: --ulimit memlock=-1)."
             : err == EFAULT ? "The address range is not mapped in this process."
             : type == NCCL_PTR_CUDA ? "GPU memory needs nvidia-peermem or DMA-BUF support."
                                     : "");
}

/* The handle's head (struct mcp_mh_head) from the registration it fronts. */
static void mr_head_set(struct mcp_mr *m)
{
  m->head.lkey = m->mr->lkey;
  m->head.rkey = m->mr->rkey;
  m->head.cpu_readable = m->type == NCCL_PTR_HOST && !m->dmabuf;
  m->head.set = 0;
}

int mcp_mr_register(struct mcp_devctx *dc, void *data, size_t size, int type, struct mcp_mr **out)
{
  struct mcp_mr *m;
  struct mcp_list *it;
  uintptr_t base;
  size_t len;
  unsigned access;
  int rc = 0;

  page_range(data, size, &base, &len);
  pthread_mutex_lock(&dc->mr_lock);
  mcp_list_each(it, &dc->mrs)
  {
    m = mcp_list_entry(it, struct mcp_mr, link);
    if (!m->dmabuf && m->type == type && m->base <= base && m->base + m->len >= base + len) {
      m->refs++;
      goto out;
    }
  }
  m = calloc(1, sizeof(*m));
  if (m == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  access = device_access(dc);
  m->mr = mcp_ibv.reg_mr_iova2(dc->pd, (void *)base, len, base, access);
  if (m->mr == NULL && retry_strict(access, errno)) {
    int err = errno;

    m->mr =
      mcp_ibv.reg_mr_iova2(dc->pd, (void *)base, len, base, access & ~(unsigned)IBV_ACCESS_RELAXED_ORDERING);
    if (m->mr != NULL)
      note_ro_refused(dc, err);
  }
  if (m->mr == NULL) {
    int err = errno;

    rc = reg_errno(err);
    warn_reg_failure(dc, "ibv_reg_mr", data, size, type, err);
    free(m);
    m = NULL;
    goto out;
  }
  m->dc = dc;
  m->base = base;
  m->len = len;
  m->type = type;
  mr_head_set(m);
  m->refs = 1;
  mcp_list_push(&dc->mrs, &m->link);
  dc->mr_bytes += len;
  dc->mr_count++;
out:
  pthread_mutex_unlock(&dc->mr_lock);
  *out = m;
  return rc;
}

int mcp_mr_register_dmabuf(struct mcp_devctx *dc, void *data, size_t size, int type, uint64_t offset, int fd,
                           struct mcp_mr **out)
{
  struct mcp_mr *m;
  unsigned access;

  *out = NULL;
  if (mcp_ibv.reg_dmabuf_mr == NULL) {
    MCP_WARN("regMrDmaBuf on %s: this libibverbs has no ibv_reg_dmabuf_mr", dc->info->ibdev);
    return MCP_ERR_SYSTEM; /* what regMrDmaBuf always returned for it */
  }
  m = calloc(1, sizeof(*m));
  if (m == NULL)
    return -ENOMEM;
  /* NCCL closes fd when this call returns: the import happens now. */
  access = device_access(dc);
  m->mr = mcp_ibv.reg_dmabuf_mr(dc->pd, offset, size, (uintptr_t)data, fd, (int)access);
  if (m->mr == NULL && retry_strict(access, errno)) {
    int err = errno;

    m->mr = mcp_ibv.reg_dmabuf_mr(dc->pd, offset, size, (uintptr_t)data, fd,
                                  (int)(access & ~(unsigned)IBV_ACCESS_RELAXED_ORDERING));
    if (m->mr != NULL)
      note_ro_refused(dc, err);
  }
  if (m->mr == NULL) {
    int err = errno;
    warn_reg_failure(dc, "ibv_reg_dmabuf_mr", data, size, type, err);
    free(m);
    return reg_errno(err);
  }
  m->dc = dc;
  m->base = (uintptr_t)data;
  m->len = size;
  m->type = type;
  m->dmabuf = 1;
  mr_head_set(m);
  m->refs = 1;
  pthread_mutex_lock(&dc->mr_lock);
  mcp_list_push(&dc->mrs, &m->link);
  dc->mr_bytes += size;
  dc->mr_count++;
  pthread_mutex_unlock(&dc->mr_lock);
  *out = m;
  return 0;
}

void mcp_mr_release(struct mcp_mr *m)
{
  struct mcp_devctx *dc = m->dc;
  if (dc == NULL) {
    /* Its device was closed under it (comms closed before deregMr): only free. */
    free(m);
    return;
  }
  pthread_mutex_lock(&dc->mr_lock);
  if (--m->refs > 0) {
    pthread_mutex_unlock(&dc->mr_lock);
    return;
  }
  mcp_list_del(&m->link);
  dc->mr_bytes -= m->len;
  dc->mr_count--;
  pthread_mutex_unlock(&dc->mr_lock);
  if (mcp_ibv.dereg_mr(m->mr) != 0)
    MCP_WARN("ibv_dereg_mr on %s failed: %s", dc->info->ibdev, strerror(errno));
  free(m);
}

/* Never relaxed: the CPU polls these (a clear-to-send entry's sequence number must not
 * be seen before the entry's other bytes), as NCCL keeps its FIFO strictly ordered. */
struct ibv_mr *mcp_mr_internal(struct mcp_devctx *dc, void *data, size_t size, int access)
{
  unsigned strict = (unsigned)access & ~(unsigned)IBV_ACCESS_RELAXED_ORDERING;
  struct ibv_mr *mr = mcp_ibv.reg_mr_iova2(dc->pd, data, size, (uintptr_t)data, strict);

  if (mr == NULL)
    warn_reg_failure(dc, "ibv_reg_mr (internal ring)", data, size, NCCL_PTR_HOST, errno);
  return mr;
}
