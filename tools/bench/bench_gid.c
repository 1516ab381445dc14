/*
 * bench_gid.c - which GID perftest must use to measure the path the plugin uses. NCCL
 * and mcpnet pick, when not told, the IPv4-mapped RoCE v2 GID of the port; perftest
 * defaults to index 0 (on RoCE a link-local entry), which would measure a different
 * path or fail. So the benchmark reads the same sysfs facts the plugin reads:
 * ports/P/gids/N and gid_attrs/types/N (empty slots answer EINVAL and are skipped).
 * The GID's IPv4 address is also where perftest's out-of-band TCP connection goes.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define IB_SYSFS "/sys/class/infiniband"

static int read_line(const char *path, char *buf, size_t len)
{
  FILE *f = fopen(path, "r");
  size_t n;

  if (f == NULL)
    return -1;
  if (fgets(buf, (int)len, f) == NULL) {
    fclose(f);
    return -1;
  }
  fclose(f);
  n = strlen(buf);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
    buf[--n] = '\0';
  return 0;
}

/* "fe80:0000:...:0001" -> 16 bytes. */
static int parse_gid(const char *text, uint8_t gid[16])
{
  unsigned v[8];
  int i;

  if (sscanf(text, "%x:%x:%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
    return -1;
  for (i = 0; i < 8; i++) {
    gid[2 * i] = (uint8_t)(v[i] >> 8);
    gid[2 * i + 1] = (uint8_t)v[i];
  }
  return 0;
}

static int gid_is_v4_mapped(const uint8_t g[16])
{
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

  return memcmp(g, prefix, sizeof(prefix)) == 0;
}

static int gid_is_zero(const uint8_t g[16])
{
  static const uint8_t zero[16];

  return memcmp(g, zero, 16) == 0;
}

static void gid_format(const uint8_t g[16], char *ip, size_t iplen)
{
  if (gid_is_v4_mapped(g))
    inet_ntop(AF_INET, g + 12, ip, (socklen_t)iplen);
  else
    inet_ntop(AF_INET6, g, ip, (socklen_t)iplen);
}

static int read_gid(const char *dev, int port, int index, uint8_t gid[16], char *type, size_t tlen)
{
  char path[512], text[128];

  snprintf(path, sizeof(path), IB_SYSFS "/%s/ports/%d/gids/%d", dev, port, index);
  if (read_line(path, text, sizeof(text)) != 0 || parse_gid(text, gid) != 0 || gid_is_zero(gid))
    return -1;
  snprintf(path, sizeof(path), IB_SYSFS "/%s/ports/%d/gid_attrs/types/%d", dev, port, index);
  if (read_line(path, type, tlen) != 0)
    return -1; /* EINVAL: an empty slot, or one owned by another namespace */
  return 0;
}

int bench_gid_pick(const char *dev, int port, int *index, char *ip, size_t iplen)
{
  char path[512], type[64];
  int best = -1, fallback = -1, best_rank = 0;
  struct dirent *e;
  uint8_t gid[16];
  DIR *d;

  snprintf(path, sizeof(path), IB_SYSFS "/%s/ports/%d/gids", dev, port);
  d = opendir(path);
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    int i, rank;
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    i = atoi(e->d_name);
    if (read_gid(dev, port, i, gid, type, sizeof(type)) != 0)
      continue;
    if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80)
      continue; /* link-local: never routable, never what the plugin picks */
    /* IPv4 RoCE v2 first, then any RoCE v2, then anything else valid. */
    rank = strcmp(type, "RoCE v2") == 0 ? (gid_is_v4_mapped(gid) ? 3 : 2) : 1;
    if (rank > best_rank || (rank == best_rank && i < best)) {
      best = i;
      best_rank = rank;
    }
    if (fallback < 0 || i < fallback)
      fallback = i;
  }
  closedir(d);
  if (best < 0)
    best = fallback;
  if (best < 0)
    return -1;
  *index = best;
  return bench_gid_resolve(dev, port, best, ip, iplen);
}

int bench_gid_resolve(const char *dev, int port, int index, char *ip, size_t iplen)
{
  char type[64];
  uint8_t gid[16];

  if (read_gid(dev, port, index, gid, type, sizeof(type)) != 0)
    return -1;
  gid_format(gid, ip, iplen);
  return 0;
}
