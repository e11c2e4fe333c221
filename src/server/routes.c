/*
 * Route answers for admitted requests (see routes.h).
 *
 * Invariants: routes are pure functions of the request (no server state),
 * so an answer can be produced under the idempotency lock and replayed.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/buf.h"
#include "server/routes.h"
#include "util/base64.h"

char *srv_json_error(const char *error, const char *key, int64_t val, size_t *len)
{
    srv_buf b = {0};
    srv_buf_puts(&b, "{\"error\":");
    srv_buf_json_str(&b, error, strlen(error));
    if (key) {
        srv_buf_puts(&b, ",");
        srv_buf_json_str(&b, key, strlen(key));
        srv_buf_printf(&b, ":%" PRId64, val);
    }
    srv_buf_puts(&b, "}");
    return srv_buf_take(&b, len);
}

static bool body_allowed(unsigned status)
{
    return status >= 200 && status != 204 && status != 304;
}

/* Parse "/status/CODE": 1 and the code, 0 when the path is not /status/..,
 * -1 when it is but the code is not a number in 100..599. */
static int status_path(const char *url, unsigned *code)
{
    static const char prefix[] = "/status/";
    if (strncmp(url, prefix, sizeof prefix - 1) != 0)
        return 0;
    const char *p = url + sizeof prefix - 1;
    unsigned v = 0;
    size_t n = 0;
    for (; p[n] >= '0' && p[n] <= '9'; n++) {
        if (n >= 3)
            return -1;
        v = v * 10 + (unsigned)(p[n] - '0');
    }
    if (n == 0 || p[n] != '\0' || v < 100 || v > 599)
        return -1;
    *code = v;
    return 1;
}

static void route_status(srv_route_req *rq, unsigned code, srv_answer *out)
{
    out->status = code;
    const char *ra = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "retry_after");
    if (ra && *ra && strlen(ra) <= 9 && strspn(ra, "0123456789") == strlen(ra))
        rq->retry_after_s = strtoll(ra, NULL, 10);
    srv_buf b = {0};
    if (body_allowed(code)) {
        const char *reason = MHD_get_reason_phrase_for(code);
        srv_buf_printf(&b, "{\"status\":%u,\"reason\":", code);
        srv_buf_json_str(&b, reason, strlen(reason));
        srv_buf_puts(&b, "}");
    }
    out->body = srv_buf_take(&b, &out->len);
}

/* A JSON string for arbitrary bytes: as is when UTF-8, else with the bad
 * bytes replaced by U+FFFD (srv_buf's escaper), parsed back. */
static json_t *json_bytes(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j)
        return j;
    srv_buf b = {0};
    srv_buf_json_str(&b, s, n);
    j = b.p ? json_loads(b.p, JSON_DECODE_ANY, NULL) : NULL;
    srv_buf_free(&b);
    return j ? j : json_string("");
}

static enum MHD_Result add_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    json_t *o = cls;
    json_t *old = json_object_get(o, key);
    if (!value) {
        if (!old)
            json_object_set_new(o, key, json_null());
        return MHD_YES;
    }
    if (old && json_is_string(old)) {
        srv_buf b = {0};
        srv_buf_put(&b, json_string_value(old), json_string_length(old));
        srv_buf_puts(&b, ", ");
        srv_buf_puts(&b, value);
        if (b.p)
            json_object_set_new(o, key, json_bytes(b.p, b.len));
        srv_buf_free(&b);
    } else {
        /* jansson rejects (and frees the value for) keys that are not UTF-8. */
        json_object_set_new(o, key, json_bytes(value, strlen(value)));
    }
    return MHD_YES;
}

static void route_echo(srv_route_req *rq, srv_answer *out)
{
    json_t *o = json_object();
    json_t *headers = json_object();
    json_t *query = json_object();
    if (o && headers && query) {
        MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, add_value, headers);
        MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, add_value, query);
        json_object_set_new(o, "method", json_bytes(rq->method, strlen(rq->method)));
        json_object_set_new(o, "path", json_bytes(rq->url, strlen(rq->url)));
        json_object_set(o, "query", query);
        json_object_set(o, "headers", headers);
        json_t *body = json_stringn(rq->body ? rq->body : "", rq->len);
        if (body) {
            json_object_set_new(o, "body", body);
        } else {
            char *b64 = stg__base64_new((const unsigned char *)rq->body, rq->len);
            json_object_set_new(o, "body_base64", b64 ? json_string(b64) : json_null());
            free(b64);
        }
        json_object_set_new(o, "body_length", json_integer((json_int_t)rq->len));
    }
    json_decref(headers);
    json_decref(query);
    out->status = 200;
    out->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    out->len = out->body ? strlen(out->body) : 0;
    json_decref(o);
    if (!out->body) {
        out->status = 500;
        out->body = srv_json_error("out of memory", NULL, 0, &out->len);
    }
}

static void route_default(srv_route_req *rq, srv_answer *out)
{
    srv_buf b = {0};
    srv_buf_puts(&b, "{\"path\":");
    srv_buf_json_str(&b, rq->url, strlen(rq->url));
    srv_buf_puts(&b, ",\"ok\":true}");
    out->status = 200;
    out->body = srv_buf_take(&b, &out->len);
}

void srv_route(srv_route_req *rq, srv_answer *out)
{
    unsigned code = 0;
    rq->retry_after_s = -1;
    out->replayed = false;
    int st = status_path(rq->url, &code);
    if (st > 0) {
        route_status(rq, code, out);
    } else if (st < 0) {
        out->status = 400;
        out->body = srv_json_error("status must be a number in 100..599", NULL, 0, &out->len);
    } else if (!strcmp(rq->url, "/echo")) {
        route_echo(rq, out);
    } else {
        route_default(rq, out);
    }
}
