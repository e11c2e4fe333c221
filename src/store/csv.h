/*
 * A strict reader of one CSV (RFC 4180) or TSV (IANA text/tab-separated-
 * values) record, for the batch input (input_csv.c) and its fuzz harness.
 * Internal to stagger_store.
 */
#ifndef STAGGER_STORE_CSV_H
#define STAGGER_STORE_CSV_H

#include <stdbool.h>
#include <stddef.h>

/* True when rec[0..len) ends inside a quoted CSV field: the record goes on
 * after the line break (an embedded newline). Always false for TSV. */
bool stg__csv_open_quote(const char *rec, size_t len, char sep);

/* Split rec[0..len) (one whole record, no line break at its end) into
 * fields: sep ',' reads RFC 4180 (a field is quoted or not; in a quoted
 * one "" is a quote, and commas and line breaks are data; a quote inside
 * an unquoted field, or anything but a comma after a closing quote, is an
 * error); sep '\t' reads TSV (no quoting: a field is what lies between
 * tabs). On success returns the number of fields (at least 1) and
 * *fields (malloc'd array of malloc'd strings, the caller frees with
 * stg__csv_free). A field holding a NUL byte is an error. Returns -1 with
 * *why (a static message) when malformed, -2 when out of memory. */
int stg__csv_split(const char *rec, size_t len, char sep, char ***fields, const char **why);
/* Free what stg__csv_split returned (n fields); accepts NULL. */
void stg__csv_free(char **fields, int n);

#endif
