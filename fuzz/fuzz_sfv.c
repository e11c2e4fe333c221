/*
 * libFuzzer harness for the structured-field parser (src/core/sfv.c,
 * stg__sf_parse_field): RFC 8941 Lists and Dictionaries as RateLimit and
 * RateLimit-Policy carry them. The value is copied into a buffer of exactly
 * its length, so an over-read is an ASan report. Checked for every member
 * handed to the callback: a known type; a dictionary key inside the input
 * and made of key characters; numbers as documented (a magnitude >= 0, a
 * fraction in [0, 1 s), a boolean 0 or 1); parameters only of the value
 * types. The parse returns STG_OK or STG_EPARSE only, the same answer and
 * the same members twice, and a callback's error stops it at once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#include "fuzz_common.h"

typedef struct ctx {
    const char *s;
    size_t len;
    size_t members;
    size_t stop_after; /* return STG_ERANGE on this member (0: never) */
    uint64_t digest;   /* of what the members said */
} ctx;

static void check_item(const stg__sf_item *it, bool may_be_inner)
{
    CHECK(it->type >= STG__SF_NONE && it->type <= STG__SF_INNER);
    CHECK(may_be_inner || it->type != STG__SF_INNER);
    CHECK(it->ipart >= 0);
    if (it->big)
        CHECK(it->ipart == INT64_MAX && (it->type == STG__SF_INT || it->type == STG__SF_DEC ||
                                         it->type == STG__SF_DATE));
    if (it->type == STG__SF_DEC)
        CHECK(it->frac_us >= 0 && it->frac_us < STG__US_PER_SEC);
    else
        CHECK(it->frac_us == 0);
    if (it->type == STG__SF_BOOL)
        CHECK(it->ipart == 0 || it->ipart == 1);
}

static int on_member(void *p, const stg__sf_member *m)
{
    ctx *c = p;
    c->members++;
    CHECK(m->item.type != STG__SF_NONE);
    check_item(&m->item, true);
    if (m->is_dict) {
        CHECK(m->key >= c->s && m->key_len >= 1 && (size_t)(m->key - c->s) + m->key_len <= c->len);
        CHECK(stg__is_alpha(m->key[0]) || m->key[0] == '*');
    } else {
        CHECK(m->key == NULL && m->key_len == 0);
    }
    for (char l = 'a'; l <= 'z'; l++) {
        const stg__sf_item *it = stg__sf_param(m, l);
        check_item(it, false);
        c->digest = c->digest * 31 + (uint64_t)it->type * 7 + (uint64_t)it->ipart;
    }
    c->digest = c->digest * 131 + (uint64_t)m->item.type + (uint64_t)m->item.ipart +
                (uint64_t)m->item.frac_us + m->key_len;
    if (c->stop_after && c->members == c->stop_after)
        return STG_ERANGE;
    return STG_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *v = malloc(size ? size : 1);
    if (!v)
        return 0;
    if (size)
        memcpy(v, data, size);
    ctx a = {v, size, 0, 0, 0}, b = {v, size, 0, 0, 0};
    int rc = stg__sf_parse_field(v, size, on_member, &a);
    CHECK(rc == STG_OK || rc == STG_EPARSE);
    if (rc == STG_OK)
        CHECK(a.members >= 1);
    CHECK(stg__sf_parse_field(v, size, on_member, &b) == rc);
    CHECK(a.members == b.members && a.digest == b.digest);
    if (a.members > 0) {
        ctx s = {v, size, 0, a.members, 0};
        CHECK(stg__sf_parse_field(v, size, on_member, &s) == STG_ERANGE);
        CHECK(s.members == a.members);
    }
    free(v);
    return 0;
}
