/*
 * test_core_siphash.c - SipHash-2-4 against the specification's test vectors (key
 * 00 01 .. 0f; messages 00 01 .. of length 0 and 15), a change of one key or message bit
 * changing the MAC, and the kernel's random bytes: no fallback, and no zero u64.
 */
#include <stdint.h>
#include <string.h>

#include "mcp_test.h"
#include "core/random.h"
#include "core/siphash.h"

static void test_vectors(void)
{
  uint8_t msg[64];
  uint64_t key[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};

  for (int i = 0; i < 64; i++)
    msg[i] = (uint8_t)i;
  CHECK(mcp_siphash24(key, msg, 0) == 0x726fdb47dd0e0e31ull);
  CHECK(mcp_siphash24(key, msg, 15) == 0xa129ca6149be45e5ull);
}

static void test_one_bit_changes_it(void)
{
  uint8_t msg[32] = {1, 2, 3};
  uint64_t key[2] = {42, 43}, a = mcp_siphash24(key, msg, sizeof(msg));

  msg[31] ^= 0x80;
  CHECK(mcp_siphash24(key, msg, sizeof(msg)) != a);
  msg[31] ^= 0x80;
  key[1] ^= 1;
  CHECK(mcp_siphash24(key, msg, sizeof(msg)) != a);
  key[1] ^= 1;
  CHECK(mcp_siphash24(key, msg, sizeof(msg)) == a);
  CHECK(mcp_siphash24(key, msg, 31) != a); /* the length is part of the input */
}

static void test_random(void)
{
  uint64_t a = 0, b = 0;
  uint8_t big[4096], zero[4096];

  CHECK_EQ_INT(mcp_random_u64(&a), 0);
  CHECK_EQ_INT(mcp_random_u64(&b), 0);
  CHECK(a != 0 && b != 0 && a != b);
  memset(big, 0, sizeof(big));
  memset(zero, 0, sizeof(zero));
  CHECK_EQ_INT(mcp_random_fill(big, sizeof(big)), 0);
  CHECK(memcmp(big, zero, sizeof(big)) != 0);
}

int main(void)
{
  RUN_TEST(test_vectors);
  RUN_TEST(test_one_bit_changes_it);
  RUN_TEST(test_random);
  return TEST_EXIT();
}
