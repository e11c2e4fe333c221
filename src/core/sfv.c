/*
 * Structured Field Values (RFC 8941, plus RFC 9651 dates and display
 * strings), as the RateLimit and RateLimit-Policy fields use them: a List
 * or Dictionary is walked member by member and handed to a callback
 * (hints.c says what the members mean). Nothing here knows a field name.
 *
 * Invariants (see core/internal.h for those of every parser): no
 * allocation, no copy of a string; a member is handed over with its item's
 * value (a number, or a pointer to its text in the field) and its
 * one-letter parameters only, because nothing in stagger needs more. Integers of any length are read and saturate
 * (item.big) instead of overflowing, so "too big" is the caller's choice of
 * error (STG_ERANGE), not a parse failure.
 *
 * Tolerance, chosen here: keys may be upper case, any number of digits is
 * read, unknown parameters and dictionary keys are kept out of the way,
 * inner lists are checked and skipped. But a field that is not well formed
 * (a bad item, a trailing comma, an empty value) fails as a whole.
 */
#include "core/internal.h"
#include "util/http_field.h"

static bool sf_is_key_start(char c)
{
    return stg__is_alpha(c) || c == '*';
}

static bool sf_is_key_char(char c)
{
    return stg__is_alpha(c) || stg__is_digit(c) || c == '_' || c == '-' || c == '.' || c == '*';
}

/* sf-token's later characters: an RFC 9110 tchar, ':' or '/' (RFC 8941
 * §3.3.4). */
static bool sf_is_tchar(char c)
{
    return stg__http_tchar((unsigned char)c) || c == ':' || c == '/';
}

static bool sf_is_b64(char c)
{
    return stg__is_alpha(c) || stg__is_digit(c) || c == '+' || c == '/' || c == '=';
}

static bool sf_is_hex_lc(char c)
{
    return stg__is_digit(c) || (c >= 'a' && c <= 'f');
}

static void sf_skip_sp(stg__cursor *c)
{
    while (c->pos < c->len && c->s[c->pos] == ' ')
        c->pos++;
}

static void sf_skip_ows(stg__cursor *c)
{
    while (c->pos < c->len && stg__is_ows(c->s[c->pos]))
        c->pos++;
}

/* sf-integer / sf-decimal, with any number of digits. */
static int sf_number(stg__cursor *c, stg__sf_item *it)
{
    int64_t v = 0, f = 0, scale = STG__US_PER_SEC;
    size_t start;
    it->neg = stg__cur_char(c, '-');
    start = c->pos;
    while (c->pos < c->len && stg__is_digit(c->s[c->pos])) {
        int d = c->s[c->pos++] - '0';
        if (it->big || v > (INT64_MAX - d) / 10)
            it->big = true;
        else
            v = v * 10 + d;
    }
    if (c->pos == start)
        return STG_EPARSE;
    it->ipart = it->big ? INT64_MAX : v;
    it->type = STG__SF_INT;
    if (stg__cur_char(c, '.')) {
        start = c->pos;
        while (c->pos < c->len && stg__is_digit(c->s[c->pos])) {
            if (scale > 1) {
                scale /= 10;
                f += (c->s[c->pos] - '0') * scale;
            }
            c->pos++;
        }
        if (c->pos == start)
            return STG_EPARSE;
        it->type = STG__SF_DEC;
        it->frac_us = f;
    }
    return STG_OK;
}

static int sf_bare_item(stg__cursor *c, stg__sf_item *it)
{
    char ch;
    it->type = STG__SF_NONE;
    it->neg = it->big = false;
    it->ipart = it->frac_us = 0;
    it->text = NULL;
    it->text_len = 0;
    if (stg__cur_end(c))
        return STG_EPARSE;
    ch = c->s[c->pos];
    if (ch == '-' || stg__is_digit(ch))
        return sf_number(c, it);
    if (ch == '"') {
        size_t start = ++c->pos;
        while (c->pos < c->len) {
            ch = c->s[c->pos++];
            if (ch == '"') {
                it->type = STG__SF_STR;
                it->text = c->s + start;
                it->text_len = c->pos - 1 - start;
                return STG_OK;
            }
            if (ch == '\\') {
                if (stg__cur_end(c) || (c->s[c->pos] != '"' && c->s[c->pos] != '\\'))
                    return STG_EPARSE;
                c->pos++;
            } else if (ch < 0x20 || ch > 0x7e) {
                return STG_EPARSE;
            }
        }
        return STG_EPARSE;
    }
    if (sf_is_key_start(ch)) { /* token; "*" or ALPHA first */
        size_t start = c->pos++;
        while (c->pos < c->len && sf_is_tchar(c->s[c->pos]))
            c->pos++;
        it->type = STG__SF_TOKEN;
        it->text = c->s + start;
        it->text_len = c->pos - start;
        return STG_OK;
    }
    if (ch == ':') {
        size_t start = ++c->pos;
        while (c->pos < c->len && sf_is_b64(c->s[c->pos]))
            c->pos++;
        if (!stg__cur_char(c, ':'))
            return STG_EPARSE;
        it->type = STG__SF_BYTES;
        it->text = c->s + start;
        it->text_len = c->pos - 1 - start;
        return STG_OK;
    }
    if (ch == '?') {
        c->pos++;
        if (stg__cur_char(c, '0') || stg__cur_char(c, '1')) {
            it->type = STG__SF_BOOL;
            it->ipart = c->s[c->pos - 1] - '0';
            return STG_OK;
        }
        return STG_EPARSE;
    }
    if (ch == '@') {
        c->pos++;
        if (sf_number(c, it) != STG_OK || it->type != STG__SF_INT)
            return STG_EPARSE;
        it->type = STG__SF_DATE;
        return STG_OK;
    }
    if (ch == '%') {
        c->pos++;
        if (!stg__cur_char(c, '"'))
            return STG_EPARSE;
        while (c->pos < c->len) {
            ch = c->s[c->pos++];
            if (ch == '"') {
                it->type = STG__SF_DSTR;
                return STG_OK;
            }
            if (ch == '%') {
                if (c->len - c->pos < 2 || !sf_is_hex_lc(c->s[c->pos]) ||
                    !sf_is_hex_lc(c->s[c->pos + 1]))
                    return STG_EPARSE;
                c->pos += 2;
            } else if (ch < 0x20 || ch > 0x7e) {
                return STG_EPARSE;
            }
        }
        return STG_EPARSE;
    }
    return STG_EPARSE;
}

static int sf_key(stg__cursor *c, const char **key, size_t *key_len)
{
    size_t start = c->pos;
    if (stg__cur_end(c) || !sf_is_key_start(c->s[c->pos]))
        return STG_EPARSE;
    while (c->pos < c->len && sf_is_key_char(c->s[c->pos]))
        c->pos++;
    *key = c->s + start;
    *key_len = c->pos - start;
    return STG_OK;
}

/* *( ";" *SP key [ "=" bare-item ] ); m may be NULL to discard them. A
 * parameter without a value is boolean true; a repeated one keeps the
 * last value. One-letter keys are kept by letter (case folded), the first
 * eight longer ones by name. */

static bool eq_nocase_n(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (stg__to_lower(a[i]) != stg__to_lower(b[i]))
            return false;
    return true;
}

static int sf_params(stg__cursor *c, stg__sf_member *m)
{
    while (stg__cur_char(c, ';')) {
        const char *key;
        size_t key_len;
        stg__sf_item v = {STG__SF_BOOL, false, false, 1, 0, NULL, 0};
        sf_skip_sp(c);
        if (sf_key(c, &key, &key_len) != STG_OK)
            return STG_EPARSE;
        if (stg__cur_char(c, '=') && sf_bare_item(c, &v) != STG_OK)
            return STG_EPARSE;
        if (!m)
            continue;
        if (key_len == 1 && stg__is_alpha(key[0])) {
            m->param[stg__to_lower(key[0]) - 'a'] = v;
            continue;
        }
        size_t i = 0;
        while (i < m->n_named && !(m->named[i].key_len == key_len &&
                                   eq_nocase_n(m->named[i].key, key, key_len)))
            i++;
        if (i == m->n_named) {
            if (m->n_named == sizeof m->named / sizeof m->named[0])
                continue; /* more than any RateLimit field defines */
            m->n_named++;
            m->named[i].key = key;
            m->named[i].key_len = key_len;
        }
        m->named[i].v = v;
    }
    return STG_OK;
}

/* "(" *SP [ sf-item *( 1*SP sf-item ) *SP ] ")" parameters; all skipped. */
static int sf_inner_list(stg__cursor *c, stg__sf_item *it)
{
    c->pos++; /* '(' */
    for (;;) {
        stg__sf_item inner;
        sf_skip_sp(c);
        if (stg__cur_char(c, ')'))
            break;
        if (sf_bare_item(c, &inner) != STG_OK || sf_params(c, NULL) != STG_OK)
            return STG_EPARSE;
        if (!stg__cur_peek(c, ' ') && !stg__cur_peek(c, ')'))
            return STG_EPARSE;
    }
    it->type = STG__SF_INNER;
    return STG_OK;
}

/* A list member, or a dictionary member "key=value" / bare "key". A bare key
 * is read as a token item (both readings give the same parameters). */
static int sf_member_parse(stg__cursor *c, stg__sf_member *m)
{
    static const stg__sf_member empty;
    *m = empty;
    if (!stg__cur_end(c) && sf_is_key_start(c->s[c->pos])) {
        size_t save = c->pos;
        const char *key;
        size_t key_len;
        (void)sf_key(c, &key, &key_len);
        if (stg__cur_char(c, '=')) {
            m->is_dict = true;
            m->key = key;
            m->key_len = key_len;
        } else {
            c->pos = save;
        }
    }
    if (stg__cur_peek(c, '(')) {
        if (sf_inner_list(c, &m->item) != STG_OK)
            return STG_EPARSE;
    } else if (sf_bare_item(c, &m->item) != STG_OK) {
        return STG_EPARSE;
    }
    return sf_params(c, m);
}

int stg__sf_parse_field(const char *s, size_t len, stg__sf_member_fn fn, void *ctx)
{
    stg__cursor c;
    stg__trim_ows(&s, &len);
    if (len == 0)
        return STG_EPARSE;
    stg__cur_init(&c, s, len);
    for (;;) {
        stg__sf_member m;
        int rc;
        if (sf_member_parse(&c, &m) != STG_OK)
            return STG_EPARSE;
        rc = fn(ctx, &m);
        if (rc != STG_OK)
            return rc;
        sf_skip_ows(&c);
        if (stg__cur_end(&c))
            return STG_OK;
        if (!stg__cur_char(&c, ','))
            return STG_EPARSE;
        sf_skip_ows(&c);
        if (stg__cur_end(&c))
            return STG_EPARSE;
    }
}
