/*
 * doctor_rankmap.h - mcpnet-doctor --suggest-rank-map: the MCPNET_RANK_MAP that puts each
 * local rank on its nearest NIC port by PCI distance, from sysfs alone.
 *
 * It exists because writing the map by hand for an 8-GPU host means reading lspci -t and
 * knowing that CUDA may number GPUs differently from PCI order. The logic reads a sysfs
 * root given as a parameter, so unit tests run it on fixture trees of real host shapes
 * (test/unit/fixtures/gpu8-*), and the CUDA variables are parameters too, not getenv.
 */
#ifndef MCPNET_DOCTOR_RANKMAP_H
#define MCPNET_DOCTOR_RANKMAP_H

#include <stddef.h>
#include <stdio.h>

/* How near two PCI functions are, best first. */
enum doctor_pci_tier {
  DOCTOR_PCI_SWITCH = 0, /* behind one PCIe switch (share a bridge below the root port) */
  DOCTOR_PCI_ROOT = 1,   /* share a root port, no switch in common */
  DOCTOR_PCI_NUMA = 2,   /* different root ports of one NUMA node (or of one host bridge, nodes unknown) */
  DOCTOR_PCI_OTHER = 3,  /* across NUMA nodes, or a node unknown */
};

struct doctor_pci_distance {
  enum doctor_pci_tier tier;
  int hops;        /* bridges between the two along the tree; large across host bridges */
  char shared[16]; /* the deepest bridge both are below ("" when none) */
};

/* The distance between two functions given by their sysfs paths (realpath form, ending in
 * devices/pciDDDD:BB/<bdf>/.../<bdf>) and NUMA nodes (-1 unknown). */
void doctor_pci_distance(const char *a, int numa_a, const char *b, int numa_b, struct doctor_pci_distance *d);

/*
 * The suggestion for the host under sysfs_root ("/sys" normally). cuda_visible and
 * cuda_order are CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER (NULL when unset). Writes the
 * reasoning (one line per rank, and the notes about GPU numbering) to out, and the map
 * value to map. 0, or a negative errno with the reason in err: -ENODEV when there is no
 * GPU or no NIC port, -EINVAL when CUDA_VISIBLE_DEVICES cannot be resolved from sysfs.
 */
int doctor_rankmap_suggest(const char *sysfs_root, const char *cuda_visible, const char *cuda_order,
                           FILE *out, char *map, size_t maplen, char *err, size_t errlen);

#endif
