/*
 * fabric_counters.h - a port's error counters, read from sysfs, as evidence for what
 * went wrong when a queue pair fails.
 *
 * A work completion says what failed (RETRY_EXC_ERR, REM_ACCESS_ERR, ...), not why.
 * The port's counters say more: retransmissions without sequence errors point at a
 * peer that stopped answering, sequence errors and duplicates at a path that loses
 * packets, access errors at a buffer outside its registration. Every driver names its
 * counters differently, so there is one table per driver (mlx5, bnxt_re, irdma, rxe)
 * naming the counters that matter and what each one means, plus the InfiniBand
 * standard counters/ files; a driver without a table gets whatever hw_counters/ and
 * counters/ files look like errors by their names.
 *
 * Counters are read below a sysfs root given by the caller ("/sys", or a fixture tree in
 * unit tests). A snapshot is a plain fixed-size struct, taken when a comm connects and
 * again when it fails; the difference is formatted into one phrase, without
 * allocating. Counters are per port, so they also move for other comms and processes
 * on the same port: the classification is a likely cause, never a verdict.
 */
#ifndef MCPNET_FABRIC_COUNTERS_H
#define MCPNET_FABRIC_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#define MCP_CNT_MAX 64      /* counters one snapshot holds */
#define MCP_CNT_PATH_MAX 48 /* "hw_counters/<name>" or "counters/<name>" */

/* What a counter's movement is evidence of. */
enum mcp_cnt_kind {
  MCP_CNT_EXHAUSTED = 1, /* transport retries ran out: a QP failed */
  MCP_CNT_LINK,          /* the local link went down, or packets could not leave the port */
  MCP_CNT_PROT,          /* memory protection, access or length errors */
  MCP_CNT_RNR,           /* receiver not ready: no receive was posted */
  MCP_CNT_LOSS,          /* sequence errors, duplicates, corrupt or dropped packets */
  MCP_CNT_RETRANS,       /* retransmissions after a timeout or a NAK */
  MCP_CNT_ERROR,         /* other error completions */
  MCP_CNT_CONTEXT,       /* congestion and load signals: shown, never used to classify */
};

/* One counter a driver table knows: its path below ports/<n>/, and what it means. */
struct mcp_cnt_desc {
  const char *path;
  int kind;
  const char *meaning;
};

struct mcp_cnt_entry {
  char path[MCP_CNT_PATH_MAX];
  int kind;
  const char *meaning; /* static text from a table; NULL for a counter found by name */
  uint64_t value;
};

struct mcp_cnt_snapshot {
  const char *table;        /* "rxe", "mlx5", "bnxt_re", "irdma" or "generic" (static) */
  int state;                /* port state as sysfs says it (4 = ACTIVE); 0 unknown */
  char state_name[16];      /* "ACTIVE", "DOWN", "" when unreadable */
  char phys_state_name[24]; /* "LinkUp", "Disabled", ... */
  int n;
  int dropped; /* counters that did not fit */
  struct mcp_cnt_entry e[MCP_CNT_MAX];
};

/* The counters that moved between two snapshots of the same port. */
struct mcp_cnt_diff {
  const struct mcp_cnt_snapshot *after; /* the entries below index into it */
  int n;
  int went_back;  /* counters that decreased (reset or driver reload): ignored */
  unsigned kinds; /* bit (1 << kind) for every kind that moved */
  struct {
    int idx;
    uint64_t delta;
  } c[MCP_CNT_MAX];
};

/* Likely causes of a transport error, from the completion status and the counters. */
enum mcp_cnt_cause {
  MCP_CAUSE_UNKNOWN = 0,
  MCP_CAUSE_UNREACHABLE, /* retries ran out and nothing says packets were getting through */
  MCP_CAUSE_LOSSY,       /* packets were lost or corrupted on the path */
  MCP_CAUSE_LOCAL_LINK,  /* this port went down or could not send */
  MCP_CAUSE_PROTECTION,  /* a memory access was refused here or at the peer */
  MCP_CAUSE_RNR,         /* the receiver had no receive posted, too often */
  MCP_CAUSE_REMOTE,      /* the peer's adapter failed the request */
  MCP_CAUSE_FLUSHED,     /* flushed after an earlier error on the same queue pair */
};

/*
 * The driver table for a device: by its kernel driver ("mlx5_core", "bnxt_en", "ice",
 * "rxe", ...) or, when that is unknown, by its name's prefix. Returns the table name
 * ("mlx5", ...) and its entries, or NULL for a driver without a table.
 */
const char *mcp_cnt_table(const char *driver, const char *ibdev, const struct mcp_cnt_desc **desc, int *n);
/* The InfiniBand standard counters (counters/), read for every driver that has them. */
const struct mcp_cnt_desc *mcp_cnt_ib_table(int *n);

/*
 * Reads port `port` of device `ibdev` below root/class/infiniband: its state and its
 * error counters. Returns 0, or a negative errno when the port does not exist. Counters
 * that are missing or unreadable ("N/A") are left out.
 */
int mcp_cnt_snapshot_read(const char *root, const char *ibdev, int port, const char *driver,
                          struct mcp_cnt_snapshot *s);

/* What moved from before to after (two snapshots of one port). */
void mcp_cnt_diff(const struct mcp_cnt_snapshot *before, const struct mcp_cnt_snapshot *after,
                  struct mcp_cnt_diff *d);

/*
 * One phrase: "retry_exceeded_err +3 (meaning), rcvd_seq_err +12 (meaning)", the most
 * telling kinds first; "no error counter moved" when nothing did. Cut at an entry
 * boundary with ", N more" when buf is short. Returns the length written.
 */
size_t mcp_cnt_format(const struct mcp_cnt_diff *d, char *buf, size_t len);

/* The likely cause of a failed work completion (an enum ibv_wc_status value). */
enum mcp_cnt_cause mcp_cnt_classify(const struct mcp_cnt_diff *d, int wc_status, int port_state);
/* "unreachable peer", ...; why, in one sentence; and what to try. */
const char *mcp_cnt_cause_name(enum mcp_cnt_cause cause);
const char *mcp_cnt_cause_why(enum mcp_cnt_cause cause);
const char *mcp_cnt_cause_try(enum mcp_cnt_cause cause);

#endif
