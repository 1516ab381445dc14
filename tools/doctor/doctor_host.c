/*
 * doctor_host.c - the host settings that break NCCL jobs before any byte moves: the
 * locked-memory limit (registration fails), /dev/shm (NCCL's intra-node transport),
 * GPUDirect (nvidia_peermem or DMA-BUF), the out-of-band interface the plugin will
 * choose (its own chooser, fed NCCL_SOCKET_IFNAME), the QP time to error that the
 * timeout settings imply, and the two variables that decide whether NCCL uses mcpnet
 * at all (NCCL_NET_PLUGIN, NCCL_NET). Every check says what to change.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "doctor.h"
#include "core/sock.h"
#include "nccl/net_common.h"

#define MIB (1024.0 * 1024.0)
#define SHM_WANT (1024.0 * MIB)
#define CAP_IPC_LOCK_BIT 14

static void human(double bytes, char *buf, size_t len)
{
  if (bytes >= 1024.0 * MIB)
    snprintf(buf, len, "%.1f GiB", bytes / (1024.0 * MIB));
  else if (bytes >= MIB)
    snprintf(buf, len, "%.0f MiB", bytes / MIB);
  else
    snprintf(buf, len, "%.0f KiB", bytes / 1024.0);
}

/* CAP_IPC_LOCK lets a process pin memory beyond RLIMIT_MEMLOCK. */
static int has_cap_ipc_lock(void)
{
  FILE *f = fopen("/proc/self/status", "re");
  char line[256];
  unsigned long long eff = 0;

  if (f == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "CapEff: %llx", &eff) == 1)
      break;
  fclose(f);
  return (eff >> CAP_IPC_LOCK_BIT) & 1;
}

static void check_memlock(struct doctor_report *r)
{
  struct rlimit rl;
  double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  const char *fix = "ulimit -l unlimited before starting the job (containers: docker run --ulimit "
                    "memlock=-1, or LimitMEMLOCK=infinity for a systemd service)";
  char have[32], want[32];

  r->cap_ipc_lock = has_cap_ipc_lock();
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "memlock", "ulimit -l", fix,
               "cannot read the locked-memory limit");
    return;
  }
  if (rl.rlim_cur == RLIM_INFINITY) {
    r->memlock_bytes = -1;
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "memlock", "ulimit -l", NULL,
               "locked-memory limit (ulimit -l): unlimited");
    return;
  }
  r->memlock_bytes = (long long)rl.rlim_cur;
  human((double)rl.rlim_cur, have, sizeof(have));
  human((double)r->o->min_memlock, want, sizeof(want));
  if ((double)rl.rlim_cur >= phys) {
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "memlock", "ulimit -l", NULL,
               "locked-memory limit (ulimit -l): %s, at least this host's memory", have);
  } else if (rl.rlim_cur < r->o->min_memlock && !r->cap_ipc_lock) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_HOST, "memlock", "ulimit -l", fix,
               "locked-memory limit (ulimit -l) is %s, below %s: registering NCCL's buffers fails "
               "with 'Cannot allocate memory'",
               have, want);
  } else if (rl.rlim_cur < r->o->min_memlock) {
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "memlock", "ulimit -l", fix,
               "locked-memory limit (ulimit -l) is %s, below %s; registration works here only "
               "because this process has CAP_IPC_LOCK, which a job started otherwise lacks",
               have, want);
  } else {
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "memlock", "ulimit -l", fix,
               "locked-memory limit (ulimit -l) is %s: enough to start, but large jobs register "
               "more (NCCL's buffers grow with peers and channels)",
               have);
  }
}

static void check_shm(struct doctor_report *r)
{
  struct statvfs st;
  char have[32];

  if (statvfs("/dev/shm", &st) != 0) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_HOST, "shm", "/dev/shm",
               "mount a tmpfs on /dev/shm (containers: docker run --shm-size=1g or --ipc=host)",
               "/dev/shm is missing: NCCL's shared-memory transport between local GPUs cannot work");
    return;
  }
  r->shm_bytes = (long long)st.f_blocks * (long long)st.f_frsize;
  human((double)r->shm_bytes, have, sizeof(have));
  if ((double)r->shm_bytes < SHM_WANT)
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "shm", "/dev/shm",
               "enlarge it (docker run --shm-size=1g or --ipc=host; Kubernetes: an emptyDir with "
               "medium Memory mounted on /dev/shm)",
               "/dev/shm holds %s: NCCL fails with 'unable to allocate shared memory' (or a bus "
               "error) when several local GPUs share it",
               have);
  else
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "shm", "/dev/shm", NULL, "/dev/shm holds %s", have);
}

static int file_contains(const char *path, const char *needle)
{
  FILE *f = fopen(path, "re");
  char line[512];
  int found = 0;

  if (f == NULL)
    return 0;
  while (!found && fgets(line, sizeof(line), f) != NULL)
    found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* DMA-BUF as the plugin found it: its probe registers a real dma-buf on each device. */
static void dmabuf_devices(const struct doctor_report *r, char *yes, char *no, size_t len)
{
  yes[0] = no[0] = '\0';
  for (int i = 0; i < r->nsel; i++) {
    const struct mcp_fabric *fab = &r->sel[i]->fab;

    for (int k = 0; k < fab->ndev; k++) {
      char *dst = (fab->dev[k].ptr_support & NCCL_PTR_DMABUF) ? yes : no;
      size_t used = strlen(dst);

      if (strstr(dst, fab->dev[k].name) == NULL && used + 2 < len)
        snprintf(dst + used, len - used, "%s%s", used ? ", " : "", fab->dev[k].name);
    }
  }
}

static void check_gpu(struct doctor_report *r)
{
  int nvidia = access("/sys/module/nvidia", F_OK) == 0;
  int peermem =
    access("/sys/module/nvidia_peermem", F_OK) == 0 || access("/sys/module/nv_peer_mem", F_OK) == 0;
  int open_km = file_contains("/proc/driver/nvidia/version", "Open Kernel Module");
  char yes[256], no[256];

  dmabuf_devices(r, yes, no, sizeof(yes));
  if (!nvidia)
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "peermem", "nvidia_peermem", NULL,
               "no NVIDIA driver loaded: GPU buffer checks do not apply (host memory only)");
  else if (peermem)
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "peermem", "nvidia_peermem", NULL,
               "GPU peer memory module loaded: the NIC can register GPU memory (GPUDirect RDMA)");
  else
    doctor_add(r, yes[0] ? DOCTOR_OK : DOCTOR_WARN, DOCTOR_SEC_HOST, "peermem", "nvidia_peermem",
               yes[0] ? NULL
                      : "modprobe nvidia_peermem, or use the open NVIDIA kernel modules on a kernel "
                        ">= 5.12 for DMA-BUF",
               "nvidia_peermem is not loaded%s",
               yes[0] ? ": GPU memory goes through DMA-BUF instead"
                      : " and no device takes DMA-BUF: GPU buffers are staged through host memory");
  if (yes[0] != '\0')
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "dmabuf", yes, NULL, "DMA-BUF registration works on %s%s%s",
               yes, no[0] ? "; not on " : "", no);
  else if (no[0] != '\0')
    doctor_add(r, nvidia && !peermem ? DOCTOR_WARN : DOCTOR_OK, DOCTOR_SEC_HOST, "dmabuf", no,
               nvidia && !peermem ? "load nvidia_peermem, or use a NIC driver and kernel with DMA-BUF support"
                                  : NULL,
               "DMA-BUF registration is not supported by %s%s", no,
               !nvidia     ? " (not needed without GPUs)"
                 : open_km ? ""
                           : " (and the NVIDIA driver is not the open kernel module, which DMA-BUF needs)");
}

static void check_oob(struct doctor_report *r)
{
  struct mcp_sock_iface_choice ch;
  char addr[MCP_SOCKADDR_STRLEN], ports[64] = "";
  const char *ifname = r->cfg.socket_ifname;

  if (r->cfg.oob_port_lo > 0)
    snprintf(ports, sizeof(ports), ", TCP ports %d-%d (MCPNET_OOB_PORT_RANGE)", r->cfg.oob_port_lo,
             r->cfg.oob_port_hi);
  if (mcp_sock_iface_find(ifname, &r->cfg.socket_ifname_list, r->cfg.socket_af, &ch) != 0) {
    doctor_add(r, DOCTOR_FAIL, DOCTOR_SEC_HOST, "oob-iface", "NCCL_SOCKET_IFNAME",
               "set NCCL_SOCKET_IFNAME to an up interface with an address the other nodes reach",
               "no interface for the out-of-band channel%s%s: %s", ifname ? " with NCCL_SOCKET_IFNAME=" : "",
               ifname ? ifname : "", ch.reason);
    return;
  }
  mcp_sockaddr_format_host(&ch.addr, addr, sizeof(addr));
  snprintf(r->oob_iface, sizeof(r->oob_iface), "%s", ch.name);
  snprintf(r->oob_addr, sizeof(r->oob_addr), "%s", addr);
  if (strncmp(ch.name, "lo", 2) == 0 && (ch.name[2] == '\0' || ch.name[2] == ':'))
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "oob-iface", ch.name,
               "fine for one node; for several, give this host an interface other nodes reach and "
               "select it with NCCL_SOCKET_IFNAME",
               "out-of-band channel on loopback: no other node can reach it (%s)", ch.reason);
  else
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "oob-iface", ch.name, NULL, "out-of-band channel: %s%s",
               ch.reason, ports);
}

static void check_timeouts(struct doctor_report *r)
{
  const struct mcp_config *c = &r->cfg;

  r->tte_s = mcp_param_time_to_error_s(c->ib_timeout, c->ib_retry_cnt);
  r->rnr_s = mcp_param_rnr_bound_s(c->min_rnr_timer, c->rnr_retry);
  if (isinf(r->tte_s) || isinf(r->rnr_s))
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "time-to-error", "NCCL_IB_TIMEOUT",
               "use finite values (NCCL_IB_TIMEOUT 14..22, MCPNET_RNR_RETRY < 7) and unset "
               "MCPNET_ALLOW_INFINITE_RETRY",
               "QP retries are infinite (%s): a dead peer hangs the job forever",
               isinf(r->tte_s) ? "NCCL_IB_TIMEOUT=0" : "MCPNET_RNR_RETRY=7");
  else if (r->tte_s > 120.0)
    doctor_add(
      r, DOCTOR_WARN, DOCTOR_SEC_HOST, "time-to-error", "NCCL_IB_TIMEOUT",
      "lower NCCL_IB_TIMEOUT (each step doubles the wait; 18 gives 8.6 s, 20 gives 34 s)",
      "a dead peer is detected only after at least %.0f s (NCCL_IB_TIMEOUT=%d, "
      "NCCL_IB_RETRY_CNT=%d; hardware may wait up to ~4x longer): a lost node hangs the job for minutes",
      r->tte_s, c->ib_timeout, c->ib_retry_cnt);
  else if (r->tte_s < 0.5)
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "time-to-error", "NCCL_IB_TIMEOUT",
               "raise NCCL_IB_TIMEOUT (14 or more) unless the fabric is tiny and idle",
               "a QP gives up after only %.3f s (NCCL_IB_TIMEOUT=%d, NCCL_IB_RETRY_CNT=%d): a "
               "congested fabric turns into transport retry errors",
               r->tte_s, c->ib_timeout, c->ib_retry_cnt);
  else
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "time-to-error", "NCCL_IB_TIMEOUT", NULL,
               "a dead peer is detected after at least %.1f s (NCCL_IB_TIMEOUT=%d, NCCL_IB_RETRY_CNT=%d; "
               "up to ~4x longer on hardware); RNR NAKs give up after %.1f ms",
               r->tte_s, c->ib_timeout, c->ib_retry_cnt, r->rnr_s * 1000.0);
}

static void check_nccl_vars(struct doctor_report *r)
{
  const char *plugin = getenv("NCCL_NET_PLUGIN"), *net = getenv("NCCL_NET");

  if (plugin == NULL || plugin[0] == '\0') {
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "nccl-net-plugin", "NCCL_NET_PLUGIN",
               "export NCCL_NET_PLUGIN=mcp in the job's environment",
               "NCCL_NET_PLUGIN is unset: NCCL looks for libnccl-net.so, not mcpnet");
  } else if (strstr(plugin, "mcp") == NULL) {
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "nccl-net-plugin", "NCCL_NET_PLUGIN",
               "export NCCL_NET_PLUGIN=mcp", "NCCL_NET_PLUGIN=%s: NCCL loads another plugin", plugin);
  } else {
    char lib[256];
    void *h;

    /* NCCL tries libnccl-net-NAME.so first, then the name as given. */
    if (strchr(plugin, '/') != NULL || strstr(plugin, ".so") != NULL)
      snprintf(lib, sizeof(lib), "%s", plugin);
    else
      snprintf(lib, sizeof(lib), "libnccl-net-%s.so", plugin);
    h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
      doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "nccl-net-plugin", "NCCL_NET_PLUGIN",
                 "install the mcpnet package, or add the plugin's folder to LD_LIBRARY_PATH",
                 "NCCL_NET_PLUGIN=%s, but the loader cannot open %s: %s", plugin, lib, dlerror());
    else
      doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "nccl-net-plugin", "NCCL_NET_PLUGIN", NULL,
                 "NCCL_NET_PLUGIN=%s: %s loads", plugin, lib);
    if (h != NULL)
      dlclose(h);
  }
  if (net == NULL || net[0] == '\0')
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "nccl-net", "NCCL_NET",
               "export NCCL_NET=MCP in the job's environment, so a failed init stops the job with "
               "mcpnet's reason",
               "NCCL_NET is unset: if mcpnet's init fails, NCCL silently falls back to its own IB "
               "or Socket transport");
  else if (strcasecmp(net, "MCP") != 0)
    doctor_add(r, DOCTOR_WARN, DOCTOR_SEC_HOST, "nccl-net", "NCCL_NET", "export NCCL_NET=MCP",
               "NCCL_NET=%s: NCCL will not use mcpnet", net);
  else
    doctor_add(r, DOCTOR_OK, DOCTOR_SEC_HOST, "nccl-net", "NCCL_NET", NULL,
               "NCCL_NET=%s: NCCL uses mcpnet or stops", net);
}

void doctor_host_check(struct doctor_report *r)
{
  check_memlock(r);
  check_shm(r);
  check_gpu(r);
  check_oob(r);
  check_timeouts(r);
  check_nccl_vars(r);
}
