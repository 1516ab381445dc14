/*
 * doctor_fleet.h - `mcpnet-doctor --fleet`: one doctor per node, node 0 collecting.
 *
 * A pair check answers "can these two hosts talk"; a job of N nodes needs the same
 * answer for the pairs NCCL's rings and trees will use, and one verdict per node for a
 * prolog or an init container. The split: doctor_fleet.c is pure logic with no I/O
 * (where node 0 is, which pairs to check, which node a failed pair is blamed on, the
 * table), so unit tests cover it without hosts; doctor_fleet_run.c is the network part
 * (node 0 collects reports and drives each pair through the plugin; every other node
 * answers).
 */
#ifndef MCPNET_DOCTOR_FLEET_H
#define MCPNET_DOCTOR_FLEET_H

#include <stddef.h>
#include <stdio.h>

#include "doctor.h"

#define FLEET_MAX_NODES 4096
#define FLEET_OWN_MAX 8 /* a node's own FAIL lines carried to node 0 */
#define FLEET_LINE 400

/* Frame types of the fleet's control connections, after doctor_ctl.h's. */
enum {
  DOCTOR_MSG_FLEET_HELLO = 16, /* node -> 0: key=value lines, its report's FAILs */
  DOCTOR_MSG_FLEET_CMD = 17    /* 0 -> node: "pair ...", "verdict ..." */
};

/* Where this node stands in the fleet, from options or the environment. */
struct fleet_conf {
  char coordinator[256]; /* HOST[:PORT] of node 0; "" allowed on node 0 itself */
  const char *coordinator_source;
  int nodes;
  const char *nodes_source;
  int rank;
  const char *rank_source;
};

/* What the options gave; -1 / NULL for "not given". */
struct fleet_opts {
  const char *coordinator;
  int nodes;
  int rank;
};

struct fleet_node {
  int present; /* its report reached node 0 */
  char host[64];
  char addr[64]; /* as node 0's control connection saw it */
  int ndev;      /* plugin devices: rails 0..ndev-1 */
  int nown;      /* its own FAILs (may exceed FLEET_OWN_MAX; the rest are counted) */
  char own[FLEET_OWN_MAX][FLEET_LINE];
  char missing[FLEET_LINE]; /* why it is not present, when it is not */
  int problems;             /* set by doctor_fleet_attribute */
};

enum { FLEET_BLAME_A = 1, FLEET_BLAME_B = 2 };

struct fleet_pair {
  int a, b, rail; /* a < b */
  int ran, ok;
  char step[16]; /* the step that failed: "listen", "connect", "message", "control" */
  int said_by;   /* the node whose words err holds, -1 none */
  char err[FLEET_LINE];
  int blame;  /* FLEET_BLAME_* bits (doctor_fleet_attribute) */
  int unsure; /* both ends blamed because the pairs cannot tell which */
  int by_own; /* blamed on the end whose own report FAILs, the pairs alone being even */
};

struct fleet {
  int n;
  struct fleet_node *node;
  int npair;
  struct fleet_pair *pair;
};

/* The first host of a Slurm node list, compressed form included ("gpu[03-05,07],x" ->
 * "gpu03"); 0, or -1 when the list is empty or malformed. */
int doctor_fleet_first_host(const char *nodelist, char *out, size_t len);

/* Fills c from the options, then the environment (getenv_fn, so tests pass their own):
 * coordinator: MCPNET_FLEET_COORDINATOR, then the first host of SLURM_JOB_NODELIST;
 * nodes: SLURM_NNODES, then MCPNET_FLEET_NODES; rank: SLURM_NODEID, then
 * JOB_COMPLETION_INDEX, then MCPNET_FLEET_RANK. -1 with err naming what to set. */
int doctor_fleet_resolve(const struct fleet_opts *o, const char *(*getenv_fn)(const char *name),
                         struct fleet_conf *c, char *err, size_t len);

/* The port node 0 listens on: the one in the coordinator's HOST:PORT when it has one,
 * else default_port; -1 with err when it is not 1..65535. */
int doctor_fleet_listen_port(const struct fleet_conf *c, int default_port, char *err, size_t len);

/* The pairs worth a transfer, per rail k (device k with device k): over the nodes with
 * that rail (ndev[r] > k; ndev[r] < 0: absent), each with its ring neighbour and each
 * with node 0 (when node 0 has the rail), each pair once. Returns the count, or -1 when
 * out (of cap entries) is too small. */
int doctor_fleet_pairs(int n, const int *ndev, struct fleet_pair *out, int cap);
/* The most pairs doctor_fleet_pairs can return for n nodes of at most rails rails. */
int doctor_fleet_pairs_cap(int n, int rails);

/* Sets each failed pair's blame and each node's problems: a node whose every pair on a
 * rail failed, while the other end has pairs that work, is the one named; when both
 * ends or neither look like that, the end with FAILs of its own is named; otherwise
 * both, marked unsure. Absent nodes and nodes with own FAILs have problems too.
 * Returns the number of nodes with problems. */
int doctor_fleet_attribute(struct fleet *f);

/* A node's FLEET_HELLO text (rank=, nodes=, ndev=, nown=, host=, addr=, fail= lines), as
 * node 0 reads it from the network: nd starts zeroed; text is modified. */
#define FLEET_MAX_DEVS 64
void doctor_fleet_parse_hello(struct fleet_node *nd, char *text, int *rank, int *nodes);

/* One node's problems, one line each ("to node 2 (rail 0): connect: ..."); returns the
 * count written to out (at most max lines of len bytes). */
int doctor_fleet_node_lines(const struct fleet *f, int rank, char (*out)[FLEET_LINE * 2], int max);

/* The table (nodes x problems) and the last line "fleet: N nodes, K with problems". */
void doctor_fleet_table_text(const struct fleet *f, FILE *out);
void doctor_fleet_table_json(const struct fleet *f, FILE *out);

/* Runs --fleet; returns the exit status. doctor_fleet_run.c. */
int doctor_fleet_main(const struct doctor_opts *o, const struct fleet_opts *fo);

#endif
