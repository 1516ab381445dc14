/*
 * fabric.h - what RDMA hardware this process can use, as plain data.
 *
 * Discovery turns verbs and sysfs into an inventory of ports ("net devices" in NCCL's
 * sense: one per usable port); choosing the GID and filtering are functions of that
 * data and the configuration, so they are unit-testable. Each entry is filled once
 * per init and read-only afterwards; strings live as long as the inventory.
 */
#ifndef MCPNET_FABRIC_H
#define MCPNET_FABRIC_H

#include <net/if.h>
#include <stdint.h>

#define MCP_MAX_NET_DEVS 32
#define MCP_DEV_NAME_MAX 64
#define MCP_REASON_MAX 1024

enum mcp_gid_type { MCP_GID_TYPE_IB = 0, MCP_GID_TYPE_ROCE_V1 = 1, MCP_GID_TYPE_ROCE_V2 = 2 };

struct mcp_gid_choice {
  int index; /* GID table index */
  uint8_t raw[16];
  int type;   /* enum mcp_gid_type */
  int family; /* 4 for IPv4-mapped, 6 for IPv6, 0 for IB */
  char netdev[IF_NAMESIZE];
  char text[64]; /* the address as people write it */
  char why[128]; /* why this one */
};

/* One usable port: what NCCL calls a net device. */
struct mcp_net_dev {
  char name[MCP_DEV_NAME_MAX];  /* unique: the verbs device name, ":port" when it has several */
  char ibdev[MCP_DEV_NAME_MAX]; /* the verbs device name */
  int port;
  int topo_port;  /* reported to NCCL (fabric_topo.h); port is the verbs one */
  int link_layer; /* IBV_LINK_LAYER_* */
  int active_mtu; /* enum ibv_mtu */
  int speed_mbps;
  uint16_t lid;
  uint64_t guid;   /* sys_image_guid */
  char *pci_path;  /* heap; its NIC's PCI path as NCCL names it (fabric_topo.h); NULL without one */
  int ptr_support; /* NCCL_PTR_* */
  int max_qp;
  int max_cqe;      /* entries one CQ may hold (ibv_device_attr.max_cqe) */
  int qps_per_conn; /* NCCL_IB_QPS_PER_CONNECTION as this port runs it (capped) */
  int max_qp_wr;
  int max_sge;
  int max_inline;            /* 0 until probed */
  char driver[32];           /* kernel driver name (rxe, mlx5_core, ...), "" if unknown */
  struct mcp_gid_choice gid; /* RoCE: the chosen GID; IB: index 0 */
  int pkey_index;            /* P_Key table index every QP on this port uses */
  uint16_t pkey;             /* the P_Key at that index */
  int pkey_full;             /* 1: full member of the partition */
  int sl, tc;                /* from the rank map; -1: NCCL_IB_SL/TC or the comm's class */
  /* NCCL 2.30's rail and plane (net API v12): the rank map's rail=/plane=, else the
   * NCCL_IB_HCA token naming the port (name:port:rail:plane); -1: not given. */
  int rail, plane;
};

/* A device or port that was found and not used, and why. */
struct mcp_fabric_excluded {
  char name[MCP_DEV_NAME_MAX]; /* the verbs device name */
  int port;                    /* 0: the whole device */
  int requested;               /* named by the rank map or an NCCL_IB_HCA include list */
  char reason[MCP_REASON_MAX];
};

#define MCP_MAX_EXCLUDED 64

/*
 * The settings of the fabric, copied once from the configuration net's init loaded
 * (mcp_param_process(), src/net/mcp_net_init.c) when discovery fills the fabric
 * (mcp_fabric_discover_rank), and read from here by fabric and the layers above, never
 * from the configuration itself. A device context takes data_access when it opens. A
 * new fabric-wide setting: a field here and its line in mcp_fabric_cfg_fill.
 */
struct mcp_fabric_cfg {
  unsigned data_access; /* NCCL_IB_PCI_RELAXED_ORDERING: NCCL's buffers' MR access (mcp_mr_data_access) */
  int merge_nics;       /* NCCL_IB_MERGE_NICS: 0 refuses NCCL's makeVDevice of several devices (net) */
};

struct mcp_fabric {
  struct mcp_fabric_cfg cfg;
  int ndev;
  struct mcp_net_dev dev[MCP_MAX_NET_DEVS];
  int nexcl;
  struct mcp_fabric_excluded excl[MCP_MAX_EXCLUDED];
  int local_rank;                /* -1: unknown */
  const char *local_rank_source; /* the variable it came from (static), or NULL */
  char placement[256];           /* the rank-map entry that applies, "" when none */
};

struct mcp_config;

/* The fabric's settings out of a loaded configuration (after mcp_verbs_load: relaxed
 * ordering depends on the verbs the library has); discovery calls it. */
void mcp_fabric_cfg_fill(struct mcp_fabric_cfg *fc, const struct mcp_config *cfg);

/*
 * Fills fab with the ports this process may use: every usable one, or exactly those
 * the rank map gives this process's local rank. 0 on success; -ENODEV when none is usable
 * or, in strict mode, when a requested device is missing or unusable, after one WARN
 * naming every device that was found and why each was excluded. fab->excl holds the
 * exclusions either way (the doctor prints them). -EINVAL for a local rank that cannot be
 * read.
 */
int mcp_fabric_discover(struct mcp_fabric *fab, const struct mcp_config *cfg);
/* The same for a given local rank (-1: none); the doctor asks for each rank in turn. */
int mcp_fabric_discover_rank(struct mcp_fabric *fab, const struct mcp_config *cfg, int local_rank,
                             const char *local_rank_source);
void mcp_fabric_release(struct mcp_fabric *fab);

/* Speed in Mbps from the IB width and speed codes of ibv_port_attr; 0 if unknown. */
int mcp_fabric_speed_mbps(uint8_t width_code, uint32_t speed_code);

/* What a port whose speed cannot be told reports: NCCL reads 0 as 10 Gb/s and would
 * route around a fast port; 100 Gb/s is the slowest current data-centre RDMA port. */
#define MCP_FABRIC_SPEED_FALLBACK_MBPS 100000

/*
 * The speed getProperties reports for a port, never 0: active_speed_ex when non-zero
 * (XDR and later), else active_speed, times the width; when a code is unknown, the
 * kernel's rate (sysfs ports/N/rate, rate_mbps > 0), else the fallback above. *source
 * is NULL when the codes were known, else says which of the two was used.
 */
int mcp_fabric_port_speed(uint8_t width_code, uint8_t speed_code, uint32_t speed_ex, int rate_mbps,
                          const char **source);
/* ibv_mtu enum <-> bytes. */
int mcp_fabric_mtu_bytes(int ibv_mtu);
int mcp_fabric_mtu_enum(int bytes);

#endif
