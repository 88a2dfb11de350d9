#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver entry point (llvm.org/docs/LibFuzzer.html, "Using libFuzzer as a library"): each fuzz
// target calls it from its own main with its test function.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
