/*
 * The vectors of tests/vectors/bodies/: the vendors' error bodies from
 * their public documentation, read by libstagger-curl's body reader
 * (src/curl/body_hints.c, jansson) and the core's rules on them
 * (stg_hints_body, stg_decide). The runner is test_vectors.c's, compiled
 * with STG_VECTORS_BODIES (the format is in tests/vectors/README.md).
 */
#if defined(__has_include) && !__has_include(<curl/curl.h>)
/* libstagger-curl is not built here (no libcurl): skipped. */
#include <stdio.h>
int main(void);
int main(void)
{
    puts("skipped: no libcurl");
    return 77;
}
#else
#define STG_VECTORS_BODIES 1
#include "test_vectors.c"
#endif
