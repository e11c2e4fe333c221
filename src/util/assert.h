/*
 * STG_ASSERT: an invariant that is executed, not only written (SQLite's
 * assert(), libuv's asserts in src/unix/). Internal to the tree: every part
 * may include it as "util/assert.h"; it is never installed.
 *
 * On in Debug and test builds, off in Release: CMake's Release and
 * RelWithDebInfo define NDEBUG, which turns STG_ASSERT into a no-op that
 * still type-checks its expression (so an assert can never hide a typo, and
 * never has a side effect that Release would lose: its argument is not
 * evaluated there).
 *
 * A failed assertion is a bug in stagger, never bad input: input errors are
 * returned as stg_err codes. It prints the expression and its place on
 * stderr and aborts, so ASan/UBSan builds show a stack trace.
 */
#ifndef STG_UTIL_ASSERT_H
#define STG_UTIL_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#ifndef NDEBUG
#define STG_ASSERT_ENABLED 1
static inline void stg__assert_fail(const char *expr, const char *file, int line,
                                    const char *func)
{
    fprintf(stderr, "stagger: invariant violated: %s (%s:%d, %s)\n", expr, file, line, func);
    abort();
}
#define STG_ASSERT(e) ((e) ? (void)0 : stg__assert_fail(#e, __FILE__, __LINE__, __func__))
#else
#define STG_ASSERT_ENABLED 0
#define STG_ASSERT(e) ((void)sizeof(!(e)))
#endif

#endif /* STG_UTIL_ASSERT_H */
