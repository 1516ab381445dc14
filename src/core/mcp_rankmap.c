/*
 * mcp_rankmap.c - MCPNET_RANK_MAP and the local rank it is indexed by. Pure parsing (in
 * core, run once by the parameter loader); fabric resolves the result against devices.
 *
 * On a node with one NIC per GPU, every local rank must use its own NIC, and every
 * node must make the same choice: left to topology detection, a container that hides
 * part of the PCI tree or a renamed device makes nodes disagree, and the job times out.
 * The map states the placement once for the whole job:
 *
 *   0-3=mlx5_0:1,gid=10.1.0.0/16;4-7=mlx5_1:1+mlx5_2:1,gid=10.2.0.0/16,sl=3
 *   0-1=mlx5_0:1,rail=0;2-3=mlx5_1:1,rail=1
 *
 * '+' gives a rank several devices (NCCL spreads channels over them); '*' fuses devices
 * into one (mlx5_0:1*mlx5_0:2: NCCL sees one device whose messages are striped over
 * both), so the two never mean the same thing and either can be combined with the other.
 * rail= and plane= are what NCCL 2.30 reads from NCCL_IB_HCA's name:port:rail:plane, for
 * every device of the entry (an entry is one rank's or one GPU pair's: one rail).
 *
 * Device names match exactly (no prefix rules), ranks may not overlap, and everything
 * is checked when the parameter is read, so a typo fails init with the entry named
 * instead of silently running elsewhere. The local rank comes from the launcher's
 * variable (torchrun, Slurm, Open MPI, MPICH, PMI), whichever is set first.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/match_list.h"
#include "core/param.h"
#include "core/rankmap.h"
#include "core/text.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -EINVAL)

/* Copy [s, s+n) trimmed into buf; returns the trimmed length or -ENAMETOOLONG if it does not fit. */
static int trim_copy(const char *s, size_t n, char *buf, size_t len)
{
  mcp_trim_span(&s, &n);
  if (n >= len)
    return -ENAMETOOLONG;
  memmove(buf, s, n);
  buf[n] = '\0';
  return (int)n;
}

/* A plain decimal number in lo..hi (no sign, no hex: ranks, ports and levels). */
static int parse_decimal(const char *s, long long lo, long long hi, long long *out)
{
  if (*s == '\0' || strspn(s, "0123456789") != strlen(s) || strlen(s) > 9)
    return -EINVAL;
  *out = strtoll(s, NULL, 10);
  return *out >= lo && *out <= hi ? 0 : -ERANGE;
}

static int parse_ranks(const char *s, struct mcp_rankmap_entry *e, char *err, size_t errlen)
{
  char lo[16], hi[16];
  const char *dash = strchr(s, '-');
  long long a, b;

  if (dash == NULL) {
    if (parse_decimal(s, 0, MCP_RANKMAP_RANK_MAX, &a) != 0)
      return ERR("'%s' is not a local rank 0..%d", s, MCP_RANKMAP_RANK_MAX);
    e->lo = e->hi = (int)a;
    return 0;
  }
  if (trim_copy(s, (size_t)(dash - s), lo, sizeof(lo)) < 0 ||
      trim_copy(dash + 1, strlen(dash + 1), hi, sizeof(hi)) < 0 ||
      parse_decimal(lo, 0, MCP_RANKMAP_RANK_MAX, &a) != 0 ||
      parse_decimal(hi, 0, MCP_RANKMAP_RANK_MAX, &b) != 0)
    return ERR("'%s' is not a rank range N-M with ranks 0..%d", s, MCP_RANKMAP_RANK_MAX);
  if (a > b)
    return ERR("rank range '%s' runs backwards", s);
  e->lo = (int)a;
  e->hi = (int)b;
  return 0;
}

/* DEVICES is ITEM('+'ITEM)*, ITEM is DEV[:PORT]('*'DEV[:PORT])*: each device records the
 * item it belongs to (group), so a fused set is the devices sharing a group. */
static int parse_devices(const char *s, struct mcp_rankmap_entry *e, char *err, size_t errlen)
{
  const char *p = s;
  int group = 0, fused = 0;

  for (;;) {
    size_t span = strcspn(p, "+*");
    const char *end = p + span;
    struct mcp_rankmap_dev *d;
    char tok[MCP_RANKMAP_NAME_MAX + 8], *colon;
    int i;

    if (e->ndev == MCP_RANKMAP_DEVS)
      return ERR("more than %d devices in '%s'", MCP_RANKMAP_DEVS, s);
    if (trim_copy(p, span, tok, sizeof(tok)) <= 0)
      return ERR("an empty or overlong device name in '%s'", s);
    d = &e->dev[e->ndev];
    d->port = -1;
    d->group = group;
    colon = strchr(tok, ':');
    if (colon != NULL) {
      long long port;
      *colon = '\0';
      if (parse_decimal(colon + 1, 1, 255, &port) != 0)
        return ERR("'%s:%s': the port must be 1..255", tok, colon + 1);
      d->port = (int)port;
    }
    if (tok[0] == '\0' || strlen(tok) >= sizeof(d->name) || strpbrk(tok, " \t=,^") != NULL)
      return ERR("'%s' is not a device name", tok);
    memcpy(d->name, tok, strlen(tok) + 1); /* length checked above */
    for (i = 0; i < e->ndev; i++)
      if (strcmp(e->dev[i].name, d->name) == 0 &&
          (e->dev[i].port == d->port || e->dev[i].port < 0 || d->port < 0))
        return ERR("device %s is named twice in '%s'", d->name, s);
    e->ndev++;
    if (++fused > MCP_RANKMAP_FUSE_MAX)
      return ERR("more than %d devices fused with '*' in '%s'", MCP_RANKMAP_FUSE_MAX, s);
    if (*end == '\0')
      return 0;
    if (*end == '+') {
      group++;
      fused = 0;
    }
    p = end + 1;
  }
}

/* gid=INDEX, gid=IP or gid=CIDR. */
static int parse_gid(const char *v, struct mcp_rankmap_entry *e, char *err, size_t errlen)
{
  long long idx;
  uint8_t a4[4];

  if (strchr(v, '/') != NULL) {
    if (mcp_gid_range_parse(v, &e->gid_range) != 0)
      return ERR("gid=%s is not a CIDR such as 10.1.0.0/16 or fd00::/64", v);
    e->has_gid_range = 1;
    return 0;
  }
  if (strspn(v, "0123456789") == strlen(v)) {
    if (parse_decimal(v, 0, 255, &idx) != 0)
      return ERR("gid=%s: a GID index is 0..255", v);
    e->gid_index = (int)idx;
    return 0;
  }
  if (inet_pton(AF_INET, v, a4) == 1) {
    memset(e->gid_addr, 0, 10);
    e->gid_addr[10] = 0xff;
    e->gid_addr[11] = 0xff;
    memcpy(e->gid_addr + 12, a4, 4);
  } else if (inet_pton(AF_INET6, v, e->gid_addr) != 1) {
    return ERR("gid=%s is neither a GID index, an IP address nor a CIDR", v);
  }
  e->has_gid_addr = 1;
  return 0;
}

static int parse_option(const char *opt, struct mcp_rankmap_entry *e, char *err, size_t errlen)
{
  const char *eq = strchr(opt, '=');
  char key[8], val[64];
  long long n;

  if (eq == NULL || trim_copy(opt, (size_t)(eq - opt), key, sizeof(key)) <= 0 ||
      trim_copy(eq + 1, strlen(eq + 1), val, sizeof(val)) <= 0)
    return ERR("'%s' is not KEY=VALUE (gid=, pkey=, sl=, tc=, rail=, plane=)", opt);
  if (strcmp(key, "gid") == 0) {
    if (e->gid_index >= 0 || e->has_gid_addr || e->has_gid_range)
      return ERR("gid= is given twice");
    return parse_gid(val, e, err, errlen);
  }
  if (strcmp(key, "pkey") == 0) {
    if (e->pkey >= 0)
      return ERR("pkey= is given twice");
    if (mcp_param_parse_int(val, &n) != 0 || n < 1 || n > 0xffff || (n & 0x7fff) == 0)
      return ERR("pkey=%s is not a P_Key value such as 0x8001 (16 bits, partition bits not 0)", val);
    e->pkey = (int)n;
    return 0;
  }
  if (strcmp(key, "sl") == 0 || strcmp(key, "tc") == 0) {
    int is_sl = key[0] == 's', *field = is_sl ? &e->sl : &e->tc;
    if (*field >= 0)
      return ERR("%s= is given twice", key);
    if (parse_decimal(val, 0, is_sl ? 15 : 255, &n) != 0)
      return ERR("%s=%s: must be 0..%d", key, val, is_sl ? 15 : 255);
    *field = (int)n;
    return 0;
  }
  if (strcmp(key, "rail") == 0 || strcmp(key, "plane") == 0) {
    int is_rail = key[0] == 'r', *field = is_rail ? &e->rail : &e->plane;
    int max = is_rail ? MCP_MATCH_RAIL_MAX : MCP_MATCH_PLANE_MAX;

    if (*field >= 0)
      return ERR("%s= is given twice", key);
    if (parse_decimal(val, 0, max, &n) != 0)
      return ERR("%s=%s: must be 0..%d (NCCL's 16-bit %s id)", key, val, max, key);
    *field = (int)n;
    return 0;
  }
  return ERR("unknown option '%s' (gid=, pkey=, sl=, tc=, rail=, plane=)", key);
}

static int parse_entry(const char *text, struct mcp_rankmap_entry *e, char *err, size_t errlen)
{
  char buf[256], *eq, *opt, *save = NULL;
  int first = 1;

  memset(e, 0, sizeof(*e));
  e->gid_index = e->pkey = e->sl = e->tc = e->rail = e->plane = -1;
  snprintf(e->text, sizeof(e->text), "%s", text);
  snprintf(buf, sizeof(buf), "%s", text);
  eq = strchr(buf, '=');
  if (eq == NULL)
    return ERR("expected RANKS=DEVICES");
  *eq = '\0';
  if (trim_copy(buf, strlen(buf), buf, sizeof(buf)) <= 0)
    return ERR("the ranks before '=' are missing");
  if (parse_ranks(buf, e, err, errlen) != 0)
    return -EINVAL;
  for (opt = strtok_r(eq + 1, ",", &save); opt != NULL; opt = strtok_r(NULL, ",", &save)) {
    int rc = first ? parse_devices(opt, e, err, errlen) : parse_option(opt, e, err, errlen);
    if (rc != 0)
      return rc;
    first = 0;
  }
  if (first)
    return ERR("no device after '='");
  return 0;
}

int mcp_rankmap_parse(const char *text, struct mcp_rankmap *map, char *err, size_t errlen)
{
  const char *p = text;

  map->n = 0;
  if (text == NULL)
    return 0;
  while (*p != '\0') {
    const char *semi = strchr(p, ';'), *end = semi != NULL ? semi : p + strlen(p);
    char entry[256];
    int len = trim_copy(p, (size_t)(end - p), entry, sizeof(entry)), i;

    if (len < 0)
      return ERR("MCPNET_RANK_MAP: an entry is longer than %zu characters", sizeof(entry) - 1);
    if (len > 0) {
      struct mcp_rankmap_entry *e = &map->e[map->n];
      char why[192];

      if (map->n == MCP_RANKMAP_MAX)
        return ERR("MCPNET_RANK_MAP: more than %d entries", MCP_RANKMAP_MAX);
      if (parse_entry(entry, e, why, sizeof(why)) != 0)
        return ERR("MCPNET_RANK_MAP entry '%s': %s", entry, why);
      for (i = 0; i < map->n; i++)
        if (e->lo <= map->e[i].hi && map->e[i].lo <= e->hi)
          return ERR("MCPNET_RANK_MAP: entries '%s' and '%s' both place local rank %d", map->e[i].text, entry,
                     e->lo > map->e[i].lo ? e->lo : map->e[i].lo);
      map->n++;
    }
    if (semi == NULL)
      break;
    p = semi + 1;
  }
  return 0;
}

const struct mcp_rankmap_entry *mcp_rankmap_find(const struct mcp_rankmap *map, int rank)
{
  int i;

  for (i = 0; i < map->n; i++)
    if (rank >= map->e[i].lo && rank <= map->e[i].hi)
      return &map->e[i];
  return NULL;
}

int mcp_local_rank(int configured, const char *(*get)(void *arg, const char *name), void *arg,
                   const char **source, char *err, size_t errlen)
{
  static const char *const vars[] = {
    "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
  };
  size_t i;

  *source = NULL;
  if (configured >= 0) {
    *source = "MCPNET_LOCAL_RANK";
    return configured;
  }
  for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char *v = get != NULL ? get(arg, vars[i]) : getenv(vars[i]);
    char buf[32];
    long long n;
    int len = v != NULL ? trim_copy(v, strlen(v), buf, sizeof(buf)) : 0;

    if (len == 0)
      continue;
    *source = vars[i];
    if (len < 0 || parse_decimal(buf, 0, MCP_RANKMAP_RANK_MAX, &n) != 0)
      return ERR("%s=%s is not a local rank 0..%d", vars[i], v, MCP_RANKMAP_RANK_MAX);
    return (int)n;
  }
  return -ENOENT;
}
