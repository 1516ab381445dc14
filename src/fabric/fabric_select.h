/*
 * fabric_select.h - which ports a process asked for, and whether it got them (see
 * mcp_fabric_select.c). Pure logic over names and the discovered inventory, so the
 * rules (rank map over NCCL_IB_HCA, strict mode, ordering, the one failure message)
 * are unit-tested without hardware.
 */
#ifndef MCPNET_FABRIC_SELECT_H
#define MCPNET_FABRIC_SELECT_H

#include <stddef.h>

#include "core/rankmap.h"
#include "fabric/fabric.h"
#include "fabric/fabric_hca.h"

struct mcp_select {
  const char *hca_text; /* NCCL_IB_HCA as written, or NULL */
  struct mcp_match_list hca;
  const struct mcp_rankmap_entry *entry; /* the rank map's placement; NULL: none */
  int strict;
};

/* NCCL_IB_HCA as written (for messages) and as the configuration parsed it (NULL: the
 * empty list); entry may be NULL. */
void mcp_select_init(struct mcp_select *s, const char *hca_text, const struct mcp_match_list *hca,
                     const struct mcp_rankmap_entry *entry, int strict);
/* Whether discovery should look at a device at all, and at one of its ports. */
int mcp_select_allows_dev(const struct mcp_select *s, const char *ibdev);
int mcp_select_allows_port(const struct mcp_select *s, const char *ibdev, int port);
/* Named explicitly: by the rank map entry, or by an include token of NCCL_IB_HCA. */
int mcp_select_requested(const struct mcp_select *s, const char *ibdev, int port);
/* The rail and plane of ibdev:port (-1: none): the rank map entry's rail=/plane= for a
 * pinned rank, else (also for a pinned rank that names none) those of the first include
 * token of NCCL_IB_HCA that names the port, as NCCL 2.30's IB transport takes them. */
void mcp_select_rail_plane(const struct mcp_select *s, const char *ibdev, int port, int *rail, int *plane);
/* "MCPNET_RANK_MAP entry '0-3=mlx5_0:1'" or "NCCL_IB_HCA=mlx5_0": what selected. */
void mcp_select_by(const struct mcp_select *s, char *buf, size_t len);

/*
 * After discovery: put fab->dev in the rank map's order and check that every
 * requested device gave a usable port. A prefix token that matches several devices
 * is not a problem (NCCL uses every match), but a device it names exactly must be
 * usable. visible are the verbs device names found. Returns the number of problems,
 * described in problems ("; "-separated); in strict mode any problem fails init.
 */
int mcp_select_check(const struct mcp_select *s, struct mcp_fabric *fab, const char *const *visible,
                     int nvisible, char *problems, size_t len);

/*
 * NCCL_IB_HCA tokens that match several of the visible devices by NCCL's prefix rule
 * ("mlx5_1" also takes mlx5_10): how many, with one sentence for the WARN in buf.
 * 0 for an exact ('=') list, an exclude list or a pinned rank.
 */
int mcp_select_ambiguous(const struct mcp_select *s, const char *const *visible, int nvisible, char *buf,
                         size_t len);

/* Every device found and what became of it: "rxe0: used (GID 1 ...); rxe1:1: excluded: ..." */
void mcp_select_report(const struct mcp_fabric *fab, char *buf, size_t len);

/* Record an exclusion in fab->excl (kept silently when the table is full). */
void mcp_fabric_exclude(struct mcp_fabric *fab, const char *ibdev, int port, int requested, const char *fmt,
                        ...) __attribute__((format(printf, 5, 6)));

#endif
