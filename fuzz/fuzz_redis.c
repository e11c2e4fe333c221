/*
 * libFuzzer harness: the Redis URL parser (a command-line flag) and the
 * Redis Cluster helpers that read a server's error replies (MOVED/ASK
 * redirections) and hash keys into slots (src/redis/cluster.c).
 * Invariants checked: a parsed URL formats with its password masked; a
 * redirection's slot and port are in range and its host fits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/redis.h>

#include "redis/cluster.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    if (!s)
        return 0;
    stg_redis_url u;
    if (stg_redis_url_parse(s, &u, NULL) == STG_OK) {
        char buf[800];
        stg_redis_url_format(&u, buf, sizeof buf);
        /* Read back, the redacted form's password is the mask: a substring
         * test would be fooled by a user holding the password's bytes. */
        stg_redis_url back;
        if (u.password[0] && stg_redis_url_parse(buf, &back, NULL) == STG_OK &&
            strcmp(back.password, "***") != 0)
            abort(); /* the password leaked into the redacted form */
    }
    int slot = stg__cluster_slot((const char *)data, size);
    if (slot < 0 || slot >= STG__CLUSTER_SLOTS)
        abort();
    redisReply r = {.type = REDIS_REPLY_ERROR, .str = s, .len = size};
    char host[64];
    int sl = -1, port = -1;
    stg__redirect rd = stg__cluster_redirect(&r, &sl, host, sizeof host, &port);
    if ((rd == STG__REDIRECT_MOVED || rd == STG__REDIRECT_ASK) &&
        (sl < 0 || sl >= STG__CLUSTER_SLOTS || port < 1 || port > 65535 ||
         strlen(host) >= sizeof host))
        abort();
    free(s);
    return 0;
}
