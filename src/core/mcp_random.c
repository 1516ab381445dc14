/*
 * mcp_random.c - random bytes from the kernel (see random.h for why there is no
 * fallback). getrandom may return fewer bytes than asked for large requests or when
 * interrupted, so it is called until the buffer is full.
 */
#include <errno.h>
#include <sys/random.h>

#include "core/random.h"

static int random_fill(void *buf, size_t len, unsigned flags)
{
  unsigned char *p = buf;

  while (len > 0) {
    ssize_t n = getrandom(p, len, flags);

    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int mcp_random_fill(void *buf, size_t len) { return random_fill(buf, len, GRND_NONBLOCK); }

int mcp_random_fill_wait(void *buf, size_t len, int *waited)
{
  int rc = random_fill(buf, len, GRND_NONBLOCK);

  *waited = 0;
  if (rc != -EAGAIN)
    return rc;
  /* Early in a boot: a blocking call makes the kernel gather entropy from CPU timing
   * jitter (Linux 5.4 and later), which takes about a second. */
  *waited = 1;
  return random_fill(buf, len, 0);
}

int mcp_random_u64(uint64_t *v)
{
  int rc;

  do
    rc = mcp_random_fill(v, sizeof(*v));
  while (rc == 0 && *v == 0);
  return rc;
}
