/*
 * mcp_status.c - the owner's side of the status segment (status.h): one file per
 * process under MCPNET_STATUS_DIR, created with the first comm and unlinked with the
 * last, holding a header and one slot per comm that mcpnet-top reads.
 *
 * Why a file and not the process's memory: the tool must read it while the process is
 * stopped, stuck in a kernel or busy elsewhere, without ptrace rights. Why a lock on it:
 * a process that is killed cannot unlink its file, and a pid can be reused; the kernel
 * drops an open file description's lock when the process dies, which no pid check can
 * tell across pid namespaces. Creation is atomic for readers: the file is filled and
 * locked under a hidden name, then renamed, so a file with the final name and no lock
 * belongs to a dead process and the next process of its user removes it.
 *
 * Publishing is best effort: nothing here fails a comm. Without a segment, or with every
 * slot taken, a comm gets no slot and counts in the data path into its own memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "core/random.h"
#include "core/rankmap.h"
#include "core/status.h"

static struct {
  pthread_mutex_t lock;
  int users;
  int tried; /* this round of users tried to create it (one attempt, one INFO) */
  int fd;
  void *map;
  size_t len;
  struct mcp_status_head *head;
  char path[512];
} seg = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static const char *const state_names[] = {
  [MCP_STATUS_FREE] = "free",
  [MCP_STATUS_CONNECTING] = "connecting",
  [MCP_STATUS_WAIT_ACCEPT] = "waiting for the peer's accept",
  [MCP_STATUS_WAIT_CONNECT] = "waiting for the peer's connect",
  [MCP_STATUS_READY] = "connected",
  [MCP_STATUS_RECOVERING] = "recovering",
  [MCP_STATUS_FAILED] = "failed",
};

static const char *const wait_names[] = {
  [MCP_WAIT_NONE] = "nothing",
  [MCP_WAIT_ACK] = "an acknowledgement",
  [MCP_WAIT_CTS] = "a clear-to-send",
  [MCP_WAIT_TAG] = "a tag under PXN",
  [MCP_WAIT_GROUP] = "the sends of a grouped receive",
  [MCP_WAIT_ISEND] = "an isend",
  [MCP_WAIT_DATA] = "data",
  [MCP_WAIT_PARTIAL] = "the rest of a message",
  [MCP_WAIT_TEST] = "a test of its receives",
  [MCP_WAIT_FLUSH] = "a flush",
};

const char *mcp_status_state_name(unsigned state)
{
  return state < sizeof(state_names) / sizeof(state_names[0]) ? state_names[state] : "unknown";
}

const char *mcp_status_wait_name(unsigned wait)
{
  return wait < sizeof(wait_names) / sizeof(wait_names[0]) ? wait_names[wait] : "unknown";
}

void mcp_status_text(char *dst, size_t len, const char *src)
{
  size_t i;

  if (len == 0)
    return;
  for (i = 0; i + 1 < len && src != NULL && src[i] != '\0'; i++)
    dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
  dst[i] = '\0';
}

/* The launcher's global rank: the first of the usual variables that holds a number;
 * -ENOENT when none does. */
static int env_rank(void)
{
  static const char *const vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};

  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char *v = getenv(vars[i]);
    char *end;
    long n;

    if (v == NULL || *v == '\0')
      continue;
    n = strtol(v, &end, 10);
    if (*end == '\0' && n >= 0 && n <= 0x7fffffff)
      return (int)n;
  }
  return -ENOENT;
}

static void head_fill(struct mcp_status_head *h, const struct mcp_config *cfg, const char *addr)
{
  const char *source;
  char name[32] = "", err[128];
  int fd, n;

  h->layout = MCP_STATUS_VERSION;
  h->head_size = MCP_STATUS_HEAD_BYTES;
  h->slot_size = MCP_STATUS_SLOT_BYTES;
  h->nslots = MCP_STATUS_SLOTS;
  h->pid = (uint32_t)getpid();
  h->start_ticks = mcp_status_start_ticks((int)h->pid, NULL);
  h->pidns = mcp_status_pidns();
  h->created_ms = mcp_clock_ms();
  n = env_rank();
  h->rank = n >= 0 ? n : -1;
  n = mcp_local_rank(cfg->local_rank, NULL, NULL, &source, err, sizeof(err));
  h->local_rank = n >= 0 ? n : -1;
  if (gethostname(h->host, sizeof(h->host) - 1) != 0)
    h->host[0] = '\0';
  mcp_status_text(h->host, sizeof(h->host), h->host);
  fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t got = read(fd, name, sizeof(name) - 1);
    name[got > 0 ? got : 0] = '\0';
    name[strcspn(name, "\n")] = '\0';
    close(fd);
  }
  mcp_status_text(h->name, sizeof(h->name), name);
  mcp_status_text(h->version, sizeof(h->version), mcp_version_text());
  mcp_status_text(h->addr, sizeof(h->addr), addr);
}

/* Creates, locks and fills the file under a hidden name, then gives it its final name.
 * 0, or -errno with why. */
static int seg_create(const struct mcp_config *cfg, const char *addr, char *why, size_t whylen)
{
  const char *dir = cfg->status_dir != NULL ? cfg->status_dir : "/dev/shm";
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  char tmp[sizeof(seg.path)];
  uint64_t tag = 0;
  int rc;

  mcp_status_cleanup(dir);
  if (mcp_random_u64(&tag) != 0)
    tag = mcp_clock_ns();
  snprintf(seg.path, sizeof(seg.path), "%s/" MCP_STATUS_NAME_PREFIX "%d.%08x" MCP_STATUS_NAME_SUFFIX, dir,
           (int)getpid(), (unsigned)tag);
  snprintf(tmp, sizeof(tmp), "%s/.mcpnet.%d.%08x.tmp", dir, (int)getpid(), (unsigned)tag);
  seg.len = MCP_STATUS_HEAD_BYTES + (size_t)MCP_STATUS_SLOTS * MCP_STATUS_SLOT_BYTES;
  seg.fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (seg.fd < 0) {
    rc = -errno;
    snprintf(why, whylen, "cannot create %.200s: %s", tmp, strerror(-rc));
    return rc;
  }
  if (fcntl(seg.fd, F_OFD_SETLK, &fl) != 0 || ftruncate(seg.fd, (off_t)seg.len) != 0) {
    rc = -errno;
    snprintf(why, whylen, "cannot lock or size %.200s: %s", tmp, strerror(-rc));
    goto fail;
  }
  seg.map = mmap(NULL, seg.len, PROT_READ | PROT_WRITE, MAP_SHARED, seg.fd, 0);
  if (seg.map == MAP_FAILED) {
    rc = -errno;
    seg.map = NULL;
    snprintf(why, whylen, "cannot map %.200s: %s", tmp, strerror(-rc));
    goto fail;
  }
  seg.head = seg.map;
  head_fill(seg.head, cfg, addr);
  __atomic_store_n(&seg.head->magic, MCP_STATUS_MAGIC, __ATOMIC_RELEASE);
  if (rename(tmp, seg.path) != 0) {
    rc = -errno;
    snprintf(why, whylen, "cannot rename %.200s: %s", tmp, strerror(-rc));
    goto fail;
  }
  return 0;
fail:
  if (seg.map != NULL)
    munmap(seg.map, seg.len);
  seg.map = NULL;
  seg.head = NULL;
  unlink(tmp);
  close(seg.fd);
  seg.fd = -1;
  seg.path[0] = '\0';
  return rc;
}

void mcp_status_acquire(const struct mcp_config *cfg, const char *addr)
{
  char why[600];

  pthread_mutex_lock(&seg.lock);
  if (seg.users++ == 0 && !seg.tried) {
    seg.tried = 1;
    if (!cfg->status)
      MCP_INFO(NCCL_INIT | NCCL_NET,
               "MCPNET_STATUS=0: comms are not published; mcpnet-top will not see them");
    else if (seg_create(cfg, addr, why, sizeof(why)) != 0)
      MCP_INFO(NCCL_INIT | NCCL_NET, "comms are not published for mcpnet-top: %s (MCPNET_STATUS_DIR)", why);
    else
      MCP_INFO(NCCL_INIT | NCCL_NET, "comms published for mcpnet-top in %s", seg.path);
  }
  pthread_mutex_unlock(&seg.lock);
}

void mcp_status_release(void)
{
  pthread_mutex_lock(&seg.lock);
  if (seg.users > 0 && --seg.users == 0) {
    if (seg.map != NULL) {
      unlink(seg.path);
      munmap(seg.map, seg.len);
      close(seg.fd); /* drops the lock */
    }
    seg.map = NULL;
    seg.head = NULL;
    seg.fd = -1;
    seg.path[0] = '\0';
    seg.tried = 0;
  }
  pthread_mutex_unlock(&seg.lock);
}

static struct mcp_status_comm *slot_at(uint32_t i)
{
  return (struct mcp_status_comm *)(void *)((char *)seg.map + MCP_STATUS_HEAD_BYTES +
                                            (size_t)i * MCP_STATUS_SLOT_BYTES);
}

struct mcp_status_comm *mcp_status_open(int kind, unsigned id)
{
  struct mcp_status_comm *s = NULL;
  uint32_t i;

  pthread_mutex_lock(&seg.lock);
  if (seg.head != NULL) {
    for (i = 0; i < seg.head->slots_used && s == NULL; i++)
      if (slot_at(i)->state == MCP_STATUS_FREE)
        s = slot_at(i);
    if (s == NULL && seg.head->slots_used < MCP_STATUS_SLOTS)
      s = slot_at(__atomic_fetch_add(&seg.head->slots_used, 1, __ATOMIC_RELEASE));
    if (s == NULL)
      seg.head->unshown++;
  }
  if (s != NULL) {
    mcp_status_begin(s);
    /* Everything but gen, which a reader may be looking at. */
    memset(&s->count, 0, sizeof(s->count));
    memset(&s->state, 0, sizeof(*s) - offsetof(struct mcp_status_comm, state));
    s->kind = (uint32_t)kind;
    s->id = id;
    s->peer_local_rank = -1;
    s->state_ms = mcp_clock_ms();
    s->state = MCP_STATUS_CONNECTING;
    mcp_status_end(s);
  }
  pthread_mutex_unlock(&seg.lock);
  return s;
}

void mcp_status_close(struct mcp_status_comm *s)
{
  if (s == NULL)
    return;
  pthread_mutex_lock(&seg.lock);
  mcp_status_begin(s);
  s->state = MCP_STATUS_FREE;
  mcp_status_end(s);
  pthread_mutex_unlock(&seg.lock);
}

void mcp_status_heartbeat(uint64_t now_ms)
{
  struct mcp_status_head *h = __atomic_load_n(&seg.head, __ATOMIC_RELAXED);

  if (h != NULL)
    __atomic_store_n(&h->check_ms, now_ms, __ATOMIC_RELAXED);
}

const char *mcp_status_path(void) { return seg.path; }
