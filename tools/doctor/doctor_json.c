/*
 * doctor_json.c - the report for machines (--json): the same devices, selections,
 * parameters, two-host figures and findings as the text, as one JSON object. Strings
 * are escaped by mcp_json_str (tools/drive), as in every JSON the tools write; numbers
 * that are unknown are written as null.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"
#include "mcp_json.h"

static void kv_str(FILE *f, const char *key, const char *value, int comma)
{
  mcp_json_str(f, key);
  fputs(": ", f);
  mcp_json_str(f, value);
  if (comma)
    fputs(", ", f);
}

static void kv_int(FILE *f, const char *key, long long value, int comma)
{
  fprintf(f, "\"%s\": %lld%s", key, value, comma ? ", " : "");
}

static void kv_num(FILE *f, const char *key, double value, int comma)
{
  if (isfinite(value))
    fprintf(f, "\"%s\": %.6g%s", key, value, comma ? ", " : "");
  else
    fprintf(f, "\"%s\": null%s", key, comma ? ", " : "");
}

static void kv_bool(FILE *f, const char *key, int value, int comma)
{
  fprintf(f, "\"%s\": %s%s", key, value ? "true" : "false", comma ? ", " : "");
}

static void devices(const struct doctor_report *r, FILE *f)
{
  fputs("  \"devices\": [", f);
  for (int i = 0; i < r->ndev; i++) {
    const struct doctor_dev *d = &r->dev[i];

    fputs(i ? ",\n    {" : "\n    {", f);
    kv_str(f, "name", d->name, 1);
    kv_str(f, "driver", d->driver, 1);
    kv_str(f, "uverbs", d->uverbs, 1);
    kv_bool(f, "opens", d->opens, 1);
    kv_str(f, "open_error", d->open_err, 1);
    fputs("\"ports\": [", f);
    for (int k = 0; k < d->nport; k++) {
      const struct doctor_port *p = &d->port[k];

      fputs(k ? ",\n      {" : "\n      {", f);
      kv_int(f, "port", p->num, 1);
      kv_str(f, "state", p->state, 1);
      kv_str(f, "phys_state", p->phys_state, 1);
      kv_str(f, "link_layer", p->link_layer, 1);
      kv_str(f, "rate", p->rate, 1);
      kv_int(f, "rate_mbps", p->rate_mbps, 1);
      kv_int(f, "active_mtu", p->active_mtu, 1);
      kv_int(f, "max_mtu", p->max_mtu, 1);
      kv_int(f, "lid", p->lid, 1);
      kv_str(f, "netdev", p->netdev, 1);
      kv_bool(f, "netlink", p->netlink_rc == 0, 1);
      kv_int(f, "netdev_mtu", p->netdev_mtu, 1);
      kv_str(f, "pkeys", p->pkeys, 1);
      kv_int(f, "gid_slots", p->gid_slots, 1);
      fputs("\"gids\": [", f);
      for (int g = 0; g < p->ngid; g++) {
        const struct doctor_gid *x = &p->gid[g];

        fputs(g ? ", {" : "{", f);
        kv_int(f, "index", x->index, 1);
        kv_str(f, "gid", x->gid, 1);
        kv_str(f, "type", x->type, 1);
        kv_str(f, "netdev", x->netdev, 1);
        kv_bool(f, "in_namespace", x->in_ns, 1);
        kv_bool(f, "netdev_up", x->up, 0);
        fputc('}', f);
      }
      fputs("]}", f);
    }
    fputs("]}", f);
  }
  fputs("\n  ],\n", f);
}

static void selection(const struct doctor_report *r, FILE *f)
{
  fputs("  \"local_rank\": ", f);
  fprintf(f, "%d,\n  \"selection\": [", r->own_rank);
  for (int i = 0; i < r->nsel; i++) {
    const struct doctor_selection *s = r->sel[i];

    fputs(i ? ",\n    {" : "\n    {", f);
    kv_int(f, "ranks_from", s->lo, 1);
    kv_int(f, "ranks_to", s->hi, 1);
    kv_str(f, "rank_source", s->rank_source, 1);
    kv_str(f, "placement", s->fab.placement, 1);
    kv_bool(f, "ok", s->rc == 0, 1);
    kv_str(f, "warnings", s->warn, 1);
    fputs("\"uses\": [", f);
    for (int k = 0; k < s->fab.ndev; k++) {
      const struct mcp_net_dev *d = &s->fab.dev[k];

      fputs(k ? ", {" : "{", f);
      kv_str(f, "device", d->ibdev, 1);
      kv_int(f, "port", d->port, 1);
      kv_str(f, "link_layer", d->link_layer == 2 ? "Ethernet" : "InfiniBand", 1);
      kv_int(f, "gid_index", d->gid.index, 1);
      kv_str(f, "gid", d->gid.text, 1);
      kv_str(f, "gid_type",
             d->gid.type == MCP_GID_TYPE_ROCE_V2     ? "RoCE v2"
               : d->gid.type == MCP_GID_TYPE_ROCE_V1 ? "RoCE v1"
                                                     : "IB",
             1);
      kv_str(f, "netdev", d->gid.netdev, 1);
      kv_int(f, "pkey", d->pkey, 1);
      kv_int(f, "pkey_index", d->pkey_index, 1);
      kv_int(f, "mtu", mcp_fabric_mtu_bytes(d->active_mtu), 1);
      kv_int(f, "speed_mbps", d->speed_mbps, 0);
      fputc('}', f);
    }
    fputs("], \"excluded\": [", f);
    for (int k = 0; k < s->fab.nexcl; k++) {
      const struct mcp_fabric_excluded *x = &s->fab.excl[k];

      fputs(k ? ", {" : "{", f);
      kv_str(f, "device", x->name, 1);
      kv_int(f, "port", x->port, 1);
      kv_bool(f, "requested", x->requested, 1);
      kv_str(f, "reason", x->reason, 0);
      fputc('}', f);
    }
    fputs("]}", f);
  }
  fputs("\n  ],\n", f);
}

static void config(const struct doctor_report *r, FILE *f)
{
  size_t n;
  const struct mcp_param_def *defs = mcp_param_table(&n);
  char value[512], where[256];

  fputs("  \"config\": [", f);
  for (size_t i = 0; i < n; i++) {
    const struct mcp_param_origin *o = &r->cfg.origin[defs[i].id];

    mcp_param_format(&r->cfg, &defs[i], value, sizeof(value));
    mcp_param_format_origin(o, where, sizeof(where));
    fputs(i ? ",\n    {" : "\n    {", f);
    kv_str(f, "name", defs[i].name, 1);
    kv_str(f, "value", value, 1);
    kv_str(f, "source", mcp_param_source_name(o->source), 1);
    kv_str(f, "origin", where, 1);
    kv_str(f, "set_as", o->key, 1);
    kv_bool(f, "refused", o->rejected, 0);
    fputc('}', f);
  }
  fputs("\n  ],\n", f);
}

static void host(const struct doctor_report *r, FILE *f)
{
  fputs("  \"host_facts\": {", f);
  kv_int(f, "memlock_bytes", r->memlock_bytes, 1);
  kv_bool(f, "cap_ipc_lock", r->cap_ipc_lock, 1);
  kv_int(f, "shm_bytes", r->shm_bytes, 1);
  kv_str(f, "oob_interface", r->oob_iface, 1);
  kv_str(f, "oob_address", r->oob_addr, 1);
  kv_num(f, "time_to_error_s", r->tte_s, 1);
  kv_num(f, "rnr_bound_s", r->rnr_s, 0);
  fputs("},\n", f);
}

static void summary(FILE *f, const char *key, const struct doctor_summary *s)
{
  fprintf(f, "\"%s\": {", key);
  kv_str(f, "host", s->host, 1);
  kv_str(f, "version", s->version, 1);
  kv_str(f, "oob", s->oob, 1);
  kv_str(f, "device", s->dev, 1);
  kv_int(f, "port", s->port, 1);
  kv_str(f, "link_layer", s->link_layer, 1);
  kv_int(f, "mtu", s->mtu, 1);
  kv_int(f, "mtu_cap", s->mtu_cap, 1);
  kv_str(f, "netdev", s->netdev, 1);
  kv_int(f, "netdev_mtu", s->netdev_mtu, 1);
  kv_int(f, "rate_mbps", s->rate_mbps, 1);
  kv_int(f, "gid_index", s->gid_index, 1);
  kv_str(f, "gid", s->gid, 1);
  kv_str(f, "gid_type", s->gid_type, 1);
  kv_str(f, "subnet", s->subnet, 1);
  kv_int(f, "pkey", s->pkey, 1);
  kv_int(f, "sl", s->sl, 1);
  kv_int(f, "tc", s->tc, 1);
  kv_int(f, "timeout", s->timeout, 1);
  kv_int(f, "retry", s->retry, 0);
  fputc('}', f);
}

static void pair(const struct doctor_report *r, FILE *f)
{
  const struct doctor_pair_result *p = &r->pair;

  fputs("  \"pair\": ", f);
  if (!p->ran) {
    fputs("null,\n", f);
    return;
  }
  fputs("{", f);
  kv_str(f, "role", r->o->listen ? "listen" : "peer", 1);
  kv_str(f, "control_peer", p->peer_addr, 1);
  kv_str(f, "plugin", p->plugin_path, 1);
  kv_bool(f, "connected", p->connected, 1);
  kv_bool(f, "verified", p->verified, 1);
  kv_num(f, "bandwidth_mbs", p->bw_mbs > 0 ? p->bw_mbs : NAN, 1);
  kv_int(f, "bandwidth_size", (long long)p->bw_size, 1);
  kv_num(f, "latency_us", p->lat_us > 0 ? p->lat_us : NAN, 1);
  kv_bool(f, "compared", p->have_peer, p->have_peer);
  if (p->have_peer) {
    summary(f, "local", &p->local);
    fputs(", ", f);
    summary(f, "remote", &p->peer);
  }
  fputs("},\n", f);
}

void doctor_json_write(const struct doctor_report *r, FILE *f)
{
  fputs("{\n  ", f);
  kv_str(f, "tool", "mcpnet-doctor", 1);
  kv_str(f, "version", MCPNET_VERSION, 1);
  kv_str(f, "host", r->host, 0);
  fputs(",\n", f);
  devices(r, f);
  selection(r, f);
  config(r, f);
  host(r, f);
  pair(r, f);
  fputs("  \"findings\": [", f);
  for (int i = 0; i < r->nfind; i++) {
    const struct doctor_finding *x = &r->find[i];

    fputs(i ? ",\n    {" : "\n    {", f);
    kv_str(f, "level", doctor_level_name(x->level), 1);
    kv_str(f, "section", doctor_section_name(x->section), 1);
    kv_str(f, "check", x->check, 1);
    kv_str(f, "subject", x->subject, 1);
    kv_str(f, "message", x->message, 1);
    kv_str(f, "remedy", x->remedy, 0);
    fputc('}', f);
  }
  fprintf(f, "\n  ],\n  \"summary\": {\"ok\": %d, \"warn\": %d, \"fail\": %d},\n  \"exit_status\": %d\n}\n",
          doctor_count(r, DOCTOR_OK), doctor_count(r, DOCTOR_WARN), doctor_count(r, DOCTOR_FAIL),
          doctor_exit_status(r));
}
