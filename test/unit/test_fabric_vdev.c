/*
 * test_fabric_vdev.c - the virtual-device table behind makeVDevice and the rank map's
 * fused sets: indices after the physical ones, members in stripe order, every refusal
 * (count, range, nesting, duplicates, mixed link layers, a full table) leaving the table
 * as it was, and the table outliving the fabric: a rediscovery that finds the same ports
 * in another order resolves each index to the same ports, one that lost a member says so.
 * The last part drives the same through net's entry points (devices, getProperties,
 * makeVDevice) with a made-up fabric across a teardown, as NCCL would see it.
 */
#include <errno.h>
#include <stdlib.h>

#include "mcp_test.h"
#include "core/param.h"
#include "fabric/fabric_process.h"
#include "fabric/fabric_sysfs.h"
#include "fabric/fabric_vdev.h"
#include "net/net.h"

#define ETH MCP_LINK_LAYER_ETHERNET
#define IB MCP_LINK_LAYER_INFINIBAND

static void fab_add(struct mcp_fabric *f, const char *name, int port, int ll, int speed, int ptr)
{
  struct mcp_net_dev *d = &f->dev[f->ndev++];
  const char *colon = strchr(name, ':');

  memset(d, 0, sizeof(*d));
  snprintf(d->name, sizeof(d->name), "%s", name);
  snprintf(d->ibdev, sizeof(d->ibdev), "%.*s", colon ? (int)(colon - name) : (int)strlen(name), name);
  d->port = port;
  d->topo_port = port; /* what discovery reports to NCCL (fabric_topo.h) */
  d->link_layer = ll;
  d->speed_mbps = speed;
  d->ptr_support = ptr;
  d->max_qp = 1000;
  d->qps_per_conn = 1;
  d->rail = d->plane = -1; /* as discovery leaves a port NCCL_IB_HCA gives neither */
}

/* A fabric of the given device names (port 1, Ethernet) in that order. */
static void fab_names(struct mcp_fabric *f, int n, const char *const *names)
{
  memset(f, 0, sizeof(*f));
  for (int i = 0; i < n; i++)
    fab_add(f, names[i], 1, ETH, 10000, NCCL_PTR_HOST);
}

static struct mcp_vdev_table t;
static struct mcp_fabric fab;
static char err[512];

/* makeVDevice as a table whose vProps hold max devices asks (4: v9 - v11, 8: v12). */
static int make_max(int n, const int *devs, int max, int *index)
{
  err[0] = '\0';
  return mcp_vdev_table_make(&t, &fab, n, devs, max, index, err, sizeof(err));
}

static int make(int n, const int *devs, int *index) { return make_max(n, devs, 4, index); }

static void expect_members(int dev, int n, const int *mem)
{
  struct mcp_vdev_info in;

  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, dev, &in, err, sizeof(err)), n);
  for (int i = 0; i < n && i < in.nmem; i++)
    CHECK_EQ_INT(in.mem[i], mem[i]);
}

static void expect_refused(int rc, int want, const char *needle)
{
  CHECK_EQ_INT(rc, want);
  if (strstr(err, needle) == NULL)
    fprintf(stderr, "error \"%s\" lacks \"%s\"\n", err, needle);
  CHECK(strstr(err, needle) != NULL);
}

static void test_identity_before_sync(void)
{
  static const char *const names[] = {"rxe0", "rxe1"};
  struct mcp_vdev_info in;

  mcp_vdev_table_init(&t);
  fab_names(&fab, 2, names);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 1, &in, err, sizeof(err)), 1);
  CHECK_EQ_INT(in.mem[0], 1);
  CHECK_EQ_STR(in.name, "rxe1");
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 2, &in, err, sizeof(err)), -ENODEV);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, -1, &in, err, sizeof(err)), -ENODEV);
}

static void test_make(void)
{
  static const char *const names[] = {"rxe0", "rxe1", "rxe2"};
  struct mcp_vdev_info in;
  int idx = -1;

  mcp_vdev_table_init(&t);
  fab_names(&fab, 3, names);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 3);
  CHECK_EQ_INT(make(2, (int[]){0, 1}, &idx), 0);
  CHECK_EQ_INT(idx, 3); /* right after the physical ones */
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 4);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 3, &in, err, sizeof(err)), 2);
  CHECK_EQ_INT(in.virt, 1);
  CHECK_EQ_STR(in.name, "rxe0+rxe1");
  CHECK_EQ_INT(in.nvp, 2);
  CHECK_EQ_INT(in.vp[0], 0);
  CHECK_EQ_INT(in.vp[1], 1);
  /* A physical index stands for itself, in vProps too. */
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 2, &in, err, sizeof(err)), 1);
  CHECK_EQ_INT(in.virt, 0);
  CHECK_EQ_INT(in.nvp, 1);
  CHECK_EQ_INT(in.vp[0], 2);
  /* Members keep NCCL's order: it is the stripe order. */
  CHECK_EQ_INT(make(2, (int[]){2, 0}, &idx), 0);
  CHECK_EQ_INT(idx, 4);
  expect_members(4, 2, (int[]){2, 0});
  expect_members(3, 2, (int[]){0, 1});
  CHECK_EQ_INT(make(1, (int[]){1}, &idx), 0); /* NCCL skips these; allowed like NCCL's transport */
  CHECK_EQ_INT(idx, 5);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 6, &in, err, sizeof(err)), -ENODEV);
}

static void test_refusals(void)
{
  static const char *const names[] = {"rxe0", "rxe1", "rxe2", "rxe3", "rxe4"};
  int idx = -7;

  mcp_vdev_table_init(&t);
  fab_names(&fab, 5, names);
  fab_add(&fab, "mlx5_0", 1, IB, 100000, NCCL_PTR_HOST);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  expect_refused(make(0, (int[]){0}, &idx), -EINVAL, "1..4");
  expect_refused(make(5, (int[]){0, 1, 2, 3, 4}, &idx), -EINVAL, "1..4");                    /* v9 - v11: 4 */
  expect_refused(make_max(9, (int[]){0, 1, 2, 3, 4, 5, 0, 1, 2}, 8, &idx), -EINVAL, "1..8"); /* v12: 8 */
  expect_refused(make(2, (int[]){0, 6}, &idx), -EINVAL, "device 6 is not a physical device");
  expect_refused(make(2, (int[]){-1, 0}, &idx), -EINVAL, "device -1 is not a physical device");
  expect_refused(make(2, (int[]){1, 1}, &idx), -EINVAL, "device 1 (rxe1) is named twice");
  expect_refused(make(2, (int[]){0, 5}, &idx), -EINVAL,
                 "cannot fuse rxe0 (Ethernet) with mlx5_0 (InfiniBand)");
  CHECK_EQ_INT(idx, -7);
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 6);
  CHECK_EQ_INT(make(2, (int[]){0, 1}, &idx), 0);
  CHECK_EQ_INT(idx, 6);
  expect_refused(make(2, (int[]){6, 2}, &idx), -EINVAL, "virtual devices do not nest");
  for (int i = 1; i < MCP_VDEV_MAX; i++)
    CHECK_EQ_INT(make(1, (int[]){i % 5}, &idx), 0);
  expect_refused(make(1, (int[]){0}, &idx), -ENOSPC, "all 32 virtual devices are made");
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 6 + MCP_VDEV_MAX);
}

/* NCCL keeps index 3 while mcpnet gives its fabric back and discovers it again. */
static void test_outlives_fabric(void)
{
  static const char *const a[] = {"rxe0", "rxe1", "rxe2"};
  static const char *const reordered[] = {"rxe2", "rxe0", "rxe1"};
  static const char *const lost[] = {"rxe0", "rxe1", "rxe9"};
  static const char *const fewer[] = {"rxe0", "rxe1"};
  struct mcp_vdev_info in;
  int idx;

  mcp_vdev_table_init(&t);
  fab_names(&fab, 3, a);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  CHECK_EQ_INT(make(2, (int[]){1, 2}, &idx), 0);
  CHECK_EQ_INT(idx, 3);

  fab_names(&fab, 3, reordered);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 4);
  expect_members(3, 2, (int[]){2, 0}); /* rxe1 and rxe2, wherever they are now */

  fab_names(&fab, 3, lost);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  expect_refused(mcp_vdev_table_info(&t, &fab, 3, &in, err, sizeof(err)), -ENODEV,
                 "device 3 (rxe1+rxe2): its member rxe2 is gone");

  fab_names(&fab, 2, fewer);
  expect_refused(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 1, "now 2, not 3");
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 2);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 3, &in, err, sizeof(err)), -ENODEV);
  expect_refused(make(2, (int[]){0, 1}, &idx), -EINVAL, "discovered again");

  fab_names(&fab, 3, a);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 4);
  expect_members(3, 2, (int[]){1, 2});

  /* A member came back with another link layer (same name, now InfiniBand): the fused
   * device is refused where its members are resolved, by the check makeVDevice used, so
   * connect and accept never open it (they have no check of their own). */
  fab.dev[2].link_layer = IB;
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  expect_refused(mcp_vdev_table_info(&t, &fab, 3, &in, err, sizeof(err)), -EINVAL,
                 "device 3 (rxe1+rxe2): cannot fuse rxe1 (Ethernet) with rxe2 (InfiniBand): the members of a "
                 "fused device must share one link layer");
  fab.dev[2].link_layer = ETH;
  expect_members(3, 2, (int[]){1, 2});
}

static const struct mcp_rankmap_entry *entry(struct mcp_rankmap *map, const char *text)
{
  char why[256] = "";

  if (mcp_rankmap_parse(text, map, why, sizeof(why)) != 0) {
    fprintf(stderr, "'%s' refused: %s\n", text, why);
    CHECK(0);
    return NULL;
  }
  return mcp_rankmap_find(map, 0);
}

/* "rxe0*rxe1+rxe2": NCCL sees two devices, the first of them fused. */
static void test_rank_map_fused_set(void)
{
  static struct mcp_rankmap map;
  static const char *const names[] = {"rxe0", "rxe1", "rxe2"};
  struct mcp_vdev_info in;
  int idx;

  mcp_vdev_table_init(&t);
  fab_names(&fab, 3, names);
  fab.dev[1].speed_mbps = 25000;
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, entry(&map, "0=rxe0*rxe1+rxe2"), err, sizeof(err)), 0);
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 2);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 0, &in, err, sizeof(err)), 2);
  CHECK_EQ_STR(in.name, "rxe0+rxe1");
  CHECK_EQ_INT(in.virt, 0); /* NCCL counts it among the physical devices */
  CHECK_EQ_INT(in.nvp, 1);
  CHECK_EQ_INT(in.vp[0], 0);
  expect_members(1, 1, (int[]){2});
  /* makeVDevice over it takes all its ports. */
  CHECK_EQ_INT(make(2, (int[]){1, 0}, &idx), 0);
  CHECK_EQ_INT(idx, 2);
  expect_members(2, 3, (int[]){2, 0, 1});
  /* '+' alone fuses nothing. */
  mcp_vdev_table_init(&t);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, entry(&map, "0=rxe0+rxe1+rxe2"), err, sizeof(err)), 0);
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 3);
}

static void test_rank_map_fused_refusals(void)
{
  static struct mcp_rankmap map;

  /* A device without a port number fuses all its ports: two dual-port NICs are four. */
  memset(&fab, 0, sizeof(fab));
  fab_add(&fab, "mlx5_0:1", 1, IB, 200000, NCCL_PTR_HOST);
  fab_add(&fab, "mlx5_0:2", 2, IB, 200000, NCCL_PTR_HOST);
  fab_add(&fab, "mlx5_1:1", 1, IB, 200000, NCCL_PTR_HOST);
  fab_add(&fab, "mlx5_1:2", 2, IB, 200000, NCCL_PTR_HOST);
  mcp_vdev_table_init(&t);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, entry(&map, "0=mlx5_0*mlx5_1"), err, sizeof(err)), 0);
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 1);
  expect_members(0, 4, (int[]){0, 1, 2, 3});
  /* Eight ports are NCCL 2.30's most; a ninth is refused. */
  fab_add(&fab, "mlx5_2:1", 1, IB, 200000, NCCL_PTR_HOST);
  fab_add(&fab, "mlx5_2:2", 2, IB, 200000, NCCL_PTR_HOST);
  fab_add(&fab, "mlx5_3:1", 1, IB, 200000, NCCL_PTR_HOST);
  fab_add(&fab, "mlx5_3:2", 2, IB, 200000, NCCL_PTR_HOST);
  mcp_vdev_table_init(&t);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, entry(&map, "0=mlx5_0*mlx5_1*mlx5_2*mlx5_3"), err, sizeof(err)),
               0);
  expect_members(0, 8, (int[]){0, 1, 2, 3, 4, 5, 6, 7});
  fab_add(&fab, "mlx5_4", 1, IB, 200000, NCCL_PTR_HOST);
  mcp_vdev_table_init(&t);
  expect_refused(
    mcp_vdev_table_sync(&t, &fab, entry(&map, "0=mlx5_0*mlx5_1*mlx5_2*mlx5_3*mlx5_4"), err, sizeof(err)),
    -EINVAL, "more than 8 ports (mlx5_4 would be the 9th)");
  fab.ndev = 4; /* the first two NICs again */
  fab_add(&fab, "mlx5_2", 1, IB, 200000, NCCL_PTR_HOST);
  fab_add(&fab, "rxe0", 1, ETH, 10000, NCCL_PTR_HOST);
  mcp_vdev_table_init(&t);
  expect_refused(mcp_vdev_table_sync(&t, &fab, entry(&map, "0=mlx5_2*rxe0"), err, sizeof(err)), -EINVAL,
                 "cannot fuse mlx5_2 (InfiniBand) with rxe0 (Ethernet)");
  CHECK(strstr(err, "MCPNET_RANK_MAP entry '0=mlx5_2*rxe0'") != NULL);
}

/* v12 fuses up to 8 devices; v9 - v11 up to 4 indices, which may stand for more ports
 * (a rank map's fused sets), never more than 8 ports in all. */
static void test_eight_members(void)
{
  static const char *const names[] = {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"};
  static struct mcp_rankmap map;
  int idx = -1;

  mcp_vdev_table_init(&t);
  fab_names(&fab, 9, names);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  CHECK_EQ_INT(make_max(8, (int[]){7, 6, 5, 4, 3, 2, 1, 0}, 8, &idx), 0);
  CHECK_EQ_INT(idx, 9);
  expect_members(9, 8, (int[]){7, 6, 5, 4, 3, 2, 1, 0});
  expect_refused(make_max(5, (int[]){0, 1, 2, 3, 4}, 4, &idx), -EINVAL, "1..4");
  /* Two fused sets of 3 and 5 ports through a v11 table: 2 indices, 8 ports. */
  mcp_vdev_table_init(&t);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, entry(&map, "0=r0*r1*r2+r3*r4*r5*r6*r7+r8"), err, sizeof(err)),
               0);
  CHECK_EQ_INT(mcp_vdev_table_count(&t), 3);
  CHECK_EQ_INT(make(2, (int[]){1, 0}, &idx), 0);
  expect_members(idx, 8, (int[]){3, 4, 5, 6, 7, 0, 1, 2});
  expect_refused(make(3, (int[]){0, 1, 2}, &idx), -EINVAL, "more than 8 ports (r8 would be the 9th)");
}

/* Rails and planes as NCCL 2.30's IB transport reports them (init.cc): a port's own; for
 * several ports the first one's rail when all share it, and the fused plane marker with
 * a bit per port's plane index (no plane: index 0; then the planes in port order). */
static void test_rail_plane(void)
{
  static const char *const names[] = {"m0", "m1", "m2", "m3", "m4"};
  struct mcp_vdev_info in;
  int idx = -1, i;

  mcp_vdev_table_init(&t);
  fab_names(&fab, 5, names);
  /* m0: rail 0 plane 7; m1: rail 0 plane 3; m2: rail 1, no plane; m3: no rail, plane 7;
   * m4: rail 0 plane 7. Plane indices: none 0, 7 -> 1, 3 -> 2. */
  fab.dev[0].rail = 0, fab.dev[0].plane = 7;
  fab.dev[1].rail = 0, fab.dev[1].plane = 3;
  fab.dev[2].rail = 1, fab.dev[2].plane = -1;
  fab.dev[3].rail = -1, fab.dev[3].plane = 7;
  fab.dev[4].rail = 0, fab.dev[4].plane = 7;
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 1, &in, err, sizeof(err)), 1);
  CHECK_EQ_INT(in.rail, 0);
  CHECK_EQ_INT(in.plane, 3);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, 2, &in, err, sizeof(err)), 1);
  CHECK_EQ_INT(in.rail, 1);
  CHECK_EQ_INT(in.plane, -1);
  /* One device through makeVDevice keeps its own plane, as NCCL's does. */
  CHECK_EQ_INT(make(1, (int[]){0}, &idx), 0);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, idx, &in, err, sizeof(err)), 1);
  CHECK_EQ_INT(in.rail, 0);
  CHECK_EQ_INT(in.plane, 7);
  /* Same rail: kept; planes 7 and 3: the marker and bits 1 and 2. */
  CHECK_EQ_INT(make(2, (int[]){1, 0}, &idx), 0);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, idx, &in, err, sizeof(err)), 2);
  CHECK_EQ_INT(in.rail, 0);
  CHECK_EQ_INT(in.plane, MCP_PLANE_FUSED | 1 << 1 | 1 << 2);
  /* Two ports of one plane are still a fused plane set, not that plane. */
  CHECK_EQ_INT(make(2, (int[]){0, 4}, &idx), 0);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, idx, &in, err, sizeof(err)), 2);
  CHECK_EQ_INT(in.rail, 0);
  CHECK_EQ_INT(in.plane, MCP_PLANE_FUSED | 1 << 1);
  /* Rails that differ, or one missing: none. A port without a plane is bit 0. */
  CHECK_EQ_INT(make(2, (int[]){0, 2}, &idx), 0);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, idx, &in, err, sizeof(err)), 2);
  CHECK_EQ_INT(in.rail, -1);
  CHECK_EQ_INT(in.plane, MCP_PLANE_FUSED | 1 << 1 | 1 << 0);
  CHECK_EQ_INT(make(2, (int[]){0, 3}, &idx), 0);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, idx, &in, err, sizeof(err)), 2);
  CHECK_EQ_INT(in.rail, -1);
  /* A first member without a rail makes none either, whatever the others say. */
  CHECK_EQ_INT(make(2, (int[]){3, 0}, &idx), 0);
  CHECK_EQ_INT(mcp_vdev_table_info(&t, &fab, idx, &in, err, sizeof(err)), 2);
  CHECK_EQ_INT(in.rail, -1);
  /* Thirteen planes are more than NCCL 2.30 numbers: the sync refuses them. */
  memset(&fab, 0, sizeof(fab));
  for (i = 0; i < 13; i++) {
    char name[8];
    snprintf(name, sizeof(name), "p%d", i);
    fab_add(&fab, name, 1, ETH, 10000, NCCL_PTR_HOST);
    fab.dev[i].rail = -1;
    fab.dev[i].plane = i < 12 ? 100 + i : 100; /* twelve distinct planes */
  }
  mcp_vdev_table_init(&t);
  CHECK_EQ_INT(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), 0);
  fab.dev[12].plane = 500;
  mcp_vdev_table_init(&t);
  expect_refused(mcp_vdev_table_sync(&t, &fab, NULL, err, sizeof(err)), -EINVAL,
                 "the ports are on 13 planes");
}

/* Through net's entry points, with the process's table, across a teardown. */
static const char *const *setup_names;
static int setup_n;

static int fake_setup(struct mcp_fabric *f)
{
  fab_names(f, setup_n, setup_names);
  mcp_fabric_cfg_fill(&f->cfg, mcp_param_process()); /* as discovery does */
  f->dev[0].ptr_support = NCCL_PTR_HOST | NCCL_PTR_CUDA;
  f->dev[1].ptr_support = NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF;
  f->dev[1].speed_mbps = 25000;
  f->dev[1].max_qp = 500;
  f->local_rank = -1;
  return mcp_fabric_vdev_sync(f, NULL);
}

/* The process's configuration as init loads it, from an environment of one variable
 * (name NULL: none set), as NCCL's processes have them. */
static const char *env_name, *env_value;

static const char *one_getenv(void *arg, const char *name)
{
  (void)arg;
  return env_name != NULL && strcmp(name, env_name) == 0 ? env_value : NULL;
}

static void load_env(const char *name, const char *value)
{
  struct mcp_param_env env = {0};
  char why[512] = "";

  env_name = name;
  env_value = value;
  env.getenv = one_getenv;
  env.home = "/nonexistent";
  env.system_conf = "/nonexistent";
  mcp_param_free(mcp_param_process());
  CHECK_EQ_INT(mcp_param_load(mcp_param_process(), &env, 0, why, sizeof(why)), 0);
}

static void test_net_entry_points(void)
{
  static const char *const first[] = {"rxe0", "rxe1", "rxe2"};
  static const char *const again[] = {"rxe2", "rxe1", "rxe0"};
  struct mcp_net_props p;
  int n = -1, idx = -1;

  CHECK_EQ_INT(mcp_net_make_vdevice(&idx, 2, (int[]){0, 1}, 4), ncclInvalidUsage); /* before init */
  load_env(NULL, NULL);
  setup_names = first;
  setup_n = 3;
  CHECK_EQ_INT(mcp_fabric_process_open(1, fake_setup), 0);
  CHECK_EQ_INT(mcp_net_devices(&n), ncclSuccess);
  CHECK_EQ_INT(n, 3);
  CHECK_EQ_INT(mcp_net_get_properties(2, &p), ncclSuccess);
  CHECK_EQ_INT(p.vdev_n, 1);
  CHECK_EQ_INT(p.vdev[0], 2);
  CHECK_EQ_INT(p.rail_id, -1); /* no rail or plane was given */
  CHECK_EQ_INT(p.plane_id, -1);
  CHECK_EQ_INT(mcp_net_make_vdevice(&idx, 2, (int[]){0, 1}, 4), ncclSuccess);
  CHECK_EQ_INT(idx, 3);
  CHECK_EQ_INT(mcp_net_make_vdevice(&idx, 2, (int[]){0, 0}, 4), ncclInvalidUsage);
  CHECK_EQ_INT(idx, 3);
  CHECK_EQ_INT(mcp_net_devices(&n), ncclSuccess);
  CHECK_EQ_INT(n, 4);
  CHECK_EQ_INT(mcp_net_get_properties(3, &p), ncclSuccess);
  CHECK_EQ_STR(p.name, "rxe0+rxe1");
  CHECK_EQ_INT(p.speed_mbps, 35000);                          /* the sum */
  CHECK_EQ_INT(p.ptr_support, NCCL_PTR_HOST | NCCL_PTR_CUDA); /* the intersection */
  CHECK_EQ_INT(p.max_comms, 250);                             /* the smaller member's */
  CHECK_EQ_INT(p.port, 1);
  CHECK_EQ_INT(p.vdev_n, 2);
  CHECK_EQ_INT(p.vdev[0], 0);
  CHECK_EQ_INT(p.vdev[1], 1);
  CHECK_EQ_INT(mcp_net_get_properties(4, &p), ncclInvalidArgument);
  mcp_fabric_process_close_ctx(); /* the last holder: the fabric is given back */
  CHECK(mcp_fabric_process() == NULL);

  setup_names = again; /* rediscovered in another order */
  CHECK_EQ_INT(mcp_fabric_process_open(1, fake_setup), 0);
  CHECK_EQ_INT(mcp_net_devices(&n), ncclSuccess);
  CHECK_EQ_INT(n, 4);
  CHECK_EQ_INT(mcp_net_get_properties(3, &p), ncclSuccess);
  CHECK_EQ_STR(p.name, "rxe0+rxe1");
  {
    int m[MCP_VDEV_MAX_MEMBERS];
    CHECK_EQ_INT(mcp_fabric_dev_members(mcp_fabric_process(), 3, m), 2);
    CHECK_EQ_STR(mcp_fabric_process()->dev[m[0]].name, "rxe0");
    CHECK_EQ_STR(mcp_fabric_process()->dev[m[1]].name, "rxe1");
  }
  mcp_fabric_process_close_ctx();
}

/* NCCL_IB_MERGE_NICS=0, as in NCCL's IB transport: makeVDevice of more than one device is
 * refused with ncclInvalidUsage (NCCL then goes on with the devices unfused), one device
 * still makes a virtual device, and nothing is added to the table. */
static void test_merge_nics_off(void)
{
  static const char *const names[] = {"rxe0", "rxe1", "rxe2"};
  int n = -1, idx = -1;

  load_env("NCCL_IB_MERGE_NICS", "0");
  setup_names = names;
  setup_n = 3;
  CHECK_EQ_INT(mcp_fabric_process_open(1, fake_setup), 0);
  CHECK_EQ_INT(mcp_net_devices(&n), ncclSuccess);
  int before = n;
  CHECK_EQ_INT(mcp_net_make_vdevice(&idx, 2, (int[]){0, 1}, 4), ncclInvalidUsage);
  CHECK_EQ_INT(mcp_net_devices(&n), ncclSuccess);
  CHECK_EQ_INT(n, before);
  CHECK_EQ_INT(mcp_net_make_vdevice(&idx, 1, (int[]){2}, 4), ncclSuccess);
  CHECK_EQ_INT(mcp_net_devices(&n), ncclSuccess);
  CHECK_EQ_INT(n, before + 1);
  mcp_fabric_process_close_ctx();
  load_env(NULL, NULL);
  mcp_param_free(mcp_param_process());
}

int main(void)
{
  RUN_TEST(test_identity_before_sync);
  RUN_TEST(test_make);
  RUN_TEST(test_refusals);
  RUN_TEST(test_outlives_fabric);
  RUN_TEST(test_rank_map_fused_set);
  RUN_TEST(test_rank_map_fused_refusals);
  RUN_TEST(test_eight_members);
  RUN_TEST(test_rail_plane);
  RUN_TEST(test_net_entry_points);
  RUN_TEST(test_merge_nics_off);
  return TEST_EXIT();
}
