/*
 * The persona engine (see dialect.h): quota state per scope key and the
 * all-or-nothing admission every persona shares.
 *
 * Invariants: every srv_dq_state is read and written only under d->mu;
 * states are created on first use and freed only at destroy, so a pointer
 * taken from the map stays valid while d->mu is held. A WINDOW state holds
 * the index of its window (wall_us / W) and the units used in it; a BUCKET
 * state holds its level in micro-units (integer arithmetic: no drift, and
 * level never exceeds the capacity) and the monotonic time of its last
 * refill.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/dialect.h"
#include "util/assert.h"

#define MICRO INT64_C(1000000)

typedef struct srv_dq_state {
    int64_t idx, used;     /* WINDOW */
    int64_t level, last_us; /* BUCKET: level in units * MICRO */
    bool fresh;
} srv_dq_state;

const srv_persona *srv_persona_find(const char *name)
{
    for (size_t i = 0; srv_personas[i]; i++)
        if (!strcmp(srv_personas[i]->name, name))
            return srv_personas[i];
    return NULL;
}

int srv_dialect_init(srv_dialect *d, const stg_srv_config *cfg, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (!cfg->dialect) {
        if (cfg->n_quotas) {
            snprintf(err, errlen, "--quota needs --dialect");
            return -1;
        }
        return 0;
    }
    d->p = srv_persona_find(cfg->dialect);
    if (!d->p) {
        snprintf(err, errlen, "unknown dialect '%s'", cfg->dialect);
        return -1;
    }
    memcpy(d->q, d->p->q, sizeof d->q);
    for (size_t i = 0; i < cfg->n_quotas; i++) {
        const stg_srv_quota *u = &cfg->quotas[i];
        size_t j = 0;
        while (j < d->p->nq && strcmp(d->q[j].name, u->name))
            j++;
        if (j == d->p->nq) {
            int w = snprintf(err, errlen, "dialect %s has no quota '%s' (it has:", d->p->name,
                             u->name);
            for (size_t k = 0; k < d->p->nq && w > 0 && (size_t)w < errlen; k++)
                w += snprintf(err + w, errlen - (size_t)w, " %s", d->q[k].name);
            if (w > 0 && (size_t)w < errlen)
                snprintf(err + w, errlen - (size_t)w, ")");
            return -1;
        }
        if (u->limit < 0 || (u->limit > 0 && u->window_us <= 0)) {
            snprintf(err, errlen, "quota %s: bad size", u->name);
            return -1;
        }
        d->q[j].limit = u->limit;
        if (u->limit > 0)
            d->q[j].window_us = u->window_us;
    }
    d->token_cost = cfg->token_cost;
    if (pthread_mutex_init(&d->mu, NULL) != 0 || srv_map_init(&d->states, free) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void srv_dialect_destroy(srv_dialect *d)
{
    if (!d->p)
        return;
    srv_map_destroy(&d->states);
    pthread_mutex_destroy(&d->mu);
    d->p = NULL;
}

/* The states of one scope key (created zeroed and fresh). NULL when out of
 * memory. Called with d->mu held. */
static srv_dq_state *states_of(srv_dialect *d, const char *key, size_t len)
{
    srv_map_ref ref;
    if (!srv_map_acquire(&d->states, key, len, &ref))
        return NULL;
    if (!*ref.value) {
        srv_dq_state *st = calloc(SRV_DQ_MAX, sizeof *st);
        if (st)
            for (int i = 0; i < SRV_DQ_MAX; i++)
                st[i].fresh = true;
        *ref.value = st;
    }
    srv_dq_state *st = *ref.value;
    srv_map_release(&ref);
    return st;
}

/* Bring a state to now (new window, or the refill since the last visit). */
static void refresh(const srv_dq_spec *q, srv_dq_state *st, int64_t now_us, int64_t wall_us)
{
    if (q->kind == SRV_DQ_WINDOW) {
        int64_t idx = wall_us / q->window_us;
        if (st->fresh || idx != st->idx) {
            st->idx = idx;
            st->used = 0;
        }
    } else {
        int64_t cap = q->limit * MICRO;
        if (st->fresh) {
            st->level = cap;
        } else if (now_us > st->last_us) {
            /* units*MICRO per us = limit / window_us * MICRO; in 128 bits */
            __int128 add = (__int128)(now_us - st->last_us) * q->limit * MICRO / q->window_us;
            st->level = add >= cap - st->level ? cap : st->level + (int64_t)add;
        }
        if (now_us > st->last_us || st->fresh)
            st->last_us = now_us;
    }
    st->fresh = false;
    STG_ASSERT(q->kind != SRV_DQ_BUCKET || (st->level >= 0 && st->level <= q->limit * MICRO));
}

static int64_t cost_of(const srv_dq_spec *q, const srv_dctx *c)
{
    switch (q->unit) {
    case SRV_DQ_TOKENS: return c->cost;
    case SRV_DQ_INPUT: return c->cost_in;
    case SRV_DQ_OUTPUT: return c->cost_out;
    default: return 1;
    }
}

static bool fits(const srv_dq_spec *q, const srv_dq_state *st, int64_t cost)
{
    if (q->kind == SRV_DQ_WINDOW)
        return st->used + cost <= q->limit;
    return st->level >= cost * MICRO;
}

static void charge(const srv_dq_spec *q, srv_dq_state *st, int64_t cost)
{
    if (q->kind == SRV_DQ_WINDOW)
        st->used += cost;
    else
        st->level -= cost * MICRO;
    STG_ASSERT(q->kind != SRV_DQ_WINDOW || st->used <= q->limit);
    STG_ASSERT(q->kind != SRV_DQ_BUCKET || st->level >= 0);
}

/* us for the bucket to gain `need` micro-units, rounded up. */
static int64_t refill_us(const srv_dq_spec *q, int64_t need)
{
    if (need <= 0)
        return 0;
    __int128 num = (__int128)need * q->window_us, den = (__int128)q->limit * MICRO;
    return (int64_t)((num + den - 1) / den);
}

static void view(const srv_dq_spec *q, const srv_dq_state *st, int64_t cost, int64_t wall_us,
                 srv_dq_view *v)
{
    v->limit = q->limit;
    v->window_us = q->window_us;
    if (q->kind == SRV_DQ_WINDOW) {
        v->remaining = q->limit - st->used;
        v->reset_us = (st->idx + 1) * q->window_us - wall_us;
        /* A cost that can never fit one window waits for the next anyway. */
        v->wait_us = v->refused ? v->reset_us : 0;
    } else {
        v->remaining = st->level / MICRO;
        v->reset_us = refill_us(q, q->limit * MICRO - st->level);
        v->wait_us = v->refused ? refill_us(q, cost * MICRO - st->level) : 0;
    }
    STG_ASSERT(v->remaining >= 0 && v->reset_us >= 0 && v->wait_us >= 0);
}

static int64_t parse_cost(const char *h, int64_t dflt)
{
    if (!h)
        return dflt;
    char *end = NULL;
    long long n = strtoll(h, &end, 10);
    if (end == h || *end || n < 0)
        return dflt;
    return n;
}

/* The scope keys of a request: per client and route, per client, server. */
typedef struct scope_keys {
    char k[3][512];
    int len[3];
} scope_keys;

static void keys_of(const srv_dctx *c, scope_keys *sk)
{
    sk->len[SRV_DQ_ROUTE] =
        snprintf(sk->k[SRV_DQ_ROUTE], sizeof sk->k[0], "r\x1f%s\x1f%s", c->client, c->route);
    sk->len[SRV_DQ_CLIENT] = snprintf(sk->k[SRV_DQ_CLIENT], sizeof sk->k[0], "c\x1f%s", c->client);
    sk->len[SRV_DQ_SERVER] = snprintf(sk->k[SRV_DQ_SERVER], sizeof sk->k[0], "s");
    for (int i = 0; i < 3; i++)
        if (sk->len[i] < 0 || (size_t)sk->len[i] >= sizeof sk->k[0])
            sk->len[i] = (int)sizeof sk->k[0] - 1;
}

void srv_dialect_decide(srv_dialect *d, srv_dctx *c, srv_dout *o, const char *client,
                        const char *url, const char *token_hdr, const srv_dcost *cost,
                        int64_t now_us, int64_t wall_us)
{
    memset(c, 0, sizeof *c);
    memset(o, 0, sizeof *o);
    c->p = d->p;
    c->q = d->q;
    c->client = client;
    c->url = url;
    c->now_us = now_us;
    c->wall_us = wall_us;
    if (cost) {
        c->cost = cost->total;
        c->cost_in = cost->in;
        c->cost_out = cost->out;
    } else {
        c->cost = c->cost_in = c->cost_out = parse_cost(token_hdr, d->token_cost);
    }
    if (d->p->route)
        d->p->route(url, c->route, sizeof c->route);

    scope_keys sk;
    keys_of(c, &sk);

    srv_dq_state *st[SRV_DQ_MAX] = {0};
    bool all = true;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->p->nq; i++) {
        const srv_dq_spec *q = &d->q[i];
        if (q->limit <= 0 || (q->only_route && strcmp(q->only_route, c->route)))
            continue;
        srv_dq_state *arr = states_of(d, sk.k[q->scope], (size_t)sk.len[q->scope]);
        if (!arr)
            continue; /* out of memory: this quota lets it through */
        srv_dq_state *s = &arr[i]; /* a key's array holds one state per quota */
        st[i] = s;
        c->v[i].applies = true;
        refresh(q, s, now_us, wall_us);
        if (!fits(q, s, cost_of(q, c))) {
            c->v[i].refused = true;
            all = false;
        }
    }
    for (size_t i = 0; i < d->p->nq; i++) {
        if (!st[i])
            continue;
        if (all)
            charge(&d->q[i], st[i], cost_of(&d->q[i], c));
        view(&d->q[i], st[i], cost_of(&d->q[i], c), wall_us, &c->v[i]);
    }
    pthread_mutex_unlock(&d->mu);

    if (all) {
        atomic_fetch_add_explicit(&d->admitted, 1, memory_order_relaxed);
        d->p->fields(c, o);
        return;
    }
    for (size_t i = 0; i < d->p->nq; i++)
        if (c->v[i].refused)
            atomic_fetch_add_explicit(&d->refused[i], 1, memory_order_relaxed);
    d->p->refuse(c, o);
    STG_ASSERT(o->status >= 400);
}

void srv_dialect_refund(srv_dialect *d, const srv_dctx *c, int64_t tokens)
{
    if (!d->p || tokens <= 0)
        return;
    scope_keys sk;
    keys_of(c, &sk);
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->p->nq; i++) {
        const srv_dq_spec *q = &d->q[i];
        if (!c->v[i].applies || q->kind != SRV_DQ_BUCKET ||
            (q->unit != SRV_DQ_OUTPUT && q->unit != SRV_DQ_TOKENS))
            continue;
        srv_dq_state *arr = states_of(d, sk.k[q->scope], (size_t)sk.len[q->scope]);
        if (!arr)
            continue;
        srv_dq_state *st = &arr[i];
        int64_t cap = q->limit * MICRO, add = tokens * MICRO;
        st->level = add >= cap - st->level ? cap : st->level + add;
        STG_ASSERT(st->level >= 0 && st->level <= cap);
    }
    pthread_mutex_unlock(&d->mu);
}

void srv_dialect_after_route(const srv_dctx *c, unsigned status, srv_dout *o)
{
    /* Only Stripe's verdict depends on the route's status. */
    if (strcmp(c->p->name, "stripe"))
        return;
    if (status >= 500 || status == 409)
        srv_dout_add(o, "Stripe-Should-Retry", "true");
    else if (status >= 400 && status != 429)
        srv_dout_add(o, "Stripe-Should-Retry", "false");
}

const char *const srv_ai_out_names[8] = {"ok",         "stream",             "stream_error",
                                          "refused",    "overloaded",         "insufficient_quota",
                                          "invalid",    "error"};

void srv_dialect_ai_count(srv_dialect *d, const char *outcome, int64_t charged, int64_t out,
                          int64_t refunded)
{
    for (size_t i = 0; i < 8; i++)
        if (!strcmp(outcome, srv_ai_out_names[i]))
            atomic_fetch_add_explicit(&d->ai_out[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->ai_tokens_charged, charged, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->ai_tokens_out, out, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->ai_tokens_refunded, refunded, memory_order_relaxed);
}

/* {"requests": {outcome: n}, "tokens_charged", "tokens_out", "tokens_refunded"} */
static json_t *ai_json(srv_dialect *d)
{
    json_t *by = json_object();
    for (size_t i = 0; by && i < 8; i++)
        if (json_object_set_new(by, srv_ai_out_names[i],
                                json_integer((json_int_t)atomic_load_explicit(
                                    &d->ai_out[i], memory_order_relaxed))) != 0) {
            json_decref(by);
            return NULL;
        }
    if (!by)
        return NULL;
    return json_pack(
        "{s:o,s:I,s:I,s:I}", "requests", by, "tokens_charged",
        (json_int_t)atomic_load_explicit(&d->ai_tokens_charged, memory_order_relaxed),
        "tokens_out", (json_int_t)atomic_load_explicit(&d->ai_tokens_out, memory_order_relaxed),
        "tokens_refunded",
        (json_int_t)atomic_load_explicit(&d->ai_tokens_refunded, memory_order_relaxed));
}

json_t *srv_dialect_json(srv_dialect *d)
{
    if (!d->p)
        return NULL;
    json_t *qs = json_array();
    for (size_t i = 0; qs && i < d->p->nq; i++) {
        const srv_dq_spec *q = &d->q[i];
        json_t *o = json_pack(
            "{s:s,s:s,s:s,s:I,s:f,s:I}", "name", q->name, "kind",
            q->kind == SRV_DQ_WINDOW ? "window" : "bucket", "unit",
            q->unit == SRV_DQ_REQUESTS ? "requests" : "tokens", "limit", (json_int_t)q->limit,
            "window_s", (double)q->window_us / 1e6, "refused",
            (json_int_t)atomic_load_explicit(&d->refused[i], memory_order_relaxed));
        if (!o || json_array_append_new(qs, o) != 0) {
            json_decref(qs);
            return NULL;
        }
    }
    if (!qs)
        return NULL;
    json_t *doc = json_pack("{s:s,s:o,s:I,s:I}", "name", d->p->name, "quotas", qs, "admitted",
                            (json_int_t)atomic_load_explicit(&d->admitted, memory_order_relaxed),
                            "token_cost", (json_int_t)d->token_cost);
    if (doc && (!strcmp(d->p->name, "openai") || !strcmp(d->p->name, "anthropic"))) {
        json_t *ai = ai_json(d);
        if (!ai || json_object_set_new(doc, "ai", ai) != 0) {
            json_decref(doc);
            return NULL;
        }
    }
    return doc;
}
