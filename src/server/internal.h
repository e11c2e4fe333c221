/*
 * The server object shared by the files of src/server: configuration (an
 * owned copy), clock origin, daemon and the state of each concern. Only
 * server.c creates and destroys it; handler.c runs the request pipeline.
 *
 * Invariants: every field except the concerns' own synchronised state is
 * written before the daemon starts and read-only while it runs; start_us is
 * the CLOCK_MONOTONIC origin of every "since start" time (log, stats,
 * outage windows).
 */
#ifndef STAGGER_SERVER_INTERNAL_H
#define STAGGER_SERVER_INTERNAL_H

#include <microhttpd.h>
#include <jansson.h>

#include "server/capacity.h"
#include "server/clients.h"
#include "server/dialect.h"
#include "server/early.h"
#include "server/faults.h"
#include "server/idem.h"
#include "server/limit.h"
#include "server/park.h"
#include "server/reqlog.h"
#include "server/server.h"
#include "server/stats.h"
#include "server/tls.h"

struct stg_srv {
    stg_srv_config cfg; /* strings point at the copies below */
    char *bind_copy, *log_copy, *stats_copy;
    int64_t start_us;
    struct MHD_Daemon *mhd;
    unsigned port;
    srv_stats stats;
    srv_limit limit;
    srv_dialect dialect; /* --dialect (dialect.h) */
    srv_early early;     /* early retries (early.h) */
    bool early_ok;
    srv_faults faults;
    srv_clients clients;
    srv_idem idem;
    srv_reqlog log;
    srv_park park;
    srv_tls tls;
    srv_capacity cap;
    _Atomic uint64_t conns_opened; /* connections accepted (/__stats) */
};

/* MHD callbacks (handler.c); cls is the stg_srv. */
enum MHD_Result srv_on_request(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_size, void **con_cls);
void srv_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe);

/* The stats document (/__stats and --stats): counters plus the limit in
 * force and the connections open now. New reference, NULL when out of
 * memory (server.c). */
json_t *srv_stats_document(stg_srv *s);

/* Personas and early retries (dialect_srv.c): set up after the limiter
 * (-1 with a message in err), torn down by destroy (safe when partial),
 * their keys added to the stats document (-1 when out of memory), and the
 * early-retry line printed on stderr at stop. */
int srv_extras_init(stg_srv *s, char *err, size_t errlen);
void srv_extras_destroy(stg_srv *s);
int srv_extras_json(stg_srv *s, json_t *doc);
void srv_extras_print(stg_srv *s);
/* The early-retry client of a connection: its X-Client-Id (unless by_addr),
 * else the peer's IP address (no port), else "?"; truncated to fit n. */
void srv_client_id(struct MHD_Connection *c, bool by_addr, char *buf, size_t n);
/* Add a persona's collected fields to a response. */
void srv_dout_apply(const srv_dout *o, struct MHD_Response *resp);
/* CLOCK_REALTIME in microseconds. */
int64_t srv_wall_us(void);

#endif
