/*
 * rankmap.h - MCPNET_RANK_MAP: which devices, GID, P_Key, SL, TC, rail and plane each
 * local rank uses (see mcp_rankmap.c), and where the local rank comes from. Parsed in core, once,
 * when the configuration is read (struct mcp_config.rank_map_parsed); fabric resolves
 * the result against the devices it finds.
 */
#ifndef MCPNET_RANKMAP_H
#define MCPNET_RANKMAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/gid_range.h"
#include "core/limits.h"

#define MCP_RANKMAP_MAX 64  /* entries */
#define MCP_RANKMAP_DEVS 16 /* devices per entry: two fused sets of 8 */
#define MCP_RANKMAP_RANK_MAX 4095
#define MCP_RANKMAP_NAME_MAX 64              /* a verbs device name; fabric checks it is MCP_DEV_NAME_MAX */
#define MCP_RANKMAP_FUSE_MAX MCP_MAX_MEMBERS /* devices one fused set names (limits.h) */

struct mcp_rankmap_dev {
  char name[MCP_RANKMAP_NAME_MAX]; /* exact verbs device name */
  int port;                        /* -1: every active port */
  int group; /* which '+'-separated item: devices joined by '*' share it and become one fused device */
};

struct mcp_rankmap_entry {
  int lo, hi; /* local ranks lo..hi */
  int ndev;
  struct mcp_rankmap_dev dev[MCP_RANKMAP_DEVS];
  int gid_index;        /* gid=N; -1 otherwise */
  int has_gid_addr;     /* gid=IP */
  uint8_t gid_addr[16]; /* IPv4-mapped or IPv6, as a GID holds it */
  int has_gid_range;    /* gid=CIDR */
  struct mcp_gid_range gid_range;
  int pkey;        /* pkey=VALUE; -1 otherwise */
  int sl, tc;      /* -1 otherwise */
  int rail, plane; /* rail=N, plane=N (net API v12's railId, planeId); -1 otherwise */
  char text[256];  /* the entry as written, for messages */
};

struct mcp_rankmap {
  int n;
  struct mcp_rankmap_entry e[MCP_RANKMAP_MAX];
};

/* Parse text (NULL or "" gives an empty map). -EINVAL with a reason naming the entry. */
int mcp_rankmap_parse(const char *text, struct mcp_rankmap *map, char *err, size_t errlen);
/* The entry covering rank, or NULL. */
const struct mcp_rankmap_entry *mcp_rankmap_find(const struct mcp_rankmap *map, int rank);

/*
 * This process's local rank: MCPNET_LOCAL_RANK when >= 0, else the first set of
 * LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
 * PMI_LOCAL_RANK. *source names the variable (a static string). -ENOENT when none is set;
 * -EINVAL (with err) when the first set one is not a rank.
 */
int mcp_local_rank(int configured, const char *(*get)(void *arg, const char *name), void *arg,
                   const char **source, char *err, size_t errlen);

#endif
