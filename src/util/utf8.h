/*
 * Unicode code points in UTF-8 text, counted once for the parts that
 * measure prompts (curl's AI cost estimate, `stagger serve`'s AI personas):
 * every byte that is not a continuation byte (10xxxxxx) starts one.
 * Invalid UTF-8 is counted the same way, never rejected. Header-only,
 * internal.
 */
#ifndef STG_UTIL_UTF8_H
#define STG_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

static inline int64_t stg__utf8_chars(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    int64_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += (p[i] & 0xC0) != 0x80;
    return n;
}

#endif /* STG_UTIL_UTF8_H */
