/*
 * mcp_xfer_status.c - what xfer publishes of a waiting comm for mcpnet-top (status.h).
 *
 * The data path only counts (posted, done, bytes: plain stores into the comm's slot).
 * Everything that needs the clock or a diagnosis is written here, from the 100 ms
 * liveness check, which runs only while a caller waits on the comm: the process's
 * heartbeat, the stall the watchdog measures (no post and no completion since), since
 * when no request completed, and, once the comm has made no progress for a second, what
 * it waits for in the watchdog's own words (mcp_xfer_wait_describe), at most once a
 * second. A comm that never waits costs none of it.
 */
#include "core/clock.h"
#include "xfer/comm.h"

#define DESCRIBE_AFTER_MS 1000u /* a stall shorter than this is only measured */
#define GAP_MS 2000u            /* checks further apart than this: nobody waited in between */

void mcp_xfer_status_check(struct mcp_comm *c, uint64_t now_ns)
{
  struct mcp_status_comm *s = c->link.st;
  uint64_t now_ms = now_ns / MCP_NS_PER_MS, stall_ms, done;
  struct mcp_xfer_wait w;
  char text[MCP_STATUS_TEXT_MAX];

  if (s == NULL)
    return;
  mcp_status_heartbeat(now_ms);
  /* The watchdog ran just before: its clock restarted at now when the comm moved. */
  stall_ms = c->wd_since_ns == now_ns ? 0 : c->wd_since_ns / MCP_NS_PER_MS;
  done = s->count.done;
  mcp_status_begin(s);
  /* Completions counted since the last check, or checks that were not continuous (the
   * comm was idle, nobody waited): the clock of "none completed" starts again. */
  if (done != s->done_mark || s->done_ms == 0 || now_ms - s->check_ms > GAP_MS) {
    s->done_mark = done;
    s->done_ms = now_ms;
  }
  s->check_ms = now_ms;
  s->stall_ms = stall_ms;
  if (stall_ms == 0 || now_ms - stall_ms < DESCRIBE_AFTER_MS) {
    s->wait = MCP_WAIT_NONE;
    s->wait_text[0] = '\0';
    c->st_wait_ms = 0;
  } else if (c->st_wait_ms == 0 || now_ms - c->st_wait_ms >= DESCRIBE_AFTER_MS) {
    mcp_xfer_wait_describe(c, &w, text, sizeof(text));
    s->wait = w.kind;
    s->wait_seq = w.seq;
    s->wait_count = w.count;
    mcp_status_text(s->wait_text, sizeof(s->wait_text), text);
    c->st_wait_ms = now_ms;
  }
  mcp_status_end(s);
}
