/*
 * Shared quotas, the pure part: see quota_local.h. Invariants: an
 * estimate never rises above the limit, never falls below 0, and an
 * answer's count can only lower it (a higher count is older news: the
 * server counts in arrival order); only the refill raises it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "redis/quota_local.h"

double stg__sq_est_now(const stg__sq_est *e, int64_t now_us)
{
    if (e->est < 0)
        return -1;
    double v = e->est;
    if (e->fill && e->rate_ms > 0 && now_us > e->at)
        v += e->rate_ms * (double)(now_us - e->at) / 1000.0;
    if (e->limit >= 0 && v > (double)e->limit)
        v = (double)e->limit;
    return v;
}

void stg__sq_est_learn(stg__sq_est *e, int64_t count, int64_t spent, int64_t now_us)
{
    double v = stg__sq_est_now(e, now_us);
    if (count >= 0 && (v < 0 || (double)count < v))
        v = (double)count;
    if (v >= 0) {
        v -= (double)spent;
        if (v < 0)
            v = 0;
    }
    e->est = v;
    e->at = now_us;
}

int64_t stg__sq_fallback_wait(const stg__sq_est *e, double share, int64_t flight, int64_t cost,
                              int64_t reset_ms, int64_t poll_us, int64_t now_us)
{
    double v = stg__sq_est_now(e, now_us);
    if (v < 0)
        return flight > 0 ? poll_us : 0;
    double room = share * v - (double)flight;
    if (room >= (double)cost)
        return 0;
    if (e->fill && e->rate_ms > 0)
        return (int64_t)(((double)cost - room) / (share * e->rate_ms) * 1000.0) + 1;
    if (reset_ms > 0)
        return reset_ms * 1000;
    return poll_us;
}

void stg__sq_id(const stg_quota_obs *o, char id[STG__SQ_ID_MAX])
{
    char w[24] = "-";
    if (o->window_us != STG_UNKNOWN)
        snprintf(w, sizeof w, "%" PRId64, o->window_us / 1000);
    snprintf(id, STG__SQ_ID_MAX, "%s|%s|%s", o->key, o->unit, w);
    for (char *p = id; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '_';
}

void stg__sq_skey(const char *id, char key[STG__SQ_ID_MAX])
{
    const char *p = strrchr(id, '|');
    while (p && p > id && *--p != '|')
        ;
    size_t n = p && *p == '|' ? (size_t)(p - id) : 0;
    if (n >= STG__SQ_ID_MAX)
        n = STG__SQ_ID_MAX - 1;
    memcpy(key, id, n);
    key[n] = '\0';
}

bool stg__sq_fills(int dialect)
{
    return dialect == STG_DIALECT_OPENAI || dialect == STG_DIALECT_ANTHROPIC;
}
