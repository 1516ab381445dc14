/*
 * mcp_fabric_select.c - which ports a process asked for, and whether it got them.
 *
 * Two ways to ask: NCCL_IB_HCA (NCCL's list, prefix matching and all) for every
 * process, and MCPNET_RANK_MAP for one local rank, whose device names match exactly
 * and which replaces NCCL_IB_HCA for that rank. A pinned rank sees exactly its
 * devices, in the map's order. Strict mode (the default) turns "a requested device is
 * missing, down, unopenable or has no usable GID" into an init failure with one
 * message that lists every device found and why each was or was not used: a job that
 * would otherwise run on the wrong NIC, or fall back to another transport, stops at
 * the start with the reason in its log.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fabric/fabric_select.h"

struct text {
  char *buf;
  size_t len, used;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (t->len == 0 || t->used >= t->len - 1)
    return;
  va_start(ap, fmt);
  n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
  va_end(ap);
  if (n > 0)
    t->used += (size_t)n;
  if (t->used >= t->len)
    t->used = t->len - 1;
}

void mcp_fabric_exclude(struct mcp_fabric *fab, const char *ibdev, int port, int requested, const char *fmt,
                        ...)
{
  struct mcp_fabric_excluded *x;
  va_list ap;

  if (fab->nexcl == MCP_MAX_EXCLUDED)
    return;
  x = &fab->excl[fab->nexcl++];
  snprintf(x->name, sizeof(x->name), "%s", ibdev);
  x->port = port;
  x->requested = requested;
  va_start(ap, fmt);
  vsnprintf(x->reason, sizeof(x->reason), fmt, ap);
  va_end(ap);
}

void mcp_select_init(struct mcp_select *s, const char *hca_text, const struct mcp_match_list *hca,
                     const struct mcp_rankmap_entry *entry, int strict)
{
  memset(s, 0, sizeof(*s));
  s->hca_text = hca_text;
  if (hca != NULL)
    s->hca = *hca;
  s->entry = entry;
  s->strict = strict;
}

static int entry_port_matches(const struct mcp_rankmap_dev *d, const char *ibdev, int port)
{
  return strcmp(d->name, ibdev) == 0 && (port <= 0 || d->port < 0 || d->port == port);
}

int mcp_select_allows_dev(const struct mcp_select *s, const char *ibdev)
{
  int i;

  if (s->entry != NULL) {
    for (i = 0; i < s->entry->ndev; i++)
      if (entry_port_matches(&s->entry->dev[i], ibdev, 0))
        return 1;
    return 0;
  }
  if (s->hca.n == 0 || s->hca.exclude)
    return 1;
  for (i = 0; i < s->hca.n; i++)
    if (mcp_match_token(&s->hca, i, ibdev))
      return 1;
  return 0;
}

int mcp_select_allows_port(const struct mcp_select *s, const char *ibdev, int port)
{
  int i;

  if (s->entry == NULL)
    return mcp_match_allows(&s->hca, ibdev, port);
  for (i = 0; i < s->entry->ndev; i++)
    if (entry_port_matches(&s->entry->dev[i], ibdev, port))
      return 1;
  return 0;
}

int mcp_select_requested(const struct mcp_select *s, const char *ibdev, int port)
{
  int i;

  if (s->entry != NULL)
    return mcp_select_allows_port(s, ibdev, port);
  if (s->hca.n == 0 || s->hca.exclude)
    return 0;
  for (i = 0; i < s->hca.n; i++)
    if (mcp_match_token(&s->hca, i, ibdev) && (port <= 0 || s->hca.e[i].port < 0 || s->hca.e[i].port == port))
      return 1;
  return 0;
}

void mcp_select_rail_plane(const struct mcp_select *s, const char *ibdev, int port, int *rail, int *plane)
{
  int i = mcp_match_which(&s->hca, ibdev, port);

  *rail = i >= 0 ? s->hca.e[i].rail : -1;
  *plane = i >= 0 ? s->hca.e[i].plane : -1;
  if (s->entry != NULL && s->entry->rail >= 0)
    *rail = s->entry->rail;
  if (s->entry != NULL && s->entry->plane >= 0)
    *plane = s->entry->plane;
}

void mcp_select_by(const struct mcp_select *s, char *buf, size_t len)
{
  if (s->entry != NULL)
    snprintf(buf, len, "MCPNET_RANK_MAP entry '%s'", s->entry->text);
  else if (s->hca_text != NULL && s->hca_text[0] != '\0')
    snprintf(buf, len, "NCCL_IB_HCA=%s", s->hca_text);
  else
    snprintf(buf, len, "no device list");
}

/* Why name[:port] gave no usable port: the recorded exclusion, or its absence. */
static void why_missing(const struct mcp_fabric *fab, const char *name, int port, const char *const *visible,
                        int nvisible, struct text *t)
{
  int i, found = 0;

  for (i = 0; i < fab->nexcl; i++)
    if (strcmp(fab->excl[i].name, name) == 0 &&
        (port < 0 || fab->excl[i].port <= 0 || fab->excl[i].port == port)) {
      put(t, "%s%s", found ? "; " : "", fab->excl[i].reason);
      found = 1;
    }
  if (found)
    return;
  for (i = 0; i < nvisible; i++)
    if (strcmp(visible[i], name) == 0) {
      if (port > 0)
        put(t, "the device has no port %d", port);
      else
        put(t, "no usable port");
      return;
    }
  put(t, "no such device");
}

static int has_port(const struct mcp_fabric *fab, const char *ibdev, int port)
{
  int i;

  for (i = 0; i < fab->ndev; i++)
    if (strcmp(fab->dev[i].ibdev, ibdev) == 0 && (port < 0 || fab->dev[i].port == port))
      return 1;
  return 0;
}

static int names_visible(const char *name, const char *const *visible, int nvisible)
{
  int i;

  for (i = 0; i < nvisible; i++)
    if (strcmp(visible[i], name) == 0)
      return 1;
  return 0;
}

/* Pinned ports in the order the map names them (the rest, if any, after). */
static void order_as_map(const struct mcp_rankmap_entry *e, struct mcp_fabric *fab)
{
  struct mcp_net_dev sorted[MCP_MAX_NET_DEVS];
  int taken[MCP_MAX_NET_DEVS] = {0};
  int i, j, n = 0;

  for (i = 0; i < e->ndev; i++)
    for (j = 0; j < fab->ndev; j++)
      if (!taken[j] && entry_port_matches(&e->dev[i], fab->dev[j].ibdev, fab->dev[j].port)) {
        sorted[n++] = fab->dev[j];
        taken[j] = 1;
      }
  for (j = 0; j < fab->ndev; j++)
    if (!taken[j])
      sorted[n++] = fab->dev[j];
  memcpy(fab->dev, sorted, (size_t)n * sizeof(sorted[0]));
}

int mcp_select_check(const struct mcp_select *s, struct mcp_fabric *fab, const char *const *visible,
                     int nvisible, char *problems, size_t len)
{
  struct text t = {problems, len, 0};
  int i, j, n = 0;

  if (len > 0)
    problems[0] = '\0';
  if (s->entry != NULL) {
    order_as_map(s->entry, fab);
    for (i = 0; i < s->entry->ndev; i++) {
      const struct mcp_rankmap_dev *d = &s->entry->dev[i];
      if (has_port(fab, d->name, d->port))
        continue;
      put(&t, "%s%s", n++ ? "; " : "", d->name);
      if (d->port > 0)
        put(&t, ":%d", d->port);
      put(&t, " (pinned by MCPNET_RANK_MAP entry '%s'): ", s->entry->text);
      why_missing(fab, d->name, d->port, visible, nvisible, &t);
    }
    return n;
  }
  if (s->hca.n == 0 || s->hca.exclude)
    return 0;
  for (i = 0; i < s->hca.n; i++) {
    int matched = 0, usable = 0;
    for (j = 0; j < nvisible; j++) {
      if (!mcp_match_token(&s->hca, i, visible[j]))
        continue;
      matched++;
      usable += has_port(fab, visible[j], s->hca.e[i].port);
    }
    /* A prefix that catches more devices than meant is NCCL's rule, not an error: all of
     * them are used (mcp_select_ambiguous words the WARN). The device the token spells
     * out in full is still named exactly, so strict mode holds for it. */
    if (matched == 0) {
      put(&t, "%sNCCL_IB_HCA=%s: '%s' matches no device", n++ ? "; " : "", s->hca_text, s->hca.e[i].name);
    } else if (usable > 0 && matched > 1 && names_visible(s->hca.e[i].name, visible, nvisible) &&
               !has_port(fab, s->hca.e[i].name, s->hca.e[i].port)) {
      put(&t, "%s%s", n++ ? "; " : "", s->hca.e[i].name);
      if (s->hca.e[i].port > 0)
        put(&t, ":%d", s->hca.e[i].port);
      put(&t, " (listed in NCCL_IB_HCA): ");
      why_missing(fab, s->hca.e[i].name, s->hca.e[i].port, visible, nvisible, &t);
    } else if (usable == 0) {
      put(&t, "%s%s", n++ ? "; " : "", s->hca.e[i].name);
      if (s->hca.e[i].port > 0)
        put(&t, ":%d", s->hca.e[i].port);
      put(&t, " (listed in NCCL_IB_HCA): ");
      for (j = 0; j < nvisible; j++)
        if (mcp_match_token(&s->hca, i, visible[j])) {
          why_missing(fab, visible[j], s->hca.e[i].port, visible, nvisible, &t);
          break;
        }
    }
  }
  return n;
}

void mcp_select_report(const struct mcp_fabric *fab, char *buf, size_t len)
{
  struct text t = {buf, len, 0};
  int i;

  if (len > 0)
    buf[0] = '\0';
  for (i = 0; i < fab->ndev; i++) {
    const struct mcp_net_dev *d = &fab->dev[i];
    put(&t, "%s%s port %d: used", t.used ? "; " : "", d->ibdev, d->port);
    if (d->gid.text[0] != '\0')
      put(&t, " (GID %d %s on %s)", d->gid.index, d->gid.text,
          d->gid.netdev[0] ? d->gid.netdev : "no netdev");
  }
  for (i = 0; i < fab->nexcl; i++) {
    const struct mcp_fabric_excluded *x = &fab->excl[i];
    if (x->port > 0)
      put(&t, "%s%s port %d: %s", t.used ? "; " : "", x->name, x->port, x->reason);
    else
      put(&t, "%s%s: %s", t.used ? "; " : "", x->name, x->reason);
  }
  if (t.used == 0)
    put(&t, "no RDMA device");
}

int mcp_select_ambiguous(const struct mcp_select *s, const char *const *visible, int nvisible, char *buf,
                         size_t len)
{
  struct text t = {buf, len, 0};
  char which[512];
  int i, n = 0;

  if (len > 0)
    buf[0] = '\0';
  if (s->entry != NULL || s->hca.exact || s->hca.exclude)
    return 0;
  for (i = 0; i < s->hca.n; i++) {
    if (mcp_hca_token_devices(&s->hca, i, visible, nvisible, which, sizeof(which)) < 2)
      continue;
    if (n++ == 0)
      put(&t, "NCCL_IB_HCA=%s:", s->hca_text);
    put(&t, "%s '%s' matches several devices (%s)", n > 1 ? ";" : "", s->hca.e[i].name, which);
  }
  if (n > 0)
    put(&t,
        ". mcpnet uses all of them, as NCCL does (prefix matching); start the list with '=' "
        "to match names exactly");
  return n;
}
