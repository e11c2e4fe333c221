/*
 * Shared pieces of the `stagger` command: the subcommand entry points and
 * the option parsers every subcommand uses, so that a duration, a policy
 * flag or a usage error reads the same everywhere.
 *
 * Conventions: a subcommand returns its exit status. Bad usage prints one
 * line "stagger CMD: message" to stderr and returns CLI_EXIT_USAGE (2).
 * Options are declared in one table per subcommand (opt.h); exit statuses
 * come from one table (exit.h).
 */
#ifndef STAGGER_CLI_H
#define STAGGER_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stagger/stagger.h>

#include "cli/exit.h"
#include "cli/opt.h"

/* Subcommands (one file each). */
int cli_plan_main(int argc, char **argv);
extern const cli_command cli_plan_command;
#ifdef STG_HAVE_SERVER
int cli_serve_main(int argc, char **argv);
extern const cli_command cli_serve_command;
#endif
#ifdef STG_HAVE_SIM
int cli_sim_main(int argc, char **argv);
extern const cli_command cli_sim_command;
#endif
#ifdef STG_HAVE_CURL
int cli_fetch_main(int argc, char **argv);
extern const cli_command cli_fetch_command;
#endif
#if defined(STG_HAVE_PROXY) && defined(STG_HAVE_CURL)
int cli_proxy_main(int argc, char **argv);
extern const cli_command cli_proxy_command;
#endif
#ifdef STG_HAVE_STORE
int cli_batch_main(int argc, char **argv);
extern const cli_command cli_batch_command, cli_batch_report_command, cli_batch_export_command;
#endif

/* Print "stagger CMD: message\n" to stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "250ms", "5s", "2m", "1.5s", "1h", "100us"; a bare number is seconds,
 * on every flag of every subcommand (curl's --max-time habit: "--deadline
 * 20" must not mean 20 ms). Rejects negatives, garbage and overflow. */
bool cli_parse_duration(const char *text, int64_t *us);
/* Whole decimal number in [min, max]. */
bool cli_parse_int(const char *text, long long min, long long max, long long *out);
/* Finite decimal number in [min, max]. */
bool cli_parse_double(const char *text, double min, double max, double *out);
/* A rate "R", "R/s", "R/m" or "R/h" in requests per second (fetch, batch
 * and proxy take the same forms); 0 only when zero_ok ("no limit"). */
bool cli_parse_rate(const char *s, bool zero_ok, double *rate);
/* A size in bytes: "1048576", "512k", "16M", "1G" (k, M, G: powers of
 * 1024, either case) in [min, max] bytes. */
bool cli_parse_size(const char *text, long long min, long long max, long long *out);
/* Format a duration for people: "850 ms", "1.25 s", "2 m 05 s". */
void cli_format_duration(int64_t us, char *buf, size_t size);

/* The retry-policy options, as option-table groups (field: a stg_policy):
 * --preset and --backoff (which sim leaves out), the rest, and both. */
extern const cli_opt cli_policy_kind_opts[];
extern const cli_opt cli_policy_opts[];
extern const cli_opt cli_policy_all_opts[];
/* The per-attempt times (field: a stg_policy): --connect-timeout,
 * -m/--max-time, --first-byte-timeout, --idle-timeout; fetch, batch and
 * proxy. */
extern const cli_opt cli_timeout_opts[];
/* --retries N (field: a stg_policy): N retries after the first attempt.
 * fetch's --retry, curl's name for it, takes the same parser. */
int cli_opt_retries(cli_parser *p, const cli_opt *o, void *field, const char *val);
/* A positive duration into the int64_t field (µs); the error's example is
 * the option's default, else 30s. */
int cli_opt_positive_duration(cli_parser *p, const cli_opt *o, void *field, const char *val);
/* A size (cli_parse_size) from 1 byte to 1 TiB into the size_t field. */
int cli_opt_size(cli_parser *p, const cli_opt *o, void *field, const char *val);
/* help --defaults (opt.h): the rows of the policy options (and the
 * per-attempt times, when c has them) from the policy the command runs
 * with, resolved as the library resolves it. */
void cli_policy_defaults_rows(const cli_command *c, const stg_policy *policy);
/* "Durations take us, ms, ...": the --help line under the policy options. */
extern const char cli_durations_help[];

/* A request header as fetch and batch take it on the command line: "Name:
 * value", "Name:" (remove a header curl would send) or "Name;" (send it
 * empty); Name is an RFC 9110 token and the value holds no control
 * character but HTAB, so no value can hide where the redaction (which keys
 * on the name) would miss it (util/http_field.h). */
bool cli_header_ok(const char *h);

/* Open path for writing, created with mode 0600 (it will hold bodies, a
 * log or an export: never readable by other users because of the umask).
 * CLI_OPEN_KEEP neither truncates nor appends (the caller truncates once it
 * has something to write), CLI_OPEN_TRUNCATE truncates, CLI_OPEN_APPEND
 * appends. *created (if not NULL) says whether the file did not exist.
 * NULL with errno set on failure. An existing file keeps its mode. */
enum cli_open { CLI_OPEN_KEEP, CLI_OPEN_TRUNCATE, CLI_OPEN_APPEND };
FILE *cli_open_private(const char *path, enum cli_open how, bool *created);

/* A batch run's SIGINT and SIGTERM (signals.c): catch sets
 * cli_stop_signal to 0, then the first signal's number is stored there
 * (a second one kills), SIGPIPE ignored; release puts the defaults back. */
extern volatile sig_atomic_t cli_stop_signal;
void cli_stop_signals_catch(void);
void cli_stop_signals_release(void);

/* A -H value as fetch and batch take it: "Name: value" (checked with
 * cli_header_ok), or @FILE ("@-": stdin) holding one header a line (CR LF or
 * LF, blank lines skipped), as curl reads it. A line whose name refused
 * (may be NULL: none) gives a reason for is a usage error too (batch:
 * stg__http_batch_refused). Calls add(ctx, line, secret) per header,
 * secret being true for lines from a file. *owned is the file's buffer,
 * which the lines point into: the caller frees it after the last use of a
 * line (also after an error). Returns 0, add's nonzero result, or
 * CLI_EXIT_USAGE after one line on stderr that echoes no header value. */
int cli_header_arg(const char *cmd, const char *val, const char *(*refused)(const char *, size_t),
                   int (*add)(void *ctx, const char *line, bool secret), void *ctx, char **owned);

/* --secret-header-env NAME=VAR: *line becomes "NAME: <value of $VAR>"
 * (malloc'ed, the caller's). An unset or empty VAR, a line cli_header_ok
 * refuses, or a NAME refused (may be NULL) gives a reason for, is a usage
 * error that does not echo the value. Returns 0 or CLI_EXIT_USAGE. */
int cli_header_env(const char *cmd, const char *spec, const char *(*refused)(const char *, size_t),
                   char **line);

/* The whole file ("-": stdin), NUL-terminated (*len excludes the NUL).
 * Returns NULL with errno set. The caller frees it. */
char *cli_read_file(const char *path, size_t *len);
/* The files of a TLS option set (--PFXcacert, --PFXcapath: a directory,
 * --PFXcert, --PFXkey; NULL: not given), checked readable before anything
 * connects, and --PFXkey only with --PFXcert: 0, or the usage error's exit
 * code (printed). pfx is "" (fetch, batch, serve) or "redis-". */
int cli_tls_files_check(const char *cmd, const char *pfx, const char *cacert, const char *capath,
                        const char *cert, const char *key);

/* Report a missing value for opt; returns CLI_EXIT_USAGE. */
int cli_missing_value(const char *cmd, const char *opt);

#endif
