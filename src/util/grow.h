/*
 * A doubling array's room, written once: stg__reserve makes room for need
 * elements (a byte buffer's append: need = len + n, + 1 for its NUL),
 * doubling cap (from first when empty) until they fit; STG__GROW(arr, n,
 * cap, first) makes room for one more after n. Both are true when there is
 * room, false when out of memory (or past SIZE_MAX bytes), with the array
 * and cap then unchanged (the caller's array stays valid, so it can fail
 * cleanly). Header-only, internal.
 */
#ifndef STG_UTIL_GROW_H
#define STG_UTIL_GROW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* *arrp (any object pointer, passed as its address) grown to hold need
 * elements of elem bytes; *cap the element count allocated. */
static inline bool stg__reserve(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : first ? first : 1;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return false;
        c *= 2;
    }
    if (c > SIZE_MAX / elem)
        return false;
    void *old;
    memcpy(&old, arrp, sizeof old); /* no type punning through a void ** */
    void *v = realloc(old, c * elem);
    if (!v)
        return false;
    memcpy(arrp, &v, sizeof v);
    *cap = c;
    return true;
}

/* *arrp grown for n + 1 elements: room for one more. */
static inline bool stg__grow(void *arrp, size_t n, size_t *cap, size_t elem, size_t first)
{
    return n < SIZE_MAX && stg__reserve(arrp, cap, n + 1, elem, first);
}

#define STG__GROW(arr, n, cap, first) stg__grow(&(arr), (n), &(cap), sizeof *(arr), (first))

#endif /* STG_UTIL_GROW_H */
