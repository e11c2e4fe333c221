/*
 * What an AI API request will cost before it is sent, per unit the server
 * meters, and what the server really charges, learned from the remaining
 * counts of its quotas: the costs a stg_quota reserves for such requests
 * (libstagger-curl's engine prices its AI API requests with it).
 *
 * The parts of a request (read from its JSON body by the caller, e.g.
 * libstagger-curl's stg_ai_cost_estimate; core reads no JSON): the
 * characters of its prompt's text, the input given as token ids, and the
 * most output tokens it asks for (max_tokens times n). A unit's estimate:
 *   input-tokens   in  = k * chars + tokens
 *   output-tokens  out = max_out
 *   tokens         max(in, out) + w * min(in, out)
 *   requests       1
 * k starts at 1/4 (OpenAI's rule of thumb: a token is about four characters
 * of English text, help.openai.com "What are tokens and how to count
 * them?") and w at 1 (the prompt plus max_tokens, as OpenAI and Azure count
 * a request at its arrival; Microsoft's Dev Proxy documents the larger of
 * the two instead: w = 0). Both are learned per unit from the server's own
 * counts, so that the estimate converges on the server's rule.
 *
 * Learning: every send is logged in order (its sequence number); an answer
 * that tells a unit's remaining count R_j after request j was counted is
 * paired with the nearest earlier send whose answer told it (R_a): the
 * server charged the sends between them, j included, R_a - R_j plus what
 * its bucket refilled meanwhile (OpenAI's and Anthropic's buckets refill
 * continuously: (limit - remaining) / reset units per second). That sum
 * against the model's sum for the same sends is one observation; a
 * normalized least-mean-squares step moves k and w towards it, the error
 * clipped to half the prediction (an answer reordered, a refill misjudged,
 * a send refused later moves the rule by a bounded step, not to it),
 * preconditioned by how sure each is beforehand (characters / 4 is a known
 * rule of thumb, whether max_tokens is added is not: an error either could
 * explain moves w, so the estimate does not drop below the charge while
 * the rule is learned) and regularized (an observation of a few tokens,
 * where the counts' own noise is a large share, moves it little).
 * Several requests between two answers are one observation of their sum,
 * so concurrency costs no correctness, only resolution.
 *
 * Invariants: k stays in [1/16, 1] tokens per character (CJK text is about
 * one), w in [0, 1]; an observation is taken only when every send between
 * its two answers is in the log, answered (a send still out may yet be
 * refused, and a refusal is not counted) and estimated (parts known),
 * both counts are of the same window (a count that grew without a refill
 * is a new window: skipped) and the bucket cannot have been full meanwhile
 * (then the refill is unknown: skipped). Memory is fixed (STG_COST_LOG
 * sends, four units): the oldest send is overwritten. Pure and
 * deterministic: time is a parameter, no I/O, no allocation after
 * stg_cost_model_new. Not thread-safe: one thread at a time (the engine
 * keeps one per host, on its own thread).
 */
#ifndef STAGGER_COST_H
#define STAGGER_COST_H

#include "common.h"
#include "hints.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Characters per token before anything is learned. */
#define STG_COST_CHARS_PER_TOKEN 4.0
/* Sends a model remembers to pair answers: two answers with more sends
 * between them teach nothing. */
#define STG_COST_LOG 64

/* What a request's body says of its cost. */
typedef struct stg_cost_parts {
    int64_t chars;   /* characters (code points) of the prompt's text, >= 0 */
    int64_t tokens;  /* input given as token ids, >= 0 */
    int64_t max_out; /* most output tokens asked, every choice: max_tokens * n;
                        0: none (embeddings, or not said) */
    uint64_t stg__reserved[3]; /* room to grow (docs/ABI.md); leave zero */
} stg_cost_parts;

/* One unit's rule as learned (for display and tests). */
typedef struct stg_cost_rule {
    double k;        /* tokens per character, 1/16..1 */
    double w;        /* share of the smaller of input and output added to the
                        larger, 0..1 (1: their sum, 0: the larger) */
    double rate;     /* the bucket's refill last seen, units/s; 0: none */
    int64_t learned; /* observations taken */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_cost_rule;

typedef struct stg_cost_model stg_cost_model;

/* A new model, every unit at its defaults (k = 1/4, w = 1). Returns NULL
 * with *err (if not NULL) STG_ENOMEM. Free with stg_cost_model_free. */
STG_API stg_cost_model *stg_cost_model_new(int *err);

/* Free the model. Accepts NULL. */
STG_API void stg_cost_model_free(stg_cost_model *m);

/* p's cost in unit ("tokens", "input-tokens", "output-tokens": as learned,
 * or the defaults for a unit not seen yet; "requests" or "": 1), rounded
 * up; -1 for any other unit (not estimated: the quota's default applies)
 * or a NULL p. m may be NULL (the defaults). */
STG_API int64_t stg_cost_estimate(const stg_cost_model *m, const char *unit,
                                  const stg_cost_parts *p);

/* A send left at now_us (p NULL: one whose cost is not estimated, which
 * keeps the answers around it from teaching anything). Returns its
 * sequence number (> 0), for stg_cost_answer / stg_cost_uncounted; every
 * send to the server must be told, in the order they leave. */
STG_API int64_t stg_cost_sent(stg_cost_model *m, const stg_cost_parts *p, int64_t now_us);

/* Send seq never reached the server (it failed before: connect, DNS, TLS). */
STG_API void stg_cost_uncounted(stg_cost_model *m, int64_t seq);

/* Send seq's answer came at now_us with the quotas q[0..n) it announced
 * (may be NULL/0; as stg_hints_feed fills them). counted false: a refusal
 * (429, 529), which the server did not count. Learns from every token
 * unit of q whose remaining count it tells. */
STG_API void stg_cost_answer(stg_cost_model *m, int64_t seq, bool counted,
                             const stg_quota_obs *q, size_t n, int64_t now_us);

/* The rule learned for unit into *out. Returns STG_OK, STG_ENOTFOUND (no
 * answer told this unit yet) or STG_EINVAL. */
STG_API int stg_cost_rule_get(const stg_cost_model *m, const char *unit, stg_cost_rule *out);

#ifdef __cplusplus
}
#endif
#endif
