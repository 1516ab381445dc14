/*
 * test_doctor_rankmap.c - mcpnet-doctor --suggest-rank-map on sysfs fixtures of GPU hosts
 * (test/unit/fixtures/make-fixtures.sh, gpu8-*): the exact MCPNET_RANK_MAP printed for an
 * 8-GPU/8-NIC host behind PCIe switches with a front-end NIC named between the rail NICs,
 * for dual-port NICs with one port down, for four NICs shared by eight GPUs, and for
 * two NICs per GPU (fused with '*'), each with the rails the topology shows (rail=, NCCL
 * 2.30), and none for GPUs and NICs on root ports of their own; how
 * CUDA_VISIBLE_DEVICES shifts local ranks onto other GPUs; the notes about CUDA's device
 * order; and the PCI distance tiers on paths of each kind. Every suggested map must also
 * parse with the plugin's own rank-map parser.
 */
#include <errno.h>
#include <stdlib.h>

#include "doctor_rankmap.h"
#include "mcp_test.h"
#include "core/rankmap.h"

#define FIXTURES MCP_SOURCE_DIR "/test/unit/fixtures/"

static char text[16384];

/* Runs the suggestion on a fixture host; the reasoning lands in text, the map in map. */
static int suggest(const char *host, const char *cvd, const char *order, char *map, size_t len, char *err)
{
  char root[512];
  FILE *f = fmemopen(text, sizeof(text), "w");
  int rc;

  snprintf(root, sizeof(root), FIXTURES "%s/sys", host);
  memset(text, 0, sizeof(text));
  err[0] = '\0';
  if (f == NULL)
    return -ENOMEM;
  rc = doctor_rankmap_suggest(root, cvd, order, f, map, len, err, 256);
  fclose(f);
  if (rc != 0)
    fprintf(stderr, "%s: %d %s\n", host, rc, err);
  return rc;
}

static void check_parses(const char *map)
{
  static struct mcp_rankmap m;
  char err[256];

  CHECK_EQ_INT(mcp_rankmap_parse(map, &m, err, sizeof(err)), 0);
}

static void test_switch_host(void)
{
  char map[1024], err[256];

  CHECK_EQ_INT(suggest("gpu8-switch", NULL, "PCI_BUS_ID", map, sizeof(map), err), 0);
  /* mlx5_4 is the front-end NIC on a root port: no GPU is nearer to it than to its rail NIC. */
  /* Every GPU shares its switch with its NIC: rails, numbered over the NICs behind a GPU's
   * switch in PCI order (the front-end mlx5_4 is on none, so mlx5_5 is rail 4). */
  CHECK_EQ_STR(map,
               "0=mlx5_0:1,rail=0;1=mlx5_1:1,rail=1;2=mlx5_2:1,rail=2;3=mlx5_3:1,rail=3;4=mlx5_5:1,rail=4;"
               "5=mlx5_6:1,rail=5;6=mlx5_7:1,rail=6;7=mlx5_8:1,rail=7");
  check_parses(map);
  CHECK(strstr(text,
               "  local rank 4: GPU 4 0000:92:00.0 (NUMA node 1) -> mlx5_5:1 0000:93:00.0 (NUMA node 1): "
               "same PCIe switch (both below 0000:90:00.0), 4 bridge hops\n") != NULL);
  CHECK(strstr(text, "MCPNET_RANK_MAP='0=mlx5_0:1,rail=0;1=mlx5_1:1,rail=1;") != NULL);
  CHECK(strstr(text,
               "  rails: every rank's port shares a PCIe switch with its GPU (a rail-optimized layout), so "
               "each entry names its port's rail (rail=): its index among the 8 port(s) behind a GPU's "
               "switch, in PCI order") != NULL);
  /* PCI_BUS_ID given: no note about CUDA's order. */
  CHECK(strstr(text, "CUDA_DEVICE_ORDER") == NULL);
  /* The front-end NIC is not fused into a rank: it shares no switch with a GPU. */
  CHECK(strstr(text,
               "  unused: mlx5_4:1 0000:50:00.0 (NUMA node 0): no GPU of a rank with a port of its own "
               "shares its PCIe switch\n") != NULL);
}

static void test_dualport_host(void)
{
  char map[1024], err[256];

  CHECK_EQ_INT(suggest("gpu8-dualport", NULL, "PCI_BUS_ID", map, sizeof(map), err), 0);
  /* Two GPUs per switch get one port each; port 2 of mlx5_3 is down, so ranks 6 and 7
   * share port 1 of their own switch's NIC rather than cross to another switch. */
  /* mlx5_3:2, down, still holds rail 7: a port down on one host renumbers nothing. */
  CHECK_EQ_STR(map,
               "0=mlx5_0:1,rail=0;1=mlx5_0:2,rail=1;2=mlx5_1:1,rail=2;3=mlx5_1:2,rail=3;4=mlx5_2:1,rail=4;"
               "5=mlx5_2:2,rail=5;6-7=mlx5_3:1,rail=6");
  check_parses(map);
  CHECK(strstr(text, "  not mlx5_3:2: the port is 1: DOWN, not ACTIVE\n") != NULL);
  CHECK(strstr(text,
               "local rank 7: GPU 7 0000:a3:00.0 (NUMA node 1) -> mlx5_3:1 0000:a4:00.0 (NUMA node 1): "
               "same PCIe switch (both below 0000:a0:00.0), 4 bridge hops, shared with an earlier rank\n") !=
        NULL);
}

static void test_fewer_nics(void)
{
  char map[1024], err[256];

  CHECK_EQ_INT(suggest("gpu8-nic4", NULL, "PCI_BUS_ID", map, sizeof(map), err), 0);
  /* One NIC per GPU pair: one rail per pair, NCCL's rail-optimized "NIC i on rail i". */
  CHECK_EQ_STR(map, "0-1=mlx5_0:1,rail=0;2-3=mlx5_1:1,rail=1;4-5=mlx5_2:1,rail=2;6-7=mlx5_3:1,rail=3");
  check_parses(map);
}

static void test_more_nics(void)
{
  char map[1024], err[256];

  /* Two NICs behind each GPU's switch: the second is fused into the rank's device. */
  CHECK_EQ_INT(suggest("gpu4-nic8", NULL, "PCI_BUS_ID", map, sizeof(map), err), 0);
  /* Each fused device spans two rails: none, as NCCL reports none for such a fused NIC. */
  CHECK_EQ_STR(map, "0=mlx5_0:1*mlx5_1:1;1=mlx5_2:1*mlx5_3:1;2=mlx5_4:1*mlx5_5:1;3=mlx5_6:1*mlx5_7:1");
  check_parses(map);
  CHECK(strstr(text,
               "  rails: local rank 0's device mlx5_0:1*mlx5_1:1 spans several rails: no rail=, as NCCL "
               "reports none\n") != NULL);
  CHECK(strstr(text,
               "  local rank 2 also: mlx5_5:1 0000:94:00.0, same PCIe switch as its GPU, 4 bridge hops: "
               "fused ('*') with its port into one device\n") != NULL);
  /* Ranks limited to GPUs 0 and 1: the other switches' NICs are neither fused nor used. */
  CHECK_EQ_INT(suggest("gpu4-nic8", "0,1", "PCI_BUS_ID", map, sizeof(map), err), 0);
  CHECK_EQ_STR(map, "0=mlx5_0:1*mlx5_1:1;1=mlx5_2:1*mlx5_3:1");
  CHECK(strstr(text, "  unused: mlx5_7:1 0000:a4:00.0 (NUMA node 1):") != NULL);
}

/* GPUs and the NIC each on a root port of their own: no switch is shared, so the host
 * shows no rails and the map names none. */
static void test_no_rails(void)
{
  char map[1024], err[256];

  CHECK_EQ_INT(suggest("gpu2-rootports", NULL, "PCI_BUS_ID", map, sizeof(map), err), 0);
  CHECK_EQ_STR(map, "0-1=mlx5_0:1");
  check_parses(map);
  CHECK(strstr(text,
               "  rails: none proposed: local rank 0's port does not share a PCIe switch with its GPU, so "
               "the topology shows no rail-optimized layout\n") != NULL);
}

static void test_cuda_visible_devices(void)
{
  char map[1024], err[256];

  /* Local rank 0 drives GPU 4 here: the map follows the GPUs, not the ranks' numbers. */
  CHECK_EQ_INT(suggest("gpu8-switch", "4,5,6,7", "PCI_BUS_ID", map, sizeof(map), err), 0);
  CHECK_EQ_STR(
    map, "0=mlx5_5:1,rail=4;1=mlx5_6:1,rail=5;2=mlx5_7:1,rail=6;3=mlx5_8:1,rail=7"); /* the host's rails */
  CHECK(strstr(text,
               "note: CUDA_VISIBLE_DEVICES='4,5,6,7': CUDA device r is the r-th GPU listed, so local rank 0 "
               "is GPU 4 (0000:92:00.0), not GPU 0") != NULL);
  CHECK_EQ_INT(suggest("gpu8-nic4", "3,2", "PCI_BUS_ID", map, sizeof(map), err), 0);
  CHECK_EQ_STR(map, "0-1=mlx5_1:1,rail=1");
  /* CUDA stops at the first entry that is no GPU of this host. */
  CHECK_EQ_INT(suggest("gpu8-nic4", "1,9,2", "PCI_BUS_ID", map, sizeof(map), err), 0);
  CHECK_EQ_STR(map, "0=mlx5_0:1,rail=0");
  CHECK(strstr(text, "so only 1 GPU(s) are visible") != NULL);
  /* UUIDs cannot be resolved from sysfs: no map rather than a wrong one. */
  CHECK_EQ_INT(suggest("gpu8-nic4", "GPU-8c3b2a1e-0000-1111-2222-333344445555", NULL, map, sizeof(map), err),
               -EINVAL);
  CHECK(strstr(err, "names GPUs by UUID") != NULL);
  CHECK_EQ_STR(map, "");
}

static void test_device_order_note(void)
{
  char map[1024], err[256];

  CHECK_EQ_INT(suggest("gpu8-nic4", NULL, NULL, map, sizeof(map), err), 0);
  CHECK(strstr(text, "note: CUDA_DEVICE_ORDER is unset (FASTEST_FIRST): CUDA numbers GPUs fastest first") !=
        NULL);
  CHECK_EQ_INT(suggest("gpu8-nic4", NULL, "FASTEST_FIRST", map, sizeof(map), err), 0);
  CHECK(strstr(text, "note: CUDA_DEVICE_ORDER is FASTEST_FIRST:") != NULL);
  CHECK(strstr(text, "different models") == NULL);
  /* Two GPU models: the default order is not a remark any more but a warning. */
  CHECK_EQ_INT(suggest("gpu2-mixed", NULL, NULL, map, sizeof(map), err), 0);
  CHECK_EQ_STR(map, "0-1=mlx5_0:1,rail=0");
  CHECK(strstr(text,
               "  warning: the GPUs are of different models (PCI device 0x20b0 for GPU 0, 0x27b8 for GPU 1): "
               "with CUDA_DEVICE_ORDER unset (FASTEST_FIRST)") != NULL);
  CHECK_EQ_INT(suggest("gpu2-mixed", NULL, "PCI_BUS_ID", map, sizeof(map), err), 0);
  CHECK(strstr(text, "different models") == NULL);
  CHECK(strstr(text, "CUDA_DEVICE_ORDER") == NULL);
}

static void test_no_gpu(void)
{
  char map[1024], err[256];

  /* A NIC-only host of the fabric fixtures. */
  CHECK_EQ_INT(suggest("pcie-switch", NULL, NULL, map, sizeof(map), err), -ENODEV);
  CHECK(strstr(err, "no NVIDIA GPU") != NULL);
}

static void test_distance_tiers(void)
{
  struct doctor_pci_distance d;

  doctor_pci_distance("/s/devices/pci0000:00/0000:00:01.0/0000:10:00.0/0000:11:00.0/0000:12:00.0", 0,
                      "/s/devices/pci0000:00/0000:00:01.0/0000:10:00.0/0000:11:01.0/0000:13:00.0", 0, &d);
  CHECK_EQ_INT(d.tier, DOCTOR_PCI_SWITCH);
  CHECK_EQ_INT(d.hops, 4);
  CHECK_EQ_STR(d.shared, "0000:10:00.0");
  doctor_pci_distance("/s/devices/pci0000:00/0000:00:01.0/0000:10:00.0/0000:11:00.0/0000:12:00.0", 0,
                      "/s/devices/pci0000:00/0000:00:01.0/0000:14:00.0", 0, &d);
  CHECK_EQ_INT(d.tier, DOCTOR_PCI_ROOT);
  CHECK_EQ_STR(d.shared, "0000:00:01.0");
  doctor_pci_distance("/s/devices/pci0000:00/0000:00:01.0/0000:10:00.0", 0,
                      "/s/devices/pci0000:00/0000:00:02.0/0000:20:00.0", 0, &d);
  CHECK_EQ_INT(d.tier, DOCTOR_PCI_NUMA);
  doctor_pci_distance("/s/devices/pci0000:00/0000:00:01.0/0000:10:00.0", 0,
                      "/s/devices/pci0000:80/0000:80:01.0/0000:90:00.0", 1, &d);
  CHECK_EQ_INT(d.tier, DOCTOR_PCI_OTHER);
  /* Two host bridges of one NUMA node (the node is what both share). */
  doctor_pci_distance("/s/devices/pci0000:00/0000:00:01.0/0000:10:00.0", 1,
                      "/s/devices/pci0000:40/0000:40:01.0/0000:50:00.0", 1, &d);
  CHECK_EQ_INT(d.tier, DOCTOR_PCI_NUMA);
  /* Nodes unknown (-1, kernels without NUMA): one host bridge counts as one node... */
  doctor_pci_distance("/s/devices/pci0000:00/0000:00:01.0/0000:10:00.0", -1,
                      "/s/devices/pci0000:00/0000:00:02.0/0000:20:00.0", -1, &d);
  CHECK_EQ_INT(d.tier, DOCTOR_PCI_NUMA);
  /* ...and two host bridges are not assumed to be one node. */
  doctor_pci_distance("/s/devices/pci0000:00/0000:00:01.0/0000:10:00.0", -1,
                      "/s/devices/pci0000:80/0000:80:01.0/0000:90:00.0", -1, &d);
  CHECK_EQ_INT(d.tier, DOCTOR_PCI_OTHER);
}

int main(void)
{
  RUN_TEST(test_switch_host);
  RUN_TEST(test_dualport_host);
  RUN_TEST(test_fewer_nics);
  RUN_TEST(test_more_nics);
  RUN_TEST(test_no_rails);
  RUN_TEST(test_cuda_visible_devices);
  RUN_TEST(test_device_order_note);
  RUN_TEST(test_no_gpu);
  RUN_TEST(test_distance_tiers);
  return TEST_EXIT();
}
