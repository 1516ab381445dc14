/*
 * test_plugin_props.c - the property fill of plugin/ (mcp_plugin_props.c) and the
 * makeVDevice adapters, on a made-up fabric, as NCCL reads them through each table.
 *
 * Why: v12 moved every field after vProps and added railId/planeId, and its virtual
 * devices fuse 8 devices where v9 - v11 fuse 4. One core fills all versions, so the
 * checks are that v12 gets the rail and plane discovery found (a fused device's as
 * NCCL's IB transport computes them) and all 8 devices in vProps, that v11 and v9 read
 * the same device with their own layouts (vProps never past their 4 entries), and that a
 * v11 makeVDevice of more than 4 is refused while v12's of 8 is made.
 */
#include <string.h>

#include "mcp_plugin.h"
#include "mcp_test.h"
#include "core/param.h"
#include "fabric/fabric_process.h"
#include "fabric/fabric_sysfs.h"
#include "fabric/fabric_vdev.h"
#include "net/net.h"

#define NPORTS 9

/* Ports as discovery leaves them for NCCL_IB_HCA=m0:1:4:1,m1:1:4:2,m2:1:4:1,... : rail 4
 * on the first eight but m3's (rail 5), planes 1 and 2 alternating, m8 with neither. */
static int fake_setup(struct mcp_fabric *f)
{
  memset(f, 0, sizeof(*f));
  mcp_fabric_cfg_fill(&f->cfg, mcp_param_process()); /* as discovery does */
  for (int i = 0; i < NPORTS; i++) {
    struct mcp_net_dev *d = &f->dev[f->ndev++];

    snprintf(d->name, sizeof(d->name), "m%d", i);
    snprintf(d->ibdev, sizeof(d->ibdev), "m%d", i);
    d->port = d->topo_port = 1;
    d->link_layer = MCP_LINK_LAYER_INFINIBAND;
    d->speed_mbps = 400000;
    d->ptr_support = NCCL_PTR_HOST;
    d->max_qp = 1000;
    d->qps_per_conn = 1;
    d->rail = i == 8 ? -1 : i == 3 ? 5 : 4;
    d->plane = i == 8 ? -1 : 1 + i % 2;
  }
  f->local_rank = -1;
  return mcp_fabric_vdev_sync(f, NULL);
}

static const char *no_getenv(void *arg, const char *name)
{
  (void)arg;
  (void)name;
  return NULL;
}

static void setup(void)
{
  struct mcp_param_env env = {0};
  char why[512] = "";

  env.getenv = no_getenv; /* NCCL_IB_MERGE_NICS and the rest at their defaults */
  env.home = "/nonexistent";
  env.system_conf = "/nonexistent";
  mcp_param_free(mcp_param_process());
  CHECK_EQ_INT(mcp_param_load(mcp_param_process(), &env, 0, why, sizeof(why)), 0);
  CHECK_EQ_INT(mcp_fabric_process_open(1, fake_setup), 0);
}

static void test_physical(void)
{
  ncclNetProperties_v12_t p12;
  ncclNetProperties_v11_t p11;
  ncclNetProperties_v9_t p9;

  CHECK_EQ_INT(mcp_plugin_props_v12(1, &p12), ncclSuccess);
  CHECK_EQ_STR(p12.name, "m1");
  CHECK_EQ_INT(p12.railId, 4);
  CHECK_EQ_INT(p12.planeId, 2);
  CHECK_EQ_INT(p12.vProps.ndevs, 1);
  CHECK_EQ_INT(p12.vProps.devs[0], 1);
  CHECK_EQ_INT(p12.speed, 400000);
  CHECK_EQ_INT(p12.maxRecvs, MCP_MAX_RECVS);
  CHECK_EQ_INT(p12.maxP2pBytes, MCP_MAX_P2P_BYTES); /* at its v12 offset, 104 */
  CHECK_EQ_INT(p12.maxMultiRequestSize, 1);
  CHECK_EQ_INT(mcp_plugin_props_v12(8, &p12), ncclSuccess);
  CHECK_EQ_INT(p12.railId, NCCL_NET_ID_UNDEF);
  CHECK_EQ_INT(p12.planeId, NCCL_NET_ID_UNDEF);
  /* The same device through the older layouts: the same values where they overlap. */
  CHECK_EQ_INT(mcp_plugin_props_v11(1, &p11), ncclSuccess);
  CHECK_EQ_STR(p11.name, "m1");
  CHECK_EQ_INT(p11.maxP2pBytes, MCP_MAX_P2P_BYTES);
  CHECK_EQ_INT(p11.vProps.ndevs, 1);
  CHECK_EQ_INT(mcp_plugin_props_v9(1, &p9), ncclSuccess);
  CHECK_EQ_INT(p9.maxCollBytes, MCP_MAX_P2P_BYTES);
  CHECK_EQ_INT(mcp_plugin_props_v12(NPORTS + 7, &p12), ncclInvalidArgument);
}

static void test_fused(void)
{
  ncclNetVDeviceProps_v12_t v12 = {8, {0, 1, 2, 4, 5, 6, 7, 3}};
  ncclNetVDeviceProps_v9_t v9 = {4, {0, 2, 4, 6}};
  ncclNetProperties_v12_t p12;
  ncclNetProperties_v11_t p11;
  int d8 = -1, d4 = -1, d2 = -1;

  /* v11 (and v9, v10) take 4 at most: 5 is refused before devs[4], past their struct, is
   * read; v12 takes 8. */
  v9.ndevs = 5;
  CHECK_EQ_INT(mcp_plugin_make_vdevice(&d4, &v9), ncclInvalidUsage);
  v9.ndevs = 4;
  CHECK_EQ_INT(mcp_plugin_make_vdevice(&d4, &v9), ncclSuccess);
  CHECK_EQ_INT(d4, NPORTS);
  v12.ndevs = 9;
  CHECK_EQ_INT(mcp_plugin_make_vdevice_v12(&d8, &v12), ncclInvalidUsage);
  v12.ndevs = 8;
  CHECK_EQ_INT(mcp_plugin_make_vdevice_v12(&d8, &v12), ncclSuccess);
  CHECK_EQ_INT(d8, NPORTS + 1);
  CHECK_EQ_INT(mcp_plugin_props_v12(d8, &p12), ncclSuccess);
  CHECK_EQ_INT(p12.vProps.ndevs, 8);
  for (int i = 0; i < 8; i++)
    CHECK_EQ_INT(p12.vProps.devs[i], v12.devs[i]);
  CHECK_EQ_INT(p12.speed, 8 * 400000);
  CHECK_EQ_STR(p12.name, "m0+m1+m2+m4+m5+m6+m7+m3");
  /* m3 is on rail 5: the members disagree, no rail. Planes 1 and 2 are indices 1 and 2. */
  CHECK_EQ_INT(p12.railId, NCCL_NET_ID_UNDEF);
  CHECK_EQ_INT(p12.planeId, MCP_PLANE_FUSED | 1 << 1 | 1 << 2);
  /* Through v11's layout, its vProps hold 4 entries: never written past them. */
  memset(&p11, 0x5a, sizeof(p11));
  CHECK_EQ_INT(mcp_plugin_props_v11(d8, &p11), ncclSuccess);
  CHECK_EQ_INT(p11.vProps.ndevs, 4);
  CHECK_EQ_INT(p11.maxP2pBytes, MCP_MAX_P2P_BYTES);
  CHECK_EQ_INT(p11.maxMultiRequestSize, 1);
  /* Members of one rail and one plane: the rail; the plane is a fused set of one. */
  CHECK_EQ_INT(mcp_plugin_props_v12(d4, &p12), ncclSuccess);
  CHECK_EQ_INT(p12.railId, 4);
  CHECK_EQ_INT(p12.planeId, MCP_PLANE_FUSED | 1 << 1);
  /* A member without a rail or plane: no rail; its plane is bit 0. */
  CHECK_EQ_INT(mcp_plugin_make_vdevice_v12(&d2, &(ncclNetVDeviceProps_v12_t){2, {0, 8}}), ncclSuccess);
  CHECK_EQ_INT(mcp_plugin_props_v12(d2, &p12), ncclSuccess);
  CHECK_EQ_INT(p12.railId, NCCL_NET_ID_UNDEF);
  CHECK_EQ_INT(p12.planeId, MCP_PLANE_FUSED | 1 << 1 | 1 << 0);
}

int main(void)
{
  setup();
  RUN_TEST(test_physical);
  RUN_TEST(test_fused);
  mcp_fabric_process_close_ctx();
  mcp_param_free(mcp_param_process());
  return TEST_EXIT();
}
