/*
 * doctor_plugin.c - loads the plugin the way NCCL does (dlopen of libnccl-net-mcp.so
 * through the loader's path, then the copy beside this binary in a build tree or an
 * install) and drives its exported v11 table through tools/drive, so the two-node check
 * runs the handshake, the QP bring-up and the data path a job would run. The plugin's
 * WARNs go to the report instead of stderr: they usually name the cause.
 */
#include <dlfcn.h>
#include <link.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doctor_plugin.h"

#define PLUGIN_NAME "libnccl-net-mcp.so"

static char warnings[2048];
static int verbose;

static void plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                          const char *fmt, ...)
{
  char msg[1024];
  const char *text = msg;
  size_t used;
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (strncmp(text, "NET/MCP ", 8) == 0)
    text += 8;
  if (verbose && (level == NCCL_LOG_WARN || level == NCCL_LOG_INFO))
    fprintf(stderr, "mcpnet-doctor: plugin [%s] %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", text);
  if (level != NCCL_LOG_WARN)
    return;
  used = strlen(warnings);
  if (used + 3 < sizeof(warnings))
    snprintf(warnings + used, sizeof(warnings) - used, "%s%s", used ? "; " : "", text);
  (void)flags;
  (void)file;
  (void)line;
}

const char *doctor_plugin_warnings(void)
{
  static char out[sizeof(warnings)];

  memcpy(out, warnings, sizeof(out));
  warnings[0] = '\0';
  return out;
}

static const char *resolve(const struct doctor_opts *o, char *buf, size_t len)
{
  static const char *rel[] = {"../plugin/", "../" DOCTOR_LIBDIR "/", "../lib/"};
  char exe[512], *slash;
  ssize_t n;
  void *h;

  if (o->plugin_given)
    return o->plugin;
  h = dlopen(PLUGIN_NAME, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) {
    dlclose(h);
    return PLUGIN_NAME;
  }
  n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0)
    return PLUGIN_NAME;
  exe[n] = '\0';
  slash = strrchr(exe, '/');
  if (slash == NULL)
    return PLUGIN_NAME;
  slash[1] = '\0';
  for (unsigned i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
    int w = snprintf(buf, len, "%s%s" PLUGIN_NAME, exe, rel[i]);

    if (w > 0 && (size_t)w < len && access(buf, R_OK) == 0)
      return buf;
  }
  return PLUGIN_NAME;
}

int doctor_plugin_open(struct doctor_plugin *p, const struct doctor_opts *o, char *err, size_t len)
{
  ncclNetCommConfig_v11_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  struct link_map *lm = NULL;
  char found[512];
  const char *path;
  ncclResult_t rc;

  memset(p, 0, sizeof(*p));
  verbose = o->verbose;
  warnings[0] = '\0';
  path = resolve(o, found, sizeof(found));
  snprintf(p->path, sizeof(p->path), "%s", path);
  if (drv_open(&p->d, path, 11) != 0) {
    snprintf(err, len,
             "cannot load the plugin %s (the loader's message is above; --plugin PATH "
             "names another copy)",
             path);
    return -1;
  }
  p->loaded = 1;
  if (dlinfo(p->d.lib, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL && lm->l_name[0])
    snprintf(p->path, sizeof(p->path), "%s", lm->l_name);
  rc = p->d.v11->init(&p->d.ctx, 0x6d6370646f63ull, &cfg, plugin_logger, NULL);
  if (rc != ncclSuccess) {
    snprintf(err, len, "the plugin's init failed (%d): %s", rc, doctor_plugin_warnings());
    return -1;
  }
  p->inited = 1;
  if (drv_devices(&p->d, &p->ndev) != ncclSuccess || p->ndev <= 0) {
    snprintf(err, len, "the plugin reports no device: %s", doctor_plugin_warnings());
    return -1;
  }
  return 0;
}

int doctor_plugin_listen(struct doctor_plugin *p, int dev, void *handle, char *err, size_t len)
{
  if (dev < 0 || dev >= p->ndev) {
    snprintf(err, len, "--dev %d: the plugin has %d device(s)", dev, p->ndev);
    return -1;
  }
  if (drv_props(&p->d, dev, &p->props) != ncclSuccess ||
      drv_listen(&p->d, dev, handle, &p->lc) != ncclSuccess || p->lc == NULL) {
    snprintf(err, len, "the plugin's listen on device %d failed: %s", dev, doctor_plugin_warnings());
    return -1;
  }
  return 0;
}

static double now_s(void) { return drv_now(); }

int doctor_plugin_connect(struct doctor_plugin *p, int dev, void *peer_handle, int timeout_s, char *err,
                          size_t len)
{
  double deadline = now_s() + timeout_s;

  /* Both ends dial before their first accept: an accept first could take in the peer's
   * own connection, which mcpnet then shares toward that process instead of dialling it,
   * and a port range dropped in one direction would pass unseen whenever the peer
   * happened to dial first. */
  while (p->sc == NULL || p->rc == NULL) {
    if (p->sc == NULL && drv_connect(&p->d, dev, peer_handle, &p->sc) != ncclSuccess) {
      snprintf(err, len, "connect failed: %s", doctor_plugin_warnings());
      return -1;
    }
    if (p->rc == NULL && drv_accept(&p->d, p->lc, &p->rc) != ncclSuccess) {
      snprintf(err, len, "accept failed: %s", doctor_plugin_warnings());
      return -1;
    }
    if ((p->sc == NULL || p->rc == NULL) && now_s() > deadline) {
      const char *w = doctor_plugin_warnings();

      snprintf(err, len, "%s did not finish within %d s%s%s", p->sc == NULL ? "connect" : "accept", timeout_s,
               w[0] ? ": " : "", w);
      return -2;
    }
    usleep(200); /* NCCL's proxy spins; the lab's guests share two cores */
  }
  return 0;
}

void doctor_plugin_close(struct doctor_plugin *p)
{
  if (p->sc != NULL)
    drv_close_send(&p->d, p->sc);
  if (p->rc != NULL)
    drv_close_recv(&p->d, p->rc);
  if (p->lc != NULL)
    drv_close_listen(&p->d, p->lc);
  p->sc = p->rc = p->lc = NULL;
  if (p->inited)
    drv_finalize(&p->d);
  p->inited = 0;
  if (p->loaded)
    drv_close_lib(&p->d);
  p->loaded = 0;
}
