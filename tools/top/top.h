/*
 * top.h - mcpnet-top: every mcpnet process on a node, its comms, and what each waits for;
 * with --fleet, every node's view joined by connection into the wait-for graph's roots.
 *
 * The split by role: top_view.c reads the node's status segments (status.h) into a view,
 * twice a short interval apart, so that a comm that moved between the two reads is told
 * from one that did not; top_graph.c is pure logic with no I/O (what each comm is doing,
 * the sentence that says it, and the roots every waiting chain ends at, on one node or
 * across nodes), which the unit tests drive with synthetic views; top_text.c, top_json.c
 * and top_prom.c are the outputs; top_wire.c turns a view into lines for node 0 and back,
 * trusting nothing it reads; top_fleet.c is the network part, on the doctor's
 * authenticated control connection (tools/doctor/doctor_ctl.h) and its fleet discovery.
 */
#ifndef MCPNET_TOP_H
#define MCPNET_TOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

enum { TOP_EXIT_OK = 0, TOP_EXIT_WAITING = 1, TOP_EXIT_USAGE = 2, TOP_EXIT_PARTIAL = 3 };

/* What a comm is doing, decided from its state, its counters and its last check. */
enum top_activity {
  TOP_IDLE = 0,   /* connected, nothing posted */
  TOP_MOVING,     /* requests completed while mcpnet-top watched, or a short wait */
  TOP_WAITING,    /* no progress for --stall seconds while its process waits on it */
  TOP_UNTESTED,   /* requests posted, but its process makes no call that waits on them */
  TOP_SETUP,      /* connecting, or waiting for the peer's accept or connect */
  TOP_RECOVERING, /* re-creating its QPs after a transport error */
  TOP_FAILED
};
const char *top_activity_name(int activity);

struct top_comm {
  int kind; /* 1 send, 2 recv */
  unsigned id;
  uint32_t stream, peer_stream;
  int dev, port, ndevs, nqps;
  char ibdev[64];
  char gid[48];
  char peer_host[MCP_STATUS_HOST_MAX];
  uint32_t peer_pid; /* 0: unknown */
  int peer_local_rank;
  char peer_addr[MCP_STATUS_ADDR_MAX];
  int state;      /* enum mcp_status_state */
  double state_s; /* in that state for */
  uint64_t posted, done, bytes;
  int moved;          /* done or posted changed between the two reads */
  double check_age_s; /* since its last liveness check; -1: none yet */
  double stall_s;     /* no post or completion for (valid with a fresh check); -1: unknown */
  double idle_done_s; /* no completion for (as the checks saw it); -1: unknown */
  int wait;           /* enum mcp_status_wait */
  uint32_t wait_seq;
  int wait_count;
  char wait_text[MCP_STATUS_TEXT_MAX];
  unsigned recoveries;
  char cause[MCP_STATUS_TEXT_MAX];
  /* Set by top_classify. */
  int activity;
  double waited_s; /* how long it has waited (WAITING, UNTESTED, SETUP, RECOVERING) */
  int waits;       /* it counts as a wait: the verdict names it, the fleet follows it */
};

struct top_proc {
  char host[MCP_STATUS_HOST_MAX];
  uint32_t pid;
  int rank, local_rank;
  char name[16];
  char addr[MCP_STATUS_ADDR_MAX];
  char version[80];
  int stopped;        /* 1: SIGSTOP or a debugger; 0 running; -1 cannot tell */
  char pstate;        /* /proc state letter, '?' */
  double check_age_s; /* since any comm's last liveness check; -1: none */
  unsigned unshown;   /* comms without a slot */
  int ncomm;
  struct top_comm *comm;
};

struct top_view {
  char host[MCP_STATUS_HOST_MAX]; /* the node, as mcpnet-top's own host name */
  int nproc;
  struct top_proc *proc;
  int ndead;       /* segments of dead processes, ignored */
  int nunreadable; /* segments this user may not read */
  char unreadable_why[160];
  double sample_s; /* time between the two reads */
};

/* ---- top_view.c ---------------------------------------------------------------------- */
/* Reads every live segment under dir twice, sample_s apart, into v. 0, or -errno when dir
 * cannot be read (err says so). */
int top_view_read(const char *dir, double sample_s, struct top_view *v, char *err, size_t errlen);
void top_view_free(struct top_view *v);
/* One process's segment as read, into p (used by the two reads and the tests). */
void top_proc_from_status(const struct mcp_status_proc *sp, uint64_t now_ms, struct top_proc *p);

/* ---- top_graph.c --------------------------------------------------------------------- */
/* Sets every comm's activity and waited_s; stall_s: the --stall threshold. */
void top_classify(struct top_view *v, double stall_s);
/* "rank 3 (pid 812)" or "pid 812", with the local rank when known. */
void top_proc_name(const struct top_proc *p, char *buf, size_t len);
/* "send comm to lab-b pid 903 (192.0.2.2)" */
void top_comm_name(const struct top_comm *c, char *buf, size_t len);
/* The comm's one sentence: what it does and why, e.g. "has waited 12 s for a
 * clear-to-send (seq 41): ...". */
void top_comm_says(const struct top_comm *c, char *buf, size_t len);

/* A node's verdict: one line per finding (a stopped process, a waiting comm, a process
 * whose every comm is idle); returns the number of problems (waits, stops, failures). */
int top_verdict(const struct top_view *v, void (*line)(const char *text, void *arg), void *arg);

/* Across nodes: where every waiting chain ends. */
enum top_root_kind {
  TOP_ROOT_STOPPED = 1, /* a process stopped (SIGSTOP, a debugger) */
  TOP_ROOT_NOT_CALLING, /* a process that posts nothing on the comm a peer waits on */
  TOP_ROOT_UNTESTED,    /* a process that does not test what it posted */
  TOP_ROOT_LINK,        /* data written, never acknowledged; or a recovery under way */
  TOP_ROOT_FAILED,      /* a failed comm */
  TOP_ROOT_LOCAL,       /* waits inside one process: a tag under PXN, a flush, its own tests */
  TOP_ROOT_MISSING,     /* the peer process is in no view (its node did not report, or it is gone) */
  TOP_ROOT_CYCLE        /* processes that wait on each other */
};

#define TOP_MAX_WAITERS 8 /* waiters named per root (the rest are counted) */
struct top_root {
  int kind;
  int node, proc, comm; /* the root's place (-1 where it has none: a missing process) */
  char where[200];      /* "node lab-b rank 1 (pid 345)" */
  char why[1400];
  int nwaiters;
  char waiters[TOP_MAX_WAITERS][1400];
};

/* Joins views (one per node) by connection and returns the roots (malloc'd, *nroots),
 * the number of waiting comms in *nwaiting. Each view must be classified. */
struct top_root *top_fleet_roots(struct top_view *views, int nviews, int *nroots, int *nwaiting);

/* ---- Outputs --------------------------------------------------------------------------- */
struct top_out_opts {
  int all; /* every comm, not only the ones that are not idle */
};
void top_text_write(const struct top_view *v, const struct top_out_opts *o, FILE *f);
void top_json_write(const struct top_view *v, FILE *f);
void top_roots_text(const struct top_root *r, int nroots, int nwaiting, int nodes, int reported, FILE *f);
void top_roots_json(const struct top_root *r, int nroots, int nwaiting, int nodes, int reported, FILE *f);
/* Prometheus text: per peer node and device, never per comm, so the series stay bounded. */
void top_prom_write(const struct top_view *v, FILE *f);
/* Writes to path atomically (a temporary beside it, then rename); 0 or -errno. */
int top_prom_file(const struct top_view *v, const char *path);

/* ---- top_wire.c: a view as lines of tab-separated key=value, and back ---------------- */
/* Appends v's lines to a growing buffer (*buf, *len, *cap); 0 or -ENOMEM. */
int top_wire_encode(const struct top_view *v, char **buf, size_t *len, size_t *cap);
/* Reads lines into v (zeroed first); bounded: at most TOP_WIRE_MAX_PROCS processes and
 * TOP_WIRE_MAX_COMMS comms. 0, or -EBADMSG with err. */
#define TOP_WIRE_MAX_PROCS 4096
#define TOP_WIRE_MAX_COMMS 65536
int top_wire_decode(const char *text, size_t len, struct top_view *v, char *err, size_t errlen);

/* ---- top_fleet.c ----------------------------------------------------------------------- */
struct top_fleet_opts {
  const char *coordinator;
  int nodes, rank;
  int port;
  int wait_s, timeout_s;
  int json;
};
#define TOP_DEFAULT_PORT 18651
/* --fleet on this node, with its view v (classified); returns the exit status. */
int top_fleet_main(struct top_view *v, const struct top_fleet_opts *fo);

#endif
