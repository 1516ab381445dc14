/*
 * doctor_rankmap.c - the rank map mcpnet-doctor --suggest-rank-map proposes (doctor_rankmap.h).
 *
 * Why this way: the one thing sysfs tells for sure is where GPUs and NICs sit in the PCI
 * tree, so that is all the suggestion uses. Local rank r is taken to drive CUDA device r
 * (torchrun and Slurm launchers set the device from LOCAL_RANK), CUDA device r is the r-th
 * GPU of CUDA_VISIBLE_DEVICES (all GPUs when unset) and the GPUs are numbered in PCI order;
 * the notes printed say when the last two may not hold. Ranks are placed in order, each on
 * the nearest ACTIVE port, ties going to the port with fewest ranks so far, then to fewer
 * bridges between, then to the first port in name order: two GPUs behind one switch with
 * a dual-port NIC get one port each, and four NICs for eight GPUs get two ranks each.
 * Ports left over that share a switch with a rank's GPU are fused into its device.
 *
 * Rails (NCCL 2.30's railId, rank map rail=): a rail-optimized cluster cables NIC i of
 * every host to rail switch i, where NIC i is the one next to GPU i, so its rails follow
 * the hosts' PCI order. The suggestion proposes them when the topology shows that layout:
 * every rank's port sits behind one PCIe switch with its GPU. A port's rail is then its
 * index among the ports (active or not: a port down on one host must not renumber the
 * rest) that share a PCIe switch with any GPU of the host, in PCI order and port order:
 * a front-end NIC on a root port of its own is on no rail. A fused device of ports on
 * different rails gets none (NCCL's own rule for fused NICs); every host must be built
 * alike for the numbers to mean the same switch everywhere, which is the doctor's
 * fleet check's business, not this one's.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doctor_rankmap.h"
#include "core/rankmap.h"
#include "core/text.h"
#include "fabric/fabric_topo.h"

#define RM_MAX_GPUS 64
#define RM_MAX_PORTS 64
#define RM_MAX_DEPTH 16
#define RM_NAME_MAX 64

struct rm_fn {
  char bdf[16];
  char host[16]; /* pciDDDD:BB */
  char comp[RM_MAX_DEPTH][16];
  int depth; /* components from the root port down to the function itself */
  int numa;
  int64_t id;
  char model[16]; /* PCI device id, GPUs only: "0x2330" */
};

struct rm_port {
  char dev[RM_NAME_MAX];
  int port;
  struct rm_fn fn;
  char link[16]; /* link_layer: a fused device must have one */
  int load;      /* ranks placed on it */
  int active;    /* ACTIVE: only those are placed; the others still count for rails */
  int rail;      /* its index among the ports behind a GPU's PCIe switch; -1: none */
};

/* Splits a resolved sysfs path into host bridge and BDF components. 0, or -1 when the
 * path is not below devices/pci*. */
static int split_path(const char *path, struct rm_fn *f)
{
  const char *p = NULL, *q = path, *c;
  size_t n;

  while ((q = strstr(q, "/devices/pci")) != NULL)
    p = q++;
  if (p == NULL)
    return -1;
  p += strlen("/devices/");
  memset(f->host, 0, sizeof(f->host));
  f->depth = 0;
  for (c = p; *c != '\0';) {
    n = strcspn(c, "/");
    if (n > 0) {
      char *dst = c == p ? f->host : f->comp[f->depth];

      if (n >= sizeof(f->host))
        return -1;
      memcpy(dst, c, n);
      dst[n] = '\0';
      if (c != p) {
        if (mcp_fabric_pci_busid(dst) < 0 || ++f->depth == RM_MAX_DEPTH)
          return -1;
      }
    }
    c += n;
    if (*c == '/')
      c++;
  }
  if (f->depth == 0)
    return -1;
  memcpy(f->bdf, f->comp[f->depth - 1], sizeof(f->bdf));
  f->id = mcp_fabric_pci_busid(f->bdf);
  return 0;
}

static void fn_distance(const struct rm_fn *fa, const struct rm_fn *fb, struct doctor_pci_distance *d)
{
  int common = 0;

  memset(d, 0, sizeof(*d));
  d->tier = DOCTOR_PCI_OTHER;
  if (strcmp(fa->host, fb->host) == 0) {
    /* The functions themselves (the last components) differ; only bridges can be shared. */
    while (common < fa->depth - 1 && common < fb->depth - 1 &&
           strcmp(fa->comp[common], fb->comp[common]) == 0)
      common++;
    d->hops = fa->depth + fb->depth - 2 * common;
  } else {
    d->hops = fa->depth + fb->depth + 2; /* up to each host bridge and across between them */
  }
  if (common >= 1)
    memcpy(d->shared, fa->comp[common - 1], sizeof(d->shared));
  if (common >= 2)
    d->tier = DOCTOR_PCI_SWITCH;
  else if (common == 1)
    d->tier = DOCTOR_PCI_ROOT;
  else if (fa->numa >= 0 && fa->numa == fb->numa)
    d->tier = DOCTOR_PCI_NUMA;
  else if (fa->numa < 0 && fb->numa < 0 && strcmp(fa->host, fb->host) == 0)
    d->tier = DOCTOR_PCI_NUMA; /* no NUMA information (one-node kernels): one host bridge is one CPU */
}

void doctor_pci_distance(const char *a, int numa_a, const char *b, int numa_b, struct doctor_pci_distance *d)
{
  struct rm_fn fa, fb;

  memset(d, 0, sizeof(*d));
  d->tier = DOCTOR_PCI_OTHER;
  if (split_path(a, &fa) != 0 || split_path(b, &fb) != 0)
    return;
  fa.numa = numa_a;
  fb.numa = numa_b;
  fn_distance(&fa, &fb, d);
}

/* The first line of a small sysfs file, without its newline; "" when unreadable. */
static void read_line(const char *path, char *buf, size_t len)
{
  FILE *f = fopen(path, "r");

  buf[0] = '\0';
  if (f == NULL)
    return;
  if (fgets(buf, (int)len, f) == NULL)
    buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
}

/* Fills f from the function the link (or directory) at path resolves to. */
static int load_fn(const char *path, struct rm_fn *f)
{
  char buf[PATH_MAX + 16], line[32];
  char *real = realpath(path, NULL);
  int rc;

  if (real == NULL)
    return -1;
  rc = split_path(real, f);
  snprintf(buf, sizeof(buf), "%s/numa_node", real);
  free(real);
  read_line(buf, line, sizeof(line));
  f->numa = line[0] != '\0' ? atoi(line) : -1;
  return rc;
}

static int by_id(const void *a, const void *b)
{
  const struct rm_fn *x = a, *y = b;

  return x->id < y->id ? -1 : x->id > y->id;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* NVIDIA display and 3D controllers under root/bus/pci/devices, in PCI order. */
static int find_gpus(const char *root, struct rm_fn *gpu, int max)
{
  char path[PATH_MAX], line[32];
  struct dirent *e;
  DIR *d;
  int n = 0;

  snprintf(path, sizeof(path), "%s/bus/pci/devices", root);
  if ((d = opendir(path)) == NULL)
    return 0;
  while ((e = readdir(d)) != NULL && n < max) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/vendor", root, e->d_name);
    read_line(path, line, sizeof(line));
    if (strcmp(line, "0x10de") != 0)
      continue;
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/class", root, e->d_name);
    read_line(path, line, sizeof(line));
    if (strncmp(line, "0x0302", 6) != 0 && strncmp(line, "0x0300", 6) != 0)
      continue; /* NVSwitches (0x0680) and the GPUs' audio functions are not GPUs */
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", root, e->d_name);
    if (load_fn(path, &gpu[n]) == 0) {
      snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/device", root, e->d_name);
      read_line(path, gpu[n].model, sizeof(gpu[n].model));
      n++;
    }
  }
  closedir(d);
  qsort(gpu, (size_t)n, sizeof(*gpu), by_id);
  return n;
}

/* Every port of every RDMA device with a PCI node, in device-name then port order; the
 * ones not ACTIVE are kept (active 0) for the rails' numbering and go to out with the
 * reason. */
static int find_ports(const char *root, struct rm_port *port, int max, FILE *out)
{
  char path[PATH_MAX], line[64];
  char *names[RM_MAX_PORTS];
  struct dirent *e;
  DIR *d;
  int nn = 0, n = 0, i, p;

  snprintf(path, sizeof(path), "%s/class/infiniband", root);
  if ((d = opendir(path)) == NULL)
    return 0;
  while ((e = readdir(d)) != NULL && nn < RM_MAX_PORTS)
    if (e->d_name[0] != '.' && strlen(e->d_name) < RM_NAME_MAX && (names[nn] = strdup(e->d_name)) != NULL)
      nn++;
  closedir(d);
  qsort(names, (size_t)nn, sizeof(*names), by_name);
  for (i = 0; i < nn; i++) {
    struct rm_fn fn;

    snprintf(path, sizeof(path), "%s/class/infiniband/%s/device", root, names[i]);
    if (load_fn(path, &fn) != 0) {
      fprintf(out,
              "  not %s: no PCI device (software RDMA such as rxe or siw has no place in the PCI tree)\n",
              names[i]);
      continue;
    }
    /* Ports are numbered from 1 and contiguous in sysfs; a gap ends the scan. */
    for (p = 1; p < 256 && n < max; p++) {
      snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/%d/state", root, names[i], p);
      read_line(path, line, sizeof(line));
      if (line[0] == '\0')
        break;
      port[n].active = strstr(line, "ACTIVE") != NULL;
      if (!port[n].active)
        fprintf(out, "  not %s:%d: the port is %s, not ACTIVE\n", names[i], p, line);
      snprintf(port[n].dev, sizeof(port[n].dev), "%s", names[i]);
      port[n].port = p;
      port[n].fn = fn;
      port[n].load = 0;
      port[n].rail = -1;
      snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/%d/link_layer", root, names[i], p);
      read_line(path, port[n].link, sizeof(port[n].link));
      n++;
    }
  }
  for (i = 0; i < nn; i++)
    free(names[i]);
  return n;
}

static const char *tier_text(const struct doctor_pci_distance *d, char *buf, size_t len)
{
  switch (d->tier) {
  case DOCTOR_PCI_SWITCH: snprintf(buf, len, "same PCIe switch (both below %s)", d->shared); break;
  case DOCTOR_PCI_ROOT: snprintf(buf, len, "same root port %s, no switch in common", d->shared); break;
  case DOCTOR_PCI_NUMA: snprintf(buf, len, "same NUMA node (or host bridge), different root ports"); break;
  default:
    snprintf(buf, len, "different NUMA nodes (or the node unknown): traffic crosses the CPUs' interconnect");
    break;
  }
  return buf;
}

/* The GPU indexes (into the PCI-ordered list) local ranks 0.. use: CUDA_VISIBLE_DEVICES
 * as CUDA reads it (integers, up to the first invalid one), or every GPU. */
static int visible_gpus(const char *cvd, int ngpu, int *rank_gpu, FILE *out, char *err, size_t errlen)
{
  const char *c = cvd;
  int n = 0;

  if (cvd == NULL) {
    for (n = 0; n < ngpu && n < RM_MAX_GPUS; n++)
      rank_gpu[n] = n;
    return n;
  }
  while (*c != '\0' && n < RM_MAX_GPUS) {
    char *end;
    long v;

    while (*c == ' ')
      c++;
    if (strncmp(c, "GPU-", 4) == 0 || strncmp(c, "MIG-", 4) == 0) {
      mcp_text_errf(
        err, errlen,
        "CUDA_VISIBLE_DEVICES='%s' names GPUs by UUID, which sysfs does not show: give the map for "
        "indexes (run without CUDA_VISIBLE_DEVICES, or with the indexes nvidia-smi -L prints)",
        cvd);
      return -EINVAL;
    }
    v = strtol(c, &end, 10);
    if (end == c || v < 0 || v >= ngpu) {
      fprintf(out,
              "  note: CUDA_VISIBLE_DEVICES='%s': CUDA stops at the first entry that is not a GPU index "
              "of this host (%d GPUs), so only %d GPU(s) are visible\n",
              cvd, ngpu, n);
      break;
    }
    rank_gpu[n++] = (int)v;
    c = end;
    while (*c == ' ')
      c++;
    if (*c != ',' && *c != '\0') {
      fprintf(out, "  note: CUDA_VISIBLE_DEVICES='%s': CUDA stops at '%s', so only %d GPU(s) are visible\n",
              cvd, c, n);
      break;
    }
    if (*c == ',')
      c++;
  }
  return n;
}

/* Appends "lo[-hi]=TARGET" for one run of ranks. */
static int append_entry(char *map, size_t maplen, size_t *used, int lo, int hi, const char *target)
{
  int n;

  if (lo == hi)
    n = snprintf(map + *used, maplen - *used, "%s%d=%s", *used ? ";" : "", lo, target);
  else
    n = snprintf(map + *used, maplen - *used, "%s%d-%d=%s", *used ? ";" : "", lo, hi, target);
  if (n < 0 || (size_t)n >= maplen - *used)
    return -ENOSPC;
  *used += (size_t)n;
  return 0;
}

/* A port no rank got that sits behind one PCIe switch with a rank's GPU is fused ('*')
 * into that rank's device: NCCL then sees one device with both NICs' bandwidth for that
 * GPU. Only for a rank that has its port to itself, at most MCP_RANKMAP_FUSE_MAX ports,
 * one link layer; the rank with the fewest ports so far, then the fewest hops, wins.
 * Ports left after that are reported unused. */
static void fuse_spare(const struct rm_fn *gpu, const int *rank_gpu, int nrank, struct rm_port *port,
                       int nport, const int *choice, char (*target)[256], FILE *out)
{
  int nfused[RM_MAX_GPUS] = {0};
  struct doctor_pci_distance d;
  int i, r, best, best_hops = 0;
  size_t len;

  for (i = 0; i < nport; i++) {
    if (port[i].load > 0 || !port[i].active)
      continue;
    for (best = -1, r = 0; r < nrank; r++) {
      if (nfused[r] + 1 >= MCP_RANKMAP_FUSE_MAX || port[choice[r]].load > 1 ||
          strcmp(port[choice[r]].link, port[i].link) != 0)
        continue;
      fn_distance(&gpu[rank_gpu[r]], &port[i].fn, &d);
      if (d.tier != DOCTOR_PCI_SWITCH)
        continue;
      if (best < 0 || nfused[r] < nfused[best] || (nfused[r] == nfused[best] && d.hops < best_hops)) {
        best = r;
        best_hops = d.hops;
      }
    }
    if (best < 0) {
      fprintf(out,
              "  unused: %s:%d %s (NUMA node %d): no GPU of a rank with a port of its own shares its "
              "PCIe switch\n",
              port[i].dev, port[i].port, port[i].fn.bdf, port[i].fn.numa);
      continue;
    }
    len = strlen(target[best]);
    snprintf(target[best] + len, 256 - len, "*%s:%d", port[i].dev, port[i].port);
    nfused[best]++;
    port[i].load++;
    fprintf(out,
            "  local rank %d also: %s:%d %s, same PCIe switch as its GPU, %d bridge hops: fused ('*') with "
            "its port into one device\n",
            best, port[i].dev, port[i].port, port[i].fn.bdf, best_hops);
  }
}

/* Numbers the rails (see the top of this file): the ports behind a PCIe switch shared
 * with any GPU of the host, in PCI then port order. Returns how many. */
static int number_rails(const struct rm_fn *gpu, int ngpu, struct rm_port *port, int nport)
{
  struct doctor_pci_distance d;
  int n = 0;

  for (;;) {
    int next = -1;

    for (int i = 0; i < nport; i++) {
      int g;

      if (port[i].rail >= 0)
        continue;
      for (g = 0; g < ngpu; g++) {
        fn_distance(&gpu[g], &port[i].fn, &d);
        if (d.tier == DOCTOR_PCI_SWITCH)
          break;
      }
      if (g == ngpu)
        continue;
      if (next < 0 || port[i].fn.id < port[next].fn.id ||
          (port[i].fn.id == port[next].fn.id && port[i].port < port[next].port))
        next = i;
    }
    if (next < 0)
      return n;
    port[next].rail = n++;
  }
}

/* The rail of a rank's target: its port's, or, fused, the one rail every port shares. */
static int target_rail(const char *target, const struct rm_port *port, int nport)
{
  char copy[256], *save = NULL;
  int rail = -2;

  snprintf(copy, sizeof(copy), "%.*s", (int)sizeof(copy) - 1, target);
  for (char *t = strtok_r(copy, "*", &save); t != NULL; t = strtok_r(NULL, "*", &save)) {
    char *colon = strrchr(t, ':');
    int i;

    for (i = 0; i < nport; i++)
      if (colon != NULL && strncmp(port[i].dev, t, (size_t)(colon - t)) == 0 &&
          port[i].dev[colon - t] == '\0' && port[i].port == atoi(colon + 1))
        break;
    if (i == nport || port[i].rail < 0 || (rail != -2 && rail != port[i].rail))
      return -1;
    rail = port[i].rail;
  }
  return rail < 0 ? -1 : rail;
}

int doctor_rankmap_suggest(const char *sysfs_root, const char *cuda_visible, const char *cuda_order,
                           FILE *out, char *map, size_t maplen, char *err, size_t errlen)
{
  static struct rm_fn gpu[RM_MAX_GPUS];
  static struct rm_port port[RM_MAX_PORTS];
  static char target[RM_MAX_GPUS][256];
  int rank_gpu[RM_MAX_GPUS], choice[RM_MAX_GPUS], rail[RM_MAX_GPUS];
  int ngpu, nport, nrank, r, i, lo, rc, nrails, rails = 1, off_rail = -1;
  size_t used = 0;
  char why[128];

  if (maplen > 0)
    map[0] = '\0';
  fprintf(out, "Rank map suggestion (from %s)\n", sysfs_root);
  ngpu = find_gpus(sysfs_root, gpu, RM_MAX_GPUS);
  nport = find_ports(sysfs_root, port, RM_MAX_PORTS, out);
  if (ngpu == 0) {
    mcp_text_errf(err, errlen,
                  "no NVIDIA GPU (PCI vendor 0x10de, class 0x0300 or 0x0302) under %s/bus/pci/devices",
                  sysfs_root);
    return -ENODEV;
  }
  for (i = 0; i < nport && !port[i].active; i++)
    ;
  if (i == nport) {
    mcp_text_errf(err, errlen, "no ACTIVE port of an RDMA device with a PCI node under %s/class/infiniband",
                  sysfs_root);
    return -ENODEV;
  }
  nrank = visible_gpus(cuda_visible, ngpu, rank_gpu, out, err, errlen);
  if (nrank < 0)
    return nrank;
  if (nrank == 0) {
    mcp_text_errf(err, errlen, "CUDA_VISIBLE_DEVICES='%s' leaves no GPU visible", cuda_visible);
    return -ENODEV;
  }

  for (r = 0; r < nrank; r++) {
    const struct rm_fn *g = &gpu[rank_gpu[r]];
    struct doctor_pci_distance best = {DOCTOR_PCI_OTHER, 0, ""}, d;
    int b = -1;

    for (i = 0; i < nport; i++) {
      if (!port[i].active)
        continue;
      fn_distance(g, &port[i].fn, &d);
      if (b < 0 || d.tier < best.tier ||
          (d.tier == best.tier &&
           (port[i].load < port[b].load || (port[i].load == port[b].load && d.hops < best.hops)))) {
        b = i;
        best = d;
      }
    }
    choice[r] = b;
    port[b].load++;
    snprintf(target[r], sizeof(target[r]), "%s:%d", port[b].dev, port[b].port);
    fprintf(out,
            "  local rank %d: GPU %d %s (NUMA node %d) -> %s:%d %s (NUMA node %d): %s, %d bridge hop%s%s\n",
            r, rank_gpu[r], g->bdf, g->numa, port[b].dev, port[b].port, port[b].fn.bdf, port[b].fn.numa,
            tier_text(&best, why, sizeof(why)), best.hops, best.hops == 1 ? "" : "s",
            port[b].load > 1 ? ", shared with an earlier rank" : "");
    if (best.tier != DOCTOR_PCI_SWITCH && off_rail < 0)
      off_rail = r;
  }
  fuse_spare(gpu, rank_gpu, nrank, port, nport, choice, target, out);
  /* Rails, when every rank's port is behind its GPU's switch (the top of this file). */
  nrails = number_rails(gpu, ngpu, port, nport);
  if (off_rail >= 0 || nrails == 0)
    rails = 0;
  for (r = 0; r < nrank; r++) {
    rail[r] = rails ? target_rail(target[r], port, nport) : -1;
    if (rail[r] >= 0) {
      size_t len = strlen(target[r]);
      snprintf(target[r] + len, sizeof(target[r]) - len, ",rail=%d", rail[r]);
    }
  }
  if (rails)
    fprintf(
      out,
      "  rails: every rank's port shares a PCIe switch with its GPU (a rail-optimized layout), so each "
      "entry names its port's rail (rail=): its index among the %d port(s) behind a GPU's switch, in PCI "
      "order; NCCL 2.30 keeps its cross-NIC search within a rail. Build every host alike, or the "
      "numbers name different rail switches\n",
      nrails);
  else if (off_rail >= 0)
    fprintf(out,
            "  rails: none proposed: local rank %d's port does not share a PCIe switch with its GPU, so the "
            "topology shows no rail-optimized layout\n",
            off_rail);
  for (r = 0; r < nrank; r++)
    if (rails && rail[r] < 0)
      fprintf(out, "  rails: local rank %d's device %s spans several rails: no rail=, as NCCL reports none\n",
              r, target[r]);
  for (lo = 0, r = 1; r <= nrank; r++) {
    if (r < nrank && strcmp(target[r], target[lo]) == 0)
      continue;
    if ((rc = append_entry(map, maplen, &used, lo, r - 1, target[lo])) != 0) {
      mcp_text_errf(err, errlen, "the map does not fit in %zu bytes", maplen);
      return rc;
    }
    lo = r;
  }

  /* What can make local rank r not drive the GPU the line above names. */
  fprintf(out,
          "  assumes: local rank r drives CUDA device r (torch.cuda.set_device(LOCAL_RANK), as torchrun "
          "and Slurm launchers are used)\n");
  if (cuda_visible != NULL)
    fprintf(out,
            "  note: CUDA_VISIBLE_DEVICES='%s': CUDA device r is the r-th GPU listed, so local rank 0 is GPU "
            "%d (%s), not GPU 0; run the doctor with the job's CUDA_VISIBLE_DEVICES\n",
            cuda_visible, rank_gpu[0], gpu[rank_gpu[0]].bdf);
  for (i = 1; i < nrank && strcmp(gpu[rank_gpu[i]].model, gpu[rank_gpu[0]].model) == 0; i++)
    ;
  if (i < nrank && (cuda_order == NULL || strcmp(cuda_order, "PCI_BUS_ID") != 0))
    fprintf(out,
            "  warning: the GPUs are of different models (PCI device %s for GPU 0, %s for GPU %d): with "
            "CUDA_DEVICE_ORDER %s CUDA puts the fastest first, so local rank r may not drive the GPU named "
            "above: export CUDA_DEVICE_ORDER=PCI_BUS_ID in the job, or the map is wrong\n",
            gpu[rank_gpu[0]].model, gpu[rank_gpu[i]].model, rank_gpu[i],
            cuda_order == NULL ? "unset (FASTEST_FIRST)" : cuda_order);
  else if (cuda_order == NULL || strcmp(cuda_order, "PCI_BUS_ID") != 0)
    fprintf(out,
            "  note: CUDA_DEVICE_ORDER is %s: CUDA numbers GPUs fastest first and only then by PCI bus, "
            "while this map numbers them in PCI order; identical GPUs come out the same, but to be sure "
            "export CUDA_DEVICE_ORDER=PCI_BUS_ID in the job\n",
            cuda_order == NULL ? "unset (FASTEST_FIRST)" : cuda_order);
  fprintf(out, "MCPNET_RANK_MAP='%s'\n", map);
  return 0;
}
