/*
 * Priority class names and tenant names (stagger/priority.h). Pure.
 *
 * Invariant: stg_priority_name and stg_priority_parse are inverses on the
 * three canonical names, so a class printed in a log, a metric label or a
 * report reads back as the same class.
 */
#include <string.h>
#include <strings.h>

#include "stagger/priority.h"

static const char *const names[STG_N_PRIORITIES] = {"interactive", "normal", "batch"};

int stg_priority_parse(const char *s, int *out)
{
    if (!s || !out)
        return STG_EINVAL;
    for (int i = 0; i < STG_N_PRIORITIES; i++)
        if (strcasecmp(s, names[i]) == 0) {
            *out = STG_PRIORITY_MIN + i;
            return STG_OK;
        }
    if (strcasecmp(s, "high") == 0) {
        *out = STG_PRIORITY_INTERACTIVE;
        return STG_OK;
    }
    if (strcasecmp(s, "low") == 0) {
        *out = STG_PRIORITY_BATCH;
        return STG_OK;
    }
    return STG_EPARSE;
}

const char *stg_priority_name(int priority)
{
    if (priority < STG_PRIORITY_MIN || priority > STG_PRIORITY_MAX)
        return "normal";
    return names[STG_PRIORITY_INDEX(priority)];
}

int stg_tenant_check(const char *tenant, const char **why)
{
    const char *w = NULL;
    size_t n = tenant ? strlen(tenant) : 0;
    if (!tenant)
        w = "no tenant";
    else if (n == 0)
        w = "empty tenant name";
    else if (n > STG_TENANT_MAX)
        w = "tenant name longer than 64 bytes";
    else
        for (size_t i = 0; i < n && !w; i++) {
            unsigned char c = (unsigned char)tenant[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-'))
                w = "tenant name may hold only letters, digits and . _ : -";
        }
    if (why)
        *why = w;
    return w ? STG_EPARSE : STG_OK;
}
