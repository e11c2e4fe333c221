/*
 * stagger version: the one source of truth. CMakeLists.txt reads these
 * macros, so bump them here and nowhere else.
 */
#ifndef STAGGER_VERSION_H
#define STAGGER_VERSION_H

#define STG_VERSION_MAJOR 0
#define STG_VERSION_MINOR 1
#define STG_VERSION_PATCH 0
#define STG_VERSION_STRING "0.1.0"
/* 0xMMmmpp: compare with >= in #if. */
#define STG_VERSION_NUM ((STG_VERSION_MAJOR << 16) | (STG_VERSION_MINOR << 8) | STG_VERSION_PATCH)

/* The ABI number: the shared libraries' SOVERSION (libstagger.so.N,
 * libstagger-curl.so.N, libstagger-redis.so.N). It changes only when a
 * release breaks binary compatibility and is never reused; a release that
 * only adds keeps it. See docs/ABI.md. (ABI 0 was 0.1.0's layout, before
 * the reserved tails and the opaque lock-free state.) */
#define STG_ABI_VERSION 1

#endif
