/*
 * mcp_conn_status.c - what conn publishes of a comm for mcpnet-top (status.h): the setup
 * state and who the peer is, the connected endpoint, recoveries and the failure.
 *
 * conn knows these when they change (connect and accept steps, a recovery's start and
 * end, mcp_comm_fail), so it writes them there, into the comm's slot, never on the data
 * path. The peer is named as the out-of-band channel knows it (mcp_oob_stream_peer_ident:
 * its host, pid and local rank once it proved itself, else its address), with both
 * stream ids: the pair (host, pid, stream) is how mcpnet-top --fleet finds the comm at
 * the other end of a connection.
 */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/param.h"
#include "core/sock.h"
#include "conn/link.h"

void mcp_link_status_open(struct mcp_link *c, const struct mcp_config *cfg)
{
  char addr[MCP_SOCKADDR_STRLEN];
  union mcp_sockaddr local;
  uint64_t nonce;

  mcp_oob_local(&local, &nonce);
  mcp_sockaddr_format(&local, addr, sizeof(addr));
  mcp_status_acquire(cfg, addr);
  c->status_ref = 1;
  c->st = mcp_status_open(c->kind, c->id);
}

void mcp_link_status_close(struct mcp_link *c)
{
  if (!c->status_ref)
    return;
  mcp_status_close(c->st);
  c->st = NULL;
  c->status_ref = 0;
  mcp_status_release();
}

/* The comm's own end and its peer as far as they are known; under the slot's gen. */
static void fill_ends(struct mcp_link *c, struct mcp_status_comm *s)
{
  const struct mcp_net_dev *d = c->devs[0].dc != NULL ? c->devs[0].dc->info : NULL;
  struct mcp_oob_ident id;
  size_t used;

  s->dev = c->dev;
  s->ndevs = c->ndevs;
  s->nqps = c->nqps;
  if (d != NULL) {
    s->port = d->port;
    mcp_status_text(s->ibdev, sizeof(s->ibdev), d->ibdev);
    for (int k = 1; k < c->ndevs && c->devs[k].dc != NULL; k++) {
      used = strlen(s->ibdev);
      snprintf(s->ibdev + used, sizeof(s->ibdev) - used, "+%s", c->devs[k].dc->info->ibdev);
    }
    mcp_status_text(s->gid, sizeof(s->gid), d->gid.text);
  }
  if (c->stream == NULL)
    return;
  s->stream_id = mcp_oob_stream_id(c->stream);
  s->peer_stream = mcp_oob_stream_remote_id(c->stream);
  mcp_oob_stream_peer_ident(c->stream, &id);
  mcp_status_text(s->peer_host, sizeof(s->peer_host), id.host);
  mcp_status_text(s->peer_addr, sizeof(s->peer_addr), id.addr);
  s->peer_pid = id.pid;
  s->peer_local_rank = id.local_rank;
}

static void set_state(struct mcp_link *c, int state, const char *cause)
{
  struct mcp_status_comm *s = c->st;

  if (s == NULL)
    return;
  mcp_status_begin(s);
  if (s->state != (uint32_t)state)
    s->state_ms = mcp_clock_ms();
  s->state = (uint32_t)state;
  if (cause != NULL)
    mcp_status_text(s->cause, sizeof(s->cause), cause);
  fill_ends(c, s);
  mcp_status_end(s);
}

void mcp_link_status_setup(struct mcp_link *c, int state)
{
  /* Called on every connect or accept step: writes only when something changed. */
  if (c->st == NULL || (c->st->state == (uint32_t)state && c->st->peer_pid != 0 && c->st->peer_stream != 0))
    return;
  set_state(c, state, NULL);
}

void mcp_link_status_ready(struct mcp_link *c) { set_state(c, MCP_STATUS_READY, NULL); }

void mcp_link_status_recovering(struct mcp_link *c) { set_state(c, MCP_STATUS_RECOVERING, c->rec.cause); }

void mcp_link_status_recovered(struct mcp_link *c)
{
  if (c->st == NULL)
    return;
  set_state(c, MCP_STATUS_READY, NULL); /* the cause stays: the last recovery's */
  mcp_status_begin(c->st);
  c->st->recoveries = (uint32_t)c->rec.count;
  mcp_status_end(c->st);
}

void mcp_link_status_failed(struct mcp_link *c) { set_state(c, MCP_STATUS_FAILED, c->errmsg); }
