/*
 * fuzz_doctor.c - the fuzz target for what one mcpnet-doctor reads from another over its
 * control connection, once the run's token was proved (a doctor of the same run may
 * still be broken, or impersonated on the path): the summary (key=value lines), a fleet
 * node's report to node 0, and the measurement plan. The first byte picks the parser; the
 * rest is the frame's text. Whatever the bytes, the strings that come out are printable
 * and terminated and the numbers in their ranges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "doctor_ctl.h"
#include "doctor_fleet.h"
#include "fuzz_target.h"

static void fuzz_fail(const char *what)
{
  fprintf(stderr, "fuzz_doctor: %s\n", what);
  abort();
}

static void printable(const char *s, size_t cap, const char *what)
{
  const char *end = memchr(s, '\0', cap);

  if (end == NULL)
    fuzz_fail(what);
  for (; s < end; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
      fuzz_fail(what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text;

  if (size < 1 || size > DOCTOR_CTL_MAX)
    return 0;
  text = malloc(size);
  if (text == NULL)
    return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  switch (data[0] % 3) {
  case 0: {
    struct doctor_summary s;

    if (doctor_summary_decode(text, &s) == 0)
      printable(s.host, sizeof(s.host), "summary host");
    break;
  }
  case 1: {
    static struct fleet_node nd;
    int rank = -1, nodes = -1;

    memset(&nd, 0, sizeof(nd));
    doctor_fleet_parse_hello(&nd, text, &rank, &nodes);
    printable(nd.host, sizeof(nd.host), "node host");
    printable(nd.addr, sizeof(nd.addr), "node address");
    for (int k = 0; k < FLEET_OWN_MAX; k++)
      printable(nd.own[k], sizeof(nd.own[k]), "node fail line");
    if (nd.ndev < 0 || nd.ndev > FLEET_MAX_DEVS || nd.nown < 0)
      fuzz_fail("node counts out of range");
    break;
  }
  default: {
    long count;
    size_t bytes;
    int kind = doctor_plan_parse(text, 1 << 20, &count, &bytes);

    if ((kind == DOCTOR_PLAN_BW || kind == DOCTOR_PLAN_LAT) && (count < 1 || count > DOCTOR_PLAN_MAX_COUNT))
      fuzz_fail("plan count out of range");
    if (kind == DOCTOR_PLAN_BW && bytes > (1 << 20))
      fuzz_fail("plan size above the limit");
    break;
  }
  }
  free(text);
  return 0;
}

int fuzz_seeds(const char *dir, fuzz_write_fn write)
{
  static const char *const seeds[][2] = {
    {"summary", "\0host=nodea\ndev=mlx5_0\nport=1\nlink=Ethernet\nmtu=4096\npkey=65535\nversion=0.1.0\n"},
    {"fleet-hello", "\1rank=2\nnodes=4\nndev=8\nnown=1\nhost=node2\naddr=10.0.0.2\nfail=no device\n"},
    {"plan-bw", "\2bw 31 1048576"},
    {"plan-lat", "\2lat 124"},
    {"plan-end", "\2end"},
  };
  int rc = 0;

  for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
    const char *s = seeds[i][1];
    size_t len = 1 + strlen(s + 1);

    rc |= write(dir, seeds[i][0], (const uint8_t *)s, len);
  }
  return rc != 0 ? -1 : 0;
}
