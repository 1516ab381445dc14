/*
 * fuzz_netlink.c - the fuzz target for the two netlink parsers discovery and recovery
 * feed with the kernel's answers (mcp_netns_rt_reply_parse: rtnetlink link and address
 * dumps; mcp_netns_rdma_reply_parse: RDMA netlink's device dump and port answer). The
 * first byte picks the parser, the rest is one received buffer, copied to memory of
 * exactly its length so that ASan sees any read past it. Whatever the bytes, the
 * snapshot stays within its arrays and every name it holds is terminated.
 */
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <rdma/rdma_netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "fabric/fabric_netns.h"

static void fuzz_fail(const char *what)
{
  fprintf(stderr, "fuzz_netlink: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static struct mcp_ns_snapshot ns;
  uint8_t *buf;
  int status = 0, found = 0;
  uint32_t index = 0;
  char ndev[IF_NAMESIZE];

  if (size < 1)
    return 0;
  buf = malloc(size - 1 ? size - 1 : 1);
  if (buf == NULL)
    return 0;
  memcpy(buf, data + 1, size - 1);
  switch (data[0] % 3) {
  case 0:
    memset(&ns, 0, sizeof(ns));
    (void)mcp_netns_rt_reply_parse(buf, size - 1, 1, &ns, &status);
    if (ns.nlink < 0 || ns.nlink > MCP_NS_LINKS_MAX || ns.naddr < 0 || ns.naddr > MCP_NS_ADDRS_MAX)
      fuzz_fail("snapshot counts out of range");
    for (int i = 0; i < ns.nlink; i++)
      if (memchr(ns.link[i].name, '\0', sizeof(ns.link[i].name)) == NULL)
        fuzz_fail("an unterminated link name");
    break;
  case 1:
    (void)mcp_netns_rdma_reply_parse(buf, size - 1, 1, "mlx5_0", &index, NULL, 0, &found, &status);
    break;
  default:
    memset(ndev, 'x', sizeof(ndev));
    (void)mcp_netns_rdma_reply_parse(buf, size - 1, 1, NULL, &index, ndev, sizeof(ndev), &found, &status);
    if (found && memchr(ndev, '\0', sizeof(ndev)) == NULL)
      fuzz_fail("an unterminated netdev name");
    break;
  }
  free(buf);
  return 0;
}

/* ---- Seeds: one well-formed reply of each kind ------------------------------------ */

struct msgbuf {
  uint8_t b[1024];
  size_t len;
};

static struct nlmsghdr *msg_begin(struct msgbuf *m, uint16_t type, size_t payload)
{
  struct nlmsghdr *h = (struct nlmsghdr *)(void *)(m->b + m->len);

  memset(h, 0, NLMSG_SPACE(payload));
  h->nlmsg_type = type;
  h->nlmsg_seq = 1;
  h->nlmsg_len = (uint32_t)NLMSG_LENGTH(payload);
  return h;
}

static void attr(struct nlmsghdr *h, uint16_t type, const void *val, size_t len)
{
  struct nlattr *a = (struct nlattr *)(void *)((uint8_t *)h + NLMSG_ALIGN(h->nlmsg_len));

  a->nla_type = type;
  a->nla_len = (uint16_t)(NLA_HDRLEN + len);
  memcpy((uint8_t *)a + NLA_HDRLEN, val, len);
  h->nlmsg_len = (uint32_t)(NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len));
}

static void msg_end(struct msgbuf *m, struct nlmsghdr *h) { m->len += NLMSG_ALIGN(h->nlmsg_len); }

static int seed(const char *dir, fuzz_write_fn write, const char *name, uint8_t kind, const struct msgbuf *m)
{
  uint8_t out[sizeof(m->b) + 1];

  out[0] = kind;
  memcpy(out + 1, m->b, m->len);
  return write(dir, name, out, m->len + 1);
}

int fuzz_seeds(const char *dir, fuzz_write_fn write)
{
  struct msgbuf m;
  struct nlmsghdr *h;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = 2, .ifi_flags = IFF_UP};
  struct ifaddrmsg ifa = {.ifa_family = AF_INET, .ifa_index = 2};
  uint32_t u = 2;
  uint8_t oper = 6 /* IF_OPER_UP */, addr[4] = {192, 0, 2, 1};
  int rc = 0;

  memset(&m, 0, sizeof(m));
  h = msg_begin(&m, RTM_NEWLINK, sizeof(ifi));
  memcpy(NLMSG_DATA(h), &ifi, sizeof(ifi));
  attr(h, IFLA_IFNAME, "eth0", 5);
  attr(h, IFLA_LINK, &u, sizeof(u));
  attr(h, IFLA_OPERSTATE, &oper, 1);
  msg_end(&m, h);
  h = msg_begin(&m, RTM_NEWADDR, sizeof(ifa));
  memcpy(NLMSG_DATA(h), &ifa, sizeof(ifa));
  attr(h, IFA_LOCAL, addr, 4);
  msg_end(&m, h);
  h = msg_begin(&m, NLMSG_DONE, sizeof(int));
  msg_end(&m, h);
  rc |= seed(dir, write, "rt-link-addr-done", 0, &m);

  memset(&m, 0, sizeof(m));
  h = msg_begin(&m, (uint16_t)RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET), 0);
  attr(h, RDMA_NLDEV_ATTR_DEV_INDEX, &u, sizeof(u));
  attr(h, RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0", 7);
  msg_end(&m, h);
  h = msg_begin(&m, NLMSG_DONE, sizeof(int));
  msg_end(&m, h);
  rc |= seed(dir, write, "rdma-dev-dump", 1, &m);

  memset(&m, 0, sizeof(m));
  h = msg_begin(&m, (uint16_t)RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_PORT_GET), 0);
  attr(h, RDMA_NLDEV_ATTR_NDEV_NAME, "eth0", 5);
  msg_end(&m, h);
  h = msg_begin(&m, NLMSG_ERROR, sizeof(struct nlmsgerr));
  msg_end(&m, h);
  rc |= seed(dir, write, "rdma-port-ack", 2, &m);
  return rc != 0 ? -1 : 0;
}
