/*
 * libFuzzer harness for the core's parsers of option text (what the CLI,
 * a JSONL "method" and a policy file hand over): stg_backoff_parse,
 * stg_status_set_parse, stg_retry_after_mode_parse and stg_method_parse.
 * The input is one C string. Checked: only the documented return codes; a
 * failed status-set parse leaves the set cleared and a good one holds at
 * least one status of 0..639 and nothing outside; a parsed backoff strategy resolves (its
 * jitter range is ordered and not below -100%); a parsed mode or method
 * has a name that parses back to the same value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/stagger.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    if (!s)
        return 0;

    stg_status_set set;
    int rc = stg_status_set_parse(&set, s);
    CHECK(rc == STG_OK || rc == STG_EPARSE);
    if (rc != STG_OK) {
        CHECK(stg_status_set_empty(&set));
    } else {
        int n = 0;
        for (int i = 0; i < 640; i++)
            n += stg_status_set_has(&set, i);
        CHECK(n >= 1 && !stg_status_set_empty(&set));
        CHECK(!stg_status_set_has(&set, 640) && !stg_status_set_has(&set, -1));
    }

    stg_backoff_config cfg, resolved;
    memset(&cfg, 0, sizeof cfg);
    rc = stg_backoff_parse(s, &cfg);
    CHECK(rc == STG_OK || rc == STG_EPARSE);
    if (rc == STG_OK) {
        CHECK(strcmp(stg_backoff_kind_name(cfg.kind), "unknown") != 0);
        CHECK(stg_backoff_resolve(&cfg, &resolved) == STG_OK);
        CHECK(resolved.jitter_lo <= resolved.jitter_hi && resolved.jitter_lo >= -1.0);
    }

    stg_retry_after_mode m = (stg_retry_after_mode)42, m2;
    rc = stg_retry_after_mode_parse(s, &m);
    CHECK(rc == STG_OK || rc == STG_EPARSE);
    if (rc == STG_OK) {
        CHECK(stg_retry_after_mode_parse(stg_retry_after_mode_name(m), &m2) == STG_OK);
        CHECK(m2 == m);
    }

    stg_method meth = stg_method_parse(s);
    if (meth != STG_METHOD_UNKNOWN)
        CHECK(stg_method_parse(stg_method_name(meth)) == meth && !strcmp(stg_method_name(meth), s));
    free(s);
    return 0;
}
