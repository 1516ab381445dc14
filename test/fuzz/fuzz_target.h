/*
 * fuzz_target.h - what each fuzz target of fuzz_driver.c provides: libFuzzer's entry
 * point, and its seed inputs (written through write, one file each; 0 or -1).
 */
#ifndef MCPNET_FUZZ_TARGET_H
#define MCPNET_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

typedef int (*fuzz_write_fn)(const char *dir, const char *name, const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_seeds(const char *dir, fuzz_write_fn write);

#endif
