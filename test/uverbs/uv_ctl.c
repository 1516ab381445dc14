/*
 * uv_ctl.c - faults on demand, and the service thread that takes them.
 *
 * Each process's adapter listens on <fabric>/ctl.<pid>.sock for one command line per
 * connection (mcp-uverbs-ctl sends them; UVERBS_FAULTS="cmd;cmd" applies some at start):
 *
 *   port DEV down|up        the port goes down (IBV_EVENT_PORT_ERR, sysfs state DOWN,
 *                           every packet of the device lost, RTR to a peer ETIMEDOUT)
 *                           or comes back (IBV_EVENT_PORT_ACTIVE); DEV: 0 or mcpuv0
 *   link PID|all down|up    every packet between this process and PID (or any) lost,
 *                           both ways: the link between two "hosts" is cut
 *   drop PID|all PERCENT    that share of packets to and from PID lost at random
 *   delay PID|all MS        each request toward PID held MS milliseconds first
 *   qp QPN drop PERCENT     the same for one QP's packets (sent and received)
 *   qp QPN delay MS
 *   fatal DEV               IBV_EVENT_DEVICE_FATAL, and the device moves nothing more
 *   clear                   every fault above lifted (ports stay as they are)
 *   status                  the devices, their GIDs and state, the faults
 *
 * A lost packet is what a wire loses: nothing answers it, the requester's QP retries
 * after its timeout and fails with IBV_WC_RETRY_EXC_ERR when its retries run out.
 * The service thread also rewrites the counter files of the sysfs view when they moved.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "uv.h"

static struct uv_dev *dev_named(const char *s)
{
  int i;

  for (i = 0; i < uv.ndev; i++)
    if (strcmp(s, uv.dev[i].ibdev.name) == 0 || (s[0] >= '0' && s[0] <= '9' && atoi(s) == i && s[1] == '\0'))
      return &uv.dev[i];
  return NULL;
}

static struct uv_fault *fault_slot(int pid)
{
  int i;

  for (i = 0; i < uv.nfault; i++)
    if (uv.fault[i].pid == pid)
      return &uv.fault[i];
  if (uv.nfault == UV_MAX_FAULTS)
    return NULL;
  memset(&uv.fault[uv.nfault], 0, sizeof(uv.fault[0]));
  uv.fault[uv.nfault].pid = pid;
  return &uv.fault[uv.nfault++];
}

static struct uv_qp *qp_any(uint32_t qpn)
{
  int i;

  for (i = 0; i < uv.ndev; i++) {
    struct uv_qp *q = uv_qp_find(&uv.dev[i], qpn);
    if (q != NULL)
      return q;
  }
  return NULL;
}

static void kick_all(void)
{
  int i;

  for (i = 0; i < uv.ndev; i++)
    for (int h = 0; h < 1024; h++)
      for (struct uv_qp *q = uv.dev[i].qp_hash[h]; q != NULL; q = q->hnext)
        uv_path_kick(q->path);
}

static int status(char *out, size_t len)
{
  size_t used = 0;
  int i;

  used += (size_t)snprintf(out + used, len - used, "ok pid %d fabric %s sysfs %s\n", (int)getpid(), uv.fabric,
                           uv.sysroot);
  for (i = 0; i < uv.ndev && used < len; i++) {
    const struct uv_dev *d = &uv.dev[i];
    int qps = 0;
    for (int h = 0; h < 1024; h++)
      for (struct uv_qp *q = d->qp_hash[h]; q != NULL; q = q->hnext)
        qps++;
    used +=
      (size_t)snprintf(out + used, len - used, "%s id %06x gid ::ffff:127.%u.%u.%u port %s%s qps %d\n",
                       d->ibdev.name, d->id, d->gid[3].raw[13], d->gid[3].raw[14], d->gid[3].raw[15],
                       d->port_state == IBV_PORT_ACTIVE ? "ACTIVE" : "DOWN", d->fatal ? " FATAL" : "", qps);
  }
  for (i = 0; i < uv.ndev && used < len; i++)
    for (int h = 0; h < 1024; h++)
      for (struct uv_qp *q = uv.dev[i].qp_hash[h]; q != NULL && used < len; q = q->hnext)
        used +=
          (size_t)snprintf(out + used, len - used,
                           "qp %#x state %d dest %06x:%#x sq %llu/%llu/%llu used %d rq %llu/%llu used %d "
                           "psn %#x epsn %#x%s\n",
                           q->qp.qp_num, q->state, q->dest_id, q->dest_qpn, (unsigned long long)q->sq_head,
                           (unsigned long long)q->next_send, (unsigned long long)q->sq_tail, q->sq_used,
                           (unsigned long long)q->rq_head, (unsigned long long)q->rq_tail, q->rq_used,
                           q->next_psn, q->epsn, q->path != NULL ? "" : " (no path)");
  for (i = 0; i < uv.nfault && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "fault %s%d down %d drop %d%% delay %d ms\n",
                             uv.fault[i].pid ? "pid " : "all", uv.fault[i].pid ? uv.fault[i].pid : 0,
                             uv.fault[i].down, uv.fault[i].drop_pct, uv.fault[i].delay_ms);
  return 0;
}

/* Under uv.lock. */
static int apply_locked(char *cmd, char *reply, size_t len)
{
  char *w[4] = {NULL, NULL, NULL, NULL}, *save = NULL, *t;
  int n = 0;

  for (t = strtok_r(cmd, " \t\r\n", &save); t != NULL && n < 4; t = strtok_r(NULL, " \t\r\n", &save))
    w[n++] = t;
  if (n == 0)
    goto usage;
  if (strcmp(w[0], "status") == 0)
    return status(reply, len);
  if (strcmp(w[0], "clear") == 0) {
    uv.nfault = 0;
    kick_all();
    snprintf(reply, len, "ok faults cleared\n");
    return 0;
  }
  if ((strcmp(w[0], "port") == 0 || strcmp(w[0], "fatal") == 0) && n >= 2) {
    struct uv_dev *d = dev_named(w[1]);

    if (d == NULL) {
      snprintf(reply, len, "error: no device %s\n", w[1]);
      return -1;
    }
    if (strcmp(w[0], "fatal") == 0) {
      d->fatal = 1;
      uv_dev_event(d, IBV_EVENT_DEVICE_FATAL, 0);
    } else if (n == 3 && (strcmp(w[2], "down") == 0 || strcmp(w[2], "up") == 0)) {
      int up = strcmp(w[2], "up") == 0;
      if (up != (d->port_state == IBV_PORT_ACTIVE)) {
        d->port_state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
        d->cnt[UV_CNT_LINK_DOWNED] += !up;
        uv.cnt_dirty = 1;
        uv_sysfs_port(d);
        uv_dev_event(d, up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR, 1);
        kick_all();
      }
    } else {
      goto usage;
    }
    snprintf(reply, len, "ok %s %s %s\n", w[0], d->ibdev.name, n == 3 ? w[2] : "");
    return 0;
  }
  if ((strcmp(w[0], "link") == 0 || strcmp(w[0], "drop") == 0 || strcmp(w[0], "delay") == 0) && n == 3) {
    int pid = strcmp(w[1], "all") == 0 ? 0 : atoi(w[1]), v = atoi(w[2]);
    struct uv_fault *f;

    if ((pid <= 0 && strcmp(w[1], "all") != 0) || (f = fault_slot(pid)) == NULL)
      goto usage;
    if (strcmp(w[0], "link") == 0) {
      if (strcmp(w[2], "down") != 0 && strcmp(w[2], "up") != 0)
        goto usage;
      f->down = strcmp(w[2], "down") == 0;
    } else if (strcmp(w[0], "drop") == 0) {
      if (v < 0 || v > 100)
        goto usage;
      f->drop_pct = v;
    } else {
      if (v < 0 || v > 600000)
        goto usage;
      f->delay_ms = v;
    }
    kick_all();
    snprintf(reply, len, "ok %s %s %s\n", w[0], w[1], w[2]);
    return 0;
  }
  if (strcmp(w[0], "qp") == 0 && n == 4) {
    struct uv_qp *q = qp_any((uint32_t)strtoul(w[1], NULL, 0));
    int v = atoi(w[3]);

    if (q == NULL) {
      snprintf(reply, len, "error: no QP %s\n", w[1]);
      return -1;
    }
    if (strcmp(w[2], "drop") == 0 && v >= 0 && v <= 100)
      q->drop_pct = v;
    else if (strcmp(w[2], "delay") == 0 && v >= 0 && v <= 600000)
      q->delay_ms = v;
    else
      goto usage;
    uv_path_kick(q->path);
    snprintf(reply, len, "ok qp %#x %s %d\n", q->qp.qp_num, w[2], v);
    return 0;
  }
usage:
  snprintf(reply, len,
           "error: commands are: port DEV down|up, link PID|all down|up, drop PID|all PERCENT, "
           "delay PID|all MS, qp QPN drop PERCENT, qp QPN delay MS, fatal DEV, clear, status\n");
  return -1;
}

int uv_ctl_apply(char *cmd, char *reply, size_t len)
{
  int rc;

  pthread_mutex_lock(&uv.lock);
  rc = apply_locked(cmd, reply, len);
  pthread_mutex_unlock(&uv.lock);
  return rc;
}

static void serve_one(int fd)
{
  struct timeval tv = {.tv_sec = 2, .tv_usec = 0};
  char cmd[512], reply[4096];
  size_t used = 0;

  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  while (used + 1 < sizeof(cmd)) {
    ssize_t n = recv(fd, cmd + used, sizeof(cmd) - 1 - used, 0);
    if (n <= 0)
      break;
    used += (size_t)n;
    if (memchr(cmd, '\n', used) != NULL)
      break;
  }
  cmd[used] = '\0';
  uv_ctl_apply(cmd, reply, sizeof(reply));
  if (send(fd, reply, strlen(reply), MSG_NOSIGNAL) < 0) {
    /* The asker left: nothing to tell. */
  }
  close(fd);
}

static void *service_main(void *arg)
{
  (void)arg;
  for (;;) {
    struct pollfd p = {.fd = uv.ctl_fd, .events = POLLIN};
    int dirty;

    if (poll(&p, 1, 100) > 0 && (p.revents & POLLIN)) {
      int fd = accept4(uv.ctl_fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0)
        serve_one(fd);
    }
    pthread_mutex_lock(&uv.lock);
    dirty = uv.cnt_dirty;
    uv.cnt_dirty = 0;
    pthread_mutex_unlock(&uv.lock);
    if (dirty)
      uv_sysfs_counters();
  }
  return NULL;
}

/* Under uv.lock, from uv_init. */
int uv_ctl_start(void)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  const char *faults = getenv("UVERBS_FAULTS");
  pthread_t t;

  snprintf(uv.ctl_path, sizeof(uv.ctl_path), "%s/ctl.%d.sock", uv.fabric, (int)getpid());
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", uv.ctl_path);
  unlink(uv.ctl_path);
  uv.ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (uv.ctl_fd < 0 || bind(uv.ctl_fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(uv.ctl_fd, 16) != 0)
    return -errno;
  if (faults != NULL) {
    char *copy = strdup(faults), *save = NULL, *c;
    for (c = copy != NULL ? strtok_r(copy, ";", &save) : NULL; c != NULL; c = strtok_r(NULL, ";", &save)) {
      char reply[4096], line[256];
      snprintf(line, sizeof(line), "%s", c);
      if (apply_locked(line, reply, sizeof(reply)) != 0)
        fprintf(stderr, "mcp-uverbs: UVERBS_FAULTS: '%s': %s", c, reply);
    }
    free(copy);
  }
  if (pthread_create(&t, NULL, service_main, NULL) != 0)
    return -EAGAIN;
  pthread_detach(t);
  return 0;
}
