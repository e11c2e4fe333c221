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

#endif
