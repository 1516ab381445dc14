/*
 * test_conn_oob.c - the out-of-band channel's rules for late peers, over loopback, with the
 * channel's clock replaced so that minutes pass without waiting for them:
 * - an outgoing connection that the peer's kernel accepted waits for the HELLO as long as
 *   TCP holds it (a busy or late peer process), and dies at once on FIN;
 * - an incoming connection that stays silent (a stray client) is still dropped after 10 s,
 *   with a SILENT notice first and nothing else (the acceptor speaks second), while a
 *   real peer that proved itself on the same listener stays up;
 * - a dialler told SILENT (it dialled, then made no call for 10 s) dials again instead of
 *   failing its streams;
 * - the INFO/WARN schedule for a long wait;
 * - frames that arrive split over many reads, or several in one, reach their stream
 *   whole and in order; a peer's CONN_REJECT reaches the stream it names;
 * - a drained stream's inbox, handed to the next stream that gets a frame, keeps every
 *   stream's frames its own and in order;
 * - a peer that closes (FIN) or resets (RST) in the middle of a frame kills the stream,
 *   and the FIN case says how many bytes of the frame were left.
 * The fake peers are plain sockets that speak the wire format by hand (mcp_oob_fake.h);
 * what strangers can and cannot do is test_conn_oob_trust.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp_oob_fake.h"
#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "conn/oob.h"

static uint64_t fake_ms = 1000000;
/* The library's one clock (clock.h) reads this, in ns. */
static uint64_t fake_now(void) { return fake_ms * MCP_NS_PER_MS; }

static void turn(void) { mcp_oob_progress(); }
static void sleep_ms(unsigned ms) { fake_sleep_ms(ms); }
static int send_msg(int fd, const struct mcp_wire_msg *m) { return fake_send_msg(fd, m); }
static int read_msg(int fd, struct mcp_wire_msg *m) { return fake_read_msg(fd, m, turn); }

/* The listen our fake acceptors pretend to hold (their handle's id and key). */
static const struct mcp_oob_cred peer_cred = {.listen_id = 0x7001,
                                              .key = {0x1111222233334444ull, 0x5555666677778888ull}};

/* Progress until the stream's connection reaches phase (or some thousand turns). */
static enum mcp_oob_phase drive_to(struct mcp_oob_stream *s, enum mcp_oob_phase phase)
{
  enum mcp_oob_phase ph = mcp_oob_stream_phase(s);

  for (int turn = 0; turn < 3000 && ph != phase && ph != MCP_OOB_DEAD; turn++) {
    mcp_oob_progress();
    ph = mcp_oob_stream_phase(s);
    if (ph != phase)
      sleep_ms(1);
  }
  return ph;
}

/* Lets minutes pass on the channel's clock, with a progress pass every second as a
 * polling proxy thread would make. */
static void pass_seconds(unsigned s)
{
  for (unsigned i = 0; i < s; i++) {
    fake_ms += 1000;
    mcp_oob_progress();
  }
}

/* The peer's kernel accepted our TCP connection, but its process makes no call into
 * mcpnet for 10 minutes: the stream waits (no deadline on the HELLO); then the peer
 * answers and the connection comes up; its FIN kills the stream at once. */
static void test_late_acceptor_is_waited_for(void)
{
  union mcp_sockaddr a;
  int lfd = fake_listener(&a, 8), fd;
  struct mcp_oob_stream *s;

  CHECK(lfd >= 0);
  s = mcp_oob_stream_open_to(&a, 0x1111, &peer_cred);
  CHECK(s != NULL);
  if (s == NULL)
    return;
  CHECK_EQ_INT(drive_to(s, MCP_OOB_TCP_UP), MCP_OOB_TCP_UP);
  mcp_test_log_clear();
  pass_seconds(600);
  CHECK_EQ_INT(mcp_oob_stream_phase(s), MCP_OOB_TCP_UP);
  CHECK_EQ_INT(mcp_oob_stream_dead(s), 0);
  CHECK_EQ_INT(mcp_oob_stream_ready(s), 0);
  CHECK(strstr(mcp_test_log_text(), "no HELLO") == NULL);

  /* Ten minutes late, the process calls in: it accepts, and each side's HELLO arrives. */
  fd = accept(lfd, NULL, NULL);
  CHECK(fd >= 0);
  CHECK_EQ_INT(fake_accept_handshake(fd, 0x1111, &peer_cred, turn), 0);
  CHECK_EQ_INT(drive_to(s, MCP_OOB_UP), MCP_OOB_UP);
  CHECK_EQ_INT(mcp_oob_stream_ready(s), 1);

  /* Its process exits: FIN, and the stream is dead on the next pass. */
  close(fd);
  CHECK_EQ_INT(drive_to(s, MCP_OOB_DEAD), MCP_OOB_DEAD);
  CHECK(strstr(mcp_oob_stream_dead_reason(s), "closed the out-of-band connection") != NULL);
  mcp_oob_stream_close(s, 0);
  close(lfd);
}

/* A client on our listener that never speaks is dropped after 10 s, told why first and
 * nothing else (the acceptor speaks second, so it never saw our nonce); a real peer that
 * proved itself on the same listener is not touched. */
static void test_stray_dropped_real_peer_kept(void)
{
  union mcp_sockaddr local;
  uint64_t nonce, chal_acc, chal_dial;
  int stray = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int real = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct mcp_oob_listener *l = mcp_oob_listener_add();
  struct mcp_oob_request *req = NULL;
  struct mcp_wire_msg m;
  char c;

  CHECK(l != NULL);
  if (l == NULL)
    return;
  mcp_oob_local(&local, &nonce);
  CHECK(connect(stray, &local.sa, mcp_sockaddr_len(&local)) == 0);
  CHECK(connect(real, &local.sa, mcp_sockaddr_len(&local)) == 0);
  CHECK_EQ_INT(fake_dial_handshake(real, 0x2222, &l->cred, &chal_acc, &chal_dial, turn), 0);
  CHECK_EQ_INT(fake_send_request(real, &l->cred, chal_acc, chal_dial, 9, 0), 0);
  for (int i = 0; i < 1000 && !mcp_oob_listener_take(l, &req); i++)
    sleep_ms(1);
  CHECK(req != NULL);
  if (req != NULL)
    mcp_oob_request_free(req);
  /* The stray got nothing so far. */
  mcp_oob_progress();
  CHECK(recv(stray, &c, 1, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  mcp_test_log_clear();
  pass_seconds(9);
  CHECK(strstr(mcp_test_log_text(), "did not prove itself") == NULL);
  pass_seconds(2);
  CHECK(strstr(mcp_test_log_text(), "WARN NET/MCP out-of-band: 127.0.0.1:") != NULL);
  CHECK(strstr(mcp_test_log_text(),
               "connected but did not prove itself within 10 s (no HELLO: not an mcpnet peer?); closed") !=
        NULL);
  CHECK_EQ_INT(read_msg(stray, &m), 1);
  CHECK_EQ_INT(m.type, MCP_WIRE_CONN_REJECT);
  CHECK_EQ_INT(m.stream_id, 0);
  CHECK_EQ_INT(m.u.reject.code, MCP_WIRE_REJECT_SILENT);
  CHECK_EQ_INT(read_msg(stray, &m), 0); /* then EOF */
  /* The real peer's connection is still open: nothing to read, no EOF. */
  pass_seconds(120);
  CHECK(recv(real, &c, 1, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  mcp_oob_listener_remove(l);
  close(stray);
  close(real);
}

/* We dialled, then made no call for 10 s, so the acceptor closed us with SILENT (after
 * its HELLO: we never sent our request): the stream must not die; the channel dials again
 * with a fresh challenge and the second connection comes up. */
static void test_silent_dialler_redials(void)
{
  union mcp_sockaddr a;
  int lfd = fake_listener(&a, 8), fd, fd2;
  struct mcp_oob_stream *s;
  struct mcp_wire_msg m;

  CHECK(lfd >= 0);
  s = mcp_oob_stream_open_to(&a, 0x3333, &peer_cred);
  CHECK(s != NULL);
  if (s == NULL)
    return;
  fd = accept(lfd, NULL, NULL); /* blocking: the kernel completed it already or will */
  CHECK(fd >= 0);
  CHECK_EQ_INT(fake_accept_handshake(fd, 0x3333, &peer_cred, turn), 0);
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REJECT;
  m.u.reject.code = MCP_WIRE_REJECT_SILENT;
  snprintf(m.u.reject.reason, sizeof(m.u.reject.reason), "no connection request within 10 s of accept");
  CHECK_EQ_INT(send_msg(fd, &m), 0);
  close(fd);
  mcp_test_log_clear();
  /* The channel sees HELLO, SILENT, EOF and dials again: a second connection arrives. */
  for (int t = 0; t < 3000; t++) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    mcp_oob_progress();
    if (poll(&p, 1, 1) == 1)
      break;
  }
  CHECK_EQ_INT(mcp_oob_stream_dead(s), 0);
  CHECK(strstr(mcp_test_log_text(), "dialling again") != NULL);
  fd2 = accept(lfd, NULL, NULL);
  CHECK(fd2 >= 0);
  CHECK_EQ_INT(fake_accept_handshake(fd2, 0x3333, &peer_cred, turn), 0);
  CHECK_EQ_INT(drive_to(s, MCP_OOB_UP), MCP_OOB_UP);
  CHECK_EQ_INT(mcp_oob_stream_dead(s), 0);

  /* A close without the notice is a process that went away: no redial, the stream dies. */
  close(fd2);
  CHECK_EQ_INT(drive_to(s, MCP_OOB_DEAD), MCP_OOB_DEAD);
  mcp_oob_stream_close(s, 0);
  close(lfd);
}

/* INFO after 10 s, then a WARN every 60 s; a clock that jumps gives one notice. */
static void test_wait_notice_schedule(void)
{
  unsigned n = 0;
  uint64_t t0 = 5000;

  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 9999, &n), 0);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 10000, &n), 1);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 10001, &n), 0);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 59999, &n), 0);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 60000, &n), 2);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 60500, &n), 0);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 119999, &n), 0);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 120000, &n), 2);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 600000, &n), 2);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 600001, &n), 0);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 659999, &n), 0);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 660000, &n), 2);
  n = 0; /* first looked at after 5 minutes: a WARN, not an INFO */
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 300000, &n), 2);
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 + 300001, &n), 0);
  n = 0; /* a clock behind the start (never in practice) says nothing */
  CHECK_EQ_INT(mcp_oob_wait_notice(t0, t0 - 1, &n), 0);
}

/* A stream to a fake peer that said HELLO (its socket in *fd), or NULL. */
static struct mcp_oob_stream *stream_up(int lfd, const union mcp_sockaddr *a, uint64_t nonce, int *fd)
{
  struct mcp_oob_stream *s = mcp_oob_stream_open_to(a, nonce, &peer_cred);

  *fd = -1;
  if (s == NULL)
    return NULL;
  if (drive_to(s, MCP_OOB_TCP_UP) != MCP_OOB_TCP_UP || (*fd = accept(lfd, NULL, NULL)) < 0 ||
      fake_accept_handshake(*fd, nonce, &peer_cred, turn) != 0 || drive_to(s, MCP_OOB_UP) != MCP_OOB_UP) {
    mcp_oob_stream_close(s, 0);
    return NULL;
  }
  return s;
}

static size_t encode(const struct mcp_wire_msg *m, uint8_t *buf, size_t cap)
{
  char err[MCP_WIRE_ERRLEN];
  size_t len = 0;

  if (mcp_wire_encode(m, buf, cap, &len, err, sizeof(err)) != 0)
    return 0;
  return len;
}

/* Progress passes until the stream has a frame (1) or many passes went by (0). */
static int recv_some(struct mcp_oob_stream *s, struct mcp_wire_msg *m)
{
  for (int turn = 0; turn < 2000; turn++) {
    mcp_oob_progress();
    if (mcp_oob_stream_recv(s, m) == 1)
      return 1;
    if (turn > 0 && turn % 10 == 0)
      sleep_ms(1);
  }
  return 0;
}

/* A frame one byte per read: nothing before the last byte, the whole frame after it.
 * Then two frames in one send: both, in order. And a CONN_REJECT for the stream. */
static void test_frames_split_and_joined(void)
{
  union mcp_sockaddr a;
  int lfd = fake_listener(&a, 8), fd;
  struct mcp_oob_stream *s = stream_up(lfd, &a, 0x2222, &fd);
  struct mcp_wire_msg m, got;
  uint8_t buf[2 * MCP_WIRE_MSG_MAX];
  size_t len, len2, i;

  CHECK(s != NULL);
  if (s == NULL)
    return;
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REJECT;
  m.stream_id = mcp_oob_stream_id(s);
  m.u.reject.code = MCP_WIRE_REJECT_MISMATCH;
  snprintf(m.u.reject.reason, sizeof(m.u.reject.reason), "NCCL_IB_TC differs: 106 here, 0 there");
  len = encode(&m, buf, sizeof(buf));
  CHECK(len > 16);
  for (i = 0; i < len; i++) {
    CHECK_EQ_INT(send(fd, buf + i, 1, MSG_NOSIGNAL), 1);
    /* Give the channel its reads; the frame is not there before its last byte. */
    for (int k = 0; k < 3; k++)
      mcp_oob_progress();
    if (i + 1 < len)
      CHECK_EQ_INT(mcp_oob_stream_recv(s, &got), 0);
  }
  CHECK_EQ_INT(recv_some(s, &got), 1);
  CHECK_EQ_INT(got.type, MCP_WIRE_CONN_REJECT);
  CHECK_EQ_INT(got.u.reject.code, MCP_WIRE_REJECT_MISMATCH);
  CHECK_EQ_STR(got.u.reject.reason, "NCCL_IB_TC differs: 106 here, 0 there");

  /* Two in one segment: CONN_READY, then a CONN_REJECT with its code and reason. */
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_READY;
  m.stream_id = mcp_oob_stream_id(s);
  len = encode(&m, buf, sizeof(buf));
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REJECT;
  m.stream_id = mcp_oob_stream_id(s);
  m.u.reject.code = MCP_WIRE_REJECT_RESOURCES;
  snprintf(m.u.reject.reason, sizeof(m.u.reject.reason), "no QPs left");
  len2 = encode(&m, buf + len, sizeof(buf) - len);
  CHECK(len > 0 && len2 > 0);
  CHECK_EQ_INT(send(fd, buf, len + len2, MSG_NOSIGNAL), (ssize_t)(len + len2));
  CHECK_EQ_INT(recv_some(s, &got), 1);
  CHECK_EQ_INT(got.type, MCP_WIRE_CONN_READY);
  CHECK_EQ_INT(recv_some(s, &got), 1);
  CHECK_EQ_INT(got.type, MCP_WIRE_CONN_REJECT);
  CHECK_EQ_INT(got.u.reject.code, MCP_WIRE_REJECT_RESOURCES);
  CHECK_EQ_STR(got.u.reject.reason, "no QPs left");
  CHECK_EQ_INT(mcp_oob_stream_dead(s), 0);
  mcp_oob_stream_close(s, 0);
  close(fd);
  close(lfd);
}

/* Sends a CONN_REJECT whose reason is "<tag> <n>" to stream s over fd. */
static int send_tagged(int fd, struct mcp_oob_stream *s, const char *tag, int n)
{
  struct mcp_wire_msg m;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REJECT;
  m.stream_id = mcp_oob_stream_id(s);
  m.u.reject.code = MCP_WIRE_REJECT_INTERNAL;
  snprintf(m.u.reject.reason, sizeof(m.u.reject.reason), "%s %d", tag, n);
  return send_msg(fd, &m);
}

/* 1 when the next frame of s is "<tag> <n>". */
static int got_tagged(struct mcp_oob_stream *s, const char *tag, int n)
{
  struct mcp_wire_msg m;
  char want[64];

  snprintf(want, sizeof(want), "%s %d", tag, n);
  if (recv_some(s, &m) != 1 || m.type != MCP_WIRE_CONN_REJECT || strcmp(m.u.reject.reason, want) != 0) {
    fprintf(stderr, "  expected \"%s\"\n", want);
    return 0;
  }
  return 1;
}

/* A drained inbox goes to the next stream that gets a frame (one spare per process):
 * frames stay with their stream and in order while inboxes move between streams, one is
 * drained while another holds the spare, a stream closes with frames unread, and a
 * recycled inbox fills to its 8 frames and wraps. */
static void test_inbox_recycled(void)
{
  union mcp_sockaddr a;
  int lfd = fake_listener(&a, 8), fd1 = -1, fd2 = -1, i;
  struct mcp_oob_stream *s1 = stream_up(lfd, &a, 0x5555, &fd1), *s2 = stream_up(lfd, &a, 0x6666, &fd2);
  struct mcp_wire_msg m;

  CHECK(s1 != NULL && s2 != NULL);
  if (s1 == NULL || s2 == NULL)
    goto out;
  CHECK_EQ_INT(send_tagged(fd1, s1, "one", 1), 0);
  CHECK(got_tagged(s1, "one", 1)); /* drained: its inbox is the spare now */
  CHECK_EQ_INT(send_tagged(fd2, s2, "two", 1), 0);
  CHECK_EQ_INT(send_tagged(fd2, s2, "two", 2), 0);
  CHECK(got_tagged(s2, "two", 1)); /* s2 holds the recycled inbox, one frame left */
  CHECK_EQ_INT(send_tagged(fd1, s1, "one", 2), 0);
  CHECK_EQ_INT(send_tagged(fd1, s1, "one", 3), 0);
  CHECK(got_tagged(s1, "one", 2)); /* a fresh one for s1, meanwhile */
  CHECK(got_tagged(s1, "one", 3));
  mcp_oob_stream_close(s2, 0); /* with "two 2" unread */
  s2 = NULL;
  for (int round = 0; round < 2; round++) {
    for (i = 0; i < 8; i++)
      CHECK_EQ_INT(send_tagged(fd1, s1, "full", round * 8 + i), 0);
    for (i = 0; i < 8; i++)
      CHECK(got_tagged(s1, "full", round * 8 + i));
    CHECK_EQ_INT(mcp_oob_stream_recv(s1, &m), 0);
  }
  /* Three in, two out, three in: the ring wraps in an inbox that was recycled. */
  for (i = 0; i < 3; i++)
    CHECK_EQ_INT(send_tagged(fd1, s1, "wrap", i), 0);
  CHECK(got_tagged(s1, "wrap", 0));
  CHECK(got_tagged(s1, "wrap", 1));
  for (i = 3; i < 6; i++)
    CHECK_EQ_INT(send_tagged(fd1, s1, "wrap", i), 0);
  for (i = 2; i < 6; i++)
    CHECK(got_tagged(s1, "wrap", i));
  CHECK_EQ_INT(mcp_oob_stream_dead(s1), 0);
out:
  if (s1 != NULL)
    mcp_oob_stream_close(s1, 0);
  if (s2 != NULL)
    mcp_oob_stream_close(s2, 0);
  if (fd1 >= 0)
    close(fd1);
  if (fd2 >= 0)
    close(fd2);
  close(lfd);
}

/* Half a frame, then the peer's process exits (FIN) or its connection is reset (RST):
 * the stream dies either way; the FIN says what was left of the frame. */
static void test_peer_gone_mid_frame(int rst)
{
  union mcp_sockaddr a;
  int lfd = fake_listener(&a, 8), fd;
  struct mcp_oob_stream *s = stream_up(lfd, &a, rst ? 0x4444 : 0x3333, &fd);
  struct mcp_wire_msg m, got;
  uint8_t buf[2 * MCP_WIRE_MSG_MAX];
  size_t len, len2;

  CHECK(s != NULL);
  if (s == NULL)
    return;
  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_READY;
  m.stream_id = mcp_oob_stream_id(s);
  len = encode(&m, buf, sizeof(buf));
  m.type = MCP_WIRE_CONN_REJECT;
  snprintf(m.u.reject.reason, sizeof(m.u.reject.reason), "a reason long enough to be cut");
  len2 = encode(&m, buf + len, sizeof(buf) - len);
  CHECK(len > 0 && len2 > 20);
  /* The whole CONN_READY and 20 bytes of the CONN_REJECT. */
  CHECK_EQ_INT(send(fd, buf, len + 20, MSG_NOSIGNAL), (ssize_t)(len + 20));
  mcp_test_log_clear();
  if (rst) {
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  }
  close(fd);
  CHECK_EQ_INT(drive_to(s, MCP_OOB_DEAD), MCP_OOB_DEAD);
  CHECK_EQ_INT(mcp_oob_stream_dead(s), 1);
  if (!rst) {
    CHECK(strstr(mcp_test_log_text(), "closed in the middle of a frame (20 bytes left)") != NULL);
    CHECK(strstr(mcp_oob_stream_dead_reason(s), "closed the out-of-band connection") != NULL);
    /* What arrived whole before the FIN was delivered. */
    CHECK_EQ_INT(mcp_oob_stream_recv(s, &got), 1);
    CHECK_EQ_INT(got.type, MCP_WIRE_CONN_READY);
  } else {
    /* A reset may drop what the kernel had not handed over yet: only the death counts. */
    CHECK(strstr(mcp_oob_stream_dead_reason(s), "out-of-band connection") != NULL);
    while (mcp_oob_stream_recv(s, &got) == 1)
      CHECK_EQ_INT(got.type, MCP_WIRE_CONN_READY);
  }
  /* The half frame is never delivered. */
  CHECK_EQ_INT(mcp_oob_stream_recv(s, &got), 0);
  mcp_oob_stream_close(s, 0);
  close(lfd);
}

static void test_peer_fin_mid_frame(void) { test_peer_gone_mid_frame(0); }
static void test_peer_rst_mid_frame(void) { test_peer_gone_mid_frame(1); }

int main(void)
{
  struct mcp_config cfg;

  memset(&cfg, 0, sizeof(cfg));
  cfg.socket_ifname = "lo";
  cfg.socket_af = AF_INET;
  cfg.connect_timeout_s = 5;
  cfg.local_rank = 3;
  mcp_test_log_echo(1); /* every line on stderr too, for the test's output */
  mcp_log_set_logger(mcp_test_log_capture);
  mcp_clock_test_set(fake_now);
  if (mcp_oob_acquire(&cfg) != 0) {
    fprintf(stderr, "cannot start the out-of-band channel on lo\n");
    return 1;
  }
  RUN_TEST(test_wait_notice_schedule);
  RUN_TEST(test_late_acceptor_is_waited_for);
  RUN_TEST(test_stray_dropped_real_peer_kept);
  RUN_TEST(test_silent_dialler_redials);
  RUN_TEST(test_frames_split_and_joined);
  RUN_TEST(test_inbox_recycled);
  RUN_TEST(test_peer_fin_mid_frame);
  RUN_TEST(test_peer_rst_mid_frame);
  mcp_oob_release();
  mcp_clock_test_set(NULL);
  return TEST_EXIT();
}
