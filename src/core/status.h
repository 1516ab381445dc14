/*
 * status.h - the live view of a process's comms that mcpnet-top reads (core).
 *
 * A job that hangs across nodes hangs in calls nobody can see into: the process may be
 * stuck in a GPU kernel, stopped, or waiting in NCCL's proxy for a peer, and mcpnet has no
 * thread of its own to answer questions. So each process publishes its comms where a
 * tool on the same node reads them without the process's help: one small file per
 * process under MCPNET_STATUS_DIR (default /dev/shm, a tmpfs), mode 0600 (the same user
 * and root only), mapped shared. It holds no secret: no listen key, no rkey, no address
 * of our memory. Publishing costs the data path a few plain stores per message into the
 * comm's slot (struct mcp_status_count): no system call, lock or allocation. Everything
 * else is written where a comm changes state (connect, accept, recovery, failure) and by
 * the 100 ms liveness check, which runs only while a caller waits.
 *
 * Liveness: the owner holds an open-file-description write lock on its file for its whole
 * life; the kernel drops it when the process dies. A reader asks for a read lock it never
 * takes (F_OFD_GETLK): none held means the owner is gone. A segment left by a killed
 * process is unlinked by the next mcpnet process of the same user that starts on the node
 * (mcp_status_acquire), and ignored by readers until then.
 *
 * The layout is versioned (magic, version, sizes in the header): a reader of another
 * build checks them before it trusts a byte. Every integer is fixed-width; text is
 * NUL-terminated within its array.
 */
#ifndef MCPNET_STATUS_H
#define MCPNET_STATUS_H

#include <stddef.h>
#include <stdint.h>

struct mcp_config;

#define MCP_STATUS_MAGIC 0x5354504du /* "MPTS" */
#define MCP_STATUS_VERSION 1
#define MCP_STATUS_SLOTS 4096 /* comms one process publishes; more are counted, not shown */
#define MCP_STATUS_NAME_PREFIX "mcpnet."
#define MCP_STATUS_NAME_SUFFIX ".status"

/* What a comm is doing, as its owner last wrote it. A READY comm is idle, moving or
 * waiting: the counters and the wait below tell which (mcpnet-top decides). */
enum mcp_status_state {
  MCP_STATUS_FREE = 0,
  MCP_STATUS_CONNECTING,   /* connect or accept under way: TCP, handshake, QP bring-up */
  MCP_STATUS_WAIT_ACCEPT,  /* connect: the peer's host holds our connection, its process has not accepted */
  MCP_STATUS_WAIT_CONNECT, /* accept: the connecting process has not finished (no READY) */
  MCP_STATUS_READY,
  MCP_STATUS_RECOVERING, /* QPs being re-created after a transport error (cause says why) */
  MCP_STATUS_FAILED      /* every later call fails (cause holds the error) */
};

/* What the oldest work of a comm that makes no progress waits for: the watchdog's
 * diagnosis (mcp_xfer_health.c), the first that applies. */
enum mcp_status_wait {
  MCP_WAIT_NONE = 0,
  MCP_WAIT_ACK,     /* send: data written, no acknowledgement from the peer's adapter */
  MCP_WAIT_CTS,     /* send: no clear-to-send: the peer has not posted the matching irecv */
  MCP_WAIT_TAG,     /* send: the head receive has no buffer for this tag (ranks out of step under PXN) */
  MCP_WAIT_GROUP,   /* send: a grouped receive waits for the isends of its other tags */
  MCP_WAIT_ISEND,   /* send: the peer advertised a buffer that no isend took */
  MCP_WAIT_DATA,    /* recv: receives advertised, no data arrived: the peer has not sent */
  MCP_WAIT_PARTIAL, /* recv: some writes of a receive arrived, the rest did not */
  MCP_WAIT_TEST,    /* recv: irecv cannot advertise: the receives in flight are not tested */
  MCP_WAIT_FLUSH,   /* recv: a flush read the local adapter has not completed */
  MCP_WAIT_COUNT
};
const char *mcp_status_state_name(unsigned state);
const char *mcp_status_wait_name(unsigned wait);

/* Written by the data path only, with plain stores, by the one thread that uses the comm
 * at a time: requests handed out (isend/irecv), requests tested done, their bytes. */
struct mcp_status_count {
  uint64_t posted;
  uint64_t done;
  uint64_t bytes;
  uint64_t spare;
};

#define MCP_STATUS_HOST_MAX 65
#define MCP_STATUS_ADDR_MAX 64
#define MCP_STATUS_TEXT_MAX 256

/* One comm's slot. The counters sit alone on the first cache line. The rest is
 * written under gen (odd while it changes; a reader retries), by the comm's owner. */
struct mcp_status_comm {
  struct mcp_status_count count;
  uint8_t pad0[64 - sizeof(struct mcp_status_count)];
  uint32_t gen;
  uint32_t state;       /* enum mcp_status_state; FREE: the slot is unused */
  uint32_t kind;        /* 1 send, 2 recv (enum mcp_comm_kind) */
  uint32_t id;          /* the comm's per-process id (its wr_id tag) */
  uint64_t state_ms;    /* CLOCK_MONOTONIC ms when the state began */
  uint32_t stream_id;   /* our out-of-band stream id; the peer's comm names it as its peer_stream */
  uint32_t peer_stream; /* the peer's, 0 until its answer named it */
  int32_t dev;          /* NCCL's device index */
  int32_t port;         /* member 0's port */
  int32_t ndevs;        /* members (a fused device has more than one) */
  int32_t nqps;         /* QPs of the connection */
  char ibdev[64];       /* member 0's device, e.g. "mlx5_0" ("+ mlx5_1" for a fused one) */
  char gid[48];         /* member 0's GID, as text */
  char peer_host[MCP_STATUS_HOST_MAX];
  uint8_t pad1[3];
  uint32_t peer_pid;                   /* 0: not known yet (no HELLO from its process) */
  int32_t peer_local_rank;             /* -1: unknown */
  char peer_addr[MCP_STATUS_ADDR_MAX]; /* the peer's out-of-band address */
  uint32_t recoveries;                 /* recoveries completed */
  uint32_t wait;                       /* enum mcp_status_wait, from the last check */
  /* From the 100 ms liveness check (only while a caller waits on this comm). */
  uint64_t check_ms;  /* the last check */
  uint64_t stall_ms;  /* no post and no completion since (the watchdog's clock); 0: moved at the check */
  uint64_t done_mark; /* count.done at the check that set done_ms */
  uint64_t done_ms;   /* since when count.done has been done_mark, as the checks saw it */
  uint32_t wait_seq;  /* the sequence number the wait is about */
  int32_t wait_count; /* how many requests it concerns */
  char wait_text[MCP_STATUS_TEXT_MAX]; /* the watchdog's sentence */
  char cause[MCP_STATUS_TEXT_MAX];     /* RECOVERING: its cause; FAILED: the error */
};
/* Slots follow the header at this stride; the struct may grow into it within a version. */
#define MCP_STATUS_SLOT_BYTES 1024
_Static_assert(sizeof(struct mcp_status_comm) <= MCP_STATUS_SLOT_BYTES, "a status slot fits 1 KiB");

/* The file's first 4 KiB: who the process is. */
struct mcp_status_head {
  uint32_t magic, layout; /* MCP_STATUS_MAGIC, MCP_STATUS_VERSION */
  uint32_t head_size, slot_size, nslots;
  uint32_t pid;
  uint64_t start_ticks; /* /proc/PID/stat starttime: tells a reused pid from the owner */
  uint64_t pidns;       /* the inode of the owner's pid namespace (0: unknown) */
  uint64_t created_ms;
  uint64_t check_ms;   /* the last liveness check of any comm: a call into mcpnet waited */
  int32_t rank;        /* RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK; -1 unknown */
  int32_t local_rank;  /* as placement resolves it; -1 unknown */
  uint32_t slots_used; /* slots [0, slots_used) may be in use */
  uint32_t unshown;    /* comms that found every slot taken */
  char host[MCP_STATUS_HOST_MAX];
  char name[16];                  /* the program (/proc/self/comm) */
  char version[80];               /* mcp_version_text() */
  char addr[MCP_STATUS_ADDR_MAX]; /* this process's out-of-band listener */
};
#define MCP_STATUS_HEAD_BYTES 4096
_Static_assert(sizeof(struct mcp_status_head) <= MCP_STATUS_HEAD_BYTES, "the header fits its page");

/* ---- The owner (mcp_status.c) ---------------------------------------------------------
 * acquire takes a reference on the process's segment, creating it on first use (and
 * unlinking the segments of this user's dead processes in the directory; addr is the
 * process's out-of-band address, for the header); it never fails
 * its caller: without a segment (MCPNET_STATUS=0, no directory, no memory) slots are NULL
 * and the comms are not shown, said once at INFO. release drops it; the last reference
 * unlinks the file, so nothing outlives the last comm. */
void mcp_status_acquire(const struct mcp_config *cfg, const char *addr);
void mcp_status_release(void);
/* A free slot for a comm of kind (CONNECTING), or NULL; close frees it. */
struct mcp_status_comm *mcp_status_open(int kind, unsigned id);
void mcp_status_close(struct mcp_status_comm *s);
/* A liveness check ran at now_ms (the header's heartbeat). */
void mcp_status_heartbeat(uint64_t now_ms);
/* Tests: the path of this process's segment ("" when none). */
const char *mcp_status_path(void);

/* Fields other than the counters change between begin and end (one writer at a time).
 * begin's read-modify-write keeps the stores that follow it after it (no fence: GCC's
 * ThreadSanitizer builds refuse fences); end publishes them. */
static inline void mcp_status_begin(struct mcp_status_comm *s)
{
  __atomic_fetch_add(&s->gen, 1, __ATOMIC_ACQ_REL);
}
static inline void mcp_status_end(struct mcp_status_comm *s)
{
  __atomic_fetch_add(&s->gen, 1, __ATOMIC_RELEASE);
}
/* The text into a slot's array, cut to fit, printable ASCII only (a peer's words). */
void mcp_status_text(char *dst, size_t len, const char *src);

/* ---- Readers (mcp_status_read.c): mcpnet-top and the tests -------------------------- */

/* One process as read: its header and its comms in use, copied out consistently. */
struct mcp_status_proc {
  char path[512];
  int alive;   /* the owner still holds its lock (and, in our pid namespace, its pid lives) */
  int stopped; /* /proc/PID/stat says T or t (SIGSTOP, a debugger); -1: cannot tell */
  char pstate; /* that state letter, '?' unknown */
  struct mcp_status_head head;
  int ncomm;
  struct mcp_status_comm *comm;
};
/* Calls fn for each segment file under dir; returns how many, or -errno when dir cannot
 * be read. */
int mcp_status_scan(const char *dir, int (*fn)(const char *path, void *arg), void *arg);
/* Reads the segment at path into p (p->comm allocated; free with proc_free). 0, or
 * -errno with the reason in err: not ours to read, not a segment, another layout. */
int mcp_status_read(const char *path, struct mcp_status_proc *p, char *err, size_t errlen);
void mcp_status_proc_free(struct mcp_status_proc *p);
/* Whether the owner of the open segment fd (header h) is alive: 1, 0 dead. */
int mcp_status_owner_alive(int fd, const struct mcp_status_head *h);
/* Unlinks the segments under dir whose owners are dead and that this user may remove;
 * returns how many. */
int mcp_status_cleanup(const char *dir);
/* This process's pid namespace inode and a pid's start time (0 when unreadable). */
uint64_t mcp_status_pidns(void);
uint64_t mcp_status_start_ticks(int pid, char *state);

/* ---- The data path's stores (inline: a call costs as much as the work) -------------- */
static inline void mcp_status_posted(struct mcp_status_count *k) { k->posted++; }
static inline void mcp_status_done(struct mcp_status_count *k, uint64_t bytes)
{
  k->done++;
  k->bytes += bytes;
}

#endif
