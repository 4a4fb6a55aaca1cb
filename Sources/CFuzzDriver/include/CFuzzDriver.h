#ifndef SESSIONKIT_CFUZZDRIVER_H
#define SESSIONKIT_CFUZZDRIVER_H

#include <stddef.h>
#include <stdint.h>

/// One fuzz input: returns 0.
typedef int (*sk_fuzz_callback)(const uint8_t *data, size_t size);

/// Runs libFuzzer's driver when the binary was built with `-sanitize=fuzzer`; returns -1 when it was not (the
/// driver symbol is a weak reference that is then null), so a plain build can still replay inputs.
int sk_run_fuzzer(int *argc, char ***argv, sk_fuzz_callback callback);

#endif
