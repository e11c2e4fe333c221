/*
 * libFuzzer harness for the core's redaction (src/core/redact.c, url.c):
 * URLs, header lines and free text, untrusted bytes from the command line,
 * input files, redirects and transport errors. Beyond "no crash, no
 * over-read, printable output", it plants secrets around the fuzzed bytes,
 * in the URL's userinfo, in a query value, in an Authorization header, in
 * a header named by a secret word and in a URL inside free text, and
 * aborts if one comes out; and a URL with planted userinfo or a planted
 * secret query name must count as holding a secret. Query values are
 * hidden by their names (issue #37: the rest are shown), so a planted
 * query secret always follows an '&' that ends whatever item the fuzzed
 * bytes left open.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/redact.h>

#include "fuzz_common.h"

#define SECRET_USER "S3CRETUSERINFO"
#define SECRET_QUERY "S3CRETQUERYVAL"
#define SECRET_HEADER "S3CRETHEADERVAL"

static void check_out(const char *buf, size_t n, size_t size)
{
    if (n >= size || buf[n] != '\0' || strlen(buf) != n)
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
            abort(); /* output must be printable ASCII: safe in a log line */
}

/* secret may only appear in the output if the fuzzed part held it (then it
 * is that part's host or path, which are kept on purpose). */
static void redact_has_no(const char *url, const char *secret, const char *fuzzed)
{
    char out[8192];
    size_t n = stg_redact_url(url, out, sizeof out);
    check_out(out, n, sizeof out);
    if (secret && !strstr(fuzzed, secret) && strstr(out, secret))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2048)
        return 0;
    char *s = malloc(size + 1);
    char *t = malloc(size + 128);
    if (!s || !t) {
        free(s), free(t);
        return 0;
    }
    memcpy(s, data, size);
    s[size] = '\0'; /* the API takes C strings: stop at the first NUL */

    redact_has_no(s, NULL, s);
    /* Small buffers truncate safely. */
    char small[8];
    check_out(small, stg_redact_url(s, small, sizeof small), sizeof small);

    snprintf(t, size + 128, "http://u:" SECRET_USER "@%s", s);
    redact_has_no(t, SECRET_USER, s);
    snprintf(t, size + 128, "%s?&key=" SECRET_QUERY, s);
    redact_has_no(t, SECRET_QUERY, s);
    snprintf(t, size + 128, "https://h/%s?a=1&token=" SECRET_QUERY, s);
    redact_has_no(t, SECRET_QUERY, s);

    char out[8192];
    size_t n = stg_redact_header_line(s, NULL, out, sizeof out);
    check_out(out, n, sizeof out);
    snprintf(t, size + 128, "Authorization: %s" SECRET_HEADER, s);
    n = stg_redact_header_line(t, NULL, out, sizeof out);
    check_out(out, n, sizeof out);
    if (!strstr(s, SECRET_HEADER) && strstr(out, SECRET_HEADER))
        abort();
    /* The name is the fuzzed bytes around a secret word: still secret. */
    snprintf(t, size + 128, "X-%.*sAccess-Key%s: " SECRET_HEADER, (int)strcspn(s, ":\r\n"), s,
             "");
    n = stg_redact_header_line(t, NULL, out, sizeof out);
    check_out(out, n, sizeof out);
    if (!strstr(s, SECRET_HEADER) && strstr(out, SECRET_HEADER))
        abort();

    /* Free text: a URL with planted userinfo and query value in it. */
    snprintf(t, size + 128, "%s http://u:" SECRET_USER "@h/?k=v&api_key=" SECRET_QUERY " %s", s,
             s);
    n = stg_redact_text(t, out, sizeof out);
    check_out(out, n, sizeof out);
    if ((!strstr(s, SECRET_USER) && strstr(out, SECRET_USER)) ||
        (!strstr(s, SECRET_QUERY) && strstr(out, SECRET_QUERY)))
        abort();
    n = stg_redact_text(s, small, sizeof small);
    check_out(small, n, sizeof small);

    /* Secret-holding URLs are recognised whatever surrounds the secret. */
    snprintf(t, size + 128, "https://u:" SECRET_USER "@h.test/%s", s);
    if (!stg_redact_url_has_secret(t))
        abort();
    if (!strpbrk(s, "?#&;=")) {
        snprintf(t, size + 128, "https://h.test/p?a=1&%sjwt%s=v", s, s);
        if (!stg_redact_url_has_secret(t))
            abort();
    }
    (void)stg_redact_url_has_secret(s);
    if (stg_redact_name_is_secret(s, size) && !stg_redact_header_is_secret(s, size, NULL))
        abort();
    free(s);
    free(t);
    return 0;
}
