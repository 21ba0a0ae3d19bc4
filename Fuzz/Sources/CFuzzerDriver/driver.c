// Only the header: LLVMFuzzerRunDriver comes from the fuzzer runtime (-sanitize=fuzzer).
