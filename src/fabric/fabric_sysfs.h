/*
 * fabric_sysfs.h - an RDMA device and its ports as sysfs shows them, read from a sysfs
 * root given as a parameter: "/sys" on a host, a fixture tree in unit tests, so the
 * same code reads both. The result is plain data (identity, port state, GID and P_Key
 * tables); deciding which GIDs belong to this network namespace is not done here (see
 * fabric_netns.h), because the names sysfs gives repeat across namespaces.
 */
#ifndef MCPNET_FABRIC_SYSFS_H
#define MCPNET_FABRIC_SYSFS_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric/fabric.h"

/* The same values as IBV_LINK_LAYER_* (checked where verbs.h is at hand). */
enum mcp_link_layer {
  MCP_LINK_LAYER_UNSPECIFIED = 0,
  MCP_LINK_LAYER_INFINIBAND = 1,
  MCP_LINK_LAYER_ETHERNET = 2,
};

/* One readable GID slot. Slots the kernel refuses to describe are not listed. */
struct mcp_sysfs_gid {
  int index; /* the slot in the port's table */
  uint8_t raw[16];
  int type;                 /* enum mcp_gid_type */
  char netdev[IF_NAMESIZE]; /* gid_attrs/ndevs: a name, "" on InfiniBand */
};

struct mcp_sysfs_port {
  int num;             /* the port number (1-based) */
  int state;           /* "4: ACTIVE" -> 4 (the IBV_PORT_* value); 0 unknown */
  char state_name[16]; /* "ACTIVE" */
  int phys_state;      /* "5: LinkUp" -> 5; 0 unknown */
  char phys_state_name[24];
  int link_layer; /* enum mcp_link_layer */
  char rate[64];  /* "100 Gb/sec (4X EDR)", "" when unreadable */
  int rate_mbps;  /* 100000 for the above, 0 when unknown */
  uint16_t lid;
  int gid_slots; /* entries under gids/ (the table length) */
  int ngid;      /* readable entries, in index order */
  struct mcp_sysfs_gid *gid;
  int gid_skipped; /* slots skipped: empty, or not described to us */
  int npkey;       /* pkeys/0 .. pkeys/npkey-1, empty slots (0x0000) kept */
  uint16_t *pkey;
};

struct mcp_sysfs_dev {
  char name[MCP_DEV_NAME_MAX];
  uint64_t node_guid;      /* host order; 0 when unreadable */
  uint64_t sys_image_guid; /* shared by the ports of one adapter split into devices */
  char *device_path;       /* realpath of <dev>/device; NULL without one (rxe, siw) */
  char *pf_path;           /* realpath of <dev>/device/physfn for an SR-IOV VF, else NULL */
  char driver[32];         /* "mlx5_core", "rxe", ... or "" */
  int nport;
  struct mcp_sysfs_port *port; /* in port number order */
};

/*
 * The device names under <root>/class/infiniband, sorted, at most max of them.
 * Returns how many there are (may exceed max), 0 when the folder does not exist
 * (no RDMA here), or a negative errno.
 */
int mcp_sysfs_dev_names(const char *root, char (*names)[MCP_DEV_NAME_MAX], int max);

/*
 * Read device name below root. Returns 0, or a negative errno with err saying what
 * could not be read. Attributes a device lacks are left at 0 / "" / NULL. Release
 * with mcp_sysfs_dev_free (also after a failure).
 */
int mcp_sysfs_dev_read(const char *root, const char *name, struct mcp_sysfs_dev *dev, char *err,
                       size_t errlen);
void mcp_sysfs_dev_free(struct mcp_sysfs_dev *dev);

/* The port numbered num, or NULL. */
const struct mcp_sysfs_port *mcp_sysfs_port_find(const struct mcp_sysfs_dev *dev, int num);

/* One attribute's text without its trailing newline or spaces, read with one read(2)
 * and no allocation; 0, -ENODATA when empty, or a negative errno. */
int mcp_sysfs_attr_read(const char *path, char *buf, size_t len);

/* Text parsers shared with tests: 0 on success, -EINVAL on malformed input. */
int mcp_sysfs_parse_guid(const char *text, uint64_t *guid);                    /* "0002:c903:00fa:ab10" */
int mcp_sysfs_parse_state(const char *text, int *num, char *name, size_t len); /* "4: ACTIVE" */
int mcp_sysfs_parse_rate(const char *text, int *mbps);                         /* "2.5 Gb/sec (1X SDR)" */

#endif
