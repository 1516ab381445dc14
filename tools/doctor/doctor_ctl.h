/*
 * doctor_ctl.h - the doctor's TCP control connection (see doctor_ctl.c): connect with
 * a classified failure, accept one peer, and typed frames of at most DOCTOR_CTL_MAX
 * bytes, every call bounded by a deadline in seconds.
 */
#ifndef MCPNET_DOCTOR_CTL_H
#define MCPNET_DOCTOR_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "core/sock.h"

#define DOCTOR_CTL_MAX 8192

enum doctor_ctl_fail {
  DOCTOR_CTL_NONE = 0,
  DOCTOR_CTL_BAD_ADDRESS, /* unparsable or unresolvable */
  DOCTOR_CTL_REFUSED,     /* nothing listens there */
  DOCTOR_CTL_UNREACHABLE, /* no route */
  DOCTOR_CTL_NO_ANSWER,   /* silence until the deadline: a firewall drops it */
  DOCTOR_CTL_AUTH,        /* it answered, but does not know this run's token */
  DOCTOR_CTL_OTHER
};

struct doctor_ctl {
  int fd;
  union mcp_sockaddr addr; /* the far end (connect) or the peer (accept) */
  char peer[MCP_SOCKADDR_STRLEN];
  int port; /* the port connected to, or listened on */
  enum doctor_ctl_fail fail;
  char msg[MCP_SOCK_MSGLEN]; /* the failure, from the socket layer */
  double start, elapsed;     /* seconds: when the connect began, how long it took */
  unsigned strangers;        /* accept: connections closed for not knowing the token */
};

/* Frame types. */
enum {
  DOCTOR_MSG_SUMMARY = 1, /* key=value lines (doctor_summary.c) */
  DOCTOR_MSG_HANDLE = 2,  /* status + the plugin's listen handle, or the reason it has none */
  DOCTOR_MSG_STEP = 3,    /* status of a step both sides run: "ok" or the reason */
  DOCTOR_MSG_PLAN = 4,    /* the next measurement: "bw N SIZE", "lat N", "end" */
  DOCTOR_MSG_RESULT = 5,  /* the measured figures, key=value lines */
  DOCTOR_MSG_AUTH = 6     /* the run token's challenges and proofs (doctor_ctl.c) */
};

/*
 * The run's token. The doctors of one run share a secret (MCPNET_DOCTOR_TOKEN, or the one
 * `--listen` draws and prints for its peer), and a control connection carries nothing
 * (summaries, the plugin's handles with their listen keys) until both ends proved they
 * know it: challenges both ways and SipHash MACs under a key derived from the token, the
 * connecting side first, so the token never crosses the wire and a stranger on the port
 * learns nothing. set_token: 0, or -1 when it is shorter than DOCTOR_TOKEN_MIN characters.
 * random_token: a fresh one into buf (2 x 16 hex digits), 0 or -1.
 */
#define DOCTOR_TOKEN_ENV "MCPNET_DOCTOR_TOKEN"
#define DOCTOR_TOKEN_MIN 16
int doctor_ctl_set_token(const char *token);
/* The run's token from MCPNET_DOCTOR_TOKEN, or, when drawn is not NULL (the doctor's
 * --listen), a fresh one drawn into it for the operator to give the other side. tool and
 * mode name the program and option for the message. 0, or -1 with the reason on stderr
 * (a usage error). mcpnet-doctor and mcpnet-top --fleet share it. */
int doctor_ctl_run_token(const char *tool, const char *mode, char *drawn, size_t len);

int doctor_ctl_random_token(char *buf, size_t len);

/* Connects and proves the run's token both ways (a peer that does not know it fails the
 * connect with DOCTOR_CTL_AUTH). */
int doctor_ctl_connect(struct doctor_ctl *c, const char *spec, int default_port, int timeout_s);
/* Listens on bind_addr (NULL: every address) and port, calls on_listening with the
 * bound address, and accepts the first doctor that connects within wait_s and knows the
 * run's token (others are closed, and counted in c->strangers). */
int doctor_ctl_accept(struct doctor_ctl *c, const char *bind_addr, int port, int wait_s,
                      void (*on_listening)(const char *addr, void *arg), void *arg);
/* The same in two parts, for a listener that accepts many (the fleet's node 0):
 * listen (bound gets the address, bound_port the port), then accept one doctor at a
 * time until deadline (doctor_ctl_now's clock); -1 at the deadline. */
int doctor_ctl_listen(const char *bind_addr, int port, int *lfd, char *bound, size_t blen, int *bound_port,
                      char *msg, size_t mlen);
int doctor_ctl_accept_on(struct doctor_ctl *c, int lfd, double deadline);
double doctor_ctl_now(void);
void doctor_ctl_close(struct doctor_ctl *c);
/* 0, or a negative errno: -ETIMEDOUT, -ECONNRESET (the peer closed), -EBADMSG (not a
 * doctor frame), -EPROTO (a frame of another type; data holds it). */
int doctor_ctl_send(struct doctor_ctl *c, uint32_t type, const void *data, size_t len, int timeout_s);
int doctor_ctl_recv(struct doctor_ctl *c, uint32_t type, void *data, size_t cap, size_t *len, int timeout_s);

#endif
