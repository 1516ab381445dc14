/*
 * mcp_fabric_sysfs.c - reads an RDMA device's identity, ports, GID and P_Key tables
 * from sysfs below a root given by the caller ("/sys", or a fixture tree).
 *
 * Reading sysfs rather than asking verbs keeps the inventory testable with fixtures
 * shaped like real hosts, and sysfs says things verbs does not: the PCI function
 * behind a device (a VF points at its PF), the netdev of every GID, which GID slots the
 * kernel refuses to describe. Those refusals matter: the kernel answers EINVAL for the
 * type or netdev of an empty slot or one it will not describe to us, and an automatic
 * choice that stops at the first such slot (NCCL #1538, #1573) finds nothing in a pod
 * whose table starts at index 4. Such slots are skipped and counted, as rdma-core does.
 * Fixture trees mimic a refused attribute by leaving its file out.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "fabric/fabric_sysfs.h"

_Static_assert((int)MCP_LINK_LAYER_INFINIBAND == (int)IBV_LINK_LAYER_INFINIBAND &&
                 (int)MCP_LINK_LAYER_ETHERNET == (int)IBV_LINK_LAYER_ETHERNET,
               "enum mcp_link_layer must keep libibverbs' values");

int mcp_sysfs_attr_read(const char *path, char *buf, size_t len)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return -errno;
  n = read(fd, buf, len - 1);
  if (n < 0) {
    int err = -errno;
    close(fd);
    return err;
  }
  close(fd);
  buf[n] = '\0';
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
    buf[--n] = '\0';
  return n > 0 ? 0 : -ENODATA;
}

/* snprintf into a PATH_MAX buffer; -ENAMETOOLONG instead of a silently cut path. */
static int path_fmt(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int path_fmt(char *out, const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(out, PATH_MAX, fmt, ap);
  va_end(ap);
  return n >= 0 && n < PATH_MAX ? 0 : -ENAMETOOLONG;
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

static int cmp_int(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The numeric entries of a folder (ports/, gids/, pkeys/), ascending. */
static int index_list(const char *dir, int **out)
{
  DIR *d = opendir(dir);
  struct dirent *de;
  int n = 0, cap = 0, *v = NULL;

  *out = NULL;
  if (d == NULL)
    return -errno;
  while ((de = readdir(d)) != NULL) {
    char *end;
    long x;

    if (de->d_name[0] < '0' || de->d_name[0] > '9')
      continue;
    x = strtol(de->d_name, &end, 10);
    if (*end != '\0' || x < 0 || x > INT_MAX)
      continue;
    if (n == cap) {
      int *nv = realloc(v, (size_t)(cap ? cap * 2 : 16) * sizeof(*v));
      if (nv == NULL) {
        free(v);
        closedir(d);
        return -ENOMEM;
      }
      v = nv;
      cap = cap ? cap * 2 : 16;
    }
    v[n++] = (int)x;
  }
  closedir(d);
  if (n > 0)
    qsort(v, (size_t)n, sizeof(*v), cmp_int);
  *out = v;
  return n;
}

int mcp_sysfs_parse_guid(const char *text, uint64_t *guid)
{
  uint64_t v = 0;
  int digits = 0;
  const char *p;

  for (p = text; *p != '\0'; p++) {
    if (*p == ':')
      continue;
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
      return -EINVAL;
    v = v << 4 | (uint64_t)(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10);
    digits++;
  }
  if (digits != 16)
    return -EINVAL;
  *guid = v;
  return 0;
}

int mcp_sysfs_parse_state(const char *text, int *num, char *name, size_t len)
{
  char *end;
  long v;

  errno = 0;
  v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != ':' || v < 0 || v > 255)
    return -EINVAL;
  end++;
  while (*end == ' ')
    end++;
  *num = (int)v;
  snprintf(name, len, "%s", end);
  return 0;
}

int mcp_sysfs_parse_rate(const char *text, int *mbps)
{
  char *end;
  double gbps;

  errno = 0;
  gbps = strtod(text, &end);
  if (errno != 0 || end == text || gbps <= 0 || gbps > 1e6 || strncmp(end, " Gb/sec", 7) != 0)
    return -EINVAL;
  *mbps = (int)(gbps * 1000 + 0.5);
  return 0;
}

/* Type and netdev of slot i: 1 to keep the entry, 0 to skip it. */
static int gid_attrs_read(const char *pdir, int have_attrs, int link_layer, int i, struct mcp_sysfs_gid *g)
{
  char path[PATH_MAX], text[64];

  if (!have_attrs) {
    /* Kernels before gid_attrs knew only IB and RoCE v1, and no netdev per GID. */
    g->type = link_layer == MCP_LINK_LAYER_INFINIBAND ? MCP_GID_TYPE_IB : MCP_GID_TYPE_ROCE_V1;
    return 1;
  }
  if (path_fmt(path, "%s/gid_attrs/types/%d", pdir, i) != 0 ||
      mcp_sysfs_attr_read(path, text, sizeof(text)) != 0)
    return 0;
  if (strcmp(text, "RoCE v2") == 0)
    g->type = MCP_GID_TYPE_ROCE_V2;
  else if (strcmp(text, "IB/RoCE v1") == 0)
    g->type = link_layer == MCP_LINK_LAYER_INFINIBAND ? MCP_GID_TYPE_IB : MCP_GID_TYPE_ROCE_V1;
  else
    return 0;
  if (path_fmt(path, "%s/gid_attrs/ndevs/%d", pdir, i) != 0 ||
      mcp_sysfs_attr_read(path, text, sizeof(text)) != 0 || strlen(text) >= sizeof(g->netdev)) {
    /* InfiniBand GIDs have no netdev and the kernel says EINVAL; a RoCE GID always has
     * one, so a refusal there means the slot is not for us. */
    return link_layer == MCP_LINK_LAYER_INFINIBAND;
  }
  memcpy(g->netdev, text, strlen(text) + 1);
  return 1;
}

static int port_read_gids(const char *pdir, struct mcp_sysfs_port *p)
{
  static const uint8_t zero[16];
  char path[PATH_MAX], text[64];
  struct stat st;
  int *idx, n, k, have_attrs;

  if (path_fmt(path, "%s/gids", pdir) != 0)
    return -ENAMETOOLONG;
  n = index_list(path, &idx);
  if (n == -ENOENT)
    return 0; /* no GID table (iWARP exposes none here) */
  if (n < 0)
    return n;
  p->gid_slots = n;
  p->gid = calloc((size_t)(n > 0 ? n : 1), sizeof(*p->gid));
  if (p->gid == NULL) {
    free(idx);
    return -ENOMEM;
  }
  have_attrs = path_fmt(path, "%s/gid_attrs", pdir) == 0 && stat(path, &st) == 0;
  for (k = 0; k < n; k++) {
    struct mcp_sysfs_gid *g = &p->gid[p->ngid];

    memset(g, 0, sizeof(*g));
    g->index = idx[k];
    /* The kernel prints an empty slot as all zeros rather than failing. */
    if (path_fmt(path, "%s/gids/%d", pdir, idx[k]) != 0 ||
        mcp_sysfs_attr_read(path, text, sizeof(text)) != 0 || inet_pton(AF_INET6, text, g->raw) != 1 ||
        memcmp(g->raw, zero, 16) == 0 || !gid_attrs_read(pdir, have_attrs, p->link_layer, idx[k], g)) {
      p->gid_skipped++;
      continue;
    }
    p->ngid++;
  }
  free(idx);
  return 0;
}

static int port_read_pkeys(const char *pdir, struct mcp_sysfs_port *p)
{
  char path[PATH_MAX], text[32];
  int *idx, n, k;

  if (path_fmt(path, "%s/pkeys", pdir) != 0)
    return -ENAMETOOLONG;
  n = index_list(path, &idx);
  if (n == -ENOENT)
    return 0;
  if (n < 0)
    return n;
  if (n == 0) {
    free(idx);
    return 0;
  }
  /* Indexes, not positions: NCCL_IB_PKEY names a slot, so keep holes as 0x0000. */
  p->npkey = idx[n - 1] + 1;
  p->pkey = calloc((size_t)p->npkey, sizeof(*p->pkey));
  if (p->pkey == NULL) {
    free(idx);
    p->npkey = 0;
    return -ENOMEM;
  }
  for (k = 0; k < n; k++) {
    char *end;
    unsigned long v;

    if (path_fmt(path, "%s/pkeys/%d", pdir, idx[k]) != 0 ||
        mcp_sysfs_attr_read(path, text, sizeof(text)) != 0)
      continue;
    v = strtoul(text, &end, 16);
    if (*end == '\0' && v <= 0xffff)
      p->pkey[idx[k]] = (uint16_t)v;
  }
  free(idx);
  return 0;
}

static int port_read(const char *ddir, int num, struct mcp_sysfs_port *p)
{
  char pdir[PATH_MAX], path[PATH_MAX], text[64];
  int err;

  p->num = num;
  if (path_fmt(pdir, "%s/ports/%d", ddir, num) != 0)
    return -ENAMETOOLONG;
  if (path_fmt(path, "%s/state", pdir) == 0 && mcp_sysfs_attr_read(path, text, sizeof(text)) == 0)
    mcp_sysfs_parse_state(text, &p->state, p->state_name, sizeof(p->state_name));
  if (path_fmt(path, "%s/phys_state", pdir) == 0 && mcp_sysfs_attr_read(path, text, sizeof(text)) == 0)
    mcp_sysfs_parse_state(text, &p->phys_state, p->phys_state_name, sizeof(p->phys_state_name));
  if (path_fmt(path, "%s/link_layer", pdir) == 0 && mcp_sysfs_attr_read(path, text, sizeof(text)) == 0)
    p->link_layer = strcmp(text, "InfiniBand") == 0 ? MCP_LINK_LAYER_INFINIBAND
      : strcmp(text, "Ethernet") == 0               ? MCP_LINK_LAYER_ETHERNET
                                                    : MCP_LINK_LAYER_UNSPECIFIED;
  /* Some drivers answer EINVAL for the rate of a port that is down: leave it unknown. */
  if (path_fmt(path, "%s/rate", pdir) == 0 && mcp_sysfs_attr_read(path, text, sizeof(text)) == 0 &&
      mcp_sysfs_parse_rate(text, &p->rate_mbps) == 0)
    snprintf(p->rate, sizeof(p->rate), "%s", text);
  if (path_fmt(path, "%s/lid", pdir) == 0 && mcp_sysfs_attr_read(path, text, sizeof(text)) == 0) {
    char *end;
    unsigned long v = strtoul(text, &end, 16);
    if (*end == '\0' && v <= 0xffff)
      p->lid = (uint16_t)v;
  }
  err = port_read_gids(pdir, p);
  if (err == 0)
    err = port_read_pkeys(pdir, p);
  return err;
}

/* The kernel driver bound to the device's parent, or a software device's own name. */
static void driver_read(const char *ddir, const char *name, char *out, size_t len)
{
  char path[PATH_MAX], target[PATH_MAX];
  ssize_t n;

  out[0] = '\0';
  if (path_fmt(path, "%s/device/driver", ddir) == 0 && (n = readlink(path, target, sizeof(target) - 1)) > 0) {
    const char *slash;
    target[n] = '\0';
    slash = strrchr(target, '/');
    snprintf(out, len, "%.31s", slash ? slash + 1 : target); /* driver names are short */
    return;
  }
  /* rxe has no parent device, only a "parent" attribute naming its netdev. */
  if (path_fmt(path, "%s/parent", ddir) == 0 && access(path, R_OK) == 0 && strncmp(name, "rxe", 3) == 0)
    snprintf(out, len, "rxe");
}

int mcp_sysfs_dev_names(const char *root, char (*names)[MCP_DEV_NAME_MAX], int max)
{
  char path[PATH_MAX];
  struct dirent *de;
  DIR *d;
  int n = 0;

  if (path_fmt(path, "%s/class/infiniband", root) != 0)
    return -ENAMETOOLONG;
  d = opendir(path);
  if (d == NULL)
    return errno == ENOENT ? 0 : -errno;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.' || strlen(de->d_name) >= MCP_DEV_NAME_MAX)
      continue;
    if (n < max)
      snprintf(names[n], MCP_DEV_NAME_MAX, "%.63s", de->d_name);
    n++;
  }
  closedir(d);
  if (n > 0)
    qsort(names, (size_t)(n < max ? n : max), MCP_DEV_NAME_MAX, cmp_name);
  return n;
}

int mcp_sysfs_dev_read(const char *root, const char *name, struct mcp_sysfs_dev *dev, char *err,
                       size_t errlen)
{
  char ddir[PATH_MAX], path[PATH_MAX], text[64];
  int *nums = NULL, n, k, rc;

  memset(dev, 0, sizeof(*dev));
  if (strlen(name) >= sizeof(dev->name) || path_fmt(ddir, "%s/class/infiniband/%s", root, name) != 0) {
    snprintf(err, errlen, "device name '%s' is too long", name);
    return -ENAMETOOLONG;
  }
  snprintf(dev->name, sizeof(dev->name), "%s", name);
  if (path_fmt(path, "%s/node_guid", ddir) == 0 && mcp_sysfs_attr_read(path, text, sizeof(text)) == 0)
    mcp_sysfs_parse_guid(text, &dev->node_guid);
  if (path_fmt(path, "%s/sys_image_guid", ddir) == 0 && mcp_sysfs_attr_read(path, text, sizeof(text)) == 0)
    mcp_sysfs_parse_guid(text, &dev->sys_image_guid);
  if (path_fmt(path, "%s/device", ddir) == 0)
    dev->device_path = realpath(path, NULL);
  if (path_fmt(path, "%s/device/physfn", ddir) == 0)
    dev->pf_path = realpath(path, NULL);
  driver_read(ddir, name, dev->driver, sizeof(dev->driver));

  if (path_fmt(path, "%s/ports", ddir) != 0)
    return -ENAMETOOLONG;
  n = index_list(path, &nums);
  if (n < 0) {
    snprintf(err, errlen, "%s: cannot list %s: %s", name, path, strerror(-n));
    return n;
  }
  dev->port = calloc((size_t)(n > 0 ? n : 1), sizeof(*dev->port));
  if (dev->port == NULL) {
    free(nums);
    snprintf(err, errlen, "%s: out of memory", name);
    return -ENOMEM;
  }
  for (k = 0; k < n; k++) {
    rc = port_read(ddir, nums[k], &dev->port[k]);
    dev->nport = k + 1;
    if (rc != 0) {
      snprintf(err, errlen, "%s port %d: cannot read its tables: %s", name, nums[k], strerror(-rc));
      free(nums);
      return rc;
    }
  }
  free(nums);
  return 0;
}

void mcp_sysfs_dev_free(struct mcp_sysfs_dev *dev)
{
  int i;

  for (i = 0; i < dev->nport; i++) {
    free(dev->port[i].gid);
    free(dev->port[i].pkey);
  }
  free(dev->port);
  free(dev->device_path);
  free(dev->pf_path);
  memset(dev, 0, sizeof(*dev));
}

const struct mcp_sysfs_port *mcp_sysfs_port_find(const struct mcp_sysfs_dev *dev, int num)
{
  int i;

  for (i = 0; i < dev->nport; i++)
    if (dev->port[i].num == num)
      return &dev->port[i];
  return NULL;
}
