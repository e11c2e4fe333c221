/*
 * Redis Sentinel discovery (see sentinel.h). The list is a command-line
 * value: each entry is bounded before it is copied.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/rconn.h"
#include "redis/sentinel.h"

/* One "HOST[:PORT]" entry of len bytes into host/port. */
static bool entry(const char *s, size_t len, char *host, size_t hlen, int *port)
{
    char buf[STG_REDIS_HOST_MAX + 16];
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *h = buf, *p = NULL;
    if (buf[0] == '[') {
        char *rb = strchr(buf, ']');
        if (!rb)
            return false;
        *rb = '\0';
        h = buf + 1;
        if (rb[1] == ':')
            p = rb + 2;
        else if (rb[1])
            return false;
    } else if ((p = strchr(buf, ':'))) {
        *p++ = '\0';
    }
    *port = 26379;
    if (p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (*end || end == p || v < 1 || v > 65535)
            return false;
        *port = (int)v;
    }
    if (!h[0] || strlen(h) >= hlen)
        return false;
    strcpy(host, h);
    return true;
}

int stg__sentinel_master(const char *list, const char *name, bool tls, const stg_redis_tls *t,
                         int64_t connect_us, int64_t command_us, char *host, size_t hlen,
                         int *port, char *why, size_t why_len)
{
    if (!list || !name || !name[0]) {
        snprintf(why, why_len, "no sentinels or no primary name given");
        return STG_EINVAL;
    }
    char last[STG__SENTINEL_WHY];
    snprintf(last, sizeof last, "no sentinel given");
    for (const char *s = list; *s;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        char sh[STG_REDIS_HOST_MAX + 1];
        int sp;
        if (!entry(s, len, sh, sizeof sh, &sp)) {
            snprintf(why, why_len, "bad sentinel address in '%s' (want HOST[:PORT],...)", list);
            return STG_EINVAL;
        }
        s = comma ? comma + 1 : s + len;
        char where[STG_REDIS_HOST_MAX + 16];
        snprintf(where, sizeof where, strchr(sh, ':') ? "[%s]:%d" : "%s:%d", sh, sp);
        stg__rconn_err e;
        stg__rconn *c = stg__rconn_open(sh, sp, where, tls, t, connect_us, command_us, &e, last,
                                        sizeof last);
        if (!c)
            continue;
        const char *argv[] = {"SENTINEL", "get-master-addr-by-name", name};
        redisReply *r = stg__rconn_command(c, 3, argv, NULL);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            r->element[1]->type == REDIS_REPLY_STRING && r->element[0]->len < hlen) {
            long v = strtol(r->element[1]->str, NULL, 10);
            if (v >= 1 && v <= 65535) {
                memcpy(host, r->element[0]->str, r->element[0]->len + 1);
                *port = (int)v;
                freeReplyObject(r);
                stg__rconn_free(c);
                return STG_OK;
            }
        }
        if (!r)
            snprintf(last, sizeof last, "sentinel at %s did not answer", where);
        else if (r->type == REDIS_REPLY_NIL)
            snprintf(last, sizeof last, "sentinel at %s does not know a primary named %s", where,
                     name);
        else
            snprintf(last, sizeof last, "sentinel at %s sent an unexpected answer", where);
        freeReplyObject(r);
        stg__rconn_free(c);
    }
    snprintf(why, why_len, "no sentinel named the primary %s (%s)", name, last);
    return STG_EUNAVAIL;
}
