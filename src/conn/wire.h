/*
 * wire.h - the handshake wire format: the 128-byte NCCL handle and the frames on the
 * out-of-band TCP stream.
 *
 * This is the only code that turns these structs into bytes and back. Every integer is
 * little-endian and written byte by byte (no struct is ever copied onto the wire), so
 * the format does not depend on the compiler's padding or the host's byte order. Every
 * decoder checks the magic, the version, the type, every length and every field with
 * a closed range; it never reads past its input, and on failure it returns a negative
 * errno with a sentence in err (MCP_WIRE_ERRLEN bytes is always enough):
 *   -EBADMSG          malformed or truncated input (or a field out of range),
 *   -EPROTONOSUPPORT  a version newer than this build speaks (both versions named),
 *   -EINVAL           (encoders) the struct itself holds an out-of-range field,
 *   -ENOBUFS          (encoders) the output buffer is too small.
 *
 * Frame = 16-byte header {magic u32, version u16, type u16, payload length u32, stream
 * id u32} + payload. The header's stream id names the receiver's stream the frame is
 * for (0 for frames about the whole connection: HELLO, PING, PONG, and CONN_REQ, which
 * is routed by its listen token instead). Strings travel as u16 length + bytes without
 * a terminating NUL; a NUL inside a string is malformed.
 */
#ifndef MCPNET_WIRE_H
#define MCPNET_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/sock.h"
#include "nccl/net_common.h"

#define MCP_WIRE_MAGIC 0x4D43504Eu /* "MCPN" */
/* 2: RECOVER; 3: fused endpoints (several physical devices, wire_member); 4: connections
 * prove knowledge of a listen key (the handle's listen id and key, HELLO's challenge and
 * proof, CONN_REQ's MAC instead of a token in clear), and endpoints of up to 8 members
 * (NCCL 2.30's virtual devices; version 3 carries 4). The channel speaks version 4 only:
 * an older peer cannot authenticate, so it is refused with a message naming both
 * versions (mcp_oob.c); the decoders still read versions 1-3 to say so. */
#define MCP_WIRE_VERSION 4
#define MCP_WIRE_VERSION_FUSION 3 /* the first version that carries more than one member */
#define MCP_WIRE_VERSION_AUTH 4   /* the first version that authenticates */
#define MCP_WIRE_ERRLEN 256

/* ---- The handle --------------------------------------------------------------------- */

#define MCP_WIRE_HANDLE_SIZE NCCL_NET_HANDLE_MAXSIZE
/* The encoding uses bytes [0, 96); the last 32 bytes belong to the caller, who keeps the
 * connect state machine there (the handle stays at one address across connect calls). */
#define MCP_WIRE_HANDLE_TAIL_OFFSET 96
#define MCP_WIRE_HANDLE_TAIL_SIZE (MCP_WIRE_HANDLE_SIZE - MCP_WIRE_HANDLE_TAIL_OFFSET)
/* ... except its last 8 bytes: {u32 magic "MCPV", u8 the listener's highest wire version,
 * 3 zero bytes}. Decoders of version 2 never read the tail, so a one-device listener
 * writes a version-2 handle they accept and still tells a version-3 connector that it
 * may fuse; a handle without it comes from a version-2 listener. The connect state kept
 * in the tail stays below this offset. */
#define MCP_WIRE_HANDLE_CAP_OFFSET 120
#define MCP_WIRE_HANDLE_CAP_MAGIC 0x5650434Du /* "MCPV" */

/* What listen publishes: where to connect and which listen to ask for. */
struct mcp_wire_handle {
  uint16_t version; /* decoded: the handle's; encode: 0 means MCP_WIRE_VERSION */
  uint16_t family;  /* 4 or 6 (not AF_*: the wire must not depend on the OS) */
  uint8_t addr[16]; /* network order; IPv4 uses the first 4 bytes, rest zero */
  uint16_t port;    /* host order here, nonzero */
  int32_t dev;      /* the listener's device index, >= 0 */
  /* The listen's secret key (version 4: 128 bits; versions 2-3 carried a 64-bit token in
   * key[0], sent in clear). Whoever holds it was given the handle. */
  uint64_t listen_key[2];
  uint32_t listen_id; /* version 4: names the listen (public, nonzero); 0 before */
  uint64_t nonce;     /* the listening process's random nonce */
  /* Version 3: physical devices behind the listener's device (1..4; version 4: 1..8), so
   * the connecting side can size its QPs and its ring before it hears back (the larger
   * side's count wins). 0 reads as 1; a handle with more than one is written as version 3
   * or later, else as version 2. */
  uint8_t ndevs;
  /* Decoded: the listener's highest wire version (the tail's capability, else version);
   * not encoded from here: the encoder always writes this build's. */
  uint16_t max_version;
};

/* Writes the handle into out[0..96) (as version 4 unless h->version names an older one:
 * tests and the seed corpus), zeroes the tail, so the connect state machine
 * kept there starts from zero, and writes the capability at its end. */
int mcp_wire_handle_encode(const struct mcp_wire_handle *h, uint8_t out[MCP_WIRE_HANDLE_SIZE], char *err,
                           size_t errlen);
/* Reads out[0..96) only; the tail is ignored. Rejects "not an mcpnet handle (magic
 * 0x...)" and versions this build does not speak. */
int mcp_wire_handle_decode(const uint8_t in[MCP_WIRE_HANDLE_SIZE], struct mcp_wire_handle *h, char *err,
                           size_t errlen);
/* Between the handle's family/addr/port and a socket address. set returns -EAFNOSUPPORT
 * for a family other than AF_INET/AF_INET6. */
int mcp_wire_handle_set_sockaddr(struct mcp_wire_handle *h, const union mcp_sockaddr *a);
void mcp_wire_handle_get_sockaddr(const struct mcp_wire_handle *h, union mcp_sockaddr *a);

/* ---- Frames ------------------------------------------------------------------------- */

#define MCP_WIRE_HDR_SIZE 16
#define MCP_WIRE_MAX_PAYLOAD 65536
#define MCP_WIRE_MAX_FRAME (MCP_WIRE_HDR_SIZE + MCP_WIRE_MAX_PAYLOAD)
/* Every frame this version encodes fits in this many bytes (asserted in mcp_wire.c). */
#define MCP_WIRE_MSG_MAX 2560 /* a RECOVER with 128 QPs and 8 members is 2077 bytes */

#define MCP_WIRE_MAX_QPS 128 /* NCCL's own bound on QPs per connection */
#define MCP_WIRE_HOSTNAME_MAX 64
#define MCP_WIRE_VERSTR_MAX 32
#define MCP_WIRE_DEVNAME_MAX 64
#define MCP_WIRE_REASON_MAX 256

enum mcp_wire_type {
  MCP_WIRE_HELLO = 1,       /* first frame both ways on every new TCP connection */
  MCP_WIRE_CONN_REQ = 2,    /* connect side's endpoint, addressed to a listen token */
  MCP_WIRE_CONN_ACK = 3,    /* accept side's endpoint */
  MCP_WIRE_CONN_READY = 4,  /* connect side's QPs are ready to receive; empty */
  MCP_WIRE_CONN_REJECT = 5, /* the request cannot be served: code + reason */
  MCP_WIRE_CLOSE = 6,       /* the sender closed its end of a stream */
  MCP_WIRE_PING = 7,        /* liveness probe, echoed as PONG with the same cookie */
  MCP_WIRE_PONG = 8,
  MCP_WIRE_RECOVER = 9 /* version 2: one end re-created its QPs after a transport error */
};
#define MCP_WIRE_TYPE_MAX MCP_WIRE_RECOVER
#define MCP_WIRE_RECOVER_SLOTS 64

enum mcp_wire_reject_code {
  MCP_WIRE_REJECT_NO_LISTENER = 1, /* no listen with that token (closed or wrong process) */
  MCP_WIRE_REJECT_MISMATCH = 2,    /* the configuration fingerprints disagree */
  MCP_WIRE_REJECT_RESOURCES = 3,   /* QP, CQ or memory could not be created */
  MCP_WIRE_REJECT_INTERNAL = 4,
  /* stream 0, acceptor to dialler: closed because no HELLO came within 10 s of accept.
   * A dialler that was only late (no call into mcpnet) dials again; older builds ignore
   * it (a frame for stream 0 that is not theirs). */
  MCP_WIRE_REJECT_SILENT = 5
};

enum { MCP_WIRE_LINK_IB = 1, MCP_WIRE_LINK_ETHERNET = 2 };
enum { MCP_WIRE_GID_IB = 0, MCP_WIRE_GID_ROCE_V1 = 1, MCP_WIRE_GID_ROCE_V2 = 2 };

struct mcp_wire_header {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t length; /* payload bytes */
  uint32_t stream_id;
};

/* Strings (host names, versions, device names, reasons) are printable ASCII only: a
 * decoder refuses any other byte, so nothing a peer sends can forge a log line. */
struct mcp_wire_hello {
  uint64_t nonce; /* the sender process's random nonce: one connection per process pair */
  uint32_t pid;
  char hostname[MCP_WIRE_HOSTNAME_MAX + 1];
  char plugin_version[MCP_WIRE_VERSTR_MAX + 1];
  int32_t local_rank; /* -1 when unknown */
  /* Version 4. The dialler speaks first: its fresh challenge and the listen id its proof
   * will be for (proof 0). The acceptor answers with its own challenge and a proof that
   * it holds that listen's key (listen id 0). See mcp_oob.c. */
  uint64_t challenge; /* nonzero */
  uint32_t listen_id;
  uint64_t proof;
};

/* Settings both ends must agree on (or negotiate); compared at connect time so a
 * mismatch is reported with both values instead of surfacing as a QP error. */
struct mcp_wire_fingerprint {
  uint32_t plugin_version; /* major<<16 | minor<<8 | patch */
  uint8_t gid_type;        /* MCP_WIRE_GID_* */
  uint8_t gid_family;      /* 4, 6, or 0 (IB) */
  uint16_t pkey;
  uint8_t sl; /* 0..15 */
  uint8_t tc;
  uint8_t timeout;      /* 0..31 */
  uint8_t retry;        /* 0..7 */
  uint8_t rnr_retry;    /* 0..7 */
  uint8_t qps_per_conn; /* 1..MCP_WIRE_MAX_QPS */
  uint32_t speed_mbps;
  uint32_t max_message;
};

/* Physical devices of one fused endpoint: 8 from version 4 on (NCCL 2.30's
 * NCCL_NET_MAX_DEVS_PER_NIC), 4 in version 3, whose decoders refuse more. */
#define MCP_WIRE_MAX_MEMBERS 8
#define MCP_WIRE_MAX_MEMBERS_V3 4

/* Member k >= 1 of a fused endpoint (version 3); member 0 is the endpoint's own device
 * fields. They share the endpoint's link layer (a mixed set is refused before any QP
 * exists) and fingerprint. */
struct mcp_wire_member {
  char dev_name[MCP_WIRE_DEVNAME_MAX + 1]; /* non-empty */
  uint8_t port;                            /* >= 1 */
  uint8_t active_mtu;                      /* enum ibv_mtu, 1..5 */
  uint8_t gid_index;
  uint8_t gid[16];
  uint16_t lid;
  uint32_t ring_rkey; /* the endpoint's ring as registered on this member's device */
};

struct mcp_wire_qp {
  uint32_t qpn; /* 24 bits */
  uint32_t psn; /* 24 bits */
};

/* One end of a connection as its peer needs to know it. */
struct mcp_wire_endpoint {
  uint32_t stream_id;                      /* the sender's stream id: the peer puts it in reply headers */
  char dev_name[MCP_WIRE_DEVNAME_MAX + 1]; /* non-empty */
  uint8_t port;                            /* >= 1 */
  uint8_t link_layer;                      /* MCP_WIRE_LINK_* */
  uint8_t active_mtu;                      /* enum ibv_mtu, 1..5 */
  uint8_t gid_index;
  uint8_t gid[16];
  uint16_t lid;
  uint8_t nqps; /* 1..MCP_WIRE_MAX_QPS; qps[nqps..] are not sent */
  struct mcp_wire_qp qps[MCP_WIRE_MAX_QPS];
  /* The sender's clear-to-send ring (connect side) or the receiver's completion
   * records (accept side): where the peer RDMA-writes. */
  uint64_t ring_addr;
  uint32_t ring_rkey;
  uint32_t ring_slots;
  struct mcp_wire_fingerprint fp;
  /* Members (version 3): QP i is on member i % ndevs. 0 reads as 1; frames with an
   * endpoint of more than one member are written as version 3 or later (more than 4:
   * version 4). */
  uint8_t ndevs;
  struct mcp_wire_member more[MCP_WIRE_MAX_MEMBERS - 1]; /* members 1..ndevs-1 */
};

struct mcp_wire_conn_req {
  uint64_t listen_token; /* versions 1-3: the listen's token, in clear */
  uint32_t listen_id;    /* version 4: the listen asked for, and the MAC proving the */
  uint64_t mac;          /* sender holds its key, over this connection's challenges */
  struct mcp_wire_endpoint ep;
};

struct mcp_wire_reject {
  uint32_t code; /* mcp_wire_reject_code; unknown codes are accepted */
  char reason[MCP_WIRE_REASON_MAX + 1];
};

/*
 * RECOVER: sent twice per recovery round by each end of a connection on its stream.
 * Step QPS carries the end's new QPs (and its GID, looked up again) and what its data
 * path has done, so the two can resume and replay exactly the work that did not
 * complete; step READY says its QPs are at RTS, so the peer may write to them.
 */
enum { MCP_WIRE_RECOVER_QPS = 1, MCP_WIRE_RECOVER_READY = 2 };

struct mcp_wire_recover {
  uint32_t round;    /* 1, 2, ...: both ends count the rounds of one connection */
  uint32_t step;     /* QPS: here are my new QPs; READY: they are at RTS (rest unused) */
  uint32_t next_seq; /* send: next CTS to consume; receive: next irecv */
  /* Receive side: per slot, the last seq completed there (0: none yet). */
  uint32_t done[MCP_WIRE_RECOVER_SLOTS];
  struct mcp_wire_endpoint ep;
  /* Version 4, after the endpoint: the sender's members (bit k: member k of ep.ndevs)
   * whose port is up as its rebuild found it, and those its new QPs are on (failover,
   * mcp_link_masks). Neither is 0 or names a member the endpoint does not have. */
  uint8_t up, live;
};

/* One decoded frame: the header's type and stream id plus the payload of that type. */
struct mcp_wire_msg {
  uint16_t version; /* decoded: the header's; encode: 0 means this build's MCP_WIRE_VERSION */
  uint16_t type;
  uint32_t stream_id;
  union {
    struct mcp_wire_hello hello;       /* HELLO */
    struct mcp_wire_conn_req conn_req; /* CONN_REQ */
    struct mcp_wire_endpoint conn_ack; /* CONN_ACK */
    struct mcp_wire_reject reject;     /* CONN_REJECT */
    uint32_t close_stream_id;          /* CLOSE: the sender's own id of the closed stream */
    uint64_t cookie;                   /* PING, PONG */
    struct mcp_wire_recover recover;   /* RECOVER */
  } u;                                 /* CONN_READY carries nothing */
};

const char *mcp_wire_type_name(unsigned type);

/* Checks the 16-byte header at buf (len >= 16): magic, version, known type, length. */
int mcp_wire_header_decode(const uint8_t *buf, size_t len, struct mcp_wire_header *hdr, char *err,
                           size_t errlen);
/* The mcp_sock_frame_len_fn for mcp_sock_rbuf: 0 until 16 bytes are there, then 1 with
 * the whole frame's length, or -EBADMSG for a header that cannot be valid. */
int mcp_wire_frame_len(const uint8_t *buf, size_t have, size_t *len, char *err, size_t errlen);

/* Encodes one frame into buf (MCP_WIRE_MSG_MAX bytes always suffice); *len = bytes used. */
int mcp_wire_encode(const struct mcp_wire_msg *m, uint8_t *buf, size_t cap, size_t *len, char *err,
                    size_t errlen);
/* Decodes exactly one whole frame: len must be 16 + the header's payload length. The
 * output struct is zeroed first, so unused fields compare equal. */
int mcp_wire_decode(const uint8_t *buf, size_t len, struct mcp_wire_msg *m, char *err, size_t errlen);

/* Range checks shared by encoder and decoder; 0 or -EINVAL with the field named. */
int mcp_wire_endpoint_check(const struct mcp_wire_endpoint *ep, char *err, size_t errlen);
/* Field by field (qps up to nqps, strings up to their NUL); 1 when equal. */
int mcp_wire_endpoint_equal(const struct mcp_wire_endpoint *a, const struct mcp_wire_endpoint *b);
int mcp_wire_msg_equal(const struct mcp_wire_msg *a, const struct mcp_wire_msg *b);
int mcp_wire_handle_equal(const struct mcp_wire_handle *a, const struct mcp_wire_handle *b);

#endif
