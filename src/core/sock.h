/*
 * sock.h - the out-of-band TCP layer: addresses, interface choice, a nonblocking
 * listener, a resumable connect, and framed send/receive buffers.
 *
 * Connections between plugin instances exchange QP numbers, GIDs and rkeys over TCP
 * before any verbs traffic flows, and later carry liveness and recovery. Nothing here
 * ever waits on a peer: every call returns within a few milliseconds, so NCCL's proxy
 * thread can alternate connect and accept on one thread. Functions return 0 (or a
 * count) on success and a negative errno on failure; calls that can fail for reasons a
 * user must act on also fill a caller-provided message buffer (MCP_SOCK_MSGLEN bytes is
 * always enough) that names the address and port involved and the likely cause.
 * Framing is generic: the receive buffer asks a callback how long a frame is, so this
 * layer knows nothing about the handshake wire format (conn/mcp_wire.c provides it).
 */
#ifndef MCPNET_SOCK_H
#define MCPNET_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "core/match_list.h"

#define MCP_SOCK_MSGLEN 512
/* "[" + INET6_ADDRSTRLEN + "]:" + "65535" + NUL, rounded up. */
#define MCP_SOCKADDR_STRLEN 64
/* The listen backlog asked for when the kernel's limit cannot be read; the kernel caps
 * any request at net.core.somaxconn (mcp_sock_listen_backlog). */
#define MCP_SOCK_LISTEN_BACKLOG 4096

/* ---- Addresses ------------------------------------------------------------------ */

/* One storage for IPv4 and IPv6 endpoints; sa.sa_family says which member is valid. */
union mcp_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
};

/* Length to pass to bind/connect for this family (0 for an unknown family). */
socklen_t mcp_sockaddr_len(const union mcp_sockaddr *a);
/* "a.b.c.d:port" or "[v6]:port" ("[v6%scope]:port" for scoped addresses); returns buf.
 * An unknown family formats as "(family N)". */
const char *mcp_sockaddr_format(const union mcp_sockaddr *a, char *buf, size_t len);
/* The same without the port: "a.b.c.d" or "v6". */
const char *mcp_sockaddr_format_host(const union mcp_sockaddr *a, char *buf, size_t len);
/* Parses what mcp_sockaddr_format writes (numeric only, no DNS); the port may be
 * omitted (then 0). Returns 0 or -EINVAL. */
int mcp_sockaddr_parse(const char *str, union mcp_sockaddr *out);
uint16_t mcp_sockaddr_port(const union mcp_sockaddr *a);
void mcp_sockaddr_set_port(union mcp_sockaddr *a, uint16_t port);
/* Same family, address, port (and IPv6 scope). */
int mcp_sockaddr_equal(const union mcp_sockaddr *a, const union mcp_sockaddr *b);

/* ---- Interface choice (mcp_sock_ifname.c) ----------------------------------------- */

/* One address of one interface, as getifaddrs reports it; tests build these by hand.
 * An interface with several addresses appears once per address. */
struct mcp_sock_ifaddr {
  char name[IF_NAMESIZE];
  unsigned int flags; /* IFF_UP, IFF_RUNNING, IFF_LOOPBACK, ... */
  union mcp_sockaddr addr;
};

/* NCCL_SOCKET_IFNAME parsed with NCCL's list grammar (match_list.h): "eth,ib"
 * (prefixes), "^docker,lo" (exclude prefixes), "=eth0" (exact names), "^=eth0" (exclude
 * exact names); a ":port" suffix is dropped, as NCCL ignores it for interfaces.
 * Returns 0, or -EINVAL with msg saying which entry is unusable (too long, too many). */
int mcp_sock_ifspec_parse(const char *str, struct mcp_match_list *spec, char *msg, size_t msglen);

struct mcp_sock_iface_choice {
  char name[IF_NAMESIZE];
  union mcp_sockaddr addr; /* port 0 */
  char reason[MCP_SOCK_MSGLEN];
};

/* The pure chooser. ifname is NCCL_SOCKET_IFNAME as set, for the messages (NULL or "" =
 * automatic), spec the list the configuration parsed from it (mcp_sock_ifspec_parse;
 * NULL with ifname set is refused with -EINVAL); family is
 * AF_INET, AF_INET6 or AF_UNSPEC (then an interface's IPv4 address is preferred over its
 * IPv6 one). Interfaces that are down, have no carrier, or have no address of the family
 * are skipped; IPv6 link-local addresses never count. With ifname set, the first
 * matching usable interface in list order wins. Automatic: ib* first, then anything but
 * docker*, virbr* and loopback, then docker*, then loopback as the last resort.
 * Returns 0 with choice->reason saying why this one, or -ENODEV (or -EINVAL for a bad
 * spec) with choice->reason listing what was seen and why each was unusable. */
int mcp_sock_iface_choose(const struct mcp_sock_ifaddr *list, int n, const char *ifname,
                          const struct mcp_match_list *spec, int family,
                          struct mcp_sock_iface_choice *choice);
/* The same over this host's getifaddrs; WARNs once per process of spaces spec trimmed. */
int mcp_sock_iface_find(const char *ifname, const struct mcp_match_list *spec, int family,
                        struct mcp_sock_iface_choice *choice);

/* ---- Listening -------------------------------------------------------------------- */

/* MCPNET_OOB_PORT_RANGE: "lo-hi" or a single port; {0,0} means any ephemeral port. */
struct mcp_sock_port_range {
  uint16_t lo, hi;
};
int mcp_sock_port_range_parse(const char *str, struct mcp_sock_port_range *range, char *msg, size_t msglen);

/* The backlog mcp_sock_listen asks for: net.core.somaxconn as the kernel reports it
 * (every dialler that has not been accepted yet waits in this queue, so the largest the
 * kernel allows), else MCP_SOCK_LISTEN_BACKLOG. */
int mcp_sock_listen_backlog(void);

/* A nonblocking, close-on-exec listening socket (SO_REUSEADDR, mcp_sock_listen_backlog) bound to
 * addr. With range NULL or {0,0} the port in addr is used (0 = ephemeral); otherwise
 * each port lo..hi is tried in turn. Returns 0 with *fd and *bound (the real address,
 * port included), or a negative errno with msg: -EADDRINUSE when every port of the
 * range is taken, naming the range and the address. */
int mcp_sock_listen(const union mcp_sockaddr *addr, const struct mcp_sock_port_range *range, int *fd,
                    union mcp_sockaddr *bound, char *msg, size_t msglen);

/* Accepts one pending connection, nonblocking + close-on-exec + TCP_NODELAY. Returns
 * 0 with *fd (and *peer when not NULL), -EAGAIN when none is pending, or a negative
 * errno. Errors of an aborted half-open connection are reported as -EAGAIN too: the
 * listener itself is fine. */
int mcp_sock_accept(int listen_fd, int *fd, union mcp_sockaddr *peer);

/* TCP keepalive that declares the connection dead after about dead_after_s seconds of
 * silence from the peer's kernel: SO_KEEPALIVE with TCP_KEEPIDLE/TCP_KEEPINTVL/TCP_KEEPCNT
 * summing to dead_after_s, and TCP_USER_TIMEOUT so unacknowledged data gives up at the
 * same time. A live peer's kernel answers the probes whatever its process is doing, so
 * only a dead or unreachable host trips it. 0 or a negative errno. */
int mcp_sock_set_keepalive(int fd, unsigned dead_after_s);
#define MCP_SOCK_KEEPIDLE_S 10u
#define MCP_SOCK_KEEPINTVL_S 5u

/* ---- Resumable connect ------------------------------------------------------------ */

enum mcp_sock_connect_state {
  MCP_SOCK_CONNECT_IN_PROGRESS = 0,
  MCP_SOCK_CONNECT_DONE = 1, /* connected: take the fd with mcp_sock_connect_take_fd */
  MCP_SOCK_CONNECT_FAILED = 2
};

enum mcp_sock_connect_fail {
  MCP_SOCK_FAIL_NONE = 0,
  MCP_SOCK_FAIL_REFUSED,     /* RST: nothing listens on the port */
  MCP_SOCK_FAIL_UNREACHABLE, /* EHOSTUNREACH / ENETUNREACH */
  MCP_SOCK_FAIL_TIMEOUT,     /* deadline passed with no answer at all */
  MCP_SOCK_FAIL_OTHER        /* see err */
};

struct mcp_sock_connect_opts {
  uint32_t timeout_ms;     /* overall deadline; 0 = MCP_SOCK_CONNECT_DEFAULT_TIMEOUT_MS */
  uint32_t max_retries;    /* extra attempts after REFUSED (0 = fail at the first) */
  uint32_t backoff_ms;     /* first wait after REFUSED; 0 = 10 ms; doubles each time */
  uint32_t backoff_max_ms; /* cap on one wait; 0 = 1000 ms */
};
#define MCP_SOCK_CONNECT_DEFAULT_TIMEOUT_MS 30000u

/* Embeddable state of one connect; all fields are private to mcp_sock.c except the
 * results documented below. */
struct mcp_sock_connect {
  union mcp_sockaddr peer;
  union mcp_sockaddr local; /* source address to bind, family 0 = kernel's choice */
  struct mcp_sock_connect_opts opts;
  int fd;
  enum mcp_sock_connect_state state;
  enum mcp_sock_connect_fail fail; /* result: why it failed */
  int err;                         /* result: errno of the failure (ETIMEDOUT for TIMEOUT) */
  uint32_t attempts;               /* result: connect() calls made */
  uint64_t start_ns, deadline_ns, retry_at_ns;
  uint32_t next_backoff_ms;
  char msg[MCP_SOCK_MSGLEN]; /* result: the failure explained, address and port named */
};

/* Starts connecting to peer (optionally from local's address). Never blocks. Returns the
 * state, like mcp_sock_connect_progress; FAILED only for errors known at once (bad
 * address, no socket). opts may be NULL for the defaults. */
enum mcp_sock_connect_state mcp_sock_connect_start(struct mcp_sock_connect *c, const union mcp_sockaddr *peer,
                                                   const union mcp_sockaddr *local,
                                                   const struct mcp_sock_connect_opts *opts);
/* Advances the connect without waiting (poll with a zero timeout). Returns the state;
 * once DONE or FAILED, further calls return the same. */
enum mcp_sock_connect_state mcp_sock_connect_progress(struct mcp_sock_connect *c);
/* Hands the connected fd (nonblocking, close-on-exec, TCP_NODELAY) to the caller; -ENOTCONN
 * unless DONE (or once taken). */
int mcp_sock_connect_take_fd(struct mcp_sock_connect *c);
/* Closes whatever the connect still owns; safe to call in any state, and twice. */
void mcp_sock_connect_cancel(struct mcp_sock_connect *c);
const char *mcp_sock_connect_fail_name(enum mcp_sock_connect_fail fail);

/* ---- Framed send and receive ------------------------------------------------------ */

/* Bytes queued for one stream socket; frames are queued whole and may go out in many
 * partial sends. Grows on demand up to max bytes pending. */
struct mcp_sock_sendq {
  uint8_t *buf;
  size_t cap, max, head, tail; /* pending bytes are buf[head..tail) */
};

int mcp_sock_sendq_init(struct mcp_sock_sendq *q, size_t max);
void mcp_sock_sendq_free(struct mcp_sock_sendq *q);
/* Queues all len bytes or none: -ENOBUFS when more than max would be pending. */
int mcp_sock_sendq_push(struct mcp_sock_sendq *q, const void *data, size_t len);
/* Sends what the socket takes now (MSG_NOSIGNAL, never blocks). Returns the bytes still
 * pending (0 = all sent) or a negative errno (-EPIPE, -ECONNRESET, ...). */
long mcp_sock_sendq_flush(struct mcp_sock_sendq *q, int fd);
size_t mcp_sock_sendq_pending(const struct mcp_sock_sendq *q);

/* Tells the receive buffer how long the frame starting at buf is. Returns 1 with *len
 * when the header is complete and valid, 0 when more bytes are needed to know, or a
 * negative errno (-EBADMSG) with msg filled when the bytes cannot start a valid frame. */
typedef int (*mcp_sock_frame_len_fn)(const uint8_t *buf, size_t have, size_t *len, char *msg, size_t msglen);

/* Accumulates stream bytes until whole frames are available. No memory is held while
 * nothing is buffered (a silent connection costs none); the buffer grows from
 * MCP_SOCK_RBUF_FIRST bytes as a frame needs, up to max, the largest frame accepted now
 * (a connection that has not proved itself may be allowed less than one that has). */
#define MCP_SOCK_RBUF_FIRST 512
struct mcp_sock_rbuf {
  uint8_t *buf;                  /* NULL while empty */
  size_t alloc, max, start, end; /* unread bytes are buf[start..end) */
  mcp_sock_frame_len_fn frame_len;
  int eof; /* the peer closed its side (set by fill) */
};

int mcp_sock_rbuf_init(struct mcp_sock_rbuf *rb, size_t max, mcp_sock_frame_len_fn frame_len);
void mcp_sock_rbuf_set_max(struct mcp_sock_rbuf *rb, size_t max);
void mcp_sock_rbuf_free(struct mcp_sock_rbuf *rb);
/* Reads what the socket has without blocking. Returns the bytes read (0 when nothing
 * was available or the buffer is full) or a negative errno; sets rb->eof when the peer
 * closed, after which the frames already buffered can still be taken. */
long mcp_sock_rbuf_fill(struct mcp_sock_rbuf *rb, int fd);
/* Takes the next whole frame: returns 1 with *frame and *len pointing into the buffer
 * (valid until the next fill), 0 when no whole frame is buffered, or -EBADMSG with msg
 * from the callback, or when the frame is longer than max (the stream is then unusable). */
int mcp_sock_rbuf_next(struct mcp_sock_rbuf *rb, const uint8_t **frame, size_t *len, char *msg,
                       size_t msglen);
/* Bytes allocated now (0 while empty): what a connection costs. */
size_t mcp_sock_rbuf_allocated(const struct mcp_sock_rbuf *rb);
/* Bytes buffered that do not yet form a whole frame (a truncated frame at EOF). */
size_t mcp_sock_rbuf_pending(const struct mcp_sock_rbuf *rb);

/* TCP_NODELAY on a connected socket (control frames are small and latency-bound). */
int mcp_sock_set_nodelay(int fd);

/* Makes the next close() reset the connection (SO_LINGER with a zero timeout) instead of
 * handing what is still unsent to the kernel. For a peer that stopped reading: a graceful
 * close would leave the kernel holding our queued bytes, and the FIN behind them, for as
 * long as that peer keeps its window shut. 0 or a negative errno. */
int mcp_sock_set_abortive(int fd);

#endif
