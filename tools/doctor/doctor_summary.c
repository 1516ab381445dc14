/*
 * doctor_summary.c - what one host tells the other before they connect, and what the
 * two summaries disagree on. A summary is the port the plugin's selection gives this
 * process and the settings its QPs will carry (link layer, MTU, rate, GID type and
 * subnet, P_Key, SL/TC, timeout/retry, version); it travels as "key=value" lines, so
 * an older or newer doctor on the other side still reads what it knows. Each mismatch
 * is reported in the words of the fix, naming both hosts and both values.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "doctor.h"
#include "core/text.h"
#include "fabric/fabric_pkey.h"

/* The selection this process itself gets: the one covering its local rank. */
static const struct doctor_selection *own_selection(const struct doctor_report *r)
{
  for (int i = 0; i < r->nsel; i++)
    if (r->sel[i]->lo <= r->own_rank && r->own_rank <= r->sel[i]->hi)
      return r->sel[i];
  return r->nsel > 0 ? r->sel[0] : NULL;
}

/* The IP subnet of the GID's address on its netdev, "a.b.c.d/len". */
static void gid_subnet(const struct mcp_net_dev *d, char *buf, size_t len)
{
  struct ifaddrs *ifs = NULL, *i;

  buf[0] = '\0';
  if (d->gid.family == 0 || getifaddrs(&ifs) != 0)
    return;
  for (i = ifs; i != NULL; i = i->ifa_next) {
    uint8_t net[16], mask[16];
    int n, bits = 0, fam;
    char text[INET6_ADDRSTRLEN];

    if (i->ifa_addr == NULL || i->ifa_netmask == NULL || strcmp(i->ifa_name, d->gid.netdev) != 0)
      continue;
    fam = i->ifa_addr->sa_family;
    if (fam == AF_INET && d->gid.family == 4) {
      memcpy(net, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, 4);
      memcpy(mask, &((struct sockaddr_in *)(void *)i->ifa_netmask)->sin_addr, 4);
      if (memcmp(net, d->gid.raw + 12, 4) != 0)
        continue;
      n = 4;
    } else if (fam == AF_INET6 && d->gid.family == 6) {
      memcpy(net, &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr, 16);
      memcpy(mask, &((struct sockaddr_in6 *)(void *)i->ifa_netmask)->sin6_addr, 16);
      if (memcmp(net, d->gid.raw, 16) != 0)
        continue;
      n = 16;
    } else {
      continue;
    }
    for (int k = 0; k < n; k++) {
      net[k] &= mask[k];
      bits += __builtin_popcount(mask[k]);
    }
    inet_ntop(n == 4 ? AF_INET : AF_INET6, net, text, sizeof(text));
    snprintf(buf, len, "%s/%d", text, bits);
    break;
  }
  freeifaddrs(ifs);
}

/* The P_Key value at the index QPs use, when the selection does not carry it. */
static int pkey_at(const char *ibdev, int port, int index)
{
  char path[PATH_MAX];
  unsigned v = 0;
  FILE *f;

  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/pkeys/%d", ibdev, port, index);
  f = fopen(path, "re");
  if (f == NULL)
    return -1;
  if (fscanf(f, "%x", &v) != 1)
    v = 0;
  fclose(f);
  return v != 0 ? (int)v : -1;
}

static int netdev_mtu_of(const struct doctor_report *r, const char *ibdev, int port)
{
  for (int i = 0; i < r->ndev; i++)
    for (int p = 0; strcmp(r->dev[i].name, ibdev) == 0 && p < r->dev[i].nport; p++)
      if (r->dev[i].port[p].num == port)
        return r->dev[i].port[p].netdev_mtu;
  return 0;
}

void doctor_summary_fill(const struct doctor_report *r, int dev, struct doctor_summary *s)
{
  const struct doctor_selection *sel = own_selection(r);
  const struct mcp_config *c = &r->cfg;
  const struct mcp_net_dev *d;

  memset(s, 0, sizeof(*s));
  snprintf(s->host, sizeof(s->host), "%s", r->host);
  snprintf(s->version, sizeof(s->version), "%s", MCPNET_VERSION);
  if (r->oob_iface[0])
    snprintf(s->oob, sizeof(s->oob), "%s (%s)", r->oob_addr, r->oob_iface);
  s->pkey = -1;
  s->sl = c->ib_sl;
  s->tc = c->ib_tc;
  s->timeout = c->ib_timeout;
  s->retry = c->ib_retry_cnt;
  s->rnr_retry = c->rnr_retry;
  s->qps = c->ib_qps_per_conn;
  s->mtu_cap = c->mtu;
  if (sel == NULL || sel->rc != 0 || dev < 0 || dev >= sel->fab.ndev)
    return;
  d = &sel->fab.dev[dev];
  s->ok = 1;
  snprintf(s->dev, sizeof(s->dev), "%s", d->name);
  s->port = d->port;
  snprintf(s->link_layer, sizeof(s->link_layer), "%s", d->link_layer == 2 ? "Ethernet" : "InfiniBand");
  s->mtu = mcp_fabric_mtu_bytes(d->active_mtu);
  snprintf(s->netdev, sizeof(s->netdev), "%s", d->gid.netdev);
  s->netdev_mtu = netdev_mtu_of(r, d->ibdev, d->port);
  s->rate_mbps = d->speed_mbps;
  s->gid_index = d->gid.index;
  snprintf(s->gid, sizeof(s->gid), "%s", d->gid.text);
  snprintf(s->gid_type, sizeof(s->gid_type), "%s",
           d->gid.type == MCP_GID_TYPE_ROCE_V2     ? "RoCE v2"
             : d->gid.type == MCP_GID_TYPE_ROCE_V1 ? "RoCE v1"
                                                   : "IB");
  s->gid_family = d->gid.family;
  gid_subnet(d, s->subnet, sizeof(s->subnet));
  s->pkey_index = d->pkey != 0 ? d->pkey_index : c->ib_pkey_index;
  s->pkey = d->pkey != 0 ? d->pkey : pkey_at(d->ibdev, d->port, s->pkey_index);
  s->pkey_full = s->pkey >= 0 && (s->pkey & MCP_PKEY_FULL_MEMBER) != 0;
  if (d->sl >= 0 && d->pkey != 0)
    s->sl = d->sl;
  if (d->tc >= 0 && d->pkey != 0)
    s->tc = d->tc;
}

/* ---- Encoding ------------------------------------------------------------------------- */

/* An X-macro list reads best as rows; clang-format 14 re-indents it differently on each
 * run (it is not a statement), so it is left as written. */
/* clang-format off */
#define FIELDS(X)                                                                            \
  X(host, STR) X(version, STR) X(oob, STR) X(dev, STR) X(port, INT) X(link_layer, STR)      \
  X(mtu, INT) X(mtu_cap, INT) X(netdev, STR) X(netdev_mtu, INT) X(rate_mbps, INT)          \
  X(gid_index, INT) X(gid, STR) X(gid_type, STR) X(gid_family, INT) X(subnet, STR)          \
  X(pkey, INT) X(pkey_index, INT) X(pkey_full, INT) X(sl, INT) X(tc, INT) X(timeout, INT)   \
  X(retry, INT) X(rnr_retry, INT) X(qps, INT) X(ok, INT)
/* clang-format on */

int doctor_summary_encode(const struct doctor_summary *s, char *buf, size_t len)
{
  size_t used = 0;
  int n;

#define PUT_STR(f) n = snprintf(buf + used, len - used, #f "=%s\n", s->f);
#define PUT_INT(f) n = snprintf(buf + used, len - used, #f "=%d\n", s->f);
#define PUT(f, kind)                                             \
  PUT_##kind(f) if (n < 0 || (size_t)n >= len - used) return -1; \
  used += (size_t)n;
  FIELDS(PUT)
#undef PUT
#undef PUT_INT
#undef PUT_STR
  return (int)used;
}

/* Truncating copy: a longer value from a newer peer is cut, not refused; what is not
 * printable ASCII becomes '?' (the report prints it). */
static void copy_str(char *dst, size_t len, const char *src)
{
  size_t n = strnlen(src, len - 1);

  memcpy(dst, src, n);
  dst[n] = '\0';
  mcp_text_make_printable(dst);
}

int doctor_summary_decode(const char *text, struct doctor_summary *s)
{
  const char *line = text;

  memset(s, 0, sizeof(*s));
  s->pkey = -1;
  s->sl = s->tc = -1;
  while (*line != '\0') {
    const char *eq = strchr(line, '='), *nl = strchr(line, '\n');
    char key[32], val[128];
    size_t klen, vlen;

    if (nl == NULL)
      nl = line + strlen(line);
    if (eq != NULL && eq < nl && (klen = (size_t)(eq - line)) < sizeof(key)) {
      vlen = (size_t)(nl - eq - 1);
      if (vlen >= sizeof(val))
        vlen = sizeof(val) - 1;
      memcpy(key, line, klen);
      key[klen] = '\0';
      memcpy(val, eq + 1, vlen);
      val[vlen] = '\0';
#define GET_STR(f) copy_str(s->f, sizeof(s->f), val);
#define GET_INT(f) s->f = atoi(val);
#define GET(f, kind)          \
  if (strcmp(key, #f) == 0) { \
    GET_##kind(f)             \
  } else
      FIELDS(GET) {}
#undef GET
#undef GET_INT
#undef GET_STR
    }
    line = *nl ? nl + 1 : nl;
  }
  return s->host[0] != '\0' ? 0 : -1;
}

/* ---- Comparison ------------------------------------------------------------------------ */

static const char *who(const struct doctor_summary *s, const struct doctor_summary *other, char *buf,
                       size_t len)
{
  if (strcmp(s->host, other->host) != 0)
    snprintf(buf, len, "host %.63s", s->host);
  else
    snprintf(buf, len, "host %.80s", s->oob[0] ? s->oob : s->host);
  return buf;
}

static int eff_mtu(const struct doctor_summary *s)
{
  return s->mtu_cap > 0 && s->mtu_cap < s->mtu ? s->mtu_cap : s->mtu;
}

static void sl_tc_text(int v, char *buf, size_t len)
{
  if (v < 0)
    snprintf(buf, len, "unset");
  else
    snprintf(buf, len, "%d", v);
}

void doctor_summary_compare(struct doctor_report *r, const struct doctor_summary *a,
                            const struct doctor_summary *b)
{
  char wa[96], wb[96], fix[512];
  int problems = 0;

  who(a, b, wa, sizeof(wa));
  who(b, a, wb, sizeof(wb));
  if (!a->ok || !b->ok) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "peer-device", !a->ok ? wa : wb,
               "run mcpnet-doctor on that host alone and fix what it reports",
               "%s has no usable port for mcpnet: nothing to compare", !a->ok ? wa : wb);
    return;
  }
  if (strcmp(a->version, b->version) != 0) {
    problems++;
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "version", NULL,
               "install the same mcpnet version on every node",
               "mcpnet %s on %s, %s on %s: the plugin refuses connections between versions", a->version, wa,
               b->version, wb);
  }
  if (strcmp(a->link_layer, b->link_layer) != 0) {
    problems++;
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "link-layer", NULL,
               "select devices of one link type on both hosts (NCCL_IB_HCA or MCPNET_RANK_MAP)",
               "link layers differ: %s on %s at %s, %s on %s at %s: they cannot talk", a->link_layer, a->dev,
               wa, b->link_layer, b->dev, wb);
    return; /* the rest compares like with like */
  }
  if (eff_mtu(a) != eff_mtu(b)) {
    const struct doctor_summary *lo = eff_mtu(a) < eff_mtu(b) ? a : b, *hi = lo == a ? b : a;

    problems++;
    if (lo->netdev[0] && hi->netdev_mtu > 0)
      snprintf(fix, sizeof(fix),
               "set the same MTU on both links (on %s: ip link set %s mtu %d, as on %s), "
               "or cap both with MCPNET_MTU=%d",
               lo == a ? wa : wb, lo->netdev, hi->netdev_mtu, lo == a ? wb : wa, eff_mtu(lo));
    else
      snprintf(fix, sizeof(fix), "set the same MTU on both links, or cap both with MCPNET_MTU=%d",
               eff_mtu(lo));
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_PEER, "mtu", NULL, fix,
               "MTU %d on %s (%s%s%s), %d on %s (%s%s%s): this connection runs at %d bytes", eff_mtu(lo),
               lo == a ? wa : wb, lo->dev, lo->netdev[0] ? ", netdev " : "", lo->netdev, eff_mtu(hi),
               hi == a ? wa : wb, hi->dev, hi->netdev[0] ? ", netdev " : "", hi->netdev, eff_mtu(lo));
  }
  if (a->rate_mbps != b->rate_mbps && a->rate_mbps > 0 && b->rate_mbps > 0) {
    problems++;
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_PEER, "rate", NULL,
               "check the slower link's negotiated speed (ethtool NETDEV or ibstat) and cabling",
               "rate %d Mb/s on %s (%s), %d Mb/s on %s (%s): the connection runs at the slower", a->rate_mbps,
               wa, a->dev, b->rate_mbps, wb, b->dev);
  }
  if (strcmp(a->link_layer, "Ethernet") == 0) {
    if (strcmp(a->gid_type, b->gid_type) != 0) {
      problems++;
      doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "gid-type", NULL,
                 "set NCCL_IB_ROCE_VERSION_NUM (or NCCL_IB_GID_INDEX) the same on every node",
                 "GID types differ: %s (GID %d) on %s, %s (GID %d) on %s", a->gid_type, a->gid_index, wa,
                 b->gid_type, b->gid_index, wb);
    } else if (a->gid_family != b->gid_family) {
      problems++;
      doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "gid-family", NULL,
                 "set NCCL_IB_ADDR_FAMILY (or NCCL_IB_GID_INDEX) the same on every node",
                 "GID address families differ: IPv%d (%s) on %s, IPv%d (%s) on %s", a->gid_family, a->gid, wa,
                 b->gid_family, b->gid, wb);
    } else if (a->subnet[0] && b->subnet[0] && strcmp(a->subnet, b->subnet) != 0) {
      int v1 = strcmp(a->gid_type, "RoCE v1") == 0;

      problems++;
      doctor_add(r, v1 ? DOCTOR_FAIL : DOCTOR_WARN, DOCTOR_SEC_PEER, "gid-subnet", NULL,
                 v1 ? "RoCE v1 is not routable: give both GIDs addresses in one subnet, or use RoCE v2"
                    : "make sure the route between the subnets carries RoCE (same PFC/ECN settings), or "
                      "pick GIDs in one subnet with NCCL_IB_ADDR_RANGE",
                 "GIDs in different subnets: %s (%s) on %s, %s (%s) on %s: traffic must be routed", a->gid,
                 a->subnet, wa, b->gid, b->subnet, wb);
    }
  }
  if (a->pkey >= 0 && b->pkey >= 0) {
    if ((a->pkey & MCP_PKEY_BASE_MASK) != (b->pkey & MCP_PKEY_BASE_MASK)) {
      problems++;
      doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "pkey", NULL,
                 "use the same partition on both hosts (MCPNET_TENANT_PKEY, or NCCL_IB_PKEY's index)",
                 "P_Keys differ: 0x%04x (index %d) on %s, 0x%04x (index %d) on %s: different partitions "
                 "cannot talk",
                 a->pkey, a->pkey_index, wa, b->pkey, b->pkey_index, wb);
    } else if (!mcp_pkey_can_talk(a->pkey_full, b->pkey_full)) {
      problems++;
      doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_PEER, "pkey", NULL,
                 "make at least one side a full member of the partition (ask the fabric admin)",
                 "P_Key 0x%04x on %s and 0x%04x on %s are both limited members: they cannot talk", a->pkey,
                 wa, b->pkey, wb);
    }
  }
  if (a->sl != b->sl || a->tc != b->tc) {
    char sa[16], sb[16], ta[16], tb[16];

    problems++;
    sl_tc_text(a->sl, sa, sizeof(sa));
    sl_tc_text(b->sl, sb, sizeof(sb));
    sl_tc_text(a->tc, ta, sizeof(ta));
    sl_tc_text(b->tc, tb, sizeof(tb));
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_PEER, "sl-tc", NULL,
               "set NCCL_IB_SL and NCCL_IB_TC the same on every node (the fabric's lossless class)",
               "service level / traffic class differ: SL %s, TC %s on %s; SL %s, TC %s on %s: the two "
               "directions travel in different classes",
               sa, ta, wa, sb, tb, wb);
  }
  if (a->timeout != b->timeout || a->retry != b->retry) {
    problems++;
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_PEER, "timeout", NULL,
               "use the same NCCL_IB_TIMEOUT and NCCL_IB_RETRY_CNT on every node",
               "NCCL_IB_TIMEOUT=%d, NCCL_IB_RETRY_CNT=%d on %s (at least %.1f s to error), %d, %d on "
               "%s (at least %.1f s): the hosts give up on each other at different times",
               a->timeout, a->retry, wa, mcp_param_time_to_error_s(a->timeout, a->retry), b->timeout,
               b->retry, wb, mcp_param_time_to_error_s(b->timeout, b->retry));
  }
  if (a->qps != b->qps) {
    problems++;
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_PEER, "qps", NULL,
               "set NCCL_IB_QPS_PER_CONNECTION the same on every node",
               "NCCL_IB_QPS_PER_CONNECTION=%d on %s, %d on %s", a->qps, wa, b->qps, wb);
  }
  if (problems == 0)
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_PEER, "compare", NULL, NULL,
               "both hosts agree: %s, MTU %d, %d Mb/s, %s%s%s, P_Key 0x%04x, timeout %d retry %d, mcpnet %s",
               a->link_layer, eff_mtu(a), a->rate_mbps, a->gid_type, a->subnet[0] ? " in " : "", a->subnet,
               a->pkey < 0 ? 0 : a->pkey, a->timeout, a->retry, a->version);
}
