/*
 * The fingerprint of a job set: SHA-256 (FIPS 180-4) over its non-secret
 * description. A database remembers the fingerprint of the job set it was
 * made for; a run with another job set is refused, so a database can never
 * mix the state of two batches.
 *
 * What goes in, per job and in order, each field as an 8-byte length then
 * its bytes (so no two different job sets serialise alike): key, method,
 * URL (the redacted one when the URL carries a secret), each header (just
 * the name for secret ones), body, idempotency key; then the job count.
 * Secrets never go in: a hash of a short token could be brute-forced from
 * the database, and rotating a token must not turn a batch into "another
 * job set".
 *
 * The same hash is computed whole (stg__job_set_fingerprint) or one job at a
 * time (begin, job, end) by the streaming import, which never holds the
 * set: both go through stg__fingerprint_job, so they cannot drift apart.
 *
 * Built with libcrypto (STG_HAVE_LIBCRYPTO), SHA-256 is OpenSSL's (the
 * SHA extensions where the CPU has them): this file's portable rounds were
 * a tenth of the import's CPU, 10 ms of a 50 000-line input before the
 * first request. The digest is the same either way (FIPS 180-4; the test
 * vectors of test_store_input.c), so a database made by one build is the
 * same job set to the other.
 */
#include <stdio.h>
#include <string.h>

#ifdef STG_HAVE_LIBCRYPTO
/* SHA256_Init/Update/Final, which OpenSSL 3 marks deprecated for EVP: the
 * EVP context is allocated, and stg_sha256 lives on the caller's stack
 * without a free. */
#define OPENSSL_API_COMPAT 10101
#include <openssl/sha.h>
#endif

#include "store/store.h"

#ifdef STG_HAVE_LIBCRYPTO
_Static_assert(sizeof(SHA256_CTX) <= sizeof(((stg_sha256 *)0)->u.ctx),
               "stg_sha256 holds a SHA256_CTX");

void stg__sha256_init(stg_sha256 *c)
{
    SHA256_Init((SHA256_CTX *)c->u.ctx);
}

void stg__sha256_update(stg_sha256 *c, const void *data, size_t len)
{
    SHA256_Update((SHA256_CTX *)c->u.ctx, data, len);
}

void stg__sha256_final(stg_sha256 *c, unsigned char out[32])
{
    SHA256_Final(out, (SHA256_CTX *)c->u.ctx);
}
#else

static const uint32_t k256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void block(stg_sha256 *c, const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->u.p.h[0], b = c->u.p.h[1], cc = c->u.p.h[2], d = c->u.p.h[3];
    uint32_t e = c->u.p.h[4], f = c->u.p.h[5], g = c->u.p.h[6], h = c->u.p.h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = h + s1 + ch + k256[i] + w[i];
        uint32_t s0 = ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22);
        uint32_t maj = (a & b) ^ (a & cc) ^ (b & cc);
        uint32_t t2 = s0 + maj;
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = cc;
        cc = b;
        b = a;
        a = t1 + t2;
    }
    c->u.p.h[0] += a, c->u.p.h[1] += b, c->u.p.h[2] += cc, c->u.p.h[3] += d;
    c->u.p.h[4] += e, c->u.p.h[5] += f, c->u.p.h[6] += g, c->u.p.h[7] += h;
}

void stg__sha256_init(stg_sha256 *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->u.p.h, iv, sizeof iv);
    c->u.p.len = 0;
    c->u.p.used = 0;
}

void stg__sha256_update(stg_sha256 *c, const void *data, size_t len)
{
    const unsigned char *p = data;
    c->u.p.len += len;
    while (len > 0) {
        size_t n = 64 - c->u.p.used;
        if (n > len)
            n = len;
        memcpy(c->u.p.buf + c->u.p.used, p, n);
        c->u.p.used += n;
        p += n;
        len -= n;
        if (c->u.p.used == 64) {
            block(c, c->u.p.buf);
            c->u.p.used = 0;
        }
    }
}

void stg__sha256_final(stg_sha256 *c, unsigned char out[32])
{
    uint64_t bits = c->u.p.len * 8;
    unsigned char pad = 0x80;
    stg__sha256_update(c, &pad, 1);
    unsigned char zero = 0;
    while (c->u.p.used != 56)
        stg__sha256_update(c, &zero, 1);
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
    stg__sha256_update(c, lenb, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(c->u.p.h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(c->u.p.h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->u.p.h[i] >> 8);
        out[4 * i + 3] = (unsigned char)c->u.p.h[i];
    }
}

#endif /* STG_HAVE_LIBCRYPTO */

static void field(stg_sha256 *c, const void *p, size_t len)
{
    unsigned char lenb[8];
    uint64_t l = p ? len : UINT64_MAX; /* NULL differs from "" */
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)(l >> (56 - 8 * i));
    stg__sha256_update(c, lenb, 8);
    if (p && len)
        stg__sha256_update(c, p, len);
}

static void sfield(stg_sha256 *c, const char *s)
{
    field(c, s, s ? strlen(s) : 0);
}

void stg__fingerprint_begin(stg_sha256 *c)
{
    stg__sha256_init(c);
    sfield(c, "stagger-batch-jobset-1");
}

void stg__fingerprint_job(stg_sha256 *c, const stg_job_spec *j)
{
    sfield(c, j->key);
    sfield(c, j->method);
    sfield(c, j->url_secret ? j->url_redacted : j->url);
    char nh[32];
    snprintf(nh, sizeof nh, "%zu", j->n_headers);
    sfield(c, nh);
    for (size_t h = 0; h < j->n_headers; h++) {
        const char *hd = j->headers[h];
        const char *colon = strchr(hd, ':');
        size_t name_len = colon ? (size_t)(colon - hd) : strlen(hd);
        if (stg__store_header_is_secret(hd, name_len))
            field(c, hd, name_len);
        else
            sfield(c, hd);
    }
    field(c, j->body, j->body_len);
    sfield(c, j->idempotency_key);
}

void stg__fingerprint_end(stg_sha256 *c, size_t n_jobs, char hex[65])
{
    char count[32];
    snprintf(count, sizeof count, "%zu", n_jobs);
    sfield(c, count);
    unsigned char d[32];
    stg__sha256_final(c, d);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

void stg__job_set_fingerprint(stg_job_set *set)
{
    stg_sha256 c;
    stg__fingerprint_begin(&c);
    for (size_t i = 0; i < set->n; i++)
        stg__fingerprint_job(&c, &set->jobs[i]);
    stg__fingerprint_end(&c, set->n, set->fingerprint);
}
