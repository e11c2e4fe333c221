/*
 * The AI request cost model (include/stagger/cost.h): the estimate per
 * unit, the log of sends, and the learning of each unit's rule from the
 * remaining counts of its quota.
 *
 * Why a normalized LMS step on a clipped error, and not a least-squares
 * fit: it is bounded in memory and time per answer, it has no matrix to
 * go singular when every request looks alike, it tracks a rule that
 * changes, and one bad observation (reordered answers, a refill misjudged)
 * moves the rule by a bounded share instead of to a wrong value. The
 * parameters are scaled alike (k as a multiple of its default) so that
 * one step weighs both by their effect on the prediction, in tokens.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/cost.h>
#include <stagger/quota.h>

#include "util/assert.h"

/* Units learned per model, and sends remembered for pairing answers. */
#define UNITS 4
#define LOG STG_COST_LOG

typedef enum unit_kind { OTHER = 0, REQUESTS, INPUT, OUTPUT, TOTAL } unit_kind;

/* One unit's rule, learned. */
typedef struct rule {
    char unit[STG_QUOTA_UNIT_LEN]; /* "": a free slot */
    double k;                      /* tokens per character */
    double w;                      /* share of the smaller part added */
    double rate;                   /* the bucket's refill, units/s; 0: none seen */
    int64_t learned;               /* observations taken */
} rule;

typedef struct send {
    int64_t seq; /* 0: a free slot */
    int64_t at_us;
    stg_cost_parts parts;
    bool estimated; /* parts known; else its cost is unknown here */
    bool uncounted; /* the server did not count it (refused, never reached) */
    bool answered;  /* its answer (or its failure) came */
    int64_t rem[UNITS]; /* per rule: the count its answer told; -1 */
} send;

struct stg_cost_model {
    rule rule[UNITS];
    send log[LOG]; /* send seq at log[seq % LOG] */
    int64_t next_seq;
};

#define K0 (1.0 / STG_COST_CHARS_PER_TOKEN)
#define K_MIN (1.0 / 16.0)
#define K_MAX 1.0
#define STEP 0.5   /* share of the error one observation corrects */
#define CLIP 0.5   /* the error taken is at most this share of the prediction */
/* The counts' own noise, in tokens (a refill timed by our clock, not the
 * server's; counts rounded): the step's denominator has its square added,
 * so that an observation of a few tokens, where that noise is a large
 * share, moves the rule little (regularized NLMS). */
#define NOISE 64.0
#define VAR_U 0.04 /* k within about 20% of characters / 4 */
#define VAR_W 1.0  /* w anywhere in [0, 1] */

static unit_kind kind_of(const char *unit)
{
    if (!unit || !unit[0] || !strcmp(unit, "requests"))
        return REQUESTS;
    if (!strcmp(unit, "tokens"))
        return TOTAL;
    if (!strcmp(unit, "input-tokens"))
        return INPUT;
    if (!strcmp(unit, "output-tokens"))
        return OUTPUT;
    return OTHER;
}

static void rule_defaults(rule *r)
{
    r->k = K0;
    r->w = 1.0;
    r->rate = 0;
    r->learned = 0;
}

stg_cost_model *stg_cost_model_new(int *err)
{
    stg_cost_model *m = calloc(1, sizeof *m);
    if (!m) {
        if (err)
            *err = STG_ENOMEM;
        return NULL;
    }
    for (int i = 0; i < UNITS; i++)
        rule_defaults(&m->rule[i]);
    m->next_seq = 1;
    return m;
}

void stg_cost_model_free(stg_cost_model *m)
{
    free(m);
}

static int rule_index(const stg_cost_model *m, const char *unit)
{
    for (int i = 0; i < UNITS; i++)
        if (m->rule[i].unit[0] && !strncmp(m->rule[i].unit, unit, STG_QUOTA_UNIT_LEN))
            return i;
    return -1;
}

static const rule *rule_of(const stg_cost_model *m, const char *unit)
{
    int i = unit ? rule_index(m, unit) : -1;
    return i < 0 ? NULL : &m->rule[i];
}

int stg_cost_rule_get(const stg_cost_model *m, const char *unit, stg_cost_rule *out)
{
    if (!m || !unit || !out)
        return STG_EINVAL;
    const rule *r = rule_of(m, unit);
    if (!r)
        return STG_ENOTFOUND;
    memset(out, 0, sizeof *out);
    out->k = r->k;
    out->w = r->w;
    out->rate = r->rate;
    out->learned = r->learned;
    return STG_OK;
}

/* The rule of unit, made on first sight (NULL: every slot taken). */
static int rule_get(stg_cost_model *m, const char *unit)
{
    int i = rule_index(m, unit);
    if (i >= 0)
        return i;
    for (i = 0; i < UNITS; i++)
        if (!m->rule[i].unit[0]) {
            size_t len = strnlen(unit, STG_QUOTA_UNIT_LEN - 1);
            memcpy(m->rule[i].unit, unit, len);
            m->rule[i].unit[len] = 0;
            rule_defaults(&m->rule[i]);
            return i;
        }
    return -1;
}

/* f of one request under rule r, and its derivatives by k and w. */
static double predict(const rule *r, unit_kind kind, const stg_cost_parts *p,
                      double *dk, double *dw)
{
    double in = r->k * (double)p->chars + (double)p->tokens, out = (double)p->max_out;
    *dk = *dw = 0;
    switch (kind) {
    case INPUT:
        *dk = (double)p->chars;
        return in;
    case OUTPUT:
        return out;
    case TOTAL:
        if (in >= out) {
            *dk = (double)p->chars;
            *dw = out;
            return in + r->w * out;
        }
        *dk = r->w * (double)p->chars;
        *dw = in;
        return out + r->w * in;
    default:
        return 1.0;
    }
}

int64_t stg_cost_estimate(const stg_cost_model *m, const char *unit, const stg_cost_parts *p)
{
    unit_kind kind = kind_of(unit);
    if (kind == OTHER || !p)
        return -1;
    if (kind == REQUESTS)
        return 1;
    rule dflt;
    memset(&dflt, 0, sizeof dflt);
    rule_defaults(&dflt);
    const rule *r = m ? rule_of(m, unit) : NULL;
    double dk, dw, f = predict(r ? r : &dflt, kind, p, &dk, &dw);
    if (!(f > 0))
        return 0;
    if (f > 1e15)
        return INT64_C(1000000000000000);
    return (int64_t)ceil(f - 1e-9);
}

int64_t stg_cost_sent(stg_cost_model *m, const stg_cost_parts *p, int64_t now_us)
{
    int64_t seq = m->next_seq++;
    send *s = &m->log[seq % LOG];
    memset(s, 0, sizeof *s);
    s->seq = seq;
    s->at_us = now_us;
    if (p) {
        s->parts = *p;
        s->estimated = true;
    }
    for (int i = 0; i < UNITS; i++)
        s->rem[i] = -1;
    return seq;
}

static send *send_of(stg_cost_model *m, int64_t seq)
{
    if (seq <= 0)
        return NULL;
    send *s = &m->log[seq % LOG];
    return s->seq == seq ? s : NULL;
}

void stg_cost_uncounted(stg_cost_model *m, int64_t seq)
{
    send *s = send_of(m, seq);
    if (s) {
        s->uncounted = true;
        s->answered = true;
    }
}

static bool refills(int dialect)
{
    return dialect == STG_DIALECT_OPENAI || dialect == STG_DIALECT_ANTHROPIC;
}

/* Learn rule i (of kind) from send j's answer, which told remaining count
 * rem with obs o. */
static void learn(stg_cost_model *m, int i, unit_kind kind, const send *j,
                  const stg_quota_obs *o)
{
    rule *r = &m->rule[i];
    /* The nearest earlier send whose answer told this unit's count, and
     * the model's sum over the sends after it, j included. */
    double pred = 0, gk = 0, gw = 0;
    bool any = false;
    const send *a = NULL;
    for (int64_t s = j->seq; s > 0 && s > j->seq - LOG; s--) {
        const send *x = send_of(m, s);
        if (!x)
            return; /* forgotten: the span is not known whole */
        if (x != j && x->rem[i] >= 0) {
            a = x;
            break;
        }
        if (!x->answered)
            return; /* it may yet be refused: not known whether it counted */
        if (x->uncounted)
            continue;
        if (!x->estimated)
            return; /* a cost not known here */
        double dk, dw;
        pred += predict(r, kind, &x->parts, &dk, &dw);
        gk += dk;
        gw += dw;
        any = true;
    }
    if (!a || !any)
        return;
    double dt = (double)(j->at_us - a->at_us) / 1e6;
    if (dt < 0)
        dt = 0;
    double refill = refills(o->dialect) ? r->rate * dt : 0;
    if (!refills(o->dialect) && j->rem[i] > a->rem[i])
        return; /* the count grew: a new window */
    if (o->limit > 0 && (double)a->rem[i] + refill >= (double)o->limit)
        return; /* the bucket may have been full: its refill is not known */
    double y = (double)(a->rem[i] - j->rem[i]) + refill;
    if (y < 0 || !(pred > 0))
        return;
    double e = y - pred, lim = CLIP * pred;
    if (e > lim)
        e = lim;
    if (e < -lim)
        e = -lim;
    double gu = gk * K0; /* k = u * K0 */
    if (kind != TOTAL)
        gw = 0;
    /* Preconditioned by how sure each parameter is before learning:
     * characters / 4 is a known rule of thumb (VAR_U), whether max_tokens
     * is added is not (VAR_W). An error that either could explain (a
     * request whose prompt and max_tokens both count) moves mostly w, the
     * one in doubt, instead of k in proportion to the prompt's size. */
    double gg = VAR_U * gu * gu + VAR_W * gw * gw;
    if (!(gg > 0))
        return;
    gg += NOISE * NOISE * VAR_W;
    double u = r->k / K0 + STEP * e * VAR_U * gu / gg;
    double w = r->w + STEP * e * VAR_W * gw / gg;
    u = u < K_MIN / K0 ? K_MIN / K0 : u > K_MAX / K0 ? K_MAX / K0 : u;
    w = w < 0 ? 0 : w > 1 ? 1 : w;
    r->k = u * K0;
    r->w = w;
    r->learned++;
    STG_ASSERT(r->k >= K_MIN && r->k <= K_MAX && r->w >= 0 && r->w <= 1);
}

void stg_cost_answer(stg_cost_model *m, int64_t seq, bool counted, const stg_quota_obs *q,
                      size_t n, int64_t now_us)
{
    (void)now_us;
    send *j = send_of(m, seq);
    if (!j)
        return;
    j->answered = true;
    if (!counted)
        j->uncounted = true;
    for (size_t k = 0; q && k < n; k++) {
        const stg_quota_obs *o = &q[k];
        unit_kind kind = kind_of(o->unit);
        if (o->global || o->remaining < 0 ||
            (kind != TOTAL && kind != INPUT && kind != OUTPUT))
            continue;
        int i = rule_get(m, o->unit);
        if (i < 0 || j->rem[i] >= 0)
            continue; /* no room, or this unit told already (another window) */
        rule *r = &m->rule[i];
        if (refills(o->dialect) && o->limit > o->remaining && o->reset_us > 0)
            r->rate = (double)(o->limit - o->remaining) / ((double)o->reset_us / 1e6);
        j->rem[i] = o->remaining;
        if (kind != OUTPUT)
            learn(m, i, kind, j, o);
    }
}
