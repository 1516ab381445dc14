/*
 * match_list.h - NCCL's name-list grammar, parsed and matched in one place for every
 * variable that uses it (NCCL_IB_HCA, NCCL_SOCKET_IFNAME), so that one setting means
 * the same to NCCL and to every part of mcpnet.
 *
 * Grammar (NCCL 2.30): an optional leading '^' (exclude what the list names), then an
 * optional '=' (exact names; otherwise every token is a name prefix: "mlx5_1" also
 * names "mlx5_10"), then comma-separated tokens "name[:port[:rail[:plane]]]", each field
 * after the name optional and unset when absent or empty ("mlx5_0::2": any port, rail
 * 2). NCCL_SOCKET_IFNAME drops everything from the first ':' on. Empty tokens are
 * skipped. An empty list passes every name (mcpnet's long-standing reading of "^"
 * alone too). Where mcpnet differs from NCCL on purpose: white space around a token is
 * trimmed (NCCL keeps it, so its own transports match nothing with " mlx5_1"), and the
 * parser reports it so the caller can say so once.
 */
#ifndef MCPNET_MATCH_LIST_H
#define MCPNET_MATCH_LIST_H

#include <stddef.h>

#define MCP_MATCH_LIST_MAX 32
#define MCP_MATCH_NAME_MAX 64 /* with the NUL, as NCCL's own list entries */

struct mcp_match_list {
  int exclude; /* '^' */
  int exact;   /* '=' */
  int n;
  struct {
    char name[MCP_MATCH_NAME_MAX];
    int port; /* -1: every port (no port given, or ports not used by this variable) */
    /* NCCL 2.30's rail and plane of the devices this token names (net API v12's railId
     * and planeId); -1 when not given. Only an include list's tokens give them. */
    int rail, plane;
  } e[MCP_MATCH_LIST_MAX];
  int ntrimmed;                         /* tokens that had spaces around them */
  char trimmed[MCP_MATCH_NAME_MAX + 8]; /* the first such token as written, quoted */
};

/* Why a list was refused; the variable's owner words the message (see mcp_match_list_parse). */
enum mcp_match_error {
  MCP_MATCH_OK = 0,
  MCP_MATCH_TOO_MANY,  /* more than MCP_MATCH_LIST_MAX tokens */
  MCP_MATCH_NO_NAME,   /* ":1": a port without a name */
  MCP_MATCH_TOO_LONG,  /* name_max characters or more */
  MCP_MATCH_BAD_PORT,  /* port not a decimal 1..255 */
  MCP_MATCH_BAD_RAIL,  /* rail not a decimal 0..MCP_MATCH_RAIL_MAX */
  MCP_MATCH_BAD_PLANE, /* plane not a decimal 0..MCP_MATCH_PLANE_MAX */
  MCP_MATCH_EXTRA,     /* a field after the plane */
};

/* What NCCL 2.30 can take: rails are int16_t (it reads any number and keeps its low 16
 * bits, -1 meaning none); planes too, and its IB transport refuses one with bit 14 set,
 * which marks a fused device's plane set (and uses at most 12 distinct planes). */
#define MCP_MATCH_RAIL_MAX 32767
#define MCP_MATCH_PLANE_MAX 16383

struct mcp_match_fault {
  enum mcp_match_error kind;
  const char *token; /* the token as written (not NUL-terminated: use token_len) */
  int token_len;
  char field[16]; /* MCP_MATCH_BAD_PORT/_RAIL/_PLANE: the field's text; "" when too long */
};

/*
 * Parse text (NULL or "" gives the empty list). name_max: names must be shorter than
 * this (at most MCP_MATCH_NAME_MAX). with_ports: 1 parses ":port" (1..255), ":rail"
 * (0..MCP_MATCH_RAIL_MAX) and ":plane" (0..MCP_MATCH_PLANE_MAX), 0 drops everything
 * from the first ':' on, as NCCL does for interface names. Returns 0, or -EINVAL with
 * *fault filled.
 */
int mcp_match_list_parse(const char *text, size_t name_max, int with_ports, struct mcp_match_list *list,
                         struct mcp_match_fault *fault);
/* NCCL_IB_HCA (name_max MCP_MATCH_NAME_MAX, with ports): 0, or -EINVAL with err naming
 * the bad entry in the variable's words. The parameter loader calls it (mcp_param_table.c),
 * so a bad list fails init at load; NCCL_SOCKET_IFNAME's is mcp_sock_ifspec_parse. */
int mcp_hca_parse(const char *text, struct mcp_match_list *list, char *err, size_t errlen);
/* 1 when token i names name (its port ignored): exact or prefix as the list says. */
int mcp_match_token(const struct mcp_match_list *list, int i, const char *name);
/* 1 when name:port passes the list (exclusion applied; port -1 = any; empty list: 1). */
int mcp_match_allows(const struct mcp_match_list *list, const char *name, int port);
/* The token name:port matches, as NCCL's IB transport takes a device's rail and plane from
 * it: the first include token that names it (port -1 = any); -ENOENT for none, and for
 * every name of an exclude list. */
int mcp_match_which(const struct mcp_match_list *list, const char *name, int port);
/*
 * WARN, once per *once flag (one per variable), that tokens of var had spaces that
 * mcpnet trimmed and NCCL itself would not match. No-op when nothing was trimmed.
 */
void mcp_match_list_warn_trimmed(const char *var, const struct mcp_match_list *list, int *once);

#endif
