/*
 * fuzz_wire.c - the libFuzzer target for the handshake decoders, and its plain driver.
 *
 * The target feeds arbitrary bytes to the frame decoder, the stream's frame-length
 * callback and the handle decoder; whatever decodes must re-encode to exactly the
 * same bytes (the format is canonical), or the target aborts. Built with clang's
 * -fsanitize=fuzzer (MCP_FUZZ_LIBFUZZER defined) it is the fuzzer; built with any
 * compiler it is a driver that writes a seed corpus (--write-corpus DIR: valid frames
 * of every type at both size extremes, and handles of both families) and replays files
 * or folders through the same target (--all-valid: and requires each to decode), so
 * gcc builds still check the corpus.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conn/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *what)
{
  fprintf(stderr, "fuzz_wire: %s\n", what);
  abort();
}

static void fuzz_frame(const uint8_t *data, size_t size)
{
  uint8_t again[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  struct mcp_wire_msg m;
  size_t len = 0, flen = 0;
  int frc;

  frc = mcp_wire_frame_len(data, size, &flen, err, sizeof(err));
  if (frc == 1 && (flen < MCP_WIRE_HDR_SIZE || flen > MCP_WIRE_MAX_FRAME))
    fuzz_fail("frame_len out of bounds");
  if (mcp_wire_decode(data, size, &m, err, sizeof(err)) != 0) {
    if (err[0] == '\0')
      fuzz_fail("decode failed without a reason");
    return;
  }
  if (frc != 1 || flen != size)
    fuzz_fail("decode accepted what frame_len did not delimit");
  if (mcp_wire_encode(&m, again, sizeof(again), &len, err, sizeof(err)) != 0)
    fuzz_fail("a decoded frame does not re-encode");
  if (len != size || memcmp(again, data, size) != 0)
    fuzz_fail("re-encoding differs from the decoded bytes");
}

static void fuzz_handle(const uint8_t *data, size_t size)
{
  uint8_t in[MCP_WIRE_HANDLE_SIZE], again[MCP_WIRE_HANDLE_SIZE];
  char err[MCP_WIRE_ERRLEN];
  struct mcp_wire_handle h;

  /* The handle is always NCCL's 128-byte buffer; shorter inputs are zero-padded. */
  memset(in, 0, sizeof(in));
  memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
  if (mcp_wire_handle_decode(in, &h, err, sizeof(err)) != 0)
    return;
  if (mcp_wire_handle_encode(&h, again, err, sizeof(err)) != 0)
    fuzz_fail("a decoded handle does not re-encode");
  if (memcmp(again, in, MCP_WIRE_HANDLE_TAIL_OFFSET) != 0)
    fuzz_fail("handle re-encoding differs");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_frame(data, size);
  fuzz_handle(data, size);
  return 0;
}

#ifndef MCP_FUZZ_LIBFUZZER

/* ---- Seed corpus ------------------------------------------------------------------ */

static void seed_endpoint(struct mcp_wire_endpoint *ep, int big)
{
  memset(ep, 0, sizeof(*ep));
  ep->stream_id = big ? 0xfffffffeu : 1;
  if (big)
    memset(ep->dev_name, 'm', MCP_WIRE_DEVNAME_MAX);
  else
    strcpy(ep->dev_name, "rxe0");
  ep->port = 1;
  ep->link_layer = big ? MCP_WIRE_LINK_IB : MCP_WIRE_LINK_ETHERNET;
  ep->active_mtu = big ? 5 : 3;
  ep->gid_index = big ? 255 : 1;
  for (int i = 0; i < 16; i++)
    ep->gid[i] = (uint8_t)(big ? 0xf0 + i : (i >= 10 ? 0xff : 0));
  ep->lid = big ? 0xbfff : 0;
  ep->nqps = big ? MCP_WIRE_MAX_QPS : 1;
  for (int i = 0; i < ep->nqps; i++)
    ep->qps[i] = (struct mcp_wire_qp){(uint32_t)(0x11 + i), big ? 0xffffffu : 0};
  ep->ring_addr = big ? 0x7fffffffffffull : 0x1000;
  ep->ring_rkey = 0x1234;
  ep->ring_slots = big ? 256 : 8;
  ep->fp = (struct mcp_wire_fingerprint){.plugin_version = 0x000100,
                                         .gid_type = big ? MCP_WIRE_GID_IB : MCP_WIRE_GID_ROCE_V2,
                                         .gid_family = big ? 0 : 4,
                                         .pkey = 0xffff,
                                         .sl = big ? 15 : 0,
                                         .tc = big ? 255 : 0,
                                         .timeout = big ? 31 : 20,
                                         .retry = 7,
                                         .rnr_retry = 6,
                                         .qps_per_conn = big ? 16 : 1,
                                         .speed_mbps = big ? 400000 : 10000,
                                         .max_message = 1u << 30};
}

/* The largest fused endpoint of its version (version 3: 4 members, 4: 8), longest names. */
static void seed_members(struct mcp_wire_endpoint *ep, unsigned version)
{
  int n = version >= MCP_WIRE_VERSION_AUTH ? MCP_WIRE_MAX_MEMBERS : MCP_WIRE_MAX_MEMBERS_V3;

  ep->ndevs = (uint8_t)n;
  for (int k = 1; k < n; k++) {
    struct mcp_wire_member *mb = &ep->more[k - 1];

    memset(mb->dev_name, 'a' + k, MCP_WIRE_DEVNAME_MAX);
    mb->dev_name[MCP_WIRE_DEVNAME_MAX] = '\0';
    mb->port = (uint8_t)(1 + k);
    mb->active_mtu = 5;
    mb->gid_index = (uint8_t)(3 + k);
    for (int i = 0; i < 16; i++)
      mb->gid[i] = (uint8_t)(0xe0 + i + k);
    mb->lid = (uint16_t)(0x100 + k);
    mb->ring_rkey = 0x5000u + (uint32_t)k;
  }
}

static void seed_msg(struct mcp_wire_msg *m, uint16_t type, int big)
{
  memset(m, 0, sizeof(*m));
  m->type = type;
  m->stream_id = big ? 0xffffffffu : 0;
  switch (type) {
  case MCP_WIRE_HELLO:
    m->u.hello.nonce = big ? ~0ull : 1;
    m->u.hello.pid = big ? 4194304 : 1;
    if (big) {
      memset(m->u.hello.hostname, 'h', MCP_WIRE_HOSTNAME_MAX);
      memset(m->u.hello.plugin_version, 'v', MCP_WIRE_VERSTR_MAX);
    }
    m->u.hello.local_rank = big ? 7 : -1;
    m->u.hello.challenge = big ? ~0ull : 1; /* version 4's fields; older ones ignore them */
    m->u.hello.listen_id = big ? ~0u : 0;
    m->u.hello.proof = big ? ~0ull : 0;
    break;
  case MCP_WIRE_CONN_REQ:
    m->u.conn_req.listen_token = big ? ~0ull : 42; /* versions 1-3 */
    m->u.conn_req.listen_id = big ? ~0u : 1;       /* version 4 */
    m->u.conn_req.mac = big ? ~0ull : 0x0102030405060708ull;
    seed_endpoint(&m->u.conn_req.ep, big);
    break;
  case MCP_WIRE_CONN_ACK: seed_endpoint(&m->u.conn_ack, big); break;
  case MCP_WIRE_CONN_REJECT:
    m->u.reject.code = big ? MCP_WIRE_REJECT_INTERNAL : MCP_WIRE_REJECT_NO_LISTENER;
    if (big)
      memset(m->u.reject.reason, 'r', MCP_WIRE_REASON_MAX);
    else
      strcpy(m->u.reject.reason, "no listen with token 42");
    break;
  case MCP_WIRE_CLOSE: m->u.close_stream_id = big ? 0xffffffffu : 3; break;
  case MCP_WIRE_PING:
  case MCP_WIRE_PONG: m->u.cookie = big ? ~0ull : 0x0102030405060708ull; break;
  case MCP_WIRE_RECOVER:
    m->u.recover.round = big ? ~0u : 1;
    m->u.recover.step = big ? MCP_WIRE_RECOVER_READY : MCP_WIRE_RECOVER_QPS;
    m->u.recover.next_seq = big ? ~0u : 65;
    for (int i = 0; i < MCP_WIRE_RECOVER_SLOTS; i++)
      m->u.recover.done[i] = big ? ~0u - (uint32_t)i : (uint32_t)(i + 1);
    seed_endpoint(&m->u.recover.ep, big);
    m->u.recover.up = m->u.recover.live =
      (uint8_t)((1u << (m->u.recover.ep.ndevs > 1 ? m->u.recover.ep.ndevs : 1)) - 1u);
    break;
  default: break;
  }
}

static int write_file(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
  char path[4096];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL || fwrite(buf, 1, len, f) != len) {
    fprintf(stderr, "fuzz_wire: cannot write %s: %s\n", path, strerror(errno));
    if (f != NULL)
      fclose(f);
    return -1;
  }
  return fclose(f) == 0 ? 0 : -1;
}

static int write_corpus(const char *dir)
{
  uint8_t buf[MCP_WIRE_MSG_MAX], handle[MCP_WIRE_HANDLE_SIZE];
  char err[MCP_WIRE_ERRLEN], name[64];
  struct mcp_wire_msg m;
  struct mcp_wire_handle h;
  int n = 0;

  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "fuzz_wire: cannot create %s: %s\n", dir, strerror(errno));
    return 1;
  }
  /* Every frame type of every version: version 1 ends at PONG. */
  for (uint16_t v = 1; v <= MCP_WIRE_VERSION; v++) {
    for (uint16_t t = 1; t <= (v == 1 ? MCP_WIRE_PONG : MCP_WIRE_TYPE_MAX); t++) {
      for (int big = 0; big <= 1; big++) {
        size_t len;

        seed_msg(&m, t, big);
        m.version = v;
        if (v >= MCP_WIRE_VERSION_FUSION && big) {
          if (t == MCP_WIRE_CONN_REQ)
            seed_members(&m.u.conn_req.ep, v);
          else if (t == MCP_WIRE_CONN_ACK)
            seed_members(&m.u.conn_ack, v);
          else if (t == MCP_WIRE_RECOVER)
            seed_members(&m.u.recover.ep, v);
        }
        if (mcp_wire_encode(&m, buf, sizeof(buf), &len, err, sizeof(err)) != 0) {
          fprintf(stderr, "fuzz_wire: seed v%u %s: %s\n", v, mcp_wire_type_name(t), err);
          return 1;
        }
        snprintf(name, sizeof(name), "v%u-%s-%s", v, mcp_wire_type_name(t), big ? "max" : "min");
        if (write_file(dir, name, buf, len) != 0)
          return 1;
        n++;
      }
    }
  }
  /* Handles of every version from 2, both families: version 2 of one member, 3 and 4
   * fused (on IPv6 the most each carries: 4 members in version 3, 8 in 4), 4 with its
   * listen id and key. */
  for (uint16_t v = 2; v <= MCP_WIRE_VERSION; v++) {
    for (int fam = 4; fam <= 6; fam += 2) {
      h = (struct mcp_wire_handle){.version = v,
                                   .family = (uint16_t)fam,
                                   .port = 40001,
                                   .dev = fam == 4 ? 0 : 3,
                                   .listen_key = {0x5eed5eed5eed5eedull, 0x0123456789abcdefull},
                                   .listen_id = 0x1d1d1d1du,
                                   .nonce = 0xabcdef,
                                   .ndevs = (uint8_t)(v < MCP_WIRE_VERSION_FUSION   ? 1
                                                        : fam == 4                  ? 2
                                                        : v < MCP_WIRE_VERSION_AUTH ? MCP_WIRE_MAX_MEMBERS_V3
                                                                                    : MCP_WIRE_MAX_MEMBERS)};
      h.addr[0] = h.family == 4 ? 127 : 0xfd;
      h.addr[h.family == 4 ? 3 : 15] = 1;
      if (mcp_wire_handle_encode(&h, handle, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_wire: seed handle: %s\n", err);
        return 1;
      }
      snprintf(name, sizeof(name), "v%u-handle-ipv%d", v, h.family);
      if (write_file(dir, name, handle, sizeof(handle)) != 0)
        return 1;
      n++;
    }
  }
  printf("fuzz_wire: wrote %d seeds to %s\n", n, dir);
  return 0;
}

/* ---- Replay ----------------------------------------------------------------------- */

/* With --all-valid every input must decode as a frame or a handle: the checked-in seeds
 * then double as a compatibility check on the format. */
static int replay_all_valid;

static int decodes(const uint8_t *buf, size_t len)
{
  char err[MCP_WIRE_ERRLEN];
  struct mcp_wire_msg m;
  struct mcp_wire_handle h;

  if (mcp_wire_decode(buf, len, &m, err, sizeof(err)) == 0)
    return 1;
  return len == MCP_WIRE_HANDLE_SIZE && mcp_wire_handle_decode(buf, &h, err, sizeof(err)) == 0;
}

static int replay_file(const char *path, int *count)
{
  static uint8_t buf[MCP_WIRE_MAX_FRAME + 1024];
  FILE *f = fopen(path, "rb");
  size_t len;

  if (f == NULL) {
    fprintf(stderr, "fuzz_wire: cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  len = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, len);
  (*count)++;
  if (replay_all_valid && !decodes(buf, len)) {
    fprintf(stderr, "fuzz_wire: %s does not decode\n", path);
    return -1;
  }
  return 0;
}

static int replay(const char *path, int *count)
{
  struct stat st;
  struct dirent *e;
  DIR *d;
  char sub[4096];
  int rc = 0;

  if (stat(path, &st) != 0) {
    fprintf(stderr, "fuzz_wire: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode))
    return replay_file(path, count);
  d = opendir(path);
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL && rc == 0) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
    rc = replay_file(sub, count);
  }
  closedir(d);
  return rc;
}

int main(int argc, char **argv)
{
  int count = 0, first = 1;

  if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
    return write_corpus(argv[2]);
  if (argc > 1 && strcmp(argv[1], "--all-valid") == 0) {
    replay_all_valid = 1;
    first = 2;
  }
  if (argc <= first) {
    fprintf(stderr, "usage: %s --write-corpus DIR | [--all-valid] FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  for (int i = first; i < argc; i++)
    if (replay(argv[i], &count) != 0)
      return 1;
  printf("fuzz_wire: %d inputs replayed, no failure\n", count);
  return count > 0 ? 0 : 1;
}

#endif
