/*
 * Shared conventions of libstagger: the export macro, time units, errors.
 *
 * Time: every duration and instant in the library is an int64_t count of
 * MICROSECONDS, and its name ends in _us. Monotonic instants ("now") come
 * from the caller; wall-clock instants (needed only to turn an HTTP-date
 * into a wait) are Unix time in microseconds and are named wall_*_us.
 * Primitives never read a clock themselves.
 *
 * Errors: one enum with explicit numbers that are never reused, generated
 * with its messages from STG_ERRNO_MAP. 0 is success. The HTTP status and a
 * transport's own code are kept as separate fields of results, never folded
 * into this enum.
 */
#ifndef STAGGER_COMMON_H
#define STAGGER_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "version.h"

#if defined(_WIN32)
#define STG_API __declspec(dllexport)
#elif defined(__GNUC__)
#define STG_API __attribute__((visibility("default")))
#else
#define STG_API
#endif

/* Alignment of the opaque storage in caller-allocated structs (C11 and
 * C++11 spell it differently). Internal to the headers. */
#if defined(__cplusplus)
#define STG__ALIGNAS(n) alignas(n)
#else
#define STG__ALIGNAS(n) _Alignas(n)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Duration helpers: STG_MS(200) is 200 milliseconds in microseconds. */
#define STG_US(x) ((int64_t)(x))
#define STG_MS(x) ((int64_t)(x) * INT64_C(1000))
#define STG_SEC(x) ((int64_t)(x) * INT64_C(1000000))

/* X(name, number, message). Numbers are explicit and never reused. */
#define STG_ERRNO_MAP(X)                                                   \
    X(OK, 0, "success")                                                    \
    X(EINVAL, 1, "invalid argument")                                       \
    X(ENOMEM, 2, "out of memory")                                          \
    X(EPARSE, 3, "malformed value")                                        \
    X(ERANGE, 4, "value out of range")                                     \
    X(EAGAIN, 5, "not admitted yet; wait and try again")                   \
    X(ETIMEDOUT, 6, "timed out")                                           \
    X(ETOOBIG, 7, "request can never fit: weight exceeds burst")           \
    X(ECANCELED, 8, "cancelled")                                           \
    X(EBREAKER, 9, "circuit breaker is open")                              \
    X(EBUDGET, 10, "retry budget exhausted")                               \
    X(EIO, 11, "input/output error")                                       \
    X(ETRANSPORT, 12, "transport error")                                   \
    X(ESTATE, 13, "operation not valid in the current state")              \
    X(EDB, 14, "database error")                                           \
    X(EUNAVAIL, 15, "backend unavailable")                                 \
    X(ENOTFOUND, 16, "not found")

typedef enum stg_err {
#define STG__ERR_ENUM(name, num, msg) STG_##name = num,
    STG_ERRNO_MAP(STG__ERR_ENUM)
#undef STG__ERR_ENUM
} stg_err;

/* Message for an error code; never NULL ("unknown error" for numbers not in
 * the map). The string is static. Thread-safe. */
STG_API const char *stg_strerror(int err);

/* Symbolic name of an error code ("EINVAL"), or "UNKNOWN". Static string. */
STG_API const char *stg_errname(int err);

/* The library's version string, e.g. "0.1.0"; equals STG_VERSION_STRING of
 * the headers the library was built with. Static string. */
STG_API const char *stg_version(void);

/* The library's version as STG_VERSION_NUM. */
STG_API unsigned stg_version_num(void);

#ifdef __cplusplus
}
#endif
#endif
