/*
 * mcp_alloc_count.c - libmcp-alloc-count.so, an LD_PRELOAD counter of malloc, calloc,
 * realloc and free, switched on and off by the conformance suite around the data-path
 * calls it measures ("no allocation on the isend/irecv/test path").
 */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static int counting;
static long counted;

EXPORT void mcp_alloc_count_enable(int on);
EXPORT long mcp_alloc_count(void);
EXPORT void mcp_alloc_count_reset(void);
EXPORT void *malloc(size_t n);
EXPORT void *calloc(size_t a, size_t b);
EXPORT void *realloc(void *p, size_t n);
EXPORT void free(void *p);

void mcp_alloc_count_enable(int on) { __atomic_store_n(&counting, on, __ATOMIC_SEQ_CST); }
long mcp_alloc_count(void) { return __atomic_load_n(&counted, __ATOMIC_SEQ_CST); }
void mcp_alloc_count_reset(void) { __atomic_store_n(&counted, 0, __ATOMIC_SEQ_CST); }

static void tick(void)
{
  if (__atomic_load_n(&counting, __ATOMIC_RELAXED))
    __atomic_add_fetch(&counted, 1, __ATOMIC_RELAXED);
}

void *malloc(size_t n)
{
  tick();
  return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
  tick();
  return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
  tick();
  return __libc_realloc(p, n);
}

void free(void *p)
{
  if (p != NULL)
    tick();
  __libc_free(p);
}
