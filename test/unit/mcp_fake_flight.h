/*
 * mcp_fake_flight.h - eight messages through a fake pair (mcp_fake_verbs.h) as NCCL's
 * proxy drives them, with the pair's comms on real out-of-band streams: for the tests of
 * a connection's recovery (test_conn_recover.c, test_conn_recover_failover.c). A test that
 * includes this header gets mcp_fake_flight.c, mcp_fake_verbs.c and mcp_test_util.c linked
 * (test/CMakeLists.txt).
 *
 * Why: a recovery is only seen whole when both comms' RECOVER frames travel and every
 * request is tested round after round until it completes; each test then breaks the
 * pair its own way in between. The helpers return how many checks failed (printed on
 * stderr) and leave the counting to the test's own CHECKs.
 */
#ifndef MCPNET_FAKE_FLIGHT_H
#define MCPNET_FAKE_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "mcp_fake_verbs.h"

#define FAKE_FLIGHT_N 8         /* messages of one flight, 4 KiB apart in the buffers */
#define FAKE_FLIGHT_TURNS 20000 /* the rounds of calls a test drives at most: a count, not a time */

struct mcp_oob_stream;

/* The N receives and N sends of one flight, and which of them have completed. */
struct fake_flight {
  void *r[FAKE_FLIGHT_N], *s[FAKE_FLIGHT_N];
  int rdone[FAKE_FLIGHT_N], sdone[FAKE_FLIGHT_N], rsize[FAKE_FLIGHT_N];
  int left;
};

/* The flights' send and receive buffers (register them on the pair). */
extern unsigned char fake_flight_sbuf[FAKE_FLIGHT_N * 4096], fake_flight_rbuf[FAKE_FLIGHT_N * 4096];

/* Two streams of one out-of-band connection from this process to its own listener (the
 * channel must be acquired), as connect and accept open them, attached to the pair's
 * comms; 0 on success. fake_streams_close undoes it (the pair back on its stand-ins). */
int fake_streams_open(struct fake_pair *p, struct mcp_oob_stream **ss, struct mcp_oob_stream **rs);
void fake_streams_close(struct fake_pair *p, struct mcp_oob_stream *ss, struct mcp_oob_stream *rs);

/* Posts the N receives (4 KiB each, tag 1) and fills the send buffer: message i has
 * size0 + i bytes of pattern pat0 + i. Then the N sends. Failed posts are counted. */
int fake_flight_recvs(struct fake_pair *p, void *rmh, struct fake_flight *f, size_t size0, unsigned pat0);
int fake_flight_sends(struct fake_pair *p, void *smh, struct fake_flight *f, size_t size0);

/* One round of NCCL's proxy: test every request still in flight, each comm's 100 ms
 * liveness check (events, the peer's frames) due first. Returns how many tests failed.
 * Stops at the first failure unless past_failure: then it goes on testing the receives,
 * and the sends while the send comm has not failed. */
int fake_flight_test(struct fake_pair *p, struct fake_flight *f, int past_failure);

/* Failed checks of a completed flight: every message received whole with its size and
 * pattern (as fake_flight_recvs set them). */
int fake_flight_verify(const struct fake_flight *f, size_t size0, unsigned pat0);

/* How many times message i of a flight whose first seq is first was written with its
 * immediate since the posts' log was reset: again[i]. */
void fake_flight_writes(uint32_t first, int again[FAKE_FLIGHT_N]);

#endif
