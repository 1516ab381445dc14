/*
 * mcp_siphash.c - SipHash-2-4, written from the algorithm's specification: four 64-bit
 * words of state initialised from the key and four constants, two compression rounds
 * per 8-byte little-endian message word, a last word holding the remaining bytes and
 * the length's low byte, then four finalisation rounds.
 */
#include "core/siphash.h"

static inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct sip {
  uint64_t v0, v1, v2, v3;
};

static inline void sip_round(struct sip *s)
{
  s->v0 += s->v1;
  s->v1 = rotl(s->v1, 13);
  s->v1 ^= s->v0;
  s->v0 = rotl(s->v0, 32);
  s->v2 += s->v3;
  s->v3 = rotl(s->v3, 16);
  s->v3 ^= s->v2;
  s->v0 += s->v3;
  s->v3 = rotl(s->v3, 21);
  s->v3 ^= s->v0;
  s->v2 += s->v1;
  s->v1 = rotl(s->v1, 17);
  s->v1 ^= s->v2;
  s->v2 = rotl(s->v2, 32);
}

static inline void sip_word(struct sip *s, uint64_t m)
{
  s->v3 ^= m;
  sip_round(s);
  sip_round(s);
  s->v0 ^= m;
}

uint64_t mcp_siphash24(const uint64_t key[2], const void *data, size_t len)
{
  const unsigned char *p = data;
  struct sip s = {key[0] ^ 0x736f6d6570736575ull, key[1] ^ 0x646f72616e646f6dull,
                  key[0] ^ 0x6c7967656e657261ull, key[1] ^ 0x7465646279746573ull};
  uint64_t last = (uint64_t)(len & 0xff) << 56;
  size_t i, full = len - len % 8;

  for (i = 0; i < full; i += 8) {
    uint64_t m = 0;

    for (int b = 0; b < 8; b++)
      m |= (uint64_t)p[i + (size_t)b] << (8 * b);
    sip_word(&s, m);
  }
  for (i = full; i < len; i++)
    last |= (uint64_t)p[i] << (8 * (i - full));
  sip_word(&s, last);
  s.v2 ^= 0xff;
  for (i = 0; i < 4; i++)
    sip_round(&s);
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}
