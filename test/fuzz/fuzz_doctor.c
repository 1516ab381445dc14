/*
 * fuzz_doctor.c - the fuzz target for what one mcpnet-doctor reads from another over its
 * control connection, once the run's token was proved (a doctor of the same run may
 * still be broken, or impersonated on the path): the summary (key=value lines), a fleet
 * node's report to node 0, the measurement plan, and the view a node's mcpnet-top --fleet
 * sends node 0 (tools/top/top_wire.c, which node 0 then joins and prints). The first byte
 * picks the parser; the rest is the frame's text. Whatever the bytes, the strings that come
 * out are printable and terminated and the numbers in their ranges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "doctor_ctl.h"
#include "doctor_fleet.h"
#include "fuzz_target.h"
#include "top.h"

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
  switch (data[0] % 4) {
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
  case 3: {
    struct top_view v;
    struct top_root *roots;
    char err[200];
    int nroots = 0, nwaiting = 0;
    FILE *null;

    if (top_wire_decode(text, size - 1, &v, err, sizeof(err)) == 0) {
      printable(v.host, sizeof(v.host), "view host");
      if (v.nproc < 0 || v.nproc > TOP_WIRE_MAX_PROCS)
        fuzz_fail("view process count out of range");
      for (int i = 0; i < v.nproc; i++) {
        printable(v.proc[i].host, sizeof(v.proc[i].host), "process host");
        printable(v.proc[i].name, sizeof(v.proc[i].name), "process name");
        for (int k = 0; k < v.proc[i].ncomm; k++) {
          const struct top_comm *c = &v.proc[i].comm[k];

          printable(c->peer_host, sizeof(c->peer_host), "peer host");
          printable(c->wait_text, sizeof(c->wait_text), "wait text");
          printable(c->cause, sizeof(c->cause), "cause");
          if (c->activity < TOP_IDLE || c->activity > TOP_FAILED || c->wait < 0 ||
              c->wait >= MCP_WAIT_COUNT || (c->kind != 1 && c->kind != 2))
            fuzz_fail("comm field out of range");
        }
      }
      /* What node 0 does with it: join it (here with itself) and print the roots. */
      roots = top_fleet_roots(&v, 1, &nroots, &nwaiting);
      null = fopen("/dev/null", "w");
      if (null != NULL) {
        top_roots_text(roots, nroots, nwaiting, 1, 1, null);
        fclose(null);
      }
      free(roots);
    }
    top_view_free(&v);
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
    {"top-view",
     "\3N\thost=lab-a\tdead=0\n"
     "P\tpid=417\thost=lab-a\trank=0\tlrank=-1\tname=mcp-stream\taddr=192.0.2.1:41000\tstopped=0\t"
     "pstate=S\tcheck=0.1\n"
     "C\tkind=1\tid=1\tstream=1\tpstream=2\tdev=0\tport=1\tibdev=rxe0\tphost=lab-b\tppid=450\t"
     "plrank=-1\tpaddr=192.0.2.2\tstate=4\tstate_s=30.0\tposted=196\tdone=196\tbytes=7268537\t"
     "moved=0\tstall=8.0\tnonedone=8.0\twait=2\twseq=197\twcount=1\trec=0\tact=2\twaited=8.0\t"
     "waits=1\twtext=the send of seq 197 waits\tcause=\n"},
  };
  int rc = 0;

  for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
    const char *s = seeds[i][1];
    size_t len = 1 + strlen(s + 1);

    rc |= write(dir, seeds[i][0], (const uint8_t *)s, len);
  }
  return rc != 0 ? -1 : 0;
}
