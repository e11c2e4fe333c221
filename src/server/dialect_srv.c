/*
 * The server's side of the personas and the early-retry counter: setting
 * them up with the server, their parts of the stats document, and the
 * line printed at exit. (Kept here so server.c only calls in.)
 *
 * Invariants: srv_extras_destroy is safe after a partial srv_extras_init
 * and on a zeroed server; the stats document always has "early_retries"
 * (a polite run shows 0, not an absent key) and has "dialect" only with
 * --dialect.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>

#include "server/internal.h"

int srv_extras_init(stg_srv *s, char *err, size_t errlen)
{
    if (srv_early_init(&s->early) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->early_ok = true;
    return srv_dialect_init(&s->dialect, &s->cfg, err, errlen);
}

void srv_extras_destroy(stg_srv *s)
{
    srv_dialect_destroy(&s->dialect);
    if (s->early_ok)
        srv_early_destroy(&s->early);
    s->early_ok = false;
}

int srv_extras_json(stg_srv *s, json_t *doc)
{
    if (!s->early_ok)
        return 0;
    json_t *e = srv_early_json(&s->early);
    if (!e || json_object_set_new(doc, "early_retries", e) != 0)
        return -1;
    /* The log's t_us are monotonic since start; window quotas are aligned
     * to the wall clock: this maps one onto the other. */
    int64_t start_wall = srv_wall_us() - (srv_mono_us() - s->start_us);
    if (json_object_set_new(doc, "start_wall_us", json_integer(start_wall)) != 0)
        return -1;
    if (s->dialect.p) {
        json_t *d = srv_dialect_json(&s->dialect);
        if (!d || json_object_set_new(doc, "dialect", d) != 0)
            return -1;
    }
    return 0;
}

void srv_extras_print(stg_srv *s)
{
    if (s->early_ok)
        srv_early_print(&s->early, stderr);
}

void srv_client_id(struct MHD_Connection *c, bool by_addr, char *buf, size_t n)
{
    const char *id =
        by_addr ? NULL : MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Client-Id");
    if (id && *id) {
        snprintf(buf, n, "%s", id);
        return;
    }
    snprintf(buf, n, "?");
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    char a[INET6_ADDRSTRLEN] = "";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, a, sizeof a);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, a,
                  sizeof a);
    if (*a)
        snprintf(buf, n, "%s", a);
}

void srv_dout_apply(const srv_dout *o, struct MHD_Response *resp)
{
    for (size_t i = 0; i < o->nh; i++)
        MHD_add_response_header(resp, o->h[i].name, o->h[i].value);
}

int64_t srv_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
