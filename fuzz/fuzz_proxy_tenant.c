/*
 * libFuzzer harness for the proxy's Stagger-Tenant value
 * (src/proxy/control.c px_parse_tenant), a request header any program
 * behind the proxy sends.
 *
 * Input: the value, copied into a buffer of exactly its length plus the
 * NUL (an over-read is an ASan report). Checked: a refusal leaves the
 * outputs untouched; an acceptance gives a name stg_tenant_check accepts
 * (so it can go into metric labels and log lines unescaped) and a weight
 * of 0 (not given) or in (0, 1e6].
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/internal.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *v = fuzz_cstr(data, size);
    if (!v)
        return 0;
    char name[STG_TENANT_MAX + 1] = "untouched";
    double w = -7;
    bool ok = px_parse_tenant(v, name, sizeof name, &w);
    if (!ok) {
        CHECK(!strcmp(name, "untouched") && w == -7);
    } else {
        CHECK(stg_tenant_check(name, NULL) == STG_OK);
        CHECK(w == 0 || (w > 0 && w <= 1e6));
    }
    free(v);
    return 0;
}
