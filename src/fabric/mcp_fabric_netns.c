/*
 * mcp_fabric_netns.c - asks RDMA netlink which netdev a port has in this namespace.
 *
 * sysfs labels every GID with a netdev name, but in the kernel's shared RDMA namespace
 * mode a container sees the GIDs of every namespace, and "eth0" or "lo" exist in all of
 * them. The kernel's RDMA netlink answer for a port carries the netdev's index and name
 * only when that netdev lives in the caller's namespace, so it is the one conclusive
 * test of "ours". Two requests on a NETLINK_RDMA socket: a device dump to turn the name
 * into the kernel's device index (PORT_GET takes only the index), then PORT_GET.
 * RDMA netlink messages carry their attributes right after the netlink header, with no
 * family header. The socket has a receive timeout so a silent kernel cannot hang init.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fabric/fabric_netns.h"

#define NL_BUF 32768

struct nl_sock {
  int fd;
  uint32_t seq;
  union {
    struct nlmsghdr h; /* aligns the buffer for the headers read from it */
    char b[NL_BUF];
  } buf;
};

/* What one reply handler looks for; found is set when a message matched. */
struct nl_want {
  const char *dev_name; /* device dump: the name to find */
  uint32_t dev_index;
  char *ndev; /* port get: where the netdev name goes */
  size_t ndev_len;
  int found;
};

static int nl_open(struct nl_sock *s)
{
  struct timeval tv = {.tv_sec = 2, .tv_usec = 0};

  s->seq = 0;
  s->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
  if (s->fd < 0)
    return -errno;
  if (setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
    int err = -errno;
    close(s->fd);
    return err;
  }
  return 0;
}

static void put_u32(struct nlmsghdr *h, uint16_t type, uint32_t v)
{
  struct nlattr *a = (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));

  a->nla_type = type;
  a->nla_len = (uint16_t)(NLA_HDRLEN + sizeof(v));
  memcpy((char *)a + NLA_HDRLEN, &v, sizeof(v));
  h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static int nl_send(struct nl_sock *s, int cmd, uint16_t flags, uint32_t dev, uint32_t port)
{
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  struct nlmsghdr *h = &s->buf.h;

  memset(s->buf.b, 0, 256);
  h->nlmsg_len = NLMSG_HDRLEN;
  h->nlmsg_type = (uint16_t)RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd);
  h->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
  h->nlmsg_seq = ++s->seq;
  if (cmd == RDMA_NLDEV_CMD_PORT_GET) {
    put_u32(h, RDMA_NLDEV_ATTR_DEV_INDEX, dev);
    put_u32(h, RDMA_NLDEV_ATTR_PORT_INDEX, port);
  }
  if (sendto(s->fd, h, h->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
    return -errno;
  return 0;
}

/* Look through one reply message's attributes for what w wants. */
static void nl_parse(const struct nlmsghdr *h, struct nl_want *w)
{
  const char *p = (const char *)h + NLMSG_HDRLEN;
  const char *end = (const char *)h + h->nlmsg_len;
  const char *dev_name = NULL, *ndev = NULL;
  uint32_t dev_index = 0;
  int have_index = 0;

  while (p + NLA_HDRLEN <= end) {
    const struct nlattr *a = (const struct nlattr *)p;
    const char *val = p + NLA_HDRLEN;
    size_t vlen;

    if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
      break;
    vlen = a->nla_len - NLA_HDRLEN;
    switch (a->nla_type & NLA_TYPE_MASK) {
    case RDMA_NLDEV_ATTR_DEV_INDEX:
      if (vlen == sizeof(uint32_t)) {
        memcpy(&dev_index, val, sizeof(dev_index));
        have_index = 1;
      }
      break;
    case RDMA_NLDEV_ATTR_DEV_NAME:
      if (vlen > 0 && memchr(val, '\0', vlen) != NULL)
        dev_name = val;
      break;
    case RDMA_NLDEV_ATTR_NDEV_NAME:
      if (vlen > 0 && memchr(val, '\0', vlen) != NULL)
        ndev = val;
      break;
    default: break;
    }
    p += NLA_ALIGN(a->nla_len);
  }
  if (w->dev_name != NULL) {
    if (have_index && dev_name != NULL && strcmp(dev_name, w->dev_name) == 0) {
      w->dev_index = dev_index;
      w->found = 1;
    }
  } else {
    w->found = 1;
    snprintf(w->ndev, w->ndev_len, "%s", ndev != NULL ? ndev : "");
  }
}

/* One received buffer of replies to request seq: parses what w wants from each message;
 * 1 with *status when the reply ended (DONE, or the ACK or error of a plain request), 0
 * when more buffers follow. The kernel's bytes are checked as any peer's: every length
 * against what was received (the fuzzer feeds this arbitrary bytes). */
static int nl_reply(const void *buf, size_t n, uint32_t seq, struct nl_want *w, int *status)
{
  const struct nlmsghdr *h;
  int left = n > INT32_MAX ? INT32_MAX : (int)n;

  for (h = buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (h->nlmsg_seq != seq)
      continue; /* a late answer to an earlier request */
    if (h->nlmsg_type == NLMSG_DONE) {
      int st = 0; /* a dump that failed midway says so here */
      if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(st)))
        memcpy(&st, NLMSG_DATA(h), sizeof(st));
      *status = st < 0 ? st : 0;
      return 1;
    }
    if (h->nlmsg_type == NLMSG_ERROR) {
      struct nlmsgerr e;

      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(e))) {
        *status = -EPROTO;
        return 1;
      }
      memcpy(&e, NLMSG_DATA(h), sizeof(e));
      *status = e.error;
      return 1;
    }
    nl_parse(h, w);
  }
  return 0;
}

int mcp_netns_rdma_reply_parse(const void *buf, size_t len, uint32_t seq, const char *dev_name,
                               uint32_t *dev_index, char *ndev, size_t ndev_len, int *found, int *status)
{
  struct nl_want w = {.dev_name = dev_name, .ndev = ndev, .ndev_len = ndev_len};
  int done = nl_reply(buf, len, seq, &w, status);

  *found = w.found;
  *dev_index = w.dev_index;
  return done;
}

/* Read replies to the last request until its end (DONE, or the ACK of a plain request). */
static int nl_recv(struct nl_sock *s, struct nl_want *w)
{
  for (;;) {
    ssize_t n = recv(s->fd, s->buf.b, sizeof(s->buf.b), MSG_TRUNC);
    int status = 0;

    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
    if ((size_t)n > sizeof(s->buf.b))
      return -EMSGSIZE;
    if (nl_reply(s->buf.b, (size_t)n, s->seq, w, &status))
      return status;
  }
}

int mcp_netns_port_netdev(const char *ibdev, int port, char *name, size_t len)
{
  struct nl_want w = {.dev_name = ibdev};
  struct nl_sock *s;
  int err;

  if (len > 0)
    name[0] = '\0';
  if (port < 1)
    return -EINVAL;
  s = malloc(sizeof(*s)); /* 32 KiB: kept off the caller's stack */
  if (s == NULL)
    return -ENOMEM;
  err = nl_open(s);
  if (err != 0) {
    free(s);
    return err;
  }
  err = nl_send(s, RDMA_NLDEV_CMD_GET, NLM_F_DUMP, 0, 0);
  if (err == 0)
    err = nl_recv(s, &w);
  if (err == 0 && !w.found)
    err = -ENODEV;
  if (err == 0) {
    struct nl_want pw = {.ndev = name, .ndev_len = len};

    err = nl_send(s, RDMA_NLDEV_CMD_PORT_GET, NLM_F_ACK, w.dev_index, (uint32_t)port);
    if (err == 0)
      err = nl_recv(s, &pw);
    if (err == 0 && !pw.found)
      err = -EPROTO;
  }
  close(s->fd);
  free(s);
  return err;
}
