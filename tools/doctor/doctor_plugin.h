/*
 * doctor_plugin.h - the built plugin as NCCL loads it, for the two-node check (see
 * doctor_plugin.c): dlopen by NCCL's name, the v11 table through tools/drive, and the
 * WARNs the plugin logs kept for the report.
 */
#ifndef MCPNET_DOCTOR_PLUGIN_H
#define MCPNET_DOCTOR_PLUGIN_H

#include <stddef.h>

#include "doctor.h"
#include "mcp_drive.h"

struct doctor_plugin {
  struct mcp_drive d;
  int loaded, inited;
  char path[512]; /* the file the loader really opened */
  int ndev;
  ncclNetProperties_v12_t props;
  void *lc, *sc, *rc;
};

/* Loads and initializes the plugin; -1 with err (and the plugin's own WARNs). */
int doctor_plugin_open(struct doctor_plugin *p, const struct doctor_opts *o, char *err, size_t len);
/* Listens on device dev; the handle is NCCL_NET_HANDLE_MAXSIZE bytes. */
int doctor_plugin_listen(struct doctor_plugin *p, int dev, void *handle, char *err, size_t len);
/* Connects a send and a receive comm toward the peer's handle, polling connect and
 * accept from one thread as NCCL's proxy does, within timeout_s. */
int doctor_plugin_connect(struct doctor_plugin *p, int dev, void *peer_handle, int timeout_s, char *err,
                          size_t len);
void doctor_plugin_close(struct doctor_plugin *p);
/* The WARNs the plugin logged since the last call ("" when none), then forgets them. */
const char *doctor_plugin_warnings(void);

#endif
