/*
 * mcp_fabric_counters.c - per-driver tables of the port counters that explain transport
 * errors, snapshots of them from sysfs, their difference, and a likely cause.
 *
 * The names come from the kernel drivers (rxe_hw_counters.c, mlx5 counters.c,
 * bnxt_re hw_counters.c, irdma verbs.c) and the InfiniBand port counters every
 * PMA-capable port shows under counters/; the meanings are written for the person
 * reading a failed job's log. Nothing here allocates: directories are listed with
 * getdents64 into a stack buffer and files are read with open/read, because the
 * snapshot runs on a comm's error path too. Counters are read once each: a driver
 * refreshes its values at most every few milliseconds anyway (mlx5 caches 10 ms).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "fabric/fabric_counters.h"
#include "fabric/fabric_sysfs.h"

#define HW "hw_counters/"
#define IB "counters/"

/* Soft-RoCE (drivers/infiniband/sw/rxe): hw_counters only, no counters/ folder. */
static const struct mcp_cnt_desc rxe_table[] = {
  {HW "retry_exceeded_err", MCP_CNT_EXHAUSTED, "transport retries exhausted: no ACK from the peer in time"},
  {HW "retry_rnr_exceeded_err", MCP_CNT_RNR, "RNR retries exhausted: the peer had no receive posted"},
  {HW "link_downed", MCP_CNT_LINK, "times this port went down"},
  {HW "send_err", MCP_CNT_LINK, "packets that could not leave this host (netdev down, no route)"},
  {HW "rcvd_rnr_err", MCP_CNT_RNR, "RNR NAKs received: the peer had no receive posted"},
  {HW "send_rnr_err", MCP_CNT_RNR, "RNR NAKs sent: no receive was posted here"},
  {HW "rcvd_seq_err", MCP_CNT_LOSS, "sequence-error NAKs from the peer: it missed packets sent from here"},
  {HW "out_of_seq_request", MCP_CNT_LOSS,
   "requests that arrived after a PSN gap: packets toward here were lost"},
  {HW "duplicate_request", MCP_CNT_LOSS, "duplicate requests: the peer retransmitted (packets or ACKs lost)"},
  {HW "completer_retry_err", MCP_CNT_RETRANS, "retransmission rounds after an ACK timeout or a NAK"},
  {HW "ack_deferred", MCP_CNT_CONTEXT, "ACKs whose processing was deferred (load)"},
};

/* mlx5 (drivers/infiniband/hw/mlx5/counters.c): queue, retransmission, extended error,
 * congestion counters; some depend on device capabilities and may be absent. */
static const struct mcp_cnt_desc mlx5_table[] = {
  {HW "local_ack_timeout_err", MCP_CNT_RETRANS, "ACK timeouts: requests retransmitted because no ACK came"},
  {HW "rnr_nak_retry_err", MCP_CNT_RNR, "RNR NAKs received: the peer had no receive posted"},
  {HW "out_of_buffer", MCP_CNT_RNR, "packets dropped for lack of a posted receive"},
  {HW "resp_local_length_error", MCP_CNT_PROT, "writes longer than the buffer they targeted"},
  {HW "req_remote_invalid_request", MCP_CNT_PROT, "invalid-request NAKs from the peer"},
  {HW "req_remote_access_errors", MCP_CNT_PROT, "access errors at the peer: it refused our rkey or range"},
  {HW "resp_remote_access_errors", MCP_CNT_PROT, "access errors here: the peer used a bad rkey or range"},
  {HW "packet_seq_err", MCP_CNT_LOSS, "sequence-error NAKs from the peer: it missed packets sent from here"},
  {HW "out_of_sequence", MCP_CNT_LOSS, "packets received out of sequence: packets toward here were lost"},
  {HW "implied_nak_seq_err", MCP_CNT_LOSS, "implied NAKs: responses showed earlier packets were lost"},
  {HW "duplicate_request", MCP_CNT_LOSS, "duplicate requests: the peer retransmitted (packets or ACKs lost)"},
  {HW "rx_icrc_encapsulated", MCP_CNT_LOSS, "packets with a bad ICRC: corrupted on the way here"},
  {HW "roce_adp_retrans", MCP_CNT_RETRANS, "adaptive retransmissions"},
  {HW "roce_adp_retrans_to", MCP_CNT_RETRANS, "adaptive retransmission timeouts"},
  {HW "roce_slow_restart", MCP_CNT_RETRANS, "slow restarts after repeated timeouts"},
  {HW "req_cqe_error", MCP_CNT_ERROR, "error completions of requests sent from here"},
  {HW "resp_cqe_error", MCP_CNT_ERROR, "error completions of requests served here"},
  {HW "req_cqe_flush_error", MCP_CNT_ERROR, "requests flushed after a queue pair error"},
  {HW "resp_cqe_flush_error", MCP_CNT_ERROR, "receives flushed after a queue pair error"},
  {HW "np_cnp_sent", MCP_CNT_CONTEXT, "congestion notifications sent (ECN-marked packets arrived)"},
  {HW "rp_cnp_handled", MCP_CNT_CONTEXT, "congestion notifications received: sending was slowed"},
  {HW "np_ecn_marked_roce_packets", MCP_CNT_CONTEXT, "ECN-marked packets received: congestion on the path"},
};

/* Broadcom bnxt_re (drivers/infiniband/hw/bnxt_re/hw_counters.c). */
static const struct mcp_cnt_desc bnxt_re_table[] = {
  {HW "max_retry_exceeded", MCP_CNT_EXHAUSTED, "transport retries exhausted: no ACK from the peer in time"},
  {HW "to_retransmits", MCP_CNT_RETRANS, "retransmissions after an ACK timeout"},
  {HW "rnr_naks_rcvd", MCP_CNT_RNR, "RNR NAKs received: the peer had no receive posted"},
  {HW "rx_out_of_buffer", MCP_CNT_RNR, "packets dropped for lack of a posted receive"},
  {HW "local_protection_err", MCP_CNT_PROT, "local protection errors: an lkey or range not registered here"},
  {HW "remote_access_err", MCP_CNT_PROT, "access errors at the peer: it refused our rkey or range"},
  {HW "remote_invalid_req_err", MCP_CNT_PROT, "invalid-request NAKs from the peer"},
  {HW "mem_mgmt_op_err", MCP_CNT_PROT, "memory registration operation errors"},
  {HW "res_length_mismatch", MCP_CNT_PROT, "writes whose length did not fit the target"},
  {HW "res_rx_invalid_rkey", MCP_CNT_PROT, "requests received with an invalid rkey"},
  {HW "res_rx_no_perm", MCP_CNT_PROT, "requests received without access permission"},
  {HW "res_rx_range_err", MCP_CNT_PROT, "requests received outside the registered range"},
  {HW "res_tx_invalid_rkey", MCP_CNT_PROT, "responses refused for an invalid rkey"},
  {HW "res_tx_no_perm", MCP_CNT_PROT, "responses refused for missing permission"},
  {HW "res_tx_range_err", MCP_CNT_PROT, "responses refused for a range error"},
  {HW "seq_err_naks_rcvd", MCP_CNT_LOSS,
   "sequence-error NAKs from the peer: it missed packets sent from here"},
  {HW "dup_req", MCP_CNT_LOSS, "duplicate requests: the peer retransmitted (packets or ACKs lost)"},
  {HW "oos_drop_count", MCP_CNT_LOSS, "out-of-sequence packets dropped: packets toward here were lost"},
  {HW "missing_resp", MCP_CNT_LOSS, "responses that never came"},
  {HW "rx_roce_errors", MCP_CNT_LOSS, "malformed RoCE packets received"},
  {HW "rx_roce_discards", MCP_CNT_LOSS, "RoCE packets discarded on receive"},
  {HW "local_qp_op_err", MCP_CNT_ERROR, "local queue pair operation errors"},
  {HW "remote_op_err", MCP_CNT_ERROR, "operation errors reported by the peer"},
  {HW "bad_resp_err", MCP_CNT_ERROR, "malformed responses from the peer"},
  {HW "unrecoverable_err", MCP_CNT_ERROR, "unrecoverable errors"},
  {HW "res_tx_pci_err", MCP_CNT_ERROR, "PCIe errors while sending"},
  {HW "res_rx_pci_err", MCP_CNT_ERROR, "PCIe errors while receiving"},
};

/* Intel irdma (drivers/infiniband/hw/irdma/verbs.c): IP/TCP-style names; kernels from
 * 6.x drop the "tcp" prefix, and the gen3 names contain spaces. Both spellings listed. */
static const struct mcp_cnt_desc irdma_table[] = {
  {HW "ip4OutNoRoutes", MCP_CNT_LINK, "IPv4 packets not sent: no route to the peer"},
  {HW "ip6OutNoRoutes", MCP_CNT_LINK, "IPv6 packets not sent: no route to the peer"},
  {HW "RNR sent", MCP_CNT_RNR, "RNR NAKs sent: no receive was posted here"},
  {HW "RNR received", MCP_CNT_RNR, "RNR NAKs received: the peer had no receive posted"},
  {HW "Nak Sequence Error", MCP_CNT_LOSS, "sequence-error NAKs: packets were lost"},
  {HW "Nak Sequence Error Implied", MCP_CNT_LOSS, "implied NAKs: responses showed earlier packets were lost"},
  {HW "Rcvd Out of order packets", MCP_CNT_LOSS,
   "packets received out of order: packets toward here were lost"},
  {HW "CRC errors", MCP_CNT_LOSS, "packets with a bad CRC: corrupted on the way here"},
  {HW "ip4InDiscards", MCP_CNT_LOSS, "IPv4 packets discarded on receive"},
  {HW "ip6InDiscards", MCP_CNT_LOSS, "IPv6 packets discarded on receive"},
  {HW "ip4InTruncatedPkts", MCP_CNT_LOSS, "truncated IPv4 packets received"},
  {HW "ip6InTruncatedPkts", MCP_CNT_LOSS, "truncated IPv6 packets received"},
  {HW "tcpInProtoErrors", MCP_CNT_LOSS, "TCP protocol errors (iWARP)"},
  {HW "InProtoErrors", MCP_CNT_LOSS, "TCP protocol errors (iWARP)"},
  {HW "rxVlanErrors", MCP_CNT_LOSS, "packets dropped for a VLAN mismatch"},
  {HW "RTO", MCP_CNT_RETRANS, "retransmission timeouts"},
  {HW "tcpRetransSegs", MCP_CNT_RETRANS, "TCP segments retransmitted (iWARP)"},
  {HW "RetransSegs", MCP_CNT_RETRANS, "TCP segments retransmitted (iWARP)"},
  {HW "cnpSent", MCP_CNT_CONTEXT, "congestion notifications sent (ECN-marked packets arrived)"},
  {HW "cnpHandled", MCP_CNT_CONTEXT, "congestion notifications received: sending was slowed"},
  {HW "RxECNMrkd", MCP_CNT_CONTEXT, "ECN-marked packets received: congestion on the path"},
};

/* InfiniBand PortCounters (drivers/infiniband/core/sysfs.c), on every port with a PMA. */
static const struct mcp_cnt_desc ib_table[] = {
  {IB "link_downed", MCP_CNT_LINK, "times the link went down"},
  {IB "link_error_recovery", MCP_CNT_LINK, "link retraining events"},
  {IB "port_rcv_errors", MCP_CNT_LOSS, "malformed packets received"},
  {IB "symbol_error", MCP_CNT_LOSS, "symbol errors on the link: cable or optics"},
  {IB "local_link_integrity_errors", MCP_CNT_LOSS, "link integrity errors: cable or optics"},
  {IB "port_rcv_remote_physical_errors", MCP_CNT_LOSS, "packets that arrived marked bad by an earlier hop"},
  {IB "port_xmit_discards", MCP_CNT_LOSS, "packets discarded on send (port down or congestion)"},
  {IB "excessive_buffer_overrun_errors", MCP_CNT_LOSS, "receive buffer overruns: flow control failed"},
  {IB "port_rcv_switch_relay_errors", MCP_CNT_LOSS, "packets that could not be forwarded"},
  {IB "port_rcv_constraint_errors", MCP_CNT_ERROR, "packets refused by partition (P_Key) enforcement"},
  {IB "port_xmit_constraint_errors", MCP_CNT_ERROR, "packets not sent because of partition enforcement"},
  {IB "port_xmit_wait", MCP_CNT_CONTEXT, "time the port had data but could not send (congestion)"},
};

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int has_prefix(const char *s, const char *p) { return s != NULL && strncmp(s, p, strlen(p)) == 0; }

const char *mcp_cnt_table(const char *driver, const char *ibdev, const struct mcp_cnt_desc **desc, int *n)
{
  static const struct {
    const char *name;
    const struct mcp_cnt_desc *desc;
    int n;
    const char *drivers[5]; /* kernel drivers of the device's parent */
    const char *prefix;     /* the kernel's default device name */
  } tables[] = {
    {"mlx5", mlx5_table, LEN(mlx5_table), {"mlx5_core", "mlx5_ib", NULL}, "mlx5_"},
    {"bnxt_re", bnxt_re_table, LEN(bnxt_re_table), {"bnxt_en", "bnxt_re", NULL}, "bnxt_re"},
    {"irdma", irdma_table, LEN(irdma_table), {"ice", "i40e", "idpf", "irdma", NULL}, "irdma"},
    {"rxe", rxe_table, LEN(rxe_table), {"rxe", "rdma_rxe", NULL}, "rxe"},
  };
  int i, j;

  /* The driver decides; the name only when the driver is unknown (udev renames devices). */
  for (i = 0; driver != NULL && driver[0] != '\0' && i < LEN(tables); i++)
    for (j = 0; tables[i].drivers[j] != NULL; j++)
      if (strcmp(driver, tables[i].drivers[j]) == 0 ||
          (has_prefix(driver, tables[i].drivers[j]) && driver[strlen(tables[i].drivers[j])] == '.'))
        goto found;
  for (i = 0; (driver == NULL || driver[0] == '\0') && i < LEN(tables); i++)
    if (has_prefix(ibdev, tables[i].prefix))
      goto found;
  return NULL;
found:
  if (desc != NULL)
    *desc = tables[i].desc;
  if (n != NULL)
    *n = tables[i].n;
  return tables[i].name;
}

const struct mcp_cnt_desc *mcp_cnt_ib_table(int *n)
{
  *n = LEN(ib_table);
  return ib_table;
}

/* A counter's value; -EINVAL for text that is not a number ("N/A (no PMA)"). */
static int read_value(const char *path, uint64_t *v)
{
  char buf[64], *end;
  int rc = mcp_sysfs_attr_read(path, buf, sizeof(buf));

  if (rc != 0)
    return rc;
  errno = 0;
  *v = strtoull(buf, &end, 0);
  return errno == 0 && end != buf && *end == '\0' ? 0 : -EINVAL;
}

static void add(struct mcp_cnt_snapshot *s, const char *path, int kind, const char *meaning, uint64_t v)
{
  struct mcp_cnt_entry *e;

  if (s->n == MCP_CNT_MAX || strlen(path) >= MCP_CNT_PATH_MAX) {
    s->dropped++;
    return;
  }
  e = &s->e[s->n++];
  snprintf(e->path, sizeof(e->path), "%s", path);
  e->kind = kind;
  e->meaning = meaning;
  e->value = v;
}

static void read_table(struct mcp_cnt_snapshot *s, const char *pdir, const struct mcp_cnt_desc *t, int n)
{
  char path[PATH_MAX];
  uint64_t v;
  int i;

  for (i = 0; i < n; i++)
    if (snprintf(path, sizeof(path), "%s/%s", pdir, t[i].path) < (int)sizeof(path) &&
        read_value(path, &v) == 0)
      add(s, t[i].path, t[i].kind, t[i].meaning, v);
}

static int contains(const char *s, const char *word) { return strstr(s, word) != NULL; }

/* The kind of a counter no table knows, from words in its name; 0: not an error counter
 * (traffic, resources, the "lifespan" setting). */
static int kind_by_name(const char *name)
{
  char low[MCP_CNT_PATH_MAX];
  size_t i;

  for (i = 0; name[i] != '\0' && i + 1 < sizeof(low); i++)
    low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
  low[i] = '\0';
  if (contains(low, "rnr"))
    return MCP_CNT_RNR;
  if (contains(low, "retry_exc") || contains(low, "max_retry") || contains(low, "unresponsive"))
    return MCP_CNT_EXHAUSTED;
  if (contains(low, "link_down") || contains(low, "downed") || contains(low, "noroute") ||
      contains(low, "send_err"))
    return MCP_CNT_LINK;
  if (contains(low, "access") || contains(low, "protection") || contains(low, "rkey") ||
      contains(low, "lkey") || contains(low, "perm") || contains(low, "length"))
    return MCP_CNT_PROT;
  if (contains(low, "seq") || contains(low, "dup") || contains(low, "out_of") || contains(low, "crc") ||
      contains(low, "symbol") || contains(low, "discard") || contains(low, "drop") ||
      contains(low, "impaired") || contains(low, "rcv_err"))
    return MCP_CNT_LOSS;
  if (contains(low, "retrans") || contains(low, "retry") || contains(low, "timeout"))
    return MCP_CNT_RETRANS;
  if (contains(low, "cnp") || contains(low, "ecn") || contains(low, "congest"))
    return MCP_CNT_CONTEXT;
  if (contains(low, "err"))
    return MCP_CNT_ERROR;
  return 0;
}

struct linux_dirent64_hdr {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* Every regular file of pdir/sub that looks like an error counter, in name order; files a
 * table (t, n) knows keep its kind and meaning. */
static void read_listed(struct mcp_cnt_snapshot *s, const char *pdir, const char *sub,
                        const struct mcp_cnt_desc *t, int n)
{
  char dir[PATH_MAX], path[PATH_MAX], rel[MCP_CNT_PATH_MAX];
  _Alignas(8) char buf[4096];
  int fd, first = s->n, i;
  long got;

  if (snprintf(dir, sizeof(dir), "%s/%s", pdir, sub) >= (int)sizeof(dir))
    return;
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  while ((got = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
    long off = 0;
    while (off < got) {
      const struct linux_dirent64_hdr *de = (const void *)(buf + off);
      const char *meaning = NULL;
      int kind;
      uint64_t v;

      off += de->d_reclen;
      if (de->d_name[0] == '.' || snprintf(rel, sizeof(rel), "%s/%s", sub, de->d_name) >= (int)sizeof(rel))
        continue;
      kind = kind_by_name(de->d_name);
      for (i = 0; i < n; i++)
        if (strcmp(t[i].path, rel) == 0) {
          kind = t[i].kind;
          meaning = t[i].meaning;
        }
      if (kind == 0 || snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path) ||
          read_value(path, &v) != 0)
        continue;
      add(s, rel, kind, meaning, v);
    }
  }
  close(fd);
  /* Directory order is the file system's: sort what this folder added, by name. */
  for (i = first + 1; i < s->n; i++) {
    struct mcp_cnt_entry e = s->e[i];
    int j = i;
    while (j > first && strcmp(s->e[j - 1].path, e.path) > 0) {
      s->e[j] = s->e[j - 1];
      j--;
    }
    s->e[j] = e;
  }
}

int mcp_cnt_snapshot_read(const char *root, const char *ibdev, int port, const char *driver,
                          struct mcp_cnt_snapshot *s)
{
  const struct mcp_cnt_desc *t;
  char pdir[PATH_MAX], path[PATH_MAX], text[64];
  int n, num;

  memset(s, 0, sizeof(*s));
  if (snprintf(pdir, sizeof(pdir), "%s/class/infiniband/%s/ports/%d", root, ibdev, port) >= (int)sizeof(pdir))
    return -ENAMETOOLONG;
  if (access(pdir, F_OK) != 0)
    return -errno;
  if (snprintf(path, sizeof(path), "%s/state", pdir) < (int)sizeof(path) &&
      mcp_sysfs_attr_read(path, text, sizeof(text)) == 0 &&
      mcp_sysfs_parse_state(text, &num, s->state_name, sizeof(s->state_name)) == 0)
    s->state = num;
  if (snprintf(path, sizeof(path), "%s/phys_state", pdir) < (int)sizeof(path) &&
      mcp_sysfs_attr_read(path, text, sizeof(text)) == 0)
    (void)mcp_sysfs_parse_state(text, &num, s->phys_state_name, sizeof(s->phys_state_name));
  s->table = mcp_cnt_table(driver, ibdev, &t, &n);
  if (s->table != NULL) {
    read_table(s, pdir, t, n);
    t = mcp_cnt_ib_table(&n);
    if (snprintf(path, sizeof(path), "%s/counters", pdir) < (int)sizeof(path) && access(path, F_OK) == 0)
      read_table(s, pdir, t, n);
    return 0;
  }
  s->table = "generic";
  read_listed(s, pdir, "hw_counters", NULL, 0);
  t = mcp_cnt_ib_table(&n);
  read_listed(s, pdir, "counters", t, n);
  return 0;
}

void mcp_cnt_diff(const struct mcp_cnt_snapshot *before, const struct mcp_cnt_snapshot *after,
                  struct mcp_cnt_diff *d)
{
  int i, j;

  memset(d, 0, sizeof(*d));
  d->after = after;
  for (i = 0; i < after->n; i++) {
    const struct mcp_cnt_entry *a = &after->e[i];
    /* Both snapshots were taken the same way, so the same index usually matches. */
    j = i < before->n && strcmp(before->e[i].path, a->path) == 0 ? i : -1;
    for (int k = 0; j < 0 && k < before->n; k++)
      if (strcmp(before->e[k].path, a->path) == 0)
        j = k;
    if (j < 0 || a->value == before->e[j].value)
      continue;
    if (a->value < before->e[j].value) {
      d->went_back++;
      continue;
    }
    d->c[d->n].idx = i;
    d->c[d->n].delta = a->value - before->e[j].value;
    d->n++;
    d->kinds |= 1u << a->kind;
  }
}

size_t mcp_cnt_format(const struct mcp_cnt_diff *d, char *buf, size_t len)
{
  size_t used = 0;
  int kind, i, shown = 0;

  if (len == 0)
    return 0;
  buf[0] = '\0';
  if (d == NULL || d->n == 0)
    return (size_t)snprintf(buf, len, "no error counter moved");
  for (kind = MCP_CNT_EXHAUSTED; kind <= MCP_CNT_CONTEXT; kind++) {
    for (i = 0; i < d->n; i++) {
      const struct mcp_cnt_entry *e = &d->after->e[d->c[i].idx];
      const char *name = strchr(e->path, '/') ? strchr(e->path, '/') + 1 : e->path;
      char one[256];
      int k;

      if (e->kind != kind)
        continue;
      k = snprintf(one, sizeof(one), "%s%s +%llu%s%s%s", shown ? ", " : "", name,
                   (unsigned long long)d->c[i].delta, e->meaning ? " (" : "", e->meaning ? e->meaning : "",
                   e->meaning ? ")" : "");
      /* Keep room for ", N more" (at most 16 bytes) unless this is the last entry. */
      if (k < 0 || used + (size_t)k + (shown + 1 < d->n ? 16 : 0) >= len) {
        snprintf(buf + used, len - used, ", %d more", d->n - shown);
        return strlen(buf);
      }
      memcpy(buf + used, one, (size_t)k + 1);
      used += (size_t)k;
      shown++;
    }
  }
  return used;
}

enum mcp_cnt_cause mcp_cnt_classify(const struct mcp_cnt_diff *d, int wc_status, int port_state)
{
  unsigned k = d != NULL ? d->kinds : 0;
#define MOVED(kind) ((k & (1u << (kind))) != 0)

  switch (wc_status) {
  case IBV_WC_LOC_LEN_ERR:
  case IBV_WC_LOC_PROT_ERR:
  case IBV_WC_MW_BIND_ERR:
  case IBV_WC_LOC_ACCESS_ERR:
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_ACCESS_ERR:
  case IBV_WC_LOC_RDD_VIOL_ERR:
  case IBV_WC_REM_INV_RD_REQ_ERR: return MCP_CAUSE_PROTECTION;
  default: break;
  }
  if ((port_state != 0 && port_state != IBV_PORT_ACTIVE) || MOVED(MCP_CNT_LINK))
    return MCP_CAUSE_LOCAL_LINK;
  switch (wc_status) {
  case IBV_WC_RNR_RETRY_EXC_ERR: return MCP_CAUSE_RNR;
  case IBV_WC_RETRY_EXC_ERR:
  case IBV_WC_RESP_TIMEOUT_ERR: return MOVED(MCP_CNT_LOSS) ? MCP_CAUSE_LOSSY : MCP_CAUSE_UNREACHABLE;
  case IBV_WC_REM_OP_ERR:
  case IBV_WC_REM_ABORT_ERR:
  case IBV_WC_BAD_RESP_ERR: return MCP_CAUSE_REMOTE;
  default: break;
  }
  /* A status that names no cause (flush, local QP error, general error): the counters. */
  if (MOVED(MCP_CNT_PROT))
    return MCP_CAUSE_PROTECTION;
  if (MOVED(MCP_CNT_EXHAUSTED))
    return MOVED(MCP_CNT_LOSS) ? MCP_CAUSE_LOSSY : MCP_CAUSE_UNREACHABLE;
  if (MOVED(MCP_CNT_LOSS))
    return MCP_CAUSE_LOSSY;
  return wc_status == IBV_WC_WR_FLUSH_ERR ? MCP_CAUSE_FLUSHED : MCP_CAUSE_UNKNOWN;
#undef MOVED
}

static const struct {
  const char *name, *why, *try;
} causes[] = {
  [MCP_CAUSE_UNKNOWN] = {"unknown", "no port counter points at a cause",
                         "look for the first error in the peer's log; compare `rdma statistic show link "
                         "DEV/PORT` and dmesg on both hosts"},
  [MCP_CAUSE_UNREACHABLE] =
    {"unreachable peer",
     "retries ran out and no counter shows packets getting through: the peer host, "
     "its port or the path to it stopped answering (host down, link or switch port "
     "down, route or GID changed)",
     "check that the peer host and its port are up (rdma link, ibv_devinfo), ping the "
     "peer's address from this port's interface, compare NCCL_IB_GID_INDEX and "
     "NCCL_IB_ADDR_RANGE on both ends; on a slow fabric raise NCCL_IB_TIMEOUT"},
  [MCP_CAUSE_LOSSY] =
    {"lossy fabric",
     "packets were lost or corrupted between the two ports (sequence errors, duplicates, "
     "retransmissions) until retries ran out",
     "check lossless RoCE (PFC/ECN) on the NICs and switches, cables and optics (symbol "
     "errors) and the MTU along the path; raising NCCL_IB_TIMEOUT or NCCL_IB_RETRY_CNT rides "
     "out short bursts"},
  [MCP_CAUSE_LOCAL_LINK] =
    {"local link down", "this port went down or could not send",
     "check the link on this host (ip link, rdma link, the cable and the switch port)"},
  [MCP_CAUSE_PROTECTION] =
    {"protection error",
     "a memory access was refused: a buffer outside its registration, deregistered or "
     "freed while in flight, a write longer than its target, or a bad rkey",
     "check that every buffer passed to isend/irecv lies within its regMr range and stays "
     "registered until test reports done; run the same mcpnet on both ends"},
  [MCP_CAUSE_RNR] = {"receiver not ready",
                     "the receiver had no receive posted more often than MCPNET_RNR_RETRY allows",
                     "check that the peer process is making progress; raise MCPNET_RNR_RETRY or "
                     "MCPNET_MIN_RNR_TIMER"},
  [MCP_CAUSE_REMOTE] = {"error at the peer",
                        "the peer's adapter failed the request (its queue pair is in error or was destroyed)",
                        "look for the first error in the peer's log"},
  [MCP_CAUSE_FLUSHED] = {"flushed after an earlier error",
                         "this work was flushed because its queue pair had already failed",
                         "the queue pair's first error explains it; see the messages before this one"},
};

const char *mcp_cnt_cause_name(enum mcp_cnt_cause c)
{
  return (unsigned)c < sizeof(causes) / sizeof(causes[0]) ? causes[c].name : causes[0].name;
}

const char *mcp_cnt_cause_why(enum mcp_cnt_cause c)
{
  return (unsigned)c < sizeof(causes) / sizeof(causes[0]) ? causes[c].why : causes[0].why;
}

const char *mcp_cnt_cause_try(enum mcp_cnt_cause c)
{
  return (unsigned)c < sizeof(causes) / sizeof(causes[0]) ? causes[c].
  try : causes
    [0].try;
}
