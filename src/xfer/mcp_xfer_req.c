/*
 * mcp_xfer_req.c - the fixed pool of requests of one comm.
 *
 * Requests are preallocated with the comm (NCCL allows 32 outstanding per comm, times
 * maxRecvs on the send side) and recycled through an index stack, so the data path
 * never allocates. Only the comm's progress thread touches its pool. Taking and
 * returning one are inline in comm.h (once per message on the data path).
 */
#include <stdlib.h>
#include <string.h>

#include "xfer/comm.h"

int mcp_req_pool_init(struct mcp_comm *c, int n, int kind)
{
  int i;

  c->reqs = calloc((size_t)n, sizeof(*c->reqs));
  if (c->reqs == NULL)
    return -ENOMEM;
  c->nreqs = n;
  for (i = 0; i < n; i++) {
    c->reqs[i].comm = c;
    c->reqs[i].index = (uint16_t)i;
    c->reqs[i].kind = (uint8_t)kind;
    c->free_list[i] = (uint16_t)(n - 1 - i);
  }
  c->free_top = n;
  return 0;
}
