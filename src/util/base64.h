/*
 * Base64 (RFC 4648 section 4, with padding): the one encoder of the tree,
 * header-only like the other util/ helpers (the store's and the queue's
 * exports, the test server's echo and its dialects' formats used four
 * copies). Encoding only: stagger never decodes base64 it did not make.
 *
 * Invariants: stg__base64_encode writes exactly STG__BASE64_LEN(n) bytes
 * and a NUL; it reads exactly n bytes, which may hold NUL.
 */
#ifndef STG_UTIL_BASE64_H
#define STG_UTIL_BASE64_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Characters of n bytes encoded, without the NUL. */
#define STG__BASE64_LEN(n) (((n) + 2) / 3 * 4)

/* p[0..n) encoded into out, which holds STG__BASE64_LEN(n) + 1 bytes. */
static inline void stg__base64_encode(const void *p, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = p;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = '\0';
}

/* p[0..n) encoded into a new string (the caller frees it); NULL when out
 * of memory. */
static inline char *stg__base64_new(const void *p, size_t n)
{
    if (n > (SIZE_MAX - 1) / 4 * 3 - 2)
        return NULL;
    char *out = malloc(STG__BASE64_LEN(n) + 1);
    if (out)
        stg__base64_encode(p, n, out);
    return out;
}

#endif /* STG_UTIL_BASE64_H */
