// libFuzzer's driver, called from Swift's main: SwiftPM links an executable's entry point as
// main itself, so libFuzzer's own main cannot be used.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
