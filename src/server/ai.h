/*
 * The LLM APIs of the openai and anthropic personas (`stagger serve
 * --dialect openai|anthropic`): the request bodies they take, how they
 * count a request's tokens at arrival, and the answers they give (JSON
 * with a `usage` object, or a stream of server-sent events in the
 * vendor's format, usage in its last events), their errors and their
 * overloads. The quotas themselves are the persona engine's (dialect.h);
 * this file only says what a request costs and what is answered.
 *
 * Routes: POST .../chat/completions, .../responses, .../completions and
 * .../embeddings (openai: Chat Completions, Responses, the legacy
 * Completions, Embeddings) and POST .../v1/messages (anthropic:
 * Messages); every other path of these personas is answered as before.
 *
 * Counting (what the sources say each vendor meters; docs/stagger-serve.1):
 *  - input tokens: ceil(characters / 4) of the prompt's text (the messages'
 *    string contents and text parts, Anthropic's system prompt, the
 *    Responses input and instructions, a Completions prompt, the
 *    Embeddings input), characters being Unicode code points: OpenAI's
 *    documented rule of thumb, since neither API tokenizes before it
 *    admits;
 *  - OpenAI: max_completion_tokens, else max_tokens (Responses:
 *    max_output_tokens), else --ai-default-max-tokens (Completions: 16,
 *    its documented default), times n (Embeddings: no output); the tokens
 *    quota is charged the prompt estimate plus that at arrival (or the
 *    larger of the two with --ai-count max), and nothing is given back;
 *  - Anthropic: input-tokens is charged the prompt estimate, output-tokens
 *    max_tokens (required), tokens both, at arrival; when the answer is
 *    made, the output it did not use is given back to output-tokens and
 *    tokens ("adjusted at the end of the request", docs.claude.com
 *    rate-limits).
 *
 * Invariants: pure functions of the request and the configuration (no
 * clock, no state: ids and times are parameters), so an answer can be
 * produced under the idempotency lock and replayed; every body is valid
 * JSON, or SSE whose every data line is valid JSON (or OpenAI's [DONE]);
 * an answer's usage says exactly the tokens the log records.
 */
#ifndef STAGGER_SERVER_AI_H
#define STAGGER_SERVER_AI_H

#include <stdbool.h>
#include <stdint.h>

#include "server/idem.h"
#include "server/server.h"

/* The API endpoint a request is for. */
typedef enum srv_ai_api {
    SRV_AI_NONE = 0,
    SRV_AI_OPENAI = 1,             /* Chat Completions */
    SRV_AI_ANTHROPIC = 2,          /* Messages */
    SRV_AI_OPENAI_RESPONSES = 3,   /* Responses */
    SRV_AI_OPENAI_COMPLETIONS = 4, /* (legacy) Completions */
    SRV_AI_OPENAI_EMBEDDINGS = 5   /* Embeddings: no output */
} srv_ai_api;

/* What one API request asks for, as its body says. */
typedef struct srv_ai_req {
    srv_ai_api api;     /* NONE: not an API route */
    bool valid;         /* the body is a request of the API's shape */
    char error[160];    /* !valid: what is wrong (the 400's message) */
    bool stream;        /* "stream": true */
    bool include_usage; /* OpenAI stream_options.include_usage */
    int64_t n;          /* OpenAI choices (1) */
    int64_t in;         /* input tokens estimated from the prompt */
    int64_t max_out;    /* output tokens asked for at most (all choices) */
    int64_t out;        /* output tokens the answer produces (all choices) */
    char model[64];
} srv_ai_req;

/* The API of a request to persona (its name) with method and url (no
 * query), or SRV_AI_NONE. */
srv_ai_api srv_ai_route(const char *persona, const char *method, const char *url);

/* Read body[0..len) as a request of api into r (r->valid says whether it
 * is one). Needs cfg's AI settings. */
void srv_ai_parse(srv_ai_api api, const char *body, size_t len, const stg_srv_config *cfg,
                  srv_ai_req *r);

/* Tokens charged at arrival to the persona's total "tokens" quota: OpenAI
 * in + max_out (or the larger with cfg->ai_count_max), Anthropic in +
 * max_out. */
int64_t srv_ai_total(const srv_ai_req *r, const stg_srv_config *cfg);

/* The answer to an admitted request: 200 with the completion (JSON), or
 * the stream (SSE: *ctype "text/event-stream"); with stream_error a stream
 * fails at its first event (Anthropic: event: error, overloaded_error;
 * OpenAI: data: {"error": ...}). id_seed and wall_s make the ids and
 * "created". out->body is malloc'd; *ctype is static. */
void srv_ai_answer(const srv_ai_req *r, bool stream_error, uint64_t id_seed, int64_t wall_s,
                   srv_answer *out, const char **ctype);

typedef enum srv_ai_error {
    SRV_AI_INVALID,    /* 400 invalid_request_error (r->error) */
    SRV_AI_OVERLOADED, /* Anthropic 529 overloaded_error; OpenAI 503 server_error */
    SRV_AI_BILLING     /* OpenAI 429 insufficient_quota; Anthropic 400 credit balance */
} srv_ai_error;

/* A refusal of api in the vendor's shape: status and body (malloc'd). */
void srv_ai_refusal(srv_ai_api api, srv_ai_error kind, const char *msg, srv_answer *out);

#endif
