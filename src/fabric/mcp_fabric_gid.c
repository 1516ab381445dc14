/*
 * mcp_fabric_gid.c - choosing the GID a RoCE port talks from.
 *
 * The wrong GID index is the classic cause of "status 12" on RoCE: a RoCE v1 or
 * link-local entry, an address of another network namespace, or an IPv6 entry where
 * the fabric routes IPv4. The choice here is a pure function of the port's GID table
 * and the configuration, so unit tests drive it with fixture tables.
 *
 * After a link flap the kernel rebuilds the table and may put our GID back at another
 * index: mcp_fabric_gid_refind finds it again by address, with the namespace rule the
 * choice was made by. That one reads sysfs and asks netlink, so conn runs it on a setup
 * thread only (mcp_conn_qp.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "fabric/fabric_gid.h"
#include "fabric/fabric_netns.h"
#include "fabric/fabric_sysfs.h"

static int gid_is_zero(const uint8_t raw[16])
{
  static const uint8_t zero[16];
  return memcmp(raw, zero, 16) == 0;
}

static int gid_is_link_local(const uint8_t raw[16]) { return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80; }

int mcp_gid_family(const uint8_t raw[16])
{
  static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(raw, v4mapped, 12) == 0 ? 4 : 6;
}

void mcp_gid_format(const uint8_t raw[16], char *buf, size_t len)
{
  if (mcp_gid_family(raw) == 4)
    inet_ntop(AF_INET, raw + 12, buf, (socklen_t)len);
  else
    inet_ntop(AF_INET6, raw, buf, (socklen_t)len);
}

int mcp_gid_in_range(const uint8_t raw[16], const struct mcp_gid_range *range)
{
  int bits = range->family == 4 ? range->bits + 96 : range->bits;
  int i;

  if (mcp_gid_family(raw) != range->family)
    return 0;
  for (i = 0; i < bits; i++) {
    int mask = 0x80 >> (i % 8);
    if ((raw[i / 8] & mask) != (range->raw[i / 8] & mask))
      return 0;
  }
  return 1;
}

/* Why an entry cannot be used at all, or NULL when it can. */
static const char *gid_unusable(const struct mcp_gid_entry *e)
{
  if (gid_is_zero(e->raw))
    return "empty";
  if (e->netdev[0] != '\0' && !e->netdev_in_ns)
    return e->not_ours != NULL ? e->not_ours : "its netdev is not in this network namespace";
  if (e->netdev[0] != '\0' && !e->netdev_up)
    return "its netdev is down";
  return NULL;
}

static void choice_fill(struct mcp_gid_choice *c, const struct mcp_gid_entry *e, const char *why)
{
  memset(c, 0, sizeof(*c));
  c->index = e->index;
  memcpy(c->raw, e->raw, 16);
  c->type = e->type;
  c->family = mcp_gid_family(e->raw);
  snprintf(c->netdev, sizeof(c->netdev), "%s", e->netdev);
  mcp_gid_format(e->raw, c->text, sizeof(c->text));
  snprintf(c->why, sizeof(c->why), "%s", why);
}

/* The readable entries in brief, for messages that reject a choice:
 * "0 fe80::1 v1 eth0, 1 fe80::1 v2 eth0, 3 ::ffff:10.0.0.1 v2 eth0 (other namespace)". */
static void table_brief(const struct mcp_gid_entry *tab, int n, char *buf, size_t len)
{
  size_t used = 0;
  int i, w;

  if (len == 0)
    return;
  buf[0] = '\0';
  for (i = 0; i < n && used < len - 1; i++) {
    char text[64];
    const char *bad = gid_unusable(&tab[i]);
    if (gid_is_zero(tab[i].raw))
      continue;
    mcp_gid_format(tab[i].raw, text, sizeof(text));
    w = snprintf(buf + used, len - used, "%s%d %s %s %s%s%s%s", used ? ", " : "", tab[i].index, text,
                 tab[i].type == MCP_GID_TYPE_ROCE_V2     ? "v2"
                   : tab[i].type == MCP_GID_TYPE_ROCE_V1 ? "v1"
                                                         : "IB",
                 tab[i].netdev[0] ? tab[i].netdev : "-", bad ? " (" : "", bad ? bad : "", bad ? ")" : "");
    used += w > 0 ? (size_t)w : 0;
  }
  if (used == 0)
    snprintf(buf, len, "no readable entry");
}

static int choose_index(const struct mcp_gid_entry *tab, int n, const struct mcp_gid_policy *pol,
                        int want_type, struct mcp_gid_choice *choice, char *err, size_t errlen)
{
  const char *src = pol->index_source != NULL ? pol->index_source : "NCCL_IB_GID_INDEX";
  char brief[768], why[96];
  int i;

  table_brief(tab, n, brief, sizeof(brief));
  for (i = 0; i < n; i++) {
    const char *bad;
    if (tab[i].index != pol->index)
      continue;
    bad = gid_unusable(&tab[i]);
    if (bad != NULL) {
      snprintf(err, errlen, "GID index %d cannot be used: %s (set by %s). The port's GIDs: %s", pol->index,
               bad, src, brief);
      return -ENOENT;
    }
    snprintf(why, sizeof(why), "set by %s", src);
    choice_fill(choice, &tab[i], why);
    /* NCCL takes an explicit index as given whatever NCCL_IB_ROCE_VERSION_NUM says (the
     * version only steers its automatic choice), so a job NCCL runs runs here too. Still
     * worth a WARN: the peers must agree on the version, and a mixed fleet does not. */
    if (tab[i].type != want_type &&
        (tab[i].type == MCP_GID_TYPE_ROCE_V1 || tab[i].type == MCP_GID_TYPE_ROCE_V2)) {
      snprintf(err, errlen,
               "GID index %d is RoCE v%d, not the v%d NCCL_IB_ROCE_VERSION_NUM=%d asks for; "
               "used as given (set by %s), as NCCL does. Every peer must use the same RoCE version. "
               "The port's GIDs: %s",
               pol->index, tab[i].type == MCP_GID_TYPE_ROCE_V1 ? 1 : 2, pol->roce_version == 1 ? 1 : 2,
               pol->roce_version == 1 ? 1 : 2, src, brief);
      return 1;
    }
    return 0;
  }
  snprintf(err, errlen,
           "GID index %d is empty or not described to this namespace (set by %s). The port's "
           "GIDs: %s",
           pol->index, src, brief);
  return -ENOENT;
}

int mcp_gid_choose(const struct mcp_gid_entry *tab, int n, const struct mcp_gid_policy *pol,
                   struct mcp_gid_choice *choice, char *err, size_t errlen)
{
  int want_type = pol->roce_version == 1 ? MCP_GID_TYPE_ROCE_V1 : MCP_GID_TYPE_ROCE_V2;
  int best = -1, best_score = -1;
  char why[128];
  int i;

  if (pol->index >= 0)
    return choose_index(tab, n, pol, want_type, choice, err, errlen);
  for (i = 0; i < n; i++) {
    const struct mcp_gid_entry *e = &tab[i];
    int score;

    if (gid_unusable(e) != NULL || gid_is_link_local(e->raw))
      continue;
    if (pol->has_range && !mcp_gid_in_range(e->raw, &pol->range))
      continue;
    if (pol->has_address && memcmp(e->raw, pol->address, 16) != 0)
      continue;
    /* Preference: the wanted RoCE version, then the wanted family, then the subnet of
     * the out-of-band interface, then the lowest index. */
    score = (e->type == want_type) * 8 + (mcp_gid_family(e->raw) == pol->family) * 4 +
      (pol->has_oob_subnet && mcp_gid_in_range(e->raw, &pol->oob_subnet)) * 2;
    if (score > best_score) {
      best = i;
      best_score = score;
    }
  }
  if (best < 0) {
    char brief[768];
    table_brief(tab, n, brief, sizeof(brief));
    snprintf(err, errlen,
             "no usable GID: every entry is empty, link-local, of another network namespace, "
             "on a down netdev%s%s%s. The port's GIDs: %s",
             pol->has_range ? " or outside " : "",
             pol->has_range ? (pol->range_source ? pol->range_source : "NCCL_IB_ADDR_RANGE") : "",
             pol->has_address ? " or not the requested address (MCPNET_RANK_MAP gid=)" : "", brief);
    return -ENOENT;
  }
  if (pol->has_address)
    snprintf(why, sizeof(why), "pinned by address (MCPNET_RANK_MAP gid=), %s",
             tab[best].type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : "RoCE v1");
  else
    snprintf(why, sizeof(why), "automatic: %s, IPv%d%s%s%s",
             tab[best].type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : "RoCE v1", mcp_gid_family(tab[best].raw),
             (best_score & 2) ? ", in the out-of-band subnet" : "", pol->has_range ? ", inside " : "",
             pol->has_range ? (pol->range_source ? pol->range_source : "NCCL_IB_ADDR_RANGE") : "");
  choice_fill(choice, &tab[best], why);
  return 0;
}

static mcp_fabric_gid_refind_fn refind_hook;

void mcp_fabric_gid_test_set_refind(mcp_fabric_gid_refind_fn fn) { refind_hook = fn; }

int mcp_fabric_gid_refind(const struct mcp_net_dev *d, struct ibv_context *ctx, const char *root,
                          int index_in_use)
{
  struct mcp_sysfs_dev sys;
  const struct mcp_sysfs_port *p;
  struct mcp_gid_entry *rows;
  struct mcp_netns_port info;
  char err[256];
  int i, n, rc, index = -ENOENT;

  if (d->link_layer != IBV_LINK_LAYER_ETHERNET)
    return index_in_use; /* InfiniBand: GID 0, routed by LID */
  if (refind_hook != NULL)
    return refind_hook(d, index_in_use);
  memset(&sys, 0, sizeof(sys));
  rc = mcp_sysfs_dev_read(root, d->ibdev, &sys, err, sizeof(err));
  if (rc != 0) {
    index = rc;
  } else if ((p = mcp_sysfs_port_find(&sys, d->port)) != NULL && p->ngid > 0) {
    rows = calloc((size_t)p->ngid, sizeof(*rows));
    if (rows == NULL) {
      index = -ENOMEM;
    } else {
      n = mcp_netns_port_rows(ctx, root, d->ibdev, p, rows, p->ngid, &info);
      for (i = 0; i < n && index < 0; i++)
        if (rows[i].netdev_in_ns && memcmp(rows[i].raw, d->gid.raw, 16) == 0 && rows[i].type == d->gid.type)
          index = rows[i].index;
      free(rows);
    }
  }
  mcp_sysfs_dev_free(&sys);
  return index;
}
