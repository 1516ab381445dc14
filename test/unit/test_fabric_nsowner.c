/*
 * test_fabric_nsowner.c - the per-GID ownership rule (mcp_fabric_nsowner.c) on pure
 * inputs: a port's GID table (netdev name, the ifindex the kernel gives for it, the
 * address) against a namespace's netdevs and addresses. The shapes are the lab's
 * (single_pods.sh, single_netns.sh): pods with a macvlan or ipvlan of the host's netdev
 * called eth0, and the collisions that make names, ifindexes and addresses each prove
 * nothing alone: two pods' eth0, a veth eth0 with the same address in another namespace
 * on another port, and rxe on the host's lo against the pod's own lo at ifindex 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "mcp_test.h"
#include "fabric/fabric_gid.h"
#include "fabric/fabric_netns.h"

#define MAXG 8

struct port_fixture {
  struct mcp_sysfs_port port;
  struct mcp_sysfs_gid gid[MAXG];
  int ifindex[MAXG];
};

static void gid_raw(const char *text, uint8_t raw[16])
{
  memset(raw, 0, 16);
  if (strchr(text, ':') == NULL) {
    raw[10] = raw[11] = 0xff;
    CHECK(inet_pton(AF_INET, text, raw + 12) == 1);
  } else {
    CHECK(inet_pton(AF_INET6, text, raw) == 1);
  }
}

static void add_gid(struct port_fixture *f, const char *addr, const char *ndev, int ifindex)
{
  int i = f->port.ngid++;

  f->port.gid = f->gid;
  f->gid[i].index = i;
  f->gid[i].type = MCP_GID_TYPE_ROCE_V2;
  gid_raw(addr, f->gid[i].raw);
  snprintf(f->gid[i].netdev, sizeof(f->gid[i].netdev), "%s", ndev);
  f->ifindex[i] = ifindex;
}

static struct mcp_ns_link *add_link(struct mcp_ns_snapshot *ns, const char *name, int ifindex, int lower,
                                    int elsewhere)
{
  struct mcp_ns_link *l = &ns->link[ns->nlink++];

  memset(l, 0, sizeof(*l));
  snprintf(l->name, sizeof(l->name), "%s", name);
  l->ifindex = ifindex;
  l->up = 1;
  l->lower = lower;
  l->lower_elsewhere = elsewhere;
  return l;
}

static void add_addr(struct mcp_ns_snapshot *ns, int ifindex, const char *addr)
{
  ns->addr[ns->naddr].ifindex = ifindex;
  gid_raw(addr, ns->addr[ns->naddr].raw);
  ns->naddr++;
}

/* rxeH on the host's hostd0 (ifindex 20): the host's GIDs, P1's macvlan eth0 (21 in P1)
 * and P2's (22 in P2). */
static void rxeh_port(struct port_fixture *f)
{
  memset(f, 0, sizeof(*f));
  f->port.num = 1;
  add_gid(f, "fe80::1", "hostd0", 20);
  add_gid(f, "10.97.0.1", "hostd0", 20);
  add_gid(f, "10.97.0.11", "eth0", 21);
  add_gid(f, "10.97.0.12", "eth0", 22);
  add_gid(f, "fe80::11", "eth0", 21);
}

/* Pod P1: lo, and eth0, a macvlan of the host's ifindex 20 (another namespace). */
static struct mcp_ns_snapshot p1;
static void p1_ns(void)
{
  memset(&p1, 0, sizeof(p1));
  add_link(&p1, "lo", 1, 0, 0);
  add_addr(&p1, 1, "127.0.0.1");
  add_link(&p1, "eth0", 21, 20, 1);
  add_addr(&p1, 21, "10.97.0.11");
  add_addr(&p1, 21, "fe80::11");
}

static void test_pod_owns_its_macvlan_gid(void)
{
  struct port_fixture f;
  int slot;

  rxeh_port(&f);
  p1_ns();
  CHECK(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 2, &slot) == NULL);
  CHECK_EQ_INT(slot, 1);
  CHECK(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 4, &slot) == NULL); /* its link-local */
  /* The host's GIDs: hostd0 is no netdev of P1. */
  CHECK_EQ_STR(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 1, &slot),
               "its netdev is not in this network namespace");
  CHECK_EQ_INT(slot, -1);
  /* P2's GID: labelled eth0 too, but its ifindex is P2's. */
  CHECK_EQ_STR(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 3, &slot),
               "its netdev is another network namespace's device of the same name");
}

static void test_other_pod_same_name_and_ifindex(void)
{
  struct port_fixture f;
  int slot;

  /* P2's macvlan has P1's ifindex in its own namespace: only the address tells. */
  rxeh_port(&f);
  f.ifindex[3] = 21;
  p1_ns();
  CHECK_EQ_STR(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 3, &slot),
               "its address is not configured on that netdev in this network namespace");
  CHECK(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 2, &slot) == NULL);
}

static void test_unknown_ifindex_proves_nothing(void)
{
  struct port_fixture f;
  int slot;

  rxeh_port(&f);
  p1_ns();
  f.ifindex[2] = 0; /* a library without ibv_query_gid_ex */
  CHECK(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 2, &slot) != NULL);
  CHECK_EQ_INT(slot, -1);
}

/* single_netns: namespaces A and B each have a veth end eth0 with 10.77.0.1, rxeA and
 * rxeB on them; from A, rxeB's GIDs are on B's eth0 (ifindex 7 in B), rxe0's on the
 * initial namespace's lo (ifindex 1 there). A's eth0 is ifindex 5, its veth peer 6 in
 * the initial namespace. */
static void test_veth_collision_and_lo(void)
{
  struct mcp_ns_snapshot a;
  struct port_fixture rxeb, rxe0;
  int slot;

  memset(&a, 0, sizeof(a));
  add_link(&a, "lo", 1, 0, 0);
  add_addr(&a, 1, "127.0.0.1");
  add_link(&a, "eth0", 5, 6, 1);
  add_addr(&a, 5, "10.77.0.1");
  memset(&rxeb, 0, sizeof(rxeb));
  rxeb.port.num = 1;
  add_gid(&rxeb, "fe80::b", "eth0", 7);
  add_gid(&rxeb, "10.77.0.1", "eth0", 7);
  CHECK_EQ_STR(mcp_netns_gid_owner(&a, &rxeb.port, rxeb.ifindex, 1, &slot),
               "its netdev is another network namespace's device of the same name");
  /* Name, ifindex and address all collide: A's eth0 is not stacked on rxeB's netdev
   * (its IFLA_LINK is its veth peer, which carries no GID of rxeB's port). */
  rxeb.ifindex[0] = rxeb.ifindex[1] = 5;
  CHECK_EQ_STR(mcp_netns_gid_owner(&a, &rxeb.port, rxeb.ifindex, 1, &slot),
               "its netdev here is not stacked on the port's netdev (not a macvlan or ipvlan of it)");
  /* rxe0 on the host's lo: name, ifindex 1 and 127.0.0.1 are A's lo's too. */
  memset(&rxe0, 0, sizeof(rxe0));
  rxe0.port.num = 1;
  add_gid(&rxe0, "127.0.0.1", "lo", 1);
  CHECK_EQ_STR(mcp_netns_gid_owner(&a, &rxe0.port, rxe0.ifindex, 0, &slot),
               "its netdev here is not stacked on the port's netdev (not a macvlan or ipvlan of it)");
  /* A lower elsewhere that does carry the port's GIDs, with everything else equal,
   * would be ours: the condition above is what rejected it. */
  a.link[1].lower = 5;
  CHECK(mcp_netns_gid_owner(&a, &rxeb.port, rxeb.ifindex, 1, &slot) == NULL);
}

static void test_vlan_on_macvlan(void)
{
  struct port_fixture f;
  int slot;

  rxeh_port(&f);
  p1_ns();
  add_gid(&f, "10.98.0.11", "eth0.100", 30);
  /* eth0.100's lower is eth0 (this namespace), whose lower is the host's netdev. */
  add_link(&p1, "eth0.100", 30, 21, 0);
  add_addr(&p1, 30, "10.98.0.11");
  CHECK(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 5, &slot) == NULL);
  CHECK_EQ_INT(slot, 2);
  /* A loop of lowers inside the namespace ends, not ours. */
  p1.link[1].lower = 30;
  p1.link[1].lower_elsewhere = 0;
  CHECK(mcp_netns_gid_owner(&p1, &f.port, f.ifindex, 5, &slot) != NULL);
}

static void test_ipvlan_pod(void)
{
  struct mcp_ns_snapshot p3;
  struct port_fixture rxei;
  int slot;

  /* An ipvlan shares its parent's MAC, so its link-local GID is the parent's. */
  memset(&rxei, 0, sizeof(rxei));
  rxei.port.num = 1;
  add_gid(&rxei, "fe80::2", "hostd1", 40);
  add_gid(&rxei, "10.97.1.1", "hostd1", 40);
  add_gid(&rxei, "10.97.1.13", "eth0", 41);
  memset(&p3, 0, sizeof(p3));
  add_link(&p3, "lo", 1, 0, 0);
  add_addr(&p3, 1, "127.0.0.1");
  add_link(&p3, "eth0", 41, 40, 1);
  add_addr(&p3, 41, "10.97.1.13");
  CHECK(mcp_netns_gid_owner(&p3, &rxei.port, rxei.ifindex, 2, &slot) == NULL);
  CHECK(mcp_netns_gid_owner(&p3, &rxei.port, rxei.ifindex, 1, &slot) != NULL);
  /* P3 against rxeH's table: its eth0 sits on hostd1 (40), which rxeH's GIDs are not on. */
  {
    struct port_fixture f;
    int i;

    rxeh_port(&f);
    for (i = 0; i < f.port.ngid; i++)
      CHECK(mcp_netns_gid_owner(&p3, &f.port, f.ifindex, i, &slot) != NULL);
  }
}

/* The rows and the automatic choice on them: P1 gets its own address, and the table's
 * reason for P2's entry says why it is not ours. */
static void test_rows_and_choice(void)
{
  struct port_fixture f;
  struct mcp_gid_entry rows[MAXG];
  struct mcp_gid_policy pol;
  struct mcp_gid_choice c;
  char err[1024];
  int n;

  rxeh_port(&f);
  p1_ns();
  n = mcp_netns_gid_rows_owned(&f.port, f.ifindex, &p1, rows, MAXG);
  CHECK_EQ_INT(n, 5);
  CHECK(!rows[1].netdev_in_ns && !rows[1].netdev_up);
  CHECK(rows[2].netdev_in_ns && rows[2].netdev_up);
  CHECK(!rows[3].netdev_in_ns && !rows[3].netdev_up);
  memset(&pol, 0, sizeof(pol));
  pol.index = -1;
  pol.roce_version = 2;
  pol.family = 4;
  CHECK_EQ_INT(mcp_gid_choose(rows, n, &pol, &c, err, sizeof(err)), 0);
  CHECK_EQ_INT(c.index, 2);
  CHECK_EQ_STR(c.text, "10.97.0.11");
  CHECK_EQ_STR(c.netdev, "eth0");
  /* An explicit index on P2's entry is refused, with the reason. */
  pol.index = 3;
  CHECK_EQ_INT(mcp_gid_choose(rows, n, &pol, &c, err, sizeof(err)), -ENOENT);
  CHECK(strstr(err, "another network namespace's device of the same name") != NULL);
  /* P1's eth0 down: its GID is ours but not usable. */
  p1.link[1].up = 0;
  n = mcp_netns_gid_rows_owned(&f.port, f.ifindex, &p1, rows, MAXG);
  CHECK(rows[2].netdev_in_ns && !rows[2].netdev_up);
  pol.index = -1;
  CHECK_EQ_INT(mcp_gid_choose(rows, n, &pol, &c, err, sizeof(err)), -ENOENT);
  /* max is honoured. */
  CHECK_EQ_INT(mcp_netns_gid_rows_owned(&f.port, f.ifindex, &p1, rows, 2), 2);
}

static void test_snapshot_of_this_namespace(void)
{
  static struct mcp_ns_snapshot ns;
  int rc = mcp_netns_snapshot_read(&ns), i, lo = -1;

  /* rtnetlink is there in any Linux namespace; a sandbox may refuse the socket. */
  if (rc != 0) {
    fprintf(stderr, "rtnetlink not readable here (%d): skipping\n", rc);
    return;
  }
  for (i = 0; i < ns.nlink; i++)
    if (strcmp(ns.link[i].name, "lo") == 0)
      lo = i;
  CHECK(lo >= 0);
  if (lo >= 0)
    CHECK(ns.link[lo].ifindex > 0 && ns.link[lo].lower_elsewhere == 0);
}

int main(void)
{
  RUN_TEST(test_pod_owns_its_macvlan_gid);
  RUN_TEST(test_other_pod_same_name_and_ifindex);
  RUN_TEST(test_unknown_ifindex_proves_nothing);
  RUN_TEST(test_veth_collision_and_lo);
  RUN_TEST(test_vlan_on_macvlan);
  RUN_TEST(test_ipvlan_pod);
  RUN_TEST(test_rows_and_choice);
  RUN_TEST(test_snapshot_of_this_namespace);
  return TEST_EXIT();
}
