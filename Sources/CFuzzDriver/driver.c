#include "CFuzzDriver.h"

// Defined by libFuzzer (linked by -sanitize=fuzzer); null otherwise.
extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t))
    __attribute__((weak));

int sk_run_fuzzer(int *argc, char ***argv, sk_fuzz_callback callback) {
    if (LLVMFuzzerRunDriver == 0) {
        return -1;
    }
    return LLVMFuzzerRunDriver(argc, argv, callback);
}
