/*
 * mcp_oob_fake.h - fake out-of-band peers for the channel's unit tests: plain sockets
 * that speak the wire format by hand, as a genuine mcpnet (dialler or acceptor) or as a
 * stranger would. Header-only (static functions), shared by test_conn_oob.c and
 * test_conn_oob_trust.c; each test provides the progress it wants between reads.
 */
#ifndef MCPNET_OOB_FAKE_H
#define MCPNET_OOB_FAKE_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/sock.h"
#include "conn/oob.h"
#include "conn/wire.h"

/* Each user takes what it needs of these. */
#define FAKE_FN static __attribute__((unused))

FAKE_FN void fake_sleep_ms(unsigned ms)
{
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

  nanosleep(&ts, NULL);
}

/* A listener on 127.0.0.1 (its port in *a) that never accepts on its own: the kernel
 * completes up to backlog handshakes. The fd, or -1. */
FAKE_FN int fake_listener(union mcp_sockaddr *a, int backlog)
{
  socklen_t len = sizeof(*a);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return -1;
  mcp_sockaddr_parse("127.0.0.1:0", a);
  if (bind(fd, &a->sa, mcp_sockaddr_len(a)) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, &a->sa, &len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* A turn for fake peers in a child process, which must not drive the channel it
 * inherited. */
FAKE_FN void fake_sleep_ms_1(void) { fake_sleep_ms(1); }

FAKE_FN int fake_send_msg(int fd, const struct mcp_wire_msg *m)
{
  uint8_t buf[MCP_WIRE_MSG_MAX];
  char err[MCP_WIRE_ERRLEN];
  size_t len;

  if (mcp_wire_encode(m, buf, sizeof(buf), &len, err, sizeof(err)) != 0) {
    fprintf(stderr, "fake peer: cannot encode: %s\n", err);
    return -1;
  }
  return send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* A HELLO as mcpnet writes it: a dialler's names listen_id, an acceptor's carries proof. */
FAKE_FN struct mcp_wire_msg fake_hello(uint64_t nonce, uint64_t challenge, uint32_t listen_id, uint64_t proof)
{
  struct mcp_wire_msg m;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_HELLO;
  m.u.hello.nonce = nonce;
  m.u.hello.pid = 4242;
  snprintf(m.u.hello.hostname, sizeof(m.u.hello.hostname), "fakehost");
  snprintf(m.u.hello.plugin_version, sizeof(m.u.hello.plugin_version), "%s", MCPNET_VERSION);
  m.u.hello.local_rank = 7;
  m.u.hello.challenge = challenge;
  m.u.hello.listen_id = listen_id;
  m.u.hello.proof = proof;
  return m;
}

/* Reads one whole frame, calling turn() between tries (the channel's progress writes to
 * us). 1 with *m, 0 on EOF, -1 on an error or nothing after many turns. */
FAKE_FN int fake_read_msg(int fd, struct mcp_wire_msg *m, void (*turn)(void))
{
  uint8_t buf[MCP_WIRE_MAX_FRAME];
  char err[MCP_WIRE_ERRLEN];
  size_t have = 0, want = 0;

  for (int i = 0; i < 40000; i++) {
    ssize_t n;
    size_t need = want != 0 ? want : 16;

    n = recv(fd, buf + have, need - have, MSG_DONTWAIT);
    if (n == 0)
      return 0;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return errno == ECONNRESET ? 0 : -1;
    if (n > 0)
      have += (size_t)n;
    if (want == 0 && have >= 16 && mcp_wire_frame_len(buf, have, &want, err, sizeof(err)) != 1)
      return -1;
    if (want != 0 && have == want)
      return mcp_wire_decode(buf, have, m, err, sizeof(err)) == 0 ? 1 : -1;
    if (n <= 0) {
      turn();
      if (i % 8 == 7) /* a peer in another process or thread needs time */
        fake_sleep_ms(1);
    }
  }
  return -1;
}

/* A fake acceptor's side of the handshake on fd, once the channel dialled it: reads the
 * channel's HELLO (which must name cred's listen) and answers with a valid proof, as the
 * process that published cred would. 0, or -1 when the HELLO was not what mcpnet sends. */
FAKE_FN int fake_accept_handshake(int fd, uint64_t nonce, const struct mcp_oob_cred *cred, void (*turn)(void))
{
  struct mcp_wire_msg m, h;
  const uint64_t chal = 0xacc0acc0acc0acc0ull ^ (uint64_t)fd;

  if (fake_read_msg(fd, &m, turn) != 1 || m.type != MCP_WIRE_HELLO ||
      m.u.hello.listen_id != cred->listen_id || m.u.hello.challenge == 0 || m.u.hello.proof != 0)
    return -1;
  h = fake_hello(nonce, chal, 0, mcp_oob_mac_acceptor(cred, chal, m.u.hello.challenge, nonce));
  return fake_send_msg(fd, &h);
}

/* The smallest endpoint a decoder accepts (one device, one QP), for requests. */
FAKE_FN struct mcp_wire_endpoint fake_endpoint(uint32_t stream_id)
{
  struct mcp_wire_endpoint ep;

  memset(&ep, 0, sizeof(ep));
  ep.stream_id = stream_id;
  snprintf(ep.dev_name, sizeof(ep.dev_name), "mlx5_0");
  ep.port = 1;
  ep.link_layer = MCP_WIRE_LINK_ETHERNET;
  ep.active_mtu = 3;
  ep.nqps = 1;
  ep.qps[0].qpn = 0x100;
  ep.qps[0].psn = 0x200;
  ep.ring_slots = 64;
  ep.fp.gid_type = MCP_WIRE_GID_ROCE_V2;
  ep.fp.gid_family = 4;
  ep.fp.qps_per_conn = 1;
  return ep;
}

/* A fake dialler on fd (connected to the channel's listener): says HELLO for cred's
 * listen and reads the channel's answer, checking its proof. On success *chal_acc and
 * *chal_dial hold the connection's challenges (for request MACs) and 0 is returned;
 * -1 when the channel did not answer as the owner of cred. */
FAKE_FN int fake_dial_handshake(int fd, uint64_t nonce, const struct mcp_oob_cred *cred, uint64_t *chal_acc,
                                uint64_t *chal_dial, void (*turn)(void))
{
  struct mcp_wire_msg h, m;

  *chal_acc = 0;
  *chal_dial = 0xd1a1d1a1d1a1d1a1ull ^ (uint64_t)fd;
  h = fake_hello(nonce, *chal_dial, cred->listen_id, 0);
  if (fake_send_msg(fd, &h) != 0 || fake_read_msg(fd, &m, turn) != 1 || m.type != MCP_WIRE_HELLO)
    return -1;
  *chal_acc = m.u.hello.challenge;
  return m.u.hello.proof == mcp_oob_mac_acceptor(cred, m.u.hello.challenge, *chal_dial, m.u.hello.nonce) ? 0
                                                                                                         : -1;
}

/* A CONN_REQ for cred's listen from stream_id, with the MAC a holder of its key writes
 * (or mac_xor flips bits of it: a stranger's guess). */
FAKE_FN int fake_send_request(int fd, const struct mcp_oob_cred *cred, uint64_t chal_acc, uint64_t chal_dial,
                              uint32_t stream_id, uint64_t mac_xor)
{
  struct mcp_wire_msg m;

  memset(&m, 0, sizeof(m));
  m.type = MCP_WIRE_CONN_REQ;
  m.u.conn_req.listen_id = cred->listen_id;
  m.u.conn_req.mac = mcp_oob_mac_request(cred, chal_acc, chal_dial, stream_id) ^ mac_xor;
  m.u.conn_req.ep = fake_endpoint(stream_id);
  return fake_send_msg(fd, &m);
}

#endif
