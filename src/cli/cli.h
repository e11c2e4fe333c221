/*
 * Shared pieces of the `stagger` command: the subcommand entry points and
 * the option parsers every subcommand uses, so that a duration, a policy
 * flag or a usage error reads the same everywhere.
 *
 * Conventions: a subcommand returns its exit status. Bad usage prints one
 * line "stagger CMD: message" to stderr and returns CLI_EXIT_USAGE (2).
 */
#ifndef STAGGER_CLI_H
#define STAGGER_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stagger/stagger.h>

#define CLI_EXIT_USAGE 2

/* Subcommands (one file each). */
int cli_plan_main(int argc, char **argv);
#ifdef STG_HAVE_SERVER
int cli_serve_main(int argc, char **argv);
#endif
#ifdef STG_HAVE_SIM
int cli_sim_main(int argc, char **argv);
#endif
#ifdef STG_HAVE_CURL
int cli_fetch_main(int argc, char **argv);
#endif
#ifdef STG_HAVE_STORE
int cli_batch_main(int argc, char **argv);
#endif

/* Print "stagger CMD: message\n" to stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "250ms", "5s", "2m", "1.5s", "1h", "100us"; a bare number is
 * milliseconds. Rejects negatives, garbage and overflow. */
bool cli_parse_duration(const char *text, int64_t *us);
/* Whole decimal number in [min, max]. */
bool cli_parse_int(const char *text, long long min, long long max, long long *out);
/* Finite decimal number in [min, max]. */
bool cli_parse_double(const char *text, double min, double max, double *out);
/* Format a duration for people: "850 ms", "1.25 s", "2 m 05 s". */
void cli_format_duration(int64_t us, char *buf, size_t size);

/*
 * Retry-policy flags shared by plan, fetch and batch. Returns 1 when opt was
 * a policy flag and was applied (consuming arg), 0 when opt is not a policy
 * flag, -1 after printing a usage error (the caller exits 2).
 * Flags: --preset NAME, --backoff KIND, --base D, --cap D, --mult X,
 * --retries N, --deadline D, --max-server-wait D, --retry-after MODE,
 * --retry-on LIST, --spread X.
 * --preset resets the policy, so give it first.
 */
int cli_policy_option(const char *cmd, stg_policy *p, const char *opt, const char *arg);
/* Apply the --preset among argv (if any) to *p before the other flags, so
 * that flag order does not matter. Returns 0, or -1 after a usage error. */
int cli_policy_preset_first(const char *cmd, int argc, char **argv, stg_policy *p);

/*
 * A tiny argv walker: "--name value", "--name=value", "-X value", positional
 * arguments (name ""), and "--" ending the options.
 */
typedef struct cli_args {
    int argc;
    char **argv;
    int i;
    char name[64];
    const char *inline_value; /* after '=' in --name=value */
    bool only_positional;
} cli_args;

void cli_args_init(cli_args *a, int argc, char **argv); /* argv[0] is skipped */
/* Next argument: returns false at the end. *opt is the option name, or the
 * positional argument itself with a->name[0] == '\0'. */
bool cli_args_next(cli_args *a, const char **opt);
/* The option's value (inline or the next argv), or NULL if missing. */
const char *cli_args_value(cli_args *a);
/* Report a missing value for opt; returns -1 style CLI_EXIT_USAGE. */
int cli_missing_value(const char *cmd, const char *opt);
/* Help text for the flags above, for a subcommand's --help. */
extern const char cli_policy_help[];

#endif
