/*
 * test_core_verbs_library.c - MCPNET_VERBS_LIBRARY: unset, the verbs come from
 * libibverbs.so.1 and mcpnet reads sysfs at /sys, exactly as before it existed; set to
 * the userspace verbs device (test/uverbs), every verb comes from that library and the
 * sysfs view from the tree it names; set to a path that does not load, init's reason
 * names the variable. Each case loads through the process configuration, as init does.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/log.h"
#include "core/param.h"
#include "core/verbs.h"

#define UVERBS_LIB MCP_BINARY_DIR "/lib/libmcp-uverbs.so"

/* The file a resolved verb lives in. */
static const char *object_of(void *fn)
{
  Dl_info info;

  return fn != NULL && dladdr(fn, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : "";
}

static int load_with(const char *value, char *why, size_t len)
{
  char err[256];

  if (value != NULL)
    setenv("MCPNET_VERBS_LIBRARY", value, 1);
  else
    unsetenv("MCPNET_VERBS_LIBRARY");
  mcp_param_free(mcp_param_process());
  CHECK_EQ_INT(mcp_param_load(mcp_param_process(), NULL, 0, err, sizeof(err)), 0);
  why[0] = '\0';
  return mcp_verbs_load(mcp_param_process()->verbs_library, why, len);
}

static void test_unset_is_libibverbs(void)
{
  char why[512];
  int rc = load_with(NULL, why, sizeof(why));

  CHECK(mcp_param_process()->verbs_library == NULL);
  CHECK_EQ_STR(mcp_verbs_library(), "libibverbs.so.1");
  CHECK_EQ_STR(mcp_verbs_sysfs_root(), "/sys");
  if (rc == 0) {
    /* Every verb from libibverbs itself. */
    CHECK(strstr(object_of((void *)mcp_ibv.get_device_list), "libibverbs") != NULL);
    CHECK(strstr(object_of((void *)mcp_ibv.modify_qp), "libibverbs") != NULL);
  } else {
    CHECK(strstr(why, "libibverbs.so.1 cannot be loaded") != NULL); /* a host without rdma-core */
  }
  mcp_verbs_unload();
  CHECK_EQ_STR(mcp_verbs_sysfs_root(), "/sys");
}

static void test_set_is_the_library(void)
{
  char why[512], path[4096];
  struct ibv_device **list;
  int n = 0;

  CHECK_EQ_INT(load_with(UVERBS_LIB, why, sizeof(why)), 0);
  CHECK_EQ_STR(mcp_verbs_library(), UVERBS_LIB);
  CHECK(strstr(object_of((void *)mcp_ibv.get_device_list), "libmcp-uverbs.so") != NULL);
  CHECK(strstr(object_of((void *)mcp_ibv.create_qp), "libmcp-uverbs.so") != NULL);
  CHECK(strstr(object_of((void *)mcp_ibv.reg_dmabuf_mr), "libmcp-uverbs.so") != NULL);
  /* The sysfs view is the library's tree, and shows its devices. */
  CHECK(strcmp(mcp_verbs_sysfs_root(), "/sys") != 0);
  CHECK(strncmp(mcp_verbs_sysfs_root(), getenv("UVERBS_FABRIC"), strlen(getenv("UVERBS_FABRIC"))) == 0);
  list = mcp_ibv.get_device_list(&n);
  CHECK(list != NULL && n >= 1);
  if (list != NULL && n >= 1) {
    snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/1/gids/3", mcp_verbs_sysfs_root(),
             mcp_ibv.get_device_name(list[0]));
    CHECK(access(path, R_OK) == 0);
    mcp_ibv.free_device_list(list);
  }
  mcp_verbs_unload();
  CHECK_EQ_STR(mcp_verbs_sysfs_root(), "/sys");
}

static void test_bad_path_names_the_variable(void)
{
  char why[512];

  CHECK(load_with("/nonexistent/libnothing.so", why, sizeof(why)) != 0);
  CHECK(strstr(why, "MCPNET_VERBS_LIBRARY=/nonexistent/libnothing.so cannot be loaded") != NULL);
  CHECK_EQ_STR(mcp_verbs_sysfs_root(), "/sys");
  /* A library without the verbs: refused with the verb it lacks. */
  CHECK(load_with("libc.so.6", why, sizeof(why)) != 0);
  CHECK(strstr(why, "MCPNET_VERBS_LIBRARY=libc.so.6 lacks ibv_get_device_list") != NULL);
  mcp_verbs_unload();
}

static char fabric[] = "/tmp/mcp-uvtest-XXXXXX";

/* After the device's own exit handler (registered later, run earlier) emptied it. */
static void fabric_remove(void) { rmdir(fabric); }

int main(void)
{
  mcp_log_set_logger(mcp_test_log_quiet);
  if (mkdtemp(fabric) == NULL)
    return 1;
  atexit(fabric_remove);
  setenv("UVERBS_FABRIC", fabric, 1);
  RUN_TEST(test_unset_is_libibverbs);
  RUN_TEST(test_set_is_the_library);
  RUN_TEST(test_bad_path_names_the_variable);
  test_unset_is_libibverbs(); /* and unset again afterwards: nothing of the library stays */
  unsetenv("MCPNET_VERBS_LIBRARY");
  mcp_param_free(mcp_param_process());
  return TEST_EXIT();
}
