/*
 * mcp_fabric_process.c - the process's discovered fabric, its holders and teardown.
 *
 * NCCL 2.28 calls init once per communicator and expects a fresh context each time;
 * discovery is global and happens once, under one lock, and is rebuilt after the last
 * finalize. Older NCCL (v8-v10 tables) never finalizes and may dlclose the plugin after
 * its last communicator, so nothing here owns a thread or a file descriptor: the last
 * comm (or context) gives the devices back. Lives in fabric so conn can hold it
 * without calling the entry points above it.
 */
#include <pthread.h>

#include "core/param.h"
#include "fabric/fabric_process.h"

static pthread_mutex_t process_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int ready;   /* configuration loaded and fabric discovered */
  int ctxs;    /* live contexts from v11 init */
  int comms;   /* live listen/send/recv comms */
  int had_ctx; /* a v11 init happened: finalize exists, teardown is allowed */
  struct mcp_fabric fab;
} g;

static void teardown_locked(void)
{
  if (!g.ready)
    return;
  mcp_fabric_release(&g.fab);
  mcp_param_free(mcp_param_process());
  g.ready = 0;
  g.had_ctx = 0;
}

int mcp_fabric_process_open(int ctx, int (*setup)(struct mcp_fabric *fab))
{
  int rc = 0;

  pthread_mutex_lock(&process_lock);
  if (!g.ready) {
    rc = setup(&g.fab);
    if (rc == 0)
      g.ready = 1;
  }
  if (rc == 0 && ctx) {
    g.ctxs++;
    g.had_ctx = 1;
  }
  pthread_mutex_unlock(&process_lock);
  return rc;
}

void mcp_fabric_process_close_ctx(void)
{
  pthread_mutex_lock(&process_lock);
  if (--g.ctxs == 0 && g.comms == 0)
    teardown_locked();
  pthread_mutex_unlock(&process_lock);
}

const struct mcp_fabric *mcp_fabric_process(void) { return g.ready ? &g.fab : NULL; }

void mcp_fabric_comm_ref(void)
{
  pthread_mutex_lock(&process_lock);
  g.comms++;
  pthread_mutex_unlock(&process_lock);
}

void mcp_fabric_comm_unref(void)
{
  pthread_mutex_lock(&process_lock);
  /* Comms closed after the last finalize: the next init rebuilds from scratch. The
   * v8-v10 tables have no finalize; their state goes with dlclose. */
  if (--g.comms == 0 && g.ctxs == 0 && g.had_ctx)
    teardown_locked();
  pthread_mutex_unlock(&process_lock);
}

int mcp_fabric_process_unload(void)
{
  int none;

  pthread_mutex_lock(&process_lock);
  none = g.comms == 0;
  if (none)
    teardown_locked();
  pthread_mutex_unlock(&process_lock);
  return none;
}
