/*
 * The ABI guard, C side: abi_layout.h's static asserts (this file not
 * compiling is the failure), plus the promise the reserved tails must keep:
 * a zeroed config still means the documented defaults. With --dump it
 * prints the layout for test_install.sh to compare with C++.
 */
#include <stdio.h>
#include <string.h>

#include "abi_layout.h"
#include "abi_dump.h"

static int failures;

#define EXPECT(c)                                                          \
    do {                                                                   \
        if (!(c)) {                                                        \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);        \
            failures++;                                                    \
        }                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--dump") == 0) {
        stg_abi_dump();
        return 0;
    }
    /* Zeroed configs, reserved words included, resolve to the defaults. */
    stg_policy zero = {0}, p;
    EXPECT(stg_policy_resolve(&zero, &p) == STG_OK);
    EXPECT(p.max_attempts == STG_POLICY_DEFAULT_MAX_ATTEMPTS);
    EXPECT(p.deadline_us == STG_POLICY_DEFAULT_DEADLINE_US);
    EXPECT(p.backoff.base_us == STG_POLICY_DEFAULT_TRANSIENT_BASE_US);
    EXPECT(p.throttle_base_us == STG_POLICY_DEFAULT_THROTTLE_BASE_US);
    EXPECT(p.backoff.cap_us == STG_BACKOFF_DEFAULT_CAP_US);

    stg_bucket b;
    stg_bucket_config bc = {.rate = 10};
    EXPECT(stg_bucket_init(&b, &bc, 0) == STG_OK);
    EXPECT(stg_bucket_available(&b, 0) == 10); /* burst 0: ceil(rate) */
    EXPECT(stg_bucket_try(&b, 10, 0, NULL) == STG_OK);
    EXPECT(stg_bucket_try(&b, 1, 0, NULL) == STG_EAGAIN);

    stg_budget_config gc = {0};
    stg_budget g;
    EXPECT(stg_budget_init(&g, &gc) == STG_OK);
    EXPECT(stg_budget_tokens(&g) == STG_BUDGET_DEFAULT_MAX_TOKENS);

    stg_adaptive_config ac = {0}, ar;
    EXPECT(stg_adaptive_resolve(&ac, &ar) == STG_OK);
    EXPECT(ar.beta == STG_ADAPTIVE_DEFAULT_BETA && ar.burst == STG_ADAPTIVE_DEFAULT_BURST);
    EXPECT(ar.recovery_us == STG_ADAPTIVE_DEFAULT_RECOVERY_US);
    stg_adaptive a;
    EXPECT(stg_adaptive_init(&a, &ac, 0) == STG_OK);
    EXPECT(stg_adaptive_rate(&a) == 0.0); /* off until the first throttle */
    stg_adaptive_destroy(&a);

    stg_breaker_config kc = {0};
    stg_breaker k;
    EXPECT(stg_breaker_init(&k, &kc) == STG_OK);
    for (int i = 0; i < STG_BREAKER_DEFAULT_CONSECUTIVE - 1; i++)
        stg_breaker_on_failure(&k, 0);
    EXPECT(stg_breaker_state_at(&k, 0) == STG_BREAKER_CLOSED);
    stg_breaker_on_failure(&k, 0);
    EXPECT(stg_breaker_state_at(&k, 0) == STG_BREAKER_OPEN);
    stg_breaker_destroy(&k);

    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("abi: layout frozen for ABI %d, zeroed configs are the defaults\n",
               STG_ABI_VERSION);
    return failures ? 1 : 0;
}
