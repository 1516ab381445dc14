/*
 * doctor_fleet.c - the fleet preflight's logic, with no sockets and no plugin: how a
 * node finds node 0 and its own rank (options, Slurm, a Kubernetes indexed Job, or
 * MCPNET_FLEET_*), which pairs are worth a transfer, which node a failed pair is blamed
 * on, and the one table node 0 prints. Kept apart from doctor_fleet_run.c so every rule
 * here is unit-tested without hosts (test/unit/test_doctor_fleet.c).
 */
#include <stdlib.h>
#include <string.h>

#include "doctor_fleet.h"
#include "mcp_json.h"
#include "core/text.h"

/* ---- Where node 0 is, how many nodes, which one this is ------------------------------- */

static int put(char *out, size_t len, size_t *o, char ch)
{
  if (*o + 1 >= len)
    return -1;
  out[(*o)++] = ch;
  return 0;
}

int doctor_fleet_first_host(const char *list, char *out, size_t len)
{
  size_t o = 0;
  const char *s = list;

  if (s == NULL || len == 0)
    return -1;
  while (*s == ' ')
    s++;
  /* Slurm's form: names joined by ',', each with [a-b,c] groups that expand in place;
   * the first name is the text outside brackets with each group's first value. */
  for (; *s != '\0' && *s != ','; s++) {
    if (*s == '[') {
      const char *t = ++s;

      while (*t != '\0' && *t != '-' && *t != ',' && *t != ']')
        t++;
      if (*t == '\0' || t == s)
        return -1;
      for (; s < t; s++)
        if (put(out, len, &o, *s) != 0)
          return -1;
      while (*t != '\0' && *t != ']')
        t++;
      if (*t != ']')
        return -1;
      s = t;
      continue;
    }
    if (*s == ']' || *s == ' ')
      return -1;
    if (put(out, len, &o, *s) != 0)
      return -1;
  }
  if (o == 0)
    return -1;
  out[o] = '\0';
  return 0;
}

/* A whole number lo..hi from text, or -1. */
static long whole(const char *text, long lo, long hi)
{
  char *end;
  long v;

  if (text == NULL || *text == '\0')
    return -1;
  v = strtol(text, &end, 10);
  return *end == '\0' && v >= lo && v <= hi ? v : -1;
}

/* The first of names that is set; *value gets its text. */
static const char *first_set(const char *(*get)(const char *), const char *const *names, const char **value)
{
  for (; *names != NULL; names++) {
    const char *v = get(*names);

    if (v != NULL && *v != '\0') {
      *value = v;
      return *names;
    }
  }
  return NULL;
}

int doctor_fleet_resolve(const struct fleet_opts *o, const char *(*get)(const char *), struct fleet_conf *c,
                         char *err, size_t len)
{
  static const char *const nodes_vars[] = {"SLURM_NNODES", "MCPNET_FLEET_NODES", NULL};
  static const char *const rank_vars[] = {"SLURM_NODEID", "JOB_COMPLETION_INDEX", "MCPNET_FLEET_RANK", NULL};
  const char *v = NULL, *src;
  long n;

  memset(c, 0, sizeof(*c));
  /* The node count first: the rank is checked against it. */
  if (o->nodes > 0) {
    c->nodes = o->nodes;
    c->nodes_source = "--nodes";
  } else if ((src = first_set(get, nodes_vars, &v)) != NULL) {
    if ((n = whole(v, 1, FLEET_MAX_NODES)) < 0) {
      snprintf(err, len, "%s='%s' is not a node count 1..%d", src, v, FLEET_MAX_NODES);
      return -1;
    }
    c->nodes = (int)n;
    c->nodes_source = src;
  } else {
    snprintf(err, len,
             "--fleet needs the number of nodes: give --nodes N or set MCPNET_FLEET_NODES "
             "(under Slurm, SLURM_NNODES gives it)");
    return -1;
  }
  if (o->rank >= 0) {
    c->rank = o->rank;
    c->rank_source = "--node-rank";
  } else if ((src = first_set(get, rank_vars, &v)) != NULL) {
    if ((n = whole(v, 0, FLEET_MAX_NODES - 1)) < 0) {
      snprintf(err, len, "%s='%s' is not a node rank 0..%d", src, v, FLEET_MAX_NODES - 1);
      return -1;
    }
    c->rank = (int)n;
    c->rank_source = src;
  } else {
    snprintf(err, len,
             "--fleet needs this node's rank: give --node-rank R or set MCPNET_FLEET_RANK (under Slurm, "
             "SLURM_NODEID gives it; in a Kubernetes indexed Job, JOB_COMPLETION_INDEX)");
    return -1;
  }
  if (c->rank >= c->nodes) {
    snprintf(err, len, "node rank %d (%s) is not below the number of nodes %d (%s)", c->rank, c->rank_source,
             c->nodes, c->nodes_source);
    return -1;
  }
  if (o->coordinator != NULL && o->coordinator[0] != '\0') {
    snprintf(c->coordinator, sizeof(c->coordinator), "%s", o->coordinator);
    c->coordinator_source = "--coordinator";
  } else if ((v = get("MCPNET_FLEET_COORDINATOR")) != NULL && *v != '\0') {
    snprintf(c->coordinator, sizeof(c->coordinator), "%s", v);
    c->coordinator_source = "MCPNET_FLEET_COORDINATOR";
  } else if ((v = get("SLURM_JOB_NODELIST")) != NULL && *v != '\0') {
    if (doctor_fleet_first_host(v, c->coordinator, sizeof(c->coordinator)) != 0) {
      snprintf(err, len,
               "SLURM_JOB_NODELIST='%.200s' has no first host name to read; give --coordinator HOST or "
               "set MCPNET_FLEET_COORDINATOR",
               v);
      return -1;
    }
    c->coordinator_source = "SLURM_JOB_NODELIST";
  } else if (c->rank != 0) {
    snprintf(err, len,
             "--fleet needs node 0's address on every other node: give --coordinator HOST[:PORT] or set "
             "MCPNET_FLEET_COORDINATOR (under Slurm, the first host of SLURM_JOB_NODELIST is used; in "
             "Kubernetes, <job>-0.<headless service>)");
    return -1;
  }
  return 0;
}

int doctor_fleet_listen_port(const struct fleet_conf *c, int default_port, char *err, size_t len)
{
  const char *colon = strrchr(c->coordinator, ':');
  const char *bracket = strrchr(c->coordinator, ']');
  int port = default_port;

  /* "HOST:PORT" or "[V6]:PORT"; a bare IPv6 address has more than one colon and no port. */
  if (c->coordinator[0] != '\0' && colon != NULL && (bracket == NULL || colon > bracket) &&
      (c->coordinator[0] == '[' || strchr(c->coordinator, ':') == colon))
    port = atoi(colon + 1);
  if (port <= 0 || port > 65535) {
    snprintf(err, len, "the port in %s='%s' is not 1..65535", c->coordinator_source, c->coordinator);
    return -1;
  }
  return port;
}

/* ---- Which pairs ------------------------------------------------------------------------- */

int doctor_fleet_pairs_cap(int n, int rails) { return 2 * (n > 0 ? n : 1) * (rails > 0 ? rails : 1); }

static int add_pair(struct fleet_pair *out, int cap, int *np, int from, int a, int b, int rail)
{
  if (a == b)
    return 0;
  if (a > b) {
    int t = a;

    a = b;
    b = t;
  }
  for (int i = from; i < *np; i++)
    if (out[i].a == a && out[i].b == b && out[i].rail == rail)
      return 0;
  if (*np >= cap)
    return -1;
  memset(&out[*np], 0, sizeof(out[*np]));
  out[*np].a = a;
  out[*np].b = b;
  out[*np].rail = rail;
  out[*np].said_by = -1;
  (*np)++;
  return 0;
}

int doctor_fleet_pairs(int n, const int *ndev, struct fleet_pair *out, int cap)
{
  int rails = 0, np = 0, *m;

  for (int r = 0; r < n; r++)
    if (ndev[r] > rails)
      rails = ndev[r];
  m = malloc(sizeof(*m) * (size_t)(n > 0 ? n : 1));
  if (m == NULL)
    return -1;
  for (int k = 0; k < rails; k++) {
    int cnt = 0, from = np;

    for (int r = 0; r < n; r++)
      if (ndev[r] > k)
        m[cnt++] = r;
    if (cnt < 2)
      continue;
    /* The ring NCCL builds visits each node's neighbour; node 0 also meets everyone,
     * which is how a node that fails only toward node 0 (as a tree root) shows. */
    for (int i = 0; i < cnt; i++)
      if (add_pair(out, cap, &np, from, m[i], m[(i + 1) % cnt], k) != 0)
        goto full;
    if (ndev[0] > k)
      for (int i = 1; i < cnt; i++)
        if (add_pair(out, cap, &np, from, 0, m[i], k) != 0)
          goto full;
  }
  free(m);
  return np;
full:
  free(m);
  return -1;
}

/* ---- Who is to blame ------------------------------------------------------------------------ */

int doctor_fleet_attribute(struct fleet *f)
{
  int rails = 0, named = 0, *tot, *bad;

  for (int i = 0; i < f->npair; i++)
    if (f->pair[i].rail + 1 > rails)
      rails = f->pair[i].rail + 1;
  tot = calloc((size_t)f->n, sizeof(*tot));
  bad = calloc((size_t)f->n, sizeof(*bad));
  if (tot == NULL || bad == NULL) {
    free(tot);
    free(bad);
    return -1;
  }
  for (int k = 0; k < rails; k++) {
    memset(tot, 0, sizeof(*tot) * (size_t)f->n);
    memset(bad, 0, sizeof(*bad) * (size_t)f->n);
    for (int i = 0; i < f->npair; i++) {
      struct fleet_pair *p = &f->pair[i];

      if (p->rail != k || !p->ran)
        continue;
      tot[p->a]++;
      tot[p->b]++;
      if (!p->ok) {
        bad[p->a]++;
        bad[p->b]++;
      }
    }
    for (int i = 0; i < f->npair; i++) {
      struct fleet_pair *p = &f->pair[i];
      int sa, sb, oa, ob;

      p->blame = p->unsure = p->by_own = 0;
      if (p->rail != k || !p->ran || p->ok)
        continue;
      /* A node that fails with everyone it met on this rail, while its peer works with
       * someone else, is the common end: a blocked port or a dead link does that. */
      sa = bad[p->a] == tot[p->a];
      sb = bad[p->b] == tot[p->b];
      oa = f->node[p->a].nown > 0;
      ob = f->node[p->b].nown > 0;
      if (sa != sb) {
        p->blame = sa ? FLEET_BLAME_A : FLEET_BLAME_B;
      } else if (oa != ob) {
        p->blame = oa ? FLEET_BLAME_A : FLEET_BLAME_B;
        p->by_own = 1;
      } else {
        p->blame = FLEET_BLAME_A | FLEET_BLAME_B;
        p->unsure = !oa;
      }
    }
  }
  free(tot);
  free(bad);
  for (int r = 0; r < f->n; r++)
    f->node[r].problems = !f->node[r].present || f->node[r].nown > 0;
  for (int i = 0; i < f->npair; i++) {
    const struct fleet_pair *p = &f->pair[i];

    if (p->blame & FLEET_BLAME_A)
      f->node[p->a].problems = 1;
    if (p->blame & FLEET_BLAME_B)
      f->node[p->b].problems = 1;
  }
  for (int r = 0; r < f->n; r++)
    named += f->node[r].problems;
  return named;
}

int doctor_fleet_node_lines(const struct fleet *f, int rank, char (*out)[FLEET_LINE * 2], int max)
{
  const struct fleet_node *nd = &f->node[rank];
  int k = 0;

  if (!nd->present && k < max)
    snprintf(out[k++], FLEET_LINE * 2, "no report reached node 0: %s", nd->missing);
  for (int i = 0; i < nd->nown && i < FLEET_OWN_MAX && k < max; i++)
    snprintf(out[k++], FLEET_LINE * 2, "its own check: %s", nd->own[i]);
  if (nd->nown > FLEET_OWN_MAX && k < max)
    snprintf(out[k++], FLEET_LINE * 2, "its own check: %d more FAILs (run mcpnet-doctor on it)",
             nd->nown - FLEET_OWN_MAX);
  for (int i = 0; i < f->npair && k < max; i++) {
    const struct fleet_pair *p = &f->pair[i];
    int mine = (p->a == rank && (p->blame & FLEET_BLAME_A)) || (p->b == rank && (p->blame & FLEET_BLAME_B));
    char seen[48] = "";

    if (!mine)
      continue;
    if (p->said_by >= 0)
      snprintf(seen, sizeof(seen), " (seen on node %d)", p->said_by);
    snprintf(out[k++], FLEET_LINE * 2, "to node %d (rail %d): %s: %s%s%s", p->a == rank ? p->b : p->a,
             p->rail, p->step, p->err, seen,
             p->unsure     ? "; cannot tell which end: both are named"
               : p->by_own ? "; named here because this node's own check FAILs"
                           : "");
  }
  return k;
}

/* ---- The table -------------------------------------------------------------------------------- */

#define LINES_MAX 64

static int count_unsure(const struct fleet *f)
{
  int u = 0;

  for (int i = 0; i < f->npair; i++)
    u += f->pair[i].unsure;
  return u;
}

void doctor_fleet_table_text(const struct fleet *f, FILE *out)
{
  static char lines[LINES_MAX][FLEET_LINE * 2];
  int present = 0, named = 0, rails = 0, failed = 0, unsure = count_unsure(f);

  for (int r = 0; r < f->n; r++) {
    present += f->node[r].present;
    named += f->node[r].problems;
  }
  for (int i = 0; i < f->npair; i++) {
    failed += f->pair[i].ran && !f->pair[i].ok;
    if (f->pair[i].rail + 1 > rails)
      rails = f->pair[i].rail + 1;
  }
  fprintf(
    out,
    "Fleet: %d of %d nodes reported to node 0; %d pair%s checked through the plugin on %d rail%s, %d failed\n",
    present, f->n, f->npair, f->npair == 1 ? "" : "s", rails, rails == 1 ? "" : "s", failed);
  fprintf(out, "%-5s %-20s %-24s %-9s %s\n", "NODE", "HOST", "ADDRESS", "VERDICT", "PROBLEMS");
  for (int r = 0; r < f->n; r++) {
    const struct fleet_node *nd = &f->node[r];
    int k = doctor_fleet_node_lines(f, r, lines, LINES_MAX);

    fprintf(out, "%-5d %-20s %-24s %-9s %s\n", r, nd->host[0] ? nd->host : "?", nd->addr[0] ? nd->addr : "?",
            nd->problems ? "PROBLEMS" : "healthy", k > 0 ? lines[0] : "-");
    for (int i = 1; i < k; i++)
      fprintf(out, "%-5s %-20s %-24s %-9s %s\n", "", "", "", "", lines[i]);
  }
  if (unsure > 0)
    fprintf(out,
            "fleet: %d failed pair%s could not be pinned on one end (both ends are named): rerun with more "
            "nodes, or check those pairs with --listen/--peer\n",
            unsure, unsure == 1 ? "" : "s");
  fprintf(out, "fleet: %d node%s, %d with problems\n", f->n, f->n == 1 ? "" : "s", named);
}

void doctor_fleet_table_json(const struct fleet *f, FILE *out)
{
  static char lines[LINES_MAX][FLEET_LINE * 2];
  int named = 0;

  fputs("{\"mode\":\"fleet\",\"nodes\":[", out);
  for (int r = 0; r < f->n; r++) {
    const struct fleet_node *nd = &f->node[r];
    int k = doctor_fleet_node_lines(f, r, lines, LINES_MAX);

    named += nd->problems;
    fprintf(out, "%s{\"rank\":%d,\"host\":", r ? "," : "", r);
    mcp_json_str(out, nd->host);
    fputs(",\"address\":", out);
    mcp_json_str(out, nd->addr);
    fprintf(out, ",\"reported\":%s,\"rails\":%d,\"healthy\":%s,\"own_fails\":%d,\"problems\":[",
            nd->present ? "true" : "false", nd->ndev, nd->problems ? "false" : "true", nd->nown);
    for (int i = 0; i < k; i++) {
      if (i)
        fputc(',', out);
      mcp_json_str(out, lines[i]);
    }
    fputs("]}", out);
  }
  fputs("],\"pairs\":[", out);
  for (int i = 0; i < f->npair; i++) {
    const struct fleet_pair *p = &f->pair[i];

    fprintf(out, "%s{\"a\":%d,\"b\":%d,\"rail\":%d,\"ok\":%s", i ? "," : "", p->a, p->b, p->rail,
            p->ran && p->ok ? "true" : "false");
    if (!p->ok) {
      fputs(",\"step\":", out);
      mcp_json_str(out, p->step);
      fputs(",\"error\":", out);
      mcp_json_str(out, p->err);
      fprintf(out, ",\"seen_on\":%d,\"blamed\":[", p->said_by);
      if (p->blame & FLEET_BLAME_A)
        fprintf(out, "%d%s", p->a, p->blame & FLEET_BLAME_B ? "," : "");
      if (p->blame & FLEET_BLAME_B)
        fprintf(out, "%d", p->b);
      fprintf(out, "],\"unsure\":%s", p->unsure ? "true" : "false");
    }
    fputc('}', out);
  }
  fprintf(out, "],\"with_problems\":%d,\"exit\":%d}\n", named, named > 0 ? DOCTOR_EXIT_FAIL : DOCTOR_EXIT_OK);
}

/* A node's report as node 0 reads it off the network: numbers clamped to what a node can
 * have, strings cut to their fields and made printable (node 0 prints them). */
void doctor_fleet_parse_hello(struct fleet_node *nd, char *text, int *rank, int *nodes)
{
  char *save = NULL;

  for (char *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    if (sscanf(line, "rank=%d", rank) == 1 || sscanf(line, "nodes=%d", nodes) == 1)
      continue;
    if (sscanf(line, "ndev=%d", &nd->ndev) == 1) {
      nd->ndev = nd->ndev < 0 ? 0 : nd->ndev > FLEET_MAX_DEVS ? FLEET_MAX_DEVS : nd->ndev;
      continue;
    }
    if (sscanf(line, "nown=%d", &nd->nown) == 1) {
      nd->nown = nd->nown < 0 ? 0 : nd->nown;
      continue;
    }
    if (strncmp(line, "host=", 5) == 0)
      mcp_text_make_printable(strncpy(nd->host, line + 5, sizeof(nd->host) - 1));
    else if (strncmp(line, "addr=", 5) == 0)
      mcp_text_make_printable(strncpy(nd->addr, line + 5, sizeof(nd->addr) - 1));
    else if (strncmp(line, "fail=", 5) == 0) {
      int k = 0;

      while (k < FLEET_OWN_MAX && nd->own[k][0] != '\0')
        k++;
      if (k < FLEET_OWN_MAX)
        mcp_text_make_printable(strncpy(nd->own[k], line + 5, FLEET_LINE - 1));
    }
  }
}
