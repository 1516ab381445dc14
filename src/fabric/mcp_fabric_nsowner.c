/*
 * mcp_fabric_nsowner.c - which GIDs of a port are ours when the port's own netdev is not
 * in this network namespace: the pod with a macvlan or ipvlan of the host's netdev.
 *
 * There RDMA netlink names no netdev for the port (the port's netdev stays in the host's
 * namespace), yet the GID table holds the pod's own address, labelled with the pod's
 * macvlan, next to the host's and every other pod's. Names, ifindexes and addresses each
 * repeat across namespaces (every namespace has an ifindex 1 called lo with 127.0.0.1,
 * and two pods may both call their macvlan eth0), so a GID counts as ours only when all
 * of these hold, each asked of the kernel through a socket of this namespace (rtnetlink;
 * never /sys/class/net, whose mount may belong to another namespace):
 *   - a netdev of this namespace has the GID's netdev name,
 *   - and the ifindex the kernel gives for the GID's netdev (ibv_query_gid_ex),
 *   - and it holds the GID's address,
 *   - and it is stacked (IFLA_LINK, following lowers of this namespace) on a netdev of
 *     another namespace that carries GIDs of this same port: the port's own netdev, or
 *     an upper of it in the host.
 * The last condition is what keeps a veth called eth0 with the same address (another
 * namespace's GID on another port) and this namespace's lo (rxe on the host's lo) out.
 * Without ifindexes (rdma-core before ibv_query_gid_ex) nothing can be proven and no GID
 * is taken this way. The decision itself (mcp_netns_gid_owner) is a pure function of the
 * namespace snapshot, the port's table and the GIDs' ifindexes, for the unit tests.
 */
#include "fabric/fabric_netns.h" /* first: <net/if.h> before <linux/if.h> */

#include <errno.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/verbs.h"

#define RT_BUF 32768
/* Lowers followed inside this namespace: a VLAN on the pod's macvlan, and one spare. */
#define LOWER_DEPTH 3

union rt_buf {
  struct nlmsghdr h; /* aligns the buffer for the headers read from it */
  char b[RT_BUF];
};

static void addr_to_gid(int family, const void *a, uint8_t raw[16])
{
  memset(raw, 0, 16);
  if (family == AF_INET) {
    raw[10] = raw[11] = 0xff;
    memcpy(raw + 12, a, 4);
  } else {
    memcpy(raw, a, 16);
  }
}

static void parse_link(const struct nlmsghdr *h, struct mcp_ns_snapshot *ns)
{
  const struct ifinfomsg *ifi = NLMSG_DATA(h);
  const struct rtattr *a;
  struct mcp_ns_link *l;
  int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*ifi));
  int oper = -1;

  if (len < 0 || ns->nlink == MCP_NS_LINKS_MAX)
    return;
  l = &ns->link[ns->nlink];
  memset(l, 0, sizeof(*l));
  l->ifindex = ifi->ifi_index;
  for (a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    size_t n = RTA_PAYLOAD(a);
    switch (a->rta_type) {
    case IFLA_IFNAME:
      if (n > 0 && n <= IF_NAMESIZE && memchr(RTA_DATA(a), '\0', n) != NULL)
        memcpy(l->name, RTA_DATA(a), n);
      break;
    case IFLA_LINK:
      if (n == sizeof(int))
        memcpy(&l->lower, RTA_DATA(a), sizeof(int));
      break;
    case IFLA_LINK_NETNSID:
      l->lower_elsewhere = 1; /* the kernel sends it only for a lower in another namespace */
      break;
    case IFLA_OPERSTATE:
      if (n >= 1)
        oper = *(const unsigned char *)RTA_DATA(a);
      break;
    default: break;
    }
  }
  if (l->name[0] == '\0')
    return;
  l->up = (ifi->ifi_flags & IFF_UP) != 0 && oper != IF_OPER_DOWN;
  ns->nlink++;
}

static void parse_addr(const struct nlmsghdr *h, struct mcp_ns_snapshot *ns)
{
  const struct ifaddrmsg *ifa = NLMSG_DATA(h);
  const struct rtattr *a;
  const void *local = NULL, *address = NULL;
  int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*ifa));
  size_t want;

  /* The family is read only once the message is known to hold it. */
  if (len < 0 || ns->naddr == MCP_NS_ADDRS_MAX || (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6))
    return;
  want = ifa->ifa_family == AF_INET ? 4 : 16;
  for (a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (RTA_PAYLOAD(a) != want)
      continue;
    if (a->rta_type == IFA_LOCAL)
      local = RTA_DATA(a);
    else if (a->rta_type == IFA_ADDRESS)
      address = RTA_DATA(a);
  }
  /* IPv4: IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer's on a
   * point-to-point link); IPv6 sends IFA_ADDRESS alone. */
  if (local == NULL)
    local = address;
  if (local == NULL)
    return;
  ns->addr[ns->naddr].ifindex = (int)ifa->ifa_index;
  addr_to_gid(ifa->ifa_family, local, ns->addr[ns->naddr].raw);
  ns->naddr++;
}

/* One dump request (RTM_GETLINK or RTM_GETADDR) and its replies until DONE. */
static int rt_dump(int fd, union rt_buf *buf, uint16_t type, uint32_t seq, struct mcp_ns_snapshot *ns)
{
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  struct {
    struct nlmsghdr h;
    union {
      struct ifinfomsg link;
      struct ifaddrmsg addr;
    } u;
  } req;

  memset(&req, 0, sizeof(req));
  req.h.nlmsg_type = type;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.h.nlmsg_seq = seq;
  if (type == RTM_GETLINK) {
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    req.u.link.ifi_family = AF_UNSPEC;
  } else {
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
    req.u.addr.ifa_family = AF_UNSPEC;
  }
  if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
    return -errno;
  for (;;) {
    ssize_t n = recv(fd, buf->b, sizeof(buf->b), MSG_TRUNC);
    int status = 0;

    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
    if ((size_t)n > sizeof(buf->b))
      return -EMSGSIZE;
    if (mcp_netns_rt_reply_parse(buf->b, (size_t)n, seq, ns, &status))
      return status;
  }
}

int mcp_netns_rt_reply_parse(const void *buf, size_t len, uint32_t seq, struct mcp_ns_snapshot *ns,
                             int *status)
{
  const struct nlmsghdr *h;
  int left = len > INT32_MAX ? INT32_MAX : (int)len;

  for (h = buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (h->nlmsg_seq != seq)
      continue;
    if (h->nlmsg_type == NLMSG_DONE) {
      *status = 0;
      return 1;
    }
    if (h->nlmsg_type == NLMSG_ERROR) {
      struct nlmsgerr e;

      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(e))) {
        *status = -EPROTO;
        return 1;
      }
      memcpy(&e, NLMSG_DATA(h), sizeof(e));
      *status = e.error != 0 ? e.error : -EPROTO;
      return 1;
    }
    if (h->nlmsg_type == RTM_NEWLINK)
      parse_link(h, ns);
    else if (h->nlmsg_type == RTM_NEWADDR)
      parse_addr(h, ns);
  }
  return 0;
}

int mcp_netns_snapshot_read(struct mcp_ns_snapshot *ns)
{
  struct timeval tv = {.tv_sec = 2, .tv_usec = 0};
  union rt_buf *buf;
  int fd, err;

  ns->nlink = ns->naddr = 0;
  buf = malloc(sizeof(*buf)); /* 32 KiB: kept off the caller's stack */
  if (buf == NULL)
    return -ENOMEM;
  fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) {
    err = -errno;
    free(buf);
    return err;
  }
  err = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ? -errno : 0;
  if (err == 0)
    err = rt_dump(fd, buf, RTM_GETLINK, 1, ns);
  if (err == 0)
    err = rt_dump(fd, buf, RTM_GETADDR, 2, ns);
  close(fd);
  free(buf);
  return err;
}

static const struct mcp_ns_link *link_by_index(const struct mcp_ns_snapshot *ns, int ifindex)
{
  int i;

  for (i = 0; i < ns->nlink; i++)
    if (ns->link[i].ifindex == ifindex)
      return &ns->link[i];
  return NULL;
}

static int port_carries(const struct mcp_sysfs_port *p, const int *ifindex, int lower)
{
  int j;

  for (j = 0; j < p->ngid; j++)
    if (ifindex[j] > 0 && ifindex[j] == lower)
      return 1;
  return 0;
}

const char *mcp_netns_gid_owner(const struct mcp_ns_snapshot *ns, const struct mcp_sysfs_port *p,
                                const int *ifindex, int i, int *slot)
{
  const struct mcp_sysfs_gid *g = &p->gid[i];
  const struct mcp_ns_link *l = NULL, *cur;
  int k, has_addr = 0;

  *slot = -1;
  if (g->netdev[0] == '\0')
    return "it names no netdev";
  for (k = 0; k < ns->nlink && l == NULL; k++)
    if (strcmp(ns->link[k].name, g->netdev) == 0)
      l = &ns->link[k];
  if (l == NULL)
    return "its netdev is not in this network namespace";
  if (ifindex[i] <= 0)
    return "the kernel gives no netdev index for it (ibv_query_gid_ex), so a netdev of the same name here "
           "proves nothing";
  if (l->ifindex != ifindex[i])
    return "its netdev is another network namespace's device of the same name";
  for (k = 0; k < ns->naddr && !has_addr; k++)
    has_addr = ns->addr[k].ifindex == l->ifindex && memcmp(ns->addr[k].raw, g->raw, 16) == 0;
  if (!has_addr)
    return "its address is not configured on that netdev in this network namespace";
  /* Down the lowers of this namespace to the first one of another: the port's. */
  for (cur = l, k = 0; k < LOWER_DEPTH && cur != NULL; k++) {
    if (cur->lower <= 0 || (!cur->lower_elsewhere && cur->lower == cur->ifindex))
      break;
    if (cur->lower_elsewhere) {
      if (!port_carries(p, ifindex, cur->lower))
        break;
      *slot = (int)(l - ns->link);
      return NULL;
    }
    cur = link_by_index(ns, cur->lower);
  }
  return "its netdev here is not stacked on the port's netdev (not a macvlan or ipvlan of it)";
}

int mcp_netns_gid_rows_owned(const struct mcp_sysfs_port *p, const int *ifindex,
                             const struct mcp_ns_snapshot *ns, struct mcp_gid_entry *rows, int max)
{
  int i, n = 0;

  for (i = 0; i < p->ngid && n < max; i++) {
    const struct mcp_sysfs_gid *g = &p->gid[i];
    struct mcp_gid_entry *r = &rows[n++];
    int slot;
    const char *why = mcp_netns_gid_owner(ns, p, ifindex, i, &slot);

    memset(r, 0, sizeof(*r));
    r->index = g->index;
    memcpy(r->raw, g->raw, sizeof(r->raw));
    r->type = g->type;
    memcpy(r->netdev, g->netdev, sizeof(r->netdev));
    r->netdev_in_ns = why == NULL;
    r->netdev_up = why == NULL && ns->link[slot].up;
    r->not_ours = why;
  }
  return n;
}

/* The ifindex of each readable GID's netdev, 0 where the kernel gives none. Uses ctx, or
 * opens ibdev for the question when ctx is NULL (the doctor, the probe). */
static int gid_ifindexes(struct ibv_context *ctx, const char *ibdev, const struct mcp_sysfs_port *p,
                         int *ifindex)
{
  struct ibv_device **list = NULL;
  struct ibv_context *own = NULL;
  int i, n = 0, got = 0;

  memset(ifindex, 0, (size_t)p->ngid * sizeof(*ifindex));
  if (mcp_ibv.query_gid_ex == NULL)
    return 0;
  if (ctx == NULL && mcp_ibv.get_device_list != NULL && (list = mcp_ibv.get_device_list(&n)) != NULL) {
    for (i = 0; i < n && own == NULL; i++)
      if (strcmp(mcp_ibv.get_device_name(list[i]), ibdev) == 0)
        own = mcp_ibv.open_device(list[i]);
    mcp_ibv.free_device_list(list);
    ctx = own;
  }
  if (ctx == NULL)
    return 0;
  for (i = 0; i < p->ngid; i++) {
    struct ibv_gid_entry e;

    memset(&e, 0, sizeof(e));
    if (mcp_ibv.query_gid_ex(ctx, (uint32_t)p->num, (uint32_t)p->gid[i].index, &e, 0, sizeof(e)) == 0 &&
        e.ndev_ifindex > 0 && e.ndev_ifindex <= (uint32_t)INT32_MAX) {
      ifindex[i] = (int)e.ndev_ifindex;
      got++;
    }
  }
  if (own != NULL)
    mcp_ibv.close_device(own);
  return got;
}

int mcp_netns_port_rows(struct ibv_context *ctx, const char *root, const char *ibdev,
                        const struct mcp_sysfs_port *p, struct mcp_gid_entry *rows, int max,
                        struct mcp_netns_port *info)
{
  struct mcp_netns_view view = {.n = 0};
  struct mcp_ns_snapshot *ns;
  int *ifindex, i, n;

  memset(info, 0, sizeof(*info));
  info->netlink_rc = mcp_netns_port_netdev(ibdev, p->num, info->netdev, sizeof(info->netdev));
  if (info->netlink_rc == 0 && info->netdev[0] != '\0') {
    /* Conclusive: the port's netdev is here; its uppers here come with it. */
    mcp_netns_view_add(&view, root, info->netdev);
    return mcp_netns_gid_rows(p, &view, rows, max);
  }
  if (info->netlink_rc != 0) {
    /* Netlink cannot be asked: names are all there is. */
    info->netdev[0] = '\0';
    for (i = 0; i < p->ngid; i++)
      mcp_netns_view_add(&view, root, p->gid[i].netdev);
    return mcp_netns_gid_rows(p, &view, rows, max);
  }
  /* The port's netdev is elsewhere: GID by GID (a pod on a macvlan or ipvlan of it). */
  info->per_gid = 1;
  ns = malloc(sizeof(*ns));
  ifindex = calloc((size_t)(p->ngid > 0 ? p->ngid : 1), sizeof(*ifindex));
  if (ns == NULL || ifindex == NULL) {
    info->per_gid_rc = -ENOMEM;
  } else {
    info->gid_ifindexes = gid_ifindexes(ctx, ibdev, p, ifindex);
    info->per_gid_rc = mcp_netns_snapshot_read(ns);
  }
  if (info->per_gid_rc != 0) {
    /* Nothing proven: every row stays another namespace's. */
    n = mcp_netns_gid_rows(p, &view, rows, max);
  } else {
    n = mcp_netns_gid_rows_owned(p, ifindex, ns, rows, max);
  }
  for (i = 0; i < n; i++)
    info->nours += rows[i].netdev_in_ns;
  free(ns);
  free(ifindex);
  return n;
}
