/*
 * test_fabric_mr_ordering.c - which registrations carry IBV_ACCESS_RELAXED_ORDERING, on the
 * fake verbs provider (mcp_fake_verbs.c), which logs the access flags of each one.
 *
 * Why: NCCL's IB transport registers its data buffers with relaxed ordering by default
 * (NCCL_IB_PCI_RELAXED_ORDERING=2; 1 means the same, 0 turns it off), which lets the
 * PCIe fabric reorder the adapter's writes into them; on hosts where that matters a
 * plugin without it is slower than NCCL's own transport. The memory the CPU polls must
 * never be relaxed: a clear-to-send entry whose sequence number lands before its
 * address would send data to a stale buffer. So the test drives the parameter through
 * the real loader, registers host, GPU and DMA-BUF buffers through the registration
 * cache, allocates a comm's rings with xfer's own allocation, and checks the flags.
 * The flag is optional: a driver that refuses it instead of ignoring it must cost one
 * retry and a WARN, not the job.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_fake_verbs.h"
#include "mcp_test.h"
#include "core/log.h"
#include "core/param.h"
#include "xfer/comm.h"

#define PAGE 4096
#define RO ((unsigned)IBV_ACCESS_RELAXED_ORDERING)

static unsigned char *mem;
static const char *ro_value; /* NCCL_IB_PCI_RELAXED_ORDERING as the loader sees it; NULL: unset */
static char load_err[512];

static const char *fake_getenv(void *arg, const char *name)
{
  (void)arg;
  return strcmp(name, "NCCL_IB_PCI_RELAXED_ORDERING") == 0 ? ro_value : NULL;
}

/* The variable's row in the parameter table (NULL where it is none). */
static const struct mcp_param_origin *origin(void)
{
  const struct mcp_param_def *def = mcp_param_find("NCCL_IB_PCI_RELAXED_ORDERING");

  CHECK(def != NULL);
  return def != NULL ? &mcp_param_process()->origin[def->id] : NULL;
}

/* The process's configuration as net's init loads it, with only this variable set. */
static int load(const char *value)
{
  struct mcp_param_env env = {0};

  ro_value = value;
  env.getenv = fake_getenv;
  env.home = "/nonexistent";
  env.system_conf = "/nonexistent";
  mcp_param_free(mcp_param_process());
  load_err[0] = '\0';
  return mcp_param_load(mcp_param_process(), &env, 0, load_err, sizeof(load_err));
}

/* Registers one host, one GPU and one DMA-BUF buffer as regMr/regMrDmaBuf do and
 * returns the access each was registered with (the fake's log). */
static void register_data(unsigned access[3])
{
  struct fake_pair *p;
  struct mcp_mr *host, *gpu, *dmabuf;
  const struct fake_reg *log;

  fake_verbs_install();
  p = fake_pair_make(NULL);
  fake_regs_reset();
  host = fake_pair_reg(p, FAKE_SEND_SIDE, mem, 4 * PAGE, NCCL_PTR_HOST);
  gpu = fake_pair_reg(p, FAKE_RECV_SIDE, mem + 8 * PAGE, 4 * PAGE, NCCL_PTR_CUDA);
  dmabuf = fake_pair_reg_dmabuf(p, FAKE_RECV_SIDE, mem + 16 * PAGE, 4 * PAGE, NCCL_PTR_CUDA);
  CHECK(host != NULL && gpu != NULL && dmabuf != NULL);
  CHECK_EQ_INT(fake_regs(&log), 3);
  CHECK(log[0].addr == mem && !log[0].dmabuf);
  CHECK(log[1].addr == mem + 8 * PAGE && !log[1].dmabuf);
  CHECK(log[2].addr == mem + 16 * PAGE && log[2].dmabuf);
  for (int i = 0; i < 3; i++)
    access[i] = log[i].access;
  fake_pair_dereg(host);
  fake_pair_dereg(gpu);
  fake_pair_dereg(dmabuf);
  fake_pair_free(p);
}

/* 1 and 2 (the default) put the flag on every data registration, 0 on none, and the
 * flag is all that differs. */
static void test_data_buffers_follow_the_variable(void)
{
  const char *values[] = {NULL, "2", "1"};
  unsigned strict[3], relaxed[3];

  CHECK_EQ_INT(load("0"), 0);
  register_data(strict);
  for (int i = 0; i < 3; i++) {
    CHECK((strict[i] & RO) == 0);
    /* What NCCL's buffers need whatever the ordering: the peer writes and reads them. */
    CHECK((strict[i] & IBV_ACCESS_LOCAL_WRITE) && (strict[i] & IBV_ACCESS_REMOTE_WRITE) &&
          (strict[i] & IBV_ACCESS_REMOTE_READ));
  }
  for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
    CHECK_EQ_INT(load(values[v]), 0);
    CHECK(origin() != NULL &&
          origin()->source == (values[v] == NULL ? MCP_PARAM_SRC_DEFAULT : MCP_PARAM_SRC_ENV));
    register_data(relaxed);
    for (int i = 0; i < 3; i++) {
      if ((relaxed[i] & RO) == 0)
        fprintf(stderr,
                "  NCCL_IB_PCI_RELAXED_ORDERING=%s: registration %d has access 0x%x, no relaxed ordering\n",
                values[v] == NULL ? "(unset)" : values[v], i, relaxed[i]);
      CHECK_EQ_INT(relaxed[i] ^ strict[i], RO);
    }
  }
  mcp_param_free(mcp_param_process());
}

/* The rings, records and staging of both comm kinds, and the flush buffer, as xfer
 * allocates them: never relaxed, and the same access whatever the variable says. */
static void internal_access(const char *value, unsigned *access, int *n)
{
  struct fake_pair *p;
  struct mcp_comm *send, *recv;
  struct mcp_mr *gpu;
  const struct fake_reg *log;
  void *data = mem, *mhp, *req = NULL;
  int sizes[1] = {PAGE}, done = 0, k;

  CHECK_EQ_INT(load(value), 0);
  fake_verbs_install();
  p = fake_pair_make(NULL);
  gpu = fake_pair_reg(p, FAKE_RECV_SIDE, mem, PAGE, NCCL_PTR_CUDA);
  mhp = gpu;
  fake_regs_reset();
  send = fake_comm_alloc(p, FAKE_SEND_SIDE);
  recv = fake_comm_alloc(p, FAKE_RECV_SIDE);
  /* A flush of GPU memory registers the loopback read's target on first use. */
  CHECK_EQ_INT(mcp_net_iflush(p->recv, 1, &data, sizes, &mhp, &req), ncclSuccess);
  CHECK(req != NULL);
  for (k = 0; k < 100 && !done; k++)
    CHECK_EQ_INT(mcp_net_test(req, &done, NULL), ncclSuccess);
  CHECK_EQ_INT(done, 1);
  *n = fake_regs(&log);
  /* send: CTS ring, record staging; recv: record ring, CTS staging; the flush buffer. */
  CHECK_EQ_INT(*n, 5);
  for (k = 0; k < *n && k < 5; k++) {
    access[k] = log[k].access;
    CHECK((log[k].access & RO) == 0);
    CHECK(!log[k].dmabuf);
  }
  fake_comm_release(send);
  fake_comm_release(recv);
  fake_pair_dereg(gpu);
  fake_pair_free(p);
}

static void test_polled_memory_never_relaxed(void)
{
  unsigned off[5] = {0}, on[5] = {0}, dflt[5] = {0};
  int noff = 0, non = 0, ndflt = 0;

  internal_access("0", off, &noff);
  internal_access("1", on, &non);
  internal_access(NULL, dflt, &ndflt);
  CHECK_EQ_INT(non, noff);
  CHECK_EQ_INT(ndflt, noff);
  CHECK(memcmp(off, on, sizeof(off)) == 0);
  CHECK(memcmp(off, dflt, sizeof(off)) == 0);
  /* The peer writes the two rings: a registration that lost its remote write would fail
   * every transfer instead. */
  CHECK(off[0] & IBV_ACCESS_REMOTE_WRITE);
  CHECK(off[2] & IBV_ACCESS_REMOTE_WRITE);
  mcp_param_free(mcp_param_process());
}

/* A driver that refuses the optional flag (EINVAL, EOPNOTSUPP) gets the same
 * registration once more without it, then never again; other errors are not retried. */
static void test_driver_refusing_the_flag(void)
{
  struct fake_pair *p;
  struct mcp_mr *a, *b, *c, *d;
  const struct fake_reg *log;

  CHECK_EQ_INT(load("1"), 0);
  fake_verbs_install();
  p = fake_pair_make(NULL);
  fake_warns = 0;
  fake_regs_reset();
  fake_fail_next_reg(EINVAL);
  a = fake_pair_reg(p, FAKE_SEND_SIDE, mem, PAGE, NCCL_PTR_HOST);
  CHECK(a != NULL);
  CHECK_EQ_INT(fake_regs(&log), 2);
  CHECK_EQ_INT(log[0].access & RO, RO);
  CHECK_EQ_INT(log[1].access, log[0].access & ~RO);
  CHECK(log[1].addr == log[0].addr && log[1].len == log[0].len);
  CHECK_EQ_INT(fake_warns, 1);
  CHECK(strstr(fake_lastwarn, "fake0 refused a registration with IBV_ACCESS_RELAXED_ORDERING") != NULL);
  /* The device is asked without it from now on (no failed first try, no second WARN),
   * DMA-BUF included; the other device still gets it. */
  fake_regs_reset();
  b = fake_pair_reg(p, FAKE_SEND_SIDE, mem + 4 * PAGE, PAGE, NCCL_PTR_HOST);
  c = fake_pair_reg_dmabuf(p, FAKE_SEND_SIDE, mem + 8 * PAGE, PAGE, NCCL_PTR_CUDA);
  d = fake_pair_reg(p, FAKE_RECV_SIDE, mem + 12 * PAGE, PAGE, NCCL_PTR_HOST);
  CHECK(b != NULL && c != NULL && d != NULL);
  CHECK_EQ_INT(fake_regs(&log), 3);
  CHECK_EQ_INT(log[0].access & RO, 0);
  CHECK_EQ_INT(log[1].access & RO, 0);
  CHECK_EQ_INT(log[2].access & RO, RO);
  CHECK_EQ_INT(fake_warns, 1);
  fake_pair_dereg(b);
  fake_pair_dereg(c);
  /* EOPNOTSUPP on the other device's DMA-BUF registration: the same. */
  fake_regs_reset();
  fake_fail_next_reg(EOPNOTSUPP);
  c = fake_pair_reg_dmabuf(p, FAKE_RECV_SIDE, mem + 16 * PAGE, PAGE, NCCL_PTR_CUDA);
  CHECK(c != NULL);
  CHECK_EQ_INT(fake_regs(&log), 2);
  CHECK_EQ_INT(log[1].access, log[0].access & ~RO);
  CHECK(log[1].dmabuf);
  CHECK_EQ_INT(fake_warns, 2);
  fake_pair_dereg(c);
  fake_pair_dereg(d);
  fake_pair_dereg(a);
  fake_pair_free(p);

  /* A locked-memory failure is the registration's own: one try, and it fails. */
  p = fake_pair_make(NULL);
  fake_warns = 0;
  fake_regs_reset();
  fake_fail_next_reg(ENOMEM);
  CHECK(fake_pair_reg(p, FAKE_SEND_SIDE, mem, PAGE, NCCL_PTR_HOST) == NULL);
  CHECK_EQ_INT(fake_regs(&log), 1);
  CHECK(strstr(fake_lastwarn, "Locked-memory limit") != NULL);
  /* and the device still gets relaxed ordering. */
  fake_regs_reset();
  a = fake_pair_reg(p, FAKE_SEND_SIDE, mem, PAGE, NCCL_PTR_HOST);
  CHECK(a != NULL);
  CHECK_EQ_INT(fake_regs(&log), 1);
  CHECK_EQ_INT(log[0].access & RO, RO);
  fake_pair_dereg(a);
  fake_pair_free(p);
  mcp_param_free(mcp_param_process());
}

/* Values other than 0, 1 and 2 are taken as NCCL's IB transport takes them: relaxed
 * ordering only for 1 and 2, so such a value turns it off and init goes on (NCCL runs
 * with it; mcpnet used to fail init, and NCCL then had no MCP transport). */
static void test_out_of_range_as_nccl(void)
{
  const char *values[] = {"3", "-1", "100"};
  unsigned access[3];

  for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
    CHECK_EQ_INT(load(values[v]), 0);
    CHECK(origin() != NULL && !origin()->rejected && origin()->source == MCP_PARAM_SRC_ENV);
    CHECK_EQ_INT(mcp_param_process()->ib_pci_relaxed_ordering, atoi(values[v]));
    CHECK_EQ_INT(mcp_mr_relaxed_ordering(mcp_param_process()), 0);
    register_data(access);
    for (int i = 0; i < 3; i++)
      CHECK_EQ_INT(access[i] & RO, 0);
  }
  /* Not a value that parses as an integer is still refused, naming the variable. */
  CHECK_EQ_INT(load("yes"), -EINVAL);
  CHECK(strstr(load_err, "NCCL_IB_PCI_RELAXED_ORDERING") != NULL);
  mcp_param_free(mcp_param_process());
}

int main(void)
{
  mem = aligned_alloc(PAGE, 32 * PAGE);
  mcp_log_set_logger(fake_warn_capture);
  RUN_TEST(test_data_buffers_follow_the_variable);
  RUN_TEST(test_polled_memory_never_relaxed);
  RUN_TEST(test_driver_refusing_the_flag);
  RUN_TEST(test_out_of_range_as_nccl);
  free(mem);
  return TEST_EXIT();
}
