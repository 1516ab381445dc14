/*
 * doctor_select.c - what mcpnet would use, per local rank: the plugin's own selection
 * (mcp_fabric_discover_rank, the code init runs) asked once for this process, or, when
 * MCPNET_RANK_MAP is set, for every rank the map names (identical neighbours
 * collapsed into one range). Each answer keeps the ports chosen and every device or
 * port left out with its reason; a rank left without a port, or denied a device it
 * asked for, is a FAIL, because that is exactly where the job would stop (or, without
 * NCCL_NET=MCP, silently fall back).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "core/rankmap.h"

static const char *env_get(void *arg, const char *name)
{
  (void)arg;
  return getenv(name);
}

static struct doctor_selection *run_one(struct doctor_report *r, int rank, const char *source)
{
  struct doctor_selection *s = calloc(1, sizeof(*s));

  if (s == NULL)
    return NULL;
  s->lo = s->hi = rank;
  s->rank_source = source;
  doctor_log_capture(s->warn, sizeof(s->warn));
  s->rc = mcp_fabric_discover_rank(&s->fab, &r->cfg, rank, source);
  doctor_log_release();
  return s;
}

static int same_choice(const struct doctor_selection *a, const struct doctor_selection *b)
{
  if (a->rc != b->rc || a->fab.ndev != b->fab.ndev || strcmp(a->fab.placement, b->fab.placement) != 0 ||
      a->fab.nexcl != b->fab.nexcl)
    return 0;
  for (int i = 0; i < a->fab.ndev; i++) {
    const struct mcp_net_dev *x = &a->fab.dev[i], *y = &b->fab.dev[i];

    if (strcmp(x->name, y->name) != 0 || x->gid.index != y->gid.index || x->pkey != y->pkey ||
        x->sl != y->sl || x->tc != y->tc)
      return 0;
  }
  return 1;
}

static void keep(struct doctor_report *r, struct doctor_selection *s)
{
  struct doctor_selection *prev = r->nsel > 0 ? r->sel[r->nsel - 1] : NULL;

  if (s == NULL)
    return;
  if (prev != NULL && prev->lo >= 0 && s->lo == prev->hi + 1 && same_choice(prev, s)) {
    prev->hi = s->hi;
    mcp_fabric_release(&s->fab);
    free(s);
    return;
  }
  if (r->nsel == DOCTOR_MAX_SELECTIONS) {
    mcp_fabric_release(&s->fab);
    free(s);
    r->ranks_capped = 1;
    return;
  }
  r->sel[r->nsel++] = s;
}

static int covered(const struct mcp_rankmap *map, int rank) { return mcp_rankmap_find(map, rank) != NULL; }

static void ranks_label(const struct doctor_selection *s, char *buf, size_t len)
{
  if (s->lo < 0)
    snprintf(buf, len, "this process (no local rank)");
  else if (s->lo == s->hi)
    snprintf(buf, len, "local rank %d", s->lo);
  else
    snprintf(buf, len, "local ranks %d-%d", s->lo, s->hi);
}

static void use_text(const struct mcp_net_dev *d, char *buf, size_t len)
{
  if (d->link_layer == 2 /* Ethernet */)
    snprintf(buf, len, "%s port %d (GID %d %s, %s, netdev %s)", d->ibdev, d->port, d->gid.index, d->gid.text,
             d->gid.type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : "RoCE v1",
             d->gid.netdev[0] ? d->gid.netdev : "none");
  else
    snprintf(buf, len, "%s port %d (InfiniBand, LID %u)", d->ibdev, d->port, d->lid);
}

/* The exclusions of devices asked for (requested) or of every device not merely
 * left unselected, "; "-separated. Returns how many. */
static int excluded_text(const struct doctor_selection *s, int requested, char *buf, size_t len)
{
  size_t w = 0;
  int n = 0;

  buf[0] = '\0';
  for (int i = 0; i < s->fab.nexcl && w + 2 < len; i++) {
    const struct mcp_fabric_excluded *x = &s->fab.excl[i];
    int k;

    if (requested ? !x->requested : strncmp(x->reason, "not selected", 12) == 0)
      continue;
    if (x->port > 0)
      k = snprintf(buf + w, len - w, "%s%s port %d: %s", w ? "; " : "", x->name, x->port, x->reason);
    else
      k = snprintf(buf + w, len - w, "%s%s: %s", w ? "; " : "", x->name, x->reason);
    w += k > 0 ? (size_t)k : 0;
    n++;
  }
  return n;
}

static void selection_findings(struct doctor_report *r, const struct doctor_selection *s)
{
  char who[64], uses[1024] = "", one[256];
  size_t used = 0;
  int i;

  ranks_label(s, who, sizeof(who));
  if (s->rc != 0) {
    char why[1024] = "";

    /* Say why in the fewest words: the devices it asked for, else every device that
     * could have served, else the plugin's own message. */
    if (excluded_text(s, 1, why, sizeof(why)) == 0 && excluded_text(s, 0, why, sizeof(why)) == 0)
      snprintf(why, sizeof(why), "%s", s->warn[0] ? s->warn : "no usable port");
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_SELECTION, "selection", who,
               "fix the reason given for the device it should use (see the devices above), or "
               "correct NCCL_IB_HCA / MCPNET_RANK_MAP; NCCL_NET=MCP makes such a job stop instead "
               "of falling back",
               "%s: mcpnet's init would fail: %s", who, why);
    return;
  }
  for (i = 0; i < s->fab.ndev && used + 2 < sizeof(uses); i++) {
    int n;

    use_text(&s->fab.dev[i], one, sizeof(one));
    n = snprintf(uses + used, sizeof(uses) - used, "%s%s", i ? ", " : "", one);
    used += n > 0 ? (size_t)n : 0;
  }
  doctor_add(r, DOCTOR_OK, DOCTOR_SEC_SELECTION, "selection", who, NULL, "%s %s %s", who,
             s->lo >= 0 && s->lo != s->hi ? "use" : "uses", uses);
  for (i = 0; i < s->fab.nexcl; i++) {
    const struct mcp_fabric_excluded *x = &s->fab.excl[i];

    if (x->requested)
      doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_SELECTION, "requested", who,
                 "fix the reason, or stop asking for it (MCPNET_STRICT=1 turns this into an init failure)",
                 "%s asked for %s%s%.0d but goes without it: %s", who, x->name, x->port > 0 ? ":" : "",
                 x->port, x->reason);
  }
  if (s->warn[0] != '\0')
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_SELECTION, "discovery", who,
               "read the message: it names the setting involved", "%s: %s", who, s->warn);
}

void doctor_select_run(struct doctor_report *r)
{
  static const struct mcp_rankmap no_map;
  const struct mcp_rankmap *map = &no_map;
  const char *source = NULL;
  char err[256];
  int own, checked = 0;

  if (r->verbs_err[0] != '\0' || r->ndev == 0)
    return; /* devices already says why nothing can be selected */
  own = mcp_local_rank(r->cfg.local_rank, env_get, NULL, &source, err, sizeof(err));
  if (own == -EINVAL)
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_SELECTION, "local-rank", source, "fix the variable named", "%s",
               err);
  if (own < 0)
    own = -1; /* none set, or not a rank */
  r->own_rank = own;
  /* Parsed by the loader; a bad map was refused there (the configuration section says so). */
  if (r->cfg.rank_map_parsed != NULL)
    map = r->cfg.rank_map_parsed;
  if (map->n == 0) {
    keep(r, run_one(r, own, source));
  } else {
    for (int e = 0; e < map->n; e++) {
      for (int rank = map->e[e].lo; rank <= map->e[e].hi; rank++) {
        if (checked++ == DOCTOR_RANKS_CHECKED) {
          r->ranks_capped = 1;
          break;
        }
        keep(r, run_one(r, rank, "MCPNET_RANK_MAP"));
      }
    }
    /* This process's own rank, when the map does not cover it: the plugin would fail. */
    if (own >= 0 && !covered(map, own))
      keep(r, run_one(r, own, source));
  }
  for (int i = 0; i < r->nsel; i++)
    selection_findings(r, r->sel[i]);
}
