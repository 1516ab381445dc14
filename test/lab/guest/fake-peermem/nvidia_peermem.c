// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia_peermem.c - a lab stand-in for NVIDIA's peer-memory module. It does nothing.
 *
 * mcpnet reports GPU pointer support (NCCL_PTR_CUDA) only when a GPU peer-memory module
 * is loaded, which it sees as /sys/module/nvidia_peermem; without one it refuses
 * regMr(NCCL_PTR_CUDA). The lab has no GPU, so this module only makes that directory
 * (and its version file, which needs MODULE_VERSION) appear in the guest. The lab's
 * "GPU-like" buffers are ordinary pages the test harness makes unreadable by the CPU
 * after registration: soft-RoCE moves them through the pages it pinned, as a NIC moves
 * GPU memory that peer-memory pinned. Never load this on a machine with a real GPU.
 */
#include <linux/init.h>
#include <linux/module.h>

static int __init fake_peermem_init(void)
{
	pr_info("nvidia_peermem: mcpnet lab stand-in loaded (no GPU, no peer-memory client)\n");
	return 0;
}

static void __exit fake_peermem_exit(void)
{
}

module_init(fake_peermem_init);
module_exit(fake_peermem_exit);

MODULE_DESCRIPTION("mcpnet lab stand-in for nvidia_peermem: does nothing, exists so /sys/module/nvidia_peermem does");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.0-mcpnet-lab");
