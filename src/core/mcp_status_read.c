/*
 * mcp_status_read.c - reading status segments (status.h) from outside their process:
 * mcpnet-top, the unit tests, and the cleanup a new owner runs before it creates its own.
 *
 * A reader trusts nothing it reads: the layout is checked against the header's magic,
 * version and sizes, every count is bounded by the file's size, text is cut to its array
 * and made printable, and a slot is copied under its generation so that a comm caught
 * between two states is read again rather than half-old, half-new. Whether the owner
 * lives is the kernel's word (its lock), checked against the pid's start time when the
 * reader shares the owner's pid namespace (a child forked without exec keeps the lock).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"

uint64_t mcp_status_pidns(void)
{
  struct stat st;

  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

uint64_t mcp_status_start_ticks(int pid, char *state)
{
  char path[64], buf[1024], *p;
  unsigned long long ticks = 0;
  ssize_t n;
  int fd, field;

  if (state != NULL)
    *state = '?';
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  /* "pid (comm) S ppid ...": the name may hold spaces and parentheses; fields follow the
   * last ')'. starttime is the 22nd field, the 20th after the name. */
  p = strrchr(buf, ')');
  if (p == NULL || p[1] != ' ')
    return 0;
  p += 2;
  if (state != NULL)
    *state = *p;
  for (field = 1; field < 20 && p != NULL; field++) {
    p = strchr(p, ' ');
    if (p != NULL)
      p++;
  }
  if (p == NULL || sscanf(p, "%llu", &ticks) != 1)
    return 0;
  return ticks;
}

int mcp_status_owner_alive(int fd, const struct mcp_status_head *h)
{
  struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
  uint64_t ns = mcp_status_pidns();

  if (fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK)
    return 0; /* nobody holds the owner's lock: it is gone */
  /* In the owner's pid namespace its pid must still be the process that made the file. */
  if (ns != 0 && h->pidns == ns && h->start_ticks != 0 &&
      mcp_status_start_ticks((int)h->pid, NULL) != h->start_ticks)
    return 0;
  return 1;
}

static int name_matches(const char *name)
{
  size_t n = strlen(name), pre = strlen(MCP_STATUS_NAME_PREFIX), suf = strlen(MCP_STATUS_NAME_SUFFIX);

  return n > pre + suf && strncmp(name, MCP_STATUS_NAME_PREFIX, pre) == 0 &&
    strcmp(name + n - suf, MCP_STATUS_NAME_SUFFIX) == 0;
}

int mcp_status_scan(const char *dir, int (*fn)(const char *path, void *arg), void *arg)
{
  char path[512];
  struct dirent *e;
  DIR *d = opendir(dir);
  int count = 0;

  if (d == NULL)
    return -errno;
  while ((e = readdir(d)) != NULL) {
    if (!name_matches(e->d_name))
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    count++;
    if (fn != NULL && fn(path, arg) != 0)
      break;
  }
  closedir(d);
  return count;
}

/* The header at fd, checked against this build's layout and the file's size. */
static int head_read(int fd, struct mcp_status_head *h, off_t size, char *err, size_t errlen)
{
  if (size < MCP_STATUS_HEAD_BYTES || pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h)) {
    snprintf(err, errlen, "too short for a status header");
    return -EBADMSG;
  }
  if (h->magic != MCP_STATUS_MAGIC) {
    snprintf(err, errlen, "not an mcpnet status file (magic %#x)", h->magic);
    return -EBADMSG;
  }
  if (h->layout != MCP_STATUS_VERSION || h->head_size != MCP_STATUS_HEAD_BYTES ||
      h->slot_size != MCP_STATUS_SLOT_BYTES) {
    snprintf(err, errlen, "written by another mcpnet (layout version %u, this reader reads %d)", h->layout,
             MCP_STATUS_VERSION);
    return -EPROTONOSUPPORT;
  }
  if (h->nslots > MCP_STATUS_SLOTS ||
      (off_t)MCP_STATUS_HEAD_BYTES + (off_t)h->nslots * MCP_STATUS_SLOT_BYTES > size) {
    snprintf(err, errlen, "its %u slots do not fit its %lld bytes", h->nslots, (long long)size);
    return -EBADMSG;
  }
  h->host[sizeof(h->host) - 1] = '\0';
  h->name[sizeof(h->name) - 1] = '\0';
  h->version[sizeof(h->version) - 1] = '\0';
  h->addr[sizeof(h->addr) - 1] = '\0';
  mcp_status_text(h->host, sizeof(h->host), h->host);
  mcp_status_text(h->name, sizeof(h->name), h->name);
  mcp_status_text(h->version, sizeof(h->version), h->version);
  mcp_status_text(h->addr, sizeof(h->addr), h->addr);
  return 0;
}

/* Between the copy and the second read of gen: the copy's loads stay before it. GCC
 * refuses fences under ThreadSanitizer; its builds never read a segment while its writer
 * writes (only mcpnet-top, a separate process, does), so they go without. */
#if defined(__SANITIZE_THREAD__)
#define READ_BARRIER() ((void)0)
#else
#define READ_BARRIER() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/* Slot src copied into dst as one version of it: 1, or 0 when it is free or kept changing. */
static int slot_copy(const struct mcp_status_comm *src, struct mcp_status_comm *dst)
{
  for (int tries = 0; tries < 1000; tries++) {
    uint32_t g1 = __atomic_load_n(&src->gen, __ATOMIC_ACQUIRE), g2;

    if (g1 & 1u) {
      sched_yield();
      continue;
    }
    memcpy(dst, src, sizeof(*dst));
    READ_BARRIER();
    g2 = __atomic_load_n(&src->gen, __ATOMIC_RELAXED);
    if (g1 != g2)
      continue;
    /* The counters are the data path's, outside gen: each a value it had. */
    dst->count.posted = __atomic_load_n(&src->count.posted, __ATOMIC_RELAXED);
    dst->count.done = __atomic_load_n(&src->count.done, __ATOMIC_RELAXED);
    dst->count.bytes = __atomic_load_n(&src->count.bytes, __ATOMIC_RELAXED);
    if (dst->state == MCP_STATUS_FREE || dst->state > MCP_STATUS_FAILED)
      return 0;
    dst->ibdev[sizeof(dst->ibdev) - 1] = '\0';
    dst->gid[sizeof(dst->gid) - 1] = '\0';
    dst->peer_host[sizeof(dst->peer_host) - 1] = '\0';
    dst->peer_addr[sizeof(dst->peer_addr) - 1] = '\0';
    dst->wait_text[sizeof(dst->wait_text) - 1] = '\0';
    dst->cause[sizeof(dst->cause) - 1] = '\0';
    mcp_status_text(dst->ibdev, sizeof(dst->ibdev), dst->ibdev);
    mcp_status_text(dst->gid, sizeof(dst->gid), dst->gid);
    mcp_status_text(dst->peer_host, sizeof(dst->peer_host), dst->peer_host);
    mcp_status_text(dst->peer_addr, sizeof(dst->peer_addr), dst->peer_addr);
    mcp_status_text(dst->wait_text, sizeof(dst->wait_text), dst->wait_text);
    mcp_status_text(dst->cause, sizeof(dst->cause), dst->cause);
    if (dst->wait >= MCP_WAIT_COUNT)
      dst->wait = MCP_WAIT_NONE;
    return 1;
  }
  return 0;
}

int mcp_status_read(const char *path, struct mcp_status_proc *p, char *err, size_t errlen)
{
  struct stat st;
  uint32_t used;
  void *map;
  size_t len;
  int fd, rc;

  memset(p, 0, sizeof(*p));
  snprintf(p->path, sizeof(p->path), "%s", path);
  p->stopped = -1;
  p->pstate = '?';
  fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    rc = -errno;
    snprintf(err, errlen, "cannot open: %s", strerror(errno));
    return rc;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "not a regular file");
    close(fd);
    return -EBADMSG;
  }
  if ((rc = head_read(fd, &p->head, st.st_size, err, errlen)) != 0) {
    close(fd);
    return rc;
  }
  p->alive = mcp_status_owner_alive(fd, &p->head);
  if (p->head.pidns != 0 && p->head.pidns == mcp_status_pidns()) {
    char state, proc[64];
    struct stat ps;

    /* A file another user made cannot speak for this user's process. */
    snprintf(proc, sizeof(proc), "/proc/%u", p->head.pid);
    if (stat(proc, &ps) == 0 && ps.st_uid != st.st_uid) {
      snprintf(err, errlen, "it names pid %u, a process of another user than the file's owner", p->head.pid);
      close(fd);
      return -EPERM;
    }

    if (mcp_status_start_ticks((int)p->head.pid, &state) == p->head.start_ticks) {
      p->pstate = state;
      p->stopped = state == 'T' || state == 't';
    }
  }
  used = __atomic_load_n(&p->head.slots_used, __ATOMIC_RELAXED);
  if (used > p->head.nslots)
    used = p->head.nslots;
  len = MCP_STATUS_HEAD_BYTES + (size_t)used * MCP_STATUS_SLOT_BYTES;
  map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    rc = -errno;
    snprintf(err, errlen, "cannot map: %s", strerror(errno));
    return rc;
  }
  p->comm = calloc(used > 0 ? used : 1, sizeof(*p->comm));
  if (p->comm == NULL) {
    munmap(map, len);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < used; i++) {
    const struct mcp_status_comm *s =
      (const void *)((const char *)map + MCP_STATUS_HEAD_BYTES + (size_t)i * MCP_STATUS_SLOT_BYTES);

    p->ncomm += slot_copy(s, &p->comm[p->ncomm]);
  }
  /* The heartbeat moves while the process runs: the copied header keeps the first read. */
  p->head.check_ms = __atomic_load_n(&((const struct mcp_status_head *)map)->check_ms, __ATOMIC_RELAXED);
  munmap(map, len);
  return 0;
}

void mcp_status_proc_free(struct mcp_status_proc *p)
{
  free(p->comm);
  p->comm = NULL;
  p->ncomm = 0;
}

/* A segment of this user whose owner is gone: unlinked. */
static int cleanup_one(const char *path, void *arg)
{
  int *removed = arg;
  struct mcp_status_head h;
  struct stat st;
  char err[128];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

  if (fd < 0)
    return 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      head_read(fd, &h, st.st_size, err, sizeof(err)) == 0 && !mcp_status_owner_alive(fd, &h) &&
      unlink(path) == 0)
    (*removed)++;
  close(fd);
  return 0;
}

int mcp_status_cleanup(const char *dir)
{
  int removed = 0;

  mcp_status_scan(dir, cleanup_one, &removed);
  return removed;
}
