/*
 * bench.h - the pieces of mcpnet-bench and the few types they pass between them.
 *
 * mcpnet-bench measures an NCCL net plugin the way NCCL's proxy drives it (through
 * tools/drive) and, on request, perftest on the same device in the same run. The tool
 * is split by role: options (bench_opts.c), the handle exchange between two processes
 * (bench_xchg.c), plugin connections and the control channel (bench_link.c), the
 * measured data path (bench_flow.c, bench_pattern.c), the table of series
 * (bench_series.c), one measurement of one series (bench_point.c), perftest
 * (bench_perftest.c, bench_gid.c), the sweep (bench_run.c), --cpu-cost (bench_cost.c)
 * and the outputs (bench_stats.c, bench_report.c, bench_json.c, bench_plot.c); main
 * (bench_main.c) orders them. Calls go one way: main -> run -> point -> flow, link,
 * perftest; the series table, stats and pattern call none of the others. This header
 * is where their contracts are written down.
 */
#ifndef MCPNET_BENCH_H
#define MCPNET_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mcp_drive.h"

#define BENCH_MAX_DEPTH 8 /* NCCL_STEPS: receives posted ahead / sends in flight */
#define BENCH_MAX_GROUP 8 /* NCCL's maxRecvs ceiling for grouped receives */
#define BENCH_MAX_CONNS 64
#define BENCH_MAX_SIZES 64
#define BENCH_MAX_RUNS 100
#define BENCH_MAX_CMDS 128          /* distinct perftest command lines remembered for the report */
#define BENCH_LAT_MAX_ROUNDS 200000 /* latency samples kept per point (preallocated) */

/* Exit statuses, so scripts can tell a wrong byte from a broken setup. */
enum { BENCH_EXIT_OK = 0, BENCH_EXIT_WRONG = 1, BENCH_EXIT_USAGE = 2, BENCH_EXIT_FAIL = 3 };

enum bench_role { BENCH_SELF, BENCH_ROLE_A, BENCH_ROLE_B };

/* The series one run can hold. mcpnet series are measured through the plugin; the
 * others are perftest tools run on the same device. */
enum bench_kind {
  BENCH_MCP_BW,
  BENCH_MCP_LAT,
  BENCH_WRITE_BW,
  BENCH_WRITE_LAT,
  BENCH_SEND_BW,
  BENCH_SEND_LAT,
  BENCH_KIND_COUNT
};

struct bench_series_info {
  const char *name;  /* in JSON and plots: "mcpnet-bw", "ib_write_lat" */
  const char *label; /* short table column label: "mcp-bw", "wr-lat" */
  const char *tool;  /* perftest executable, NULL for mcpnet series */
  int is_bw;         /* 1: MB/s, higher is better; 0: microseconds */
};

/* Each series's row of the table in bench_series.c. */
const struct bench_series_info *bench_series_lookup(enum bench_kind k);

struct bench_opts {
  const char *plugin; /* as given to dlopen */
  int plugin_given;
  int abi;
  int dev;
  size_t min_size, max_size;
  double factor;
  int runs;
  int conns;
  int group;
  int depth;
  int nccl_steps;
  size_t step_size;
  size_t mem_max;    /* registered bytes per direction per process, all conns */
  long iters;        /* fixed iterations per point; 0 = calibrate */
  double point_time; /* seconds one measured point should take when calibrating */
  int timeout_s;     /* no progress for this long is an error */
  int spin;          /* never yield the CPU in the progress loop */
  int pin_cpu;       /* -1: not pinned */
  int cpu_cost;      /* --cpu-cost instead of a sweep */
  int check;
  const char *json; /* file or "-" */
  const char *plot; /* PNG file */
  int compare;      /* 1: write; 2: write and send (--compare-all) */
  int gid_index;    /* -1: auto from sysfs */
  int gid_given;
  int perftest_port;
  const char *perftest_host;
  int pt_depth;       /* perftest bandwidth tools' -t (writes in flight); 0: perftest's default */
  const char *ib_dev; /* perftest -d override */
  enum bench_role role;
  const char *xchg;   /* folder for the handle exchange */
  const char *server; /* [HOST:]PORT to listen on */
  const char *client; /* HOST:PORT to connect to */
  int verbose;
};

/* Parses argv; prints usage and returns BENCH_EXIT_USAGE (or -1 after --help). */
int bench_opts_parse(struct bench_opts *o, int argc, char **argv);
/* The options that both processes of a pair must agree on, as one line. */
void bench_opts_describe(const struct bench_opts *o, char *buf, size_t len);
/* The sweep: fills sizes[] and returns how many. */
int bench_opts_sweep(const struct bench_opts *o, size_t *sizes, int max);

/* ---- handle exchange between the two processes of a pair (bench_xchg.c) ---- */
struct bench_xchg {
  const char *dir;    /* file mode */
  int fd;             /* TCP mode: the connected socket, else -1 */
  char own_file[512]; /* file mode: what we wrote, removed once connected */
};

int bench_xchg_open(struct bench_xchg *x, const struct bench_opts *o);
/* Sends len bytes and receives the peer's len bytes; gives up after timeout_s. */
int bench_xchg_swap(struct bench_xchg *x, const struct bench_opts *o, const void *mine, void *peer,
                    size_t len, int timeout_s);
void bench_xchg_tidy(struct bench_xchg *x);
void bench_xchg_close(struct bench_xchg *x);

/* ---- plugin connections (bench_link.c) ---- */

/* One plugin connection: a send comm toward the peer (or ourselves) and the receive
 * comm from it, each with a registered ring of slots; plus the state of the flow the
 * current point runs over it. */
struct bench_conn {
  void *sc, *rc;
  uint8_t *sbuf, *rbuf;
  size_t ring_bytes;
  void *smh, *rmh;
  /* per point (reset by bench_flow_begin) */
  uint64_t s_total, s_posted, s_done, r_total, r_posted, r_done;
  int s_part;   /* group elements of step s_posted already accepted by isend */
  int s_filled; /* step s_posted's data written (check mode) */
  int s_tested; /* group elements of step s_done seen complete */
  void *sreq[BENCH_MAX_DEPTH][BENCH_MAX_GROUP];
  void *rreq[BENCH_MAX_DEPTH];
};

/* The control channel of a pair: a dedicated plugin connection, idle while data
 * moves, carrying these fixed-size messages in strict alternation. */
enum bench_ctl_kind { BENCH_CTL_PLAN = 1, BENCH_CTL_READY, BENCH_CTL_STATUS, BENCH_CTL_DONE };

struct bench_ctl_msg {
  uint32_t magic;
  uint32_t kind;
  uint32_t seq;    /* point number, to catch two sides out of step */
  uint32_t series; /* enum bench_kind */
  uint64_t size;
  uint64_t iters;
  uint64_t checked; /* STATUS: messages verified on the sending side of this message */
  uint64_t wrong;   /* STATUS: of which wrong */
  int32_t status;   /* STATUS: 0 ok, else failed */
  int32_t check;    /* PLAN: 1 = an untimed pass that verifies every byte, 0 = the timed pass */
  char host[60];    /* READY for perftest: where the server listens */
  char text[168];   /* READY for perftest: the server's command line; errors */
};

struct bench_link {
  struct mcp_drive *d;
  int nconns;
  struct bench_conn *conns;
  int has_ctl;
  struct bench_conn ctl;
  uint8_t *ctl_sbuf, *ctl_rbuf;
};

/* Opens nconns connections (plus the control one in a pair) with rings of
 * ring_bytes per direction. In a pair, x carries the listen handles. */
int bench_link_open(struct bench_link *l, struct mcp_drive *d, const struct bench_opts *o,
                    struct bench_xchg *x, size_t ring_bytes);
void bench_link_close(struct bench_link *l);
int bench_ctl_send(struct bench_link *l, struct bench_ctl_msg *m, int timeout_s);
int bench_ctl_recv(struct bench_link *l, struct bench_ctl_msg *m, int timeout_s);

/* ---- the measured data path (bench_flow.c) ---- */

/* Shape of one point: how transfers map onto steps, slots and group elements. */
struct bench_geom {
  size_t size;       /* bytes of one transfer per group element */
  size_t step;       /* largest message; == size unless --nccl-steps */
  uint64_t nmsg;     /* steps per transfer */
  size_t slot_bytes; /* one sub-buffer of a slot */
  size_t post_bytes; /* size given to irecv */
  int nslots;        /* ring slots */
  int depth;         /* receives posted ahead / sends in flight (<= nslots) */
  int group;
};

void bench_geom_make(const struct bench_opts *o, size_t size, struct bench_geom *g);
size_t bench_ring_measure(const struct bench_geom *g);

struct bench_flow {
  struct mcp_drive *d;
  struct bench_conn *conns;
  int nconns; /* connections active in this point */
  struct bench_geom g;
  int check;
  uint32_t my_id, peer_id; /* pattern seeds of what we send and what we expect */
  int gate;                /* -1: no gating; else transfers received before the next may be sent, minus 1 */
  double *stamps;          /* latency: receive-completion time of each transfer of conn 0 */
  uint64_t nstamps;
  int timeout_s;
  int yield; /* sched_yield after a pass that moved nothing (NCCL does) */
  uint64_t checked, wrong;
  char err[256];
};

/* Resets the flow over f->nconns connections for s_steps sends and r_steps receives
 * per connection and posts the first receives (up to the depth). */
int bench_flow_begin(struct bench_flow *f, uint64_t s_steps, uint64_t r_steps);
/* Drives isend/irecv/test until every step is done; *elapsed is the time it took. */
int bench_flow_run(struct bench_flow *f, double *elapsed);

/* ---- data patterns (bench_pattern.c) ---- */
uint64_t bench_pattern_derive(uint32_t sender, int conn, uint64_t step, int elem);
void bench_pattern_fill(uint8_t *p, size_t n, uint64_t seed);
/* Returns the offset of the first wrong byte, or -1. */
long bench_pattern_check(const uint8_t *p, size_t n, uint64_t seed);

/* ---- statistics (bench_stats.c) ---- */
struct bench_summary {
  double median, min, max, spread; /* spread = (max - min) / median */
  int n;
};
void bench_stats_summarize(const double *v, int n, struct bench_summary *s);
double bench_median_find(double *v, size_t n); /* sorts v in place */

/* ---- results ---- */
struct bench_cell { /* one (series, size) */
  double samples[BENCH_MAX_RUNS];
  double means[BENCH_MAX_RUNS]; /* latency series: the mean next to the typical (median) */
  /* mcpnet latency: a run's round trips at their 25th and 75th percentiles (one-way us).
   * A median alone hides two groups of round trips (docs/architecture.md, 6.10a). */
  double p25[BENCH_MAX_RUNS], p75[BENCH_MAX_RUNS];
  int n;
  uint64_t iters; /* per run: transfers per connection, or round trips */
  uint64_t checked, wrong;
  int failed;  /* a run of this point failed (perftest) */
  int skipped; /* not measured (perftest limit) */
  char note[120];
};

struct bench_results {
  int nsizes;
  size_t sizes[BENCH_MAX_SIZES];
  int nseries;
  enum bench_kind series[BENCH_KIND_COUNT];
  struct bench_cell cells[BENCH_KIND_COUNT][BENCH_MAX_SIZES];
  char *cmds[BENCH_MAX_CMDS]; /* perftest command lines, as run */
  int ncmds;
  uint64_t checked, wrong; /* all series, both sides */
};

/* Everything one run of the tool holds. */
struct bench_ctx {
  struct bench_opts *o;
  struct mcp_drive drv;
  ncclNetProperties_v12_t props;
  char plugin_path[512]; /* what dlopen resolved */
  char dev_name[64];     /* perftest -d */
  int ib_port;
  int gid_index;
  char gid_ip[64];     /* address of that GID (perftest's out-of-band host) */
  char peer_host[256]; /* where role b's perftest client connects */
  struct bench_link link;
  struct bench_flow flow;
  struct bench_results *res;
  double *lat_stamps;      /* BENCH_LAT_MAX_ROUNDS * 2 + 1 */
  double lat_p25, lat_p75; /* of the last mcpnet latency pass measured */
  uint32_t seq;            /* control messages exchanged so far (pair) */
};

/* ---- one point (bench_point.c) ---- */
/* Measures series k at size for iters; one sample into *value (and *mean). */
int bench_point_measure(struct bench_ctx *c, enum bench_kind k, size_t size, uint64_t iters, double *value,
                        double *mean, struct bench_cell *cell);
/* Role a: executes the plans role b sends until it says done. */
int bench_point_serve(struct bench_ctx *c);
/* Role b: tells role a the run is over. */
int bench_point_finish(struct bench_ctx *c);

/* ---- the sweep (bench_run.c) ---- */
int bench_run_sweep(struct bench_ctx *c);
/* --cpu-cost (bench_cost.c): each call made once its work is done; prints the counts. */
int bench_cost_run(struct bench_ctx *c);
#define BENCH_COST_DEPTH 8

/* ---- perftest (bench_perftest.c, bench_gid.c) ---- */
struct bench_pt_job {
  enum bench_kind kind;
  size_t size;
  uint64_t iters;
  const char *dev;
  int ib_port;
  int gid_index;
  int tcp_port;
  int depth;        /* bandwidth tools' -t; 0: perftest's default */
  const char *host; /* NULL: server */
  char line[256];   /* the command line, as a shell would show it */
  char out[8192];   /* its output (tail) */
  int pid;
  char out_path[256];
};

/* Why perftest can not measure this point, or NULL when it can. */
const char *bench_perftest_refuses(enum bench_kind k, size_t size);
int bench_perftest_start(struct bench_pt_job *j);
/* Waits until the server listens on its port (or died). */
int bench_perftest_wait_listen(struct bench_pt_job *j, int timeout_s);
/* Waits for exit and collects output; kills it after timeout_s. Returns exit status. */
int bench_perftest_finish(struct bench_pt_job *j, int timeout_s);
void bench_perftest_kill(struct bench_pt_job *j);
/* Reads the result: MB/s (1e6 bytes/s) for bandwidth tools, t_typical us for latency. */
int bench_perftest_parse(const struct bench_pt_job *j, double *value, double *mean);
/* Whether tool is an executable in PATH. */
int bench_perftest_find(const char *tool);

int bench_gid_pick(const char *dev, int port, int *index, char *ip, size_t iplen);
int bench_gid_resolve(const char *dev, int port, int index, char *ip, size_t iplen);

/* ---- outputs ---- */
void bench_header_print(const struct bench_ctx *c, FILE *f);
void bench_table_print(const struct bench_ctx *c, FILE *f);
int bench_json_write(const struct bench_ctx *c, const char *path);
int bench_plot_draw(const struct bench_ctx *c, const char *path);

#endif
