/*
 * Redis Cluster helpers (see cluster.h): the key's hash slot and the
 * parsing of redirections. Input is an error reply from the server: every
 * length is checked before a copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/cluster.h"

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, as Redis's crc16.c. */
static unsigned crc16(const char *buf, size_t len)
{
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)buf[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

int stg__cluster_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(open + 1, '}', len - from);
        if (close && close > open + 1)
            return (int)(crc16(open + 1, (size_t)(close - open - 1)) & (STG__CLUSTER_SLOTS - 1));
    }
    return (int)(crc16(key, len) & (STG__CLUSTER_SLOTS - 1));
}

stg__redirect stg__cluster_redirect(const redisReply *r, int *slot, char *host, size_t hlen,
                                    int *port)
{
    if (!r || r->type != REDIS_REPLY_ERROR || !r->str)
        return STG__REDIRECT_NONE;
    const char *s = r->str;
    size_t n = r->len;
    if ((n >= 8 && !memcmp(s, "TRYAGAIN", 8)) || (n >= 11 && !memcmp(s, "CLUSTERDOWN", 11)))
        return STG__REDIRECT_RETRY;
    stg__redirect kind;
    size_t off;
    if (n > 6 && !memcmp(s, "MOVED ", 6)) {
        kind = STG__REDIRECT_MOVED;
        off = 6;
    } else if (n > 4 && !memcmp(s, "ASK ", 4)) {
        kind = STG__REDIRECT_ASK;
        off = 4;
    } else {
        return STG__REDIRECT_NONE;
    }
    /* "<slot> <host>:<port>", the host possibly empty (the node answering)
     * or an IPv6 address (with or without brackets: the last ':' splits). */
    char buf[320];
    if (n - off >= sizeof buf)
        return STG__REDIRECT_NONE;
    memcpy(buf, s + off, n - off);
    buf[n - off] = '\0';
    char *sp = strchr(buf, ' ');
    if (!sp)
        return STG__REDIRECT_NONE;
    *sp = '\0';
    char *end;
    long sl = strtol(buf, &end, 10);
    if (*end || end == buf || sl < 0 || sl >= STG__CLUSTER_SLOTS)
        return STG__REDIRECT_NONE;
    char *hp = sp + 1;
    char *colon = strrchr(hp, ':');
    if (!colon)
        return STG__REDIRECT_NONE;
    *colon = '\0';
    long pt = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || pt < 1 || pt > 65535)
        return STG__REDIRECT_NONE;
    size_t hl = strlen(hp);
    if (hl >= 2 && hp[0] == '[' && hp[hl - 1] == ']') {
        hp[hl - 1] = '\0';
        hp++;
        hl -= 2;
    }
    if (hl >= hlen)
        return STG__REDIRECT_NONE; /* hl 0: the host we asked (Redis 7's unknown endpoint) */
    memcpy(host, hp, hl + 1);
    *slot = (int)sl;
    *port = (int)pt;
    return kind;
}
