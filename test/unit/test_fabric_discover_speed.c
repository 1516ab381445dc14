/*
 * test_fabric_discover_speed.c - the speed getProperties reports: IB width and speed codes to
 * Mb/s (XDR through active_speed_ex), the fallbacks for codes mcpnet does not know (never
 * 0, which NCCL reads as 10 Gb/s), and the extended port query that carries
 * active_speed_ex past the layout of Debian 12's libibverbs 44 headers. The lab kernel
 * has no XDR link, so a fake provider answers the query here.
 */
#include <stddef.h>
#include <stdint.h>

#include "mcp_test.h"
#include "core/verbs.h"
#include "fabric/fabric.h"

/* ibv_port_attr's width codes: 1x, 4x, 8x, 12x, 2x. */
enum { W1 = 1, W4 = 2, W8 = 4, W12 = 8, W2 = 16 };
/* Speed codes: SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR. */
enum { SDR = 1, DDR = 2, QDR = 4, FDR10 = 8, FDR = 16, EDR = 32, HDR = 64, NDR = 128, XDR = 256 };

static void test_mapping(void)
{
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W1, SDR), 2500);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, DDR), 20000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, QDR), 40000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, FDR10), 40000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, FDR), 56000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, EDR), 100000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, HDR), 200000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W2, HDR), 100000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, NDR), 400000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W2, NDR), 200000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W1, NDR), 100000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, XDR), 800000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W8, EDR), 200000);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W12, QDR), 120000);
  /* The mapping itself says "unknown" with 0; only mcp_fabric_port_speed reports. */
  CHECK_EQ_INT(mcp_fabric_speed_mbps(3, EDR), 0);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, 512), 0);
  CHECK_EQ_INT(mcp_fabric_speed_mbps(W4, 0), 0);
}

static void test_speed_ex(void)
{
  const char *src = "unset";

  /* XDR: the kernel cannot fit 0x100 into active_speed and leaves it 0. */
  CHECK_EQ_INT(mcp_fabric_port_speed(W4, 0, XDR, 0, &src), 800000);
  CHECK(src == NULL);
  CHECK_EQ_INT(mcp_fabric_port_speed(W2, 0, XDR, 0, &src), 400000);
  /* A non-zero speed_ex wins over whatever active_speed holds. */
  CHECK_EQ_INT(mcp_fabric_port_speed(W4, NDR, XDR, 0, &src), 800000);
  /* 0 in speed_ex (an older library or kernel): active_speed applies. */
  CHECK_EQ_INT(mcp_fabric_port_speed(W4, NDR, 0, 0, &src), 400000);
  CHECK(src == NULL);
}

static void test_fallback(void)
{
  const char *src = NULL;
  int w, i;
  static const uint32_t odd[] = {0, 3, 512, 1024, 0x80000000u};

  /* A code from a later generation: the kernel's rate knows it. */
  CHECK_EQ_INT(mcp_fabric_port_speed(W4, 0, 512, 1600000, &src), 1600000);
  CHECK(src != NULL && strstr(src, "sysfs") != NULL);
  /* No rate either: the documented fallback, said as such. */
  src = NULL;
  CHECK_EQ_INT(mcp_fabric_port_speed(W4, 0, 512, 0, &src), MCP_FABRIC_SPEED_FALLBACK_MBPS);
  CHECK(src != NULL && strstr(src, "fallback") != NULL);
  /* An unknown width with a known speed is just as unknown. */
  CHECK_EQ_INT(mcp_fabric_port_speed(0, EDR, 0, 25000, &src), 25000);
  /* Never 0, whatever the codes. */
  for (w = 0; w < 256; w++)
    for (i = 0; i < (int)(sizeof(odd) / sizeof(odd[0])); i++) {
      CHECK(mcp_fabric_port_speed((uint8_t)w, (uint8_t)odd[i], odd[i], 0, &src) > 0);
      CHECK(mcp_fabric_port_speed((uint8_t)w, (uint8_t)i, 0, -1, &src) > 0);
    }
}

/* A provider behind libibverbs' query_port op. "new" behaves as rdma-core >= 50 on an XDR
 * port (fills active_speed_ex when the caller's buffer has room); "old" as libibverbs
 * 44: zeroes what it is given and fills only the 52 bytes it knows. */
static size_t seen_len;
static int provider_new;

static int fake_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
  uint32_t ex = XDR;

  (void)ctx;
  (void)port;
  seen_len = len;
  memset(attr, 0, len);
  attr->state = IBV_PORT_ACTIVE;
  attr->active_width = W4;
  attr->active_speed = 0;
  if (provider_new && len >= MCP_PORT_ATTR_SPEED_EX_OFFSET + sizeof(ex))
    memcpy((unsigned char *)attr + MCP_PORT_ATTR_SPEED_EX_OFFSET, &ex, sizeof(ex));
  return 0;
}

static int fake_compat_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
  (void)ctx;
  (void)port;
  ((struct ibv_port_attr *)attr)->active_width = W4;
  ((struct ibv_port_attr *)attr)->active_speed = EDR;
  return 0;
}

static void test_query_layout(void)
{
  struct verbs_context vc;
  struct mcp_port_attr px;
  const char *src;

  memset(&vc, 0, sizeof(vc));
  vc.sz = sizeof(vc);
  vc.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
  vc.query_port = fake_query_port;

  provider_new = 1;
  memset(&px, 0xee, sizeof(px));
  CHECK_EQ_INT(mcp_verbs_query_port_ex(&vc.context, 1, &px), 0);
  /* The library is told how much room there is, which is what makes it fill the field. */
  CHECK(seen_len >= MCP_PORT_ATTR_SPEED_EX_OFFSET + sizeof(uint32_t));
  CHECK(seen_len == sizeof(px));
  CHECK_EQ_INT(mcp_port_attr_speed_ex(&px), XDR);
  CHECK_EQ_INT(
    mcp_fabric_port_speed(px.attr.active_width, px.attr.active_speed, mcp_port_attr_speed_ex(&px), 0, &src),
    800000);

  provider_new = 0;
  memset(&px, 0xee, sizeof(px));
  CHECK_EQ_INT(mcp_verbs_query_port_ex(&vc.context, 1, &px), 0);
  CHECK_EQ_INT(mcp_port_attr_speed_ex(&px), 0);

  /* A context without the extended ops: the old entry point, speed_ex stays 0. */
  vc.context.abi_compat = NULL;
  mcp_ibv.query_port = fake_compat_query_port;
  memset(&px, 0xee, sizeof(px));
  CHECK_EQ_INT(mcp_verbs_query_port_ex(&vc.context, 1, &px), 0);
  CHECK_EQ_INT(mcp_port_attr_speed_ex(&px), 0);
  CHECK_EQ_INT(
    mcp_fabric_port_speed(px.attr.active_width, px.attr.active_speed, mcp_port_attr_speed_ex(&px), 0, &src),
    100000);
  mcp_ibv.query_port = NULL;
}

int main(void)
{
  RUN_TEST(test_mapping);
  RUN_TEST(test_speed_ex);
  RUN_TEST(test_fallback);
  RUN_TEST(test_query_layout);
  return TEST_EXIT();
}
