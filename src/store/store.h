/*
 * The batch store: durable state of a `stagger batch` job set in SQLite.
 *
 * Internal API of the stagger_store library (used by src/batch, src/cli and
 * the unit tests). One handle (stg_store) wraps one SQLite connection; it is
 * NOT thread-safe: use it from one thread (the batch runner's loop thread).
 *
 * Files of this part, one per concern:
 *   schema.c       open/create, WAL, busy timeout, runner lock, error text
 *   fingerprint.c  SHA-256 of the job set (the identity of a database)
 *   input.c        batch input: the formats' rules, options, the reader
 *                  (whole, or streamed one line at a time); by format
 *                  input_keys.c (URLs, keys), input_jsonl.c, input_csv.c
 *                  (CSV/TSV and their templates); the job being built
 *                  input_job.c, repeated ids input_repeat.c; needs_input
 *                  jobs' secrets input_secrets.c, found again input_cursor.c
 *   import.c       the input into the store (or checked against it), one
 *                  transaction, repeats found by the UNIQUE key
 *   jobs.c         claim, finish, recover, requeue: every state change of a
 *                  job, each in one transaction
 *   integrity.c    quick_check and the job count on open: a damaged file
 *                  is refused, never read as a smaller or finished batch
 *   report.c       counts, run totals, retry histogram, bad input lines
 *   export.c       one row per job as JSONL or CSV
 *
 * Job states and the only transitions the store performs:
 *
 *   (import) -> pending
 *   pending  -> inflight             stg__store_claim (before submit)
 *   inflight -> done|failed|deferred|review|pending   stg__store_finish
 *   inflight -> pending | review     stg__store_recover (after a crash/kill)
 *   inflight -> pending              stg__store_unclaim (claimed, never sent)
 *   deferred -> pending              stg__store_requeue (--retry-deferred)
 *   review   -> pending              stg__store_requeue (--retry-review)
 *
 * Invariants:
 *  - Every job is in exactly one state at every commit; every change is one
 *    SQLite transaction (WAL, synchronous=NORMAL: a committed change
 *    survives kill -9; a power cut may lose the last commits, never tear
 *    one).
 *  - A job is marked inflight (committed) before its request can leave
 *    (the runner may claim some ahead of their requests: inflight, sent =
 *    0, which a recovery or an unclaim puts back to pending), so after a
 *    crash nothing sent is unaccounted for: inflight
 *    jobs are run again (at-least-once), except non-idempotent ones
 *    (replay_safe = 0) whose request may have left (sent = 1): those go to
 *    review and are resent only on request.
 *  - The import of a job set is one transaction together with its
 *    fingerprint; a database holds one job set, forever.
 *  - Secrets never reach the database: URLs whose userinfo or query keys
 *    look secret and secret header values are kept out (the job is flagged
 *    needs_input and is rebuilt from the input file at run time: read
 *    again by an stg_input_cursor, or, for an input read once (stdin), kept
 *    from the import pass as those jobs' secret parts and nothing else, in
 *    an stg_input_secrets); header NAMES and redacted URLs are stored. Response bodies are the user's data
 *    and are stored as received.
 *
 * Errors: functions return STG_OK or an stg_err (STG_EDB for SQLite
 * failures, STG_ESTATE for a transition not allowed, STG_ENOMEM, STG_EIO);
 * stg__store_errmsg() then says what happened in one line, naming the cause
 * (locked, read-only, disk full, another job set, ...).
 */
#ifndef STAGGER_STORE_H
#define STAGGER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <stagger/common.h>
#include <stagger/priority.h>

/* ---- job states ------------------------------------------------------- */

typedef enum stg_job_state {
    STG_JOB_PENDING = 0,
    STG_JOB_INFLIGHT = 1,
    STG_JOB_DONE = 2,
    STG_JOB_FAILED = 3,
    STG_JOB_DEFERRED = 4,
    STG_JOB_REVIEW = 5
} stg_job_state;

#define STG_JOB_NSTATES 6

/* "pending", "inflight", "done", "failed", "deferred", "review". Static. */
const char *stg__job_state_name(stg_job_state s);
/* Parse a name above; returns STG_OK or STG_EPARSE. */
int stg__job_state_parse(const char *name, stg_job_state *out);

/* ---- input: job specs ------------------------------------------------- */

typedef enum stg_input_format {
    STG_INPUT_AUTO = 0, /* JSONL if the first significant line starts with '{' */
    STG_INPUT_URLS = 1, /* one URL a line */
    STG_INPUT_KEYS = 2, /* one key a line, filled into a URL template */
    STG_INPUT_JSONL = 3, /* one JSON object a line */
    STG_INPUT_CSV = 4,   /* RFC 4180 CSV with a header row; url_template names columns */
    STG_INPUT_TSV = 5    /* tab-separated values with a header row, the same */
} stg_input_format;

const char *stg__input_format_name(stg_input_format f); /* "urls", ... */
/* The format a reader of path uses: f, or for AUTO, CSV or TSV when the
 * name ends in .csv or .tsv (any case), else AUTO (decided by the first
 * line). */
stg_input_format stg__input_format_for_path(const char *path, stg_input_format f);

/* One request as read from the input. Everything is owned by the job set.
 * url and headers are the COMPLETE request (secrets included): they live in
 * memory only; the store writes the redacted/filtered form. */
typedef struct stg_job_spec {
    char *key;             /* the job's id: JSONL "id", the key, or the line number */
    long line;             /* 1-based line of the input */
    char *method;          /* "GET", ... (validated) */
    char *url;             /* complete URL */
    char *url_redacted;    /* stg_redact_url(url) */
    char *url_shown;       /* url_secret: stg__store_url_shown(url); else NULL */
    bool url_secret;       /* userinfo or a secret-looking query key */
    char **headers;        /* "Name: value", n_headers of them, secrets included */
    size_t n_headers;
    bool headers_secret;   /* at least one header value is secret */
    char *body;            /* may be NULL */
    size_t body_len;
    char *idempotency_key; /* from an Idempotency-Key header or field; may be NULL */
} stg_job_spec;

typedef struct stg_bad_line {
    long line;
    char *message; /* never quotes the line (it may carry secrets) */
} stg_bad_line;

typedef struct stg_job_set {
    stg_job_spec *jobs;
    size_t n, cap;
    stg_bad_line *bad;
    size_t n_bad, cap_bad;
    long lines;               /* lines read */
    stg_input_format format;  /* as detected */
    char fingerprint[65];     /* hex SHA-256 of the non-secret job set */
} stg_job_set;

typedef struct stg_input_options {
    stg_input_format format;  /* AUTO: detect URLS or JSONL; KEYS needs url_template */
    const char *url_template; /* KEYS: "{}" replaced by the percent-encoded key */
    const char *method;       /* URLS/KEYS/CSV/TSV: the method of every job; NULL:
                                 GET, or POST with a body_template */
    /* CSV/TSV: url_template and body_template name columns of the header
     * row, {name}; the values are percent-encoded in the URL and put in the
     * body as they are. The job's id is the "id" column when there is one,
     * else its line number; a row whose field count is not the header's is
     * a bad line, as is a repeated id. NULL body_template: no body. */
    const char *body_template;
    /* CSV/TSV: headers "Name: value" whose value names columns ({name},
     * filled as is, per row); each becomes the job's own header (stored
     * unless secret, like a JSONL header; an Idempotency-Key one is the
     * job's idempotency key). A filled value with a control character is
     * a bad line. */
    const char *const *header_templates;
    size_t n_header_templates;
    /* CSV/TSV: body_template is JSON: each {name} is filled JSON-escaped
     * (inside a string, or bare for a number), the filled body must parse
     * (else a bad line), and the job gets Content-Type: application/json. */
    bool json_body;
    /* "auto": every job without an idempotency key gets one derived from
     * its id, method, URL and body ("stg-" and 32 hex digits: the same job
     * has the same key on every run and resume; another job another key);
     * otherwise a template: CSV/TSV "{name}"s filled as is ("order-{id}"),
     * an empty result or a control character a bad line. NULL: none. */
    const char *idempotency_key;
} stg_input_options;

/* Parse the whole of f into *set (zeroed first): memory grows with the
 * input; `stagger batch` streams instead (stg_input_reader below). Bad lines are recorded in
 * set->bad with their line number and skipped; blank lines and lines whose
 * first non-blank character is '#' are skipped silently (in every format).
 * Duplicate ids (JSONL "id", keys) are bad lines. The fingerprint is
 * computed at the end. Returns STG_OK, STG_EINVAL (bad options: no "{}" in
 * the template, template not an http(s) URL, unknown method; message in
 * err), STG_EIO (read error), STG_ENOMEM. Does not take ownership of f. */
int stg__input_read(FILE *f, const stg_input_options *opt, stg_job_set *set, char *err,
                   size_t errlen);
/* The same from a path; "-" is stdin. */
int stg__input_read_path(const char *path, const stg_input_options *opt, stg_job_set *set,
                        char *err, size_t errlen);
/* Free everything in set; accepts NULL and zeroed sets. */
void stg__job_set_free(stg_job_set *set);

/* A streaming reader: the same parser, one line at a time, holding one
 * line. It does not look for repeated ids (the store's import does, by its
 * UNIQUE key): every other bad line is reported as stg__input_read does. */
typedef struct stg_input_reader stg_input_reader;

/* Check opt (STG_EINVAL as stg__input_read) and read from f, not owned. */
int stg__input_reader_new(FILE *f, const stg_input_options *opt, stg_input_reader **out,
                         char *err, size_t errlen);
/* The same from a path ("-" is stdin); the file is closed by _free.
 * STG_EINVAL (options, checked first), STG_EIO (cannot open), STG_ENOMEM. */
int stg__input_reader_open(const char *path, const stg_input_options *opt,
                          stg_input_reader **out, char *err, size_t errlen);
/* The next job (*job) or bad line (*bad) in line order; both NULL at the
 * end. They are the reader's until the next call; the caller may take the
 * job's fields (copy *job, then zero it). STG_OK, or STG_EIO / STG_ENOMEM
 * (sticky; stg__input_reader_error says what, with the line number). */
int stg__input_reader_next(stg_input_reader *r, stg_job_spec **job, stg_bad_line **bad);
long stg__input_reader_lines(const stg_input_reader *r);             /* lines read */
stg_input_format stg__input_reader_format(const stg_input_reader *r); /* as detected */
const char *stg__input_reader_error(const stg_input_reader *r);      /* "" if none */
void stg__input_reader_free(stg_input_reader *r);                    /* accepts NULL */

/* The secret parts of the jobs that need the input (url_secret or
 * headers_secret), by job id (ascending): the key, the URL when it is the
 * secret one, the headers (all of them, in order) when one is secret, and
 * nothing else. What a run keeps of its input: bounded by how many jobs
 * carry secrets, not by the size of the input. */
typedef struct stg_input_secrets {
    int64_t *ids;
    stg_job_spec *jobs; /* key; url or NULL (the stored one is whole); headers
                           and n_headers or NULL/0 (the stored ones are all);
                           url_secret, headers_secret, line; the rest NULL */
    size_t n, cap;
} stg_input_secrets;

/* Take j's key, url and headers (j is zeroed; what is not kept is freed)
 * as job id, which must be above every id added before. */
int stg__input_secrets_add(stg_input_secrets *s, int64_t id, stg_job_spec *j);
/* The kept parts of job id, if its key is key; NULL otherwise. */
const stg_job_spec *stg__input_secrets_find(const stg_input_secrets *s, int64_t id,
                                           const char *key);
void stg__input_secrets_free(stg_input_secrets *s); /* accepts NULL and zeroed */

/* A cursor over an input file that can be read again (a regular file): it
 * finds the job of a given id and key by reading forward, so a run needs
 * nothing of the input in memory. Job id's line is the first line that
 * holds its key (later ones are repeats) and follows the lines of all lower
 * ids, so ids asked in increasing order (as a run claims them) cost one
 * pass over the file in all; a lower id reads again from the top. */
typedef struct stg_input_cursor stg_input_cursor;

/* STG_EINVAL (options), STG_EIO (cannot open), STG_ENOMEM. */
int stg__input_cursor_open(const char *path, const stg_input_options *opt,
                          stg_input_cursor **out, char *err, size_t errlen);
/* The input's job id if its key is key (the whole spec, secrets included;
 * valid until the next call), or NULL: not in this input. The caller checks
 * it is the stored job (method, redacted URL): the file may have changed. */
const stg_job_spec *stg__input_cursor_find(stg_input_cursor *c, int64_t id, const char *key);
void stg__input_cursor_free(stg_input_cursor *c); /* accepts NULL */

/* True if url has userinfo, a fragment or a secret-looking query key
 * (stg_redact_url_has_secret()). */
bool stg__store_url_is_secret(const char *url);
/* The URL as the user gave it, for exports and --dry-run: userinfo and the
 * fragment removed, the VALUE of every query parameter whose name is
 * secret (stg_redact_name_is_secret) and every query item without '=' (it
 * may be a bare key) replaced by "REDACTED"; the rest as given, bytes
 * outside printable ASCII percent-encoded. A URL stg_redact_url cannot
 * read gives its "scheme://REDACTED". Written into buf (NUL-terminated,
 * cut short to fit, never revealing more than the whole form); returns
 * the length the whole form needs. Logs keep stg_redact_url's full
 * redaction. Pure. */
size_t stg__store_url_shown(const char *url, char *buf, size_t size);
/* True if s is an absolute http:// or https:// URL with a host and no
 * whitespace or control characters. */
bool stg__store_url_valid(const char *url);
/* True if the named header's value is secret (stg_redact_header_is_secret()
 * of the core; Idempotency-Key is not). */
bool stg__store_header_is_secret(const char *name, size_t len);
/* True if the method is one that may be repeated (RFC 9110 idempotent). */
bool stg__store_method_idempotent(const char *method);
/* The replay-safe rule, for the store's jobs and the queue's alike: a job
 * may be sent again after a kill when its method is idempotent or it
 * carries an Idempotency-Key; else a kill that may have sent it sends it
 * to review. */
static inline bool stg__store_replay_safe(const char *method, const char *idempotency_key)
{
    return stg__store_method_idempotent(method) || idempotency_key != NULL;
}

/* ---- fingerprint ---------------------------------------------------- */

typedef struct stg_sha256 {
    union {
        struct {
            uint32_t h[8];
            uint64_t len;
            unsigned char buf[64];
            size_t used;
        } p;              /* the portable code's */
        uint64_t ctx[16]; /* libcrypto's SHA256_CTX, when built with it */
    } u;
} stg_sha256;

void stg__sha256_init(stg_sha256 *c);
void stg__sha256_update(stg_sha256 *c, const void *data, size_t len);
void stg__sha256_final(stg_sha256 *c, unsigned char out[32]);

/* Compute set->fingerprint: SHA-256 over, per job in order, length-prefixed
 * key, method, URL (the redacted one when url_secret), headers (names only
 * for secret ones), body and idempotency key. Line numbers and secrets are
 * not part of it: moving comments or rotating a token keeps the identity. */
void stg__job_set_fingerprint(stg_job_set *set);
/* The same hash a job at a time: begin, job (each accepted job in order),
 * end (the job count; hex gets 64 digits and a NUL). */
void stg__fingerprint_begin(stg_sha256 *c);
void stg__fingerprint_job(stg_sha256 *c, const stg_job_spec *j);
void stg__fingerprint_end(stg_sha256 *c, size_t n_jobs, char hex[65]);

/* ---- the store ------------------------------------------------------ */

typedef struct stg_store stg_store;

typedef struct stg_store_options {
    int64_t busy_timeout_us; /* wait for locks this long; 0: 5 s */
    bool readonly;           /* report/export: never writes */
    bool create;             /* create the file if missing (not with readonly) */
    bool exclusive;          /* take the runner lock (flock on the file): one
                                runner per database */
} stg_store_options;

/* Open path. On success *out is the caller's, to stg__store_close(). On
 * failure returns STG_EDB (or STG_ENOTFOUND: no such file and !create;
 * STG_ESTATE: not a stagger batch database, or a newer schema; STG_EAGAIN:
 * another runner holds the lock), *out is NULL and err says why in one
 * line. A path of ":memory:" is allowed (no WAL, no lock) for tests.
 * A file it creates is mode 0600 (responses may be private). A damaged
 * database (stg__store_check) is refused with STG_EDB. */
int stg__store_open(const char *path, const stg_store_options *opt, stg_store **out, char *err,
                   size_t errlen);
/* Close; accepts NULL. Releases the runner lock. */
void stg__store_close(stg_store *s);
/* The last error, one line; "" if none. Owned by the store. */
const char *stg__store_errmsg(const stg_store *s);

/* Meta values (strings); *out is malloc'd (caller frees) or NULL when
 * absent. Returns STG_OK or STG_EDB. */
int stg__store_meta_get(stg_store *s, const char *key, char **out);

/* Import set (see the invariants above) in one transaction:
 *  - no job set yet: insert the jobs (pending), the bad lines and the meta
 *    (fingerprint, count, input path, format); *imported = true;
 *  - the same fingerprint: nothing is written; *imported = false;
 *  - another fingerprint: STG_ESTATE, nothing written, the message names
 *    both job sets.
 * input_path may be NULL ("-"). Does not take ownership of set. */
int stg__store_import(stg_store *s, const stg_job_set *set, const char *input_path,
                     int64_t now_ms, bool *imported);

typedef struct stg_store_import_options {
    const char *input_path;     /* recorded; NULL: "-" */
    int64_t now_ms;
    bool strict;                /* a bad line refuses the import */
    /* Called for every bad line, in line order (repeats included), also
     * when the store already holds the set; may be NULL. */
    void (*on_bad)(void *data, long line, const char *message);
    void *bad_data;
    stg_input_secrets *secrets; /* not NULL: gets the needs_input jobs' secrets */
} stg_store_import_options;

typedef struct stg_store_import_result {
    bool imported;        /* the set was written (the store held none) */
    bool refused;         /* no jobs, or bad lines with strict: nothing written */
    size_t jobs, bad;     /* accepted jobs; bad lines (repeats included) */
    long lines;
    stg_input_format format;
    char fingerprint[65];
} stg_store_import_result;

/* Stream r into the store, as stg__store_import does a set (the same rows,
 * bad lines, meta and fingerprint; the same STG_ESTATE for another set),
 * reading one line at a time; repeated ids are found by the database.
 * Refused (res->refused, STG_OK): nothing written. STG_EIO / STG_ENOMEM
 * from the reader, STG_EDB from SQLite: nothing written, the message in
 * stg__store_errmsg. With o->secrets, what it got is valid only on STG_OK
 * and not refused (the caller frees it either way). */
int stg__store_import_stream(stg_store *s, stg_input_reader *r,
                            const stg_store_import_options *o, stg_store_import_result *res);

/* True (*has) when the store holds a job set. */
int stg__store_has_jobs(stg_store *s, bool *has);

/* After a stop: every inflight job goes back to pending, except those with
 * replay_safe = 0 and sent = 1, which go to review. One transaction.
 * Counts may be NULL. */
int stg__store_recover(stg_store *s, int64_t now_ms, int *to_pending, int *to_review);

/* from (DEFERRED or REVIEW) -> pending, one transaction. *n (may be NULL)
 * gets the count. STG_EINVAL for other states. */
int stg__store_requeue(stg_store *s, stg_job_state from, int64_t now_ms, int *n);

/* A claimed job: what is needed to run it. Owned by the caller; release
 * with stg__job_clear(). */
typedef struct stg_job {
    int64_t id;            /* 1-based position in the job set */
    char *key;
    long line;
    char *method;
    char *url;             /* NULL when needs_input */
    char *url_redacted;
    char **headers;        /* stored (non-secret) headers, NULL-terminated */
    char *body;            /* may be NULL */
    size_t body_len;
    char *idempotency_key; /* may be NULL */
    bool needs_input;      /* URL or headers withheld: rebuild from the input */
    bool replay_safe;      /* idempotent method or an idempotency key */
    int attempts;          /* attempts made in earlier runs */
} stg_job;

void stg__job_clear(stg_job *j);

/* Claim up to max pending jobs, lowest id first: mark them inflight (sent =
 * 0, runs + 1, run_id, started_at) in one transaction and fill out[0..*n).
 * *n = 0 when none is pending. */
int stg__store_claim(stg_store *s, int max, int64_t run_id, int64_t now_ms, stg_job *out,
                    int *n);

/* Give back claimed jobs whose requests never left (the runner's claimed
 * ahead, at a stop or the end): inflight, sent = 0, of run_id -> pending,
 * runs - 1 (run_id, started_at NULL again when it was the job's first
 * claim), in one statement and one transaction (in a group: the group's).
 * *moved (may be NULL) gets n. STG_ESTATE when any of them is not such a
 * job: nothing moves (in a group, the group is rolled back: the caller
 * stops writing). */
int stg__store_unclaim(stg_store *s, const stg_job *jobs, int n, int64_t run_id, int64_t now_ms,
                      int *moved);

/* The first attempt of an inflight job is about to leave: sent = 1, and
 * that attempt is counted (the job's attempts + 1; the calls of run_id + 1
 * when run_id > 0), so a kill -9 after it loses neither. One transaction
 * (in a group: committed with the group, at once).
 * STG_ESTATE when the job is not inflight (nothing written). */
int stg__store_mark_sent(stg_store *s, int64_t id, int64_t run_id);

/* Group commit. While on, every state change (claim, finish, the run's
 * counters) joins one transaction, opened by the first of them and
 * committed by stg__store_flush: one commit (one WAL append of the pages the
 * changes share) per runner pass instead of one per job. What a kill -9
 * can lose is what it could lose before: changes not yet committed, whose
 * jobs are still inflight (or pending) in the database, which the next
 * open recovers. So the caller flushes where a change must be durable
 * before something outside happens: the claims before their requests can
 * leave (the batch runner: at each attempt's start), the outcomes before
 * they are reported; stg__store_mark_sent flushes by itself. An error inside the group
 * rolls the whole group back (the caller stops writing, as after any store
 * error); a change that does not apply (STG_ESTATE) writes nothing and
 * leaves the group as it was. Turning it off flushes. */
int stg__store_group(stg_store *s, bool on);
/* Commit the group's transaction, if one is open. STG_OK or STG_EDB (then
 * the group is rolled back). */
int stg__store_flush(stg_store *s);
/* How many transactions (BEGIN ... COMMIT) this handle has committed, a
 * statement run on its own (stg__store_requeue, stg__store_run_update) not
 * counted: what a run's commit policy costs, for tests and benchmarks. */
int64_t stg__store_commits(const stg_store *s);

/* How a run ended for one job. */
typedef struct stg_job_outcome {
    stg_job_state state;      /* DONE, FAILED, DEFERRED, REVIEW or PENDING */
    int status;               /* last HTTP status, 0: none */
    int attempts;             /* attempts made in this run (added to the total) */
    const char *reason;       /* stg_reason_name(), may be NULL */
    const char *error;        /* one line, redacted; NULL for none */
    const void *body;         /* response body to store; NULL: none */
    size_t body_len;
    const char *response_file; /* file name under --out; NULL: none */
    /* The run's counters, added to run run_id in the same transaction (so
     * they survive kill -9 exactly as the outcome does); run_id 0: none. */
    int64_t run_id;
    int retries;              /* attempts after the first, in this run */
    int status_429, status_503; /* attempts answered so, in this run */
    /* The body is in a file instead (body NULL): body_len bytes from offset
     * 0 of body_fd (open for reading; not closed here), copied into the
     * row with incremental blob I/O (zeroblob, then sqlite3_blob_write in
     * 64 KiB pieces) in the outcome's transaction, so it is never whole in
     * memory. */
    bool body_in_fd;
    int body_fd;
} stg_job_outcome;

/* inflight -> o->state, with status, error, body and finished_at, and the
 * counters of o->run_id (calls += attempts, retries, 429s, 503s, finished
 * + 1 unless PENDING), in one transaction. STG_ESTATE when the job is not
 * inflight (nothing written); STG_EINVAL when o->state is INFLIGHT. */
int stg__store_finish(stg_store *s, int64_t id, const stg_job_outcome *o, int64_t now_ms);

/* Jobs per state. STG_EDB when a row holds no known state, or when the
 * states do not add up to the job set's size (a damaged database). */
int stg__store_counts(stg_store *s, int64_t counts[STG_JOB_NSTATES]);

/* The checks stg__store_open runs on a database that holds a job set:
 * PRAGMA quick_check, and the job rows against the job count stored with
 * the fingerprint (ids 1..count, none missing). STG_OK, or STG_EDB with a
 * message saying what is wrong. */
int stg__store_check(stg_store *s);

/* Jobs in the given states (bit 1 << state) that need the input file. */
int stg__store_count_needs_input(stg_store *s, unsigned state_mask, int64_t *n);

/* The state of one job by id (tests, tools). STG_ENOTFOUND if none. */
int stg__store_job_state(stg_store *s, int64_t id, stg_job_state *out);

/* ---- runs ----------------------------------------------------------- */

typedef struct stg_run_stats {
    int64_t started_ms, wall_ms;
    int64_t calls;      /* HTTP attempts */
    int64_t retries;
    int64_t status_429, status_503;
    int64_t finished;   /* jobs that reached a final state in this run */
    int exit_code;      /* -1 while running */
    int concurrency;    /* a learned concurrency's limit (the engine's sum
                           over hosts) when last saved; 0: fixed, or none */
} stg_run_stats;

/* Start a run row. */
int stg__store_run_begin(stg_store *s, int64_t now_ms, int64_t *run_id);
/* Record the run's wall time and exit code (exit_code -1: still running),
 * called periodically and at the end; a learned concurrency (st->concurrency
 * > 0) is kept as the meta value learned_concurrency, the latest run's. The counters of st are NOT written:
 * calls, retries, 429s, 503s and finished are added by stg__store_finish and
 * stg__store_mark_sent in the transaction of each job's change, so they
 * survive a kill -9 with the outcomes they count. */
int stg__store_run_update(stg_store *s, int64_t run_id, const stg_run_stats *st);

/* ---- report --------------------------------------------------------- */

#define STG_REPORT_HIST 16 /* retries 0..14, and 15+ */
#define STG_REPORT_STATUSES 24
#define STG_REPORT_REASONS 6

/* How long jobs took, nearest-rank percentiles in ms of n jobs (the
 * database's report and the queue's, src/batch/report.h). */
typedef struct stg_report_durations {
    int64_t n, p50, p90, p99, max;
} stg_report_durations;

typedef struct stg_store_report {
    int64_t counts[STG_JOB_NSTATES];
    int64_t total;
    int64_t bad_lines;
    int64_t runs;
    int64_t wall_ms;     /* summed over runs */
    int64_t calls, retries, status_429, status_503;
    int64_t hist[STG_REPORT_HIST]; /* finished jobs by retries (attempts - 1) */
    int64_t needs_input; /* jobs whose request is rebuilt from the input */
    stg_run_stats last;  /* the latest run; runs == 0: zeroed */
    char *input_path;    /* owned; may be NULL */
    char *fingerprint;   /* owned; may be NULL */
    char *format;        /* owned; may be NULL */
    /* How long finished jobs took in their last run (claimed to final
     * state, waits included), nearest-rank percentiles in ms; n jobs. */
    stg_report_durations duration;
    /* Jobs by last HTTP status (0: no answer), ascending; the rest of
     * the statuses beyond STG_REPORT_STATUSES summed in statuses_other. */
    struct { int status; int64_t n; } statuses[STG_REPORT_STATUSES];
    int n_statuses;
    int64_t statuses_other;
    /* Time lost waiting, summed over the runs that recorded it (a run
     * killed with -9 does not): retry backoff (server hints included) and
     * the client-side limiter. waits_known false: no run recorded any. */
    bool waits_known;
    int64_t wait_retry_ms, wait_limiter_ms;
    /* Where a learned concurrency stood when the latest run that learned
     * one was last saved; 0: every run had a fixed --concurrency. */
    int learned_concurrency;
    /* Every job by its attempts over all runs (index: attempts; the last,
     * STG_REPORT_HIST, is that many or more): the never-tried ones too, so
     * the counts add up to total. */
    int64_t attempts_all[STG_REPORT_HIST + 1];
    /* Why the jobs that are not done stand where they are: by the last
     * outcome's reason and the transport error of the last attempt
     * ("deadline, connect_refused"; "deadline, never tried"), the most
     * frequent STG_REPORT_REASONS listed, the rest summed in
     * reasons_other. */
    struct { char why[64]; int64_t n; } reasons[STG_REPORT_REASONS];
    int n_reasons;
    int64_t reasons_other;
    /* Per class and tenant (report_class.c, docs/priorities.md): the jobs
     * by state, by the class and tenant each stored (cls "" : none, the
     * run's --priority, normal by default), and what the runs admitted of
     * each (admitted 0 and waits unknown when no run recorded it). */
    struct stg_report_class *classes; /* owned */
    size_t n_classes;
} stg_store_report;

typedef struct stg_report_class {
    char cls[16];                      /* a class name, or "" in jobs */
    char tenant[STG_TENANT_MAX + 2];   /* "": none */
    bool jobs_row;                     /* a row of the jobs' classes, else of the runs' */
    int64_t jobs[STG_JOB_NSTATES];     /* jobs_row */
    int64_t admitted, wait_ms, wait_max_ms; /* runs' rows */
} stg_report_class;

/* One class and tenant's admissions in a run, for stg__store_run_classes_add. */
typedef struct stg_run_class {
    const char *cls;    /* its name */
    const char *tenant; /* NULL: none */
    int64_t admitted, wait_ms, wait_max_ms;
} stg_run_class;
/* Add the run's admissions per class and tenant to the latest run (the
 * table run_classes is made if missing). */
int stg__store_run_classes_add(stg_store *s, const stg_run_class *v, size_t n);
/* report_class.c, for report.c: read r's classes. */
int stg__store_report_classes(stg_store *s, stg_store_report *r);
/* The sections per class and tenant of rows v[0..n) (the database's, or
 * the Redis work queue's: src/batch/report_queue.c), as text ("jobs by class
 * and tenant", "admitted by class and tenant (every run)"), or as the
 * report's JSON array "classes" (a json_t *). */
void stg__report_classes_print(const stg_report_class *v, size_t n, FILE *out);
void *stg__report_classes_json(const stg_report_class *v, size_t n);

int stg__store_report_get(stg_store *s, stg_store_report *r);
void stg__store_report_free(stg_store_report *r);
/* The report's "effective rate": jobs answered (done + failed) per second
 * of the runs' wall time; 0 before any wall time. The one figure the
 * progress line's last redraw also shows. */
double stg__store_report_jobs_per_s(const stg_store_report *r);
/* Printed by src/batch/report.c (stg__batch_report_text and _json), the
 * printer the Redis work queue's report shares. */
/* Add a run's waits (ms of retry backoff and of limiter delay, as the
 * engine's WAITED events measured them: backoff, budget and breaker; the
 * limiter, the servers' quotas and a learned rate's pace) to the latest run,
 * in one statement (the table run_waits is made if missing). */
int stg__store_run_waits_add(stg_store *s, int64_t retry_ms, int64_t limiter_ms);
/* The run's timeline as the jobs table holds it (timeline.c): one JSON
 * object, {"t0_ms", "bucket_ms", "buckets", "finished": {class: [n per
 * bucket]}, "claimed", "retries", "in_flight" (mean jobs in flight per
 * bucket), "durations": [{"le_ms", "n"}]}, into *out (the caller frees
 * it). STG_OK, STG_EDB (the message in stg__store_errmsg) or STG_ENOMEM. */
int stg__store_timeline_json(stg_store *s, char **out);

/* The run's per-second series (series.c): what a batch's events said, per
 * second of a run, written by the batch at the commits it makes anyway. */
#define STG_STORE_WAIT_REASONS 8
/* The WAITED reasons, in the order of stg_store_second.wait_us: "slot",
 * "limiter", "quota", "pace", "concurrency", "breaker", "backoff", "budget". */
extern const char *const stg_store_wait_reasons[STG_STORE_WAIT_REASONS];
typedef struct stg_store_second {
    int64_t t_s;                              /* Unix second */
    int64_t attempts, n429, n503;             /* attempts started; answers 429, 503 */
    int64_t wait_us[STG_STORE_WAIT_REASONS];  /* waits that ended in the second */
    double learned_rate;                      /* the largest seen (any host); 0: none */
    int concurrency;                          /* the largest learned limit seen; 0: none */
} stg_store_second;
/* Add n rows to run_id's series, in one transaction (in a group: the
 * group's, committed by its flush; a failure rolls the group back) (the table
 * run_seconds is made if missing), and say the run's row width in seconds
 * (*width_s: 1, or larger once the run's rows were merged to stay under
 * their cap; rows are aligned to it). STG_OK or STG_EDB. */
int stg__store_series_add(stg_store *s, int64_t run_id, const stg_store_second *rows, size_t n,
                         int64_t *width_s);
/* A group transaction is open (stg__store_group): writes not yet committed,
 * which the next stg__store_flush commits. */
bool stg__store_pending(const stg_store *s);
/* Print the bad input lines, "PATH:LINE: message", at most max (0: all). */
int stg__store_bad_lines_print(stg_store *s, const char *input, long max, FILE *out);

/* ---- export --------------------------------------------------------- */

typedef enum stg_export_format {
    STG_EXPORT_JSONL = 0, /* one JSON object a line */
    STG_EXPORT_CSV = 1,
    STG_EXPORT_JSON = 2   /* one JSON array of the same objects */
} stg_export_format;

typedef struct stg_export_options {
    stg_export_format format;
    unsigned state_mask; /* bit 1 << state; 0: all */
    bool bodies;         /* include the stored response body (JSONL:
                            "body" when UTF-8, else "body_base64"; CSV: "body") */
} stg_export_options;

/* One row per job, by id: id (the job's key), job, line, state, status,
 * attempts, error, reason, method, url (as given, minus userinfo and
 * secret query values: stg__store_url_shown), file, finished_at,
 * duration_ms.
 * CSV has a header line and RFC 4180 quoting. Returns STG_OK, STG_EDB or
 * STG_EIO (write error). */
int stg__store_export(stg_store *s, const stg_export_options *opt, FILE *out);

/* Milliseconds of the wall clock: the `now_ms` the calls above take, as
 * every caller (the batch runner, the CLI) gives it. */
int64_t stg__store_now_ms(void);

/* ---- internal helpers shared by the files of this part ----------------- */

struct sqlite3;
/* The connection (tests inspect the database through it). */
struct sqlite3 *stg__store_db(stg_store *s);
/* Record "what: sqlite message (hint)" as the error; returns STG_EDB. */
int stg__store_fail(stg_store *s, int rc, const char *what);
/* stg__store_fail, then roll the transaction back (nothing it wrote stays;
 * in a group commit, the whole group): for a statement that failed inside
 * one. Returns STG_EDB. */
int stg__store_fail_rollback(stg_store *s, int rc, const char *what);
/* Record a formatted error; returns err. */
int stg__store_error(stg_store *s, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK; in a group (stg__store_group): open
 * the group's transaction if needed / nothing / roll the group back. */
int stg__store_begin(stg_store *s);
int stg__store_commit(stg_store *s);
void stg__store_rollback(stg_store *s);
/* After a change that wrote nothing (STG_ESTATE): ROLLBACK, or nothing in
 * a group (the group's other changes stay). */
void stg__store_undo_nothing(stg_store *s);

#endif
