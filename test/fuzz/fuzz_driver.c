/*
 * fuzz_driver.c - the plain driver of the fuzz targets that have no driver of their own
 * (fuzz_oob, fuzz_netlink, fuzz_doctor), for builds without libFuzzer (gcc): it writes the
 * target's seeds (--write-seeds DIR), replays files and folders through the target, and
 * runs N pseudo-random inputs (--random N), each a seed mutated a few bytes at a time or
 * bytes of its own, deterministically. The libFuzzer build of the same target does not
 * link this file. A target aborts on a broken invariant; ASan/UBSan, when built with
 * them, catch the rest.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_target.h"

#define FUZZ_MAX_INPUT 8192
#define MAX_SEEDS 256

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static int nseeds;

static void keep_seed(const uint8_t *data, size_t len)
{
  if (nseeds == MAX_SEEDS || (seeds[nseeds] = malloc(len ? len : 1)) == NULL)
    return;
  memcpy(seeds[nseeds], data, len);
  seed_len[nseeds++] = len;
}

static int write_seed(const char *dir, const char *name, const uint8_t *data, size_t len)
{
  char path[4096];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, len, f) != len) {
    fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
    if (f != NULL)
      fclose(f);
    return -1;
  }
  return fclose(f) == 0 ? 0 : -1;
}

static int replay_file(const char *path, int *count)
{
  static uint8_t buf[FUZZ_MAX_INPUT];
  FILE *f = fopen(path, "rb");
  size_t len;

  if (f == NULL) {
    fprintf(stderr, "fuzz: cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  len = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, len);
  keep_seed(buf, len);
  (*count)++;
  return 0;
}

static int replay(const char *path, int *count)
{
  struct stat st;
  struct dirent *e;
  char sub[4096];
  DIR *d;
  int rc = 0;

  if (stat(path, &st) != 0) {
    fprintf(stderr, "fuzz: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode))
    return replay_file(path, count);
  d = opendir(path);
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL && rc == 0) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
    rc = replay_file(sub, count);
  }
  closedir(d);
  return rc;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static void random_inputs(long n)
{
  static uint8_t buf[FUZZ_MAX_INPUT];

  for (long i = 0; i < n; i++) {
    size_t len;

    if (nseeds > 0 && rnd() % 4 != 0) {
      int k = (int)(rnd() % (uint64_t)nseeds);

      len = seed_len[k];
      memcpy(buf, seeds[k], len);
      for (int m = (int)(rnd() % 4); m >= 0 && len > 0; m--)
        buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
      if (rnd() % 8 == 0 && len > 1)
        len = 1 + (size_t)(rnd() % len); /* cut short */
    } else {
      len = (size_t)(rnd() % 600);
      for (size_t j = 0; j < len; j++)
        buf[j] = (uint8_t)rnd();
    }
    LLVMFuzzerTestOneInput(buf, len);
  }
}

int main(int argc, char **argv)
{
  int count = 0;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--write-seeds") == 0 && i + 1 < argc) {
      const char *dir = argv[++i];

      if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return 1;
      if (fuzz_seeds(dir, write_seed) != 0)
        return 1;
    } else if (strcmp(argv[i], "--random") == 0 && i + 1 < argc) {
      long n = strtol(argv[++i], NULL, 10);

      random_inputs(n);
      count += (int)n;
    } else if (replay(argv[i], &count) != 0) {
      return 1;
    }
  }
  printf("%s: %d inputs, no failure\n", argv[0], count);
  return 0;
}
