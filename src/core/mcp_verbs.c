/*
 * mcp_verbs.c - loads libibverbs at run time and resolves the verbs mcpnet calls.
 *
 * Why: the plugin must load (RTLD_NOW) on hosts without rdma-core, so NCCL can fall
 * back or, with NCCL_NET=MCP, stop with our explanation rather than a dlopen error.
 * MCPNET_VERBS_LIBRARY names another library with the same verbs (the userspace
 * device of the tests, test/uverbs): it is loaded instead, never libibverbs.so.1 by a
 * search path (NCCL's own IB transport loads that one in the same process). Whatever
 * mcpnet reads about a device from sysfs then comes from the tree that library names
 * through its optional mcpnet_verbs_sysfs_root(), so one setting is all it takes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/verbs.h"

struct mcp_verbs mcp_ibv;

static pthread_mutex_t verbs_lock = PTHREAD_MUTEX_INITIALIZER;
static void *verbs_lib;
static char verbs_path[PATH_MAX] = MCP_VERBS_DEFAULT_LIBRARY;
/* The library's sysfs view: "/sys" for libibverbs, its own tree for a library that
 * names one. Written under verbs_lock at load, read without it afterwards. */
static char sysfs_root[PATH_MAX] = "/sys";

struct mcp_verbs_sym {
  const char *name;
  void **slot;
  int required;
};

#define MCP_VERBS_SYM(field, name, required) \
  {                                          \
#name, (void **)&mcp_ibv.field, required \
  }

static const struct mcp_verbs_sym verbs_syms[] = {
  MCP_VERBS_SYM(get_device_list, ibv_get_device_list, 1),
  MCP_VERBS_SYM(free_device_list, ibv_free_device_list, 1),
  MCP_VERBS_SYM(get_device_name, ibv_get_device_name, 1),
  MCP_VERBS_SYM(open_device, ibv_open_device, 1),
  MCP_VERBS_SYM(close_device, ibv_close_device, 1),
  MCP_VERBS_SYM(query_device, ibv_query_device, 1),
  MCP_VERBS_SYM(query_port, ibv_query_port, 1),
  MCP_VERBS_SYM(query_gid, ibv_query_gid, 1),
  MCP_VERBS_SYM(query_gid_ex, _ibv_query_gid_ex, 0),
  MCP_VERBS_SYM(query_pkey, ibv_query_pkey, 1),
  MCP_VERBS_SYM(alloc_pd, ibv_alloc_pd, 1),
  MCP_VERBS_SYM(dealloc_pd, ibv_dealloc_pd, 1),
  MCP_VERBS_SYM(reg_mr_iova2, ibv_reg_mr_iova2, 1),
  MCP_VERBS_SYM(reg_dmabuf_mr, ibv_reg_dmabuf_mr, 0),
  MCP_VERBS_SYM(dereg_mr, ibv_dereg_mr, 1),
  MCP_VERBS_SYM(create_cq, ibv_create_cq, 1),
  MCP_VERBS_SYM(destroy_cq, ibv_destroy_cq, 1),
  MCP_VERBS_SYM(create_qp, ibv_create_qp, 1),
  MCP_VERBS_SYM(modify_qp, ibv_modify_qp, 1),
  MCP_VERBS_SYM(query_qp, ibv_query_qp, 1),
  MCP_VERBS_SYM(destroy_qp, ibv_destroy_qp, 1),
  MCP_VERBS_SYM(get_async_event, ibv_get_async_event, 1),
  MCP_VERBS_SYM(ack_async_event, ibv_ack_async_event, 1),
  MCP_VERBS_SYM(fork_init, ibv_fork_init, 1),
  MCP_VERBS_SYM(is_fork_initialized, ibv_is_fork_initialized, 0),
  MCP_VERBS_SYM(query_port_speed, ibv_query_port_speed, 0),
  MCP_VERBS_SYM(wc_status_str, ibv_wc_status_str, 1),
  MCP_VERBS_SYM(event_type_str, ibv_event_type_str, 1),
};

/* The tree an alternative library generated, through its optional
 * mcpnet_verbs_sysfs_root(); "/sys" otherwise. */
static void sysfs_root_take(void)
{
  const char *(*fn)(void) = (const char *(*)(void))dlsym(verbs_lib, "mcpnet_verbs_sysfs_root");
  const char *root = fn != NULL ? fn() : NULL;

  snprintf(sysfs_root, sizeof(sysfs_root), "%s", root != NULL && root[0] == '/' ? root : "/sys");
}

int mcp_verbs_load(const char *want, char *why, size_t whylen)
{
  int rc = 0, custom = want != NULL && want[0] != '\0';
  size_t i;

  pthread_mutex_lock(&verbs_lock);
  if (verbs_lib != NULL)
    goto out;
  snprintf(verbs_path, sizeof(verbs_path), "%s", custom ? want : MCP_VERBS_DEFAULT_LIBRARY);
  verbs_lib = dlopen(verbs_path, RTLD_NOW | RTLD_LOCAL);
  if (verbs_lib == NULL) {
    if (custom)
      snprintf(why, whylen, "MCPNET_VERBS_LIBRARY=%s cannot be loaded (%s): unset it to use libibverbs.so.1",
               verbs_path, dlerror());
    else
      snprintf(why, whylen,
               "libibverbs.so.1 cannot be loaded (%s): install rdma-core's libibverbs1 and "
               "the provider of your NIC (ibverbs-providers)",
               dlerror());
    rc = -ENOENT;
    goto out;
  }
  for (i = 0; i < sizeof(verbs_syms) / sizeof(verbs_syms[0]); i++) {
    *verbs_syms[i].slot = dlsym(verbs_lib, verbs_syms[i].name);
    if (*verbs_syms[i].slot == NULL && verbs_syms[i].required) {
      if (custom)
        snprintf(why, whylen, "MCPNET_VERBS_LIBRARY=%s lacks %s, which libibverbs has", verbs_path,
                 verbs_syms[i].name);
      else
        snprintf(why, whylen, "libibverbs.so.1 lacks %s: rdma-core is too old (need >= 32)",
                 verbs_syms[i].name);
      dlclose(verbs_lib);
      verbs_lib = NULL;
      memset(&mcp_ibv, 0, sizeof(mcp_ibv));
      rc = -ENOSYS;
      goto out;
    }
  }
  sysfs_root_take();
  if (custom)
    MCP_INFO(NCCL_INIT | NCCL_NET, "verbs from MCPNET_VERBS_LIBRARY=%s, not libibverbs.so.1; sysfs view: %s",
             verbs_path, sysfs_root);
out:
  pthread_mutex_unlock(&verbs_lock);
  return rc;
}

const char *mcp_verbs_sysfs_root(void) { return sysfs_root; }

const char *mcp_verbs_library(void) { return verbs_path; }

void mcp_verbs_unload(void)
{
  pthread_mutex_lock(&verbs_lock);
  if (verbs_lib != NULL) {
    dlclose(verbs_lib);
    verbs_lib = NULL;
    memset(&mcp_ibv, 0, sizeof(mcp_ibv));
    snprintf(sysfs_root, sizeof(sysfs_root), "/sys");
  }
  pthread_mutex_unlock(&verbs_lock);
}

int mcp_verbs_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
  struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

  memset(attr, 0, sizeof(*attr));
  if (vctx != NULL)
    return vctx->query_port(ctx, port, attr, sizeof(*attr));
  return mcp_ibv.query_port(ctx, port, (struct _compat_ibv_port_attr *)attr);
}

/* rdma-core's extended layout ends at byte 56; the fields before byte 52 have been in
 * every library mcpnet loads (>= 32). */
_Static_assert(sizeof(struct ibv_port_attr) >= MCP_PORT_ATTR_SPEED_EX_OFFSET &&
                 sizeof(struct mcp_port_attr) >= MCP_PORT_ATTR_SPEED_EX_OFFSET + sizeof(uint32_t),
               "struct mcp_port_attr must hold rdma-core's extended ibv_port_attr");

uint32_t mcp_port_attr_speed_ex(const struct mcp_port_attr *a)
{
  uint32_t v;

  memcpy(&v, (const unsigned char *)a + MCP_PORT_ATTR_SPEED_EX_OFFSET, sizeof(v));
  return v;
}

int mcp_verbs_query_port_ex(struct ibv_context *ctx, uint8_t port, struct mcp_port_attr *attr)
{
  struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

  memset(attr, 0, sizeof(*attr));
  if (vctx != NULL)
    return vctx->query_port(ctx, port, &attr->attr, sizeof(*attr));
  return mcp_ibv.query_port(ctx, port, (struct _compat_ibv_port_attr *)&attr->attr);
}
