/*
 * libFuzzer harness for the batch input reader (src/store/input.c:
 * stg_input_read on a memory FILE, the JSONL parser, the key files and the
 * URL template). The first byte picks the format (auto, urls, keys, jsonl);
 * the rest is the file. Checked:
 *   - the reader returns STG_OK (or STG_ENOMEM), and every line is either a
 *     job, a bad line or skipped: jobs + bad lines <= lines read;
 *   - every job has a non-empty key, a valid absolute http(s) URL and a
 *     redacted URL without userinfo that a second redaction leaves as is;
 *   - no header value, idempotency key or job id holds CR, LF, NUL or
 *     another control character (they would split the request's headers
 *     or forge a report line);
 *   - headers_secret is exactly "some header name is secret", url_secret
 *     exactly stg_redact_url_has_secret(url);
 *   - keys: the URL is the template with the key percent-encoded, and the
 *     key's segment is never a dot segment ("." or ".."), whatever the key.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/redact.h>

#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)         \
    do {                 \
        if (!(x))        \
            abort();     \
    } while (0)

#define PREFIX "http://h.test/ok/"
#define TEMPLATE PREFIX "{}/x"

static bool value_clean(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            return false;
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The filled segment of a keys job: PREFIX seg "/x", seg decoding to key,
 * every byte unreserved or %XX, and never "." or "..". */
static void check_key_url(const stg_job_spec *j)
{
    size_t pl = strlen(PREFIX), ul = strlen(j->url);
    CHECK(ul >= pl + 2 && !memcmp(j->url, PREFIX, pl) && !strcmp(j->url + ul - 2, "/x"));
    const char *seg = j->url + pl;
    size_t n = ul - pl - 2, k = 0, klen = strlen(j->key);
    CHECK(!(n == 1 && seg[0] == '.') && !(n == 2 && seg[0] == '.' && seg[1] == '.'));
    for (size_t i = 0; i < n; i++, k++) {
        char c = seg[i];
        CHECK(k < klen);
        if (c == '%') {
            CHECK(i + 2 < n && hexval(seg[i + 1]) >= 0 && hexval(seg[i + 2]) >= 0);
            CHECK((unsigned char)j->key[k] == hexval(seg[i + 1]) * 16 + hexval(seg[i + 2]));
            i += 2;
        } else {
            CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.' || c == '_' || c == '~');
            CHECK(j->key[k] == c);
        }
    }
    CHECK(k == klen);
}

static void check_job(const stg_job_set *set, const stg_job_spec *j)
{
    CHECK(j->key && j->key[0] && j->method && j->url && j->url_redacted);
    CHECK(value_clean(j->key)); /* ids and keys are printed in reports */
    CHECK(j->line >= 1 && j->line <= set->lines);
    CHECK(stg_store_url_valid(j->url));
    CHECK(j->url_secret == stg_redact_url_has_secret(j->url));
    /* The redacted URL has no userinfo left, and redacting it again
     * changes nothing. */
    const char *auth = strstr(j->url_redacted, "://");
    CHECK(auth);
    auth += 3;
    CHECK(!memchr(auth, '@', strcspn(auth, "/?#")));
    size_t rl = strlen(j->url_redacted);
    char *again = malloc(rl + 1);
    if (again) {
        CHECK(stg_redact_url(j->url_redacted, again, rl + 1) == rl);
        CHECK(!strcmp(again, j->url_redacted));
        free(again);
    }
    bool secret = false;
    for (size_t i = 0; i < j->n_headers; i++) {
        const char *h = j->headers[i], *colon = strchr(h, ':');
        CHECK(colon && colon > h && value_clean(h));
        secret |= stg__store_header_is_secret(h, (size_t)(colon - h));
    }
    CHECK(j->headers == NULL || j->headers[j->n_headers] == NULL);
    CHECK(secret == j->headers_secret);
    CHECK(!j->idempotency_key || value_clean(j->idempotency_key));
    CHECK(j->body || j->body_len == 0);
    if (set->format == STG_INPUT_KEYS)
        check_key_url(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const stg_input_format fmt[4] = {STG_INPUT_AUTO, STG_INPUT_URLS, STG_INPUT_KEYS,
                                            STG_INPUT_JSONL};
    stg_input_options o = {.format = fmt[data[0] & 3]};
    if (o.format == STG_INPUT_KEYS)
        o.url_template = TEMPLATE;
    if (data[0] & 4)
        o.method = "POST";
    data++, size--;
    FILE *f = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
    if (!f)
        return 0;
    stg_job_set set;
    char err[256];
    int rc = stg_input_read(f, &o, &set, err, sizeof err);
    fclose(f);
    CHECK(rc == STG_OK || rc == STG_ENOMEM);
    if (rc != STG_OK)
        return 0;
    CHECK(set.n + set.n_bad <= (size_t)set.lines);
    for (size_t i = 0; i < set.n; i++)
        check_job(&set, &set.jobs[i]);
    for (size_t i = 0; i < set.n_bad; i++)
        CHECK(set.bad[i].line >= 1 && set.bad[i].line <= set.lines && set.bad[i].message);
    stg_job_set_free(&set);
    return 0;
}
