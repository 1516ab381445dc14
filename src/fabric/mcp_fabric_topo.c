/*
 * mcp_fabric_topo.c - pciPath and port as NCCL's topology expects them (fabric_topo.h).
 *
 * Why it is its own step: the port number of a device depends on the other devices of
 * the inventory (the second function of an adapter is its second port), so it can only
 * be given once discovery has found them all, and reading it from a sysfs root given as a
 * parameter lets fixture trees of real adapters test it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/fabric_topo.h"

/* The last path component, without a trailing '/'; its length in *len. */
static const char *last_component(const char *path, size_t *len)
{
  size_t n = strlen(path);
  const char *p;

  while (n > 0 && path[n - 1] == '/')
    n--;
  p = path + n;
  while (p > path && p[-1] != '/')
    p--;
  *len = (size_t)(path + n - p);
  return p;
}

static int hex_digit(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -EINVAL;
}

/* "DDDD:BB:dd.f": domain, bus, device and function, each hex, in sysfs's fixed widths. */
int64_t mcp_fabric_pci_busid(const char *path)
{
  static const char shape[] = "xxxx:xx:xx.x";
  size_t len, i;
  const char *c;
  int64_t id = 0;

  if (path == NULL)
    return -EINVAL;
  c = last_component(path, &len);
  if (len != sizeof(shape) - 1)
    return -EINVAL;
  for (i = 0; i < len; i++) {
    if (shape[i] != 'x') {
      if (c[i] != shape[i])
        return -EINVAL;
      continue;
    }
    if (hex_digit(c[i]) < 0)
      return -EINVAL;
    id = id << 4 | hex_digit(c[i]);
  }
  return id;
}

int mcp_fabric_pci_nic_path(char *path)
{
  size_t n;

  if (mcp_fabric_pci_busid(path) < 0)
    return 0;
  n = strlen(path);
  while (n > 0 && path[n - 1] == '/')
    path[--n] = '\0';
  path[n - 1] = '0';
  return 1;
}

/* The path NCCL's topology should place one device under: its PCI function, or its PF's
 * for a VF when VFs are merged, with the function digit zeroed. NULL without one. */
static char *nic_path(const char *root, const char *ibdev, int merge_vfs)
{
  char link[PATH_MAX];
  char *p = NULL;
  int n;

  if (merge_vfs) {
    n = snprintf(link, sizeof(link), "%s/class/infiniband/%s/device/physfn", root, ibdev);
    if (n > 0 && (size_t)n < sizeof(link))
      p = realpath(link, NULL);
  }
  if (p == NULL) {
    n = snprintf(link, sizeof(link), "%s/class/infiniband/%s/device", root, ibdev);
    if (n > 0 && (size_t)n < sizeof(link))
      p = realpath(link, NULL);
  }
  if (p != NULL)
    mcp_fabric_pci_nic_path(p);
  return p;
}

/* The device's own PCI function: NCCL orders its devices by it. */
static int64_t function_id(const char *root, const char *ibdev)
{
  char link[PATH_MAX];
  char *p;
  int64_t id;
  int n = snprintf(link, sizeof(link), "%s/class/infiniband/%s/device", root, ibdev);

  if (n <= 0 || (size_t)n >= sizeof(link) || (p = realpath(link, NULL)) == NULL)
    return -ENOENT;
  id = mcp_fabric_pci_busid(p);
  free(p);
  return id;
}

/* Does device a come before device b in NCCL's order? PCI functions ascending, devices
 * without one last, equal keys (the ports of one function) in inventory order. */
static int before(const int64_t *id, int a, int b)
{
  if (id[a] != id[b] && (id[a] >= 0 || id[b] >= 0)) { /* two without an id tie, whatever the errno */
    if (id[a] < 0 || id[b] < 0)
      return id[b] < 0;
    return id[a] < id[b];
  }
  return a < b;
}

int mcp_fabric_topo_assign(struct mcp_fabric *fab, const char *sysfs_root, int merge_vfs)
{
  int64_t id[MCP_MAX_NET_DEVS];
  int i, j;

  for (i = 0; i < fab->ndev; i++) {
    free(fab->dev[i].pci_path);
    fab->dev[i].pci_path = NULL;
  }
  for (i = 0; i < fab->ndev; i++) {
    /* realpath fails for a device without a node (rxe, siw): no path, as in NCCL. */
    errno = 0;
    fab->dev[i].pci_path = nic_path(sysfs_root, fab->dev[i].ibdev, merge_vfs);
    if (fab->dev[i].pci_path == NULL && errno == ENOMEM)
      return -ENOMEM;
    id[i] = function_id(sysfs_root, fab->dev[i].ibdev);
  }
  for (i = 0; i < fab->ndev; i++) {
    struct mcp_net_dev *d = &fab->dev[i];

    d->topo_port = d->port;
    if (d->pci_path == NULL)
      continue;
    for (j = 0; j < fab->ndev; j++)
      if (j != i && fab->dev[j].pci_path != NULL && strcmp(fab->dev[j].pci_path, d->pci_path) == 0 &&
          before(id, j, i))
        d->topo_port++;
  }
  return 0;
}
