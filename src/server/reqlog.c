/*
 * The request log (see reqlog.h).
 *
 * Invariants: l->f is set once at open and cleared only at close, after the
 * daemon has stopped; every write and flush of it happens under l->mu.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "server/buf.h"
#include "server/reqlog.h"

#define AI_COLUMNS "ai,tokens_in,tokens_max_out,tokens_charged,tokens_out,tokens_refunded"

int srv_reqlog_open(srv_reqlog *l, const char *path, stg_srv_log_format fmt, bool ai, char *err,
                    size_t errlen)
{
    l->f = NULL;
    l->fmt = fmt;
    l->ai = ai;
    pthread_mutex_init(&l->mu, NULL);
    if (!path)
        return 0;
    l->f = fopen(path, "w");
    if (!l->f) {
        snprintf(err, errlen, "cannot open log file %s: %s", path, strerror(errno));
        return -1;
    }
    setvbuf(l->f, NULL, _IOFBF, 1 << 16);
    if (fmt == STG_SRV_LOG_CSV)
        fputs(ai ? "arrival_us,client,method,path,status,idempotency_key," AI_COLUMNS "\n"
                 : "arrival_us,client,method,path,status,idempotency_key\n",
              l->f);
    return 0;
}

void srv_reqlog_write(srv_reqlog *l, int64_t rel_us, const char *client, const char *method,
                      const char *path, unsigned status, const char *outcome, const char *key,
                      const srv_reqlog_ai *ai)
{
    if (!l->f)
        return;
    srv_buf b = {0};
    char st[16];
    if (status)
        snprintf(st, sizeof st, "%u", status);
    if (l->fmt == STG_SRV_LOG_CSV) {
        srv_buf_printf(&b, "%" PRId64 ",", rel_us);
        srv_buf_csv_field(&b, client, strlen(client));
        srv_buf_put(&b, ",", 1);
        srv_buf_csv_field(&b, method, strlen(method));
        srv_buf_put(&b, ",", 1);
        srv_buf_csv_field(&b, path, strlen(path));
        srv_buf_put(&b, ",", 1);
        srv_buf_puts(&b, status ? st : outcome);
        srv_buf_put(&b, ",", 1);
        if (key)
            srv_buf_csv_field(&b, key, strlen(key));
        if (l->ai && ai)
            srv_buf_printf(&b, ",%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64,
                           ai->ai, ai->tokens_in, ai->tokens_max_out, ai->tokens_charged,
                           ai->tokens_out, ai->tokens_refunded);
        else if (l->ai)
            srv_buf_puts(&b, ",,,,,,");
    } else {
        srv_buf_printf(&b, "{\"t_us\":%" PRId64 ",\"client\":", rel_us);
        srv_buf_json_str(&b, client, strlen(client));
        srv_buf_puts(&b, ",\"method\":");
        srv_buf_json_str(&b, method, strlen(method));
        srv_buf_puts(&b, ",\"path\":");
        srv_buf_json_str(&b, path, strlen(path));
        srv_buf_puts(&b, ",\"status\":");
        if (status)
            srv_buf_puts(&b, st);
        else
            srv_buf_json_str(&b, outcome, strlen(outcome));
        srv_buf_puts(&b, ",\"key\":");
        if (key)
            srv_buf_json_str(&b, key, strlen(key));
        else
            srv_buf_puts(&b, "null");
        if (ai)
            srv_buf_printf(&b, ",\"ai\":\"%s\",\"tokens_in\":%" PRId64 ",\"tokens_max_out\":%" PRId64
                               ",\"tokens_charged\":%" PRId64 ",\"tokens_out\":%" PRId64
                               ",\"tokens_refunded\":%" PRId64,
                           ai->ai, ai->tokens_in, ai->tokens_max_out, ai->tokens_charged,
                           ai->tokens_out, ai->tokens_refunded);
        srv_buf_puts(&b, "}");
    }
    srv_buf_put(&b, "\n", 1);
    if (b.oom) {
        srv_buf_free(&b);
        return;
    }
    pthread_mutex_lock(&l->mu);
    fwrite(b.p, 1, b.len, l->f);
    pthread_mutex_unlock(&l->mu);
    srv_buf_free(&b);
}

void srv_reqlog_flush(srv_reqlog *l)
{
    if (!l->f)
        return;
    pthread_mutex_lock(&l->mu);
    fflush(l->f);
    pthread_mutex_unlock(&l->mu);
}

void srv_reqlog_close(srv_reqlog *l)
{
    if (l->f) {
        fclose(l->f);
        l->f = NULL;
    }
    pthread_mutex_destroy(&l->mu);
}
