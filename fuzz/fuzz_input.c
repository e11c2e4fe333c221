/*
 * libFuzzer harness for the batch input reader (src/store/input.c:
 * stg__input_read on a memory FILE, the JSONL parser, the key files and the
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
 *     key's segment is never a dot segment ("." or ".."), whatever the key;
 *   - the batch's header rule (issue #30, util/http_field.h): every job
 *     header is a line the engine takes (token name right before the colon,
 *     no CTL but HTAB) and sets no field batch input may not set, by an
 *     oracle written here apart from the rule (framing, connection, Host,
 *     Proxy-*, in any case);
 *   - the rule itself on every input line as a header line: what
 *     stg__http_line_name accepts is a token then ':' (a clean value) or a
 *     lone ';', the same by the oracle, and the transport's fields are a
 *     subset of what batch refuses.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <stagger/redact.h>

#include "store/store.h"
#include "util/http_field.h"

#include "fuzz_common.h"

#define PREFIX "http://h.test/ok/"
#define TEMPLATE PREFIX "{}/x"

static bool value_clean(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            return false;
    return true;
}

/* The oracle: RFC 9110 tchar as the RFC spells it, and the names batch
 * input may not set, compared lower-cased here (not by the rule's code). */
static bool oracle_tchar(unsigned char c)
{
    static const char set[] = "!#$%&'*+-.^_`|~0123456789"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    return c != 0 && memchr(set, c, sizeof set - 1) != NULL;
}

static bool oracle_refused(const char *name, size_t n)
{
    static const char *const names[] = {"content-length", "transfer-encoding", "connection",
                                        "keep-alive", "proxy-connection", "te", "trailer",
                                        "upgrade", "host"};
    char low[64];
    if (n >= sizeof low)
        return false; /* longer than any listed name, and not "proxy-..." checked below */
    for (size_t i = 0; i < n; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    low[n] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(low, names[i]))
            return true;
    return !strncmp(low, "proxy-", 6);
}

static bool oracle_proxy_prefix(const char *name, size_t n)
{
    return n >= 6 && !strncasecmp(name, "proxy-", 6);
}

/* A job header: "Name: value" with a token name the batch may set. */
static void check_job_header(const char *h)
{
    const char *colon = strchr(h, ':');
    CHECK(colon && colon > h);
    size_t n = (size_t)(colon - h);
    for (size_t i = 0; i < n; i++)
        CHECK(oracle_tchar((unsigned char)h[i]));
    CHECK(stg__http_line_name(h) == n);
    CHECK(!oracle_refused(h, n) && !oracle_proxy_prefix(h, n));
    CHECK(!stg__http_batch_refused(h, n) && !stg__http_transport_field(h, n));
}

/* line[0..len) (no NUL in it) as a header line, against the oracle. */
static void check_line_rule(const char *line, size_t len)
{
    char *h = malloc(len + 1);
    if (!h)
        return;
    memcpy(h, line, len);
    h[len] = '\0';
    size_t n = stg__http_line_name(h), t = 0;
    while (t < len && oracle_tchar((unsigned char)h[t]))
        t++;
    bool clean = true;
    for (size_t i = t + 1; i < len; i++)
        clean &= ((unsigned char)h[i] >= 0x20 || h[i] == '\t') && h[i] != 0x7f;
    bool want = t > 0 && t < len &&
                ((h[t] == ':' && clean) || (h[t] == ';' && t + 1 == len));
    CHECK(n == (want ? t : 0));
    if (n) {
        CHECK(stg__http_token(h, n));
        bool batch = stg__http_batch_refused(h, n) != NULL;
        CHECK(batch == (oracle_refused(h, n) || oracle_proxy_prefix(h, n)));
        CHECK(!stg__http_transport_field(h, n) || batch);
        /* Host and Proxy-Authorization stay an engine caller's. */
        if (stg__http_transport_field(h, n)) {
            CHECK(!stg__http_name_is(h, n, "host"));
            CHECK(!oracle_proxy_prefix(h, n) || stg__http_name_is(h, n, "proxy-connection"));
        }
    }
    free(h);
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
    CHECK(stg__store_url_valid(j->url));
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
        check_job_header(h);
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
    for (size_t at = 0; at < size;) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
        if (!memchr(data + at, '\0', len))
            check_line_rule((const char *)data + at, len);
        at += len + 1;
    }
    FILE *f = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
    if (!f)
        return 0;
    stg_job_set set;
    char err[256];
    int rc = stg__input_read(f, &o, &set, err, sizeof err);
    fclose(f);
    CHECK(rc == STG_OK || rc == STG_ENOMEM);
    if (rc != STG_OK)
        return 0;
    CHECK(set.n + set.n_bad <= (size_t)set.lines);
    for (size_t i = 0; i < set.n; i++)
        check_job(&set, &set.jobs[i]);
    for (size_t i = 0; i < set.n_bad; i++)
        CHECK(set.bad[i].line >= 1 && set.bad[i].line <= set.lines && set.bad[i].message);
    stg__job_set_free(&set);
    return 0;
}
