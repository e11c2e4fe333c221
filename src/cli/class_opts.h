/*
 * --priority, --tenant and --weight of fetch and batch (issue #32,
 * docs/priorities.md): the class and tenant of the command's requests, an
 * option-table group whose field is a cli_class. For batch they are the
 * default of every job; a job's own priority/tenant/weight wins.
 */
#ifndef STAGGER_CLI_CLASS_OPTS_H
#define STAGGER_CLI_CLASS_OPTS_H

#include <stagger/priority.h>

#include "cli/opt.h"

typedef struct cli_class {
    int priority;       /* a stg_priority; 0: normal (the default) */
    const char *tenant; /* NULL: none (argv's string) */
    double weight;      /* 0: 1 */
} cli_class;

extern const cli_opt cli_class_opts[];

#endif
