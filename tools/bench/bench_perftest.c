/*
 * bench_perftest.c - perftest as the yardstick: builds the command lines, runs the
 * tools as child processes with their output in a temporary file, waits with a limit
 * (a perftest server whose client never came waits forever), and reads the one number
 * each tool is for: the "BW average" column of the bandwidth tools and t_typical of the
 * latency tools. perftest prints MiB/s (its MBS format divides by 0x100000); the table
 * uses MB/s = 1e6 bytes/s, so bandwidth is converted here.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* perftest takes any RC message size from 1 byte to 2^31 (checked for all four tools
 * up to 64 MiB); zero-byte messages it refuses. */
const char *bench_perftest_refuses(enum bench_kind k, size_t size)
{
  (void)k;
  return size == 0 ? "perftest needs messages of at least 1 byte" : NULL;
}

int bench_perftest_find(const char *tool)
{
  const char *path = getenv("PATH");
  char buf[1024];

  if (path == NULL)
    path = "/usr/bin:/bin";
  while (*path) {
    const char *end = strchr(path, ':');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, tool);
    if (access(buf, X_OK) == 0)
      return 1;
    path += len + (end != NULL);
  }
  return 0;
}

static void build_argv(struct bench_pt_job *j, char **argv, char (*store)[32])
{
  int n = 0, s = 0;

  argv[n++] = (char *)bench_series_lookup(j->kind)->tool;
  argv[n++] = "-d";
  argv[n++] = (char *)j->dev;
  if (j->ib_port > 1) {
    argv[n++] = "-i";
    snprintf(store[s], 32, "%d", j->ib_port);
    argv[n++] = store[s++];
  }
  argv[n++] = "-x";
  snprintf(store[s], 32, "%d", j->gid_index);
  argv[n++] = store[s++];
  argv[n++] = "-p";
  snprintf(store[s], 32, "%d", j->tcp_port);
  argv[n++] = store[s++];
  argv[n++] = "-s";
  snprintf(store[s], 32, "%zu", j->size);
  argv[n++] = store[s++];
  argv[n++] = "-n";
  snprintf(store[s], 32, "%llu", (unsigned long long)j->iters);
  argv[n++] = store[s++];
  if (j->depth > 0) {
    argv[n++] = "-t";
    snprintf(store[s], 32, "%d", j->depth);
    argv[n++] = store[s++];
  }
  if (j->host != NULL)
    argv[n++] = (char *)j->host;
  argv[n] = NULL;
}

int bench_perftest_start(struct bench_pt_job *j)
{
  char *argv[20], store[8][32];
  const char *tmp = getenv("TMPDIR");
  size_t off = 0;
  int fd, i;
  pid_t pid;

  build_argv(j, argv, store);
  j->line[0] = '\0';
  for (i = 0; argv[i] != NULL && off < sizeof(j->line); i++)
    off += (size_t)snprintf(j->line + off, sizeof(j->line) - off, "%s%s", i ? " " : "", argv[i]);
  snprintf(j->out_path, sizeof(j->out_path), "%s/mcpnet-bench-perftest-XXXXXX", tmp ? tmp : "/tmp");
  fd = mkstemp(j->out_path);
  if (fd < 0) {
    fprintf(stderr, "mcpnet-bench: cannot create %s: %s\n", j->out_path, strerror(errno));
    return -1;
  }
  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    fprintf(stderr, "mcpnet-bench: fork for %s: %s\n", argv[0], strerror(errno));
    close(fd);
    unlink(j->out_path);
    return -1;
  }
  if (pid == 0) {
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0)
      dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    execvp(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fd);
  j->pid = pid;
  return 0;
}

/* /proc/net/tcp{,6}: "sl local_address rem_address st ...", ports in hex, LISTEN = 0A. */
static int port_listening(int port)
{
  static const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
  char line[512];
  unsigned i;

  for (i = 0; i < 2; i++) {
    FILE *f = fopen(files[i], "r");
    if (f == NULL)
      continue;
    while (fgets(line, sizeof(line), f) != NULL) {
      char local[128];
      unsigned st, p;
      char *colon;
      if (sscanf(line, " %*s %127s %*s %x", local, &st) != 2)
        continue;
      colon = strrchr(local, ':');
      if (colon != NULL && sscanf(colon + 1, "%x", &p) == 1 && (int)p == port && st == 0x0a) {
        fclose(f);
        return 1;
      }
    }
    fclose(f);
  }
  return 0;
}

static void collect_output(struct bench_pt_job *j)
{
  FILE *f = fopen(j->out_path, "r");
  size_t n = 0;
  long size;

  j->out[0] = '\0';
  if (f != NULL) {
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    /* The results are at the end; keep the tail if a tool was chatty. */
    if (size > (long)sizeof(j->out) - 1)
      fseek(f, size - (long)sizeof(j->out) + 1, SEEK_SET);
    else
      fseek(f, 0, SEEK_SET);
    n = fread(j->out, 1, sizeof(j->out) - 1, f);
    j->out[n] = '\0';
    fclose(f);
  }
  unlink(j->out_path);
}

int bench_perftest_wait_listen(struct bench_pt_job *j, int timeout_s)
{
  double deadline = drv_now() + timeout_s;
  int status;

  while (drv_now() < deadline) {
    if (port_listening(j->tcp_port))
      return 0;
    if (waitpid(j->pid, &status, WNOHANG) == j->pid) {
      j->pid = 0;
      collect_output(j);
      fprintf(stderr, "mcpnet-bench: %s exited before listening:\n%s\n", j->line, j->out);
      return -1;
    }
    usleep(5000);
  }
  fprintf(stderr, "mcpnet-bench: %s did not listen on port %d within %d s\n", j->line, j->tcp_port,
          timeout_s);
  return -1;
}

int bench_perftest_finish(struct bench_pt_job *j, int timeout_s)
{
  double deadline = drv_now() + timeout_s;
  int status = 0;

  if (j->pid <= 0)
    return -1;
  for (;;) {
    pid_t r = waitpid(j->pid, &status, WNOHANG);
    if (r == j->pid)
      break;
    if (r < 0 && errno != EINTR) {
      status = -1;
      break;
    }
    if (drv_now() > deadline) {
      fprintf(stderr, "mcpnet-bench: %s still running after %d s: stopped\n", j->line, timeout_s);
      kill(j->pid, SIGKILL);
      waitpid(j->pid, &status, 0);
      j->pid = 0;
      collect_output(j);
      return -1;
    }
    usleep(1000);
  }
  j->pid = 0;
  collect_output(j);
  if (status < 0 || !WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status);
}

void bench_perftest_kill(struct bench_pt_job *j)
{
  if (j->pid > 0) {
    kill(j->pid, SIGKILL);
    waitpid(j->pid, NULL, 0);
    j->pid = 0;
    collect_output(j);
  }
}

int bench_perftest_parse(const struct bench_pt_job *j, double *value, double *mean)
{
  int is_bw = bench_series_lookup(j->kind)->is_bw;
  const char *hdr = strstr(j->out, is_bw ? "BW average[" : "t_typical[");
  const char *line;
  double scale = 1.0;

  if (hdr == NULL)
    return -1;
  if (is_bw) {
    if (strncmp(hdr + 11, "MB/sec]", 7) == 0)
      scale = 1048576.0 / 1e6; /* perftest's "MB" is a MiB */
    else if (strncmp(hdr + 11, "Gb/sec]", 7) == 0)
      scale = 125.0;
    else
      return -1;
  }
  /* The data line follows the header: size, iterations, then the columns. */
  for (line = strchr(hdr, '\n'); line != NULL; line = strchr(line + 1, '\n')) {
    unsigned long long size, iters;
    double c[4];
    int n = sscanf(line + 1, " %llu %llu %lf %lf %lf %lf", &size, &iters, &c[0], &c[1], &c[2], &c[3]);
    if (n < 4 || size != j->size)
      continue;
    if (is_bw) {
      *value = c[1] * scale;
      *mean = *value;
      return 0;
    }
    if (n < 6)
      return -1;
    *value = c[2];
    *mean = c[3];
    return 0;
  }
  return -1;
}
