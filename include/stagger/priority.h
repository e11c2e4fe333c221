/*
 * Priority classes and tenants: who a request is for, when several users
 * share one limit (docs/priorities.md).
 *
 * A request has a class and, optionally, a tenant with a weight. Whenever
 * requests of several classes wait for the same limit, a lower class
 * number is admitted first and a higher one gets what the lower leave;
 * between the tenants of one class, each gets its weight's share of what
 * its class is given. The numbers keep stg_request.priority's ABI: 0 was
 * "normal" and 1 (STG_PRIORITY_LOW) "low" before classes had names.
 */
#ifndef STAGGER_PRIORITY_H
#define STAGGER_PRIORITY_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stg_priority {
    STG_PRIORITY_INTERACTIVE = -1, /* a person waits for it */
    STG_PRIORITY_NORMAL = 0,       /* the default */
    STG_PRIORITY_BATCH = 1         /* bulk work: whatever the others leave */
} stg_priority;

#define STG_PRIORITY_LOW STG_PRIORITY_BATCH
#define STG_PRIORITY_MIN STG_PRIORITY_INTERACTIVE
#define STG_PRIORITY_MAX STG_PRIORITY_BATCH
#define STG_N_PRIORITIES 3
/* Index 0..STG_N_PRIORITIES-1 of a valid class (INTERACTIVE is 0). */
#define STG_PRIORITY_INDEX(p) ((p) - STG_PRIORITY_MIN)

/* The longest tenant name, in bytes. */
#define STG_TENANT_MAX 64

/* Who a request is for. tenant: NULL or "" for none (the class's default
 * tenant); else 1..STG_TENANT_MAX bytes of [A-Za-z0-9._:-] (it goes into
 * metrics labels, log lines and Redis keys). weight: > 0 and <= 1e6; 0
 * means 1. */
typedef struct stg_class {
    int priority;
    const char *tenant;
    double weight;
} stg_class;

/* "interactive", "normal" or "batch" (also "high" for interactive and
 * "low" for batch, as Stagger-Priority took them before), case-insensitive.
 * STG_OK and *out, or STG_EPARSE. */
STG_API int stg_priority_parse(const char *s, int *out);

/* The class's name ("interactive", "normal", "batch"); "normal" for a
 * number out of range. Static string. */
STG_API const char *stg_priority_name(int priority);

/* STG_OK if tenant is a valid tenant name (see stg_class), else STG_EPARSE
 * and, if why is not NULL, a static reason. */
STG_API int stg_tenant_check(const char *tenant, const char **why);

#ifdef __cplusplus
}
#endif

#endif
