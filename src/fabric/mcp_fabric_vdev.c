/*
 * mcp_fabric_vdev.c - the table of device indices NCCL holds, and which physical devices
 * each stands for (see fabric_vdev.h for the index space).
 *
 * NCCL fuses NICs once per process (makeVDevice, from its topology code) and then keeps
 * the indices, while mcpnet gives its fabric back with the last comm and discovers it
 * again for the next. So the table is process state of its own, never torn down, and
 * names its members by device name: a rediscovery that finds the same ports in another
 * order still resolves every index to the same hardware, and one that lost a member says
 * so instead of using whatever port took its place. Logic on plain data, so unit tests
 * drive it with made-up fabrics; the process's table is one instance behind a lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "fabric/fabric_sysfs.h"
#include "fabric/fabric_vdev.h"

_Static_assert(MCP_RANKMAP_FUSE_MAX == MCP_VDEV_MAX_MEMBERS, "a rank map's fused set fits a virtual device");

#define ERR(rc, ...) (snprintf(err, errlen, __VA_ARGS__), (rc))

static const char *link_layer_name(int ll)
{
  return ll == MCP_LINK_LAYER_INFINIBAND ? "InfiniBand"
    : ll == MCP_LINK_LAYER_ETHERNET      ? "Ethernet"
                                         : "unknown";
}

static int find_name(const struct mcp_fabric *f, const char *name)
{
  for (int i = 0; i < f->ndev; i++)
    if (strcmp(f->dev[i].name, name) == 0)
      return i;
  return -ENOENT;
}

/* The '+'-item of the rank map entry that names port d, or -ENOENT. */
static int pin_group(const struct mcp_rankmap_entry *pin, const struct mcp_net_dev *d)
{
  if (pin == NULL)
    return -ENOENT;
  for (int k = 0; k < pin->ndev; k++)
    if (strcmp(pin->dev[k].name, d->ibdev) == 0 && (pin->dev[k].port < 0 || pin->dev[k].port == d->port))
      return pin->dev[k].group;
  return -ENOENT;
}

static void name_from_members(struct mcp_vdev *v)
{
  size_t used = 0;

  v->name[0] = '\0';
  for (int i = 0; i < v->nmem && used < sizeof(v->name); i++)
    used += (size_t)snprintf(v->name + used, sizeof(v->name) - used, "%s%s", i ? "+" : "", v->mem[i]);
}

/* The one check that a fused device's ports share a link layer (an RC connection cannot
 * stripe over InfiniBand and Ethernet ports at once, and the handshake names one link
 * layer per end): when one is made (add_member) and each time its members are resolved
 * for use (mcp_vdev_table_info), since a rediscovered port keeps its name, not
 * necessarily its link layer. first < 0: nothing to compare with. */
static int same_link_layer(const struct mcp_fabric *f, int first, int m, const char *what, char *err,
                           size_t errlen)
{
  if (first >= 0 && f->dev[first].link_layer != f->dev[m].link_layer)
    return ERR(
      -EINVAL,
      "%s: cannot fuse %s (%s) with %s (%s): the members of a fused device must share one link layer; "
      "select devices of one kind (NCCL_IB_HCA, MCPNET_RANK_MAP)",
      what, f->dev[first].name, link_layer_name(f->dev[first].link_layer), f->dev[m].name,
      link_layer_name(f->dev[m].link_layer));
  return 0;
}

/* Adds port m of f to v: a fused device has at most MCP_VDEV_MAX_MEMBERS ports, all of
 * one link layer. */
static int add_member(struct mcp_vdev *v, const struct mcp_fabric *f, int m, const char *what, char *err,
                      size_t errlen)
{
  int rc;

  if (v->nmem == MCP_VDEV_MAX_MEMBERS)
    return ERR(-EINVAL, "%s: more than %d ports (%s would be the %dth); NCCL fuses at most %d", what,
               MCP_VDEV_MAX_MEMBERS, f->dev[m].name, v->nmem + 1, MCP_VDEV_MAX_MEMBERS);
  if ((rc = same_link_layer(f, v->nmem > 0 ? find_name(f, v->mem[0]) : -1, m, what, err, errlen)) != 0)
    return rc;
  snprintf(v->mem[v->nmem++], sizeof(v->mem[0]), "%s", f->dev[m].name);
  return 0;
}

void mcp_vdev_table_init(struct mcp_vdev_table *t)
{
  memset(t, 0, sizeof(*t));
  t->base = -1;
}

int mcp_vdev_table_count(const struct mcp_vdev_table *t)
{
  return t->nphys + (t->nvirt > 0 && t->base == t->nphys ? t->nvirt : 0);
}

/* Port m's plane's bit in a fused device's plane set: 1 << its index among the distinct
 * planes of f's ports in their order, index 0 standing for no plane, as NCCL numbers
 * them (at most MCP_PLANES_MAX defined ones: mcp_vdev_table_sync checks). */
static int plane_bit(const struct mcp_fabric *f, int m)
{
  int seen[MCP_MAX_NET_DEVS], n = 0;

  if (f->dev[m].plane < 0)
    return 1;
  for (int i = 0; i < f->ndev; i++) {
    int p = f->dev[i].plane, j;

    for (j = 0; j < n && seen[j] != p; j++)
      ;
    if (p < 0 || j < n)
      continue;
    seen[n++] = p;
    if (p == f->dev[m].plane)
      return n <= MCP_PLANES_MAX ? 1 << n : 0;
  }
  return 0;
}

/* The rail and plane of a device made of the ports mem[0..n) (see struct mcp_vdev_info). */
static void rail_plane(const struct mcp_fabric *f, const int *mem, int n, int *rail, int *plane)
{
  *rail = f->dev[mem[0]].rail;
  *plane = n > 1 ? MCP_PLANE_FUSED : f->dev[mem[0]].plane;
  for (int i = 0; i < n; i++) {
    if (f->dev[mem[i]].rail < 0 || f->dev[mem[i]].rail != *rail)
      *rail = -1;
    if (n > 1)
      *plane |= plane_bit(f, mem[i]);
  }
}

/* NCCL 2.30 fails its init when the ports have more planes than its fused devices' plane
 * sets can name; so does mcpnet, naming them. */
static int planes_check(const struct mcp_fabric *f, char *err, size_t errlen)
{
  int seen[MCP_MAX_NET_DEVS], n = 0;

  for (int i = 0; i < f->ndev; i++) {
    int j;

    for (j = 0; j < n && seen[j] != f->dev[i].plane; j++)
      ;
    if (f->dev[i].plane >= 0 && j == n)
      seen[n++] = f->dev[i].plane;
  }
  if (n > MCP_PLANES_MAX)
    return ERR(-EINVAL,
               "the ports are on %d planes (NCCL_IB_HCA name:port:rail:plane, MCPNET_RANK_MAP plane=); NCCL "
               "2.30 uses at most %d",
               n, MCP_PLANES_MAX);
  return 0;
}

int mcp_vdev_table_sync(struct mcp_vdev_table *t, const struct mcp_fabric *f,
                        const struct mcp_rankmap_entry *pin, char *err, size_t errlen)
{
  int placed[MCP_MAX_NET_DEVS] = {0};
  char what[320];

  if (planes_check(f, err, errlen) != 0)
    return -EINVAL;
  t->synced = 1;
  t->nphys = 0;
  for (int i = 0; i < f->ndev; i++) {
    struct mcp_vdev *v = &t->phys[t->nphys];
    int g = pin_group(pin, &f->dev[i]), rc;

    if (placed[i])
      continue;
    memset(v, 0, sizeof(*v));
    snprintf(what, sizeof(what), "MCPNET_RANK_MAP entry '%s'", pin != NULL ? pin->text : "");
    if ((rc = add_member(v, f, i, what, err, errlen)) != 0)
      return rc;
    placed[i] = 1;
    /* The other ports of its fused set join it (discovery put them in the map's order). */
    for (int j = i + 1; g >= 0 && j < f->ndev; j++) {
      if (placed[j] || pin_group(pin, &f->dev[j]) != g)
        continue;
      if ((rc = add_member(v, f, j, what, err, errlen)) != 0)
        return rc;
      placed[j] = 1;
    }
    name_from_members(v);
    t->nphys++;
  }
  if (t->nvirt > 0 && t->base != t->nphys)
    return ERR(1,
               "the devices were discovered again and NCCL's physical devices are now %d, not %d: "
               "the %d virtual device(s) NCCL made (indices %d..%d) are no longer offered",
               t->nphys, t->base, t->nvirt, t->base, t->base + t->nvirt - 1);
  return 0;
}

int mcp_vdev_table_info(const struct mcp_vdev_table *t, const struct mcp_fabric *f, int dev,
                        struct mcp_vdev_info *info, char *err, size_t errlen)
{
  const struct mcp_vdev *v;

  memset(info, 0, sizeof(*info));
  if (!t->synced) {
    if (dev < 0 || dev >= f->ndev)
      return ERR(-ENODEV, "device %d: there are %d device(s)", dev, f->ndev);
    info->nmem = info->nvp = 1;
    info->mem[0] = info->vp[0] = dev;
    info->name = f->dev[dev].name;
    rail_plane(f, info->mem, 1, &info->rail, &info->plane);
    return 1;
  }
  if (dev >= 0 && dev < t->nphys) {
    v = &t->phys[dev];
    info->nvp = 1;
    info->vp[0] = dev;
  } else if (t->nvirt > 0 && t->base == t->nphys && dev >= t->base && dev < t->base + t->nvirt) {
    v = &t->virt[dev - t->base];
    info->virt = 1;
    info->nvp = v->nvp;
    memcpy(info->vp, v->vp, sizeof(info->vp));
  } else {
    return ERR(-ENODEV, "device %d: there are %d device(s)", dev, mcp_vdev_table_count(t));
  }
  for (int i = 0; i < v->nmem; i++) {
    char what[sizeof(v->name) + 24];
    int rc;

    info->mem[i] = find_name(f, v->mem[i]);
    if (info->mem[i] < 0)
      return ERR(-ENODEV, "device %d (%s): its member %s is gone since the devices were discovered again",
                 dev, v->name, v->mem[i]);
    snprintf(what, sizeof(what), "device %d (%s)", dev, v->name);
    if ((rc = same_link_layer(f, i > 0 ? info->mem[0] : -1, info->mem[i], what, err, errlen)) != 0)
      return rc;
  }
  info->nmem = v->nmem;
  info->name = v->name;
  rail_plane(f, info->mem, info->nmem, &info->rail, &info->plane);
  return info->nmem;
}

int mcp_vdev_table_make(struct mcp_vdev_table *t, const struct mcp_fabric *f, int n, const int *devs, int max,
                        int *index, char *err, size_t errlen)
{
  struct mcp_vdev v;
  char what[64];

  if (max < 1 || max > MCP_VDEV_MAX_MEMBERS)
    max = MCP_VDEV_MAX_MEMBERS;
  if (n < 1 || n > max || devs == NULL)
    return ERR(-EINVAL, "makeVDevice: %d devices; a virtual device has 1..%d", n, max);
  if (t->nvirt == MCP_VDEV_MAX)
    return ERR(-ENOSPC, "makeVDevice: all %d virtual devices are made", MCP_VDEV_MAX);
  if (t->nvirt > 0 && t->base != t->nphys)
    return ERR(-EINVAL,
               "makeVDevice: the devices were discovered again (%d physical, %d when NCCL first fused)",
               t->nphys, t->base);
  memset(&v, 0, sizeof(v));
  snprintf(what, sizeof(what), "makeVDevice");
  for (int i = 0; i < n; i++) {
    struct mcp_vdev_info in;
    char why[256];
    int rc;

    if (devs[i] < 0 || devs[i] >= t->nphys)
      return ERR(-EINVAL,
                 "makeVDevice: device %d is not a physical device (0..%d): virtual devices do not nest",
                 devs[i], t->nphys - 1);
    for (int j = 0; j < i; j++)
      if (devs[j] == devs[i])
        return ERR(-EINVAL, "makeVDevice: device %d (%s) is named twice", devs[i], t->phys[devs[i]].name);
    rc = mcp_vdev_table_info(t, f, devs[i], &in, why, sizeof(why));
    if (rc < 0)
      return ERR(rc, "makeVDevice: %s", why);
    for (int k = 0; k < in.nmem; k++)
      if ((rc = add_member(&v, f, in.mem[k], what, err, errlen)) != 0)
        return rc;
    v.vp[v.nvp++] = devs[i];
  }
  name_from_members(&v);
  if (t->nvirt == 0)
    t->base = t->nphys;
  t->virt[t->nvirt] = v;
  *index = t->base + t->nvirt++;
  return 0;
}

/* The process's table: set at each discovery, read by listen/connect/getProperties, grown by
 * makeVDevice, none of them on the data path. */
static pthread_mutex_t vdev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcp_vdev_table table = {.base = -1};

int mcp_fabric_dev_members(const struct mcp_fabric *f, int dev, int members[MCP_VDEV_MAX_MEMBERS])
{
  struct mcp_vdev_info info;
  int rc;

  if (f == NULL)
    return -ENODEV;
  rc = mcp_fabric_vdev_info(f, dev, &info);
  if (rc > 0)
    memcpy(members, info.mem, sizeof(info.mem));
  return rc;
}

int mcp_fabric_vdev_info(const struct mcp_fabric *f, int dev, struct mcp_vdev_info *info)
{
  char err[384];
  int rc;

  pthread_mutex_lock(&vdev_lock);
  rc = mcp_vdev_table_info(&table, f, dev, info, err, sizeof(err));
  pthread_mutex_unlock(&vdev_lock);
  if (rc < 0)
    MCP_WARN("%s", err);
  return rc;
}

int mcp_fabric_vdev_sync(const struct mcp_fabric *f, const struct mcp_rankmap_entry *pin)
{
  char err[512];
  int rc;

  pthread_mutex_lock(&vdev_lock);
  rc = mcp_vdev_table_sync(&table, f, pin, err, sizeof(err));
  pthread_mutex_unlock(&vdev_lock);
  if (rc != 0)
    MCP_WARN("%s", err);
  return rc < 0 ? rc : 0;
}

int mcp_fabric_vdev_count(const struct mcp_fabric *f)
{
  int n;

  pthread_mutex_lock(&vdev_lock);
  n = table.synced ? mcp_vdev_table_count(&table) : f->ndev;
  pthread_mutex_unlock(&vdev_lock);
  return n;
}

int mcp_fabric_make_vdev(const struct mcp_fabric *f, int n, const int *devs, int max, int *index)
{
  char err[512];
  int rc;

  pthread_mutex_lock(&vdev_lock);
  rc = mcp_vdev_table_make(&table, f, n, devs, max, index, err, sizeof(err));
  if (rc == 0)
    MCP_INFO(NCCL_INIT | NCCL_NET, "virtual device %d: %s (%d port(s), striped in this order)", *index,
             table.virt[*index - table.base].name, table.virt[*index - table.base].nmem);
  pthread_mutex_unlock(&vdev_lock);
  if (rc != 0)
    MCP_WARN("%s", err);
  return rc;
}
