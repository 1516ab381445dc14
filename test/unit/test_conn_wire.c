/*
 * test_conn_wire.c - the handshake wire format: decode(encode(x)) == x over randomized
 * messages of every type (fixed seed, so a failure reproduces), every truncation of
 * every type failing cleanly, corrupted magic/version/type/lengths/strings/counts
 * rejected with a reason, the 128-byte handle, random and mutated bytes never crashing
 * (run it under MCPNET_SANITIZE=address,undefined to make "never" mean something), and
 * frames streamed through the socket layer's receive buffer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcp_test.h"
#include "core/sock.h"
#include "core/text.h"
#include "conn/wire.h"

/* ---- Random values ---------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* xorshift64*: tiny, deterministic across platforms, good enough to cover fields. */
static uint64_t rnd(void)
{
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd() % n); }

/* A random string of 0..max printable bytes (the wire refuses others); often at the
 * extremes. */
static void rnd_str(char *dst, size_t max, size_t min)
{
  uint32_t pick = rnd_below(4);
  size_t n = pick == 0 ? min : pick == 1 ? max : min + rnd_below((uint32_t)(max - min + 1));

  for (size_t i = 0; i < n; i++)
    dst[i] = (char)(0x20 + rnd_below(0x5f));
  dst[n] = '\0';
}

static void rnd_endpoint(struct mcp_wire_endpoint *ep)
{
  static const uint8_t families[] = {0, 4, 6};

  memset(ep, 0, sizeof(*ep));
  ep->stream_id = (uint32_t)rnd();
  rnd_str(ep->dev_name, MCP_WIRE_DEVNAME_MAX, 1);
  ep->port = (uint8_t)(1 + rnd_below(255));
  ep->link_layer = (uint8_t)(1 + rnd_below(2));
  ep->active_mtu = (uint8_t)(1 + rnd_below(5));
  ep->gid_index = (uint8_t)rnd();
  for (int i = 0; i < 16; i++)
    ep->gid[i] = (uint8_t)rnd();
  ep->lid = (uint16_t)rnd();
  ep->nqps = (uint8_t)(1 + rnd_below(MCP_WIRE_MAX_QPS));
  for (int i = 0; i < ep->nqps; i++) {
    ep->qps[i].qpn = (uint32_t)rnd() & 0xffffff;
    ep->qps[i].psn = (uint32_t)rnd() & 0xffffff;
  }
  ep->ring_addr = rnd();
  ep->ring_rkey = (uint32_t)rnd();
  ep->ring_slots = (uint32_t)rnd();
  ep->fp.plugin_version = (uint32_t)rnd();
  ep->fp.gid_type = (uint8_t)rnd_below(3);
  ep->fp.gid_family = families[rnd_below(3)];
  ep->fp.pkey = (uint16_t)rnd();
  ep->fp.sl = (uint8_t)rnd_below(16);
  ep->fp.tc = (uint8_t)rnd();
  ep->fp.timeout = (uint8_t)rnd_below(32);
  ep->fp.retry = (uint8_t)rnd_below(8);
  ep->fp.rnr_retry = (uint8_t)rnd_below(8);
  ep->fp.qps_per_conn = (uint8_t)(1 + rnd_below(MCP_WIRE_MAX_QPS));
  ep->fp.speed_mbps = (uint32_t)rnd();
  ep->fp.max_message = (uint32_t)rnd();
  /* Half the endpoints are fused (version 3 frames), the rest one device (version 2). */
  if (rnd_below(2) == 0) {
    ep->ndevs = (uint8_t)(2 + rnd_below(MCP_WIRE_MAX_MEMBERS - 1));
    for (int k = 1; k < ep->ndevs; k++) {
      struct mcp_wire_member *mb = &ep->more[k - 1];
      rnd_str(mb->dev_name, MCP_WIRE_DEVNAME_MAX, 1);
      mb->port = (uint8_t)(1 + rnd_below(255));
      mb->active_mtu = (uint8_t)(1 + rnd_below(5));
      mb->gid_index = (uint8_t)rnd();
      for (int i = 0; i < 16; i++)
        mb->gid[i] = (uint8_t)rnd();
      mb->lid = (uint16_t)rnd();
      mb->ring_rkey = (uint32_t)rnd();
    }
  }
}

static void rnd_msg(struct mcp_wire_msg *m, uint16_t type)
{
  memset(m, 0, sizeof(*m));
  m->type = type;
  m->stream_id = rnd_below(4) == 0 ? 0 : (uint32_t)rnd();
  switch (type) {
  case MCP_WIRE_HELLO:
    m->u.hello.nonce = rnd();
    m->u.hello.pid = (uint32_t)rnd();
    rnd_str(m->u.hello.hostname, MCP_WIRE_HOSTNAME_MAX, 0);
    rnd_str(m->u.hello.plugin_version, MCP_WIRE_VERSTR_MAX, 0);
    m->u.hello.local_rank = (int32_t)rnd();
    m->u.hello.challenge = rnd() | 1;
    m->u.hello.listen_id = (uint32_t)rnd();
    m->u.hello.proof = rnd();
    break;
  case MCP_WIRE_CONN_REQ:
    m->u.conn_req.listen_id = (uint32_t)rnd();
    m->u.conn_req.mac = rnd();
    rnd_endpoint(&m->u.conn_req.ep);
    break;
  case MCP_WIRE_CONN_ACK: rnd_endpoint(&m->u.conn_ack); break;
  case MCP_WIRE_CONN_REJECT:
    m->u.reject.code = (uint32_t)rnd();
    rnd_str(m->u.reject.reason, MCP_WIRE_REASON_MAX, 0);
    break;
  case MCP_WIRE_CLOSE: m->u.close_stream_id = (uint32_t)rnd(); break;
  case MCP_WIRE_PING:
  case MCP_WIRE_PONG: m->u.cookie = rnd(); break;
  case MCP_WIRE_RECOVER:
    m->u.recover.round = 1 + (uint32_t)rnd_below(1000);
    m->u.recover.step = 1 + (uint32_t)rnd_below(2);
    m->u.recover.next_seq = (uint32_t)rnd();
    for (int i = 0; i < MCP_WIRE_RECOVER_SLOTS; i++)
      m->u.recover.done[i] = (uint32_t)rnd();
    rnd_endpoint(&m->u.recover.ep);
    {
      unsigned all = (1u << (m->u.recover.ep.ndevs > 1 ? m->u.recover.ep.ndevs : 1)) - 1u;
      m->u.recover.up = (uint8_t)(1 + rnd_below(all));
      m->u.recover.live = (uint8_t)(1 + rnd_below(all));
    }
    break;
  default: break;
  }
}

static size_t encode_ok(const struct mcp_wire_msg *m, uint8_t *buf)
{
  char err[MCP_WIRE_ERRLEN];
  size_t len = 0;
  int rc = mcp_wire_encode(m, buf, MCP_WIRE_MSG_MAX, &len, err, sizeof(err));

  if (rc != 0) {
    fprintf(stderr, "encode %s: %s\n", mcp_wire_type_name(m->type), err);
    CHECK(0);
  }
  return len;
}

/* ---- Round trips -------------------------------------------------------------------- */

static void test_roundtrip_property(void)
{
  uint8_t buf[MCP_WIRE_MSG_MAX], again[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  struct mcp_wire_msg in, out;
  int failures = 0, per_type[MCP_WIRE_TYPE_MAX + 1] = {0};

  for (int it = 0; it < 20000 && failures < 5; it++) {
    uint16_t type = (uint16_t)(1 + rnd_below(MCP_WIRE_TYPE_MAX));
    size_t len, len2 = 0, flen = 0;

    rnd_msg(&in, type);
    len = encode_ok(&in, buf);
    if (mcp_wire_decode(buf, len, &out, err, sizeof(err)) != 0 || !mcp_wire_msg_equal(&in, &out)) {
      fprintf(stderr, "iteration %d (%s): round trip failed: %s\n", it, mcp_wire_type_name(type), err);
      failures++;
      continue;
    }
    /* Canonical: re-encoding the decoded message gives the same bytes. */
    if (mcp_wire_encode(&out, again, sizeof(again), &len2, err, sizeof(err)) != 0 || len2 != len ||
        memcmp(buf, again, len) != 0) {
      fprintf(stderr, "iteration %d: re-encoding differs\n", it);
      failures++;
    }
    if (mcp_wire_frame_len(buf, len, &flen, err, sizeof(err)) != 1 || flen != len) {
      fprintf(stderr, "iteration %d: frame_len %zu != %zu\n", it, flen, len);
      failures++;
    }
    per_type[type]++;
  }
  CHECK_EQ_INT(failures, 0);
  for (int t = 1; t <= MCP_WIRE_TYPE_MAX; t++)
    CHECK(per_type[t] > 1000);
}

/* RECOVER exists from version 2 on: the same frame with a version-1 header is an unknown
 * type, and round 0 is refused both ways. */
static void test_recover_needs_version_2(void)
{
  struct mcp_wire_msg m, out;
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len;

  rnd_msg(&m, MCP_WIRE_RECOVER);
  len = encode_ok(&m, buf);
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), 0);
  CHECK(mcp_wire_msg_equal(&m, &out));
  buf[4] = 1;
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "unknown frame type 9 (version 1 knows 1..8)") != NULL);
  buf[4] = MCP_WIRE_VERSION;
  memset(buf + MCP_WIRE_HDR_SIZE, 0, 4); /* round 0 */
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "recovery round 0 is invalid") != NULL);
  memcpy(buf + MCP_WIRE_HDR_SIZE, "\x01\x00\x00\x00\x03\x00\x00\x00", 8); /* round 1, step 3 */
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "recovery step 3 is not 1 or 2") != NULL);
  m.u.recover.round = 0;
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
}

/* A RECOVER's member masks (failover) end the frame: one that is empty or names a member
 * the endpoint does not have is refused by the decoder (the peer wrote it) and by the
 * encoder (a bug here). */
static void test_recover_member_masks(void)
{
  struct mcp_wire_msg m, out;
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len;

  do
    rnd_msg(&m, MCP_WIRE_RECOVER);
  while (m.u.recover.ep.ndevs != 2);
  m.u.recover.up = 3;
  m.u.recover.live = 1;
  len = encode_ok(&m, buf);
  CHECK_EQ_INT(buf[len - 2], 3);
  CHECK_EQ_INT(buf[len - 1], 1);
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), 0);
  CHECK_EQ_INT(out.u.recover.up, 3);
  CHECK_EQ_INT(out.u.recover.live, 1);
  buf[len - 1] = 0;
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "member masks 0x3/0 do not fit 2 member(s)") != NULL);
  buf[len - 1] = 1;
  buf[len - 2] = 4; /* a third member of two */
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "member masks 0x4/0x1 do not fit 2 member(s)") != NULL);
  m.u.recover.live = 0;
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "do not fit") != NULL);
}

/* The little-endian layout is a contract with other hosts: pin frames byte by byte (a
 * version-2 PING, as older builds wrote it; a version-4 HELLO and CONN_REQ with the
 * fields authentication adds). */
static void test_golden_bytes(void)
{
  static const uint8_t want[] = {
    0x4e, 0x50, 0x43, 0x4d,                         /* magic "MCPN" as u32 LE */
    0x02, 0x00,                                     /* version 2 */
    0x07, 0x00,                                     /* PING */
    0x08, 0x00, 0x00, 0x00,                         /* payload length 8 */
    0x44, 0x33, 0x22, 0x11,                         /* stream id 0x11223344 */
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* cookie */
  };
  struct mcp_wire_msg m = {.version = 2, .type = MCP_WIRE_PING, .stream_id = 0x11223344};
  uint8_t buf[MCP_WIRE_MSG_MAX];
  size_t len, at;

  m.u.cookie = 0x0102030405060708ull;
  len = encode_ok(&m, buf);
  CHECK_EQ_INT(len, sizeof(want));
  CHECK(memcmp(buf, want, sizeof(want)) == 0);

  /* CONN_READY is a bare header; HELLO strings carry a u16 length and no NUL. */
  m = (struct mcp_wire_msg){.type = MCP_WIRE_CONN_READY, .stream_id = 5};
  CHECK_EQ_INT(encode_ok(&m, buf), MCP_WIRE_HDR_SIZE);
  m = (struct mcp_wire_msg){.type = MCP_WIRE_HELLO};
  strcpy(m.u.hello.hostname, "ab");
  m.u.hello.challenge = 0x1112131415161718ull;
  m.u.hello.listen_id = 0x21222324u;
  m.u.hello.proof = 0x3132333435363738ull;
  len = encode_ok(&m, buf);
  CHECK_EQ_INT(len, MCP_WIRE_HDR_SIZE + 8 + 4 + 2 + 2 + 2 + 0 + 4 + 8 + 4 + 8);
  CHECK_EQ_INT(buf[4], 4);
  CHECK(buf[28] == 2 && buf[29] == 0 && buf[30] == 'a' && buf[31] == 'b');
  at = 38; /* after the local rank: challenge, listen id, proof */
  CHECK(buf[at] == 0x18 && buf[at + 7] == 0x11 && buf[at + 8] == 0x24 && buf[at + 11] == 0x21 &&
        buf[at + 12] == 0x38 && buf[at + 19] == 0x31);

  /* A version-4 CONN_REQ starts with the listen id and the MAC, then the endpoint. */
  m = (struct mcp_wire_msg){.type = MCP_WIRE_CONN_REQ};
  rnd_endpoint(&m.u.conn_req.ep);
  m.u.conn_req.listen_id = 0x41424344u;
  m.u.conn_req.mac = 0x5152535455565758ull;
  len = encode_ok(&m, buf);
  CHECK(buf[16] == 0x44 && buf[19] == 0x41 && buf[20] == 0x58 && buf[27] == 0x51);
  CHECK(buf[28] == (uint8_t)m.u.conn_req.ep.stream_id);
}

/* A fused endpoint's frame pinned byte by byte: member 0's fields sit where version 1 put
 * them (link layer after the port, ring rkey with the ring), members 1.. follow the
 * fingerprint after the member count, ring rkey last. Written by hand from the layout,
 * not from the encoder, so a refactoring of the encoder cannot move a byte unseen. */
static void test_golden_fused_endpoint(void)
{
  static const uint8_t want[] = {
    0x4e, 0x50, 0x43, 0x4d,                         /* magic */
    0x03, 0x00,                                     /* version 3 (two members) */
    0x02, 0x00,                                     /* CONN_REQ */
    0x73, 0x00, 0x00, 0x00,                         /* payload length 115 */
    0x09, 0x00, 0x00, 0x00,                         /* stream id 9 */
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* listen token */
    0x04, 0x03, 0x02, 0x01,                         /* endpoint stream id */
    0x02, 0x00, 0x6d, 0x30,                         /* member 0: device name "m0" */
    0x01,                                           /* port */
    0x02,                                           /* link layer: Ethernet */
    0x05,                                           /* active MTU */
    0x03,                                           /* GID index */
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, /* GID */
    0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, /* */
    0x34, 0x12,                                     /* LID */
    0x01,                                           /* QP count */
    0x56, 0x34, 0x12, 0x00, 0x23, 0x01, 0x00, 0x00, /* QP 0: qpn, psn */
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* ring address */
    0xef, 0xbe, 0xad, 0xde,                         /* ring rkey (member 0's) */
    0x40, 0x00, 0x00, 0x00,                         /* ring slots */
    0x07, 0x00, 0x00, 0x00,                         /* fingerprint: plugin version */
    0x02, 0x04,                                     /* GID type, family */
    0xff, 0xff,                                     /* P_Key */
    0x03, 0x68, 0x12, 0x07, 0x07, 0x02,             /* SL, TC, timeout, retry, RNR retry, QPs */
    0x40, 0x9c, 0x00, 0x00,                         /* speed 40000 */
    0x00, 0x00, 0x00, 0x40,                         /* max message */
    0x02,                                           /* member count */
    0x02, 0x00, 0x6d, 0x31,                         /* member 1: device name "m1" */
    0x02,                                           /* port */
    0x04,                                           /* active MTU */
    0x06,                                           /* GID index */
    0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, /* GID */
    0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf, /* */
    0x78, 0x56,                                     /* LID */
    0x01, 0xef, 0xcd, 0xab,                         /* ring rkey (member 1's) */
  };
  struct mcp_wire_msg m = {.version = 3, .type = MCP_WIRE_CONN_REQ, .stream_id = 9}, out;
  struct mcp_wire_endpoint *ep = &m.u.conn_req.ep;
  struct mcp_wire_member *mb = &ep->more[0];
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len;

  m.u.conn_req.listen_token = 0x1122334455667788ull;
  ep->stream_id = 0x01020304;
  strcpy(ep->dev_name, "m0");
  ep->port = 1;
  ep->link_layer = MCP_WIRE_LINK_ETHERNET;
  ep->active_mtu = 5;
  ep->gid_index = 3;
  for (int i = 0; i < 16; i++)
    ep->gid[i] = (uint8_t)(0xa0 + i);
  ep->lid = 0x1234;
  ep->nqps = 1;
  ep->qps[0] = (struct mcp_wire_qp){0x123456, 0x123};
  ep->ring_addr = 0x0102030405060708ull;
  ep->ring_rkey = 0xdeadbeef;
  ep->ring_slots = 64;
  ep->fp = (struct mcp_wire_fingerprint){.plugin_version = 7,
                                         .gid_type = MCP_WIRE_GID_ROCE_V2,
                                         .gid_family = 4,
                                         .pkey = 0xffff,
                                         .sl = 3,
                                         .tc = 0x68,
                                         .timeout = 18,
                                         .retry = 7,
                                         .rnr_retry = 7,
                                         .qps_per_conn = 2,
                                         .speed_mbps = 40000,
                                         .max_message = 1u << 30};
  ep->ndevs = 2;
  strcpy(mb->dev_name, "m1");
  mb->port = 2;
  mb->active_mtu = 4;
  mb->gid_index = 6;
  for (int i = 0; i < 16; i++)
    mb->gid[i] = (uint8_t)(0xb0 + i);
  mb->lid = 0x5678;
  mb->ring_rkey = 0xabcdef01;

  len = encode_ok(&m, buf);
  CHECK_EQ_INT(len, sizeof(want));
  CHECK_EQ_INT(len, MCP_WIRE_HDR_SIZE + 115);
  for (size_t i = 0; i < len && i < sizeof(want); i++)
    if (buf[i] != want[i]) {
      fprintf(stderr, "byte %zu: 0x%02x, want 0x%02x\n", i, buf[i], want[i]);
      CHECK(0);
      break;
    }
  CHECK_EQ_INT(mcp_wire_decode(want, sizeof(want), &out, err, sizeof(err)), 0);
  CHECK(mcp_wire_msg_equal(&m, &out));
}

/* Smallest and largest of every type, built by hand so both extremes are certain. */
static int samples(struct mcp_wire_msg *out, int max)
{
  int n = 0;

  for (uint16_t t = 1; t <= MCP_WIRE_TYPE_MAX && n + 2 <= max; t++) {
    rnd_msg(&out[n], t);
    if (t == MCP_WIRE_CONN_REQ)
      out[n].u.conn_req.ep.nqps = 1;
    if (t == MCP_WIRE_CONN_ACK)
      out[n].u.conn_ack.nqps = 1;
    n++;
    rnd_msg(&out[n], t);
    if (t == MCP_WIRE_CONN_REQ)
      out[n].u.conn_req.ep.nqps = MCP_WIRE_MAX_QPS;
    if (t == MCP_WIRE_CONN_ACK)
      out[n].u.conn_ack.nqps = MCP_WIRE_MAX_QPS;
    if (t == MCP_WIRE_CONN_REQ || t == MCP_WIRE_CONN_ACK) {
      struct mcp_wire_endpoint *ep = t == MCP_WIRE_CONN_REQ ? &out[n].u.conn_req.ep : &out[n].u.conn_ack;

      for (int i = 0; i < MCP_WIRE_MAX_QPS; i++)
        ep->qps[i] = (struct mcp_wire_qp){(uint32_t)i + 100, 0xffffff};
      memset(ep->dev_name, 'd', MCP_WIRE_DEVNAME_MAX);
      ep->dev_name[MCP_WIRE_DEVNAME_MAX] = '\0';
    }
    if (t == MCP_WIRE_CONN_REJECT) {
      memset(out[n].u.reject.reason, 'r', MCP_WIRE_REASON_MAX);
      out[n].u.reject.reason[MCP_WIRE_REASON_MAX] = '\0';
    }
    n++;
  }
  return n;
}

static void test_truncation_every_length(void)
{
  struct mcp_wire_msg s[2 * MCP_WIRE_TYPE_MAX], out;
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  int n = samples(s, 2 * MCP_WIRE_TYPE_MAX), bad = 0;

  for (int i = 0; i < n; i++) {
    size_t len = encode_ok(&s[i], buf);

    for (size_t cut = 0; cut < len; cut++) {
      /* A copy of exactly cut bytes: ASan then catches any read past the input. */
      uint8_t *copy = malloc(cut ? cut : 1);
      size_t flen = 0;
      int rc, frc, ok;

      err[0] = '\0';
      memcpy(copy, buf, cut);
      rc = mcp_wire_decode(copy, cut, &out, err, sizeof(err));
      frc = mcp_wire_frame_len(copy, cut, &flen, NULL, 0);
      free(copy);
      /* Short of a header: the header is truncated and the stream waits for more.
       * A whole header: the stream knows the frame's length, the decoder says the
       * payload is short. */
      if (cut < MCP_WIRE_HDR_SIZE)
        ok = rc == -EBADMSG && strstr(err, "truncated frame header") != NULL && frc == 0;
      else
        ok = rc == -EBADMSG && strstr(err, "announces") != NULL && frc == 1 && flen == len;
      if (!ok) {
        fprintf(stderr, "%s cut at %zu: rc %d frame_len %d: %s\n", mcp_wire_type_name(s[i].type), cut, rc,
                frc, err);
        bad++;
      }
    }
  }
  CHECK_EQ_INT(bad, 0);
}

static void put_u16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* Rewrites the header's payload length and truncates/extends the payload to match, so
 * the payload decoder itself meets the short or long input. */
static int decode_with_payload_len(const uint8_t *frame, size_t plen, char *err, size_t errlen)
{
  uint8_t buf[MCP_WIRE_MSG_MAX + 16];
  struct mcp_wire_msg out;

  memset(buf, 0, sizeof(buf));
  memcpy(buf, frame, MCP_WIRE_HDR_SIZE + plen);
  put_u32(buf + 8, (uint32_t)plen);
  return mcp_wire_decode(buf, MCP_WIRE_HDR_SIZE + plen, &out, err, errlen);
}

static void test_payload_truncation(void)
{
  struct mcp_wire_msg s[2 * MCP_WIRE_TYPE_MAX];
  uint8_t buf[MCP_WIRE_MSG_MAX + 16];
  char err[MCP_WIRE_ERRLEN];
  int n = samples(s, 2 * MCP_WIRE_TYPE_MAX), bad = 0;

  for (int i = 0; i < n; i++) {
    size_t len = encode_ok(&s[i], buf), plen = len - MCP_WIRE_HDR_SIZE;

    /* Consistent header, short payload: the field that runs out is named. */
    for (size_t p = 0; p < plen; p++) {
      err[0] = '\0';
      if (decode_with_payload_len(buf, p, err, sizeof(err)) != -EBADMSG ||
          (strstr(err, "truncated") == NULL && strstr(err, "malformed") == NULL)) {
        fprintf(stderr, "%s payload %zu/%zu: %s\n", mcp_wire_type_name(s[i].type), p, plen, err);
        bad++;
      }
    }
    /* One byte too many. */
    buf[len] = 0;
    if (decode_with_payload_len(buf, plen + 1, err, sizeof(err)) != -EBADMSG ||
        strstr(err, "trailing") == NULL) {
      fprintf(stderr, "%s trailing byte: %s\n", mcp_wire_type_name(s[i].type), err);
      bad++;
    }
  }
  CHECK_EQ_INT(bad, 0);
}

static void expect_reject(const uint8_t *buf, size_t len, int want_rc, const char *want_text)
{
  struct mcp_wire_msg out;
  char err[MCP_WIRE_ERRLEN] = "";
  int rc = mcp_wire_decode(buf, len, &out, err, sizeof(err));

  if (rc != want_rc || strstr(err, want_text) == NULL) {
    fprintf(stderr, "expected %d \"%s\", got %d \"%s\"\n", want_rc, want_text, rc, err);
    CHECK(0);
  }
  CHECK_EQ_INT(out.type, 0); /* nothing half-decoded leaks out */
}

static void test_corrupted_header(void)
{
  struct mcp_wire_msg m;
  uint8_t good[MCP_WIRE_MSG_MAX], b[MCP_WIRE_MSG_MAX];
  size_t len;
  char err[MCP_WIRE_ERRLEN];
  size_t flen;

  rnd_msg(&m, MCP_WIRE_CONN_ACK);
  len = encode_ok(&m, good);

  memcpy(b, good, len);
  b[0] ^= 0x01;
  expect_reject(b, len, -EBADMSG, "not an mcpnet frame (magic 0x4d43504f");
  /* A stray client: the first bytes alone already fail, before a whole header. */
  CHECK_EQ_INT(mcp_wire_frame_len((const uint8_t *)"GET / HTTP/1.1\r\n", 3, &flen, err, sizeof(err)),
               -EBADMSG);
  CHECK(strstr(err, "not an mcpnet frame") != NULL);

  memcpy(b, good, len);
  put_u16(b + 4, MCP_WIRE_VERSION + 1);
  expect_reject(b, len, -EPROTONOSUPPORT, "version 5 is newer than this build's version 4");
  put_u16(b + 4, 0xffff);
  expect_reject(b, len, -EPROTONOSUPPORT, "version 65535");
  put_u16(b + 4, 0);
  expect_reject(b, len, -EBADMSG, "version 0 is invalid");

  memcpy(b, good, len);
  put_u16(b + 6, 0);
  expect_reject(b, len, -EBADMSG, "unknown frame type 0");
  put_u16(b + 6, MCP_WIRE_TYPE_MAX + 1);
  expect_reject(b, len, -EBADMSG, "unknown frame type 10");
  /* A valid but different type: the payload no longer fits it. */
  put_u16(b + 6, MCP_WIRE_PING);
  expect_reject(b, len, -EBADMSG, "PING payload");

  memcpy(b, good, len);
  put_u32(b + 8, MCP_WIRE_MAX_PAYLOAD + 1);
  expect_reject(b, len, -EBADMSG, "more than the limit");
  CHECK_EQ_INT(mcp_wire_frame_len(b, len, &flen, err, sizeof(err)), -EBADMSG);
  put_u32(b + 8, 0xffffffffu);
  expect_reject(b, len, -EBADMSG, "more than the limit");
  put_u32(b + 8, (uint32_t)(len - MCP_WIRE_HDR_SIZE - 1));
  expect_reject(b, len, -EBADMSG, "but");
  put_u32(b + 8, (uint32_t)(len - MCP_WIRE_HDR_SIZE + 1));
  expect_reject(b, len, -EBADMSG, "but");
  /* A frame of exactly the maximum payload is a valid header (its payload is not). */
  put_u32(b + 8, MCP_WIRE_MAX_PAYLOAD);
  CHECK_EQ_INT(mcp_wire_frame_len(b, len, &flen, err, sizeof(err)), 1);
  CHECK_EQ_INT(flen, MCP_WIRE_MAX_FRAME);
}

/* Offsets inside an encoded CONN_ACK, from the layout in mcp_wire.c. */
#define ACK_DEVLEN (MCP_WIRE_HDR_SIZE + 4)

static void test_corrupted_fields(void)
{
  struct mcp_wire_msg m;
  uint8_t good[MCP_WIRE_MSG_MAX], b[MCP_WIRE_MSG_MAX];
  size_t len, dev, nq;

  rnd_msg(&m, MCP_WIRE_CONN_ACK);
  m.version = 2; /* one member: the fingerprint is the frame's end */
  m.u.conn_ack.ndevs = 0;
  strcpy(m.u.conn_ack.dev_name, "mlx5_0");
  m.u.conn_ack.nqps = 2;
  len = encode_ok(&m, good);
  dev = ACK_DEVLEN + 2;      /* the name's bytes */
  nq = dev + 6 + 4 + 16 + 2; /* name, port..gid index, gid, lid */
  CHECK(good[ACK_DEVLEN] == 6 && memcmp(good + dev, "mlx5_0", 6) == 0);
  CHECK_EQ_INT(good[nq], 2);

  memcpy(b, good, len);
  b[dev + 2] = '\0';
  expect_reject(b, len, -EBADMSG, "device name contains a NUL byte");
  memcpy(b, good, len);
  put_u16(b + ACK_DEVLEN, MCP_WIRE_DEVNAME_MAX + 1);
  expect_reject(b, len, -EBADMSG, "device name of 65 bytes is longer than the limit of 64");
  memcpy(b, good, len);
  put_u16(b + ACK_DEVLEN, 0); /* the name's bytes now read as later fields */
  expect_reject(b, len, -EBADMSG, "CONN_ACK payload");
  memcpy(b, good, len);
  b[nq] = 0;
  expect_reject(b, len, -EBADMSG, "QP count 0 is not 1..128");
  b[nq] = MCP_WIRE_MAX_QPS + 1;
  expect_reject(b, len, -EBADMSG, "QP count 129 is not 1..128");
  b[nq] = 3; /* claims one more QP than the payload holds */
  expect_reject(b, len, -EBADMSG, "truncated CONN_ACK payload");
  memcpy(b, good, len);
  b[dev + 6] = 0; /* port */
  expect_reject(b, len, -EBADMSG, "port 0");
  memcpy(b, good, len);
  b[dev + 7] = 3; /* link layer */
  expect_reject(b, len, -EBADMSG, "link layer 3");
  memcpy(b, good, len);
  b[dev + 8] = 6; /* active MTU */
  expect_reject(b, len, -EBADMSG, "active MTU enum 6");
  memcpy(b, good, len);
  b[nq + 1 + 3] = 0x01; /* top byte of the first QPN */
  expect_reject(b, len, -EBADMSG, "does not fit 24 bits");
  /* The fingerprint sits at the end: timeout is 8 bytes after the version. */
  size_t fp = len - 22;
  memcpy(b, good, len);
  b[fp + 4] = 3;
  expect_reject(b, len, -EBADMSG, "GID type 3");
  memcpy(b, good, len);
  b[fp + 5] = 5;
  expect_reject(b, len, -EBADMSG, "GID family 5");
  memcpy(b, good, len);
  b[fp + 8] = 16;
  expect_reject(b, len, -EBADMSG, "service level 16");
  memcpy(b, good, len);
  b[fp + 10] = 32;
  expect_reject(b, len, -EBADMSG, "QP timeout 32");
  memcpy(b, good, len);
  b[fp + 11] = 8;
  expect_reject(b, len, -EBADMSG, "retry count 8");
  memcpy(b, good, len);
  b[fp + 12] = 8;
  expect_reject(b, len, -EBADMSG, "RNR retry count 8");
  memcpy(b, good, len);
  b[fp + 13] = 0;
  expect_reject(b, len, -EBADMSG, "QPs per connection 0");
}

static void test_encode_errors(void)
{
  struct mcp_wire_msg m;
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len, need;

  rnd_msg(&m, MCP_WIRE_CONN_REQ);
  need = encode_ok(&m, buf);
  for (size_t cap = 0; cap < need; cap++) {
    if (mcp_wire_encode(&m, buf, cap, &len, err, sizeof(err)) != -ENOBUFS || len != 0) {
      fprintf(stderr, "cap %zu: expected -ENOBUFS\n", cap);
      CHECK(0);
    }
  }
  m.u.conn_req.ep.nqps = 0;
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "QP count 0") != NULL);
  m.u.conn_req.ep.nqps = 1;
  m.u.conn_req.ep.dev_name[0] = '\0';
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "device name") != NULL);
  memset(m.u.conn_req.ep.dev_name, 'x', sizeof(m.u.conn_req.ep.dev_name)); /* unterminated */
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  rnd_msg(&m, MCP_WIRE_HELLO);
  memset(m.u.hello.hostname, 'h', sizeof(m.u.hello.hostname));
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  m.type = 0;
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  m.type = MCP_WIRE_TYPE_MAX + 1;
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  CHECK_EQ_STR(mcp_wire_type_name(MCP_WIRE_CONN_REJECT), "CONN_REJECT");
  CHECK_EQ_STR(mcp_wire_type_name(0), "unknown");
  CHECK_EQ_STR(mcp_wire_type_name(999), "unknown");
}

static void test_endpoint_equal(void)
{
  struct mcp_wire_endpoint a, b;

  rnd_endpoint(&a);
  a.nqps = 2;
  b = a;
  CHECK(mcp_wire_endpoint_equal(&a, &b));
  b.qps[5].qpn ^= 1; /* beyond nqps: not part of the endpoint */
  memset(b.dev_name + strlen(b.dev_name) + 1, 'z',
         sizeof(b.dev_name) - strlen(b.dev_name) - 1); /* bytes after the NUL */
  CHECK(mcp_wire_endpoint_equal(&a, &b));
  b = a;
  b.qps[1].psn ^= 1;
  CHECK(!mcp_wire_endpoint_equal(&a, &b));
  b = a;
  b.fp.max_message ^= 1;
  CHECK(!mcp_wire_endpoint_equal(&a, &b));
  b = a;
  b.gid[15] ^= 1;
  CHECK(!mcp_wire_endpoint_equal(&a, &b));
  b = a;
  b.fp.tc ^= 1;
  CHECK(!mcp_wire_endpoint_equal(&a, &b));
}

/* ---- The handle --------------------------------------------------------------------- */

static void rnd_handle(struct mcp_wire_handle *h)
{
  memset(h, 0, sizeof(*h));
  h->family = rnd_below(2) ? 4 : 6;
  for (int i = 0; i < (h->family == 4 ? 4 : 16); i++)
    h->addr[i] = (uint8_t)rnd();
  h->port = (uint16_t)(1 + rnd_below(65535));
  h->dev = (int32_t)rnd_below(1u << 31);
  h->listen_key[0] = rnd();
  h->listen_key[1] = rnd();
  h->listen_id = (uint32_t)rnd() | 1;
  h->nonce = rnd();
}

static void test_handle(void)
{
  uint8_t buf[MCP_WIRE_HANDLE_SIZE], b[MCP_WIRE_HANDLE_SIZE];
  char err[MCP_WIRE_ERRLEN];
  struct mcp_wire_handle h, out;
  union mcp_sockaddr sa, sb;
  int bad = 0;

  for (int it = 0; it < 10000; it++) {
    rnd_handle(&h);
    memset(buf, 0xee, sizeof(buf));
    if (mcp_wire_handle_encode(&h, buf, err, sizeof(err)) != 0 ||
        mcp_wire_handle_decode(buf, &out, err, sizeof(err)) != 0 || !mcp_wire_handle_equal(&h, &out))
      bad++;
    /* The tail is zero but for the listener's capability: "MCPV" and its version. */
    for (int i = MCP_WIRE_HANDLE_TAIL_OFFSET; i < MCP_WIRE_HANDLE_SIZE; i++) {
      static const uint8_t cap[] = {'M', 'C', 'P', 'V', MCP_WIRE_VERSION};
      int k = i - MCP_WIRE_HANDLE_CAP_OFFSET;
      if (buf[i] != (k >= 0 && k < (int)sizeof(cap) ? cap[k] : 0))
        bad++;
    }
    if (out.max_version != MCP_WIRE_VERSION)
      bad++;
  }
  CHECK_EQ_INT(bad, 0);

  /* The layout NCCL's handle buffer sees. */
  h = (struct mcp_wire_handle){.family = 4,
                               .addr = {127, 0, 0, 1},
                               .port = 0x1234,
                               .dev = 3,
                               .listen_key = {0x1122334455667788ull, 0x99aabbccddeeff00ull},
                               .listen_id = 0x0a0b0c0d,
                               .nonce = 1};
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, buf, err, sizeof(err)), 0);
  CHECK(memcmp(buf, "NPCM\x04\x00\x04\x00\x7f\x00\x00\x01", 12) == 0);
  CHECK(buf[24] == 0x34 && buf[25] == 0x12 && buf[28] == 3 && buf[32] == 0x88 && buf[39] == 0x11);
  CHECK(buf[40] == 1 && buf[48] == 1);
  CHECK(buf[49] == 0x0d && buf[52] == 0x0a && buf[53] == 0x00 && buf[60] == 0x99 && buf[61] == 0);

  /* The caller's connect state in the tail does not disturb decoding. */
  memcpy(b, buf, sizeof(b));
  memset(b + MCP_WIRE_HANDLE_TAIL_OFFSET, 0xa5, MCP_WIRE_HANDLE_TAIL_SIZE);
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), 0);
  CHECK(mcp_wire_handle_equal(&h, &out));

  memcpy(b, buf, sizeof(b));
  b[3] = 0x00;
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "not an mcpnet handle (magic 0x0043504e, expected 0x4d43504e)") != NULL);
  memset(b, 0, sizeof(b)); /* what another plugin's zeroed handle would look like */
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "not an mcpnet handle (magic 0x00000000") != NULL);
  memcpy(b, buf, sizeof(b));
  b[4] = MCP_WIRE_VERSION + 1;
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EPROTONOSUPPORT);
  CHECK(strstr(err, "handle version 5 is newer than this build's version 4") != NULL);
  memcpy(b, buf, sizeof(b));
  b[6] = 5;
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "family 5") != NULL);
  memcpy(b, buf, sizeof(b));
  b[12] = 1; /* IPv4 with bytes past the first 4 */
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EBADMSG);
  memcpy(b, buf, sizeof(b));
  b[24] = b[25] = 0;
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "port is 0") != NULL);
  memcpy(b, buf, sizeof(b));
  b[26] = 1;
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EBADMSG);
  memcpy(b, buf, sizeof(b));
  b[31] = 0x80; /* negative device index */
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EBADMSG);
  memcpy(b, buf, sizeof(b));
  memset(b + 49, 0, 4); /* listen id 0 */
  CHECK_EQ_INT(mcp_wire_handle_decode(b, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "listen id is 0") != NULL);
  for (int i = 61; i < MCP_WIRE_HANDLE_TAIL_OFFSET; i++) {
    memcpy(b, buf, sizeof(b));
    b[i] = 1;
    if (mcp_wire_handle_decode(b, &out, err, sizeof(err)) != -EBADMSG) {
      fprintf(stderr, "nonzero reserved byte %d accepted\n", i);
      CHECK(0);
    }
  }
  h.port = 0;
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, buf, err, sizeof(err)), -EINVAL);

  /* Socket addresses in and out, both families. */
  CHECK_EQ_INT(mcp_sockaddr_parse("[fd00::2]:4242", &sa), 0);
  CHECK_EQ_INT(mcp_wire_handle_set_sockaddr(&h, &sa), 0);
  CHECK_EQ_INT(h.family, 6);
  CHECK_EQ_INT(h.port, 4242);
  mcp_wire_handle_get_sockaddr(&h, &sb);
  CHECK(mcp_sockaddr_equal(&sa, &sb));
  CHECK_EQ_INT(mcp_sockaddr_parse("127.0.0.1:9", &sa), 0);
  CHECK_EQ_INT(mcp_wire_handle_set_sockaddr(&h, &sa), 0);
  CHECK_EQ_INT(h.family, 4);
  CHECK(h.addr[4] == 0 && h.addr[15] == 0);
  mcp_wire_handle_get_sockaddr(&h, &sb);
  CHECK(mcp_sockaddr_equal(&sa, &sb));
  memset(&sa, 0, sizeof(sa));
  CHECK_EQ_INT(mcp_wire_handle_set_sockaddr(&h, &sa), -EAFNOSUPPORT);
}

/* ---- Hostile bytes ----------------------------------------------------------------- */

/* Random bytes (half of them behind a valid header so payload decoders are reached) and
 * random mutations of valid frames: decoding never crashes, and whatever decodes
 * re-encodes to exactly the input. */
static void test_random_bytes(void)
{
  uint8_t buf[MCP_WIRE_MSG_MAX + 64], again[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  struct mcp_wire_msg m;
  int decoded = 0, bad = 0;

  for (int it = 0; it < 200000; it++) {
    size_t len, len2;

    if (it % 2 == 0) {
      len = rnd_below(sizeof(buf));
      for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)rnd();
      if (it % 4 == 0 && len >= MCP_WIRE_HDR_SIZE) {
        put_u32(buf, MCP_WIRE_MAGIC);
        put_u16(buf + 4, MCP_WIRE_VERSION);
        put_u16(buf + 6, (uint16_t)(1 + rnd_below(MCP_WIRE_TYPE_MAX)));
        put_u32(buf + 8, (uint32_t)(len - MCP_WIRE_HDR_SIZE));
      }
    } else {
      rnd_msg(&m, (uint16_t)(1 + rnd_below(MCP_WIRE_TYPE_MAX)));
      len = encode_ok(&m, buf);
      for (uint32_t k = 1 + rnd_below(3); k > 0; k--)
        buf[rnd_below((uint32_t)len)] ^= (uint8_t)(1u << rnd_below(8));
    }
    if (mcp_wire_decode(buf, len, &m, err, sizeof(err)) != 0)
      continue;
    decoded++;
    if (mcp_wire_encode(&m, again, sizeof(again), &len2, err, sizeof(err)) != 0 || len2 != len ||
        memcmp(buf, again, len) != 0)
      bad++;
  }
  printf("  %d of 200000 hostile inputs decoded; all re-encoded identically: %s\n", decoded,
         bad == 0 ? "yes" : "NO");
  CHECK_EQ_INT(bad, 0);
  CHECK(decoded > 0);
}

/* ---- Through the socket layer ------------------------------------------------------ */

static void test_stream_through_rbuf(void)
{
  struct mcp_wire_msg sent[300], got;
  struct mcp_sock_sendq q;
  struct mcp_sock_rbuf rb;
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  int sv[2], n = 0, bad = 0;

  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  mcp_sock_sendq_init(&q, 1 << 20);
  mcp_sock_rbuf_init(&rb, MCP_WIRE_MAX_FRAME, mcp_wire_frame_len);
  for (int i = 0; i < 300; i++) {
    rnd_msg(&sent[i], (uint16_t)(1 + i % MCP_WIRE_TYPE_MAX));
    size_t len = encode_ok(&sent[i], buf);
    CHECK_EQ_INT(mcp_sock_sendq_push(&q, buf, len), 0);
  }
  for (int spin = 0; spin < 100000 && n < 300; spin++) {
    const uint8_t *f;
    size_t flen;
    int rc;

    CHECK(mcp_sock_sendq_flush(&q, sv[0]) >= 0);
    CHECK(mcp_sock_rbuf_fill(&rb, sv[1]) >= 0);
    while ((rc = mcp_sock_rbuf_next(&rb, &f, &flen, err, sizeof(err))) == 1) {
      if (mcp_wire_decode(f, flen, &got, err, sizeof(err)) != 0 || !mcp_wire_msg_equal(&got, &sent[n]))
        bad++;
      n++;
    }
    CHECK(rc == 0);
  }
  CHECK_EQ_INT(n, 300);
  CHECK_EQ_INT(bad, 0);

  /* A stray client's text is refused at its first bytes, with the reason. */
  const uint8_t *f;
  size_t flen;
  CHECK_EQ_INT(send(sv[0], "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL), 18);
  for (int spin = 0; spin < 1000 && mcp_sock_rbuf_pending(&rb) == 0; spin++)
    mcp_sock_rbuf_fill(&rb, sv[1]);
  CHECK_EQ_INT(mcp_sock_rbuf_next(&rb, &f, &flen, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "not an mcpnet frame") != NULL);
  mcp_sock_sendq_free(&q);
  mcp_sock_rbuf_free(&rb);
  close(sv[0]);
  close(sv[1]);
}

/* Version 3 (NIC fusion) and 4 (authentication, 8 members): frames and handles are
 * written as version 4 unless an older version is asked for (tests, the seed corpus); an
 * explicit version 2 writes a one-device endpoint without the member count, byte for
 * byte what a version-2 build decodes, and cannot carry a fused one; version 3 carries 4
 * members at most (its decoders refuse more), version 4 eight; member counts outside
 * those and members with bad fields are refused with the field named; the handle carries
 * the listener's member count from version 3 on and its listen id and 128-bit key from 4. */
static void test_versions(void)
{
  struct mcp_wire_msg m, out;
  uint8_t buf[MCP_WIRE_MSG_MAX], b[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len, len2, len3;
  struct mcp_wire_handle h, ho;
  uint8_t hb[MCP_WIRE_HANDLE_SIZE];

  do
    rnd_msg(&m, MCP_WIRE_CONN_REQ);
  while (m.u.conn_req.ep.ndevs != 0);
  len = encode_ok(&m, buf);
  CHECK_EQ_INT(buf[4], 4);
  m.version = 3;
  m.u.conn_req.listen_token = 0x77;
  len3 = encode_ok(&m, buf);
  CHECK_EQ_INT(buf[4], 3);
  m.version = 2;
  len2 = encode_ok(&m, buf);
  CHECK_EQ_INT(buf[4], 2);
  CHECK_EQ_INT((int)len3, (int)len2 + 1); /* the member count is version 3's only extra byte */
  CHECK_EQ_INT((int)len, (int)len3 + 4);  /* a listen id and MAC (12) where the token (8) was */
  CHECK_EQ_INT(mcp_wire_decode(buf, len2, &out, err, sizeof(err)), 0);
  CHECK_EQ_INT(out.version, 2);
  CHECK_EQ_INT(out.u.conn_req.listen_token, 0x77);
  CHECK_EQ_INT(out.u.conn_req.ep.ndevs, 1);

  m.version = 0;
  m.u.conn_req.listen_token = 0;
  m.u.conn_req.ep.ndevs = 2;
  snprintf(m.u.conn_req.ep.more[0].dev_name, sizeof(m.u.conn_req.ep.more[0].dev_name), "mlx5_1");
  m.u.conn_req.ep.more[0].port = 2;
  m.u.conn_req.ep.more[0].active_mtu = 5;
  m.u.conn_req.ep.more[0].gid_index = 3;
  m.u.conn_req.ep.more[0].gid[15] = 7;
  m.u.conn_req.ep.more[0].lid = 0x1234;
  m.u.conn_req.ep.more[0].ring_rkey = 0xabcdef01;
  len = encode_ok(&m, buf);
  CHECK_EQ_INT(buf[4], 4);
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), 0);
  CHECK(mcp_wire_msg_equal(&m, &out));
  CHECK(out.u.conn_req.ep.more[0].ring_rkey == 0xabcdef01u);
  CHECK(strcmp(out.u.conn_req.ep.more[0].dev_name, "mlx5_1") == 0);
  /* The member's rkey is compared: an endpoint with another one is not equal. */
  out.u.conn_req.ep.more[0].ring_rkey ^= 1;
  CHECK(!mcp_wire_msg_equal(&m, &out));

  m.version = 2;
  CHECK_EQ_INT(mcp_wire_encode(&m, b, sizeof(b), &len2, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "fused endpoint (2 members) needs version 3") != NULL);
  m.version = 0;

  /* Member count byte: right after the fingerprint's last field, 1 + 2 + 65 + ... from the
   * end: the one member's entry is 2 + 6 + 3 + 16 + 2 + 4 = 33 bytes, so the count is 34
   * bytes before the end. */
  memcpy(b, buf, len);
  CHECK_EQ_INT(b[len - 34], 2);
  b[len - 34] = 0;
  expect_reject(b, len, -EBADMSG, "member count 0 is not 1..8");
  b[len - 34] = 9;
  expect_reject(b, len, -EBADMSG, "member count 9 is not 1..8");
  b[len - 34] = 8; /* says 8 members, carries 1: truncated */
  expect_reject(b, len, -EBADMSG, "truncated");
  /* Version 3 stays at 4 members: its frame says 5 and is refused before the members. */
  m.version = 3;
  len3 = encode_ok(&m, b);
  CHECK_EQ_INT(b[4], 3);
  CHECK_EQ_INT(b[len3 - 34], 2);
  b[len3 - 34] = 5;
  expect_reject(b, len3, -EBADMSG, "member count 5 is not 1..4");
  m.version = 0;
  memcpy(b, buf, len);
  b[len - 34 + 1 + 2 + 6] = 0; /* member port 0 */
  expect_reject(b, len, -EBADMSG, "member port 0 is not >= 1");
  memcpy(b, buf, len);
  b[len - 34 + 1 + 2 + 7] = 9; /* member MTU enum 9 */
  expect_reject(b, len, -EBADMSG, "member active MTU enum 9 is not 1..5");
  memcpy(b, buf, len);
  b[len - 34 + 1] = 0; /* member name of length 0 */
  b[len - 34 + 2] = 0;
  expect_reject(b, len, -EBADMSG, "");

  /* The handle: version 4 by default, whatever its member count; versions 2 and 3 only
   * when asked for, without the listen id and the key's second half. */
  memset(&h, 0, sizeof(h));
  h.family = 4;
  h.addr[0] = 10;
  h.port = 4000;
  h.dev = 2;
  h.listen_key[0] = 77;
  h.listen_key[1] = 78;
  h.listen_id = 79;
  h.nonce = 99;
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, hb, err, sizeof(err)), 0);
  CHECK_EQ_INT(hb[4], 4);
  CHECK_EQ_INT(hb[48], 1);
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), 0);
  CHECK_EQ_INT(ho.ndevs, 1);
  CHECK(mcp_wire_handle_equal(&h, &ho) || h.ndevs == 0);
  h.ndevs = 2;
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, hb, err, sizeof(err)), 0);
  CHECK_EQ_INT(hb[4], 4);
  CHECK_EQ_INT(hb[48], 2);
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), 0);
  CHECK_EQ_INT(ho.ndevs, 2);
  CHECK(mcp_wire_handle_equal(&h, &ho));
  hb[48] = 0;
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "member count 0") != NULL);
  hb[48] = 9;
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "member count 9 is not 1..8") != NULL);
  hb[48] = 8; /* NCCL 2.30's most */
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), 0);
  CHECK_EQ_INT(ho.ndevs, 8);
  /* Version 3: 4 members at most, both ways. */
  h.version = 3;
  h.ndevs = 5;
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, hb, err, sizeof(err)), -EINVAL);
  h.ndevs = 4;
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, hb, err, sizeof(err)), 0);
  CHECK_EQ_INT(hb[4], 3);
  hb[48] = 5;
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "member count 5 is not 1..4") != NULL);
  h.ndevs = 2;
  h.version = 2;
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, hb, err, sizeof(err)), -EINVAL); /* two members */
  h.ndevs = 1;
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, hb, err, sizeof(err)), 0);
  CHECK_EQ_INT(hb[4], 2);
  CHECK_EQ_INT(hb[48], 0);
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), 0);
  CHECK_EQ_INT(ho.version, 2);
  CHECK_EQ_INT(ho.listen_id, 0);
  CHECK_EQ_INT(ho.listen_key[1], 0);
  hb[48] = 1; /* a version-2 handle has nothing at byte 48 */
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "unused byte 48") != NULL);
  h.version = 3;
  CHECK_EQ_INT(mcp_wire_handle_encode(&h, hb, err, sizeof(err)), 0);
  CHECK_EQ_INT(hb[4], 3);
  CHECK_EQ_INT(hb[49], 0); /* no listen id before version 4 */
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), 0);
  CHECK_EQ_INT(ho.max_version, MCP_WIRE_VERSION); /* the tail says what the listener speaks */
  memset(hb + MCP_WIRE_HANDLE_TAIL_OFFSET, 0, MCP_WIRE_HANDLE_TAIL_SIZE); /* as version 2 wrote it */
  CHECK_EQ_INT(mcp_wire_handle_decode(hb, &ho, err, sizeof(err)), 0);
  CHECK_EQ_INT(ho.max_version, 3);
}

/* The largest endpoint NCCL 2.30 can make, 8 members, goes through version 4 field for
 * field (every member's name, port, MTU, GID, LID and ring key), is refused as version 3
 * with the version it needs named, and the largest RECOVER of 128 QPs and 8 members with
 * the longest names fits MCP_WIRE_MSG_MAX. */
static void test_eight_members(void)
{
  struct mcp_wire_msg m, out;
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len;

  rnd_msg(&m, MCP_WIRE_RECOVER);
  m.u.recover.ep.nqps = MCP_WIRE_MAX_QPS;
  memset(m.u.recover.ep.dev_name, 'd', MCP_WIRE_DEVNAME_MAX);
  m.u.recover.ep.dev_name[MCP_WIRE_DEVNAME_MAX] = '\0';
  m.u.recover.ep.ndevs = MCP_WIRE_MAX_MEMBERS;
  for (int k = 1; k < MCP_WIRE_MAX_MEMBERS; k++) {
    struct mcp_wire_member *mb = &m.u.recover.ep.more[k - 1];

    memset(mb->dev_name, 'a' + k, MCP_WIRE_DEVNAME_MAX);
    mb->dev_name[MCP_WIRE_DEVNAME_MAX] = '\0';
    mb->port = (uint8_t)k;
    mb->active_mtu = (uint8_t)(1 + k % 5);
    mb->gid_index = (uint8_t)(10 + k);
    for (int i = 0; i < 16; i++)
      mb->gid[i] = (uint8_t)(k * 16 + i);
    mb->lid = (uint16_t)(0x100 * k);
    mb->ring_rkey = 0xabc00000u + (uint32_t)k;
  }
  len = encode_ok(&m, buf);
  CHECK(len <= MCP_WIRE_MSG_MAX);
  printf("  RECOVER of 128 QPs and 8 members: %zu bytes (MCP_WIRE_MSG_MAX %d)\n", len, MCP_WIRE_MSG_MAX);
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), 0);
  CHECK(mcp_wire_msg_equal(&m, &out));
  CHECK_EQ_INT(out.u.recover.ep.ndevs, 8);
  CHECK(out.u.recover.ep.more[6].ring_rkey == 0xabc00007u);
  CHECK_EQ_INT(out.u.recover.ep.more[6].lid, 0x700);
  CHECK_EQ_INT(out.u.recover.ep.more[6].dev_name[0], 'h');
  m.version = 3;
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "fused endpoint (8 members) needs version 4, not 3") != NULL);
  m.u.recover.ep.ndevs = 4; /* what version 3 still carries */
  len = encode_ok(&m, buf);
  CHECK_EQ_INT(buf[4], 3);
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), 0);
  CHECK_EQ_INT(out.u.recover.ep.ndevs, 4);
  m.version = 0;
  m.u.recover.ep.ndevs = 9;
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "member count 9 is not 1..8") != NULL);
}

/* Strings from another host are printable ASCII or refused: a host name with a newline
 * (a forged log line) does not decode, with the field named; the encoder refuses to
 * write one, and the make-printable rule senders apply turns it into '?'. */
static void test_strings_printable(void)
{
  struct mcp_wire_msg m, out;
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN], host[32], esc[64];
  size_t len;
  int at;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_HELLO;
  m.u.hello.challenge = 1;
  strcpy(m.u.hello.hostname, "node7");
  len = encode_ok(&m, buf);
  at = MCP_WIRE_HDR_SIZE + 8 + 4 + 2; /* the host name's bytes */
  CHECK(memcmp(buf + at, "node7", 5) == 0);
  buf[at + 2] = '\n';
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), -EBADMSG);
  CHECK(strstr(err, "host name contains a byte that is not printable ASCII") != NULL);
  buf[at + 2] = (char)0xc3; /* not ASCII either */
  CHECK_EQ_INT(mcp_wire_decode(buf, len, &out, err, sizeof(err)), -EBADMSG);
  m.u.hello.hostname[2] = '\n';
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  strcpy(host, "a\nNCCL WARN x\t");
  CHECK_EQ_STR(mcp_text_make_printable(host), "a?NCCL WARN x?");
  CHECK_EQ_STR(mcp_text_escape("a\nb\\c\x7f", 7, esc, sizeof(esc)), "a\\x0ab\\x5cc\\x7f");
  CHECK_EQ_STR(mcp_text_escape("abcdef", 6, esc, 4), "abc"); /* cut to fit */
  /* A reason and a device name are held to the same rule. */
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REJECT;
  strcpy(m.u.reject.reason, "bad\rreason");
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  rnd_msg(&m, MCP_WIRE_CONN_ACK);
  strcpy(m.u.conn_ack.dev_name, "mlx5\x1b[0m");
  CHECK_EQ_INT(mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "not printable") != NULL);
}

int main(void)
{
  RUN_TEST(test_roundtrip_property);
  RUN_TEST(test_golden_bytes);
  RUN_TEST(test_golden_fused_endpoint);
  RUN_TEST(test_recover_needs_version_2);
  RUN_TEST(test_recover_member_masks);
  RUN_TEST(test_truncation_every_length);
  RUN_TEST(test_payload_truncation);
  RUN_TEST(test_corrupted_header);
  RUN_TEST(test_corrupted_fields);
  RUN_TEST(test_encode_errors);
  RUN_TEST(test_endpoint_equal);
  RUN_TEST(test_handle);
  RUN_TEST(test_versions);
  RUN_TEST(test_eight_members);
  RUN_TEST(test_strings_printable);
  RUN_TEST(test_random_bytes);
  RUN_TEST(test_stream_through_rbuf);
  return TEST_EXIT();
}
