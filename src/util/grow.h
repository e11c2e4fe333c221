/*
 * A doubling array's room for one more element, written once: arr holds n
 * of cap elements; when full it is reallocated to twice cap (first when
 * empty). STG__GROW(arr, n, cap, first) is true when there is room, false
 * when out of memory, with arr and cap then unchanged (the caller's array
 * stays valid, so it can fail cleanly). Header-only, internal.
 */
#ifndef STG_UTIL_GROW_H
#define STG_UTIL_GROW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* *arrp (any object pointer, passed as its address) grown for n + 1
 * elements of elem bytes; *cap the element count allocated. */
static inline bool stg__grow(void *arrp, size_t n, size_t *cap, size_t elem, size_t first)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? *cap * 2 : first;
    if (c <= n || c > SIZE_MAX / elem)
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

#define STG__GROW(arr, n, cap, first) stg__grow(&(arr), (n), &(cap), sizeof *(arr), (first))

#endif /* STG_UTIL_GROW_H */
