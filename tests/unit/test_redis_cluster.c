/*
 * Redis Cluster helpers (src/redis/cluster.c): hash slots as Redis computes
 * them (values from CLUSTER KEYSLOT of Redis 7.0) and the parsing of MOVED,
 * ASK, TRYAGAIN and CLUSTERDOWN replies, malformed ones included.
 */
#include <string.h>

#include "cmocka_all.h"

#include "redis/cluster.h"

static int slot(const char *k)
{
    return stg__cluster_slot(k, strlen(k));
}

static void test_slots(void **state)
{
    (void)state;
    assert_int_equal(slot("123456789"), 0x31C3 & 16383); /* CRC16-XMODEM check value */
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("{cq}"), 12495);
    assert_int_equal(slot("stagger:q:{cq}:jobs"), slot("cq"));
    assert_int_equal(slot("{user1000}.following"), slot("{user1000}.followers"));
    assert_int_equal(slot("foo{}{bar}"), slot("foo{}{bar}")); /* empty tag: the whole key */
    assert_int_not_equal(slot("foo{}{bar}"), slot("bar"));
    assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
    assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
    assert_int_equal(slot(""), 0);
}

static stg__redirect parse(const char *err, int *sl, char *host, int *port)
{
    redisReply r = {.type = REDIS_REPLY_ERROR, .str = (char *)err, .len = strlen(err)};
    return stg__cluster_redirect(&r, sl, host, 64, port);
}

static void test_redirects(void **state)
{
    (void)state;
    int sl = -1, port = -1;
    char host[64];
    assert_int_equal(parse("MOVED 3999 127.0.0.1:6381", &sl, host, &port), STG__REDIRECT_MOVED);
    assert_int_equal(sl, 3999);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6381);
    assert_int_equal(parse("ASK 12495 [::1]:7000", &sl, host, &port), STG__REDIRECT_ASK);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7000);
    assert_int_equal(parse("MOVED 1 :7001", &sl, host, &port), STG__REDIRECT_MOVED);
    assert_string_equal(host, "");
    assert_int_equal(parse("TRYAGAIN Multiple keys request during rehashing of slot", &sl, host,
                           &port),
                     STG__REDIRECT_RETRY);
    assert_int_equal(parse("CLUSTERDOWN The cluster is down", &sl, host, &port),
                     STG__REDIRECT_RETRY);
    /* Malformed or other errors: not a redirection. */
    assert_int_equal(parse("MOVED", &sl, host, &port), STG__REDIRECT_NONE);
    assert_int_equal(parse("MOVED 16384 h:1", &sl, host, &port), STG__REDIRECT_NONE);
    assert_int_equal(parse("MOVED -1 h:1", &sl, host, &port), STG__REDIRECT_NONE);
    assert_int_equal(parse("MOVED 1 h:0", &sl, host, &port), STG__REDIRECT_NONE);
    assert_int_equal(parse("MOVED 1 h:70000", &sl, host, &port), STG__REDIRECT_NONE);
    assert_int_equal(parse("MOVED 1 h", &sl, host, &port), STG__REDIRECT_NONE);
    assert_int_equal(parse("MOVED x h:1", &sl, host, &port), STG__REDIRECT_NONE);
    char lng[400] = "MOVED 1 ";
    memset(lng + 8, 'h', 300);
    strcpy(lng + 308, ":1");
    assert_int_equal(parse(lng, &sl, host, &port), STG__REDIRECT_NONE);
    assert_int_equal(parse("NOSCRIPT No matching script", &sl, host, &port), STG__REDIRECT_NONE);
    redisReply ok = {.type = REDIS_REPLY_STATUS, .str = (char *)"MOVED 1 h:1", .len = 11};
    assert_int_equal(stg__cluster_redirect(&ok, &sl, host, 64, &port), STG__REDIRECT_NONE);
    assert_int_equal(stg__cluster_redirect(NULL, &sl, host, 64, &port), STG__REDIRECT_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots),
        cmocka_unit_test(test_redirects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
