/*
 * The first event of a text/event-stream answer, for the hold
 * (STG_STREAM_SSE_HOLD, xfer.c): an LLM API that accepted a stream may
 * still refuse it in its first event. Anthropic answers 200 and then
 * `event: error` with `{"type":"error","error":{"type":"overloaded_error"}}`
 * when it is overloaded after accepting the stream; OpenAI-style servers
 * send `data: {"error": {...}}`. Nothing of the answer has reached the
 * program yet, so the event stands for the status the same error has
 * outside a stream (a 529, a 429, ...) and may be retried invisibly.
 *
 * Two pieces, each pure: stg__sse_first_event reads the event framing as
 * the WHATWG HTML standard's "interpreting an event stream" (§9.2.6) does:
 * lines end in CRLF, LF or CR; a line starting with ':' is a comment;
 * "event" sets the type, each "data" line adds a line to the data (one
 * leading space of a value is dropped), and a blank line dispatches the
 * event only when it has data (a block without data, like a comment-only
 * keep-alive, dispatches nothing). stg__sse_error_status reads the event's
 * data as JSON with jansson (never by hand) and maps the error's type or
 * code to the HTTP status the vendor gives the same error outside a stream
 * (Anthropic's errors page; OpenAI's error codes page).
 *
 * Invariants: the input is untrusted and not NUL-terminated; nothing here
 * reads past len; a CR that ends the input may be the first half of a
 * CRLF, so it ends no line yet (the event is incomplete, never misread);
 * the data is at most len bytes and is NUL-terminated in its buffer.
 */
#include <string.h>

#include <jansson.h>

#include "curl/internal.h"

/* The next line of buf[*pos..len): its extent, and *pos after its end.
 * False when no complete line is left. */
static bool next_line(const char *buf, size_t len, size_t *pos, size_t *start, size_t *end)
{
    for (size_t i = *pos; i < len; i++) {
        if (buf[i] == '\n' || buf[i] == '\r') {
            if (buf[i] == '\r' && i + 1 == len)
                return false; /* a CR at the end: maybe half a CRLF */
            *start = *pos;
            *end = i;
            *pos = i + (buf[i] == '\r' && buf[i + 1] == '\n' ? 2 : 1);
            return true;
        }
    }
    return false;
}

int stg__sse_first_event(const char *buf, size_t len, char *name, size_t name_size,
                         stg__buf *data)
{
    size_t pos = 0, s, e;
    bool have_data = false;
    if (name_size)
        name[0] = '\0';
    data->len = 0;
    if (data->p)
        data->p[0] = '\0';
    while (next_line(buf, len, &pos, &s, &e)) {
        if (s == e) { /* a blank line: dispatch, when there is data */
            if (have_data) {
                if (data->len && data->p[data->len - 1] == '\n')
                    data->p[--data->len] = '\0';
                return 1;
            }
            if (name_size)
                name[0] = '\0';
            continue;
        }
        if (buf[s] == ':')
            continue; /* a comment */
        const char *colon = memchr(buf + s, ':', e - s);
        size_t flen = colon ? (size_t)(colon - (buf + s)) : e - s;
        size_t vs = colon ? (size_t)(colon - buf) + 1 : e;
        if (vs < e && buf[vs] == ' ')
            vs++;
        if (flen == 4 && !memcmp(buf + s, "data", 4)) {
            if (!stg__buf_put(data, buf + vs, e - vs) || !stg__buf_put(data, "\n", 1))
                return -1;
            have_data = true;
        } else if (flen == 5 && !memcmp(buf + s, "event", 5) && name_size) {
            size_t n = e - vs < name_size - 1 ? e - vs : name_size - 1;
            memcpy(name, buf + vs, n);
            name[n] = '\0';
        }
    }
    return 0;
}

/* The status the vendors give an error of this type or code outside a
 * stream; 0 for none known. */
static int status_of(const char *t)
{
    static const struct {
        const char *type;
        int status;
    } map[] = {
        {"overloaded_error", 529},       /* Anthropic */
        {"rate_limit_error", 429},       /* Anthropic */
        {"rate_limit_exceeded", 429},    /* OpenAI code */
        {"insufficient_quota", 429},     /* OpenAI code: a billing stop */
        {"tokens", 429},                 /* OpenAI type of a token limit */
        {"requests", 429},               /* OpenAI type of a request limit */
        {"api_error", 500},              /* Anthropic */
        {"server_error", 500},           /* OpenAI */
        {"timeout_error", 504},          /* Anthropic */
        {"invalid_request_error", 400},  /* both */
        {"authentication_error", 401},   /* Anthropic */
        {"permission_error", 403},       /* Anthropic */
        {"not_found_error", 404},        /* Anthropic */
        {"request_too_large", 413},      /* Anthropic */
    };
    for (size_t i = 0; t && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(t, map[i].type))
            return map[i].status;
    return 0;
}

int stg__sse_error_status(const char *name, const char *data, size_t len, char *type,
                          size_t type_size)
{
    if (type_size)
        type[0] = '\0';
    json_error_t jerr;
    json_t *root = len ? json_loadb(data, len, JSON_ALLOW_NUL, &jerr) : NULL;
    json_t *err = json_is_object(root) ? json_object_get(root, "error") : NULL;
    bool is_error = (name && !strcmp(name, "error")) || err;
    int status = 0;
    if (is_error) {
        /* Anthropic: error.type; OpenAI: error.code, else error.type. */
        const char *code = json_string_value(json_object_get(err, "code"));
        const char *etype = json_string_value(json_object_get(err, "type"));
        const char *t = status_of(code) ? code : etype ? etype : code;
        status = status_of(t);
        if (!status)
            status = 502; /* an error of a kind we do not know: the upstream failed */
        if (t && type_size && *t && strspn(t, "abcdefghijklmnopqrstuvwxyz"
                                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
                                              strlen(t))
            snprintf(type, type_size, "%s", t); /* a word, never the server's prose */
    }
    json_decref(root);
    return status;
}
