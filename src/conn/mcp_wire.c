/*
 * mcp_wire.c - encoding and decoding of the NCCL handle and the out-of-band frames.
 *
 * Bytes from the network are hostile until proven otherwise: a stray client, a
 * truncated handshake or an mcpnet of another version must produce a clear reason, not
 * a crash or a misread field. So all reads go through a bounds-checked cursor that
 * records the first failure (naming the field and offset) and turns later reads into
 * no-ops, and all writes go through a cursor that detects overflow once at the end. The
 * same range checks run before encoding and after decoding, so whatever decodes also
 * re-encodes to the same bytes (the fuzz target relies on that).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/text.h"
#include "conn/wire.h"

/* Handle layout: magic 0, version 4, family 6, addr 8, port 24, reserved 26, dev 28,
 * listen key[0] (versions 2-3: the token) 32, nonce 40, (version 3) member count 48,
 * (version 4) listen id 49, listen key[1] 53; the rest of [0, 96) zero; [96, 128) the
 * caller's. */
#define WIRE_HANDLE_USED_V2 48
#define WIRE_HANDLE_USED_V3 49
#define WIRE_HANDLE_USED 61
_Static_assert(WIRE_HANDLE_USED <= MCP_WIRE_HANDLE_TAIL_OFFSET,
               "the handle encoding must leave the tail to the caller");
_Static_assert(MCP_WIRE_HANDLE_TAIL_OFFSET + MCP_WIRE_HANDLE_TAIL_SIZE == NCCL_NET_HANDLE_MAXSIZE,
               "the handle is NCCL's 128 bytes");

/* Largest payloads this version writes, to keep MCP_WIRE_MSG_MAX honest. */
#define WIRE_STR(max) (2 + (max))
#define WIRE_FP_SIZE 22
#define WIRE_MEMBER_SIZE (WIRE_STR(MCP_WIRE_DEVNAME_MAX) + 3 + 16 + 2 + 4)
#define WIRE_EP_MAX                                                                                     \
  (4 + WIRE_STR(MCP_WIRE_DEVNAME_MAX) + 4 + 16 + 2 + 1 + 8 * MCP_WIRE_MAX_QPS + 16 + WIRE_FP_SIZE + 1 + \
   (MCP_WIRE_MAX_MEMBERS - 1) * WIRE_MEMBER_SIZE)
#define WIRE_HELLO_MAX \
  (8 + 4 + WIRE_STR(MCP_WIRE_HOSTNAME_MAX) + WIRE_STR(MCP_WIRE_VERSTR_MAX) + 4 + 8 + 4 + 8)
#define WIRE_REJECT_MAX (4 + WIRE_STR(MCP_WIRE_REASON_MAX))
#define WIRE_RECOVER_MAX (12 + 4 * MCP_WIRE_RECOVER_SLOTS + WIRE_EP_MAX + 2)
_Static_assert(MCP_WIRE_HDR_SIZE + WIRE_RECOVER_MAX <= MCP_WIRE_MSG_MAX, "RECOVER fits");
_Static_assert(MCP_WIRE_HDR_SIZE + 12 + WIRE_EP_MAX <= MCP_WIRE_MSG_MAX, "CONN_REQ fits");
_Static_assert(MCP_WIRE_HDR_SIZE + WIRE_HELLO_MAX <= MCP_WIRE_MSG_MAX, "HELLO fits");
_Static_assert(MCP_WIRE_HDR_SIZE + WIRE_REJECT_MAX <= MCP_WIRE_MSG_MAX, "REJECT fits");
_Static_assert(MCP_WIRE_MSG_MAX <= MCP_WIRE_MAX_FRAME, "messages fit a frame");

static const char *const wire_type_names[] = {
  [MCP_WIRE_HELLO] = "HELLO",
  [MCP_WIRE_CONN_REQ] = "CONN_REQ",
  [MCP_WIRE_CONN_ACK] = "CONN_ACK",
  [MCP_WIRE_CONN_READY] = "CONN_READY",
  [MCP_WIRE_CONN_REJECT] = "CONN_REJECT",
  [MCP_WIRE_CLOSE] = "CLOSE",
  [MCP_WIRE_PING] = "PING",
  [MCP_WIRE_PONG] = "PONG",
  [MCP_WIRE_RECOVER] = "RECOVER",
};

/* The frame types each version defines: version 1 ends at PONG. */
static unsigned wire_type_max(unsigned version) { return version >= 2 ? MCP_WIRE_TYPE_MAX : MCP_WIRE_PONG; }

/* The members an endpoint (or a handle) of each version may name: none before fusion,
 * 4 in version 3, 8 from version 4 on. */
static unsigned wire_members_max(unsigned version)
{
  return version >= MCP_WIRE_VERSION_AUTH ? MCP_WIRE_MAX_MEMBERS
    : version >= MCP_WIRE_VERSION_FUSION  ? MCP_WIRE_MAX_MEMBERS_V3
                                          : 1;
}

/* The oldest version that carries an endpoint of n members. */
static unsigned wire_members_version(unsigned n)
{
  return n > MCP_WIRE_MAX_MEMBERS_V3 ? MCP_WIRE_VERSION_AUTH : n > 1 ? MCP_WIRE_VERSION_FUSION : 1;
}

const char *mcp_wire_type_name(unsigned type)
{
  if (type == 0 || type > MCP_WIRE_TYPE_MAX)
    return "unknown";
  return wire_type_names[type];
}

/* ---- Cursors ------------------------------------------------------------------------ */

struct wire_rd {
  const uint8_t *p;
  size_t len, off;
  const char *what; /* "HELLO payload", "handle": for messages */
  char *err;
  size_t errlen;
  int failed;
};

static int wire_rd_need(struct wire_rd *r, size_t n, const char *field)
{
  if (r->failed)
    return -EBADMSG;
  if (r->len - r->off < n) {
    mcp_text_errf(r->err, r->errlen, "truncated %s: %s needs %zu byte%s at offset %zu, %zu left", r->what,
                  field, n, n == 1 ? "" : "s", r->off, r->len - r->off);
    r->failed = 1;
    return -EBADMSG;
  }
  return 0;
}

/* Marks a decoded value out of range; the first failure's message wins. */
static void wire_rd_bad(struct wire_rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void wire_rd_bad(struct wire_rd *r, const char *fmt, ...)
{
  char why[160];
  va_list ap;

  if (r->failed)
    return;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  mcp_text_errf(r->err, r->errlen, "malformed %s: %s", r->what, why);
  r->failed = 1;
}

static uint64_t wire_rd_le(struct wire_rd *r, size_t n, const char *field)
{
  uint64_t v = 0;

  if (wire_rd_need(r, n, field) != 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    v |= (uint64_t)r->p[r->off + i] << (8 * i);
  r->off += n;
  return v;
}

static uint8_t wire_rd_u8(struct wire_rd *r, const char *field) { return (uint8_t)wire_rd_le(r, 1, field); }

static uint16_t wire_rd_u16(struct wire_rd *r, const char *field)
{
  return (uint16_t)wire_rd_le(r, 2, field);
}

static uint32_t wire_rd_u32(struct wire_rd *r, const char *field)
{
  return (uint32_t)wire_rd_le(r, 4, field);
}

static uint64_t wire_rd_u64(struct wire_rd *r, const char *field) { return wire_rd_le(r, 8, field); }

static void wire_rd_bytes(struct wire_rd *r, void *dst, size_t n, const char *field)
{
  if (wire_rd_need(r, n, field) != 0)
    return;
  memcpy(dst, r->p + r->off, n);
  r->off += n;
}

/* u16 length + bytes into dst[max + 1], NUL-terminated. */
static void wire_rd_str(struct wire_rd *r, char *dst, size_t max, const char *field)
{
  uint16_t n = wire_rd_u16(r, field);

  dst[0] = '\0';
  if (r->failed)
    return;
  if (n > max) {
    wire_rd_bad(r, "%s of %u bytes is longer than the limit of %zu", field, n, max);
    return;
  }
  if (wire_rd_need(r, n, field) != 0)
    return;
  if (memchr(r->p + r->off, '\0', n) != NULL) {
    wire_rd_bad(r, "%s contains a NUL byte", field);
    return;
  }
  if (!mcp_text_printable_span((const char *)r->p + r->off, n)) {
    wire_rd_bad(r, "%s contains a byte that is not printable ASCII", field);
    return;
  }
  memcpy(dst, r->p + r->off, n);
  dst[n] = '\0';
  r->off += n;
}

static int wire_rd_finish(struct wire_rd *r)
{
  if (!r->failed && r->off != r->len)
    wire_rd_bad(r, "%zu unexpected trailing byte%s", r->len - r->off, r->len - r->off == 1 ? "" : "s");
  return r->failed ? -EBADMSG : 0;
}

struct wire_wr {
  uint8_t *p;
  size_t cap, off;
  int overflow;
};

static void wire_wr_le(struct wire_wr *w, uint64_t v, size_t n)
{
  if (w->overflow || w->cap - w->off < n) {
    w->overflow = 1;
    return;
  }
  for (size_t i = 0; i < n; i++)
    w->p[w->off + i] = (uint8_t)(v >> (8 * i));
  w->off += n;
}

static void wire_wr_u8(struct wire_wr *w, uint8_t v) { wire_wr_le(w, v, 1); }
static void wire_wr_u16(struct wire_wr *w, uint16_t v) { wire_wr_le(w, v, 2); }
static void wire_wr_u32(struct wire_wr *w, uint32_t v) { wire_wr_le(w, v, 4); }
static void wire_wr_u64(struct wire_wr *w, uint64_t v) { wire_wr_le(w, v, 8); }

static void wire_wr_bytes(struct wire_wr *w, const void *src, size_t n)
{
  if (w->overflow || w->cap - w->off < n) {
    w->overflow = 1;
    return;
  }
  memcpy(w->p + w->off, src, n);
  w->off += n;
}

/* The caller has checked the length against the field's limit. */
static void wire_wr_str(struct wire_wr *w, const char *s, size_t max)
{
  size_t n = strnlen(s, max);

  wire_wr_u16(w, (uint16_t)n);
  wire_wr_bytes(w, s, n);
}

/* A string field of a struct: NUL-terminated within its array of max + 1, and printable
 * ASCII (what a decoder accepts). */
/* Every member of an endpoint of ndevs (0 reads as 1; more than 8 is refused elsewhere),
 * as a mask: bit k is member k. */
static uint8_t wire_members_all(unsigned ndevs)
{
  return ndevs >= 8 ? 0xff : (uint8_t)((1u << (ndevs > 1 ? ndevs : 1)) - 1u);
}

/* A member mask of a RECOVER: some member, and only members the endpoint has. */
static int wire_members_ok(uint8_t mask, unsigned ndevs)
{
  return mask != 0 && (mask & ~wire_members_all(ndevs)) == 0;
}

static int wire_str_ok(const char *s, size_t max)
{
  size_t n = strnlen(s, max + 1);

  return n <= max && mcp_text_printable_span(s, n);
}

/* ---- The handle --------------------------------------------------------------------- */

static int wire_handle_check(const struct mcp_wire_handle *h, char *err, size_t errlen)
{
  static const uint8_t zero[12];

  if (h->family != 4 && h->family != 6) {
    mcp_text_errf(err, errlen, "handle address family %u is neither 4 nor 6", h->family);
    return -EINVAL;
  }
  if (h->family == 4 && memcmp(h->addr + 4, zero, sizeof(zero)) != 0) {
    mcp_text_errf(err, errlen, "handle IPv4 address has nonzero bytes after the first 4");
    return -EINVAL;
  }
  if (h->port == 0) {
    mcp_text_errf(err, errlen, "handle port is 0");
    return -EINVAL;
  }
  if (h->dev < 0) {
    mcp_text_errf(err, errlen, "handle device index %d is negative", (int)h->dev);
    return -EINVAL;
  }
  if (h->ndevs > MCP_WIRE_MAX_MEMBERS) {
    mcp_text_errf(err, errlen, "handle member count %u is not 1..%d", h->ndevs, MCP_WIRE_MAX_MEMBERS);
    return -EINVAL;
  }
  if ((h->version == 0 || h->version >= MCP_WIRE_VERSION_AUTH) && h->listen_id == 0) {
    mcp_text_errf(err, errlen, "handle listen id is 0");
    return -EINVAL;
  }
  return 0;
}

int mcp_wire_handle_encode(const struct mcp_wire_handle *h, uint8_t out[MCP_WIRE_HANDLE_SIZE], char *err,
                           size_t errlen)
{
  struct wire_wr w = {.p = out, .cap = MCP_WIRE_HANDLE_TAIL_OFFSET};
  unsigned ndevs = h->ndevs != 0 ? h->ndevs : 1, version;

  if (wire_handle_check(h, err, errlen) != 0)
    return -EINVAL;
  version = h->version != 0 ? h->version : MCP_WIRE_VERSION;
  if (version > MCP_WIRE_VERSION || ndevs > wire_members_max(version)) {
    mcp_text_errf(err, errlen, "a handle of %u member device(s) cannot be written as version %u", ndevs,
                  version);
    return -EINVAL;
  }
  memset(out, 0, MCP_WIRE_HANDLE_SIZE);
  wire_wr_u32(&w, MCP_WIRE_MAGIC);
  wire_wr_u16(&w, version);
  wire_wr_u16(&w, h->family);
  wire_wr_bytes(&w, h->addr, sizeof(h->addr));
  wire_wr_u16(&w, h->port);
  wire_wr_u16(&w, 0);
  wire_wr_u32(&w, (uint32_t)h->dev);
  wire_wr_u64(&w, h->listen_key[0]);
  wire_wr_u64(&w, h->nonce);
  if (version >= MCP_WIRE_VERSION_FUSION)
    wire_wr_u8(&w, (uint8_t)ndevs);
  if (version >= MCP_WIRE_VERSION_AUTH) {
    wire_wr_u32(&w, h->listen_id);
    wire_wr_u64(&w, h->listen_key[1]);
  }
  {
    struct wire_wr cap = {.p = out, .cap = MCP_WIRE_HANDLE_SIZE, .off = MCP_WIRE_HANDLE_CAP_OFFSET};

    wire_wr_u32(&cap, MCP_WIRE_HANDLE_CAP_MAGIC);
    wire_wr_u8(&cap, MCP_WIRE_VERSION);
  }
  return w.overflow ||
      w.off !=
        (version >= MCP_WIRE_VERSION_AUTH       ? WIRE_HANDLE_USED
           : version >= MCP_WIRE_VERSION_FUSION ? WIRE_HANDLE_USED_V3
                                                : WIRE_HANDLE_USED_V2)
    ? -ENOBUFS
    : 0;
}

/* Magic and version come first and get their own messages: a wrong magic means the
 * handle is not ours at all (another plugin's, or garbage), a newer version means the
 * ranks run different mcpnet builds. */
static int wire_check_magic_version(uint32_t magic, uint16_t version, const char *what, char *err,
                                    size_t errlen)
{
  if (magic != MCP_WIRE_MAGIC) {
    mcp_text_errf(err, errlen, "not an mcpnet %s (magic 0x%08x, expected 0x%08x)", what, magic,
                  MCP_WIRE_MAGIC);
    return -EBADMSG;
  }
  if (version > MCP_WIRE_VERSION) {
    mcp_text_errf(err, errlen,
                  "mcpnet %s version %u is newer than this build's version %u: run the same "
                  "mcpnet on every host",
                  what, version, MCP_WIRE_VERSION);
    return -EPROTONOSUPPORT;
  }
  if (version == 0) {
    mcp_text_errf(err, errlen, "mcpnet %s version 0 is invalid (this build speaks %u)", what,
                  MCP_WIRE_VERSION);
    return -EBADMSG;
  }
  return 0;
}

int mcp_wire_handle_decode(const uint8_t in[MCP_WIRE_HANDLE_SIZE], struct mcp_wire_handle *h, char *err,
                           size_t errlen)
{
  struct wire_rd r = {
    .p = in, .len = MCP_WIRE_HANDLE_TAIL_OFFSET, .what = "handle", .err = err, .errlen = errlen};
  uint32_t magic;
  uint16_t version;
  int rc;

  memset(h, 0, sizeof(*h));
  magic = wire_rd_u32(&r, "magic");
  version = wire_rd_u16(&r, "version");
  rc = wire_check_magic_version(magic, version, "handle", err, errlen);
  if (rc != 0)
    return rc;
  h->version = version;
  h->family = wire_rd_u16(&r, "family");
  wire_rd_bytes(&r, h->addr, sizeof(h->addr), "address");
  h->port = wire_rd_u16(&r, "port");
  if (wire_rd_u16(&r, "reserved") != 0)
    wire_rd_bad(&r, "reserved bytes at offset 26 are not zero");
  h->dev = (int32_t)wire_rd_u32(&r, "device index");
  h->listen_key[0] = wire_rd_u64(&r, "listen key");
  h->nonce = wire_rd_u64(&r, "nonce");
  h->ndevs = 1;
  if (version >= MCP_WIRE_VERSION_FUSION) {
    h->ndevs = wire_rd_u8(&r, "member count");
    if (!r.failed && (h->ndevs < 1 || h->ndevs > wire_members_max(version)))
      wire_rd_bad(&r, "member count %u is not 1..%u", h->ndevs, wire_members_max(version));
  }
  if (version >= MCP_WIRE_VERSION_AUTH) {
    h->listen_id = wire_rd_u32(&r, "listen id");
    h->listen_key[1] = wire_rd_u64(&r, "listen key");
  }
  for (size_t i = r.off; !r.failed && i < MCP_WIRE_HANDLE_TAIL_OFFSET; i++)
    if (in[i] != 0)
      wire_rd_bad(&r, "unused byte %zu is not zero", i);
  if (r.failed)
    return -EBADMSG;
  if (wire_handle_check(h, err, errlen) != 0)
    return -EBADMSG;
  /* The capability in the tail (anything else there is the caller's connect state). */
  h->max_version = version;
  {
    struct wire_rd cap = {.p = in, .len = MCP_WIRE_HANDLE_SIZE, .off = MCP_WIRE_HANDLE_CAP_OFFSET};
    uint8_t v;

    if (wire_rd_u32(&cap, "capability") == MCP_WIRE_HANDLE_CAP_MAGIC &&
        (v = wire_rd_u8(&cap, "version")) > version)
      h->max_version = v;
  }
  return 0;
}

int mcp_wire_handle_set_sockaddr(struct mcp_wire_handle *h, const union mcp_sockaddr *a)
{
  memset(h->addr, 0, sizeof(h->addr));
  if (a->sa.sa_family == AF_INET) {
    h->family = 4;
    memcpy(h->addr, &a->sin.sin_addr, 4);
  } else if (a->sa.sa_family == AF_INET6) {
    h->family = 6;
    memcpy(h->addr, &a->sin6.sin6_addr, 16);
  } else {
    return -EAFNOSUPPORT;
  }
  h->port = mcp_sockaddr_port(a);
  return 0;
}

void mcp_wire_handle_get_sockaddr(const struct mcp_wire_handle *h, union mcp_sockaddr *a)
{
  memset(a, 0, sizeof(*a));
  if (h->family == 4) {
    a->sin.sin_family = AF_INET;
    memcpy(&a->sin.sin_addr, h->addr, 4);
  } else if (h->family == 6) {
    a->sin6.sin6_family = AF_INET6;
    memcpy(&a->sin6.sin6_addr, h->addr, 16);
  }
  mcp_sockaddr_set_port(a, h->port);
}

int mcp_wire_handle_equal(const struct mcp_wire_handle *a, const struct mcp_wire_handle *b)
{
  return a->family == b->family && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0 && a->port == b->port &&
    a->dev == b->dev && a->listen_key[0] == b->listen_key[0] && a->listen_key[1] == b->listen_key[1] &&
    a->listen_id == b->listen_id && a->nonce == b->nonce &&
    (a->ndevs ? a->ndevs : 1) == (b->ndevs ? b->ndevs : 1);
}

/* ---- Header ------------------------------------------------------------------------- */

int mcp_wire_header_decode(const uint8_t *buf, size_t len, struct mcp_wire_header *hdr, char *err,
                           size_t errlen)
{
  struct wire_rd r = {.p = buf, .len = len, .what = "frame header", .err = err, .errlen = errlen};
  int rc;

  memset(hdr, 0, sizeof(*hdr));
  hdr->magic = wire_rd_u32(&r, "magic");
  hdr->version = wire_rd_u16(&r, "version");
  hdr->type = wire_rd_u16(&r, "type");
  hdr->length = wire_rd_u32(&r, "length");
  hdr->stream_id = wire_rd_u32(&r, "stream id");
  if (r.failed)
    return -EBADMSG;
  rc = wire_check_magic_version(hdr->magic, hdr->version, "frame", err, errlen);
  if (rc != 0)
    return rc;
  if (hdr->type == 0 || hdr->type > wire_type_max(hdr->version)) {
    mcp_text_errf(err, errlen, "unknown frame type %u (version %u knows 1..%u)", hdr->type, hdr->version,
                  wire_type_max(hdr->version));
    return -EBADMSG;
  }
  if (hdr->length > MCP_WIRE_MAX_PAYLOAD) {
    mcp_text_errf(err, errlen, "%s frame announces %u payload bytes, more than the limit of %u",
                  mcp_wire_type_name(hdr->type), hdr->length, MCP_WIRE_MAX_PAYLOAD);
    return -EBADMSG;
  }
  return 0;
}

int mcp_wire_frame_len(const uint8_t *buf, size_t have, size_t *len, char *err, size_t errlen)
{
  struct mcp_wire_header hdr;

  if (have < MCP_WIRE_HDR_SIZE) {
    /* Reject garbage early when even the first bytes cannot be our magic: a stray
     * client that sends a short line should not sit in the buffer forever. */
    uint8_t magic[4] = {(uint8_t)MCP_WIRE_MAGIC, (uint8_t)(MCP_WIRE_MAGIC >> 8),
                        (uint8_t)(MCP_WIRE_MAGIC >> 16), (uint8_t)(MCP_WIRE_MAGIC >> 24)};

    if (memcmp(buf, magic, have < 4 ? have : 4) != 0) {
      mcp_text_errf(err, errlen, "not an mcpnet frame (the first bytes are not the magic 0x%08x)",
                    MCP_WIRE_MAGIC);
      return -EBADMSG;
    }
    return 0;
  }
  if (mcp_wire_header_decode(buf, have, &hdr, err, errlen) != 0)
    return -EBADMSG;
  *len = MCP_WIRE_HDR_SIZE + (size_t)hdr.length;
  return 1;
}

/* ---- Endpoint ----------------------------------------------------------------------- */

/* Member k of an endpoint as one struct, whichever way it is stored: member 0 is the
 * endpoint's own device fields (version 1 had no members and the struct kept that
 * shape), members 1.. are more[]. With these, one writer, reader, check and comparison
 * serve every member; only where member 0's fields sit in the frame differs (below). */
static struct mcp_wire_member wire_member_get(const struct mcp_wire_endpoint *ep, unsigned k)
{
  struct mcp_wire_member m;

  if (k > 0)
    return ep->more[k - 1];
  memset(&m, 0, sizeof(m));
  memcpy(m.dev_name, ep->dev_name, sizeof(m.dev_name));
  m.port = ep->port;
  m.active_mtu = ep->active_mtu;
  m.gid_index = ep->gid_index;
  memcpy(m.gid, ep->gid, sizeof(m.gid));
  m.lid = ep->lid;
  m.ring_rkey = ep->ring_rkey;
  return m;
}

static void wire_member_set(struct mcp_wire_endpoint *ep, unsigned k, const struct mcp_wire_member *m)
{
  if (k > 0) {
    ep->more[k - 1] = *m;
    return;
  }
  memcpy(ep->dev_name, m->dev_name, sizeof(ep->dev_name));
  ep->port = m->port;
  ep->active_mtu = m->active_mtu;
  ep->gid_index = m->gid_index;
  memcpy(ep->gid, m->gid, sizeof(ep->gid));
  ep->lid = m->lid;
  ep->ring_rkey = m->ring_rkey;
}

/* The member count as the frame carries it: 0 in the struct means one device. */
static unsigned wire_member_count(const struct mcp_wire_endpoint *ep)
{
  return ep->ndevs != 0 ? ep->ndevs : 1;
}

/* Shared by encode (-EINVAL) and decode (-EBADMSG): only values that can describe a
 * real verbs endpoint pass, so a garbled field fails here and not in ibv_modify_qp. */
int mcp_wire_endpoint_check(const struct mcp_wire_endpoint *ep, char *err, size_t errlen)
{
  const struct mcp_wire_fingerprint *fp = &ep->fp;

#define WIRE_RANGE(cond, fmt, val)                      \
  do {                                                  \
    if (!(cond)) {                                      \
      mcp_text_errf(err, errlen, fmt, (unsigned)(val)); \
      return -EINVAL;                                   \
    }                                                   \
  } while (0)
  WIRE_RANGE(ep->link_layer == MCP_WIRE_LINK_IB || ep->link_layer == MCP_WIRE_LINK_ETHERNET,
             "link layer %u is neither 1 (InfiniBand) nor 2 (Ethernet)", ep->link_layer);
  _Static_assert(MCP_WIRE_MAX_QPS == 128, "the messages below name the bound");
  WIRE_RANGE(ep->nqps >= 1 && ep->nqps <= MCP_WIRE_MAX_QPS, "QP count %u is not 1..128", ep->nqps);
  for (unsigned i = 0; i < ep->nqps && i < MCP_WIRE_MAX_QPS; i++) {
    WIRE_RANGE(ep->qps[i].qpn <= 0xffffff, "QP number 0x%x does not fit 24 bits", ep->qps[i].qpn);
    WIRE_RANGE(ep->qps[i].psn <= 0xffffff, "PSN 0x%x does not fit 24 bits", ep->qps[i].psn);
  }
  WIRE_RANGE(fp->gid_type <= MCP_WIRE_GID_ROCE_V2, "GID type %u is not 0..2", fp->gid_type);
  WIRE_RANGE(fp->gid_family == 0 || fp->gid_family == 4 || fp->gid_family == 6,
             "GID family %u is not 0, 4 or 6", fp->gid_family);
  WIRE_RANGE(fp->sl <= 15, "service level %u is not 0..15", fp->sl);
  WIRE_RANGE(fp->timeout <= 31, "QP timeout %u is not 0..31", fp->timeout);
  WIRE_RANGE(fp->retry <= 7, "retry count %u is not 0..7", fp->retry);
  WIRE_RANGE(fp->rnr_retry <= 7, "RNR retry count %u is not 0..7", fp->rnr_retry);
  WIRE_RANGE(fp->qps_per_conn >= 1 && fp->qps_per_conn <= MCP_WIRE_MAX_QPS,
             "QPs per connection %u is not 1..128", fp->qps_per_conn);
  _Static_assert(MCP_WIRE_MAX_MEMBERS == 8, "the message below names the bound");
  WIRE_RANGE(ep->ndevs <= MCP_WIRE_MAX_MEMBERS, "member count %u is not 1..8", ep->ndevs);
#undef WIRE_RANGE
  /* Member 0 first: its name is the endpoint's, the first thing a reader of a bad frame
   * is told about. Members 1.. say which one they are. */
  for (unsigned k = 0; k < wire_member_count(ep); k++) {
    struct mcp_wire_member mb = wire_member_get(ep, k);
    char who[24] = ""; /* "member 4294967295 " fits */

    if (k > 0)
      snprintf(who, sizeof(who), "member %u ", k);
    if (!wire_str_ok(mb.dev_name, MCP_WIRE_DEVNAME_MAX) || mb.dev_name[0] == '\0') {
      mcp_text_errf(err, errlen, "%sdevice name is empty, longer than %d bytes or not printable", who,
                    MCP_WIRE_DEVNAME_MAX);
      return -EINVAL;
    }
    if (mb.port < 1) {
      mcp_text_errf(err, errlen, "%sport %u is not >= 1", k > 0 ? "member " : "", mb.port);
      return -EINVAL;
    }
    if (mb.active_mtu < 1 || mb.active_mtu > 5) {
      mcp_text_errf(err, errlen, "%sactive MTU enum %u is not 1..5", k > 0 ? "member " : "", mb.active_mtu);
      return -EINVAL;
    }
  }
  return 0;
}

/* Member k's fields in frame order. Member 0's are where version 1 put the endpoint's
 * device: the endpoint's link layer sits between its port and MTU, and its ring rkey is
 * written with the ring (wire_wr_endpoint), not here. Members 1.. end with their rkey. */
static void wire_wr_member(struct wire_wr *w, const struct mcp_wire_endpoint *ep, unsigned k)
{
  struct mcp_wire_member mb = wire_member_get(ep, k);

  wire_wr_str(w, mb.dev_name, MCP_WIRE_DEVNAME_MAX);
  wire_wr_u8(w, mb.port);
  if (k == 0)
    wire_wr_u8(w, ep->link_layer);
  wire_wr_u8(w, mb.active_mtu);
  wire_wr_u8(w, mb.gid_index);
  wire_wr_bytes(w, mb.gid, sizeof(mb.gid));
  wire_wr_u16(w, mb.lid);
  if (k > 0)
    wire_wr_u32(w, mb.ring_rkey);
}

/* The reverse of wire_wr_member; field names in messages say "member" for k >= 1. */
static void wire_rd_member(struct wire_rd *r, struct mcp_wire_endpoint *ep, unsigned k)
{
  struct mcp_wire_member mb = wire_member_get(ep, k); /* keeps member 0's ring rkey */
  int m = k > 0;

  wire_rd_str(r, mb.dev_name, MCP_WIRE_DEVNAME_MAX, m ? "member device name" : "device name");
  mb.port = wire_rd_u8(r, m ? "member port" : "port");
  if (!m)
    ep->link_layer = wire_rd_u8(r, "link layer");
  mb.active_mtu = wire_rd_u8(r, m ? "member active MTU" : "active MTU");
  mb.gid_index = wire_rd_u8(r, m ? "member GID index" : "GID index");
  wire_rd_bytes(r, mb.gid, sizeof(mb.gid), m ? "member GID" : "GID");
  mb.lid = wire_rd_u16(r, m ? "member LID" : "LID");
  if (m)
    mb.ring_rkey = wire_rd_u32(r, "member ring rkey");
  wire_member_set(ep, k, &mb);
}

static void wire_wr_endpoint(struct wire_wr *w, const struct mcp_wire_endpoint *ep, unsigned version)
{
  const struct mcp_wire_fingerprint *fp = &ep->fp;

  wire_wr_u32(w, ep->stream_id);
  wire_wr_member(w, ep, 0);
  wire_wr_u8(w, ep->nqps);
  for (unsigned i = 0; i < ep->nqps; i++) {
    wire_wr_u32(w, ep->qps[i].qpn);
    wire_wr_u32(w, ep->qps[i].psn);
  }
  wire_wr_u64(w, ep->ring_addr);
  wire_wr_u32(w, ep->ring_rkey);
  wire_wr_u32(w, ep->ring_slots);
  wire_wr_u32(w, fp->plugin_version);
  wire_wr_u8(w, fp->gid_type);
  wire_wr_u8(w, fp->gid_family);
  wire_wr_u16(w, fp->pkey);
  wire_wr_u8(w, fp->sl);
  wire_wr_u8(w, fp->tc);
  wire_wr_u8(w, fp->timeout);
  wire_wr_u8(w, fp->retry);
  wire_wr_u8(w, fp->rnr_retry);
  wire_wr_u8(w, fp->qps_per_conn);
  wire_wr_u32(w, fp->speed_mbps);
  wire_wr_u32(w, fp->max_message);
  if (version < MCP_WIRE_VERSION_FUSION)
    return; /* one member, the fields above (the encoder checked) */
  wire_wr_u8(w, (uint8_t)wire_member_count(ep));
  for (unsigned k = 1; k < wire_member_count(ep); k++)
    wire_wr_member(w, ep, k);
}

static void wire_rd_endpoint(struct wire_rd *r, struct mcp_wire_endpoint *ep, unsigned version)
{
  struct mcp_wire_fingerprint *fp = &ep->fp;
  char why[160];

  ep->stream_id = wire_rd_u32(r, "stream id");
  wire_rd_member(r, ep, 0);
  ep->nqps = wire_rd_u8(r, "QP count");
  /* Check the count before it sizes the loop: it indexes a fixed array. */
  if (!r->failed && (ep->nqps < 1 || ep->nqps > MCP_WIRE_MAX_QPS))
    wire_rd_bad(r, "QP count %u is not 1..%d", ep->nqps, MCP_WIRE_MAX_QPS);
  for (unsigned i = 0; !r->failed && i < ep->nqps; i++) {
    ep->qps[i].qpn = wire_rd_u32(r, "QP number");
    ep->qps[i].psn = wire_rd_u32(r, "PSN");
  }
  ep->ring_addr = wire_rd_u64(r, "ring address");
  ep->ring_rkey = wire_rd_u32(r, "ring rkey");
  ep->ring_slots = wire_rd_u32(r, "ring slots");
  fp->plugin_version = wire_rd_u32(r, "plugin version");
  fp->gid_type = wire_rd_u8(r, "GID type");
  fp->gid_family = wire_rd_u8(r, "GID family");
  fp->pkey = wire_rd_u16(r, "P_Key");
  fp->sl = wire_rd_u8(r, "SL");
  fp->tc = wire_rd_u8(r, "TC");
  fp->timeout = wire_rd_u8(r, "timeout");
  fp->retry = wire_rd_u8(r, "retry count");
  fp->rnr_retry = wire_rd_u8(r, "RNR retry count");
  fp->qps_per_conn = wire_rd_u8(r, "QPs per connection");
  fp->speed_mbps = wire_rd_u32(r, "speed");
  fp->max_message = wire_rd_u32(r, "max message");
  ep->ndevs = 1;
  if (version >= MCP_WIRE_VERSION_FUSION) {
    ep->ndevs = wire_rd_u8(r, "member count");
    /* Checked before it sizes the loop, as the QP count is; version 3 carries 4 at most. */
    if (!r->failed && (ep->ndevs < 1 || ep->ndevs > wire_members_max(version)))
      wire_rd_bad(r, "member count %u is not 1..%u", ep->ndevs, wire_members_max(version));
    for (unsigned k = 1; !r->failed && k < ep->ndevs; k++)
      wire_rd_member(r, ep, k);
  }
  if (!r->failed && mcp_wire_endpoint_check(ep, why, sizeof(why)) != 0)
    wire_rd_bad(r, "%s", why);
}

int mcp_wire_endpoint_equal(const struct mcp_wire_endpoint *a, const struct mcp_wire_endpoint *b)
{
  const struct mcp_wire_fingerprint *fa = &a->fp, *fb = &b->fp;

  if (a->stream_id != b->stream_id || a->link_layer != b->link_layer || a->nqps != b->nqps ||
      a->ring_addr != b->ring_addr || a->ring_slots != b->ring_slots)
    return 0;
  for (unsigned i = 0; i < a->nqps && i < MCP_WIRE_MAX_QPS; i++)
    if (a->qps[i].qpn != b->qps[i].qpn || a->qps[i].psn != b->qps[i].psn)
      return 0;
  if (wire_member_count(a) != wire_member_count(b))
    return 0;
  for (unsigned k = 0; k < wire_member_count(a) && k < MCP_WIRE_MAX_MEMBERS; k++) {
    struct mcp_wire_member ma = wire_member_get(a, k), mb = wire_member_get(b, k);

    if (strncmp(ma.dev_name, mb.dev_name, sizeof(ma.dev_name)) || ma.port != mb.port ||
        ma.active_mtu != mb.active_mtu || ma.gid_index != mb.gid_index ||
        memcmp(ma.gid, mb.gid, sizeof(ma.gid)) != 0 || ma.lid != mb.lid || ma.ring_rkey != mb.ring_rkey)
      return 0;
  }
  return fa->plugin_version == fb->plugin_version && fa->gid_type == fb->gid_type &&
    fa->gid_family == fb->gid_family && fa->pkey == fb->pkey && fa->sl == fb->sl && fa->tc == fb->tc &&
    fa->timeout == fb->timeout && fa->retry == fb->retry && fa->rnr_retry == fb->rnr_retry &&
    fa->qps_per_conn == fb->qps_per_conn && fa->speed_mbps == fb->speed_mbps &&
    fa->max_message == fb->max_message;
}

/* ---- Frames ------------------------------------------------------------------------- */

static int wire_msg_check(const struct mcp_wire_msg *m, char *err, size_t errlen)
{
  switch (m->type) {
  case MCP_WIRE_HELLO:
    if (!wire_str_ok(m->u.hello.hostname, MCP_WIRE_HOSTNAME_MAX) ||
        !wire_str_ok(m->u.hello.plugin_version, MCP_WIRE_VERSTR_MAX)) {
      mcp_text_errf(err, errlen,
                    "HELLO host name or plugin version string is not terminated or not printable");
      return -EINVAL;
    }
    if ((m->version == 0 || m->version >= MCP_WIRE_VERSION_AUTH) && m->u.hello.challenge == 0) {
      mcp_text_errf(err, errlen, "HELLO challenge is 0");
      return -EINVAL;
    }
    return 0;
  case MCP_WIRE_CONN_REQ: return mcp_wire_endpoint_check(&m->u.conn_req.ep, err, errlen);
  case MCP_WIRE_CONN_ACK: return mcp_wire_endpoint_check(&m->u.conn_ack, err, errlen);
  case MCP_WIRE_CONN_REJECT:
    if (!wire_str_ok(m->u.reject.reason, MCP_WIRE_REASON_MAX)) {
      mcp_text_errf(err, errlen, "CONN_REJECT reason is not terminated or not printable");
      return -EINVAL;
    }
    return 0;
  case MCP_WIRE_RECOVER:
    if (m->u.recover.round == 0 ||
        (m->u.recover.step != MCP_WIRE_RECOVER_QPS && m->u.recover.step != MCP_WIRE_RECOVER_READY)) {
      mcp_text_errf(err, errlen, "RECOVER round %u step %u is invalid", m->u.recover.round,
                    m->u.recover.step);
      return -EINVAL;
    }
    if (!wire_members_ok(m->u.recover.up, m->u.recover.ep.ndevs) ||
        !wire_members_ok(m->u.recover.live, m->u.recover.ep.ndevs)) {
      mcp_text_errf(err, errlen, "RECOVER member masks %#x/%#x do not fit %u member(s)", m->u.recover.up,
                    m->u.recover.live, m->u.recover.ep.ndevs);
      return -EINVAL;
    }
    return mcp_wire_endpoint_check(&m->u.recover.ep, err, errlen);
  case MCP_WIRE_CONN_READY:
  case MCP_WIRE_CLOSE:
  case MCP_WIRE_PING:
  case MCP_WIRE_PONG: return 0;
  default: mcp_text_errf(err, errlen, "cannot encode unknown frame type %u", m->type); return -EINVAL;
  }
}

/* Members of the endpoint a frame carries (1 for frames without one). */
static unsigned wire_msg_ndevs(const struct mcp_wire_msg *m)
{
  const struct mcp_wire_endpoint *ep = m->type == MCP_WIRE_CONN_REQ ? &m->u.conn_req.ep
    : m->type == MCP_WIRE_CONN_ACK                                  ? &m->u.conn_ack
    : m->type == MCP_WIRE_RECOVER                                   ? &m->u.recover.ep
                                                                    : NULL;

  return ep != NULL && ep->ndevs > 1 ? ep->ndevs : 1;
}

static void wire_wr_payload(struct wire_wr *w, const struct mcp_wire_msg *m, unsigned version)
{
  switch (m->type) {
  case MCP_WIRE_HELLO:
    wire_wr_u64(w, m->u.hello.nonce);
    wire_wr_u32(w, m->u.hello.pid);
    wire_wr_str(w, m->u.hello.hostname, MCP_WIRE_HOSTNAME_MAX);
    wire_wr_str(w, m->u.hello.plugin_version, MCP_WIRE_VERSTR_MAX);
    wire_wr_u32(w, (uint32_t)m->u.hello.local_rank);
    if (version >= MCP_WIRE_VERSION_AUTH) {
      wire_wr_u64(w, m->u.hello.challenge);
      wire_wr_u32(w, m->u.hello.listen_id);
      wire_wr_u64(w, m->u.hello.proof);
    }
    break;
  case MCP_WIRE_CONN_REQ:
    if (version >= MCP_WIRE_VERSION_AUTH) {
      wire_wr_u32(w, m->u.conn_req.listen_id);
      wire_wr_u64(w, m->u.conn_req.mac);
    } else {
      wire_wr_u64(w, m->u.conn_req.listen_token);
    }
    wire_wr_endpoint(w, &m->u.conn_req.ep, version);
    break;
  case MCP_WIRE_CONN_ACK: wire_wr_endpoint(w, &m->u.conn_ack, version); break;
  case MCP_WIRE_CONN_REJECT:
    wire_wr_u32(w, m->u.reject.code);
    wire_wr_str(w, m->u.reject.reason, MCP_WIRE_REASON_MAX);
    break;
  case MCP_WIRE_CLOSE: wire_wr_u32(w, m->u.close_stream_id); break;
  case MCP_WIRE_PING:
  case MCP_WIRE_PONG: wire_wr_u64(w, m->u.cookie); break;
  case MCP_WIRE_RECOVER: {
    int i;
    wire_wr_u32(w, m->u.recover.round);
    wire_wr_u32(w, m->u.recover.step);
    wire_wr_u32(w, m->u.recover.next_seq);
    for (i = 0; i < MCP_WIRE_RECOVER_SLOTS; i++)
      wire_wr_u32(w, m->u.recover.done[i]);
    wire_wr_endpoint(w, &m->u.recover.ep, version);
    if (version >= MCP_WIRE_VERSION_AUTH) {
      wire_wr_u8(w, m->u.recover.up);
      wire_wr_u8(w, m->u.recover.live);
    }
    break;
  }
  default: /* CONN_READY: empty */ break;
  }
}

int mcp_wire_encode(const struct mcp_wire_msg *m, uint8_t *buf, size_t cap, size_t *len, char *err,
                    size_t errlen)
{
  struct wire_wr w = {.p = buf, .cap = cap};
  struct wire_wr patch;
  size_t payload;
  unsigned version;
  int rc;

  *len = 0;
  rc = wire_msg_check(m, err, errlen);
  if (rc != 0)
    return rc;
  version = m->version != 0 ? m->version : MCP_WIRE_VERSION;
  if (version > MCP_WIRE_VERSION || m->type > wire_type_max(version)) {
    mcp_text_errf(err, errlen, "a %s frame cannot be written as version %u", mcp_wire_type_name(m->type),
                  version);
    return -EINVAL;
  }
  if (wire_msg_ndevs(m) > wire_members_max(version)) {
    mcp_text_errf(err, errlen, "a %s frame of a fused endpoint (%u members) needs version %u, not %u",
                  mcp_wire_type_name(m->type), wire_msg_ndevs(m), wire_members_version(wire_msg_ndevs(m)),
                  version);
    return -EINVAL;
  }
  wire_wr_u32(&w, MCP_WIRE_MAGIC);
  wire_wr_u16(&w, version);
  wire_wr_u16(&w, m->type);
  wire_wr_u32(&w, 0); /* length, patched below */
  wire_wr_u32(&w, m->stream_id);
  wire_wr_payload(&w, m, version);
  if (w.overflow) {
    mcp_text_errf(err, errlen, "%zu-byte buffer is too small for a %s frame", cap,
                  mcp_wire_type_name(m->type));
    return -ENOBUFS;
  }
  payload = w.off - MCP_WIRE_HDR_SIZE;
  if (payload > MCP_WIRE_MAX_PAYLOAD) {
    mcp_text_errf(err, errlen, "%s payload of %zu bytes exceeds the frame limit", mcp_wire_type_name(m->type),
                  payload);
    return -EINVAL;
  }
  patch = (struct wire_wr){.p = buf, .cap = cap, .off = 8};
  wire_wr_u32(&patch, (uint32_t)payload);
  *len = w.off;
  return 0;
}

static void wire_rd_payload(struct wire_rd *r, struct mcp_wire_msg *m)
{
  unsigned version = m->version;

  switch (m->type) {
  case MCP_WIRE_HELLO:
    m->u.hello.nonce = wire_rd_u64(r, "nonce");
    m->u.hello.pid = wire_rd_u32(r, "pid");
    wire_rd_str(r, m->u.hello.hostname, MCP_WIRE_HOSTNAME_MAX, "host name");
    wire_rd_str(r, m->u.hello.plugin_version, MCP_WIRE_VERSTR_MAX, "plugin version");
    m->u.hello.local_rank = (int32_t)wire_rd_u32(r, "local rank");
    if (version >= MCP_WIRE_VERSION_AUTH) {
      m->u.hello.challenge = wire_rd_u64(r, "challenge");
      m->u.hello.listen_id = wire_rd_u32(r, "listen id");
      m->u.hello.proof = wire_rd_u64(r, "proof");
      if (!r->failed && m->u.hello.challenge == 0)
        wire_rd_bad(r, "challenge is 0");
    }
    break;
  case MCP_WIRE_CONN_REQ:
    if (version >= MCP_WIRE_VERSION_AUTH) {
      m->u.conn_req.listen_id = wire_rd_u32(r, "listen id");
      m->u.conn_req.mac = wire_rd_u64(r, "MAC");
    } else {
      m->u.conn_req.listen_token = wire_rd_u64(r, "listen token");
    }
    wire_rd_endpoint(r, &m->u.conn_req.ep, version);
    break;
  case MCP_WIRE_CONN_ACK: wire_rd_endpoint(r, &m->u.conn_ack, version); break;
  case MCP_WIRE_CONN_REJECT:
    m->u.reject.code = wire_rd_u32(r, "reject code");
    wire_rd_str(r, m->u.reject.reason, MCP_WIRE_REASON_MAX, "reject reason");
    break;
  case MCP_WIRE_CLOSE: m->u.close_stream_id = wire_rd_u32(r, "closed stream id"); break;
  case MCP_WIRE_PING:
  case MCP_WIRE_PONG: m->u.cookie = wire_rd_u64(r, "cookie"); break;
  case MCP_WIRE_RECOVER: {
    int i;
    m->u.recover.round = wire_rd_u32(r, "recovery round");
    m->u.recover.step = wire_rd_u32(r, "recovery step");
    m->u.recover.next_seq = wire_rd_u32(r, "next seq");
    for (i = 0; i < MCP_WIRE_RECOVER_SLOTS; i++)
      m->u.recover.done[i] = wire_rd_u32(r, "completed seq");
    wire_rd_endpoint(r, &m->u.recover.ep, version);
    if (version >= MCP_WIRE_VERSION_AUTH) {
      m->u.recover.up = wire_rd_u8(r, "members up");
      m->u.recover.live = wire_rd_u8(r, "members carrying QPs");
    } else {
      m->u.recover.up = m->u.recover.live = wire_members_all(m->u.recover.ep.ndevs);
    }
    if (m->u.recover.round == 0)
      wire_rd_bad(r, "recovery round 0 is invalid");
    else if (!wire_members_ok(m->u.recover.up, m->u.recover.ep.ndevs) ||
             !wire_members_ok(m->u.recover.live, m->u.recover.ep.ndevs))
      wire_rd_bad(r, "member masks %#x/%#x do not fit %u member(s)", m->u.recover.up, m->u.recover.live,
                  m->u.recover.ep.ndevs);
    else if (m->u.recover.step != MCP_WIRE_RECOVER_QPS && m->u.recover.step != MCP_WIRE_RECOVER_READY)
      wire_rd_bad(r, "recovery step %u is not 1 or 2", m->u.recover.step);
    break;
  }
  default: /* CONN_READY: empty */ break;
  }
}

int mcp_wire_decode(const uint8_t *buf, size_t len, struct mcp_wire_msg *m, char *err, size_t errlen)
{
  struct mcp_wire_header hdr;
  struct wire_rd r;
  char what[32];
  int rc;

  memset(m, 0, sizeof(*m));
  rc = mcp_wire_header_decode(buf, len, &hdr, err, errlen);
  if (rc != 0)
    return rc;
  if (len != MCP_WIRE_HDR_SIZE + (size_t)hdr.length) {
    mcp_text_errf(err, errlen, "%s frame announces %u payload bytes but %zu are present",
                  mcp_wire_type_name(hdr.type), hdr.length, len - MCP_WIRE_HDR_SIZE);
    return -EBADMSG;
  }
  m->version = hdr.version;
  m->type = hdr.type;
  m->stream_id = hdr.stream_id;
  snprintf(what, sizeof(what), "%s payload", mcp_wire_type_name(hdr.type));
  r = (struct wire_rd){
    .p = buf + MCP_WIRE_HDR_SIZE, .len = hdr.length, .what = what, .err = err, .errlen = errlen};
  wire_rd_payload(&r, m);
  rc = wire_rd_finish(&r);
  if (rc != 0) {
    /* Half-decoded fields must not be mistaken for data. */
    memset(m, 0, sizeof(*m));
    return rc;
  }
  return 0;
}

int mcp_wire_msg_equal(const struct mcp_wire_msg *a, const struct mcp_wire_msg *b)
{
  if (a->type != b->type || a->stream_id != b->stream_id)
    return 0;
  switch (a->type) {
  case MCP_WIRE_HELLO:
    return a->u.hello.nonce == b->u.hello.nonce && a->u.hello.pid == b->u.hello.pid &&
      strcmp(a->u.hello.hostname, b->u.hello.hostname) == 0 &&
      strcmp(a->u.hello.plugin_version, b->u.hello.plugin_version) == 0 &&
      a->u.hello.local_rank == b->u.hello.local_rank && a->u.hello.challenge == b->u.hello.challenge &&
      a->u.hello.listen_id == b->u.hello.listen_id && a->u.hello.proof == b->u.hello.proof;
  case MCP_WIRE_CONN_REQ:
    return a->u.conn_req.listen_token == b->u.conn_req.listen_token &&
      a->u.conn_req.listen_id == b->u.conn_req.listen_id && a->u.conn_req.mac == b->u.conn_req.mac &&
      mcp_wire_endpoint_equal(&a->u.conn_req.ep, &b->u.conn_req.ep);
  case MCP_WIRE_CONN_ACK: return mcp_wire_endpoint_equal(&a->u.conn_ack, &b->u.conn_ack);
  case MCP_WIRE_CONN_REJECT:
    return a->u.reject.code == b->u.reject.code && strcmp(a->u.reject.reason, b->u.reject.reason) == 0;
  case MCP_WIRE_CLOSE: return a->u.close_stream_id == b->u.close_stream_id;
  case MCP_WIRE_PING:
  case MCP_WIRE_PONG: return a->u.cookie == b->u.cookie;
  case MCP_WIRE_RECOVER:
    return a->u.recover.round == b->u.recover.round && a->u.recover.step == b->u.recover.step &&
      a->u.recover.next_seq == b->u.recover.next_seq &&
      memcmp(a->u.recover.done, b->u.recover.done, sizeof(a->u.recover.done)) == 0 &&
      a->u.recover.up == b->u.recover.up && a->u.recover.live == b->u.recover.live &&
      mcp_wire_endpoint_equal(&a->u.recover.ep, &b->u.recover.ep);
  default: return 1;
  }
}
