/*
 * test_fabric_topo.c - the pciPath, guid and port getProperties reports, on sysfs fixtures
 * of real adapter shapes (test/unit/fixtures/make-fixtures.sh): a dual-port adapter, a
 * dual-function one, SR-IOV VFs with and without NCCL_IB_MERGE_VFS, NICs behind a PCIe
 * switch, NICs on a VM's root bus, soft-RoCE. The expectations are what NCCL's own IB
 * transport reports for the same host (net_ib init: function digit of the PCI path
 * zeroed, port = verbs port + index among devices with that path in PCI order), except
 * where fabric_topo.h says mcpnet departs from it on purpose (vm-bus0).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "fabric/fabric_sysfs.h"
#include "fabric/fabric_topo.h"

#define FIXTURES MCP_SOURCE_DIR "/test/unit/fixtures/"

static const char *root_of(const char *host)
{
  static char path[512];
  snprintf(path, sizeof(path), FIXTURES "%s/sys", host);
  return path;
}

/* The inventory discovery would build on this host: every ACTIVE port of every device,
 * guid the device's sys_image_guid, then the topology step under test. */
static int load(const char *host, int merge_vfs, struct mcp_fabric *fab)
{
  char names[8][MCP_DEV_NAME_MAX], err[256];
  int n = mcp_sysfs_dev_names(root_of(host), names, 8), i, k;

  memset(fab, 0, sizeof(*fab));
  for (i = 0; i < n && i < 8; i++) {
    struct mcp_sysfs_dev sd;

    if (mcp_sysfs_dev_read(root_of(host), names[i], &sd, err, sizeof(err)) != 0) {
      fprintf(stderr, "%s: %s\n", host, err);
      return -1;
    }
    for (k = 0; k < sd.nport; k++) {
      struct mcp_net_dev *d = &fab->dev[fab->ndev];

      if (sd.port[k].state != 4)
        continue;
      if (sd.nport > 1)
        snprintf(d->name, sizeof(d->name), "%.40s:%d", sd.name, sd.port[k].num);
      else
        snprintf(d->name, sizeof(d->name), "%s", sd.name);
      snprintf(d->ibdev, sizeof(d->ibdev), "%s", sd.name);
      d->port = sd.port[k].num;
      d->guid = sd.sys_image_guid;
      fab->ndev++;
    }
    mcp_sysfs_dev_free(&sd);
  }
  return mcp_fabric_topo_assign(fab, root_of(host), merge_vfs);
}

struct expect {
  const char *name;
  const char *pci; /* below <fixture>/sys/devices/pci0000:00/, NULL: no pciPath */
  uint64_t guid;
  int port;
};

/* Checks every device of the host against want (in inventory order) and prints the row
 * the architecture document's table shows. */
static void check_host(const char *host, int merge_vfs, const struct expect *want, int nwant)
{
  struct mcp_fabric fab;
  char base[PATH_MAX], *real, pci[PATH_MAX];
  int i;

  CHECK_EQ_INT(load(host, merge_vfs, &fab), 0);
  CHECK_EQ_INT(fab.ndev, nwant);
  real = realpath(root_of(host), NULL);
  snprintf(base, sizeof(base), "%s/devices/pci0000:00/", real ? real : "?");
  free(real);
  for (i = 0; i < fab.ndev && i < nwant; i++) {
    const struct mcp_net_dev *d = &fab.dev[i];

    CHECK_EQ_STR(d->name, want[i].name);
    if (want[i].pci == NULL) {
      CHECK(d->pci_path == NULL);
    } else {
      snprintf(pci, sizeof(pci), "%s%s", base, want[i].pci);
      CHECK_EQ_STR(d->pci_path, pci);
    }
    CHECK(d->guid == want[i].guid);
    CHECK_EQ_INT(d->topo_port, want[i].port);
    printf("  %s%s | %s | %s | %016llx | %d\n", host, merge_vfs ? "" : " (MERGE_VFS=0)", d->name,
           d->pci_path && strlen(d->pci_path) > strlen(base) ? d->pci_path + strlen(base) : "NULL",
           (unsigned long long)d->guid, d->topo_port);
  }
  mcp_fabric_release(&fab);
}

/* (guid, port) is one physical port to NCCL: no two devices may share it by accident. */
static void check_unique(const char *host, int merge_vfs)
{
  struct mcp_fabric fab;
  int i, j;

  CHECK_EQ_INT(load(host, merge_vfs, &fab), 0);
  for (i = 0; i < fab.ndev; i++)
    for (j = i + 1; j < fab.ndev; j++)
      if (fab.dev[i].guid == fab.dev[j].guid && fab.dev[i].topo_port == fab.dev[j].topo_port) {
        fprintf(stderr, "%s: %s and %s both report guid %016llx port %d\n", host, fab.dev[i].name,
                fab.dev[j].name, (unsigned long long)fab.dev[i].guid, fab.dev[i].topo_port);
        CHECK(0);
      }
  mcp_fabric_release(&fab);
}

static void test_busid(void)
{
  char p[64];

  CHECK(mcp_fabric_pci_busid("/sys/devices/pci0000:00/0000:3b:00.1") == 0x3b001);
  CHECK(mcp_fabric_pci_busid("/sys/devices/pci0000:00/0001:3b:1f.7/") == 0x13b1f7);
  CHECK(mcp_fabric_pci_busid("/sys/devices/virtual/net/eth0") == -EINVAL);
  CHECK(mcp_fabric_pci_busid("/sys/devices/pci0000:00/0000:3b:00") == -EINVAL);
  CHECK(mcp_fabric_pci_busid(NULL) == -EINVAL);
  snprintf(p, sizeof(p), "/sys/devices/pci0000:00/0000:3b:00.1");
  CHECK_EQ_INT(mcp_fabric_pci_nic_path(p), 1);
  CHECK_EQ_STR(p, "/sys/devices/pci0000:00/0000:3b:00.0");
  /* Not a PCI address: left alone rather than have a digit overwritten. */
  snprintf(p, sizeof(p), "/sys/devices/vmbus/f8b3781a-1e82");
  CHECK_EQ_INT(mcp_fabric_pci_nic_path(p), 0);
  CHECK_EQ_STR(p, "/sys/devices/vmbus/f8b3781a-1e82");
}

/* One function, two ports: NCCL counts the first port as a device before the second on
 * the same path, so the ports are 1 and 3 (both verbs port + index). */
static void test_dual_port(void)
{
  static const struct expect want[] = {
    {"mlx4_0:1", "0000:81:00.0", 0x0002c90300fbcd13ull, 1},
    {"mlx4_0:2", "0000:81:00.0", 0x0002c90300fbcd13ull, 3},
  };
  check_host("cx-dualport", 1, want, 2);
  check_unique("cx-dualport", 1);
}

/* Two functions of one adapter, each verbs port 1 and one sys_image_guid: before, both
 * reported (guid, 1) and NCCL took them for one port. Now ports 1 and 2 of one NIC. */
static void test_dual_function(void)
{
  static const struct expect want[] = {
    {"mlx5_0", "0000:3b:00.0", 0x0c42a10300b53e10ull, 1},
    {"mlx5_1", "0000:3b:00.0", 0x0c42a10300b53e10ull, 2},
  };
  check_host("cx-split", 1, want, 2);
  check_unique("cx-split", 1);
}

/* VFs at functions 2 and 3 of the PF's device: its NIC, ports 2 and 3, whatever
 * NCCL_IB_MERGE_VFS says (the function digit alone puts them there). */
static void test_sriov(void)
{
  static const struct expect want[] = {
    {"mlx5_0", "0000:3b:00.0", 0x0c42a10300b53e10ull, 1},
    {"mlx5_2", "0000:3b:00.0", 0x0c42a10300b53e10ull, 2},
    {"mlx5_3", "0000:3b:00.0", 0x0c42a10300b53e10ull, 3},
  };
  check_host("sriov", 1, want, 3);
  check_host("sriov", 0, want, 3);
  check_unique("sriov", 1);
}

/* ARI: the VF at 3b:01.0 joins its PF's NIC only with NCCL_IB_MERGE_VFS=1 (the default).
 * With 0 it is a NIC of its own whose port 1 has the PF's guid, as in NCCL: the VF
 * shares the PF's physical port, so NCCL counting them as one port is right. */
static void test_sriov_ari(void)
{
  static const struct expect merged[] = {
    {"mlx5_0", "0000:3b:00.0", 0x0c42a10300b53e10ull, 1},
    {"mlx5_7", "0000:3b:00.0", 0x0c42a10300b53e10ull, 2},
    {"mlx5_8", "0000:3b:00.0", 0x0c42a10300b53e10ull, 3},
  };
  static const struct expect apart[] = {
    {"mlx5_0", "0000:3b:00.0", 0x0c42a10300b53e10ull, 1},
    {"mlx5_7", "0000:3b:00.0", 0x0c42a10300b53e10ull, 2},
    {"mlx5_8", "0000:3b:01.0", 0x0c42a10300b53e10ull, 1},
  };
  check_host("sriov-ari", 1, merged, 3);
  check_unique("sriov-ari", 1);
  check_host("sriov-ari", 0, apart, 3);
}

/* Two NICs behind one switch: separate PCI paths, each its own port 1. */
static void test_pcie_switch(void)
{
  static const struct expect want[] = {
    {"mlx5_0", "0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0x9c63c00300112200ull, 1},
    {"mlx5_1", "0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0x9c63c00300112300ull, 1},
  };
  check_host("pcie-switch", 1, want, 2);
}

/* NCCL zeroes the device digits of every path under NCCL_IB_MERGE_VFS and would name
 * both NICs 0000:00:00.0 (the host bridge), ports 1 and 2 of one NIC it fuses by
 * default. Neither is a VF (no physfn), so mcpnet keeps them apart. */
static void test_vm_root_bus(void)
{
  static const struct expect want[] = {
    {"mlx5_0", "0000:00:05.0", 0x0c42a10300c10a00ull, 1},
    {"mlx5_1", "0000:00:06.0", 0x0c42a10300c10b00ull, 1},
  };
  check_host("vm-bus0", 1, want, 2);
}

/* Soft-RoCE has no PCI device: no pciPath, the verbs port, as NCCL. */
static void test_no_pci(void)
{
  static const struct expect want[] = {
    {"rxe0", NULL, 0x505400fffe000000ull, 1},
    {"rxeA", NULL, 0x6c3e1ffffe2d0a01ull, 1},
    {"rxeB", NULL, 0x2a1142fffe8c7b02ull, 1},
  };
  check_host("netns-eth0", 1, want, 3);
}

/* Ports are numbered in PCI order, not in the order devices were found: a rank whose
 * verbs list starts with the second function still calls it port 2. */
static void test_pci_order(void)
{
  struct mcp_fabric fab;

  memset(&fab, 0, sizeof(fab));
  fab.ndev = 2;
  snprintf(fab.dev[0].ibdev, sizeof(fab.dev[0].ibdev), "mlx5_1");
  snprintf(fab.dev[1].ibdev, sizeof(fab.dev[1].ibdev), "mlx5_0");
  fab.dev[0].port = fab.dev[1].port = 1;
  CHECK_EQ_INT(mcp_fabric_topo_assign(&fab, root_of("cx-split"), 1), 0);
  CHECK_EQ_INT(fab.dev[0].topo_port, 2);
  CHECK_EQ_INT(fab.dev[1].topo_port, 1);
  /* Assigning again (a later init) replaces the paths rather than leaking them. */
  CHECK_EQ_INT(mcp_fabric_topo_assign(&fab, root_of("cx-split"), 1), 0);
  CHECK(fab.dev[0].pci_path != NULL && strcmp(fab.dev[0].pci_path, fab.dev[1].pci_path) == 0);
  mcp_fabric_release(&fab);
}

int main(void)
{
  RUN_TEST(test_busid);
  RUN_TEST(test_dual_port);
  RUN_TEST(test_dual_function);
  RUN_TEST(test_sriov);
  RUN_TEST(test_sriov_ari);
  RUN_TEST(test_pcie_switch);
  RUN_TEST(test_vm_root_bus);
  RUN_TEST(test_no_pci);
  RUN_TEST(test_pci_order);
  return TEST_EXIT();
}
