/*
 * test_core_status.c - the status segment mcpnet-top reads (status.h), owner and reader: the
 * file's life (created 0600 with the first reference, gone with the last), slots handed
 * out and freed, what a reader sees of them, that a reader trusts nothing (another
 * layout, a short file, text that is not printable), and liveness: a process killed with
 * its segment left behind is read as dead and its file is removed by the next owner that
 * starts, and a stopped owner is read as stopped.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcp_test.h"
#include "core/param.h"
#include "core/status.h"

static char dir[64];
static struct mcp_config cfg;

static int count_files(void) { return mcp_status_scan(dir, NULL, NULL); }

/* The one segment file under dir that is not path (a child's), or "". */
static void other_file(const char *path, char *out, size_t len)
{
  struct dirent *e;
  DIR *d = opendir(dir);

  out[0] = '\0';
  while (d != NULL && (e = readdir(d)) != NULL) {
    char full[600];

    snprintf(full, sizeof(full), "%s/%s", dir, e->d_name);
    if (strncmp(e->d_name, MCP_STATUS_NAME_PREFIX, strlen(MCP_STATUS_NAME_PREFIX)) == 0 &&
        (path == NULL || strcmp(full, path) != 0))
      snprintf(out, len, "%s", full);
  }
  if (d != NULL)
    closedir(d);
}

static void test_lifecycle(void)
{
  struct mcp_status_proc p;
  struct mcp_status_comm *a, *b;
  char path[512], err[200];
  struct stat st;

  CHECK_EQ_INT(count_files(), 0);
  mcp_status_acquire(&cfg, "192.0.2.1:41000");
  mcp_status_acquire(&cfg, "192.0.2.1:41000"); /* a second comm: the same segment */
  snprintf(path, sizeof(path), "%s", mcp_status_path());
  CHECK(strncmp(path, dir, strlen(dir)) == 0);
  CHECK_EQ_INT(count_files(), 1);
  CHECK_EQ_INT(stat(path, &st), 0);
  CHECK_EQ_INT(st.st_mode & 0777, 0600); /* the same user and root only */
  a = mcp_status_open(1, 7);
  b = mcp_status_open(2, 8);
  CHECK(a != NULL && b != NULL && a != b);
  mcp_status_posted(&a->count);
  mcp_status_posted(&a->count);
  mcp_status_done(&a->count, 4096);
  mcp_status_begin(b);
  b->state = MCP_STATUS_WAIT_ACCEPT;
  snprintf(b->peer_host, sizeof(b->peer_host), "lab-b");
  b->peer_pid = 903;
  mcp_status_end(b);
  CHECK_EQ_INT(mcp_status_read(path, &p, err, sizeof(err)), 0);
  CHECK_EQ_INT(p.alive, 1);
  CHECK_EQ_INT(p.stopped, 0);
  CHECK_EQ_INT(p.head.pid, getpid());
  CHECK_EQ_STR(p.head.addr, "192.0.2.1:41000");
  CHECK_EQ_INT(p.ncomm, 2);
  CHECK_EQ_INT(p.comm[0].kind, 1);
  CHECK_EQ_INT(p.comm[0].id, 7);
  CHECK_EQ_INT(p.comm[0].state, MCP_STATUS_CONNECTING);
  CHECK_EQ_INT(p.comm[0].count.posted, 2);
  CHECK_EQ_INT(p.comm[0].count.done, 1);
  CHECK_EQ_INT(p.comm[0].count.bytes, 4096);
  CHECK_EQ_INT(p.comm[1].state, MCP_STATUS_WAIT_ACCEPT);
  CHECK_EQ_STR(p.comm[1].peer_host, "lab-b");
  CHECK_EQ_INT(p.comm[1].peer_pid, 903);
  mcp_status_proc_free(&p);
  /* A closed slot is not shown, and is the next one handed out, counters zeroed. */
  mcp_status_close(a);
  CHECK_EQ_INT(mcp_status_read(path, &p, err, sizeof(err)), 0);
  CHECK_EQ_INT(p.ncomm, 1);
  CHECK_EQ_INT(p.comm[0].id, 8);
  mcp_status_proc_free(&p);
  CHECK(mcp_status_open(1, 9) == a);
  CHECK_EQ_INT(a->count.posted, 0);
  mcp_status_close(a);
  mcp_status_close(b);
  mcp_status_release();
  CHECK_EQ_INT(count_files(), 1); /* one reference left */
  mcp_status_release();
  CHECK_EQ_INT(count_files(), 0); /* nothing outlives the last comm */
  CHECK_EQ_INT(stat(path, &st), -1);
}

static void test_off(void)
{
  cfg.status = 0;
  mcp_status_acquire(&cfg, "");
  CHECK(mcp_status_open(1, 1) == NULL);
  CHECK_EQ_INT(count_files(), 0);
  mcp_status_release();
  cfg.status = 1;
  /* A directory that does not exist: not published, nothing fails. */
  cfg.status_dir = "/nonexistent-mcpnet-status";
  mcp_status_acquire(&cfg, "");
  CHECK(mcp_status_open(1, 1) == NULL);
  mcp_status_release();
  cfg.status_dir = dir;
}

static void test_slots_run_out(void)
{
  static struct mcp_status_comm *s[MCP_STATUS_SLOTS];
  struct mcp_status_proc p;
  char err[200];
  int i;

  mcp_status_acquire(&cfg, "");
  for (i = 0; i < MCP_STATUS_SLOTS; i++) {
    s[i] = mcp_status_open(1, (unsigned)i);
    CHECK(s[i] != NULL);
  }
  CHECK(mcp_status_open(1, 1) == NULL); /* counted, not shown */
  CHECK_EQ_INT(mcp_status_read(mcp_status_path(), &p, err, sizeof(err)), 0);
  CHECK_EQ_INT(p.ncomm, MCP_STATUS_SLOTS);
  CHECK_EQ_INT(p.head.unshown, 1);
  mcp_status_proc_free(&p);
  for (i = 0; i < MCP_STATUS_SLOTS; i++)
    mcp_status_close(s[i]);
  mcp_status_release();
}

/* What a reader makes of what it must not trust. */
static void test_reader_trusts_nothing(void)
{
  struct mcp_status_proc p;
  struct mcp_status_comm *s;
  char path[600], err[200];
  int fd;

  /* Text that is not printable ASCII comes out with '?' in its place. */
  mcp_status_acquire(&cfg, "");
  s = mcp_status_open(2, 3);
  mcp_status_begin(s);
  memcpy(s->peer_host, "evil\nhost\033[2J", 14);
  memset(s->wait_text, 'x', sizeof(s->wait_text)); /* no terminating NUL */
  mcp_status_end(s);
  CHECK_EQ_INT(mcp_status_read(mcp_status_path(), &p, err, sizeof(err)), 0);
  CHECK_EQ_STR(p.comm[0].peer_host, "evil?host?[2J");
  CHECK_EQ_INT(strlen(p.comm[0].wait_text), sizeof(s->wait_text) - 1);
  mcp_status_proc_free(&p);
  /* A file of another user cannot speak for this process (root can make one to try). */
  if (geteuid() == 0) {
    char copy[600], cmd[1400];

    snprintf(copy, sizeof(copy), "%s/" MCP_STATUS_NAME_PREFIX "1.forged" MCP_STATUS_NAME_SUFFIX, dir);
    snprintf(cmd, sizeof(cmd), "cp %s %s", mcp_status_path(), copy);
    CHECK_EQ_INT(system(cmd), 0);
    CHECK_EQ_INT(chown(copy, 65534, 65534), 0);
    CHECK_EQ_INT(mcp_status_read(copy, &p, err, sizeof(err)), -EPERM);
    CHECK(strstr(err, "a process of another user") != NULL);
    unlink(copy);
  }
  mcp_status_close(s);
  mcp_status_release();
  /* A file with the name but not the layout. */
  snprintf(path, sizeof(path), "%s/" MCP_STATUS_NAME_PREFIX "1.bad" MCP_STATUS_NAME_SUFFIX, dir);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  CHECK_EQ_INT(write(fd, "short", 5), 5);
  close(fd);
  CHECK_EQ_INT(mcp_status_read(path, &p, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "too short") != NULL);
  {
    static struct mcp_status_head h;

    h.magic = MCP_STATUS_MAGIC;
    h.layout = MCP_STATUS_VERSION + 1;
    h.head_size = MCP_STATUS_HEAD_BYTES;
    h.slot_size = MCP_STATUS_SLOT_BYTES;
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK_EQ_INT(write(fd, &h, sizeof(h)), sizeof(h));
    CHECK_EQ_INT(ftruncate(fd, MCP_STATUS_HEAD_BYTES), 0);
    close(fd);
    CHECK_EQ_INT(mcp_status_read(path, &p, err, sizeof(err)), -EPROTONOSUPPORT);
    CHECK(strstr(err, "layout version 2") != NULL);
    /* Slots the file is too short to hold. */
    h.layout = MCP_STATUS_VERSION;
    h.nslots = 100;
    h.slots_used = 100;
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK_EQ_INT(write(fd, &h, sizeof(h)), sizeof(h));
    CHECK_EQ_INT(ftruncate(fd, MCP_STATUS_HEAD_BYTES + 10 * MCP_STATUS_SLOT_BYTES), 0);
    close(fd);
    CHECK_EQ_INT(mcp_status_read(path, &p, err, sizeof(err)), -EBADMSG);
  }
  /* Not ours to judge: a file that is not a segment is left alone by the cleanup. */
  CHECK_EQ_INT(mcp_status_cleanup(dir), 0);
  unlink(path);
}

/* A child that publishes one comm and then does what it is told through a pipe. */
static pid_t child_start(int *to_child, char *path, size_t plen)
{
  int down[2], up[2];
  pid_t pid;
  char c;

  CHECK_EQ_INT(pipe(down), 0);
  CHECK_EQ_INT(pipe(up), 0);
  pid = fork();
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    mcp_status_acquire(&cfg, "192.0.2.9:41000");
    mcp_status_posted(&mcp_status_open(2, 5)->count);
    if (write(up[1], "r", 1) != 1)
      _exit(3);
    /* 'x': exit without releasing (a killed process leaves its file). */
    if (read(down[0], &c, 1) == 1 && c == 'x')
      _exit(0);
    _exit(0);
  }
  close(down[0]);
  close(up[1]);
  CHECK_EQ_INT(read(up[0], &c, 1), 1);
  close(up[0]);
  *to_child = down[1];
  other_file(mcp_status_path()[0] ? mcp_status_path() : NULL, path, plen);
  return pid;
}

static void test_dead_and_stopped(void)
{
  struct mcp_status_proc p;
  char path[600], err[200];
  int to_child, status;
  pid_t pid;

  /* Stopped: the reader says so, and the owner is alive. */
  pid = child_start(&to_child, path, sizeof(path));
  CHECK(path[0] != '\0');
  CHECK_EQ_INT(kill(pid, SIGSTOP), 0);
  CHECK_EQ_INT(waitpid(pid, &status, WUNTRACED), pid);
  CHECK_EQ_INT(mcp_status_read(path, &p, err, sizeof(err)), 0);
  CHECK_EQ_INT(p.alive, 1);
  CHECK_EQ_INT(p.stopped, 1);
  CHECK_EQ_INT(p.pstate, 'T');
  CHECK_EQ_INT(p.head.pid, pid);
  CHECK_EQ_INT(p.ncomm, 1);
  CHECK_EQ_INT(p.comm[0].count.posted, 1);
  mcp_status_proc_free(&p);
  /* Killed mid-run: its file stays, read as dead (the kernel dropped its lock). */
  CHECK_EQ_INT(kill(pid, SIGKILL), 0);
  CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
  close(to_child);
  CHECK_EQ_INT(count_files(), 1);
  CHECK_EQ_INT(mcp_status_read(path, &p, err, sizeof(err)), 0);
  CHECK_EQ_INT(p.alive, 0);
  mcp_status_proc_free(&p);
  /* The next mcpnet process of this user that starts removes it. */
  mcp_status_acquire(&cfg, "");
  CHECK_EQ_INT(count_files(), 1);
  CHECK(access(path, F_OK) != 0);
  mcp_status_release();
  CHECK_EQ_INT(count_files(), 0);
  /* An owner that exits without releasing: the same. */
  pid = child_start(&to_child, path, sizeof(path));
  CHECK_EQ_INT(write(to_child, "x", 1), 1);
  CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
  close(to_child);
  CHECK_EQ_INT(mcp_status_cleanup(dir), 1);
  CHECK_EQ_INT(count_files(), 0);
}

int main(void)
{
  snprintf(dir, sizeof(dir), "/tmp/mcpnet-status-test.XXXXXX");
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  cfg.status = 1;
  cfg.status_dir = dir;
  cfg.local_rank = -1;
  RUN_TEST(test_lifecycle);
  RUN_TEST(test_off);
  RUN_TEST(test_slots_run_out);
  RUN_TEST(test_reader_trusts_nothing);
  RUN_TEST(test_dead_and_stopped);
  rmdir(dir);
  return TEST_EXIT();
}
