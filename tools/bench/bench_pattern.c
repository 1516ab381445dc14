/*
 * bench_pattern.c - the data --check writes and verifies. Every message gets its own
 * contents, derived from (sender, connection, step, group element), so a message that
 * lands in the wrong slot, arrives twice, arrives stale or is cut short shows up as a
 * wrong byte rather than passing because the old contents looked the same. Words are
 * produced by a 64-bit mixer so filling costs about as much as a memset.
 */
#include <string.h>

#include "bench.h"

static inline uint64_t mix64(uint64_t x)
{
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

uint64_t bench_pattern_derive(uint32_t sender, int conn, uint64_t step, int elem)
{
  return mix64(((uint64_t)sender << 56) ^ ((uint64_t)(uint32_t)conn << 40) ^ (step << 4) ^ (uint64_t)elem);
}

static inline uint64_t word_at(uint64_t seed, uint64_t k) { return mix64(seed + k * 0x9e3779b97f4a7c15ull); }

void bench_pattern_fill(uint8_t *p, size_t n, uint64_t seed)
{
  size_t k, words = n / 8;
  uint64_t w;

  /* memcpy: slots of odd sizes leave words unaligned. */
  for (k = 0; k < words; k++) {
    w = word_at(seed, k);
    memcpy(p + k * 8, &w, 8);
  }
  if (n % 8) {
    w = word_at(seed, words);
    memcpy(p + words * 8, &w, n % 8);
  }
}

long bench_pattern_check(const uint8_t *p, size_t n, uint64_t seed)
{
  size_t k, words = n / 8, i;
  uint8_t expect[8];
  uint64_t w;

  for (k = 0; k <= words; k++) {
    size_t len = k < words ? 8 : n % 8;
    if (len == 0)
      break;
    w = word_at(seed, k);
    memcpy(expect, &w, 8);
    if (memcmp(p + k * 8, expect, len) != 0) {
      for (i = 0; i < len; i++)
        if (p[k * 8 + i] != expect[i])
          return (long)(k * 8 + i);
    }
  }
  return -1;
}
