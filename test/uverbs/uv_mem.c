/*
 * uv_mem.c - how the emulated adapter reaches registered memory: as a NIC's DMA does,
 * never through the caller's CPU mappings.
 *
 * - Host memory registered by address: through /proc/self/mem, which the kernel serves
 *   from the pages themselves whatever their protection. A test that hides a "GPU-like"
 *   buffer (mprotect PROT_NONE while the plugin holds it) then still sees the adapter
 *   move its bytes, and any CPU access by the plugin crashes, as in the lab where
 *   soft-RoCE moves the pages it pinned. Without /proc/self/mem (a sandbox), memcpy.
 * - A DMA-BUF registration: the adapter maps the buffer's fd itself at registration (the
 *   caller may close the fd right after, as NCCL does) and copies through that mapping;
 *   the address the caller sees can stay PROT_NONE for good. A memfd or a udmabuf fd
 *   can be mapped; a CUDA DMA-BUF cannot, and is recognised by its address instead.
 * - CUDA memory (by address, or a DMA-BUF whose iova is a device pointer): copied with
 *   cuMemcpyDtoHAsync/HtoDAsync on a non-blocking stream of the memory's context, so
 *   never behind a kernel on the legacy stream (NCCL's kernels wait for this data).
 *   libcuda is looked up (dlopen RTLD_NOLOAD) only at a registration: a process that
 *   does not use CUDA never loads it, and nothing here links it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uv.h"

static int mem_fd = -1; /* /proc/self/mem, or -1: memcpy */

/* /proc/self/mem is used only where it does what the adapter needs: reach a page the
 * process made PROT_NONE, both ways (a sandbox's /proc may not). Otherwise host memory
 * is copied with memcpy, said once: buffers a test hides from the CPU then cannot be
 * moved, and such a test fails rather than pass without proving anything. */
int uv_mem_open(void)
{
  long page = sysconf(_SC_PAGESIZE);
  unsigned char *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned char v = 0;
  int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC), ok = 0;

  if (p != MAP_FAILED && fd >= 0) {
    p[7] = 0x5a;
    ok = mprotect(p, (size_t)page, PROT_NONE) == 0 && pread(fd, &v, 1, (off_t)(uintptr_t)(p + 7)) == 1 &&
      v == 0x5a && pwrite(fd, "\xa5", 1, (off_t)(uintptr_t)(p + 9)) == 1 &&
      mprotect(p, (size_t)page, PROT_READ) == 0 && p[9] == 0xa5;
  }
  if (p != MAP_FAILED)
    munmap(p, (size_t)page);
  if (!ok) {
    if (fd >= 0)
      close(fd);
    fd = -1;
    fprintf(stderr,
            "mcp-uverbs: /proc/self/mem cannot reach protected pages here: host memory is copied "
            "with memcpy, and buffers hidden from the CPU (PROT_NONE) cannot be moved\n");
  }
  mem_fd = fd;
  return 0;
}

/* ---- CUDA, through the driver API of a libcuda the process already loaded ---- */

typedef int (*cu_ptr_attr_t)(void *data, int attribute, unsigned long long ptr);
typedef int (*cu_ctx_set_t)(void *ctx);
typedef int (*cu_stream_create_t)(void **stream, unsigned flags);
typedef int (*cu_d2h_t)(void *dst, unsigned long long src, size_t n, void *stream);
typedef int (*cu_h2d_t)(unsigned long long dst, const void *src, size_t n, void *stream);
typedef int (*cu_sync_t)(void *stream);
typedef int (*cu_dev_get_t)(int *dev, int ordinal);
typedef int (*cu_primary_t)(void **ctx, int dev);
typedef int (*cu_err_t)(int err, const char **str);

#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2
#define CU_STREAM_NON_BLOCKING 1

static struct {
  pthread_mutex_t lock;
  int tried, ok;
  cu_ptr_attr_t ptr_attr;
  cu_ctx_set_t ctx_set;
  cu_stream_create_t stream_create;
  cu_d2h_t d2h;
  cu_h2d_t h2d;
  cu_sync_t sync;
  cu_dev_get_t dev_get;
  cu_primary_t primary;
  cu_err_t err;
  char last_error[160];
} cu = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* libcuda's entry points, if this process uses CUDA already. */
static int cuda_loaded(void)
{
  void *h;

  pthread_mutex_lock(&cu.lock);
  if (!cu.tried) {
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) {
      cu.tried = 1;
      cu.ptr_attr = (cu_ptr_attr_t)dlsym(h, "cuPointerGetAttribute");
      cu.ctx_set = (cu_ctx_set_t)dlsym(h, "cuCtxSetCurrent");
      cu.stream_create = (cu_stream_create_t)dlsym(h, "cuStreamCreate");
      cu.d2h = (cu_d2h_t)dlsym(h, "cuMemcpyDtoHAsync_v2");
      cu.h2d = (cu_h2d_t)dlsym(h, "cuMemcpyHtoDAsync_v2");
      cu.sync = (cu_sync_t)dlsym(h, "cuStreamSynchronize");
      cu.dev_get = (cu_dev_get_t)dlsym(h, "cuDeviceGet");
      cu.primary = (cu_primary_t)dlsym(h, "cuDevicePrimaryCtxRetain");
      cu.err = (cu_err_t)dlsym(h, "cuGetErrorString");
      cu.ok = cu.ptr_attr && cu.ctx_set && cu.stream_create && cu.d2h && cu.h2d && cu.sync && cu.dev_get &&
        cu.primary;
    }
    /* Not loaded yet: asked again at the next registration (CUDA may start later). */
  }
  pthread_mutex_unlock(&cu.lock);
  return cu.ok;
}

static void cuda_note(const char *what, int rc)
{
  const char *s = NULL;

  if (cu.err != NULL)
    cu.err(rc, &s);
  snprintf(cu.last_error, sizeof(cu.last_error), "%s: CUDA error %d (%s)", what, rc, s ? s : "?");
}

const char *uv_mem_cuda_error(void) { return cu.last_error; }

/* The context a device pointer belongs to, or NULL when ptr is not device memory. */
static void *cuda_ctx_of(uintptr_t ptr)
{
  int type = 0, ordinal = -1, dev;
  void *ctx = NULL;

  if (!cuda_loaded() || cu.ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != 0 ||
      type != CU_MEMORYTYPE_DEVICE)
    return NULL;
  if (cu.ptr_attr(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, ptr) == 0 && ctx != NULL)
    return ctx;
  /* cuMem* (VMM) allocations have no context: the device's primary one reaches them. */
  if (cu.ptr_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) == 0 &&
      cu.dev_get(&dev, ordinal) == 0 && cu.primary(&ctx, dev) == 0)
    return ctx;
  return NULL;
}

/* Each adapter thread keeps one non-blocking stream per context it copied in. */
static __thread struct {
  void *ctx, *stream;
} streams[4];

static void *stream_for(void *ctx)
{
  int i, rc;

  for (i = 0; i < 4 && streams[i].ctx != NULL; i++)
    if (streams[i].ctx == ctx)
      return streams[i].stream;
  if (i == 4)
    i = 3;
  if ((rc = cu.ctx_set(ctx)) != 0 ||
      (rc = cu.stream_create(&streams[i].stream, CU_STREAM_NON_BLOCKING)) != 0) {
    cuda_note("creating the adapter's copy stream", rc);
    return NULL;
  }
  streams[i].ctx = ctx;
  return streams[i].stream;
}

static int cuda_copy(struct uv_mr *m, uint64_t off, void *host, size_t len, int to_device)
{
  void *s;
  int rc;

  s = stream_for(m->cuda_ctx);
  if (s == NULL)
    return -EIO;
  if ((rc = cu.ctx_set(m->cuda_ctx)) != 0) {
    cuda_note("cuCtxSetCurrent", rc);
    return -EIO;
  }
  rc = to_device ? cu.h2d(m->base + off, host, len, s) : cu.d2h(host, m->base + off, len, s);
  if (rc == 0)
    rc = cu.sync(s);
  if (rc != 0) {
    cuda_note(to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync", rc);
    return -EIO;
  }
  return 0;
}

/* ---- registration ---- */

/* Every page of [addr, addr+len) must be mapped, as pinning them at registration
 * requires (a real ibv_reg_mr fails with EFAULT otherwise). */
static int range_mapped(uintptr_t addr, size_t len)
{
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = addr & ~(uintptr_t)(page - 1),
            end = (addr + len + (size_t)page - 1) & ~(uintptr_t)(page - 1);
  size_t n = (end - start) / (size_t)page, done = 0;
  unsigned char vec[4096];

  while (done < n) {
    size_t k = n - done < sizeof(vec) ? n - done : sizeof(vec);
    if (mincore((void *)(start + done * (size_t)page), k * (size_t)page, vec) != 0 && errno == ENOMEM)
      return 0;
    done += k;
  }
  return 1;
}

int uv_mem_reg_addr(struct uv_mr *m, void *addr, size_t len)
{
  void *ctx = cuda_ctx_of((uintptr_t)addr);

  if (ctx != NULL) {
    m->kind = UV_MEM_CUDA;
    m->cuda_ctx = ctx;
    m->base = (uintptr_t)addr;
    return 0;
  }
  if (len > 0 && !range_mapped((uintptr_t)addr, len))
    return -EFAULT;
  m->kind = UV_MEM_HOST;
  m->base = (uintptr_t)addr;
  return 0;
}

int uv_mem_reg_dmabuf(struct uv_mr *m, int fd, uint64_t offset, size_t len)
{
  long page = sysconf(_SC_PAGESIZE);
  uint64_t lead = offset & (uint64_t)(page - 1);
  struct stat st;
  void *ctx, *p;

  if (fd < 0 || fstat(fd, &st) != 0)
    return -EBADF;
  ctx = cuda_ctx_of((uintptr_t)m->iova);
  if (ctx != NULL) {
    /* A CUDA DMA-BUF (cuMemGetHandleForAddressRange): its iova is the device pointer. */
    m->kind = UV_MEM_CUDA;
    m->cuda_ctx = ctx;
    m->base = (uintptr_t)m->iova;
    return 0;
  }
  p = mmap(NULL, len + lead, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(offset - lead));
  if (p == MAP_FAILED)
    return -errno;
  m->kind = UV_MEM_MAPPED;
  m->map = p;
  m->map_len = len + lead;
  m->base = (uintptr_t)p + lead;
  return 0;
}

void uv_mem_unreg(struct uv_mr *m)
{
  if (m->kind == UV_MEM_MAPPED && m->map != NULL)
    munmap(m->map, m->map_len);
  m->map = NULL;
}

/* ---- copies ---- */

static int host_io(uintptr_t addr, void *buf, size_t len, int write_mem)
{
  size_t done = 0;

  if (mem_fd < 0) {
    if (write_mem)
      memcpy((void *)addr, buf, len);
    else
      memcpy(buf, (const void *)addr, len);
    return 0;
  }
  while (done < len) {
    ssize_t n = write_mem ? pwrite(mem_fd, (char *)buf + done, len - done, (off_t)(addr + done))
                          : pread(mem_fd, (char *)buf + done, len - done, (off_t)(addr + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? -errno : -EFAULT;
    done += (size_t)n;
  }
  return 0;
}

int uv_mem_read(struct uv_mr *m, uint64_t off, void *dst, size_t len)
{
  if (len == 0)
    return 0;
  switch (m->kind) {
  case UV_MEM_CUDA: return cuda_copy(m, off, dst, len, 0);
  case UV_MEM_MAPPED: memcpy(dst, (const void *)(m->base + off), len); return 0;
  default: return host_io(m->base + off, dst, len, 0);
  }
}

int uv_mem_write(struct uv_mr *m, uint64_t off, const void *src, size_t len)
{
  if (len == 0)
    return 0;
  switch (m->kind) {
  case UV_MEM_CUDA: return cuda_copy(m, off, (void *)src, len, 1);
  case UV_MEM_MAPPED: memcpy((void *)(m->base + off), src, len); return 0;
  default: return host_io(m->base + off, (void *)src, len, 1);
  }
}
