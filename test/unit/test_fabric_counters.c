/*
 * test_fabric_counters.c - per-driver port error counters on fixture trees
 * (test/unit/fixtures/make-fixtures.sh, hosts cnt-<driver>-t0/-t1: one port when a
 * comm connected and when it failed): which table a driver gets, what a snapshot holds,
 * what moved, the phrase that reports it and the likely cause derived from it.
 */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "mcp_test.h"
#include "fabric/fabric_counters.h"

#define FIXTURES MCP_SOURCE_DIR "/test/unit/fixtures/"

static const char *root_of(const char *host)
{
  static char path[2][512];
  static int i;

  i ^= 1;
  snprintf(path[i], sizeof(path[i]), FIXTURES "%s/sys", host);
  return path[i];
}

/* The fixture's driver as discovery reads it: the name of device/driver's target. */
static const char *driver_of(const char *host, const char *dev)
{
  static char out[64];
  char link[512], target[PATH_MAX];
  ssize_t n;

  snprintf(link, sizeof(link), "%s/class/infiniband/%s/device/driver", root_of(host), dev);
  n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) /* rxe has no parent device */
    return strncmp(dev, "rxe", 3) == 0 ? "rxe" : "";
  target[n] = '\0';
  snprintf(out, sizeof(out), "%.63s", strrchr(target, '/') ? strrchr(target, '/') + 1 : target);
  return out;
}

static const struct mcp_cnt_entry *find(const struct mcp_cnt_snapshot *s, const char *path)
{
  int i;

  for (i = 0; i < s->n; i++)
    if (strcmp(s->e[i].path, path) == 0)
      return &s->e[i];
  return NULL;
}

static uint64_t delta_of(const struct mcp_cnt_diff *d, const char *path)
{
  int i;

  for (i = 0; i < d->n; i++)
    if (strcmp(d->after->e[d->c[i].idx].path, path) == 0)
      return d->c[i].delta;
  return 0;
}

/* Both snapshots of a fixture pair, and what moved between them. */
static int load_pair(const char *drv, const char *dev, struct mcp_cnt_snapshot *t0,
                     struct mcp_cnt_snapshot *t1, struct mcp_cnt_diff *d)
{
  char h0[64], h1[64];
  int rc;

  snprintf(h0, sizeof(h0), "cnt-%s-t0", drv);
  snprintf(h1, sizeof(h1), "cnt-%s-t1", drv);
  rc = mcp_cnt_snapshot_read(root_of(h0), dev, 1, driver_of(h0, dev), t0);
  if (rc == 0)
    rc = mcp_cnt_snapshot_read(root_of(h1), dev, 1, driver_of(h1, dev), t1);
  if (rc != 0) {
    fprintf(stderr, "reading %s/%s: %s\n", drv, dev, strerror(-rc));
    return rc;
  }
  mcp_cnt_diff(t0, t1, d);
  return 0;
}

static void test_tables(void)
{
  const struct mcp_cnt_desc *t;
  int n = 0, i;

  CHECK_EQ_STR(mcp_cnt_table("mlx5_core", "mlx5_0", &t, &n), "mlx5");
  CHECK(n > 10);
  CHECK_EQ_STR(mcp_cnt_table("bnxt_en", "bnxt_re0", NULL, NULL), "bnxt_re");
  CHECK_EQ_STR(mcp_cnt_table("ice", "irdma0", NULL, NULL), "irdma");
  CHECK_EQ_STR(mcp_cnt_table("i40e", "rdmap175s0f0", NULL, NULL), "irdma");
  CHECK_EQ_STR(mcp_cnt_table("rxe", "rxe0", NULL, NULL), "rxe");
  /* Renamed by udev: the driver still decides. */
  CHECK_EQ_STR(mcp_cnt_table("mlx5_core", "rocep59s0f0", NULL, NULL), "mlx5");
  /* No driver known: the kernel's default name. */
  CHECK_EQ_STR(mcp_cnt_table("", "mlx5_3", NULL, NULL), "mlx5");
  CHECK_EQ_STR(mcp_cnt_table(NULL, "rxe7", NULL, NULL), "rxe");
  /* A driver that is not ours to know, even with a familiar-looking name. */
  CHECK(mcp_cnt_table("efa", "efa0", NULL, NULL) == NULL);
  CHECK(mcp_cnt_table("mlx4_core", "mlx5_fake", NULL, NULL) == NULL);
  /* Every entry of every table has a path that fits, a kind and a meaning. */
  {
    static const char *const drivers[] = {"mlx5_core", "bnxt_en", "ice", "rxe"};
    unsigned k;
    for (k = 0; k < sizeof(drivers) / sizeof(drivers[0]); k++) {
      mcp_cnt_table(drivers[k], "", &t, &n);
      for (i = 0; i < n; i++) {
        CHECK(strlen(t[i].path) < MCP_CNT_PATH_MAX);
        CHECK(t[i].kind >= MCP_CNT_EXHAUSTED && t[i].kind <= MCP_CNT_CONTEXT);
        CHECK(t[i].meaning != NULL && t[i].meaning[0] != '\0');
      }
    }
    t = mcp_cnt_ib_table(&n);
    CHECK(n > 5);
    for (i = 0; i < n; i++)
      CHECK(strncmp(t[i].path, "counters/", 9) == 0);
  }
}

/* rxe: retries ran out, nothing came back: an unreachable peer. */
static void test_rxe_unreachable(void)
{
  struct mcp_cnt_snapshot t0, t1;
  struct mcp_cnt_diff d;
  char buf[1024];

  if (load_pair("rxe", "rxe0", &t0, &t1, &d) != 0) {
    CHECK(0);
    return;
  }
  CHECK_EQ_STR(t1.table, "rxe");
  CHECK_EQ_INT(t1.state, IBV_PORT_ACTIVE);
  CHECK_EQ_STR(t1.state_name, "ACTIVE");
  CHECK_EQ_STR(t1.phys_state_name, "LinkUp");
  /* Only the table's counters; traffic counters are not evidence. */
  CHECK(find(&t1, "hw_counters/retry_exceeded_err") != NULL);
  CHECK(find(&t1, "hw_counters/sent_pkts") == NULL);
  CHECK(find(&t1, "counters/link_downed") == NULL); /* rxe has no counters/ */
  CHECK_EQ_INT(t1.n, 11);
  CHECK_EQ_INT(delta_of(&d, "hw_counters/retry_exceeded_err"), 1);
  CHECK_EQ_INT(delta_of(&d, "hw_counters/completer_retry_err"), 7);
  CHECK_EQ_INT(delta_of(&d, "hw_counters/ack_deferred"), 4);
  CHECK_EQ_INT(d.n, 3);
  mcp_cnt_format(&d, buf, sizeof(buf));
  CHECK_EQ_STR(buf,
               "retry_exceeded_err +1 (transport retries exhausted: no ACK from the peer in time), "
               "completer_retry_err +7 (retransmission rounds after an ACK timeout or a NAK), "
               "ack_deferred +4 (ACKs whose processing was deferred (load))");
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_RETRY_EXC_ERR, t1.state), MCP_CAUSE_UNREACHABLE);
  CHECK_EQ_STR(mcp_cnt_cause_name(MCP_CAUSE_UNREACHABLE), "unreachable peer");
  /* The flush that follows on the other QPs says the same, from the counters alone. */
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_WR_FLUSH_ERR, t1.state), MCP_CAUSE_UNREACHABLE);
  /* Against itself nothing moved. */
  mcp_cnt_diff(&t1, &t1, &d);
  CHECK_EQ_INT(d.n, 0);
  mcp_cnt_format(&d, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "no error counter moved");
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_RETRY_EXC_ERR, t1.state), MCP_CAUSE_UNREACHABLE);
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_WR_FLUSH_ERR, t1.state), MCP_CAUSE_FLUSHED);
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_GENERAL_ERR, t1.state), MCP_CAUSE_UNKNOWN);
}

/* mlx5: sequence errors, out-of-sequence packets, symbol errors: a lossy fabric. */
static void test_mlx5_lossy(void)
{
  struct mcp_cnt_snapshot t0, t1;
  struct mcp_cnt_diff d;
  char buf[2048];

  if (load_pair("mlx5", "mlx5_0", &t0, &t1, &d) != 0) {
    CHECK(0);
    return;
  }
  CHECK_EQ_STR(t1.table, "mlx5");
  CHECK(find(&t1, "hw_counters/local_ack_timeout_err") != NULL);
  CHECK(find(&t1, "counters/symbol_error") != NULL);
  CHECK(find(&t1, "hw_counters/lifespan") == NULL);
  CHECK(find(&t1, "counters/VL15_dropped") == NULL);   /* "N/A (no PMA)": left out */
  CHECK(find(&t1, "counters/port_xmit_data") == NULL); /* traffic */
  CHECK_EQ_INT(delta_of(&d, "hw_counters/packet_seq_err"), 12);
  CHECK_EQ_INT(delta_of(&d, "hw_counters/out_of_sequence"), 30);
  CHECK_EQ_INT(delta_of(&d, "hw_counters/local_ack_timeout_err"), 4);
  CHECK_EQ_INT(delta_of(&d, "counters/symbol_error"), 5);
  CHECK_EQ_INT(delta_of(&d, "counters/port_rcv_errors"), 2);
  CHECK(d.kinds & (1u << MCP_CNT_LOSS));
  CHECK(!(d.kinds & (1u << MCP_CNT_EXHAUSTED)));
  mcp_cnt_format(&d, buf, sizeof(buf));
  /* Loss before retransmissions before other errors before context. */
  CHECK(strstr(buf, "packet_seq_err +12 (") == buf);
  CHECK(strstr(buf, "local_ack_timeout_err +4") > strstr(buf, "symbol_error +5"));
  CHECK(strstr(buf, "req_cqe_error +1") > strstr(buf, "local_ack_timeout_err +4"));
  CHECK(strstr(buf, "np_cnp_sent +31") > strstr(buf, "req_cqe_flush_error +3"));
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_RETRY_EXC_ERR, t1.state), MCP_CAUSE_LOSSY);
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_WR_FLUSH_ERR, t1.state), MCP_CAUSE_LOSSY);
  /* The status wins where it is specific. */
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_REM_ACCESS_ERR, t1.state), MCP_CAUSE_PROTECTION);
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_RNR_RETRY_EXC_ERR, t1.state), MCP_CAUSE_RNR);
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_REM_OP_ERR, t1.state), MCP_CAUSE_REMOTE);
}

/* bnxt_re: the peer refused our rkey: a protection error. */
static void test_bnxt_protection(void)
{
  struct mcp_cnt_snapshot t0, t1;
  struct mcp_cnt_diff d;
  char buf[512];

  if (load_pair("bnxt", "bnxt_re0", &t0, &t1, &d) != 0) {
    CHECK(0);
    return;
  }
  CHECK_EQ_STR(t1.table, "bnxt_re");
  CHECK(find(&t1, "hw_counters/active_qps") == NULL);
  CHECK_EQ_INT(d.n, 1);
  mcp_cnt_format(&d, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "remote_access_err +1 (access errors at the peer: it refused our rkey or range)");
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_REM_ACCESS_ERR, t1.state), MCP_CAUSE_PROTECTION);
  /* A status that says nothing: the counter does. */
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_WR_FLUSH_ERR, t1.state), MCP_CAUSE_PROTECTION);
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_LOC_QP_OP_ERR, t1.state), MCP_CAUSE_PROTECTION);
}

/* irdma: the port is DOWN now: the local link, whatever the status. */
static void test_irdma_link_down(void)
{
  struct mcp_cnt_snapshot t0, t1;
  struct mcp_cnt_diff d;
  char buf[512];

  if (load_pair("irdma", "irdma0", &t0, &t1, &d) != 0) {
    CHECK(0);
    return;
  }
  CHECK_EQ_STR(t0.table, "irdma");
  CHECK_EQ_INT(t0.state, IBV_PORT_ACTIVE);
  CHECK_EQ_INT(t1.state, IBV_PORT_DOWN);
  CHECK_EQ_STR(t1.state_name, "DOWN");
  CHECK_EQ_STR(t1.phys_state_name, "Disabled");
  CHECK(find(&t1, "hw_counters/tcpRetransSegs") != NULL);
  CHECK(find(&t1, "hw_counters/RetransSegs") == NULL); /* the other kernel's spelling */
  CHECK(find(&t1, "hw_counters/RxUDP") == NULL);
  CHECK_EQ_INT(d.n, 0);
  mcp_cnt_format(&d, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "no error counter moved");
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_RETRY_EXC_ERR, t1.state), MCP_CAUSE_LOCAL_LINK);
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_LOC_QP_OP_ERR, t1.state), MCP_CAUSE_LOCAL_LINK);
  /* A protection status still names protection: the link does not explain a bad rkey. */
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_LOC_PROT_ERR, t1.state), MCP_CAUSE_PROTECTION);
  /* Unknown port state (sysfs unreadable) is not "down". */
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_RETRY_EXC_ERR, 0), MCP_CAUSE_UNREACHABLE);
}

/* A driver without a table: error-looking hw_counters by name, in name order. */
static void test_generic(void)
{
  struct mcp_cnt_snapshot t0, t1;
  struct mcp_cnt_diff d;
  char buf[512];
  int i;

  if (load_pair("efa", "efa0", &t0, &t1, &d) != 0) {
    CHECK(0);
    return;
  }
  CHECK_EQ_STR(t1.table, "generic");
  CHECK(find(&t1, "hw_counters/lifespan") == NULL);
  CHECK(find(&t1, "hw_counters/tx_bytes") == NULL);
  CHECK(find(&t1, "hw_counters/unresponsive_remote_events") != NULL);
  CHECK(find(&t1, "hw_counters/rx_drops") != NULL);
  CHECK(find(&t1, "hw_counters/rdma_write_wr_err") != NULL);
  for (i = 1; i < t1.n; i++)
    CHECK(strcmp(t1.e[i - 1].path, t1.e[i].path) < 0);
  CHECK_EQ_INT(find(&t1, "hw_counters/unresponsive_remote_events")->kind, MCP_CNT_EXHAUSTED);
  CHECK_EQ_INT(find(&t1, "hw_counters/retrans_timeout_events")->kind, MCP_CNT_RETRANS);
  CHECK_EQ_INT(find(&t1, "hw_counters/impaired_remote_conn_events")->kind, MCP_CNT_LOSS);
  mcp_cnt_format(&d, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "unresponsive_remote_events +1, retrans_pkts +19, retrans_timeout_events +2");
  CHECK_EQ_INT(mcp_cnt_classify(&d, IBV_WC_GENERAL_ERR, t1.state), MCP_CAUSE_UNREACHABLE);
}

/* A short buffer is cut at an entry, with the count of what did not fit. */
static void test_format_short(void)
{
  struct mcp_cnt_snapshot t0, t1;
  struct mcp_cnt_diff d;
  char buf[128], tiny[12];
  size_t n;

  if (load_pair("mlx5", "mlx5_0", &t0, &t1, &d) != 0) {
    CHECK(0);
    return;
  }
  n = mcp_cnt_format(&d, buf, sizeof(buf));
  CHECK(n < sizeof(buf));
  CHECK_EQ_INT(n, strlen(buf));
  CHECK(strstr(buf, "packet_seq_err +12") == buf);
  CHECK(strstr(buf, " more") != NULL && strlen(strstr(buf, " more")) == 5);
  n = mcp_cnt_format(&d, tiny, sizeof(tiny));
  CHECK_EQ_INT(n, strlen(tiny));
  CHECK(n < sizeof(tiny));
}

/* Counters that went backwards (a reset) are not reported as movement. */
static void test_went_back(void)
{
  struct mcp_cnt_snapshot t0, t1;
  struct mcp_cnt_diff d;

  if (load_pair("rxe", "rxe0", &t0, &t1, &d) != 0) {
    CHECK(0);
    return;
  }
  mcp_cnt_diff(&t1, &t0, &d);
  CHECK_EQ_INT(d.n, 0);
  CHECK_EQ_INT(d.went_back, 3);
  CHECK_EQ_INT(d.kinds, 0);
}

static void test_missing(void)
{
  struct mcp_cnt_snapshot s;

  CHECK(mcp_cnt_snapshot_read(root_of("cnt-rxe-t0"), "rxe0", 2, "rxe", &s) < 0);
  CHECK(mcp_cnt_snapshot_read(root_of("cnt-rxe-t0"), "mlx5_9", 1, "", &s) < 0);
  CHECK(mcp_cnt_snapshot_read(FIXTURES "no-such-host/sys", "rxe0", 1, "rxe", &s) < 0);
  /* Every cause has words. */
  for (int c = MCP_CAUSE_UNKNOWN; c <= MCP_CAUSE_FLUSHED; c++) {
    CHECK(mcp_cnt_cause_name(c)[0] != '\0');
    CHECK(mcp_cnt_cause_why(c)[0] != '\0');
    CHECK(mcp_cnt_cause_try(c)[0] != '\0');
  }
}

int main(void)
{
  RUN_TEST(test_tables);
  RUN_TEST(test_rxe_unreachable);
  RUN_TEST(test_mlx5_lossy);
  RUN_TEST(test_bnxt_protection);
  RUN_TEST(test_irdma_link_down);
  RUN_TEST(test_generic);
  RUN_TEST(test_format_short);
  RUN_TEST(test_went_back);
  RUN_TEST(test_missing);
  return TEST_EXIT();
}
