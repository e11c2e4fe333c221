/*
 * `stagger batch --queue`: the work queue on Redis Streams from the command
 * line (batch_queue.c): its options (a group of batch's option table), the
 * run as a worker (loading INPUT first when given), and `report --queue` /
 * `export --queue`. Private to src/cli.
 */
#ifndef STAGGER_CLI_BATCH_QUEUE_H
#define STAGGER_CLI_BATCH_QUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/opt.h"
#include "cli/redis_tls.h"

typedef struct batch_queue_opts {
    const char *url;          /* --queue redis://[:PW@]HOST[:PORT]/NAME; NULL: no queue */
    int64_t claim_idle_us;    /* --claim-idle (the table's default unless given) */
    int max_deliveries;       /* --max-deliveries (idem) */
    bool follow;              /* --follow: wait for jobs loaded later */
    bool drain;               /* --drain: a signal finishes the claimed jobs, then leaves */
    const char *worker;       /* --worker NAME; NULL: HOST:PID */
    int64_t wait_us;          /* --queue-wait: Redis away this long: exit 6 (idem) */
    bool tuned;               /* --claim-idle, --max-deliveries or --queue-wait given */
} batch_queue_opts;

/* The options above, a group whose field is the batch_queue_opts. */
extern const cli_opt cli_batch_queue_opts[];

struct batch_opts;
/* help --defaults (opt.h): the rows of the options above from o as the run
 * would use them. */
void batch_queue_defaults_rows(const cli_command *c, const struct batch_opts *o);

/* Run as a worker of o->queue.url (o->input: load it first). Exit status. */
int batch_queue_run(const struct batch_opts *o);

/* report --queue URL [--json] and export --queue URL: exit status. tls:
 * their --redis-* options. */
int batch_queue_report(const char *url, bool json, cli_redis_tls *tls);
struct stg_export_options;
int batch_queue_export(const char *url, const struct stg_export_options *eo, const char *out_path,
                       cli_redis_tls *tls);

/* An export's output (batch.c): path, or stdout for NULL or "-" (NULL
 * after a message when it cannot be opened); then done: closed (stdout
 * flushed), ex, or CLI_EXIT_FAILED when that fails. */
FILE *batch_export_out(const char *path);
int batch_export_done(FILE *out, const char *path, int ex);

#endif
