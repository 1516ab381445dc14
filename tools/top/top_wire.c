/*
 * top_wire.c - a node's view as text for node 0, and back.
 *
 * One line per node, process and comm, fields as key=value separated by tabs:
 *   N  host=...  dead=...
 *   P  pid=... host=... rank=... lrank=... name=... addr=... stopped=... pstate=... check=...
 *   C  kind=... id=... stream=... pstream=... ... act=... waited=... waits=... wtext=... cause=...
 * A comm belongs to the process line before it. Each node classifies its own comms with
 * its own clock, so ages travel as seconds. Text from a status file is printable ASCII,
 * so it holds no tab or newline. The decoder trusts nothing: unknown keys are skipped,
 * numbers are range-checked, text is cut to its field and made printable, and the
 * counts of processes and comms are bounded.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "top.h"

struct out {
  char **buf;
  size_t *len, *cap;
  int failed;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (o->failed)
    return;
  for (;;) {
    size_t room = *o->cap - *o->len;

    va_start(ap, fmt);
    n = vsnprintf(*o->buf + *o->len, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      o->failed = 1;
      return;
    }
    if ((size_t)n < room) {
      *o->len += (size_t)n;
      return;
    }
    size_t cap = *o->cap * 2 + (size_t)n + 1024;
    char *b = realloc(*o->buf, cap);

    if (b == NULL) {
      o->failed = 1;
      return;
    }
    *o->buf = b;
    *o->cap = cap;
  }
}

int top_wire_encode(const struct top_view *v, char **buf, size_t *len, size_t *cap)
{
  struct out o = {buf, len, cap, 0};

  if (*buf == NULL) {
    *cap = 4096;
    *len = 0;
    *buf = malloc(*cap);
    if (*buf == NULL)
      return -ENOMEM;
  }
  put(&o, "N\thost=%s\tdead=%d\n", v->host, v->ndead);
  for (int i = 0; i < v->nproc; i++) {
    const struct top_proc *p = &v->proc[i];

    put(&o, "P\tpid=%u\thost=%s\trank=%d\tlrank=%d\tname=%s\taddr=%s\tstopped=%d\tpstate=%c\tcheck=%.1f\n",
        p->pid, p->host, p->rank, p->local_rank, p->name, p->addr, p->stopped,
        p->pstate >= 0x21 ? p->pstate : '?', p->check_age_s);
    for (int k = 0; k < p->ncomm; k++) {
      const struct top_comm *c = &p->comm[k];

      put(
        &o,
        "C\tkind=%d\tid=%u\tstream=%u\tpstream=%u\tdev=%d\tport=%d\tibdev=%s\tphost=%s\tppid=%u\tplrank=%d\t"
        "paddr=%s\tstate=%d\tstate_s=%.1f\tposted=%llu\tdone=%llu\tbytes=%llu\tmoved=%d\tstall=%.1f\t"
        "nonedone=%.1f\twait=%d\twseq=%u\twcount=%d\trec=%u\tact=%d\twaited=%.1f\twaits=%d\twtext=%s\t"
        "cause=%s\n",
        c->kind, c->id, c->stream, c->peer_stream, c->dev, c->port, c->ibdev, c->peer_host, c->peer_pid,
        c->peer_local_rank, c->peer_addr, c->state, c->state_s, (unsigned long long)c->posted,
        (unsigned long long)c->done, (unsigned long long)c->bytes, c->moved, c->stall_s, c->idle_done_s,
        c->wait, c->wait_seq, c->wait_count, c->recoveries, c->activity, c->waited_s, c->waits, c->wait_text,
        c->cause);
    }
  }
  return o.failed ? -ENOMEM : 0;
}

/* ---- Decoding ------------------------------------------------------------------------- */

/* The value of key in a line's fields (tab-separated), as a span; NULL when absent. */
static const char *field(const char *line, size_t llen, const char *key, size_t *vlen)
{
  size_t klen = strlen(key);
  const char *p = line, *end = line + llen;

  while (p < end) {
    const char *tab = memchr(p, '\t', (size_t)(end - p));
    const char *fend = tab != NULL ? tab : end;

    if ((size_t)(fend - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == '=') {
      *vlen = (size_t)(fend - p - (ptrdiff_t)klen - 1);
      return p + klen + 1;
    }
    p = fend + 1;
  }
  return NULL;
}

static void text_of(const char *line, size_t llen, const char *key, char *dst, size_t dlen)
{
  size_t vlen = 0;
  const char *v = field(line, llen, key, &vlen);

  dst[0] = '\0';
  if (v == NULL || dlen == 0)
    return;
  if (vlen >= dlen)
    vlen = dlen - 1;
  memcpy(dst, v, vlen);
  dst[vlen] = '\0';
  mcp_text_make_printable(dst);
}

/* A number in [lo, hi]; def when absent or out of range. */
static double num_of(const char *line, size_t llen, const char *key, double lo, double hi, double def)
{
  char tmp[32], *end;
  size_t vlen = 0;
  const char *v = field(line, llen, key, &vlen);
  double d;

  if (v == NULL || vlen == 0 || vlen >= sizeof(tmp))
    return def;
  memcpy(tmp, v, vlen);
  tmp[vlen] = '\0';
  d = strtod(tmp, &end);
  return *end == '\0' && d >= lo && d <= hi ? d : def;
}

static unsigned long long u64_of(const char *line, size_t llen, const char *key)
{
  char tmp[32], *end;
  size_t vlen = 0;
  const char *v = field(line, llen, key, &vlen);
  unsigned long long n;

  if (v == NULL || vlen == 0 || vlen >= sizeof(tmp) || v[0] == '-')
    return 0;
  memcpy(tmp, v, vlen);
  tmp[vlen] = '\0';
  n = strtoull(tmp, &end, 10);
  return *end == '\0' ? n : 0;
}

#define AGE_MAX 1e9 /* seconds: 30 years */

static void comm_decode(const char *l, size_t n, struct top_comm *c)
{
  memset(c, 0, sizeof(*c));
  c->kind = num_of(l, n, "kind", 1, 2, 1) == 2 ? 2 : 1;
  c->id = (unsigned)num_of(l, n, "id", 0, 65535, 0);
  c->stream = (uint32_t)num_of(l, n, "stream", 0, 4294967295.0, 0);
  c->peer_stream = (uint32_t)num_of(l, n, "pstream", 0, 4294967295.0, 0);
  c->dev = (int)num_of(l, n, "dev", -1, 1 << 20, -1);
  c->port = (int)num_of(l, n, "port", 0, 255, 0);
  text_of(l, n, "ibdev", c->ibdev, sizeof(c->ibdev));
  text_of(l, n, "phost", c->peer_host, sizeof(c->peer_host));
  c->peer_pid = (uint32_t)num_of(l, n, "ppid", 0, 4294967295.0, 0);
  c->peer_local_rank = (int)num_of(l, n, "plrank", -1, 1 << 20, -1);
  text_of(l, n, "paddr", c->peer_addr, sizeof(c->peer_addr));
  c->state = (int)num_of(l, n, "state", MCP_STATUS_CONNECTING, MCP_STATUS_FAILED, MCP_STATUS_READY);
  c->state_s = num_of(l, n, "state_s", 0, AGE_MAX, 0);
  c->posted = u64_of(l, n, "posted");
  c->done = u64_of(l, n, "done");
  c->bytes = u64_of(l, n, "bytes");
  c->moved = num_of(l, n, "moved", 0, 1, 0) != 0;
  c->stall_s = num_of(l, n, "stall", -1, AGE_MAX, -1);
  c->idle_done_s = num_of(l, n, "nonedone", -1, AGE_MAX, -1);
  c->check_age_s = -1;
  c->wait = (int)num_of(l, n, "wait", 0, MCP_WAIT_COUNT - 1, 0);
  c->wait_seq = (uint32_t)num_of(l, n, "wseq", 0, 4294967295.0, 0);
  c->wait_count = (int)num_of(l, n, "wcount", 0, 1 << 20, 0);
  c->recoveries = (unsigned)num_of(l, n, "rec", 0, 4294967295.0, 0);
  c->activity = (int)num_of(l, n, "act", TOP_IDLE, TOP_FAILED, TOP_IDLE);
  c->waited_s = num_of(l, n, "waited", -1, AGE_MAX, 0);
  c->waits = num_of(l, n, "waits", 0, 1, 0) != 0;
  text_of(l, n, "wtext", c->wait_text, sizeof(c->wait_text));
  text_of(l, n, "cause", c->cause, sizeof(c->cause));
}

int top_wire_decode(const char *text, size_t len, struct top_view *v, char *err, size_t errlen)
{
  const char *p = text, *end = text + len;
  int pcap = 0, ncomms = 0;
  struct top_proc *cur = NULL;
  int ccap = 0;

  memset(v, 0, sizeof(*v));
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = (size_t)((nl != NULL ? nl : end) - p);
    const char *l = p;

    p += n + 1;
    if (n < 2 || l[1] != '\t')
      continue;
    if (l[0] == 'N') {
      text_of(l, n, "host", v->host, sizeof(v->host));
      v->ndead = (int)num_of(l, n, "dead", 0, 1 << 20, 0);
    } else if (l[0] == 'P') {
      if (v->nproc == TOP_WIRE_MAX_PROCS) {
        snprintf(err, errlen, "more than %d processes", TOP_WIRE_MAX_PROCS);
        return -EBADMSG;
      }
      if (v->nproc == pcap) {
        int cap = pcap ? 2 * pcap : 8;
        struct top_proc *np = realloc(v->proc, (size_t)cap * sizeof(*np));

        if (np == NULL)
          goto nomem;
        v->proc = np;
        pcap = cap;
      }
      cur = &v->proc[v->nproc++];
      memset(cur, 0, sizeof(*cur));
      ccap = 0;
      cur->pid = (uint32_t)num_of(l, n, "pid", 0, 4294967295.0, 0);
      text_of(l, n, "host", cur->host, sizeof(cur->host));
      cur->rank = (int)num_of(l, n, "rank", -1, 0x7fffffff, -1);
      cur->local_rank = (int)num_of(l, n, "lrank", -1, 1 << 20, -1);
      text_of(l, n, "name", cur->name, sizeof(cur->name));
      text_of(l, n, "addr", cur->addr, sizeof(cur->addr));
      cur->stopped = (int)num_of(l, n, "stopped", -1, 1, -1);
      {
        char st[4];

        text_of(l, n, "pstate", st, sizeof(st));
        cur->pstate = st[0] != '\0' ? st[0] : '?';
      }
      cur->check_age_s = num_of(l, n, "check", -1, AGE_MAX, -1);
    } else if (l[0] == 'C') {
      if (cur == NULL)
        continue; /* a comm with no process line before it */
      if (ncomms == TOP_WIRE_MAX_COMMS) {
        snprintf(err, errlen, "more than %d comms", TOP_WIRE_MAX_COMMS);
        return -EBADMSG;
      }
      if (cur->ncomm == ccap) {
        int cap = ccap ? 2 * ccap : 8;
        struct top_comm *nc = realloc(cur->comm, (size_t)cap * sizeof(*nc));

        if (nc == NULL)
          goto nomem;
        cur->comm = nc;
        ccap = cap;
      }
      comm_decode(l, n, &cur->comm[cur->ncomm++]);
      ncomms++;
    }
  }
  return 0;
nomem:
  snprintf(err, errlen, "out of memory");
  return -ENOMEM;
}
