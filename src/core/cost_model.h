/*
 * What an AI API request will cost before it is sent, per unit the server
 * meters, and what the server really charges, learned from the remaining
 * counts of its quotas (internal to the tree: libstagger-curl's engine is
 * its one user; never installed).
 *
 * The parts of a request (read from its JSON body by src/curl/ai_cost.c;
 * core reads no JSON): the characters of its prompt's text, the input
 * given as token ids, and the most output tokens it asks for (max_tokens
 * times n). A unit's estimate:
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
 * refused, and a refusal is not counted) and estimated (parts known), both counts
 * are of the same window (a count that grew without a refill is a new
 * window: skipped) and the bucket cannot have been full meanwhile (then the
 * refill is unknown: skipped). Memory is fixed (STG__COST_LOG sends,
 * STG__COST_UNITS units): the oldest send is overwritten. Pure and
 * deterministic: time is a parameter, no I/O, no allocation. Not
 * thread-safe: one owner (the engine's thread).
 */
#ifndef STG_CORE_COST_MODEL_H
#define STG_CORE_COST_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include <stagger/hints.h>
#include <stagger/quota.h>

/* Characters per token before anything is learned. */
#define STG__COST_CHARS_PER_TOKEN 4.0
/* Units learned per model, and sends remembered for pairing answers. */
#define STG__COST_UNITS 4
#define STG__COST_LOG 64

/* What a request's body says of its cost. */
typedef struct stg__cost_parts {
    int64_t chars;   /* characters (code points) of the prompt's text */
    int64_t tokens;  /* input given as token ids */
    int64_t max_out; /* most output tokens asked, every choice: max_tokens * n;
                        0: none (embeddings, or not said) */
} stg__cost_parts;

typedef enum stg__cost_kind {
    STG__COST_OTHER = 0, /* not estimated: the quota's default applies */
    STG__COST_REQUESTS = 1,
    STG__COST_INPUT = 2,
    STG__COST_OUTPUT = 3,
    STG__COST_TOTAL = 4
} stg__cost_kind;

/* One unit's rule, learned. */
typedef struct stg__cost_rule {
    char unit[STG_QUOTA_UNIT_LEN]; /* "": a free slot */
    double k;                      /* tokens per character */
    double w;                      /* share of the smaller part added */
    double rate;                   /* the bucket's refill, units/s; 0: none seen */
    int64_t learned;               /* observations taken */
} stg__cost_rule;

typedef struct stg__cost_send {
    int64_t seq; /* 0: a free slot */
    int64_t at_us;
    stg__cost_parts parts;
    bool estimated; /* parts known; else its cost is unknown here */
    bool uncounted; /* the server did not count it (refused, never reached) */
    bool answered;  /* its answer (or its failure) came */
    int64_t rem[STG__COST_UNITS]; /* per rule: the count its answer told; -1 */
} stg__cost_send;

typedef struct stg__cost_model {
    stg__cost_rule rule[STG__COST_UNITS];
    stg__cost_send log[STG__COST_LOG]; /* send seq at log[seq % STG__COST_LOG] */
    int64_t next_seq;
} stg__cost_model;

/* The kind of a quota unit: "tokens", "input-tokens", "output-tokens",
 * "requests" (or ""), anything else OTHER. */
stg__cost_kind stg__cost_kind_of(const char *unit);

void stg__cost_model_init(stg__cost_model *m);

/* p's cost in unit at what m has learned (the defaults for a unit not
 * seen yet), rounded up; -1 for a unit not estimated (OTHER). */
int64_t stg__cost_estimate(const stg__cost_model *m, const char *unit, const stg__cost_parts *p);

/* A send left at now_us (p NULL: not an estimated one). Returns its
 * sequence number (> 0), for stg__cost_answer / stg__cost_uncounted. */
int64_t stg__cost_sent(stg__cost_model *m, const stg__cost_parts *p, int64_t now_us);

/* The server never counted send seq (it failed before reaching it). */
void stg__cost_uncounted(stg__cost_model *m, int64_t seq);

/* Send seq's answer came at now_us with quotas q[0..n) (may be NULL/0);
 * counted false: a refusal (429, 529), which the server did not count.
 * Learns from every unit of q whose remaining count it tells. */
void stg__cost_answer(stg__cost_model *m, int64_t seq, bool counted, const stg_quota_obs *q,
                      size_t n, int64_t now_us);

/* The rule learned for unit (NULL: none yet). */
const stg__cost_rule *stg__cost_rule_of(const stg__cost_model *m, const char *unit);

#endif
