/*
 * mcp_drive.c - the table-driving layer of mcp_drive.h. Each call picks the member of
 * the loaded ABI version and adapts arguments the way NCCL's own compat shims would.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp_drive.h"
#include "net/net.h"

/* Another plugin's messages are printed with their format strings unexpanded: a callee
 * cannot tell a missing argument from a present one, and at least one IB plugin passes
 * a "%s" without its argument, which expanding would turn into a crash. */
static int log_unexpanded;

static void drv_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                    ...)
{
  static int verbose = -1;
  va_list ap;

  if (verbose < 0)
    verbose = getenv("MCP_DRIVE_VERBOSE") != NULL;
  if (level > NCCL_LOG_WARN && !verbose)
    return;
  fprintf(stderr, "[%s] ", level == NCCL_LOG_WARN ? "WARN" : "INFO");
  if (log_unexpanded) {
    fputs(fmt, stderr);
  } else {
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
  (void)flags;
  (void)file;
  (void)line;
}

double drv_now(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* NCCL's proxy without a profiler that wants net events: it passes a parent handle with
 * every call all the same, and its callback leaves the event handle NULL. */
static ncclResult_t drv_prof_idle(void **eh, int type, void *parent, int64_t plugin, void *data)
{
  (void)eh;
  (void)type;
  (void)parent;
  (void)plugin;
  (void)data;
  return ncclSuccess;
}

int drv_open(struct mcp_drive *d, const char *path, int abi)
{
  static int parent;
  char sym[32];
  void *t;

  memset(d, 0, sizeof(*d));
  d->abi = abi;
  if (getenv("MCP_DRIVE_PARENT") != NULL && atoi(getenv("MCP_DRIVE_PARENT")) != 0) {
    d->prof = drv_prof_idle;
    d->phandle = &parent;
  }
  d->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (d->lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return -1;
  }
  snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", abi);
  t = dlsym(d->lib, sym);
  if (t == NULL) {
    fprintf(stderr, "%s has no %s\n", path, sym);
    dlclose(d->lib);
    return -1;
  }
  switch (abi) {
  case 12:
    d->v12 = t;
    d->v11 = t; /* the same slots (mcp_drive.h) */
    d->name = d->v12->name;
    break;
  case 11:
    d->v11 = t;
    d->name = d->v11->name;
    break;
  case 10:
    d->v10 = t;
    d->name = d->v10->name;
    break;
  case 9:
    d->v9 = t;
    d->name = d->v9->name;
    break;
  default:
    d->v8 = t;
    d->name = d->v8->name;
    break;
  }
  log_unexpanded = strcmp(d->name, MCP_NET_NAME) != 0;
  return 0;
}

void drv_close_lib(struct mcp_drive *d)
{
  if (d->lib != NULL)
    dlclose(d->lib);
  d->lib = NULL;
}

#define PICK(d, member, ...)                    \
  ((d)->v11     ? (d)->v11->member(__VA_ARGS__) \
     : (d)->v10 ? (d)->v10->member(__VA_ARGS__) \
     : (d)->v9  ? (d)->v9->member(__VA_ARGS__)  \
                : (d)->v8->member(__VA_ARGS__))

ncclResult_t drv_init(struct mcp_drive *d)
{
  if (d->v11) {
    ncclNetCommConfig_v11_t cfg = {.trafficClass = -1};
    return d->v11->init(&d->ctx, 0x1234, &cfg, drv_log, d->prof);
  }
  if (d->v10)
    return d->v10->init(drv_log, d->prof);
  if (d->v9)
    return d->v9->init(drv_log);
  return d->v8->init(drv_log);
}

ncclResult_t drv_finalize(struct mcp_drive *d) { return d->v11 ? d->v11->finalize(d->ctx) : ncclSuccess; }

ncclResult_t drv_devices(struct mcp_drive *d, int *n) { return PICK(d, devices, n); }

/* v9's fields into v12's layout: the same names, vProps of 4 into vProps of 8. */
#define DRV_PROPS_V9(p, q)                                 \
  do {                                                     \
    (p)->name = (q)->name;                                 \
    (p)->pciPath = (q)->pciPath;                           \
    (p)->guid = (q)->guid;                                 \
    (p)->ptrSupport = (q)->ptrSupport;                     \
    (p)->regIsGlobal = (q)->regIsGlobal;                   \
    (p)->forceFlush = (q)->forceFlush;                     \
    (p)->speed = (q)->speed;                               \
    (p)->port = (q)->port;                                 \
    (p)->latency = (q)->latency;                           \
    (p)->maxComms = (q)->maxComms;                         \
    (p)->maxRecvs = (q)->maxRecvs;                         \
    (p)->netDeviceType = (q)->netDeviceType;               \
    (p)->netDeviceVersion = (q)->netDeviceVersion;         \
    (p)->vProps.ndevs = (q)->vProps.ndevs;                 \
    for (int i_ = 0; i_ < NCCL_NET_MAX_DEVS_PER_NIC; i_++) \
      (p)->vProps.devs[i_] = (q)->vProps.devs[i_];         \
    (p)->maxP2pBytes = (q)->maxP2pBytes;                   \
    (p)->maxCollBytes = (q)->maxCollBytes;                 \
  } while (0)

ncclResult_t drv_props(struct mcp_drive *d, int dev, ncclNetProperties_v12_t *p)
{
  memset(p, 0, sizeof(*p));
  p->railId = p->planeId = NCCL_NET_ID_UNDEF;
  if (d->v12)
    return d->v12->getProperties(dev, p);
  if (d->v11) {
    ncclNetProperties_v11_t q;
    ncclResult_t rc = d->v11->getProperties(dev, &q);
    DRV_PROPS_V9(p, &q);
    p->maxMultiRequestSize = q.maxMultiRequestSize;
    return rc;
  }
  if (d->v10 || d->v9) {
    ncclNetProperties_v9_t q;
    ncclResult_t rc = d->v10 ? d->v10->getProperties(dev, &q) : d->v9->getProperties(dev, &q);
    DRV_PROPS_V9(p, &q);
    return rc;
  } else {
    ncclNetProperties_v8_t q;
    ncclResult_t rc = d->v8->getProperties(dev, &q);
    p->name = q.name;
    p->pciPath = q.pciPath;
    p->guid = q.guid;
    p->ptrSupport = q.ptrSupport;
    p->speed = q.speed;
    p->port = q.port;
    p->maxComms = q.maxComms;
    p->maxRecvs = q.maxRecvs;
    p->regIsGlobal = q.regIsGlobal;
    return rc;
  }
}

ncclResult_t drv_make_vdevice(struct mcp_drive *d, int n, const int *devs, int *vdev)
{
  ncclNetVDeviceProps_v9_t vp;
  ncclResult_t (*make)(int *, ncclNetVDeviceProps_v9_t *) = d->v11 ? d->v11->makeVDevice
    : d->v10                                                       ? d->v10->makeVDevice
    : d->v9                                                        ? d->v9->makeVDevice
                                                                   : NULL;

  if (d->v12) {
    ncclNetVDeviceProps_v12_t vp12;

    if (n < 0 || n > NCCL_NET_MAX_DEVS_PER_NIC_V12)
      return ncclInvalidUsage; /* more than NCCL 2.30 ever asks for */
    memset(&vp12, 0, sizeof(vp12));
    vp12.ndevs = n;
    for (int i = 0; i < n; i++)
      vp12.devs[i] = devs[i];
    return d->v12->makeVDevice(vdev, &vp12);
  }
  if (make == NULL || n < 0 || n > NCCL_NET_MAX_DEVS_PER_NIC)
    return ncclInvalidUsage; /* v8 has no slot; NCCL before 2.30 never asks for more than 4 */
  memset(&vp, 0, sizeof(vp));
  vp.ndevs = n;
  for (int i = 0; i < n; i++)
    vp.devs[i] = devs[i];
  return make(vdev, &vp);
}

ncclResult_t drv_listen(struct mcp_drive *d, int dev, void *handle, void **lc)
{
  if (d->v11)
    return d->v11->listen(d->ctx, dev, handle, lc);
  return d->v10 ? d->v10->listen(dev, handle, lc)
    : d->v9     ? d->v9->listen(dev, handle, lc)
                : d->v8->listen(dev, handle, lc);
}

ncclResult_t drv_connect(struct mcp_drive *d, int dev, void *handle, void **sc)
{
  ncclNetDeviceHandle_v11_t *dh = NULL;

  if (d->v11)
    return d->v11->connect(d->ctx, dev, handle, sc, &dh);
  if (d->v10) {
    ncclNetCommConfig_v10_t cfg = {.trafficClass = -1};
    return d->v10->connect(dev, &cfg, handle, sc, &dh);
  }
  return d->v9 ? d->v9->connect(dev, handle, sc, &dh) : d->v8->connect(dev, handle, sc, &dh);
}

ncclResult_t drv_accept(struct mcp_drive *d, void *lc, void **rc)
{
  ncclNetDeviceHandle_v11_t *dh = NULL;

  return PICK(d, accept, lc, rc, &dh);
}

ncclResult_t drv_regmr(struct mcp_drive *d, void *comm, void *data, size_t size, void **mh)
{
  return PICK(d, regMr, comm, data, size, NCCL_PTR_HOST, mh);
}

/* Registration of another memory type (NCCL_PTR_CUDA for the lab's GPU-like buffers). */
ncclResult_t drv_regmr_type(struct mcp_drive *d, void *comm, void *data, size_t size, int type, void **mh)
{
  return PICK(d, regMr, comm, data, size, type, mh);
}

ncclResult_t drv_deregmr(struct mcp_drive *d, void *comm, void *mh) { return PICK(d, deregMr, comm, mh); }

ncclResult_t drv_isend(struct mcp_drive *d, void *sc, void *data, size_t size, int tag, void *mh, void **req)
{
  if (d->v11)
    return d->v11->isend(sc, data, size, tag, mh, d->phandle, req);
  if (d->v10)
    return d->v10->isend(sc, data, size, tag, mh, d->phandle, req);
  if (d->v9)
    return d->v9->isend(sc, data, size, tag, mh, req);
  return d->v8->isend(sc, data, (int)size, tag, mh, req);
}

ncclResult_t drv_irecv(struct mcp_drive *d, void *rc, int n, void **data, size_t *sizes, int *tags, void **mh,
                       void **req)
{
  void *ph[8] = {d->phandle, d->phandle, d->phandle, d->phandle,
                 d->phandle, d->phandle, d->phandle, d->phandle};

  if (d->v11)
    return d->v11->irecv(rc, n, data, sizes, tags, mh, d->phandle != NULL ? ph : NULL, req);
  if (d->v10)
    return d->v10->irecv(rc, n, data, sizes, tags, mh, d->phandle != NULL ? ph : NULL, req);
  if (d->v9)
    return d->v9->irecv(rc, n, data, sizes, tags, mh, req);
  {
    int isizes[8], i;
    for (i = 0; i < n && i < 8; i++)
      isizes[i] = (int)sizes[i];
    return d->v8->irecv(rc, n, data, isizes, tags, mh, req);
  }
}

ncclResult_t drv_iflush(struct mcp_drive *d, void *rc, int n, void **data, int *sizes, void **mh, void **req)
{
  return PICK(d, iflush, rc, n, data, sizes, mh, req);
}

ncclResult_t drv_test(struct mcp_drive *d, void *req, int *done, int *sizes)
{
  return PICK(d, test, req, done, sizes);
}

ncclResult_t drv_close_send(struct mcp_drive *d, void *sc) { return PICK(d, closeSend, sc); }
ncclResult_t drv_close_recv(struct mcp_drive *d, void *rc) { return PICK(d, closeRecv, rc); }
ncclResult_t drv_close_listen(struct mcp_drive *d, void *lc) { return PICK(d, closeListen, lc); }

int drv_connect_pair(struct mcp_drive *d, int dev, void *peer_handle, void *lc, void **sc, void **rc,
                     int timeout_s, int accept_first)
{
  double deadline = drv_now() + timeout_s;
  ncclResult_t r;

  *sc = NULL;
  *rc = NULL;
  while (*sc == NULL || *rc == NULL) {
    if (accept_first && *rc == NULL && (r = drv_accept(d, lc, rc)) != ncclSuccess) {
      fprintf(stderr, "accept failed: %d\n", r);
      return -1;
    }
    if (*sc == NULL && (r = drv_connect(d, dev, peer_handle, sc)) != ncclSuccess) {
      fprintf(stderr, "connect failed: %d\n", r);
      return -1;
    }
    if (!accept_first && *rc == NULL && (r = drv_accept(d, lc, rc)) != ncclSuccess) {
      fprintf(stderr, "accept failed: %d\n", r);
      return -1;
    }
    if (drv_now() > deadline) {
      fprintf(stderr, "connect/accept did not finish within %d s (send %p, recv %p)\n", timeout_s, *sc, *rc);
      return -1;
    }
  }
  return 0;
}

int drv_file_put(const char *dir, const char *name, const void *data, size_t len, char *path, size_t plen)
{
  char tmp[512], final[512];
  int fd;

  snprintf(final, sizeof(final), "%s/%s", dir, name);
  if (path != NULL)
    snprintf(path, plen, "%s", final);
  snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, name, (int)getpid());
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
    fprintf(stderr, "cannot write %s: %s\n", tmp, strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  close(fd);
  if (rename(tmp, final) != 0) {
    fprintf(stderr, "cannot rename %s to %s: %s\n", tmp, final, strerror(errno));
    return -1;
  }
  return 0;
}

int drv_file_get(const char *dir, const char *name, void *data, size_t len, int timeout_s)
{
  char path[512];
  double deadline = drv_now() + timeout_s;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  while (drv_now() < deadline) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = read(fd, data, len);
      close(fd);
      if (n == (ssize_t)len)
        return 0;
    }
    usleep(20000);
  }
  fprintf(stderr,
          "%s did not appear within %d s (is the other side running with the same exchange folder?)\n", path,
          timeout_s);
  return -1;
}
