/*
 * test_doctor_summary.c - the doctor's two-host comparison, without hosts.
 *
 * mcpnet-doctor's pair check sends each side's summary as key=value lines and reports
 * what the two disagree on. Here two summaries are built by hand: they must survive the
 * text encoding unchanged, agree with themselves (one OK finding), and each difference
 * that breaks or slows a connection must give its finding at its level, naming both
 * values (the lab's pair_doctor covers the same on real hosts, one case at a time).
 */
#include <stdio.h>
#include <string.h>

#include "doctor.h"
#include "mcp_test.h"

static void base(struct doctor_summary *s, const char *host)
{
  memset(s, 0, sizeof(*s));
  snprintf(s->host, sizeof(s->host), "%s", host);
  snprintf(s->version, sizeof(s->version), "0.1.0");
  snprintf(s->oob, sizeof(s->oob), "192.0.2.1 (eth0)");
  snprintf(s->dev, sizeof(s->dev), "mlx5_0");
  s->port = 1;
  snprintf(s->link_layer, sizeof(s->link_layer), "Ethernet");
  s->mtu = 4096;
  snprintf(s->netdev, sizeof(s->netdev), "eth0");
  s->netdev_mtu = 9000;
  s->rate_mbps = 400000;
  s->gid_index = 3;
  snprintf(s->gid, sizeof(s->gid), "192.0.2.1");
  snprintf(s->gid_type, sizeof(s->gid_type), "RoCE v2");
  s->gid_family = 4;
  snprintf(s->subnet, sizeof(s->subnet), "192.0.2.0/24");
  s->pkey = 0xffff;
  s->pkey_full = 1;
  s->sl = s->tc = -1;
  s->timeout = 18;
  s->retry = 7;
  s->rnr_retry = 6;
  s->qps = 1;
  s->ok = 1;
}

/* Compares a with b in a fresh report; returns the finding for `check` (or NULL). */
static const struct doctor_finding *compare(struct doctor_report *r, const struct doctor_summary *a,
                                            const struct doctor_summary *b, const char *check)
{
  int i;

  memset(r, 0, sizeof(*r));
  doctor_summary_compare(r, a, b);
  for (i = 0; i < r->nfind; i++)
    if (strcmp(r->find[i].check, check) == 0)
      return &r->find[i];
  return NULL;
}

static void test_roundtrip(void)
{
  struct doctor_summary a, back;
  char text[4096];

  base(&a, "node-a");
  a.sl = 3;
  a.tc = 104;
  a.mtu_cap = 2048;
  CHECK(doctor_summary_encode(&a, text, sizeof(text)) > 0);
  CHECK_EQ_INT(doctor_summary_decode(text, &back), 0);
  CHECK(memcmp(&a, &back, sizeof(a)) == 0);
  /* Unknown keys from a newer doctor are skipped; a summary without a host is refused. */
  CHECK_EQ_INT(doctor_summary_decode("future_key=1\nhost=node-b\nmtu=1024\n", &back), 0);
  CHECK_EQ_STR(back.host, "node-b");
  CHECK_EQ_INT(back.mtu, 1024);
  CHECK_EQ_INT(back.pkey, -1);
  CHECK_EQ_INT(doctor_summary_decode("mtu=1024\n", &back), -1);
  CHECK_EQ_INT(doctor_summary_encode(&a, text, 16), -1);
}

static void test_agree(void)
{
  struct doctor_summary a, b;
  static struct doctor_report r;
  const struct doctor_finding *f;

  base(&a, "node-a");
  base(&b, "node-b");
  f = compare(&r, &a, &b, "compare");
  CHECK(f != NULL);
  CHECK_EQ_INT(r.nfind, 1);
  if (f != NULL) {
    CHECK_EQ_INT(f->level, DOCTOR_OK);
    CHECK(strstr(f->message, "both hosts agree") != NULL);
  }
}

static void test_differences(void)
{
  struct doctor_summary a, b;
  static struct doctor_report r;
  const struct doctor_finding *f;

  base(&a, "node-a");
  base(&b, "node-b");
  b.mtu = 1024;
  b.netdev_mtu = 1500;
  f = compare(&r, &a, &b, "mtu");
  CHECK(f != NULL && f->level == DOCTOR_WARN);
  CHECK(f != NULL && strstr(f->message, "MTU 1024 on host node-b") != NULL);
  CHECK(f != NULL && strstr(f->remedy, "ip link set eth0 mtu 9000") != NULL);
  CHECK(compare(&r, &a, &b, "compare") == NULL);

  base(&b, "node-b");
  snprintf(b.gid_type, sizeof(b.gid_type), "RoCE v1");
  f = compare(&r, &a, &b, "gid-type");
  CHECK(f != NULL && f->level == DOCTOR_FAIL);

  base(&b, "node-b");
  snprintf(b.subnet, sizeof(b.subnet), "198.51.100.0/24");
  f = compare(&r, &a, &b, "gid-subnet");
  CHECK(f != NULL && f->level == DOCTOR_WARN); /* RoCE v2 routes; v1 would not */

  base(&b, "node-b");
  b.pkey = 0x8002;
  f = compare(&r, &a, &b, "pkey");
  CHECK(f != NULL && f->level == DOCTOR_FAIL);
  a.pkey = 0x0001;
  a.pkey_full = 0;
  b.pkey = 0x0001;
  b.pkey_full = 0;
  f = compare(&r, &a, &b, "pkey");
  CHECK(f != NULL && f->level == DOCTOR_FAIL && strstr(f->message, "limited members") != NULL);

  base(&a, "node-a");
  base(&b, "node-b");
  b.timeout = 22;
  f = compare(&r, &a, &b, "timeout");
  CHECK(f != NULL && f->level == DOCTOR_WARN &&
        strstr(f->message, "NCCL_IB_TIMEOUT=18, NCCL_IB_RETRY_CNT=7 on host node-a") != NULL &&
        strstr(f->message, "22, 7 on host node-b") != NULL);

  base(&b, "node-b");
  snprintf(b.version, sizeof(b.version), "0.2.0");
  f = compare(&r, &a, &b, "version");
  CHECK(f != NULL && f->level == DOCTOR_FAIL);

  base(&b, "node-b");
  snprintf(b.link_layer, sizeof(b.link_layer), "InfiniBand");
  f = compare(&r, &a, &b, "link-layer");
  CHECK(f != NULL && f->level == DOCTOR_FAIL);

  base(&b, "node-b");
  b.ok = 0;
  f = compare(&r, &a, &b, "peer-device");
  CHECK(f != NULL && f->level == DOCTOR_FAIL && strstr(f->message, "host node-b") != NULL);
}

int main(void)
{
  RUN_TEST(test_roundtrip);
  RUN_TEST(test_agree);
  RUN_TEST(test_differences);
  return TEST_EXIT();
}
