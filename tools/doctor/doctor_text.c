/*
 * doctor_text.c - the report for people: one section per concern, the facts first
 * (devices, ports, GIDs, what each local rank gets, every parameter and where it came
 * from), then that section's findings, each "[ OK ]", "[WARN]" or "[FAIL]" with its
 * remedy on the next line, and a last line with the counts and the exit status. The
 * findings are the same records the JSON output lists.
 */
#include <stdio.h>
#include <string.h>

#include "doctor.h"

static void findings(const struct doctor_report *r, enum doctor_section sec, FILE *f)
{
  static const char *tag[] = {"[ OK ]", "[WARN]", "[FAIL]"};

  for (int i = 0; i < r->nfind; i++) {
    const struct doctor_finding *x = &r->find[i];

    if (x->section != sec)
      continue;
    fprintf(f, "  %s %s\n", tag[x->level], x->message);
    if (x->remedy[0] != '\0' && x->level != DOCTOR_OK)
      fprintf(f, "         fix: %s\n", x->remedy);
  }
}

static void devices(const struct doctor_report *r, FILE *f)
{
  fputs("\nRDMA devices\n", f);
  for (int i = 0; i < r->ndev; i++) {
    const struct doctor_dev *d = &r->dev[i];

    fprintf(f, "  %s (driver %s%s%s): %s", d->name, d->driver[0] ? d->driver : "unknown",
            d->uverbs[0] ? ", " : "", d->uverbs, d->opens ? "opens" : "does not open");
    if (!d->opens && d->open_err[0])
      fprintf(f, " (%s)", d->open_err);
    fputc('\n', f);
    for (int k = 0; k < d->nport; k++) {
      const struct doctor_port *p = &d->port[k];

      fprintf(f, "    port %d: %s (%s), %s, %s, MTU %d (max %d)", p->num, p->state, p->phys_state,
              p->link_layer, p->rate[0] ? p->rate : "rate unknown", p->active_mtu, p->max_mtu);
      if (p->ethernet) {
        if (p->netdev[0])
          fprintf(f, ", netdev %s here (MTU %d)", p->netdev, p->netdev_mtu);
        else if (p->netlink_rc == 0 && p->ngid_ours > 0)
          fprintf(f, ", netdev not in this namespace; ours: GIDs on %s (stacked on it here)", p->gid_netdev);
        else if (p->netlink_rc == 0)
          fprintf(f, ", netdev not in this namespace");
        else
          fprintf(f, ", netdev unknown (no RDMA netlink)");
      } else {
        fprintf(f, ", LID %d", p->lid);
      }
      fputc('\n', f);
      for (int g = 0; g < p->ngid; g++) {
        const struct doctor_gid *x = &p->gid[g];

        fprintf(f, "      GID %-3d %-28s %-8s %-10s %s\n", x->index, x->gid, x->type,
                x->netdev[0] ? x->netdev : "-",
                !x->netdev[0] ? ""
                  : x->in_ns  ? (x->up ? "this namespace" : "this namespace, down")
                              : "another namespace");
      }
      if (p->gid_skipped > 0)
        fprintf(f, "      (%d of %d GID slots empty or not ours to read)\n", p->gid_skipped, p->gid_slots);
      fprintf(f, "      P_Keys: %s\n", p->pkeys[0] ? p->pkeys : "none");
    }
  }
  findings(r, DOCTOR_SEC_DEVICES, f);
}

static void selection(const struct doctor_report *r, FILE *f)
{
  fputs("\nWhat mcpnet uses (the plugin's own selection)\n", f);
  fprintf(f, "  rank map: %s; this process's local rank: ", r->cfg.rank_map ? r->cfg.rank_map : "unset");
  if (r->own_rank >= 0)
    fprintf(f, "%d\n", r->own_rank);
  else
    fputs("none (LOCAL_RANK, SLURM_LOCALID, ... unset)\n", f);
  for (int i = 0; i < r->nsel; i++) {
    const struct doctor_selection *s = r->sel[i];

    if (s->lo < 0)
      fputs("  this process", f);
    else if (s->lo == s->hi)
      fprintf(f, "  local rank %d", s->lo);
    else
      fprintf(f, "  local ranks %d-%d", s->lo, s->hi);
    if (s->fab.placement[0])
      fprintf(f, " (%s)", s->fab.placement);
    fputs(s->rc == 0 ? ":\n" : ": nothing usable\n", f);
    for (int k = 0; k < s->fab.ndev; k++) {
      const struct mcp_net_dev *d = &s->fab.dev[k];

      fprintf(f, "    uses %s port %d: ", d->ibdev, d->port);
      if (d->link_layer == 2)
        fprintf(f, "GID %d %s (%s, netdev %s), ", d->gid.index, d->gid.text,
                d->gid.type == MCP_GID_TYPE_ROCE_V2 ? "RoCE v2" : "RoCE v1", d->gid.netdev);
      else
        fprintf(f, "LID %u, ", d->lid);
      if (d->pkey != 0)
        fprintf(f, "P_Key 0x%04x (index %d), ", d->pkey, d->pkey_index);
      fprintf(f, "MTU %d, %d Mb/s\n", mcp_fabric_mtu_bytes(d->active_mtu), d->speed_mbps);
    }
    for (int k = 0; k < s->fab.nexcl; k++) {
      const struct mcp_fabric_excluded *x = &s->fab.excl[k];

      if (x->port > 0)
        fprintf(f, "    not %s:%d: %s\n", x->name, x->port, x->reason);
      else
        fprintf(f, "    not %s: %s\n", x->name, x->reason);
    }
  }
  if (r->ranks_capped)
    fprintf(f, "  (only the first %d ranks of the rank map were checked)\n", DOCTOR_RANKS_CHECKED);
  findings(r, DOCTOR_SEC_SELECTION, f);
}

static void config(const struct doctor_report *r, FILE *f)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char value[512], where[256];

  fputs("\nConfiguration (default < MCPNET_CONFIG file < NCCL's configuration files < environment)\n", f);
  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_origin *o = &r->cfg.origin[defs[i].id];

    mcp_param_format(&r->cfg, &defs[i], value, sizeof(value));
    mcp_param_format_origin(o, where, sizeof(where));
    fprintf(f, "  %-30s %-16s %s%s%s%s\n", defs[i].name, value, where,
            o->key != NULL && strcmp(o->key, defs[i].name) != 0 ? ", as " : "",
            o->key != NULL && strcmp(o->key, defs[i].name) != 0 ? o->key : "",
            o->rejected ? ", REFUSED: the default applies" : "");
  }
  findings(r, DOCTOR_SEC_CONFIG, f);
}

static void summary_line(const char *label, const struct doctor_summary *s, FILE *f)
{
  fprintf(f, "  %-12s %s port %d, %s, MTU %d", label, s->dev[0] ? s->dev : "-", s->port, s->link_layer,
          s->mtu);
  if (s->netdev[0])
    fprintf(f, " (netdev %s MTU %d)", s->netdev, s->netdev_mtu);
  fprintf(f, ", %d Mb/s", s->rate_mbps);
  if (s->gid[0])
    fprintf(f, ", GID %d %s %s%s%s", s->gid_index, s->gid, s->gid_type, s->subnet[0] ? " in " : "",
            s->subnet);
  if (s->pkey >= 0)
    fprintf(f, ", P_Key 0x%04x", s->pkey);
  fprintf(f, ", SL %d TC %d, timeout %d retry %d, mcpnet %s\n", s->sl, s->tc, s->timeout, s->retry,
          s->version);
}

static void peer(const struct doctor_report *r, FILE *f)
{
  const struct doctor_pair_result *p = &r->pair;
  char label[80];

  fprintf(f, "\nTwo hosts (%s)\n", r->o->listen ? "--listen" : "--peer");
  if (p->peer_addr[0])
    fprintf(f, "  control connection with %s\n", p->peer_addr);
  if (p->plugin_path[0])
    fprintf(f, "  plugin %s\n", p->plugin_path);
  if (p->have_peer) {
    snprintf(label, sizeof(label), "%s:", p->local.host);
    summary_line(label, &p->local, f);
    snprintf(label, sizeof(label), "%s:", p->peer.host);
    summary_line(label, &p->peer, f);
  }
  findings(r, DOCTOR_SEC_PEER, f);
}

void doctor_text_write(const struct doctor_report *r, FILE *f)
{
  fprintf(f, "mcpnet-doctor %s on %s\n", MCPNET_VERSION, r->host);
  devices(r, f);
  selection(r, f);
  config(r, f);
  fputs("\nHost\n", f);
  findings(r, DOCTOR_SEC_HOST, f);
  if (r->pair.ran)
    peer(r, f);
  fprintf(f, "\n%d OK, %d WARN, %d FAIL: exit status %d\n", doctor_count(r, DOCTOR_OK),
          doctor_count(r, DOCTOR_WARN), doctor_count(r, DOCTOR_FAIL), doctor_exit_status(r));
}
