/* cmocka needs these before it; every unit test includes this instead. */
#ifndef STG_TEST_CMOCKA_ALL_H
#define STG_TEST_CMOCKA_ALL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* assert lo <= v <= hi, printing all three on failure. */
#define assert_in_range_i64(v, lo, hi)                                                     \
    do {                                                                                   \
        long long v_ = (long long)(v), lo_ = (long long)(lo), hi_ = (long long)(hi);       \
        if (v_ < lo_ || v_ > hi_)                                                          \
            fail_msg("%s = %lld not in [%lld, %lld]", #v, v_, lo_, hi_);                   \
    } while (0)
#endif
