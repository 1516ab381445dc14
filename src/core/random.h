/*
 * random.h - the one source of randomness: process nonces, listen keys, connection
 * challenges and QP start PSNs all come from the kernel's generator here.
 *
 * It has no fallback: a value that only looks random (time, pid) would let a stranger on
 * the network predict a listen key. The kernel's generator is ready on any host that has
 * been up for a few seconds; only the process's first draw may meet one that is not, and
 * waits for it, saying so (mcp_random_fill_wait); every later draw never waits, and a
 * failure fails the caller with a message.
 */
#ifndef MCPNET_RANDOM_H
#define MCPNET_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* Fills buf with len random bytes (getrandom, GRND_NONBLOCK). 0, or -EAGAIN when the
 * kernel's generator is not initialised yet (early boot), or another negative errno. */
int mcp_random_fill(void *buf, size_t len);
/* A nonzero random 64-bit value into *v; 0 or the negative errno of mcp_random_fill. */
int mcp_random_u64(uint64_t *v);
/* For the first draw of a process (the out-of-band channel's nonce, at the first listen
 * or connect): when the generator is not ready yet, waits for it (*waited = 1; the
 * kernel then collects entropy from timing jitter, a second or so) instead of failing.
 * Once it has delivered, it never needs waiting for again. 0 or a negative errno
 * (e.g. -ENOSYS or -EPERM when a seccomp profile forbids getrandom). */
int mcp_random_fill_wait(void *buf, size_t len, int *waited);

#endif
