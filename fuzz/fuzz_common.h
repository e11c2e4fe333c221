/*
 * What every libFuzzer harness here shares: CHECK, an invariant that
 * aborts (so libFuzzer records the input; not STG_ASSERT, which Release
 * turns off), and fuzz_cstr, the input as a NUL-terminated string for the
 * parsers that take one (libFuzzer's data has no NUL at its end).
 */
#ifndef STG_FUZZ_COMMON_H
#define STG_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                               \
    do {                                                                                       \
        if (!(x))                                                                              \
            abort();                                                                           \
    } while (0)

/* A malloc'ed copy of data[0..size) and a NUL; NULL when out of memory. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s) {
        memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

#endif /* STG_FUZZ_COMMON_H */
