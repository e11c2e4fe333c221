/*
 * fetch -w/--write-out: curl's %{variable} format, expanded once the
 * request is over (src/cli/writeout.c).
 *
 * Invariants: the URLs it can print (%{url}, %{url_effective}) are the
 * redacted ones (no userinfo, no secret query values): a -w line lands in logs and
 * CI output, where curl's unredacted one would leak a token. A format is
 * checked before anything is sent (cli_writeout_check), so an unknown
 * variable is a usage error, never a half-printed line after the request.
 */
#ifndef STAGGER_CLI_WRITEOUT_H
#define STAGGER_CLI_WRITEOUT_H

#include <stdio.h>

#include <curl/curl.h>
#include <stagger/curl.h>

typedef struct cli_writeout_vars {
    CURL *easy;            /* the handle after the call: the last attempt's
                              timings, sizes and addresses (NULL: none) */
    const stg_result *res; /* the call's result (NULL: the call did not run) */
    const char *url;       /* the URL as given, redacted */
    const char *filename;  /* -o/-O path, or NULL */
    int exitcode;          /* stagger's exit status */
    int retries;           /* retries made (WAIT events) */
    int redirects;         /* redirect hops followed */
} cli_writeout_vars;

/* 0 when every %{name} of fmt is known; else -1 with the first unknown
 * name in bad. */
int cli_writeout_check(const char *fmt, char *bad, size_t badlen);

/* Expand fmt to out (%{stderr} and %{stdout} switch between out and err). */
void cli_writeout(const char *fmt, const cli_writeout_vars *v, FILE *out, FILE *err);

#endif
