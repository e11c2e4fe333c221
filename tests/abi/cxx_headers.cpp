/*
 * The public headers from C++ (test_install.sh builds this with g++
 * -Wall -Wextra -Werror -pedantic against the installed copy and runs it).
 *
 * What it proves: every installed header compiles as C++ (the generated
 * all_headers.hpp includes each one alone first, then this file includes
 * the umbrella headers); the extern "C" guards are there (calls to a
 * function of each library would not link against the C libraries
 * otherwise, the names being mangled); C++ sees the same layout as C
 * (abi_layout.h's asserts, and --dump, which the script diffs with
 * test_abi's); and the lock-free objects work from C++ although their
 * atomics are hidden from it.
 */
#include "all_headers.hpp"

#include <cstdio>
#include <cstring>

#include "abi_layout.h"
#include "abi_dump.h"

static int failures;
#define EXPECT(c)                                                          \
    do {                                                                   \
        if (!(c)) {                                                        \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);   \
            failures++;                                                    \
        }                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    if (argc > 1 && std::strcmp(argv[1], "--dump") == 0) {
        stg_abi_dump();
        return 0;
    }
    /* Zero-initialised configs mean the defaults, in C++ too. */
    stg_bucket_config bc{};
    bc.rate = 4;
    stg_bucket b;
    EXPECT(stg_bucket_init(&b, &bc, 0) == STG_OK);
    EXPECT(stg_bucket_try(&b, 4, 0, nullptr) == STG_OK);
    int64_t wait = 0;
    EXPECT(stg_bucket_try(&b, 1, 0, &wait) == STG_EAGAIN);
    EXPECT(wait == 250000); /* 1 / 4 per second */

    stg_budget g;
    EXPECT(stg_budget_init(&g, nullptr) == STG_OK);
    EXPECT(stg_budget_allow_retry(&g));

    stg_adaptive a;
    EXPECT(stg_adaptive_init(&a, nullptr, 0) == STG_OK);
    EXPECT(stg_adaptive_acquire(&a, 0, 0, &wait) == STG_OK && wait == 0);
    stg_adaptive_destroy(&a);

    stg_policy p{};
    stg_policy r{};
    EXPECT(stg_policy_resolve(&p, &r) == STG_OK);
    EXPECT(r.max_attempts == STG_POLICY_DEFAULT_MAX_ATTEMPTS);
    EXPECT(std::strcmp(stg_strerror(STG_EAGAIN), "not admitted yet; wait and try again") == 0);
#ifdef STG_ABI_CURL
    EXPECT(stg_curl_classify(CURLE_COULDNT_CONNECT, 0) == STG_NET_CONNECT_REFUSED);
#endif
#ifdef STG_ABI_REDIS
    stg_redis_url u;
    EXPECT(stg_redis_url_parse("redis://127.0.0.1:7000/2/jobs", &u, nullptr) == STG_OK);
    EXPECT(u.port == 7000 && u.db == 2);
#endif
    if (failures)
        std::fprintf(stderr, "%d failure(s)\n", failures);
    else
        std::printf("c++: headers, guards and layout ok\n");
    return failures ? 1 : 0;
}
