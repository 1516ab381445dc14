/*
 * test_plugin_exports.c - the built libnccl-net-mcp.so exports exactly what NCCL looks
 * up, and each table is wired.
 *
 * NCCL finds the plugin only through dlsym("ncclNetPlugin_vN"), and any other exported
 * name could clash with the host or be picked up as a tuner/profiler. So the dynamic
 * symbol table (nm -D) must be exactly the five tables, each with its ABI size. Then
 * the library is loaded the way NCCL loads it (RTLD_NOW | RTLD_LOCAL) and every
 * table's slots are checked. Nothing is called: the build host has no RDMA device.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "mcp_test.h"
#include "net/net.h"
#include "nccl/net.h"

#ifndef MCP_PLUGIN_PATH
#define MCP_PLUGIN_PATH MCP_BINARY_DIR "/plugin/libnccl-net-mcp.so"
#endif

struct expected_sym {
  const char *name;
  unsigned long size;
  int seen;
};

static struct expected_sym expected[] = {
  {"ncclNetPlugin_v12", sizeof(ncclNet_v12_t), 0}, {"ncclNetPlugin_v11", sizeof(ncclNet_v11_t), 0},
  {"ncclNetPlugin_v10", sizeof(ncclNet_v10_t), 0}, {"ncclNetPlugin_v9", sizeof(ncclNet_v9_t), 0},
  {"ncclNetPlugin_v8", sizeof(ncclNet_v8_t), 0},
};
#define N_EXPECTED (sizeof(expected) / sizeof(expected[0]))

static struct expected_sym *find_expected(const char *name)
{
  for (size_t i = 0; i < N_EXPECTED; i++)
    if (strcmp(expected[i].name, name) == 0)
      return &expected[i];
  return NULL;
}

/* One nm -S line is "value size type name", or "value type name" without a size. */
static void check_nm_line(char *line)
{
  char *tok[5];
  int n = 0;
  struct expected_sym *e;

  for (char *t = strtok(line, " \t\n"); t != NULL && n < 5; t = strtok(NULL, " \t\n"))
    tok[n++] = t;
  if (n == 0)
    return;
  if (n < 3 || n > 4) {
    fprintf(stderr, "unexpected nm output line (%d fields)\n", n);
    mcp_test_failures++;
    return;
  }
  printf("  exported: %s %s%s%s\n", tok[n - 2], tok[n - 1], n == 4 ? " size 0x" : "", n == 4 ? tok[1] : "");
  e = find_expected(tok[n - 1]);
  if (e == NULL) {
    fprintf(stderr, "unexpected exported symbol: %s\n", tok[n - 1]);
    mcp_test_failures++;
    return;
  }
  e->seen++;
  /* A table is initialized, read-only-after-relocation data: nm says D, d, R or r. */
  CHECK(strchr("DdRr", tok[n - 2][0]) != NULL);
  CHECK(n == 4);
  if (n == 4)
    CHECK_EQ_INT(strtoul(tok[1], NULL, 16), e->size);
}

static void test_exported_symbols(void)
{
  char cmd[4096], line[1024];
  FILE *nm;
  int status;

  snprintf(cmd, sizeof(cmd), "nm -D --defined-only -S '%s' 2>&1", MCP_PLUGIN_PATH);
  nm = popen(cmd, "r");
  if (nm == NULL) {
    fprintf(stderr, "cannot run nm (binutils missing?): %s\n", cmd);
    mcp_test_failures++;
    return;
  }
  while (fgets(line, sizeof(line), nm) != NULL)
    check_nm_line(line);
  status = pclose(nm);
  if (status != 0)
    fprintf(stderr, "'%s' exited with status %d\n", cmd, status);
  CHECK_EQ_INT(status, 0);
  for (size_t i = 0; i < N_EXPECTED; i++) {
    if (expected[i].seen != 1)
      fprintf(stderr, "%s exported %d times, expected once\n", expected[i].name, expected[i].seen);
    CHECK_EQ_INT(expected[i].seen, 1);
  }
}

/* The slots every version has, at the same names; checked through a macro because
 * the five table types are unrelated structs. */
#define CHECK_COMMON_SLOTS(t)              \
  do {                                     \
    CHECK_EQ_STR((t)->name, MCP_NET_NAME); \
    CHECK((t)->init != NULL);              \
    CHECK((t)->devices != NULL);           \
    CHECK((t)->getProperties != NULL);     \
    CHECK((t)->listen != NULL);            \
    CHECK((t)->connect != NULL);           \
    CHECK((t)->accept != NULL);            \
    CHECK((t)->regMr != NULL);             \
    CHECK((t)->regMrDmaBuf != NULL);       \
    CHECK((t)->deregMr != NULL);           \
    CHECK((t)->isend != NULL);             \
    CHECK((t)->irecv != NULL);             \
    CHECK((t)->iflush != NULL);            \
    CHECK((t)->test != NULL);              \
    CHECK((t)->closeSend != NULL);         \
    CHECK((t)->closeRecv != NULL);         \
    CHECK((t)->closeListen != NULL);       \
    CHECK((t)->getDeviceMr == NULL);       \
    CHECK((t)->irecvConsumed == NULL);     \
  } while (0)

static void test_tables(void)
{
  void *lib = dlopen(MCP_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  const ncclNet_v12_t *v12;
  const ncclNet_v11_t *v11;
  const ncclNet_v10_t *v10;
  const ncclNet_v9_t *v9;
  const ncclNet_v8_t *v8;

  if (lib == NULL) {
    fprintf(stderr, "dlopen failed: %s\n", dlerror());
    mcp_test_failures++;
    return;
  }
  v12 = dlsym(lib, "ncclNetPlugin_v12");
  v11 = dlsym(lib, "ncclNetPlugin_v11");
  v10 = dlsym(lib, "ncclNetPlugin_v10");
  v9 = dlsym(lib, "ncclNetPlugin_v9");
  v8 = dlsym(lib, "ncclNetPlugin_v8");
  CHECK(v12 != NULL && v11 != NULL && v10 != NULL && v9 != NULL && v8 != NULL);
  if (v12 != NULL) {
    CHECK_COMMON_SLOTS(v12);
    CHECK(v12->makeVDevice != NULL); /* NCCL 2.30 fuses up to 8 devices */
    CHECK(v12->finalize != NULL);
    CHECK(v12->setNetAttr == NULL);
  }
  /* v12 is v11's functions: only init (which names the table), the properties and
   * makeVDevice (their layouts) differ. */
  if (v12 != NULL && v11 != NULL) {
    CHECK((void *)v12->connect == (void *)v11->connect && (void *)v12->isend == (void *)v11->isend &&
          (void *)v12->irecv == (void *)v11->irecv && (void *)v12->test == (void *)v11->test);
    CHECK((void *)v12->init != (void *)v11->init);
    CHECK((void *)v12->getProperties != (void *)v11->getProperties);
    CHECK((void *)v12->makeVDevice != (void *)v11->makeVDevice);
  }
  if (v11 != NULL) {
    CHECK_COMMON_SLOTS(v11);
    CHECK(v11->makeVDevice != NULL); /* NIC fusion (NCCL_NET_MERGE_LEVEL, NCCL_NET_FORCE_MERGE) */
    CHECK(v11->finalize != NULL);    /* NCCL 2.28 calls it without a NULL check */
    CHECK(v11->setNetAttr == NULL);
  }
  if (v10 != NULL) {
    CHECK_COMMON_SLOTS(v10);
    CHECK(v10->makeVDevice != NULL);
  }
  if (v9 != NULL) {
    CHECK_COMMON_SLOTS(v9);
    CHECK(v9->makeVDevice != NULL);
  }
  /* One adapter serves the three: their vProps are one layout. */
  if (v11 != NULL && v10 != NULL && v9 != NULL)
    CHECK((void *)v11->makeVDevice == (void *)v10->makeVDevice &&
          (void *)v10->makeVDevice == (void *)v9->makeVDevice);
  if (v8 != NULL)
    CHECK_COMMON_SLOTS(v8);
  /* The core stays hidden even from a direct lookup. */
  CHECK(dlsym(lib, "mcp_net_init") == NULL);
  CHECK_EQ_INT(dlclose(lib), 0);
}

int main(void)
{
  if (access(MCP_PLUGIN_PATH, R_OK) != 0) {
    fprintf(stderr,
            "%s is missing: build the nccl-net-mcp target before this test "
            "(cmake --build <build> --target nccl-net-mcp)\n",
            MCP_PLUGIN_PATH);
    return 1;
  }
  printf("plugin: %s\n", MCP_PLUGIN_PATH);
  RUN_TEST(test_exported_symbols);
  RUN_TEST(test_tables);
  return TEST_EXIT();
}
