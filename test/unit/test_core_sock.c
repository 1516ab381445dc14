/*
 * test_core_sock.c - the out-of-band socket layer over loopback (127.0.0.1 and ::1 only):
 * address formatting, NCCL_SOCKET_IFNAME matching on hand-made interface lists, the
 * listener's port range, the resumable connect and its failure classes (refused,
 * timeout), and framed exchange with partial sends. Every connect progress call is
 * timed, because "never blocks the caller" is the property NCCL's proxy depends on.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp_test.h"
#include "core/clock.h"
#include "core/sock.h"

/* The library's clock (clock.h) in this test: it moves only when a drive loop moves it,
 * one ms per turn, so deadlines and backoffs are counted in turns, never measured, and a
 * loaded host cannot change an outcome. Real 1 ms sleeps only let the kernel work. */
static uint64_t fake_ns = 1000 * MCP_NS_PER_S;
static uint64_t fake_clock(void) { return fake_ns; }

static void sleep_ms(unsigned ms)
{
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

  nanosleep(&ts, NULL);
}

static union mcp_sockaddr addr_of(const char *s)
{
  union mcp_sockaddr a;

  if (mcp_sockaddr_parse(s, &a) != 0)
    fprintf(stderr, "cannot parse %s\n", s);
  return a;
}

/* Drives a connect until it settles or limit_ms pass on the library's clock, one ms per
 * turn, with a real 1 ms sleep between calls as a proxy loop would make. */
static enum mcp_sock_connect_state drive(struct mcp_sock_connect *c, unsigned limit_ms)
{
  enum mcp_sock_connect_state st = c->state;

  for (unsigned turn = 0; st == MCP_SOCK_CONNECT_IN_PROGRESS && turn <= limit_ms; turn++) {
    st = mcp_sock_connect_progress(c);
    if (st == MCP_SOCK_CONNECT_IN_PROGRESS) {
      fake_ns += MCP_NS_PER_MS;
      sleep_ms(1);
    }
  }
  return st;
}

/* Calls progress turns times with the library's clock standing still. A call that
 * waited on the peer could only end by a deadline, which a still clock never reaches:
 * it would hang this test instead of returning. */
static enum mcp_sock_connect_state spin_still(struct mcp_sock_connect *c, int turns)
{
  enum mcp_sock_connect_state st = c->state;

  for (int turn = 0; turn < turns && st == MCP_SOCK_CONNECT_IN_PROGRESS; turn++) {
    st = mcp_sock_connect_progress(c);
    if (st == MCP_SOCK_CONNECT_IN_PROGRESS)
      sleep_ms(1);
  }
  return st;
}

/* ---- Addresses ------------------------------------------------------------------ */

static void test_sockaddr_format_parse(void)
{
  static const char *const ok[] = {"127.0.0.1:80", "[::1]:443", "10.1.2.3:0", "[fd00::2]:65535",
                                   "[fe80::1%3]:9"};
  char buf[MCP_SOCKADDR_STRLEN];
  union mcp_sockaddr a, b;

  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    CHECK_EQ_INT(mcp_sockaddr_parse(ok[i], &a), 0);
    CHECK_EQ_STR(mcp_sockaddr_format(&a, buf, sizeof(buf)), ok[i]);
    CHECK_EQ_INT(mcp_sockaddr_parse(buf, &b), 0);
    CHECK(mcp_sockaddr_equal(&a, &b));
  }
  a = addr_of("192.0.2.7:1234");
  CHECK_EQ_INT(a.sa.sa_family, AF_INET);
  CHECK_EQ_INT(mcp_sockaddr_port(&a), 1234);
  CHECK_EQ_INT(mcp_sockaddr_len(&a), sizeof(struct sockaddr_in));
  CHECK_EQ_STR(mcp_sockaddr_format_host(&a, buf, sizeof(buf)), "192.0.2.7");
  mcp_sockaddr_set_port(&a, 99);
  CHECK_EQ_STR(mcp_sockaddr_format(&a, buf, sizeof(buf)), "192.0.2.7:99");
  a = addr_of("::1");
  CHECK_EQ_INT(a.sa.sa_family, AF_INET6);
  CHECK_EQ_INT(mcp_sockaddr_port(&a), 0);
  CHECK_EQ_STR(mcp_sockaddr_format(&a, buf, sizeof(buf)), "[::1]:0");
  a = addr_of("127.0.0.1");
  CHECK_EQ_STR(mcp_sockaddr_format(&a, buf, sizeof(buf)), "127.0.0.1:0");

  static const char *const bad[] = {"",           "1.2.3",       "1.2.3.4:",  "1.2.3.4:65536",
                                    "1.2.3.4:-1", "[::1",        "[::1]x",    "[::1]:+5",
                                    "host:80",    "1.2.3.4: 80", "[zz::1]:1", "[::1%x]:1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (mcp_sockaddr_parse(bad[i], &a) != -EINVAL) {
      fprintf(stderr, "parse accepted \"%s\"\n", bad[i]);
      CHECK(0);
    }
  }
  memset(&a, 0, sizeof(a));
  CHECK_EQ_INT(mcp_sockaddr_len(&a), 0);
  CHECK_EQ_STR(mcp_sockaddr_format(&a, buf, sizeof(buf)), "(family 0)");
}

/* ---- NCCL_SOCKET_IFNAME ------------------------------------------------------------ */

static void test_ifspec_table(void)
{
  static const struct {
    const char *spec, *name;
    int match;
  } cases[] = {
    {"eth", "eth0", 1},        {"eth", "eth01", 1},      {"eth0", "eth01", 1},
    {"eth0", "eth0", 1},       {"eth0", "eth1", 0},      {"=eth0", "eth0", 1},
    {"=eth0", "eth01", 0},     {"=eth0", "eth", 0},      {"^eth", "eth0", 0},
    {"^eth", "ib0", 1},        {"^=eth0", "eth0", 0},    {"^=eth0", "eth01", 1},
    {"^eth0", "eth01", 0},     {"ib,eth", "eth2", 1},    {"ib,eth", "enp1s0", 0},
    {"ib, eth ", "eth2", 1},   {"^docker,lo", "lo", 0},  {"^docker,lo", "docker0", 0},
    {"^docker,lo", "ens3", 1}, {"=lo,=eth0", "eth0", 0}, {"", "anything", 1},
    {"^", "anything", 1},      {"ib,,eth", "ib0", 1},    {"=", "x", 1},
  };
  struct mcp_match_list spec;
  char msg[MCP_SOCK_MSGLEN];

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    CHECK_EQ_INT(mcp_sock_ifspec_parse(cases[i].spec, &spec, msg, sizeof(msg)), 0);
    if (mcp_match_allows(&spec, cases[i].name, -1) != cases[i].match) {
      fprintf(stderr, "spec \"%s\" vs \"%s\": expected %d\n", cases[i].spec, cases[i].name, cases[i].match);
      CHECK(0);
    }
  }
  /* "=lo,=eth0": only the first '=' is syntax; the second entry is the name "=eth0". */
  CHECK_EQ_INT(mcp_sock_ifspec_parse("=lo,=eth0", &spec, msg, sizeof(msg)), 0);
  CHECK(spec.exact && spec.n == 2);
  CHECK_EQ_STR(spec.e[1].name, "=eth0");
  CHECK_EQ_INT(mcp_sock_ifspec_parse("averyveryverylongname", &spec, msg, sizeof(msg)), -EINVAL);
  CHECK(strstr(msg, "averyveryverylongname") != NULL);
}

#define UPR (IFF_UP | IFF_RUNNING)

static struct mcp_sock_ifaddr ifa(const char *name, unsigned flags, const char *addr)
{
  struct mcp_sock_ifaddr e;

  memset(&e, 0, sizeof(e));
  snprintf(e.name, sizeof(e.name), "%s", name);
  e.flags = flags;
  if (addr != NULL)
    e.addr = addr_of(addr);
  return e;
}

/* NCCL_SOCKET_IFNAME as the loader parses it (mcp_sock_ifspec_parse, which refuses a bad
 * list, -EINVAL with the reason in ch), then the chooser over it. */
static int choose(const struct mcp_sock_ifaddr *list, int n, const char *ifname, int family,
                  struct mcp_sock_iface_choice *ch)
{
  struct mcp_match_list spec;

  if (ifname != NULL && mcp_sock_ifspec_parse(ifname, &spec, ch->reason, sizeof(ch->reason)) != 0)
    return -EINVAL;
  return mcp_sock_iface_choose(list, n, ifname, ifname != NULL ? &spec : NULL, family, ch);
}

static int find_iface(const char *ifname, int family, struct mcp_sock_iface_choice *ch)
{
  struct mcp_match_list spec;

  if (ifname != NULL && mcp_sock_ifspec_parse(ifname, &spec, ch->reason, sizeof(ch->reason)) != 0)
    return -EINVAL;
  return mcp_sock_iface_find(ifname, ifname != NULL ? &spec : NULL, family, ch);
}

static void expect_choice(const struct mcp_sock_ifaddr *list, int n, const char *ifname, int family,
                          const char *want_name, const char *want_addr)
{
  struct mcp_sock_iface_choice ch;
  char host[MCP_SOCKADDR_STRLEN];
  int rc = choose(list, n, ifname, family, &ch);

  if (want_name == NULL) {
    if (rc != -ENODEV) {
      fprintf(stderr, "ifname \"%s\": expected no interface, got %s (%s)\n", ifname ? ifname : "(unset)",
              ch.name, ch.reason);
      CHECK(0);
    }
    return;
  }
  if (rc != 0 || strcmp(ch.name, want_name) != 0 ||
      strcmp(mcp_sockaddr_format_host(&ch.addr, host, sizeof(host)), want_addr) != 0) {
    fprintf(stderr, "ifname \"%s\" family %d: expected %s %s, got rc %d %s (%s)\n",
            ifname ? ifname : "(unset)", family, want_name, want_addr, rc, ch.name, ch.reason);
    CHECK(0);
  }
}

static void test_iface_auto_tiers(void)
{
  struct mcp_sock_ifaddr full[] = {
    ifa("lo", UPR | IFF_LOOPBACK, "127.0.0.1"),
    ifa("docker0", UPR, "172.17.0.1"),
    ifa("virbr0", UPR, "192.168.122.1"),
    ifa("eth0", UPR, "192.0.2.2"),
    ifa("ib0", UPR, "10.0.0.2"),
  };
  struct mcp_sock_ifaddr no_ib[] = {
    ifa("lo", UPR | IFF_LOOPBACK, "127.0.0.1"),
    ifa("docker0", UPR, "172.17.0.1"),
    ifa("virbr0", UPR, "192.168.122.1"),
    ifa("ib0", IFF_UP, "10.0.0.2"),
    ifa("ens3", UPR, "192.0.2.3"),
  };
  struct mcp_sock_ifaddr docker_only[] = {
    ifa("lo", UPR | IFF_LOOPBACK, "127.0.0.1"),
    ifa("virbr0", UPR, "192.168.122.1"),
    ifa("docker0", UPR, "172.17.0.1"),
  };
  struct mcp_sock_ifaddr lo_only[] = {
    ifa("virbr0", UPR, "192.168.122.1"),
    ifa("eth0", 0, "192.0.2.2"),
    ifa("lo", UPR | IFF_LOOPBACK, "127.0.0.1"),
  };
  struct mcp_sock_ifaddr nothing[] = {ifa("virbr0", UPR, "192.168.122.1"), ifa("eth0", 0, NULL)};
  struct mcp_sock_iface_choice ch;

  expect_choice(full, 5, NULL, AF_INET, "ib0", "10.0.0.2");
  expect_choice(full, 5, "", AF_UNSPEC, "ib0", "10.0.0.2");
  expect_choice(no_ib, 5, NULL, AF_INET, "ens3", "192.0.2.3");
  expect_choice(docker_only, 3, NULL, AF_INET, "docker0", "172.17.0.1");
  expect_choice(lo_only, 3, NULL, AF_INET, "lo", "127.0.0.1");
  expect_choice(nothing, 2, NULL, AF_INET, NULL, NULL);

  CHECK_EQ_INT(choose(no_ib, 5, NULL, AF_INET, &ch), 0);
  CHECK(strstr(ch.reason, "automatic") != NULL);
  CHECK(strstr(ch.reason, "no usable ib*") != NULL);
  CHECK_EQ_INT(choose(lo_only, 3, NULL, AF_INET, &ch), 0);
  CHECK(strstr(ch.reason, "only peers on this host") != NULL);
  CHECK_EQ_INT(choose(nothing, 2, NULL, AF_INET, &ch), -ENODEV);
  CHECK(strstr(ch.reason, "virbr0 (never chosen automatically)") != NULL);
  CHECK(strstr(ch.reason, "eth0 (down)") != NULL);
}

static void test_iface_filters(void)
{
  /* One interface per situation the chooser must see through; entries of one interface
   * are interleaved on purpose, as getifaddrs lists all IPv4 then all IPv6 entries. */
  struct mcp_sock_ifaddr l[] = {
    ifa("lo", UPR | IFF_LOOPBACK, NULL),
    ifa("eth01", UPR, NULL),
    ifa("eth0", UPR, NULL),
    ifa("eth1", IFF_UP, NULL),
    ifa("ib0", UPR, NULL),
    ifa("lo", UPR | IFF_LOOPBACK, "127.0.0.1"),
    ifa("eth01", UPR, "198.51.100.1"),
    ifa("eth0", UPR, "192.0.2.2"),
    ifa("eth1", IFF_UP, "192.0.2.9"),
    ifa("lo", UPR | IFF_LOOPBACK, "::1"),
    ifa("eth0", UPR, "fe80::1%2"),
    ifa("eth0", UPR, "fd00::2"),
    ifa("ib0", UPR, "fe80::2%4"),
  };
  int n = (int)(sizeof(l) / sizeof(l[0]));
  struct mcp_sock_iface_choice ch;

  /* Prefix "eth0" also matches eth01, which comes first in the list. */
  expect_choice(l, n, "eth0", AF_INET, "eth01", "198.51.100.1");
  expect_choice(l, n, "=eth0", AF_INET, "eth0", "192.0.2.2");
  expect_choice(l, n, "^=eth01", AF_INET, "lo", "127.0.0.1");
  expect_choice(l, n, "^lo,eth01", AF_INET, "eth0", "192.0.2.2");
  expect_choice(l, n, "^=lo,eth01", AF_INET, "eth0", "192.0.2.2");
  /* eth1 has an address but no carrier. */
  expect_choice(l, n, "eth1", AF_INET, NULL, NULL);
  /* ib0 has only a link-local IPv6 address: never usable, so auto falls to eth01. */
  expect_choice(l, n, NULL, AF_INET6, "eth0", "fd00::2");
  expect_choice(l, n, "ib", AF_INET6, NULL, NULL);
  expect_choice(l, n, NULL, AF_INET, "eth01", "198.51.100.1");
  /* Either family: IPv4 preferred on the chosen interface. */
  expect_choice(l, n, "=eth0", AF_UNSPEC, "eth0", "192.0.2.2");
  expect_choice(l, n, "=lo", AF_INET6, "lo", "::1");

  CHECK_EQ_INT(choose(l, n, "ib", AF_INET6, &ch), -ENODEV);
  CHECK(strstr(ch.reason, "NCCL_SOCKET_IFNAME=ib") != NULL);
  CHECK(strstr(ch.reason, "ib0 (only a link-local IPv6 address)") != NULL);
  CHECK(strstr(ch.reason, "eth0 (not selected)") != NULL);
  CHECK_EQ_INT(choose(l, n, "eth1", AF_INET, &ch), -ENODEV);
  CHECK(strstr(ch.reason, "eth1 (no carrier)") != NULL);
  CHECK_EQ_INT(choose(l, n, "=eth0", AF_INET, &ch), 0);
  CHECK(strstr(ch.reason, "NCCL_SOCKET_IFNAME==eth0") != NULL);
  CHECK_EQ_INT(choose(l, n, "eth", AF_INET, &ch), 0);
  CHECK(strstr(ch.reason, "(2 matches)") != NULL);
  CHECK_EQ_INT(choose(l, n, "thisnameiswaytoolong", AF_INET, &ch), -EINVAL);
  CHECK_EQ_INT(choose(l, n, NULL, 12345, &ch), -EINVAL);
  CHECK_EQ_INT(choose(NULL, 0, NULL, AF_INET, &ch), -ENODEV);
  CHECK(strstr(ch.reason, "no interfaces at all") != NULL);

  /* With IPv6 first in the list, either-family still takes the IPv4 address. */
  struct mcp_sock_ifaddr v6first[] = {ifa("eth0", UPR, "fd00::2"), ifa("eth0", UPR, "192.0.2.2")};
  expect_choice(v6first, 2, NULL, AF_UNSPEC, "eth0", "192.0.2.2");
  expect_choice(v6first, 2, NULL, AF_INET6, "eth0", "fd00::2");

  /* A container host with many veths: the failure message is cut, visibly. */
  static struct mcp_sock_ifaddr many[200];
  for (int i = 0; i < 200; i++) {
    char name[IF_NAMESIZE];

    snprintf(name, sizeof(name), "veth%d", i);
    many[i] = ifa(name, 0, "10.9.0.1");
  }
  CHECK_EQ_INT(choose(many, 200, NULL, AF_INET, &ch), -ENODEV);
  CHECK_EQ_INT(strlen(ch.reason), sizeof(ch.reason) - 1);
  CHECK(strcmp(ch.reason + strlen(ch.reason) - 3, "...") == 0);
  CHECK(strstr(ch.reason, "veth0 (down)") != NULL);
}

static void test_iface_find_host(void)
{
  struct mcp_sock_iface_choice ch;
  char host[MCP_SOCKADDR_STRLEN];

  /* Every host has lo; what else exists varies, so only exact "lo" is asserted. */
  CHECK_EQ_INT(find_iface("=lo", AF_INET, &ch), 0);
  CHECK_EQ_STR(ch.name, "lo");
  CHECK_EQ_STR(mcp_sockaddr_format_host(&ch.addr, host, sizeof(host)), "127.0.0.1");
  CHECK_EQ_INT(find_iface(NULL, AF_INET, &ch), 0);
  printf("  this host, automatic: %s\n", ch.reason);
  CHECK_EQ_INT(find_iface("=no_such_if0", AF_INET, &ch), -ENODEV);
  CHECK(strstr(ch.reason, "lo (not selected)") != NULL);
}

/* ---- Listening ------------------------------------------------------------------- */

static void test_port_range_parse(void)
{
  struct mcp_sock_port_range r;
  char msg[MCP_SOCK_MSGLEN];

  CHECK_EQ_INT(mcp_sock_port_range_parse("40000-40100", &r, msg, sizeof(msg)), 0);
  CHECK(r.lo == 40000 && r.hi == 40100);
  CHECK_EQ_INT(mcp_sock_port_range_parse("5000", &r, msg, sizeof(msg)), 0);
  CHECK(r.lo == 5000 && r.hi == 5000);
  CHECK_EQ_INT(mcp_sock_port_range_parse("", &r, msg, sizeof(msg)), 0);
  CHECK(r.lo == 0 && r.hi == 0);
  CHECK_EQ_INT(mcp_sock_port_range_parse(NULL, &r, msg, sizeof(msg)), 0);
  static const char *const bad[] = {"0-10", "10-5", "1-65536", "a-b", "-5", "5-", "1-2-3", " 1-2"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    msg[0] = '\0';
    CHECK_EQ_INT(mcp_sock_port_range_parse(bad[i], &r, msg, sizeof(msg)), -EINVAL);
    CHECK(strstr(msg, bad[i]) != NULL);
  }
}

static void test_listen_basic(void)
{
  union mcp_sockaddr a = addr_of("127.0.0.1:0"), bound;
  char msg[MCP_SOCK_MSGLEN];
  int fd, cfd, fl;

  CHECK_EQ_INT(mcp_sock_listen(&a, NULL, &fd, &bound, msg, sizeof(msg)), 0);
  CHECK(fd >= 0);
  CHECK(mcp_sockaddr_port(&bound) != 0);
  fl = fcntl(fd, F_GETFL);
  CHECK((fl & O_NONBLOCK) != 0);
  CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK_EQ_INT(mcp_sock_accept(fd, &cfd, NULL), -EAGAIN);
  CHECK_EQ_INT(cfd, -1);
  /* The same port again is taken. */
  int fd2;
  CHECK_EQ_INT(mcp_sock_listen(&bound, NULL, &fd2, &a, msg, sizeof(msg)), -EADDRINUSE);
  CHECK(strstr(msg, "already in use") != NULL);
  close(fd);

  /* An address this host does not have says so. */
  a = addr_of("192.0.2.254:0");
  CHECK(mcp_sock_listen(&a, NULL, &fd, &bound, msg, sizeof(msg)) == -EADDRNOTAVAIL);
  CHECK(strstr(msg, "not on this host") != NULL);
}

/* Listens on 127.0.0.1 with the kernel's choice of port; returns the fd. */
static int listen_any(union mcp_sockaddr *bound)
{
  union mcp_sockaddr a = addr_of("127.0.0.1:0");
  char msg[MCP_SOCK_MSGLEN];
  int fd = -1;

  if (mcp_sock_listen(&a, NULL, &fd, bound, msg, sizeof(msg)) != 0)
    fprintf(stderr, "listen: %s\n", msg);
  return fd;
}

static void test_port_range_exhaustion(void)
{
  union mcp_sockaddr a = addr_of("127.0.0.1:0"), bound, b2;
  struct mcp_sock_port_range r;
  char msg[MCP_SOCK_MSGLEN];
  int fds[3], fd = -1, base;

  /* Occupy three consecutive ports; a port someone else already holds is just as
   * occupied, so bind failures there are fine. */
  base = 20000 + (int)(getpid() % 20000);
  for (int i = 0; i < 3; i++) {
    union mcp_sockaddr p = a;

    mcp_sockaddr_set_port(&p, (uint16_t)(base + i));
    fds[i] = -1;
    (void)mcp_sock_listen(&p, NULL, &fds[i], &bound, msg, sizeof(msg));
  }
  r.lo = (uint16_t)base;
  r.hi = (uint16_t)(base + 2);
  CHECK_EQ_INT(mcp_sock_listen(&a, &r, &fd, &bound, msg, sizeof(msg)), -EADDRINUSE);
  CHECK_EQ_INT(fd, -1);
  printf("  exhausted: %s\n", msg);
  CHECK(strstr(msg, "every port of the range") != NULL);
  CHECK(strstr(msg, "127.0.0.1") != NULL);
  CHECK(strstr(msg, "(3 tried)") != NULL);
  CHECK(strstr(msg, "MCPNET_OOB_PORT_RANGE") != NULL);

  /* Free the middle one: the range now yields exactly that port. */
  if (fds[1] >= 0) {
    close(fds[1]);
    fds[1] = -1;
    CHECK_EQ_INT(mcp_sock_listen(&a, &r, &fd, &bound, msg, sizeof(msg)), 0);
    CHECK_EQ_INT(mcp_sockaddr_port(&bound), base + 1);
    close(fd);
  }
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  r.lo = 10;
  r.hi = 5;
  CHECK_EQ_INT(mcp_sock_listen(&a, &r, &fd, &b2, msg, sizeof(msg)), -EINVAL);
}

/* ---- Connect ---------------------------------------------------------------------- */

/* Connects to listener lfd at addr, accepting on the same thread (as NCCL's proxy
 * alternates connect and accept); returns the pair of connected fds. */
static int connect_pair(int lfd, const union mcp_sockaddr *addr, int *cfd, int *sfd)
{
  struct mcp_sock_connect c;
  union mcp_sockaddr peer;
  enum mcp_sock_connect_state st;

  *cfd = *sfd = -1;
  st = mcp_sock_connect_start(&c, addr, NULL, NULL);
  for (int turn = 0; turn < 2000 && (st == MCP_SOCK_CONNECT_IN_PROGRESS || *sfd < 0); turn++) {
    if (st == MCP_SOCK_CONNECT_IN_PROGRESS)
      st = mcp_sock_connect_progress(&c);
    if (*sfd < 0 && mcp_sock_accept(lfd, sfd, &peer) != 0)
      sleep_ms(1);
  }
  if (st != MCP_SOCK_CONNECT_DONE) {
    fprintf(stderr, "connect: state %d: %s\n", st, c.msg);
    mcp_sock_connect_cancel(&c);
    return -1;
  }
  *cfd = mcp_sock_connect_take_fd(&c);
  CHECK(mcp_sock_connect_take_fd(&c) == -ENOTCONN);
  mcp_sock_connect_cancel(&c);
  return *sfd >= 0 ? 0 : -1;
}

/* Test framing: u32 little-endian payload length, then the payload. */
static int lenpfx_frame_len(const uint8_t *buf, size_t have, size_t *len, char *msg, size_t msglen)
{
  uint32_t n;

  if (have < 4)
    return 0;
  n = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 24;
  if (n > 60000) {
    snprintf(msg, msglen, "frame of %u bytes is too long", n);
    return -1;
  }
  *len = 4 + (size_t)n;
  return 1;
}

/* Frame i has payload length (i * 7919) % 60000 filled with a pattern from i. */
static size_t make_frame(uint32_t i, uint8_t *buf)
{
  uint32_t n = (i * 7919u) % 60000u;

  buf[0] = (uint8_t)n;
  buf[1] = (uint8_t)(n >> 8);
  buf[2] = (uint8_t)(n >> 16);
  buf[3] = (uint8_t)(n >> 24);
  for (uint32_t k = 0; k < n; k++)
    buf[4 + k] = (uint8_t)(i * 31u + k);
  return 4 + (size_t)n;
}

/* Sends nframes frames from cfd to sfd through a send queue and a receive buffer. The
 * queue holds 256 KiB against a 64 KiB socket buffer, so flushes are partial and frames
 * arrive in pieces. (A 4 KiB buffer makes the same point 30 times slower: every round
 * then waits for TCP's delayed acknowledgements.) */
static void exchange_frames(int cfd, int sfd, uint32_t nframes)
{
  struct mcp_sock_sendq q;
  struct mcp_sock_rbuf rb;
  static uint8_t frame[60004], want[60004];
  char msg[MCP_SOCK_MSGLEN];
  uint32_t pushed = 0, got = 0, built = UINT32_MAX;
  size_t built_len = 0;
  int small = 65536, partial = 0;
  unsigned idle = 0; /* turns in a row that moved no frame: a stuck transfer ends the loop */

  setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  CHECK_EQ_INT(mcp_sock_sendq_init(&q, 256 * 1024), 0);
  CHECK_EQ_INT(mcp_sock_rbuf_init(&rb, 60004, lenpfx_frame_len), 0);
  while (got < nframes && idle < 20000) {
    const uint8_t *f;
    size_t flen;
    long left;
    uint32_t got_before = got;
    int rc;

    /* The frame that did not fit stays built: rebuilding it on every spin of this
     * loop would cost more than the transfer. */
    while (pushed < nframes) {
      if (built != pushed) {
        built_len = make_frame(pushed, frame);
        built = pushed;
      }
      if (mcp_sock_sendq_push(&q, frame, built_len) != 0)
        break;
      pushed++;
    }
    left = mcp_sock_sendq_flush(&q, cfd);
    CHECK(left >= 0);
    if (left > 0)
      partial++;
    CHECK(mcp_sock_rbuf_fill(&rb, sfd) >= 0);
    while ((rc = mcp_sock_rbuf_next(&rb, &f, &flen, msg, sizeof(msg))) == 1) {
      size_t n = make_frame(got, want);

      if (flen != n || memcmp(f, want, n) != 0) {
        fprintf(stderr, "frame %u differs (len %zu, want %zu)\n", got, flen, n);
        CHECK(0);
        goto out;
      }
      got++;
    }
    CHECK(rc == 0);
    if (got == got_before) {
      idle++;
      sleep_ms(1);
    } else {
      idle = 0;
    }
  }
out:
  CHECK_EQ_INT(got, nframes);
  CHECK(partial > 0);
  CHECK_EQ_INT(mcp_sock_sendq_pending(&q), 0);
  CHECK_EQ_INT(mcp_sock_rbuf_pending(&rb), 0);
  mcp_sock_sendq_free(&q);
  mcp_sock_rbuf_free(&rb);
}

static void listen_connect_exchange(const char *where)
{
  union mcp_sockaddr a = addr_of(where), bound;
  char msg[MCP_SOCK_MSGLEN], buf[MCP_SOCKADDR_STRLEN];
  int lfd, cfd, sfd, one = 0;
  socklen_t len = sizeof(one);

  if (mcp_sock_listen(&a, NULL, &lfd, &bound, msg, sizeof(msg)) != 0) {
    printf("  skipped %s: %s\n", where, msg);
    return;
  }
  printf("  listening on %s\n", mcp_sockaddr_format(&bound, buf, sizeof(buf)));
  CHECK_EQ_INT(connect_pair(lfd, &bound, &cfd, &sfd), 0);
  if (cfd >= 0 && sfd >= 0) {
    CHECK(getsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, &len) == 0 && one != 0);
    CHECK(getsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, &len) == 0 && one != 0);
    CHECK((fcntl(cfd, F_GETFL) & O_NONBLOCK) != 0);
    CHECK((fcntl(sfd, F_GETFD) & FD_CLOEXEC) != 0);
    exchange_frames(cfd, sfd, 400);
    exchange_frames(sfd, cfd, 50);
  }
  if (cfd >= 0)
    close(cfd);
  if (sfd >= 0)
    close(sfd);
  close(lfd);
}

static void test_listen_connect_exchange_v4(void) { listen_connect_exchange("127.0.0.1:0"); }
static void test_listen_connect_exchange_v6(void) { listen_connect_exchange("[::1]:0"); }

/* A port that nothing listens on and nobody else can take meanwhile: bound, not listening. */
static int closed_port(union mcp_sockaddr *addr)
{
  socklen_t len = sizeof(*addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  *addr = addr_of("127.0.0.1:0");
  if (fd < 0 || bind(fd, &addr->sa, mcp_sockaddr_len(addr)) != 0 || getsockname(fd, &addr->sa, &len) != 0)
    fprintf(stderr, "closed_port: %s\n", strerror(errno));
  return fd;
}

static void test_connect_refused(void)
{
  struct mcp_sock_connect_opts opts = {.timeout_ms = 5000, .max_retries = 0};
  struct mcp_sock_connect c;
  union mcp_sockaddr a;
  char want[128], buf[MCP_SOCKADDR_STRLEN];
  int hold = closed_port(&a);
  uint64_t t0;

  mcp_sock_connect_start(&c, &a, NULL, &opts);
  /* No retry allowed: the first refusal is final, whatever the clock says (attempts). */
  CHECK_EQ_INT(drive(&c, 4000), MCP_SOCK_CONNECT_FAILED);
  CHECK_EQ_INT(c.fail, MCP_SOCK_FAIL_REFUSED);
  CHECK_EQ_INT(c.err, ECONNREFUSED);
  CHECK_EQ_INT(c.attempts, 1);
  snprintf(want, sizeof(want), "nothing listens on %s", mcp_sockaddr_format(&a, buf, sizeof(buf)));
  CHECK(strstr(c.msg, want) != NULL);
  printf("  refused: %s\n", c.msg);
  CHECK_EQ_STR(mcp_sock_connect_fail_name(c.fail), "refused");
  CHECK_EQ_INT(mcp_sock_connect_take_fd(&c), -ENOTCONN);
  mcp_sock_connect_cancel(&c);
  mcp_sock_connect_cancel(&c);

  /* Bounded retries with doubling waits: 3 retries after 5, 10, 20 ms. */
  opts.max_retries = 3;
  opts.backoff_ms = 5;
  t0 = fake_ns;
  mcp_sock_connect_start(&c, &a, NULL, &opts);
  CHECK_EQ_INT(drive(&c, 2000), MCP_SOCK_CONNECT_FAILED);
  CHECK_EQ_INT(c.fail, MCP_SOCK_FAIL_REFUSED);
  CHECK_EQ_INT(c.attempts, 4);
  CHECK(fake_ns - t0 >= 35 * MCP_NS_PER_MS); /* the waits were waited, on the library's clock */
  CHECK(strstr(c.msg, "4 attempts") != NULL);

  /* Retries stop at the deadline: with 50 ms waits and a 120 ms deadline, at most 3. */
  opts.max_retries = 100;
  opts.backoff_ms = 50;
  opts.backoff_max_ms = 50;
  opts.timeout_ms = 120;
  mcp_sock_connect_start(&c, &a, NULL, &opts);
  CHECK_EQ_INT(drive(&c, 4000), MCP_SOCK_CONNECT_FAILED);
  CHECK_EQ_INT(c.fail, MCP_SOCK_FAIL_REFUSED);
  /* The deadline, not max_retries, ended it: a late caller (a loaded host) makes fewer
   * attempts, never more, and a retry is never scheduled past the deadline. */
  CHECK(c.attempts >= 1 && c.attempts <= 3);
  CHECK(c.retry_at_ns <= c.deadline_ns);
  CHECK(fake_ns <= c.deadline_ns); /* given up at once, not by waiting the deadline out */
  close(hold);
}

/* The retry is what lets a connect that raced ahead of its listener succeed. */
static void test_connect_refused_then_listen(void)
{
  struct mcp_sock_connect_opts opts = {.timeout_ms = 3000, .max_retries = 5, .backoff_ms = 30};
  struct mcp_sock_connect c;
  union mcp_sockaddr a;
  int hold = closed_port(&a), sfd = -1, cfd;
  enum mcp_sock_connect_state st;

  /* The clock stands still until listen(): the 30 ms retry cannot come before it. */
  st = mcp_sock_connect_start(&c, &a, NULL, &opts);
  for (int turn = 0; turn < 500 && st == MCP_SOCK_CONNECT_IN_PROGRESS && c.fd >= 0; turn++) {
    st = mcp_sock_connect_progress(&c);
    if (c.fd >= 0)
      sleep_ms(1);
  }
  CHECK_EQ_INT(st, MCP_SOCK_CONNECT_IN_PROGRESS);
  CHECK_EQ_INT(c.attempts, 1); /* refused once, waiting to retry */
  CHECK_EQ_INT(listen(hold, 8), 0);
  CHECK_EQ_INT(drive(&c, 2000), MCP_SOCK_CONNECT_DONE);
  CHECK_EQ_INT(c.attempts, 2);
  cfd = mcp_sock_connect_take_fd(&c);
  CHECK(cfd >= 0);
  sfd = accept(hold, NULL, NULL);
  CHECK(sfd >= 0);
  if (cfd >= 0)
    close(cfd);
  if (sfd >= 0)
    close(sfd);
  close(hold);
}

/* A listener whose accept queue is full drops SYNs silently, which looks exactly like a
 * firewall DROP rule from the connecting side: the connect must time out at its
 * deadline with the firewall message. */
static void test_connect_timeout(void)
{
  struct mcp_sock_connect_opts opts = {.timeout_ms = 250};
  struct mcp_sock_connect c[8];
  union mcp_sockaddr a = addr_of("127.0.0.1:0");
  socklen_t len = sizeof(a);
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), timed_out = -1;
  char want[128], buf[MCP_SOCKADDR_STRLEN];

  CHECK(lfd >= 0 && bind(lfd, &a.sa, mcp_sockaddr_len(&a)) == 0 && listen(lfd, 0) == 0 &&
        getsockname(lfd, &a.sa, &len) == 0);
  /* With the clock still, a connect the kernel completes is DONE within a few calls;
   * the first whose SYN the full queue drops stays IN_PROGRESS, each call returning. */
  for (int i = 0; i < 8 && timed_out < 0; i++) {
    mcp_sock_connect_start(&c[i], &a, NULL, &opts);
    if (spin_still(&c[i], 200) == MCP_SOCK_CONNECT_IN_PROGRESS)
      timed_out = i;
  }
  CHECK(timed_out >= 0);
  if (timed_out >= 0) {
    uint64_t t0 = c[timed_out].start_ns, ms;

    CHECK_EQ_INT(drive(&c[timed_out], 1000), MCP_SOCK_CONNECT_FAILED);
    ms = (fake_ns - t0) / MCP_NS_PER_MS;
    CHECK_EQ_INT(c[timed_out].fail, MCP_SOCK_FAIL_TIMEOUT);
    CHECK_EQ_INT(c[timed_out].err, ETIMEDOUT); /* mcpnet's deadline, not the kernel's */
    CHECK_EQ_INT((int)ms, 250);                /* at the deadline to the ms, on the library's clock */
    snprintf(want, sizeof(want), "a firewall or routing problem drops traffic to %s",
             mcp_sockaddr_format(&a, buf, sizeof(buf)));
    CHECK(strstr(c[timed_out].msg, want) != NULL);
    printf("  timeout: %s\n", c[timed_out].msg);
  }
  for (int i = 0; i < 8 && i <= timed_out; i++)
    mcp_sock_connect_cancel(&c[i]);
  close(lfd);
}

/* Many diallers reach a process that does not accept for a while (a late rank): the
 * kernel completes every handshake into the listen backlog, so none of them sees what
 * looks like a firewall. The backlog is what the kernel allows (somaxconn), far above
 * the 128 that used to overflow. */
static void test_listen_backlog_holds_many_diallers(void)
{
  enum { N = 300 };
  static struct mcp_sock_connect c[N];
  struct mcp_sock_connect_opts opts = {.timeout_ms = 5000};
  union mcp_sockaddr a = addr_of("127.0.0.1:0"), bound;
  char msg[MCP_SOCK_MSGLEN];
  int lfd = -1, done = 0, i;

  printf("  listen backlog %d\n", mcp_sock_listen_backlog());
  CHECK(mcp_sock_listen_backlog() >= N);
  CHECK_EQ_INT(mcp_sock_listen(&a, NULL, &lfd, &bound, msg, sizeof(msg)), 0);
  for (i = 0; i < N; i++) {
    mcp_sock_connect_start(&c[i], &bound, NULL, &opts);
    if (drive(&c[i], 8000) != MCP_SOCK_CONNECT_DONE) {
      fprintf(stderr, "dialler %d: %s\n", i, c[i].msg);
      break;
    }
    done++;
  }
  CHECK_EQ_INT(done, N);
  for (i = 0; i < N && i <= done; i++)
    mcp_sock_connect_cancel(&c[i]);
  close(lfd);
}

/* Keepalive declares a silent host dead after the time asked for: idle + count x
 * interval, and TCP_USER_TIMEOUT the same for unacknowledged data. */
static void test_keepalive_options(void)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), v = 0;
  unsigned u = 0;
  socklen_t len;
  static const struct {
    unsigned ask, cnt, user_s;
  } cases[] = {{60, 10, 60}, {90, 16, 90}, {1, 1, 15}, {100000, 127, 86400}};

  CHECK(fd >= 0);
  for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    CHECK_EQ_INT(mcp_sock_set_keepalive(fd, cases[i].ask), 0);
    len = sizeof(v);
    CHECK(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &len) == 0 && v == 1);
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, &len) == 0 && v == (int)MCP_SOCK_KEEPIDLE_S);
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &v, &len) == 0 && v == (int)MCP_SOCK_KEEPINTVL_S);
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &v, &len) == 0);
    CHECK_EQ_INT(v, cases[i].cnt);
    len = sizeof(u);
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &u, &len) == 0);
    CHECK_EQ_INT(u, cases[i].user_s * 1000u);
  }
  CHECK(mcp_sock_set_keepalive(-1, 60) < 0);
  close(fd);
}

static void test_connect_bad_input(void)
{
  struct mcp_sock_connect c;
  union mcp_sockaddr a;

  memset(&a, 0, sizeof(a));
  CHECK_EQ_INT(mcp_sock_connect_start(&c, &a, NULL, NULL), MCP_SOCK_CONNECT_FAILED);
  CHECK_EQ_INT(c.fail, MCP_SOCK_FAIL_OTHER);
  a = addr_of("127.0.0.1:0");
  CHECK_EQ_INT(mcp_sock_connect_start(&c, &a, NULL, NULL), MCP_SOCK_CONNECT_FAILED);
  CHECK_EQ_INT(c.err, EINVAL);
  CHECK_EQ_INT(mcp_sock_connect_progress(&c), MCP_SOCK_CONNECT_FAILED);
  mcp_sock_connect_cancel(&c);
}

/* Binding the source address (how the channel stays on the chosen interface). Only
 * 127.0.0.1 is used, so this shows the bind path works, not that it changes routes. */
static void test_connect_local_bind(void)
{
  union mcp_sockaddr bound, local = addr_of("127.0.0.1:0"), peer;
  struct mcp_sock_connect c;
  char buf[MCP_SOCKADDR_STRLEN];
  int lfd = listen_any(&bound), sfd = -1, cfd;

  mcp_sock_connect_start(&c, &bound, &local, NULL);
  CHECK_EQ_INT(drive(&c, 2000), MCP_SOCK_CONNECT_DONE);
  for (int turn = 0; turn < 2000 && sfd < 0; turn++)
    if (mcp_sock_accept(lfd, &sfd, &peer) != 0)
      sleep_ms(1);
  CHECK(sfd >= 0);
  CHECK_EQ_STR(mcp_sockaddr_format_host(&peer, buf, sizeof(buf)), "127.0.0.1");
  cfd = mcp_sock_connect_take_fd(&c);
  if (cfd >= 0)
    close(cfd);
  if (sfd >= 0)
    close(sfd);
  close(lfd);
}

/* ---- Send queue and receive buffer ------------------------------------------------ */

static void test_sendq_limits(void)
{
  struct mcp_sock_sendq q;
  uint8_t data[3000];

  memset(data, 0xab, sizeof(data));
  mcp_sock_sendq_init(&q, 8000);
  CHECK_EQ_INT(mcp_sock_sendq_push(&q, data, 3000), 0);
  CHECK_EQ_INT(mcp_sock_sendq_push(&q, data, 3000), 0);
  CHECK_EQ_INT(mcp_sock_sendq_push(&q, data, 3000), -ENOBUFS); /* all or nothing */
  CHECK_EQ_INT(mcp_sock_sendq_pending(&q), 6000);
  CHECK_EQ_INT(mcp_sock_sendq_push(&q, data, 2000), 0);
  CHECK_EQ_INT(mcp_sock_sendq_pending(&q), 8000);
  CHECK_EQ_INT(mcp_sock_sendq_push(&q, data, 1), -ENOBUFS);
  CHECK(q.cap <= 8000);
  mcp_sock_sendq_free(&q);
  mcp_sock_sendq_free(&q);
}

/* A peer that vanished: the flush reports an error instead of raising SIGPIPE (which
 * would kill the whole training process). */
static void test_send_to_closed_peer(void)
{
  union mcp_sockaddr bound;
  struct mcp_sock_sendq q;
  uint8_t data[4096] = {0};
  int lfd = listen_any(&bound), cfd, sfd;
  long rc = 0;

  if (connect_pair(lfd, &bound, &cfd, &sfd) != 0) {
    CHECK(0);
    return;
  }
  close(sfd);
  mcp_sock_sendq_init(&q, 1 << 20);
  for (int i = 0; i < 200 && rc >= 0; i++) {
    if (mcp_sock_sendq_pending(&q) < 512 * 1024)
      mcp_sock_sendq_push(&q, data, sizeof(data));
    rc = mcp_sock_sendq_flush(&q, cfd);
    sleep_ms(1);
  }
  CHECK(rc == -EPIPE || rc == -ECONNRESET);
  mcp_sock_sendq_free(&q);
  close(cfd);
  close(lfd);
}

static void test_rbuf_eof_and_garbage(void)
{
  union mcp_sockaddr bound;
  struct mcp_sock_rbuf rb;
  const uint8_t *f;
  size_t flen;
  char msg[MCP_SOCK_MSGLEN];
  uint8_t frame[16];
  int lfd = listen_any(&bound), cfd, sfd;

  if (connect_pair(lfd, &bound, &cfd, &sfd) != 0) {
    CHECK(0);
    return;
  }
  mcp_sock_rbuf_init(&rb, 60004, lenpfx_frame_len);
  /* One whole frame and a truncated one, then the peer closes. */
  memset(frame, 0, sizeof(frame));
  frame[0] = 3;
  frame[4] = 'a';
  frame[5] = 'b';
  frame[6] = 'c';
  frame[7] = 9; /* next frame claims 9 bytes, only 2 follow */
  CHECK_EQ_INT(send(cfd, frame, 13, MSG_NOSIGNAL), 13);
  close(cfd);
  for (int turn = 0; turn < 2000 && !rb.eof; turn++) {
    CHECK(mcp_sock_rbuf_fill(&rb, sfd) >= 0);
    sleep_ms(1);
  }
  CHECK(rb.eof);
  CHECK_EQ_INT(mcp_sock_rbuf_next(&rb, &f, &flen, msg, sizeof(msg)), 1);
  CHECK(flen == 7 && memcmp(f + 4, "abc", 3) == 0);
  CHECK_EQ_INT(mcp_sock_rbuf_next(&rb, &f, &flen, msg, sizeof(msg)), 0);
  CHECK_EQ_INT(mcp_sock_rbuf_pending(&rb), 6);
  mcp_sock_rbuf_free(&rb);

  /* A frame the callback rejects makes the stream unusable, with its reason. */
  {
    int sv[2];

    CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    mcp_sock_rbuf_init(&rb, 60004, lenpfx_frame_len);
    CHECK_EQ_INT(send(sv[0], "\xff\xff\xff\xff", 4, 0), 4);
    CHECK_EQ_INT(mcp_sock_rbuf_fill(&rb, sv[1]), 4);
    CHECK_EQ_INT(mcp_sock_rbuf_next(&rb, &f, &flen, msg, sizeof(msg)), -EBADMSG);
    CHECK(strstr(msg, "too long") != NULL);
    mcp_sock_rbuf_free(&rb);
    close(sv[0]);
    close(sv[1]);
  }
  close(sfd);
  close(lfd);
}

/* A receive buffer holds memory only while bytes wait: none for a connection that says
 * nothing, up to the frame it needs, none again once its frames were taken; and it
 * refuses a frame longer than the limit it has now (a stranger's limit is low), though
 * the callback would take it. */
static void test_rbuf_allocates_on_demand(void)
{
  struct mcp_sock_rbuf rb;
  uint8_t big[4000];
  const uint8_t *f;
  size_t flen;
  char msg[MCP_SOCK_MSGLEN];
  int sv[2];

  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  mcp_sock_rbuf_init(&rb, 60004, lenpfx_frame_len);
  CHECK_EQ_INT(mcp_sock_rbuf_allocated(&rb), 0);
  for (int i = 0; i < 100; i++)
    CHECK_EQ_INT(mcp_sock_rbuf_fill(&rb, sv[1]), 0); /* nothing to read: nothing held */
  CHECK_EQ_INT(mcp_sock_rbuf_allocated(&rb), 0);
  /* A 3,000-byte frame: the buffer grows to hold it, no further than the next power of two. */
  memset(big, 'x', sizeof(big));
  big[0] = (uint8_t)(2996 & 0xff);
  big[1] = (uint8_t)(2996 >> 8);
  big[2] = big[3] = 0;
  CHECK_EQ_INT(send(sv[0], big, 3000, 0), 3000);
  while (mcp_sock_rbuf_fill(&rb, sv[1]) > 0)
    ;
  CHECK_EQ_INT(mcp_sock_rbuf_next(&rb, &f, &flen, msg, sizeof(msg)), 1);
  CHECK_EQ_INT(flen, 3000);
  CHECK(mcp_sock_rbuf_allocated(&rb) >= 3000 && mcp_sock_rbuf_allocated(&rb) <= 4096);
  CHECK_EQ_INT(mcp_sock_rbuf_fill(&rb, sv[1]), 0);
  CHECK_EQ_INT(mcp_sock_rbuf_allocated(&rb), 0); /* taken, then given back */
  /* Under a limit of 2,048 bytes the same frame is refused before it is read whole. */
  mcp_sock_rbuf_set_max(&rb, 2048);
  CHECK_EQ_INT(send(sv[0], big, 3000, 0), 3000);
  CHECK(mcp_sock_rbuf_fill(&rb, sv[1]) > 0);
  CHECK(mcp_sock_rbuf_allocated(&rb) <= 2048);
  CHECK_EQ_INT(mcp_sock_rbuf_next(&rb, &f, &flen, msg, sizeof(msg)), -EBADMSG);
  CHECK(strstr(msg, "larger than the 2048 bytes") != NULL);
  mcp_sock_rbuf_free(&rb);
  close(sv[0]);
  close(sv[1]);
}

int main(void)
{
  mcp_clock_test_set(fake_clock);
  RUN_TEST(test_sockaddr_format_parse);
  RUN_TEST(test_ifspec_table);
  RUN_TEST(test_iface_auto_tiers);
  RUN_TEST(test_iface_filters);
  RUN_TEST(test_iface_find_host);
  RUN_TEST(test_port_range_parse);
  RUN_TEST(test_listen_basic);
  RUN_TEST(test_port_range_exhaustion);
  RUN_TEST(test_listen_connect_exchange_v4);
  RUN_TEST(test_listen_connect_exchange_v6);
  RUN_TEST(test_connect_refused);
  RUN_TEST(test_connect_refused_then_listen);
  RUN_TEST(test_connect_timeout);
  RUN_TEST(test_listen_backlog_holds_many_diallers);
  RUN_TEST(test_keepalive_options);
  RUN_TEST(test_connect_bad_input);
  RUN_TEST(test_connect_local_bind);
  RUN_TEST(test_rbuf_allocates_on_demand);
  RUN_TEST(test_sendq_limits);
  RUN_TEST(test_send_to_closed_peer);
  RUN_TEST(test_rbuf_eof_and_garbage);
  return TEST_EXIT();
}
