/*
 * The retry decision (rules in policy.h), the policy's defaults and presets,
 * and the small value types it uses (methods, status sets, modes).
 *
 * Invariants of stg_decide(): it never returns a RETRY whose wait is
 * negative, starts before a Retry-After (HONOR, EXACT), or ends after the
 * overall deadline; it never retries on a wait too large to represent
 * (HONOR, EXACT), nor against a server's "do not retry"; a verdict "retry"
 * never makes an unsafe method safe (a refusal does: 429, 529, a rate-limit
 * 403, unless no_retry_refusals); it draws from the RNG at most once and
 * only on RETRY.
 * The computed backoff of a THROTTLE answer is drawn from the throttle
 * base, that of a TRANSIENT fault from backoff.base_us; both share the
 * backoff's kind, multiplier and cap, so the cap bounds either.
 */
#include <math.h>
#include <string.h>

#include <stagger/policy.h>

#include "util/assert.h"
/* ---- methods ---------------------------------------------------------- */

static const char *const method_names[] = {
    "UNKNOWN", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH", "CONNECT",
};
#define N_METHODS (sizeof method_names / sizeof method_names[0])

stg_method stg_method_parse(const char *name)
{
    if (name)
        for (size_t i = 1; i < N_METHODS; i++)
            if (!strcmp(name, method_names[i]))
                return (stg_method)i;
    return STG_METHOD_UNKNOWN;
}

const char *stg_method_name(stg_method m)
{
    return (unsigned)m < N_METHODS ? method_names[m] : "UNKNOWN";
}

const char *stg_net_error_name(stg_net_error e)
{
    static const char *const names[] = {"none", "connect_refused", "reset", "timeout",
                                        "connect_timeout", "dns", "tls", "other"};
    return (unsigned)e < sizeof names / sizeof names[0] ? names[e] : "other";
}

/* ---- status sets ------------------------------------------------------ */

#define STATUS_MAX 639

void stg_status_set_clear(stg_status_set *s)
{
    memset(s, 0, sizeof *s);
}

void stg_status_set_add(stg_status_set *s, int status)
{
    if (status >= 0 && status <= STATUS_MAX)
        s->bits[status / 64] |= UINT64_C(1) << (status % 64);
}

bool stg_status_set_has(const stg_status_set *s, int status)
{
    if (status < 0 || status > STATUS_MAX)
        return false;
    return (s->bits[status / 64] >> (status % 64)) & 1;
}

bool stg_status_set_empty(const stg_status_set *s)
{
    for (size_t i = 0; i < sizeof s->bits / sizeof s->bits[0]; i++)
        if (s->bits[i])
            return false;
    return true;
}

void stg_status_set_default(stg_status_set *s)
{
    static const int codes[] = {408, 429, 500, 502, 503, 504, 529};
    stg_status_set_clear(s);
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        stg_status_set_add(s, codes[i]);
}

/* A status 100..599 of exactly three digits in [p, end). */
static bool parse_status(const char *p, const char *end, int *out)
{
    if (end - p != 3)
        return false;
    int v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
    }
    if (v < 100 || v > 599)
        return false;
    *out = v;
    return true;
}

static bool parse_status_item(stg_status_set *s, const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (end - p == 3 && (p[1] == 'x' || p[1] == 'X') && (p[2] == 'x' || p[2] == 'X') &&
        p[0] >= '1' && p[0] <= '5') {
        int first = (p[0] - '0') * 100;
        for (int c = first; c < first + 100; c++)
            stg_status_set_add(s, c);
        return true;
    }
    const char *dash = memchr(p, '-', (size_t)(end - p));
    int a, b;
    if (dash) {
        if (!parse_status(p, dash, &a) || !parse_status(dash + 1, end, &b) || a > b)
            return false;
    } else {
        if (!parse_status(p, end, &a))
            return false;
        b = a;
    }
    for (int c = a; c <= b; c++)
        stg_status_set_add(s, c);
    return true;
}

int stg_status_set_parse(stg_status_set *s, const char *text)
{
    stg_status_set_clear(s);
    if (!text || !*text)
        return STG_EPARSE;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if (!parse_status_item(s, p, end)) {
            stg_status_set_clear(s);
            return STG_EPARSE;
        }
        if (!comma)
            return STG_OK;
        p = comma + 1;
    }
}

/* ---- modes, reasons --------------------------------------------------- */

/* The Retry-After modes' names, by value: what _name prints and _parse
 * reads (which takes "honour" too). */
static const char *const ra_mode_names[] = {
    [STG_RETRY_AFTER_HONOR] = "honor",
    [STG_RETRY_AFTER_EXACT] = "exact",
    [STG_RETRY_AFTER_CAP] = "cap",
    [STG_RETRY_AFTER_IGNORE] = "ignore",
};
#define N_RA_MODES (sizeof ra_mode_names / sizeof ra_mode_names[0])

const char *stg_retry_after_mode_name(stg_retry_after_mode m)
{
    return (unsigned)m < N_RA_MODES ? ra_mode_names[m] : "unknown";
}

int stg_retry_after_mode_parse(const char *text, stg_retry_after_mode *m)
{
    if (!text)
        return STG_EPARSE;
    if (!strcmp(text, "honour")) {
        *m = STG_RETRY_AFTER_HONOR;
        return STG_OK;
    }
    for (size_t i = 0; i < N_RA_MODES; i++)
        if (!strcmp(text, ra_mode_names[i])) {
            *m = (stg_retry_after_mode)i;
            return STG_OK;
        }
    return STG_EPARSE;
}

/* The reasons' rows of STG_REASON_MAP: their snake names and messages. */
static const struct {
    stg_reason r;
    const char *name, *message;
} reasons[] = {
#define STG__REASON_ROW(name, num, snake, msg) {STG_REASON_##name, snake, msg},
    STG_REASON_MAP(STG__REASON_ROW)
#undef STG__REASON_ROW
};

/* r's row, or -1 for a value no reason has. */
static int reason_row(stg_reason r)
{
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].r == r)
            return (int)i;
    return -1;
}

const char *stg_reason_name(stg_reason r)
{
    int i = reason_row(r);
    return i < 0 ? "unknown" : reasons[i].name;
}

const char *stg_reason_message(stg_reason r)
{
    int i = reason_row(r);
    return i < 0 ? "unknown reason" : reasons[i].message;
}

const char *stg_action_name(stg_action a)
{
    switch (a) {
    case STG_ACTION_SUCCESS: return "success";
    case STG_ACTION_RETRY: return "retry";
    case STG_ACTION_GIVE_UP: return "give_up";
    }
    return "unknown";
}

/* ---- fault classes ---------------------------------------------------- */

stg_fault_class stg_fault_classify(int status, stg_net_error error, const stg_hints *h)
{
    if (error != STG_NET_NONE)
        return STG_FAULT_TRANSIENT;
    if (status == 429 || status == 529)
        return STG_FAULT_THROTTLE;
    if (status >= 500 && h && (h->flags & STG_HINTS_THROTTLE))
        return STG_FAULT_THROTTLE; /* Anthropic overloaded_error on a 5xx */
    int64_t wait;
    if (status == 503 && h && stg_hints_server_wait(h, &wait))
        return STG_FAULT_THROTTLE;
    return STG_FAULT_TRANSIENT;
}

const char *stg_fault_class_name(stg_fault_class c)
{
    return c == STG_FAULT_THROTTLE ? "throttle" : "transient";
}

/* ---- policy defaults and presets ------------------------------------- */

int stg_policy_resolve(const stg_policy *in, stg_policy *out)
{
    stg_policy p;
    if (in)
        p = *in;
    else
        memset(&p, 0, sizeof p);
    if (p.throttle_base_us < 0)
        return STG_EINVAL;
    /* A caller that chose one base (before the split existed) keeps it for
     * both classes; the zero policy gets the split. */
    if (p.throttle_base_us == 0)
        p.throttle_base_us =
            p.backoff.base_us > 0 ? p.backoff.base_us : STG_POLICY_DEFAULT_THROTTLE_BASE_US;
    if (p.backoff.base_us == 0)
        p.backoff.base_us = STG_POLICY_DEFAULT_TRANSIENT_BASE_US;
    if (stg_backoff_resolve(&p.backoff, &p.backoff) != STG_OK)
        return STG_EINVAL;
    if (p.max_attempts < 0)
        return STG_EINVAL;
    if (p.max_attempts == 0)
        p.max_attempts = STG_POLICY_DEFAULT_MAX_ATTEMPTS;
    if (p.deadline_us == 0)
        p.deadline_us = STG_POLICY_DEFAULT_DEADLINE_US;
    else if (p.deadline_us < 0)
        p.deadline_us = -1;
    if (p.max_server_wait_us == 0)
        p.max_server_wait_us = STG_POLICY_DEFAULT_MAX_SERVER_WAIT_US;
    else if (p.max_server_wait_us < 0)
        p.max_server_wait_us = -1;
    if ((unsigned)p.retry_after_mode > STG_RETRY_AFTER_IGNORE)
        return STG_EINVAL;
    if (p.honor_spread == 0)
        p.honor_spread = STG_POLICY_DEFAULT_HONOR_SPREAD;
    if (!(p.honor_spread >= 0) || !isfinite(p.honor_spread))
        return STG_EINVAL;
    if (stg_status_set_empty(&p.retry_statuses))
        stg_status_set_default(&p.retry_statuses);
    if (p.retry_errors == 0)
        p.retry_errors = STG_NET_DEFAULT_RETRY;
    if (p.retry_methods == 0)
        p.retry_methods = STG_METHODS_IDEMPOTENT;
    if (p.key_methods == 0)
        p.key_methods = STG_METHODS_WITH_KEY;
    if (p.connect_timeout_us < 0 || p.attempt_timeout_us < 0 || p.first_byte_timeout_us < 0 ||
        p.idle_timeout_us < 0)
        return STG_EINVAL;
    if (p.connect_timeout_us == 0)
        p.connect_timeout_us = STG_POLICY_DEFAULT_CONNECT_TIMEOUT_US;
    /* attempt_timeout_us 0 stays 0: no total time (policy.h). */
    if (p.first_byte_timeout_us == 0)
        p.first_byte_timeout_us = STG_POLICY_DEFAULT_FIRST_BYTE_TIMEOUT_US;
    if (p.idle_timeout_us == 0)
        p.idle_timeout_us = STG_POLICY_DEFAULT_IDLE_TIMEOUT_US;
    *out = p;
    return STG_OK;
}

static const char *const preset_names[] = {"default", "full-jitter", "bounded", "batch",
                                           "decorrelated", NULL};

static const char *const preset_descriptions[] = {
    "full jitter, base 50 ms after a transient fault and 1 s after a throttle, x2, cap 30 s, "
    "6 attempts, 60 s deadline, Retry-After honoured with a spread, 30 s max server wait",
    "full jitter, base 200 ms transient / 1 s throttle, x2, cap 30 s, 6 attempts (the herd "
    "experiment's client)",
    "2 retries, base 1 s transient / 1 s throttle, cap 8 s, +0..20% jitter, GET/HEAD only, "
    "429/503 only, 30 s max server wait, 10 s per attempt",
    "base 50 ms transient / 1 s throttle, x2, cap 30 s, +-20% jitter, 6 retries, 429 and 5xx, "
    "5 s connect, 5 min to the first byte, 2 min idle, 5 min deadline",
    "decorrelated jitter, base 1 s transient / 1 s throttle, cap 60 s, 5 retries, "
    "10 min deadline",
};

const char *const *stg_policy_preset_names(void)
{
    return preset_names;
}

const char *stg_policy_preset_describe(const char *name)
{
    for (size_t i = 0; name && preset_names[i]; i++)
        if (!strcmp(name, preset_names[i]))
            return preset_descriptions[i];
    return NULL;
}

int stg_policy_preset(stg_policy *p, const char *name)
{
    stg_policy q;
    memset(&q, 0, sizeof q);
    if (!name)
        return STG_ENOTFOUND;
    if (!strcmp(name, "default")) {
        /* The zero policy is the default. */
    } else if (!strcmp(name, "full-jitter")) {
        q.backoff.kind = STG_BACKOFF_FULL;
        q.backoff.base_us = STG_MS(200);
        q.throttle_base_us = STG_SEC(1);
    } else if (!strcmp(name, "bounded")) {
        q.backoff.kind = STG_BACKOFF_PROPORTIONAL;
        q.backoff.base_us = STG_SEC(1);
        q.backoff.cap_us = STG_SEC(8);
        q.backoff.jitter_lo = 0.0;
        q.backoff.jitter_hi = 0.2;
        q.max_attempts = 3;
        q.retry_methods = STG_METHOD_BIT(STG_METHOD_GET) | STG_METHOD_BIT(STG_METHOD_HEAD);
        stg_status_set_add(&q.retry_statuses, 429);
        stg_status_set_add(&q.retry_statuses, 503);
        q.max_server_wait_us = STG_SEC(30);
        q.attempt_timeout_us = STG_POLICY_DEFAULT_ATTEMPT_TIMEOUT_US;
        q.throttle_base_us = STG_SEC(1);
    } else if (!strcmp(name, "batch")) {
        q.backoff.kind = STG_BACKOFF_PROPORTIONAL;
        q.backoff.base_us = STG_MS(50);
        q.throttle_base_us = STG_SEC(1);
        q.backoff.multiplier = 2.0;
        q.backoff.cap_us = STG_SEC(30);
        q.backoff.jitter_lo = -0.2;
        q.backoff.jitter_hi = 0.2;
        q.max_attempts = 7;
        stg_status_set_parse(&q.retry_statuses, "429,5xx");
        q.connect_timeout_us = STG_SEC(5);
        q.deadline_us = STG_SEC(300);
    } else if (!strcmp(name, "decorrelated")) {
        q.backoff.kind = STG_BACKOFF_DECORRELATED;
        q.backoff.base_us = STG_SEC(1);
        q.backoff.cap_us = STG_SEC(60);
        q.throttle_base_us = STG_SEC(1);
        q.max_attempts = 6;
        q.deadline_us = STG_SEC(600);
    } else {
        return STG_ENOTFOUND;
    }
    *p = q;
    return STG_OK;
}

/* ---- the decision ----------------------------------------------------- */

static int64_t sat_add(int64_t a, int64_t b)
{
    return (b > 0 && a > INT64_MAX - b) ? INT64_MAX : a + b;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void give_up(stg_decision *out, stg_reason why)
{
    out->action = STG_ACTION_GIVE_UP;
    out->reason = why;
    out->wait_us = out->wait_min_us = out->wait_max_us = 0;
}

/* The request provably never reached the server: repeating it cannot
 * repeat a side effect, whatever the method. */
static bool never_sent(stg_net_error e)
{
    return e == STG_NET_CONNECT_REFUSED || e == STG_NET_CONNECT_TIMEOUT || e == STG_NET_DNS;
}

/* A 403 that a rate limiter sent (defined below). */
static bool forbidden_throttle(const stg_hints *h);

/* The server refused the request without doing its work (policy.h rule
 * 4): a 429, a 403 that is a rate limit, a 529. Not a 503: a gateway may
 * send one after the origin processed the request. */
bool stg_status_refused(int status, const stg_hints *h)
{
    if (status == 429 || status == 529)
        return true;
    if (status >= 500 && status <= 599 && h && (h->flags & STG_HINTS_THROTTLE))
        return true; /* Anthropic overloaded_error on a 500 or 503 */
    return status == 403 && forbidden_throttle(h);
}

static bool refused(const stg_outcome *o)
{
    return o->error == STG_NET_NONE && stg_status_refused(o->status, o->hints);
}

static bool method_may_repeat(const stg_policy *p, const stg_outcome *o)
{
    unsigned bit = STG_METHOD_BIT(o->method);
    if (o->method == STG_METHOD_UNKNOWN)
        bit = 0;
    if (p->retry_methods & bit)
        return true;
    if (o->has_idempotency_key && (p->key_methods & bit))
        return true;
    if (!p->no_retry_refusals && refused(o))
        return true;
    return never_sent(o->error);
}

/* A 403 that a rate limiter sent, not an authorization check: it asks for a
 * wait (Retry-After), says a quota is spent (GitHub's primary limit), or
 * was flagged a secondary limit by a caller that read the body. */
static bool forbidden_throttle(const stg_hints *h)
{
    if (!h)
        return false;
    return h->retry_after_us >= 0 || h->remaining == 0 || (h->oversized & STG_HINT_RETRY_AFTER) ||
           (h->flags & STG_HINTS_SECONDARY);
}

bool stg_status_throttled(int status, const stg_hints *h)
{
    if (status == 429 || status == 529)
        return true;
    if (status >= 500 && h && (h->flags & STG_HINTS_THROTTLE))
        return true;
    if (status == 503)
        return h && ((h->seen & STG_HINT_RETRY_AFTER) ||
                     ((h->seen & STG_HINT_BODY) && h->retry_after_us >= 0));
    return status == 403 && forbidden_throttle(h);
}

/* A GitHub secondary rate limit, whose wait no header gives: GitHub says
 * to wait at least a minute. */
static bool secondary_limit(const stg_outcome *o)
{
    const stg_hints *h = o->hints;
    if (!h || (o->status != 403 && o->status != 429) || h->retry_after_us >= 0 ||
        h->remaining == 0)
        return false;
    if (h->flags & STG_HINTS_SECONDARY)
        return true;
    return o->status == 429 && (h->dialects & (1u << STG_DIALECT_GITHUB));
}

/* Steps 1-5 of the rules: may this outcome be retried at all? Returns false
 * after filling *out when it may not. */
static bool classify(const stg_policy *p, const stg_retry_state *st, const stg_outcome *o,
                     stg_decision *out, stg_reason *why_retry)
{
    if (o->cancelled) {
        give_up(out, STG_REASON_CANCELLED);
        return false;
    }
    if (o->error == STG_NET_NONE) {
        if (o->status >= 100 && o->status < 400) {
            out->action = STG_ACTION_SUCCESS;
            out->reason = STG_REASON_SUCCESS;
            return false;
        }
        int verdict = o->hints ? o->hints->verdict : STG_VERDICT_NONE;
        int as = o->status == 403 && forbidden_throttle(o->hints) ? 429 : o->status;
        if (verdict == STG_VERDICT_STOP) {
            give_up(out, STG_REASON_SERVER_VERDICT);
            return false;
        }
        if (o->hints && (o->hints->flags & STG_HINTS_HARD_STOP)) {
            give_up(out, STG_REASON_HARD_STOP); /* billing, a per-day quota: no wait cures it */
            return false;
        }
        if (verdict != STG_VERDICT_RETRY && !stg_status_set_has(&p->retry_statuses, as)) {
            give_up(out, STG_REASON_STATUS_NOT_RETRYABLE);
            return false;
        }
        *why_retry = STG_REASON_RETRY_STATUS;
    } else {
        if ((unsigned)o->error >= 32 || !(p->retry_errors & STG_NET_BIT(o->error))) {
            give_up(out, STG_REASON_ERROR_NOT_RETRYABLE);
            return false;
        }
        *why_retry = STG_REASON_RETRY_ERROR;
    }
    if (!method_may_repeat(p, o)) {
        give_up(out, STG_REASON_METHOD_NOT_IDEMPOTENT);
        return false;
    }
    if (st->attempts >= p->max_attempts) {
        give_up(out, STG_REASON_ATTEMPTS_EXHAUSTED);
        return false;
    }
    return true;
}

int stg_decide(const stg_policy *policy, const stg_retry_state *state,
               const stg_outcome *outcome, int64_t now_us, stg_rng *rng, stg_decision *out)
{
    if (!out)
        return STG_EINVAL;
    memset(out, 0, sizeof *out);
    out->server_wait_us = STG_UNKNOWN;
    stg_policy p;
    if (!policy || !state || !outcome || !rng || state->attempts < 1 ||
        stg_policy_resolve(policy, &p) != STG_OK) {
        give_up(out, STG_REASON_ATTEMPTS_EXHAUSTED);
        return STG_EINVAL;
    }

    stg_reason why_retry;
    if (!classify(&p, state, outcome, out, &why_retry))
        return STG_OK;

    int64_t hint = STG_UNKNOWN;
    bool has_hint = outcome->hints && stg_hints_server_wait(outcome->hints, &hint);
    if (outcome->error == STG_NET_NONE && secondary_limit(outcome)) {
        has_hint = true;
        hint = STG_SECONDARY_LIMIT_WAIT_US;
    }
    if (has_hint)
        out->server_wait_us = hint;

    int64_t remaining = INT64_MAX;
    if (p.deadline_us > 0) {
        remaining = sat_add(state->start_us, p.deadline_us) - now_us;
        if (remaining <= 0) {
            give_up(out, STG_REASON_DEADLINE);
            return STG_OK;
        }
    }

    /* The backoff of this class: the policy's shape from the class's base
     * (policy.h rule 6), never above the cap. */
    stg_backoff_config bc = p.backoff;
    if (stg_fault_classify(outcome->status, outcome->error, outcome->hints) ==
        STG_FAULT_THROTTLE)
        bc.base_us = min64(p.throttle_base_us, bc.cap_us);
    STG_ASSERT(bc.base_us > 0 && bc.base_us <= bc.cap_us);

    int n = state->attempts - 1; /* index of the retry being planned */
    int64_t lo, hi;
    stg_backoff_bounds(&bc, n, state->prev_wait_us, &lo, &hi);
    int64_t wait;
    bool draw_in_range = false; /* draw uniformly from [lo, hi] after clamping */

    if (has_hint &&
        (p.retry_after_mode == STG_RETRY_AFTER_HONOR || p.retry_after_mode == STG_RETRY_AFTER_EXACT)) {
        /* A wait too large to represent never ends: no limit lets it. */
        if ((p.max_server_wait_us >= 0 && hint > p.max_server_wait_us) || hint > remaining ||
            hint >= STG_WAIT_MAX_US) {
            give_up(out, STG_REASON_SERVER_WAIT_TOO_LONG);
            return STG_OK;
        }
        lo = hi = hint;
        if (p.retry_after_mode == STG_RETRY_AFTER_HONOR) {
            double s = (double)hint * p.honor_spread;
            int64_t spread = s >= 9.2e18 ? INT64_MAX : (int64_t)s;
            if (spread < p.backoff.base_us)
                spread = p.backoff.base_us;
            hi = sat_add(hint, spread);
            draw_in_range = true;
        }
        wait = hint;
        out->used_hint = true;
    } else {
        if (lo < remaining && hi > remaining) {
            /* The range crosses the deadline: draw from the part that ends
             * by it. Clamping the draw instead would pile every wait that
             * fell past the deadline onto the deadline itself, where the
             * next attempt has no time left to succeed. */
            hi = remaining;
            wait = stg_rng_range(rng, lo, hi);
        } else {
            wait = stg_backoff_delay(&bc, n, state->prev_wait_us, rng);
        }
        if (has_hint && p.retry_after_mode == STG_RETRY_AFTER_CAP) {
            out->used_hint = wait > hint;
            wait = min64(wait, hint);
            lo = min64(lo, hint);
            hi = min64(hi, hint);
        }
    }

    if (lo > remaining) {
        give_up(out, STG_REASON_DEADLINE);
        return STG_OK;
    }
    hi = min64(hi, remaining);
    if (draw_in_range)
        wait = stg_rng_range(rng, lo, hi);
    wait = min64(wait, remaining);
    /* The invariants of the file header. */
    STG_ASSERT(wait >= 0 && wait <= remaining);
    STG_ASSERT(!out->used_hint || p.retry_after_mode == STG_RETRY_AFTER_CAP || wait >= hint);

    out->action = STG_ACTION_RETRY;
    out->reason = why_retry;
    out->wait_us = wait;
    out->wait_min_us = lo;
    out->wait_max_us = hi;
    return STG_OK;
}

void stg_retry_state_note(stg_retry_state *state, const stg_decision *d)
{
    if (d->action == STG_ACTION_RETRY)
        state->prev_wait_us = d->wait_us;
}
