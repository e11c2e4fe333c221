/*
 * --priority, --tenant and --weight (class_opts.h): parsed once here for
 * fetch and batch, so both read the same names and refuse the same
 * mistakes (a class stg_priority_parse does not know, a tenant name
 * stg_tenant_check refuses, a weight outside (0, 1e6]).
 */
#include <stdlib.h>

#include "cli/class_opts.h"

static int opt_priority(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    int *priority = field; /* the entry's field: cli_class.priority */
    if (stg_priority_parse(val, priority) != STG_OK)
        return cli_opt_bad(p, val, "expected interactive, normal or batch");
    return 0;
}

static int opt_tenant(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    const char **tenant = field; /* cli_class.tenant */
    const char *why = NULL;
    if (stg_tenant_check(val, &why) != STG_OK)
        return cli_opt_bad(p, val, why);
    *tenant = val;
    return 0;
}

static int opt_weight(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    double *weight = field; /* cli_class.weight */
    char *end = NULL;
    double w = val ? strtod(val, &end) : 0;
    if (!val || end == val || *end || !(w > 0) || w > 1e6)
        return cli_opt_bad(p, val, "expected a weight > 0 and <= 1000000, such as 2");
    *weight = w;
    return 0;
}

#define C(f) offsetof(cli_class, f)
const cli_opt cli_class_opts[] = {
    {CLI_FN, "priority", 0, "CLASS",
     "the requests' class where they wait for a limit with\n"
     "others: interactive, normal or batch",
     C(priority), opt_priority, NULL, 0, NULL, "normal"},
    {CLI_FN, "tenant", 0, "NAME",
     "who the requests are for: tenants of one class share\n"
     "what it is admitted by weight",
     C(tenant), opt_tenant, NULL, 0, NULL},
    {CLI_FN, "weight", 0, "W", "the tenant's weight", C(weight), opt_weight, NULL, 0,
     NULL, "1"},
    CLI_OPT_END,
};
#undef C
