/*
 * The names libstagger-curl's files use for the core's redaction
 * (src/core/redact.c): the per-host limiter key and free-text redaction.
 * Both are the core's public functions, so a shared libstagger-curl needs
 * no hidden core symbol.
 */
#include <string.h>

#include <stagger/redact.h>

#include "curl/internal.h"

void stg__url_host_key(const char *url, char *buf, size_t size)
{
    stg_redact_host_key(url, buf, size);
}

void stg__redact_text(const char *in, char *buf, size_t size)
{
    stg_redact_text(in, buf, size);
}
