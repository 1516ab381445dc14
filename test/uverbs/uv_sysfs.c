/*
 * uv_sysfs.c - the userspace device as sysfs shows a device, in a tree of its own.
 *
 * mcpnet reads much about a device from sysfs rather than from verbs (the GID table with
 * each GID's type and netdev, port state and rate, P_Keys, the port's counters, whether a
 * GPU peer-memory module is loaded). The library writes a tree shaped like /sys for its
 * devices under <fabric>/sys.<pid> and names it through mcpnet_verbs_sysfs_root(), so
 * every such read comes from the device the verbs came from. The port state files
 * follow faults (a port taken down says DOWN / Disabled, as the kernel's would), and the
 * counters are rewritten by the service thread when they moved. Files are replaced by a
 * rename, so a reader never sees half a value.
 *
 *   class/infiniband/mcpuvN/{node_guid,sys_image_guid,node_type,fw_ver}
 *   class/infiniband/mcpuvN/ports/1/{state,phys_state,link_layer,rate,lid}
 *   class/infiniband/mcpuvN/ports/1/gids/I, gid_attrs/{types,ndevs}/I, pkeys/0
 *   class/infiniband/mcpuvN/ports/1/{counters,hw_counters}/...
 *   class/net/lo/{operstate,ifindex}     the netdev every GID names (127.x.y.z is lo's)
 *   module/nvidia_peermem/version        unless UVERBS_PEERMEM=0 (CUDA registrations work)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uv.h"

static int mkdirs(const char *path)
{
  char tmp[PATH_MAX];
  size_t i, n = strlen(path);

  if (n >= sizeof(tmp))
    return -ENAMETOOLONG;
  memcpy(tmp, path, n + 1);
  for (i = 1; i <= n; i++)
    if (tmp[i] == '/' || tmp[i] == '\0') {
      char c = tmp[i];
      tmp[i] = '\0';
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -errno;
      tmp[i] = c;
    }
  return 0;
}

/* dir/name := the formatted text and a newline, replaced whole. */
static int put(const char *dir, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int put(const char *dir, const char *name, const char *fmt, ...)
{
  char path[PATH_MAX], tmp[PATH_MAX], text[256];
  va_list ap;
  int fd, n;

  va_start(ap, fmt);
  n = vsnprintf(text, sizeof(text) - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= (int)sizeof(text) - 1)
    return -EINVAL;
  text[n++] = '\n';
  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path) ||
      snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name) >= (int)sizeof(tmp))
    return -ENAMETOOLONG;
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return -errno;
  if (write(fd, text, (size_t)n) != n) {
    close(fd);
    unlink(tmp);
    return -EIO;
  }
  close(fd);
  return rename(tmp, path) == 0 ? 0 : -errno;
}

static void port_dir(const struct uv_dev *dev, const char *sub, char *out, size_t len)
{
  snprintf(out, len, "%s/class/infiniband/%s/ports/1%s%s", uv.sysroot, dev->ibdev.name, sub[0] ? "/" : "",
           sub);
}

static void guid_text(uint64_t g, char *out, size_t len)
{
  snprintf(out, len, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff, (unsigned)(g >> 32) & 0xffff,
           (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

void uv_sysfs_port(struct uv_dev *dev)
{
  char dir[PATH_MAX];
  int up = dev->port_state == IBV_PORT_ACTIVE;

  port_dir(dev, "", dir, sizeof(dir));
  put(dir, "state", "%s", up ? "4: ACTIVE" : "1: DOWN");
  put(dir, "phys_state", "%s", up ? "5: LinkUp" : "3: Disabled");
}

static const struct {
  const char *sub, *name;
  int cnt;
  int words; /* IB's data counters count 4-byte words */
} counter_files[] = {
  {"counters", "port_xmit_data", UV_CNT_XMIT_BYTES, 1},
  {"counters", "port_rcv_data", UV_CNT_RCV_BYTES, 1},
  {"counters", "port_xmit_packets", UV_CNT_XMIT_PKTS, 0},
  {"counters", "port_rcv_packets", UV_CNT_RCV_PKTS, 0},
  {"counters", "link_downed", UV_CNT_LINK_DOWNED, 0},
  {"hw_counters", "local_ack_timeout_err", UV_CNT_ACK_TIMEOUT, 0},
  {"hw_counters", "retry_exceeded_err", UV_CNT_RETRY_EXC, 0},
  {"hw_counters", "rnr_nak_retry_err", UV_CNT_RNR_NAK, 0},
  {"hw_counters", "rnr_retry_exceeded_err", UV_CNT_RNR_EXC, 0},
  {"hw_counters", "out_of_sequence", UV_CNT_OUT_OF_SEQ, 0},
  {"hw_counters", "duplicate_request", UV_CNT_DUPLICATE, 0},
  {"hw_counters", "remote_access_errors", UV_CNT_REM_ACCESS, 0},
  {"hw_counters", "local_protection_err", UV_CNT_LOC_PROT, 0},
  {"hw_counters", "packets_dropped", UV_CNT_DROPPED, 0},
};

void uv_sysfs_counters(void)
{
  int d;
  size_t i;

  for (d = 0; d < uv.ndev; d++) {
    struct uv_dev *dev = &uv.dev[d];
    for (i = 0; i < sizeof(counter_files) / sizeof(counter_files[0]); i++) {
      char dir[PATH_MAX];
      uint64_t v = dev->cnt[counter_files[i].cnt];

      port_dir(dev, counter_files[i].sub, dir, sizeof(dir));
      put(dir, counter_files[i].name, "%llu", (unsigned long long)(counter_files[i].words ? v / 4 : v));
    }
  }
}

static int build_dev(struct uv_dev *dev)
{
  char dir[PATH_MAX], sub[PATH_MAX], text[64];
  int i, rc;

  snprintf(dir, sizeof(dir), "%s/class/infiniband/%s", uv.sysroot, dev->ibdev.name);
  if ((rc = mkdirs(dir)) != 0)
    return rc;
  guid_text(dev->guid, text, sizeof(text));
  put(dir, "node_guid", "%s", text);
  put(dir, "sys_image_guid", "%s", text);
  put(dir, "node_type", "1: CA");
  put(dir, "fw_ver", "mcp-uverbs 1");
  port_dir(dev, "", dir, sizeof(dir));
  static const char *const subs[] = {"gids",  "gid_attrs/types", "gid_attrs/ndevs",
                                     "pkeys", "counters",        "hw_counters"};
  for (i = 0; i < (int)(sizeof(subs) / sizeof(subs[0])); i++) {
    port_dir(dev, subs[i], sub, sizeof(sub));
    if ((rc = mkdirs(sub)) != 0)
      return rc;
  }
  uv_sysfs_port(dev);
  put(dir, "link_layer", "Ethernet");
  put(dir, "rate", "100 Gb/sec (4X EDR)");
  put(dir, "lid", "0x0");
  for (i = 0; i < UV_GIDS; i++) {
    const uint8_t *g = dev->gid[i].raw;
    char name[16];

    snprintf(name, sizeof(name), "%d", i);
    port_dir(dev, "gids", sub, sizeof(sub));
    put(sub, name, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1],
        g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
    port_dir(dev, "gid_attrs/types", sub, sizeof(sub));
    put(sub, name, "%s", i % 2 == 0 ? "IB/RoCE v1" : "RoCE v2");
    port_dir(dev, "gid_attrs/ndevs", sub, sizeof(sub));
    put(sub, name, "lo");
  }
  port_dir(dev, "pkeys", sub, sizeof(sub));
  put(sub, "0", "0xffff");
  return 0;
}

int uv_sysfs_build(void)
{
  char dir[PATH_MAX];
  int i, rc;

  for (i = 0; i < uv.ndev; i++)
    if ((rc = build_dev(&uv.dev[i])) != 0)
      return rc;
  snprintf(dir, sizeof(dir), "%s/class/net/lo", uv.sysroot);
  if ((rc = mkdirs(dir)) != 0)
    return rc;
  put(dir, "operstate", "unknown");
  put(dir, "ifindex", "1");
  if (uv.peermem) {
    snprintf(dir, sizeof(dir), "%s/module/nvidia_peermem", uv.sysroot);
    if ((rc = mkdirs(dir)) != 0)
      return rc;
    put(dir, "version", "mcp-uverbs (CUDA copies by the emulated adapter)");
  }
  uv_sysfs_counters();
  return 0;
}

void uv_sysfs_remove(void)
{
  if (uv.sysroot[0] != '\0')
    uv_rm_tree(uv.sysroot);
}
