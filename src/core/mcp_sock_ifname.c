/*
 * mcp_sock_ifname.c - which network interface the out-of-band channel binds to.
 *
 * NCCL_SOCKET_IFNAME keeps NCCL's meaning (a comma list of name prefixes, '^' to
 * exclude, '=' for exact names) so one setting steers NCCL's bootstrap and mcpnet
 * alike. The decision is a pure function of an interface list, the setting and the
 * address family, so unit tests feed it hand-made lists; only mcp_sock_iface_find
 * touches getifaddrs. Both success and failure come with a sentence saying why, because
 * "each node picked a different interface" is a classic cause of hangs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/sock.h"

/* ---- NCCL_SOCKET_IFNAME ----------------------------------------------------------- */

int mcp_sock_ifspec_parse(const char *str, struct mcp_match_list *spec, char *msg, size_t msglen)
{
  struct mcp_match_fault f;

  if (mcp_match_list_parse(str, IF_NAMESIZE, 0, spec, &f) == 0)
    return 0;
  if (f.kind == MCP_MATCH_TOO_MANY)
    snprintf(msg, msglen, "NCCL_SOCKET_IFNAME lists more than %d interfaces", MCP_MATCH_LIST_MAX);
  else if (f.kind == MCP_MATCH_NO_NAME)
    snprintf(msg, msglen, "NCCL_SOCKET_IFNAME entry \"%.*s\" has no interface name before ':'", f.token_len,
             f.token);
  else
    snprintf(msg, msglen,
             "NCCL_SOCKET_IFNAME entry \"%.*s\" is longer than any interface name "
             "(at most %d characters)",
             f.token_len, f.token, IF_NAMESIZE - 1);
  return -EINVAL;
}

/* ---- Evaluating one interface ----------------------------------------------------- */

/* What one interface offers, gathered over all its address entries. */
struct sock_if_eval {
  const char *name;
  unsigned int flags;
  int usable;
  union mcp_sockaddr addr;
  const char *why; /* when not usable */
};

static const char *sock_family_name(int family)
{
  return family == AF_INET ? "IPv4" : family == AF_INET6 ? "IPv6" : "IPv4 or IPv6";
}

static int sock_is_link_local6(const union mcp_sockaddr *a)
{
  const uint8_t *b = a->sin6.sin6_addr.s6_addr;

  return b[0] == 0xfe && (b[1] & 0xc0) == 0x80;
}

static int sock_is_loopback(const char *name, unsigned int flags)
{
  return (flags & IFF_LOOPBACK) != 0 || strcmp(name, "lo") == 0;
}

/* 1 when entry i is the first entry of its interface: entries of one interface may be
 * interleaved with others, and each interface must be judged once, in list order. */
static int sock_first_entry(const struct mcp_sock_ifaddr *list, int i)
{
  for (int j = 0; j < i; j++)
    if (strcmp(list[j].name, list[i].name) == 0)
      return 0;
  return 1;
}

static void sock_if_evaluate(const struct mcp_sock_ifaddr *list, int n, const char *name, int family,
                             struct sock_if_eval *ev)
{
  int have = 0, saw_link_local = 0, saw_other_family = 0;

  memset(ev, 0, sizeof(*ev));
  ev->name = name;
  for (int i = 0; i < n; i++) {
    const struct mcp_sock_ifaddr *e = &list[i];
    int fam = e->addr.sa.sa_family;

    if (strcmp(e->name, name) != 0)
      continue;
    ev->flags |= e->flags;
    if (fam != AF_INET && fam != AF_INET6)
      continue;
    if (family != AF_UNSPEC && fam != family) {
      saw_other_family = 1;
      continue;
    }
    /* Link-local IPv6 needs a scope on every peer and does not route: never usable. */
    if (fam == AF_INET6 && sock_is_link_local6(&e->addr)) {
      saw_link_local = 1;
      continue;
    }
    /* With either family allowed, IPv4 wins: it is what NCCL's bootstrap uses first. */
    if (!have || (fam == AF_INET && ev->addr.sa.sa_family != AF_INET)) {
      ev->addr = e->addr;
      have = 1;
    }
  }
  mcp_sockaddr_set_port(&ev->addr, 0);
  if ((ev->flags & IFF_UP) == 0)
    ev->why = "down";
  else if ((ev->flags & IFF_RUNNING) == 0)
    ev->why = "no carrier";
  else if (!have && saw_link_local)
    ev->why = "only a link-local IPv6 address";
  else if (!have && saw_other_family)
    ev->why = family == AF_INET ? "no IPv4 address" : "no global IPv6 address";
  else if (!have)
    ev->why = "no IP address";
  else
    ev->usable = 1;
}

/* ---- Choosing --------------------------------------------------------------------- */

static void sock_appendf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void sock_appendf(char *buf, size_t len, const char *fmt, ...)
{
  size_t used = strnlen(buf, len);
  va_list ap;

  if (used + 1 >= len)
    return;
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

/* Automatic tiers; lower is better, -ENOENT is never chosen automatically. */
static int sock_auto_tier(const char *name, unsigned int flags)
{
  if (strncmp(name, "virbr", 5) == 0)
    return -ENOENT;
  if (sock_is_loopback(name, flags))
    return 3;
  if (strncmp(name, "docker", 6) == 0)
    return 2;
  if (strncmp(name, "ib", 2) == 0)
    return 0;
  return 1;
}

static const char *const sock_auto_why[] = {
  "the first usable ib* interface",
  "the first usable interface other than docker*, virbr* and loopback (no usable ib* "
  "interface)",
  "a docker* interface, as no other interface is usable: set NCCL_SOCKET_IFNAME if "
  "peers on other hosts cannot reach it",
  "loopback, as no other interface is usable: only peers on this host can connect",
};

/* Lists every interface with why it was passed over, for the failure message. */
static void sock_describe_seen(const struct mcp_sock_ifaddr *list, int n, const struct mcp_match_list *spec,
                               int family, char *buf, size_t len)
{
  int shown = 0;

  for (int i = 0; i < n; i++) {
    struct sock_if_eval ev;

    if (!sock_first_entry(list, i))
      continue;
    sock_if_evaluate(list, n, list[i].name, family, &ev);
    sock_appendf(buf, len, "%s%s (", shown++ ? ", " : "", ev.name);
    if (spec != NULL && !mcp_match_allows(spec, ev.name, -1))
      sock_appendf(buf, len, "not selected");
    else if (spec == NULL && sock_auto_tier(ev.name, ev.flags) < 0)
      sock_appendf(buf, len, "never chosen automatically");
    else
      sock_appendf(buf, len, "%s", ev.usable ? "usable" : ev.why);
    sock_appendf(buf, len, ")");
  }
  if (shown == 0)
    sock_appendf(buf, len, "no interfaces at all");
  /* Hosts with hundreds of veth interfaces overflow the message: say it was cut. */
  if (len > 4 && strnlen(buf, len) == len - 1)
    memcpy(buf + len - 4, "...", 4);
}

static void sock_choice_set(struct mcp_sock_iface_choice *choice, const struct sock_if_eval *ev)
{
  snprintf(choice->name, sizeof(choice->name), "%s", ev->name);
  choice->addr = ev->addr;
}

int mcp_sock_iface_choose(const struct mcp_sock_ifaddr *list, int n, const char *ifname,
                          const struct mcp_match_list *spec, int family, struct mcp_sock_iface_choice *choice)
{
  struct sock_if_eval ev, best;
  char host[MCP_SOCKADDR_STRLEN];
  int explicit = ifname != NULL && ifname[0] != '\0';
  int best_tier = 4, matches = 0;

  memset(choice, 0, sizeof(*choice));
  memset(&best, 0, sizeof(best));
  if (family != AF_INET && family != AF_INET6 && family != AF_UNSPEC) {
    snprintf(choice->reason, sizeof(choice->reason), "unknown address family %d", family);
    return -EINVAL;
  }
  if (explicit && spec == NULL) {
    snprintf(choice->reason, sizeof(choice->reason), "NCCL_SOCKET_IFNAME=%s was not parsed", ifname);
    return -EINVAL;
  }
  for (int i = 0; i < n; i++) {
    int tier;

    if (!sock_first_entry(list, i))
      continue;
    sock_if_evaluate(list, n, list[i].name, family, &ev);
    if (!ev.usable)
      continue;
    tier = explicit ? (mcp_match_allows(spec, ev.name, -1) ? 0 : -1) : sock_auto_tier(ev.name, ev.flags);
    if (tier < 0)
      continue;
    if (tier == 0)
      matches++;
    if (tier < best_tier) {
      best_tier = tier;
      best = ev;
    }
  }
  if (best_tier == 4) {
    if (explicit)
      snprintf(choice->reason, sizeof(choice->reason),
               "no usable %s interface matches NCCL_SOCKET_IFNAME=%s; seen: ", sock_family_name(family),
               ifname);
    else
      snprintf(choice->reason, sizeof(choice->reason),
               "no usable %s interface (NCCL_SOCKET_IFNAME unset); seen: ", sock_family_name(family));
    sock_describe_seen(list, n, explicit ? spec : NULL, family, choice->reason, sizeof(choice->reason));
    return -ENODEV;
  }
  sock_choice_set(choice, &best);
  mcp_sockaddr_format_host(&best.addr, host, sizeof(host));
  if (explicit)
    snprintf(choice->reason, sizeof(choice->reason),
             "%s %s: the first usable %s interface matching NCCL_SOCKET_IFNAME=%s (%d match%s)", best.name,
             host, sock_family_name(family), ifname, matches, matches == 1 ? "" : "es");
  else
    snprintf(choice->reason, sizeof(choice->reason), "%s %s: automatic choice (NCCL_SOCKET_IFNAME unset), %s",
             best.name, host, sock_auto_why[best_tier]);
  return 0;
}

/* ---- This host -------------------------------------------------------------------- */

static void sock_ifaddr_from(const struct ifaddrs *ifa, struct mcp_sock_ifaddr *out)
{
  memset(out, 0, sizeof(*out));
  snprintf(out->name, sizeof(out->name), "%s", ifa->ifa_name);
  out->flags = ifa->ifa_flags;
  /* Entries without an IP address (AF_PACKET) still name the interface, so a
   * failure message can list interfaces that have no address at all. */
  if (ifa->ifa_addr == NULL)
    return;
  if (ifa->ifa_addr->sa_family == AF_INET)
    memcpy(&out->addr.sin, ifa->ifa_addr, sizeof(out->addr.sin));
  else if (ifa->ifa_addr->sa_family == AF_INET6)
    memcpy(&out->addr.sin6, ifa->ifa_addr, sizeof(out->addr.sin6));
}

/* Said once per process: every listener and connection would find the same spaces. */
static int ifname_spaces_warned;

int mcp_sock_iface_find(const char *ifname, const struct mcp_match_list *spec, int family,
                        struct mcp_sock_iface_choice *choice)
{
  struct ifaddrs *ifas = NULL, *ifa;
  struct mcp_sock_ifaddr *list = NULL;
  int n = 0, rc;

  memset(choice, 0, sizeof(*choice));
  if (ifname != NULL && ifname[0] != '\0' && spec != NULL)
    mcp_match_list_warn_trimmed("NCCL_SOCKET_IFNAME", spec, &ifname_spaces_warned);
  if (getifaddrs(&ifas) != 0) {
    rc = -errno;
    snprintf(choice->reason, sizeof(choice->reason), "getifaddrs failed: %s", strerror(-rc));
    return rc;
  }
  for (ifa = ifas; ifa != NULL; ifa = ifa->ifa_next)
    n++;
  list = calloc(n > 0 ? (size_t)n : 1, sizeof(*list));
  if (list == NULL) {
    rc = -ENOMEM;
    snprintf(choice->reason, sizeof(choice->reason), "out of memory listing interfaces");
    goto out;
  }
  n = 0;
  for (ifa = ifas; ifa != NULL; ifa = ifa->ifa_next)
    sock_ifaddr_from(ifa, &list[n++]);
  rc = mcp_sock_iface_choose(list, n, ifname, spec, family, choice);
out:
  free(list);
  freeifaddrs(ifas);
  return rc;
}
