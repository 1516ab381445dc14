/*
 * param.h - the one typed parameter table and the configuration it produces.
 *
 * Every knob mcpnet reads is a row of one table (name, aliases, type, default, range,
 * one-line doc, where its value lands in struct mcp_config). mcp_param_load() reads
 * the table's variables once - defaults, then the MCPNET_CONFIG file, then (for tools
 * that ask) NCCL's own configuration files, then the environment - range-checks each
 * effective value and fills an immutable struct mcp_config that records, for every
 * parameter, where its value came from. The plugin, the doctor and the README's
 * configuration reference (tools/mcpnet-params --markdown) all read the same table,
 * so code and documentation cannot drift. Nothing here keeps global mutable state:
 * the loader is reentrant and its result is an out-parameter.
 */
#ifndef MCPNET_PARAM_H
#define MCPNET_PARAM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/match_list.h"
#include "nccl/net_common.h"

/* One identifier per parameter; also the row index in mcp_param_table(). */
enum mcp_param_id {
  MCP_PARAM_IB_HCA,
  MCP_PARAM_IB_GID_INDEX,
  MCP_PARAM_IB_ROCE_VERSION_NUM,
  MCP_PARAM_IB_ADDR_FAMILY,
  MCP_PARAM_IB_ADDR_RANGE,
  MCP_PARAM_IB_TIMEOUT,
  MCP_PARAM_IB_RETRY_CNT,
  MCP_PARAM_IB_SL,
  MCP_PARAM_IB_TC,
  MCP_PARAM_IB_PKEY,
  MCP_PARAM_IB_QPS_PER_CONNECTION,
  MCP_PARAM_IB_MERGE_VFS,
  MCP_PARAM_IB_MERGE_NICS,
  MCP_PARAM_IB_PCI_RELAXED_ORDERING,
  MCP_PARAM_IB_FIFO_TC,
  MCP_PARAM_IB_MQP_RETRY_ALL,
  MCP_PARAM_IB_MQP_RETRY_CNT,
  MCP_PARAM_IB_MQP_RETRY_SLEEP_MSEC,
  MCP_PARAM_SOCKET_IFNAME,
  MCP_PARAM_SOCKET_FAMILY,
  MCP_PARAM_RANK_MAP,
  MCP_PARAM_LOCAL_RANK,
  MCP_PARAM_STRICT,
  MCP_PARAM_TENANT_PKEY,
  MCP_PARAM_MTU,
  MCP_PARAM_RNR_RETRY,
  MCP_PARAM_MIN_RNR_TIMER,
  MCP_PARAM_ALLOW_INFINITE_RETRY,
  MCP_PARAM_OOB_PORT_RANGE,
  MCP_PARAM_CONNECT_TIMEOUT,
  MCP_PARAM_RECOVERY_TIMEOUT,
  MCP_PARAM_IB_PORT_FAILOVER,
  MCP_PARAM_IB_PORT_RECOVERY,
  MCP_PARAM_WATCHDOG_SEC,
  MCP_PARAM_STATUS,
  MCP_PARAM_STATUS_DIR,
  MCP_PARAM_ABORT_ON_ERROR,
  MCP_PARAM_FORCE_FLUSH,
  MCP_PARAM_PROGRESS_CPU,
  MCP_PARAM_INLINE_BYTES,
  MCP_PARAM_VERBS_LIBRARY,
  MCP_PARAM_CONFIG,
  MCP_PARAM_COUNT
};

enum mcp_param_type {
  MCP_PARAM_INT,   /* stored as int; decimal or 0x hex, optional sign */
  MCP_PARAM_BOOL,  /* stored as bool; 0/1, true/false, yes/no, on/off */
  MCP_PARAM_STRING /* stored as const char *, NULL when unset */
};

/* Where an effective value came from, lowest precedence first. */
enum mcp_param_source {
  MCP_PARAM_SRC_DEFAULT,
  MCP_PARAM_SRC_CONFIG_FILE, /* the MCPNET_CONFIG file */
  MCP_PARAM_SRC_NCCL_CONF,   /* NCCL_CONF_FILE, ~/.nccl.conf or /etc/nccl.conf */
  MCP_PARAM_SRC_ENV
};

struct mcp_param_origin {
  enum mcp_param_source source;
  const char *key;  /* the name it was set under (an alias, maybe); NULL for defaults */
  const char *path; /* the file, for CONFIG_FILE and NCCL_CONF; else NULL */
  unsigned line;    /* the line in that file, 1-based; else 0 */
  bool rejected;    /* the value from this origin was refused; the field holds the default */
};

/* Checks beyond min..max; write a short reason into why and return -EINVAL to refuse. */
typedef int (*mcp_param_check_str_fn)(const char *value, char *why, size_t whylen);
typedef int (*mcp_param_check_int_fn)(long long value, char *why, size_t whylen);
/* A check that also keeps the typed result in the configuration, so that a value with
 * a grammar (the rank map) is parsed once, when it is read, and never again. */
struct mcp_config;
typedef int (*mcp_param_parse_str_fn)(const char *value, struct mcp_config *cfg, char *why, size_t whylen);

struct mcp_param_def {
  enum mcp_param_id id;
  const char *name;
  const char *const *aliases; /* NULL-terminated, or NULL when there are none */
  enum mcp_param_type type;
  long long def;         /* default of INT and BOOL */
  const char *def_str;   /* default of STRING; NULL = unset */
  long long min, max;    /* INT only */
  const char *doc;       /* one line, for the log, the doctor and the README */
  const char *range_doc; /* overrides "min..max" in docs and messages, or NULL */
  const char *why;       /* why the range is what it is, appended to range errors */
  bool hex;              /* format the value as hex (P_Keys) */
  size_t offset;         /* where the value lives in struct mcp_config */
  mcp_param_check_str_fn check_str;
  mcp_param_check_int_fn check_int;
  mcp_param_parse_str_fn parse_str; /* STRING only, instead of check_str */
};

struct mcp_rankmap;

/* Opaque storage for the strings a configuration owns. */
struct mcp_param_strings;

/*
 * The effective configuration. Fill it with mcp_param_load(), read its fields, and
 * release it with mcp_param_free(); treat it as read-only in between and pass it by
 * pointer (its strings live in storage it owns, so a struct copy must not outlive it).
 */
struct mcp_config {
  /* NCCL's variables, NCCL's meanings. */
  const char *ib_hca; /* NCCL_IB_HCA, NULL = every device */
  int ib_gid_index;   /* -1 = choose automatically */
  int ib_roce_version;
  const char *ib_addr_family; /* "AF_INET" or "AF_INET6" */
  const char *ib_addr_range;  /* CIDR or NULL */
  int ib_timeout;
  int ib_retry_cnt;
  int ib_sl;         /* -1 = unset */
  int ib_tc;         /* -1 = unset */
  int ib_pkey_index; /* NCCL_IB_PKEY: an index into the P_Key table */
  int ib_qps_per_conn;
  int ib_merge_vfs;  /* NCCL_IB_MERGE_VFS (non-zero: on): VFs count as functions of their PF's NIC */
  int ib_merge_nics; /* NCCL_IB_MERGE_NICS (non-zero: on): 0 refuses NCCL's makeVDevice of several devices */
  int ib_pci_relaxed_ordering; /* 0 off; 1 and 2 on where ibv_reg_mr_iova2 exists */
  int ib_fifo_tc;              /* RoCE: the receive side's QPs (clear-to-send writes); -1 = the data's */
  int ib_mqp_retry_all;        /* non-zero: a connect's RTR/RTS retries any error, not only ETIMEDOUT */
  int ib_mqp_retry_cnt;        /* retries of a connect's RTR/RTS; 0 or less: none */
  int ib_mqp_retry_sleep_ms;   /* retry k waits k times this */
  const char *socket_ifname;
  const char *socket_family; /* NULL = either */

  /* mcpnet's own. */
  const char *rank_map;
  int local_rank; /* -1 = look at LOCAL_RANK & co. */
  bool strict;
  int tenant_pkey; /* a P_Key value, -1 = unset */
  int mtu;         /* 0 = the port's active MTU */
  int rnr_retry;
  int min_rnr_timer;
  bool allow_infinite_retry;
  const char *oob_port_range;
  int connect_timeout_s;
  int recovery_timeout_s; /* 0 = no recovery */
  /* A fused link's recovery leaves a member whose port is down out (failover), and takes
   * it again when its port is back (port recovery): NCCL_IB_RESILIENCY_PORT_*, non-zero. */
  int ib_port_failover, ib_port_recovery;
  int watchdog_s;         /* 0 = off */
  bool status;            /* publish the comms for mcpnet-top (status.h) */
  const char *status_dir; /* where (MCPNET_STATUS_DIR) */
  bool abort_on_error;
  bool force_flush;
  int progress_cpu; /* -1 = not pinned */
  int inline_bytes;
  const char *verbs_library; /* MCPNET_VERBS_LIBRARY; NULL: libibverbs.so.1 */
  const char *config_path;   /* MCPNET_CONFIG */

  /* Derived from the above at load, so users need not parse again. */
  int ib_af;                           /* AF_INET or AF_INET6 */
  int socket_af;                       /* AF_UNSPEC, AF_INET or AF_INET6 */
  int oob_port_lo, oob_port_hi;        /* 0, 0 when MCPNET_OOB_PORT_RANGE is unset */
  struct mcp_rankmap *rank_map_parsed; /* MCPNET_RANK_MAP typed (rankmap.h); NULL when
                                        * rank_map is; owned, freed by mcp_param_free */
  /* The list variables typed (match_list.h), parsed once by the loader, so a bad list
   * fails the load and discovery and the out-of-band channel use these, never the text
   * (kept above for messages). Empty (n == 0, passes every name) when unset. */
  struct mcp_match_list ib_hca_list;        /* NCCL_IB_HCA (mcp_hca_parse) */
  struct mcp_match_list socket_ifname_list; /* NCCL_SOCKET_IFNAME (mcp_sock_ifspec_parse) */

  struct mcp_param_origin origin[MCP_PARAM_COUNT];
  struct mcp_param_strings *strings_; /* owned storage; private */
};

/* Load flags. */
#define MCP_PARAM_LOAD_NCCL_CONF 0x1u /* also read NCCL_CONF_FILE / ~/.nccl.conf / /etc/nccl.conf */

/* What mcp_param_scan_env and mcp_param_check_select find in an environment. */
enum mcp_param_finding_kind {
  MCP_FIND_UNKNOWN_NAME, /* no parameter of mcpnet's, no variable of NCCL's: a typo? */
  MCP_FIND_IGNORED,      /* NCCL's IB transport reads it, mcpnet has no counterpart */
  MCP_FIND_PLUGIN,       /* NCCL_NET_PLUGIN: the library NCCL opens is not mcpnet's */
  MCP_FIND_NET,          /* NCCL_NET: the network NCCL initialises is not mcpnet's */
  MCP_FIND_NOTE          /* worth knowing, wrong in no environment (an unset NCCL_NET_PLUGIN) */
};

struct mcp_param_finding {
  enum mcp_param_finding_kind kind;
  bool problem;        /* makes mcpnet-params --check exit 1 */
  const char *name;    /* the variable */
  const char *value;   /* as set; NULL when unset */
  const char *nearest; /* the name or value probably meant, or NULL */
  const char *message; /* the text reported (a WARN, or INFO for a note) */
};

/*
 * What the loader reads from the outside world, injectable for tests. A NULL env or
 * NULL members mean the real thing.
 */
struct mcp_param_env {
  const char *(*getenv)(void *arg, const char *name); /* NULL: getenv(3) */
  void *getenv_arg;
  const char *home;        /* for ~/.nccl.conf; NULL: $HOME */
  const char *system_conf; /* NULL: /etc/nccl.conf */
  /* Where WARN/INFO messages go; NULL: the log (MCP_WARN / MCP_INFO with NCCL_ENV). */
  void (*report)(void *arg, ncclDebugLogLevel level, const char *msg);
  void *report_arg;
  /*
   * The NCCL that loaded the plugin, for defaults NCCL changed between releases
   * (NCCL_IB_TIMEOUT): nccl_abi is the ncclNet table version it took (8..12; 0 unknown,
   * e.g. a tool), nccl_version its NCCL_VERSION_CODE when the process exports
   * ncclGetVersion (0 unknown).
   */
  int nccl_abi;
  int nccl_version;
  /* The environment block mcp_param_scan_env and mcp_param_check_select read; NULL: environ. */
  char *const *envp;
  /* Each finding of those two, structured (mcpnet-params --check --json); NULL: none.
   * Its text goes to report as well. */
  void (*finding)(void *arg, const struct mcp_param_finding *f);
  void *finding_arg;
};

/*
 * Fill cfg from the table. Returns 0, or -EINVAL after one WARN per bad value (err
 * gets the first), or -ENOMEM. Whatever it returns, cfg is complete (a refused value
 * keeps its default and is marked rejected) and must be released with mcp_param_free.
 */
int mcp_param_load(struct mcp_config *cfg, const struct mcp_param_env *env, unsigned flags, char *err,
                   size_t errlen);
void mcp_param_free(struct mcp_config *cfg);
/* The process's configuration (mcp_param_process.c): net's init loads it, the fabric's
 * teardown frees it. Only the places that copy it into the settings of a level read it
 * (net's init; conn's comm_new: struct mcp_link_cfg; discovery: struct mcp_fabric_cfg):
 * test/check-config-path.sh keeps it so. */
struct mcp_config *mcp_param_process(void);

/* One INFO line (subsystem NCCL_ENV) per parameter: NAME=value (source). Call once. */
void mcp_param_log(const struct mcp_config *cfg);

const struct mcp_param_def *mcp_param_table(size_t *n);
/* The row for a name or one of its aliases, or NULL. */
const struct mcp_param_def *mcp_param_find(const char *name);
const char *mcp_param_type_name(enum mcp_param_type type);
const char *mcp_param_source_name(enum mcp_param_source source);

/* Text forms, for the log, the doctor and the docs; each returns snprintf's count. */
int mcp_param_format(const struct mcp_config *cfg, const struct mcp_param_def *def, char *buf, size_t len);
int mcp_param_format_default(const struct mcp_param_def *def, char *buf, size_t len);
int mcp_param_format_range(const struct mcp_param_def *def, char *buf, size_t len);
/* "environment", "config file /etc/mcpnet.conf:3", "default", ... */
int mcp_param_format_origin(const struct mcp_param_origin *origin, char *buf, size_t len);

/*
 * NCCL_IB_TIMEOUT's default for the NCCL that loaded the plugin: 20 from NCCL 2.23 on,
 * 18 before. An exact NCCL version decides; without one, the table version: v8 tables
 * are taken by NCCL 2.20 - 2.23 (18 for three of those four releases), v9 and later only
 * by 2.24+; unknown (a tool) gets 20. why gets the reason, for the init log.
 */
int mcp_param_nccl_ib_timeout(int nccl_version, int nccl_abi, char *why, size_t whylen);

/*
 * The variables NCCL reads in the families mcpnet judges (mcp_param_nccl.c): NCCL_IB_*,
 * NCCL_NET, NCCL_NET_* and NCCL_SOCKET_*, from NCCL 2.20 to 2.30, besides the table's
 * rows. MCP_NCCL_IB_IGNORED: NCCL's IB transport reads it and mcpnet does not act on it,
 * with NCCL's default (dflt, NULL where releases differ); MCP_NCCL_OWN: NCCL's own code
 * reads it whatever the transport. Lists end with a NULL name.
 */
enum mcp_param_nccl_kind { MCP_NCCL_IB_IGNORED, MCP_NCCL_OWN };
struct mcp_param_nccl_var {
  const char *name;
  const char *dflt;
  /* Ignored ones: why mcpnet does not act on it (said with it, in the WARN and by
   * mcpnet-params --check); NULL when the README's compatibility section says it. */
  const char *why;
};
const struct mcp_param_nccl_var *mcp_param_nccl_list(enum mcp_param_nccl_kind kind);
/* The entry for name and its kind, or NULL when neither list has it. */
const struct mcp_param_nccl_var *mcp_param_nccl_lookup(const char *name, enum mcp_param_nccl_kind *kind);
/* Whether value is NCCL's default for var: such a setting changes nothing. */
bool mcp_param_nccl_is_default(const struct mcp_param_nccl_var *var, const char *value);
/* Whether name is of the families above (NCCL_IB_*, NCCL_NET, NCCL_NET_*, NCCL_SOCKET_*). */
bool mcp_param_nccl_family(const char *name);
/* Whether NCCL reads name: one of the table's NCCL_* rows or of the lists above. */
bool mcp_param_nccl_reads(const char *name);

/*
 * The known name nearest to a misspelt one by edit distance (a name cut short counts as
 * one edit from its completion; ties go to the longer common start), never NULL;
 * *distance (may be NULL) gets the distance. An NCCL name of the families above is
 * measured against NCCL's names (the table's NCCL_* rows and both lists), any other
 * name against the table's names and aliases. mcp_param_nearest_word does the same for
 * a value among candidates (NULL-terminated), ignoring case.
 */
const char *mcp_param_nearest(const char *name, int *distance);
const char *mcp_param_nearest_word(const char *word, const char *const *cands, int *distance);
/* Whether a distance from mcp_param_nearest* makes a likely typo of a name of len characters. */
bool mcp_param_near_enough(int distance, size_t len);
/*
 * Scan env->envp (or environ): one WARN listing every set NCCL_IB_* variable mcpnet does
 * not act on (silent where it holds NCCL's default), one WARN per set MCPNET_* name that
 * is no parameter, naming the nearest real one (a retired parameter says what replaced
 * it instead, and counts as unknown), and one per set name of the NCCL
 * families above that neither NCCL nor mcpnet reads, naming the nearest NCCL name where
 * one is close. Reports through env->report like the loader, each finding also through
 * env->finding. Returns the number of unknown names; *nignored (may be NULL) gets the
 * number of ignored NCCL_IB_* ones.
 */
int mcp_param_scan_env(const struct mcp_param_env *env, int *nignored);
/*
 * Whether NCCL, in this environment, would load mcpnet and use it: NCCL_NET_PLUGIN (a
 * list from NCCL 2.27 on; "none"; a name, a library name or a path) and NCCL_NET (the
 * network's name, any case). One WARN per problem, naming the likely intended value
 * (NCCL_NET_PLUGIN=mpc: mcp); an INFO note when NCCL_NET_PLUGIN is unset. Reads and
 * reports as mcp_param_scan_env. Returns the number of problems. The plugin's init does
 * not call it: NCCL loaded the plugin, and calls its init only when NCCL_NET allows.
 */
int mcp_param_check_select(const struct mcp_param_env *env);
/* For the param files: report msg as the loader does (env->report, else the log), and
 * hand a finding to env->finding when there is one. */
void mcp_param_report(const struct mcp_param_env *env, ncclDebugLogLevel level, const char *msg);
void mcp_param_found(const struct mcp_param_env *env, const struct mcp_param_finding *f);

/*
 * How many QPs a connection can have on a device whose CQs hold at most max_cqe entries
 * when each QP needs cqe_per_qp of them (plus cqe_fixed per CQ): want, or less, and at
 * most max_qps (mcpnet's per-connection arrays, NCCL's own bound of 128). When it caps,
 * why gets a sentence naming the cap and the reason; else why is "".
 */
int mcp_param_qps_cap(int want, int max_qps, long max_cqe, int cqe_per_qp, int cqe_fixed, char *why,
                      size_t whylen);

/*
 * Value parsing shared with other modules (the rank map's sl=, pkey=, ...). The text is
 * taken as is (trim it first); trailing garbage is an error. Return 0 or -EINVAL
 * (-ERANGE when an integer does not fit a long long).
 */
int mcp_param_parse_int(const char *text, long long *out);
int mcp_param_parse_bool(const char *text, bool *out);
/*
 * Split one line of a KEY=VALUE file in place: whitespace trimmed, '#' starts a
 * comment line, one pair of matching quotes around the value removed. Returns 1 with
 * *key and *value set, 0 for a blank or comment line, -EINVAL for anything else.
 */
int mcp_param_split_line(char *line, char **key, char **value);

/*
 * Time arithmetic of the RC transport. The ACK timeout: 4.096 us * 2^timeout per try,
 * retry + 1 tries; timeout 0 is infinite (INFINITY). This is a lower bound: the IB
 * specification lets hardware wait up to about 4x longer.
 */
double mcp_param_time_to_error_s(int timeout, int retry);
/* The IB min_rnr_timer code (0..31) in milliseconds; NAN for a code out of range. */
double mcp_param_rnr_timer_ms(int code);
/* How long RNR NAKs are retried before an error: timer * (rnr_retry + 1); 7 = INFINITY. */
double mcp_param_rnr_bound_s(int min_rnr_timer, int rnr_retry);

#endif
