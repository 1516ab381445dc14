/*
 * list.h - the one intrusive list mcpnet uses (circular, doubly linked, header-only):
 * every "object on a list" embeds a struct mcp_list and is found back with
 * mcp_list_entry. Removal is O(1) without walking for the predecessor, appending
 * to a FIFO needs no tail walk, and nobody writes the pointer dance by hand again.
 * No allocation; the caller's lock protects a list.
 */
#ifndef MCPNET_LIST_H
#define MCPNET_LIST_H

#include <stddef.h>

struct mcp_list {
  struct mcp_list *next, *prev;
};

/* A head (or a node) that links to itself is empty (unlinked); usable in static
 * initialisers: static struct mcp_list h = MCP_LIST_INIT(h). */
#define MCP_LIST_INIT(name) \
  {                         \
    &(name), &(name)        \
  }

static inline void mcp_list_init(struct mcp_list *h) { h->next = h->prev = h; }
static inline int mcp_list_empty(const struct mcp_list *h) { return h->next == h; }

static inline void mcp_list_insert_(struct mcp_list *n, struct mcp_list *prev, struct mcp_list *next)
{
  n->prev = prev;
  n->next = next;
  prev->next = n;
  next->prev = n;
}

/* At the front (a stack), or at the back (a FIFO). */
static inline void mcp_list_push(struct mcp_list *h, struct mcp_list *n) { mcp_list_insert_(n, h, h->next); }
static inline void mcp_list_append(struct mcp_list *h, struct mcp_list *n)
{
  mcp_list_insert_(n, h->prev, h);
}

/* Unlinks n (from whatever list holds it) and leaves it empty, so a second del is harmless. */
static inline void mcp_list_del(struct mcp_list *n)
{
  n->prev->next = n->next;
  n->next->prev = n->prev;
  mcp_list_init(n);
}

#define mcp_list_entry(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
/* The first object on h, or NULL. */
#define mcp_list_first(h, type, member) (mcp_list_empty(h) ? NULL : mcp_list_entry((h)->next, type, member))
/* Walks h; pos is a struct mcp_list *. The _safe form allows unlinking pos (tmp holds the next). */
#define mcp_list_each(pos, h) for ((pos) = (h)->next; (pos) != (h); (pos) = (pos)->next)
#define mcp_list_each_safe(pos, tmp, h) \
  for ((pos) = (h)->next, (tmp) = (pos)->next; (pos) != (h); (pos) = (tmp), (tmp) = (pos)->next)

#endif
