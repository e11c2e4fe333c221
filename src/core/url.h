/*
 * Internal: where the parts of a URL are, as stagger reads it for
 * redaction (core/redact.c) and for the per-host limiter key
 * (curl/redact.c). It is the one core-internal header another part
 * includes, so that redaction and the limiter key can never disagree about
 * where a host ends.
 *
 * Invariant: every range lies inside the input ([start, start + len) with
 * start + len <= strlen(url)), and the ranges that are present appear in
 * URL order without overlapping.
 */
#ifndef STG_CORE_URL_H
#define STG_CORE_URL_H

#include <stdbool.h>
#include <stddef.h>

/* Byte ranges of a URL, [start, start + len) into the input; len 0 when
 * absent. has_* tell an empty part from a missing one. */
typedef struct stg__url_parts {
    size_t scheme, scheme_len;     /* without "://" */
    size_t userinfo, userinfo_len; /* without the '@' */
    size_t host, host_len;         /* IPv6 with its brackets */
    size_t port, port_len;         /* without the ':' */
    size_t path, path_len;
    size_t query, query_len;       /* without the '?' */
    size_t fragment, fragment_len; /* without the '#' */
    bool has_scheme, has_authority, has_userinfo, has_port, has_query, has_fragment;
    bool bad_authority; /* a port that is not all digits, a bracket without
                           its pair: the rest cannot be trusted to be a path */
} stg__url_parts;

/* Split the NUL-terminated url (NULL reads as ""). A URL without a scheme
 * is read as curl reads it: "host[:port]/path". Pure, no allocation. */
void stg__url_split(const char *url, stg__url_parts *p);

#endif /* STG_CORE_URL_H */
