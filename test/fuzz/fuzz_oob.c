/*
 * fuzz_oob.c - the fuzz target for what a stranger reaches on the out-of-band channel:
 * stream reassembly (frames split and joined at arbitrary points), dispatch, and the
 * connection's handshake state machine in both roles, over socketpairs joined to the
 * process's channel (mcp_oob_test_adopt, mcp_oob_test_dial). The first byte picks where
 * the input starts:
 *   0  an accepted connection, from its first byte;
 *   1  an accepted connection after a genuine dialler's HELLO for a live listen;
 *   2  the same after a valid request too (a proved peer: stream frames, PINGs, ...);
 *   3  a connection we dialled, after our HELLO (the input plays the acceptor);
 *   4  the same after a genuine acceptor's HELLO with its proof.
 * The second byte seeds the split points. After the input the far end closes and the
 * clock moves on: every connection must be gone, no request may outlive its listen's cap.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_target.h"
#include "mcp_oob_fake.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"

static uint64_t now_ms = 1000000;
static uint64_t fake_now(void) { return now_ms * MCP_NS_PER_MS; }
static struct mcp_oob_listener *listener;
static const struct mcp_oob_cred far_cred = {.listen_id = 0x7e57, .key = {0x1111, 0x2222}};

static void quiet(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                  ...)
{
  (void)level;
  (void)flags;
  (void)file;
  (void)line;
  (void)fmt;
}

static void fuzz_fail(const char *what)
{
  fprintf(stderr, "fuzz_oob: %s\n", what);
  abort();
}

static void turn(void) { mcp_oob_progress(); }

static int setup(void)
{
  struct mcp_config cfg;

  memset(&cfg, 0, sizeof(cfg));
  cfg.socket_ifname = "lo";
  cfg.socket_af = AF_INET;
  cfg.connect_timeout_s = 5;
  mcp_log_set_logger(quiet);
  mcp_clock_test_set(fake_now);
  if (mcp_oob_acquire(&cfg) != 0)
    return -1;
  listener = mcp_oob_listener_add();
  return listener != NULL ? 0 : -1;
}

/* What the channel wrote is read and dropped, as a peer that reads would. */
static void drain(int fd)
{
  char buf[4096];

  while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
    ;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static int ready;
  union mcp_sockaddr from;
  struct mcp_oob_stream *s = NULL;
  struct mcp_oob_request *req;
  uint64_t chal_acc = 0, chal_dial = 0;
  unsigned peers, unauth, seed;
  int sv[2], mode;
  size_t off;

  if (!ready && setup() != 0)
    fuzz_fail("cannot start the channel on lo");
  ready = 1;
  if (size < 2)
    return 0;
  mode = data[0] % 5;
  seed = data[1];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
    return 0;
  /* Loopback only: a connection we dialled may be told to dial again (SILENT), and port 1
   * refuses it at once; nothing leaves this host. */
  mcp_sockaddr_parse(mode <= 2 ? "127.77.0.1:4000" : "127.0.0.1:1", &from);
  if (mode <= 2) {
    if (mcp_oob_test_adopt(sv[1], &from) != 0)
      fuzz_fail("adopt");
    if (mode >= 1 && fake_dial_handshake(sv[0], 0x1234, &listener->cred, &chal_acc, &chal_dial, turn) != 0)
      fuzz_fail("a genuine dialler was not answered as the owner of the listen");
    if (mode == 2 && fake_send_request(sv[0], &listener->cred, chal_acc, chal_dial, 7, 0) != 0)
      fuzz_fail("request");
  } else {
    struct mcp_wire_msg m, h;

    s = mcp_oob_test_dial(sv[1], &from, 0x4242, &far_cred);
    if (s == NULL || fake_read_msg(sv[0], &m, turn) != 1 || m.type != MCP_WIRE_HELLO)
      fuzz_fail("our HELLO");
    if (mode == 4) {
      h = fake_hello(0x4242, 99, 0, mcp_oob_mac_acceptor(&far_cred, 99, m.u.hello.challenge, 0x4242));
      if (fake_send_msg(sv[0], &h) != 0)
        fuzz_fail("their HELLO");
    }
  }
  /* The input, cut at points the second byte chooses. */
  for (off = 2; off < size;) {
    size_t chunk = 1 + (seed = seed * 1103515245u + 12345u) % 97u;

    if (chunk > size - off)
      chunk = size - off;
    if (send(sv[0], data + off, chunk, MSG_NOSIGNAL) < 0)
      break;
    off += chunk;
    mcp_oob_progress();
    drain(sv[0]);
    if (s != NULL) {
      struct mcp_wire_msg m;

      while (mcp_oob_stream_recv(s, &m) == 1)
        ;
    }
  }
  close(sv[0]);
  for (int i = 0; i < 4; i++)
    mcp_oob_progress();
  while (mcp_oob_listener_take(listener, &req)) {
    mcp_oob_request_free(req);
  }
  if (s != NULL)
    mcp_oob_stream_close(s, 0);
  now_ms += MCP_OOB_AUTH_TIMEOUT_MS + 1000;
  for (int i = 0; i < 4; i++)
    mcp_oob_progress();
  mcp_oob_test_count(&peers, &unauth);
  if (peers != 0)
    fuzz_fail("a connection outlived its far end's close");
  return 0;
}

int fuzz_seeds(const char *dir, fuzz_write_fn write)
{
  uint8_t buf[2 + 3 * MCP_WIRE_MSG_MAX];
  struct mcp_wire_msg m;
  char name[32], err[MCP_WIRE_ERRLEN];
  size_t len;
  int rc = 0;

  /* Each mode with a frame of each type after its prefix, split by seed 7. */
  for (int mode = 0; mode < 5; mode++) {
    for (uint16_t t = 1; t <= MCP_WIRE_TYPE_MAX; t++) {
      memset(&m, 0, sizeof(m));
      m.type = t;
      m.stream_id = 1;
      if (t == MCP_WIRE_HELLO)
        m = fake_hello(5, 6, 0x7e57, 0);
      if (t == MCP_WIRE_CONN_REQ || t == MCP_WIRE_CONN_ACK)
        m.u.conn_req.ep = fake_endpoint(1);
      if (t == MCP_WIRE_CONN_ACK)
        m.u.conn_ack = fake_endpoint(1);
      if (t == MCP_WIRE_RECOVER) {
        m.u.recover.round = 1;
        m.u.recover.step = MCP_WIRE_RECOVER_QPS;
        m.u.recover.ep = fake_endpoint(1);
        m.u.recover.up = m.u.recover.live = 1;
      }
      buf[0] = (uint8_t)mode;
      buf[1] = 7;
      if (mcp_wire_encode(&m, buf + 2, sizeof(buf) - 2, &len, err, sizeof(err)) != 0)
        return -1;
      snprintf(name, sizeof(name), "mode%d-%s", mode, mcp_wire_type_name(t));
      rc |= write(dir, name, buf, len + 2);
    }
  }
  return rc != 0 ? -1 : 0;
}
