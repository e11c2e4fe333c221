/*
 * Early-retry counting (see early.h).
 *
 * Invariants: a value slot of `told` holds a malloc'd int64_t (the told
 * instant; 0 once cleared), written only under its shard lock; the JSON
 * object per_client is touched only under mu, so a snapshot is consistent.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "server/early.h"

int srv_early_init(srv_early *e)
{
    atomic_init(&e->total, 0);
    atomic_init(&e->tracked, 0);
    e->per_client = json_object();
    if (!e->per_client)
        return -1;
    if (pthread_mutex_init(&e->mu, NULL) != 0) {
        json_decref(e->per_client);
        return -1;
    }
    if (srv_map_init(&e->told, free) != 0) {
        pthread_mutex_destroy(&e->mu);
        json_decref(e->per_client);
        return -1;
    }
    return 0;
}

void srv_early_destroy(srv_early *e)
{
    srv_map_destroy(&e->told);
    pthread_mutex_destroy(&e->mu);
    json_decref(e->per_client);
}

/* Find or insert the told entry of (client, method, url), keyed by the
 * three joined by unit separators, and return with its shard locked, as
 * srv_map_acquire; false (nothing locked) when out of memory. */
static bool told_acquire(srv_early *e, const char *client, const char *method, const char *url,
                         srv_map_ref *ref)
{
    size_t lc = strlen(client), lm = strlen(method), lu = strlen(url);
    char *k = malloc(lc + lm + lu + 3);
    if (!k)
        return false;
    memcpy(k, client, lc);
    k[lc] = '\x1f';
    memcpy(k + lc + 1, method, lm);
    k[lc + 1 + lm] = '\x1f';
    memcpy(k + lc + 2 + lm, url, lu + 1);
    bool ok = srv_map_acquire(&e->told, k, lc + lm + lu + 2, ref); /* copies the key */
    free(k);
    return ok;
}

bool srv_early_arrive(srv_early *e, const char *client, const char *method, const char *url,
                      int64_t wall_us)
{
    srv_map_ref ref;
    int64_t told = 0;
    if (!told_acquire(e, client, method, url, &ref))
        return false;
    if (*ref.value)
        told = *(int64_t *)*ref.value;
    srv_map_release(&ref);
    if (told <= 0)
        return false;
    atomic_fetch_add_explicit(&e->tracked, 1, memory_order_relaxed);
    if (wall_us >= told)
        return false;
    atomic_fetch_add_explicit(&e->total, 1, memory_order_relaxed);
    pthread_mutex_lock(&e->mu);
    json_t *n = json_object_get(e->per_client, client);
    json_object_set_new(e->per_client, client,
                        json_integer(n ? json_integer_value(n) + 1 : 1));
    pthread_mutex_unlock(&e->mu);
    return true;
}

void srv_early_answer(srv_early *e, const char *client, const char *method, const char *url,
                      int64_t told_wall_us)
{
    srv_map_ref ref;
    if (!told_acquire(e, client, method, url, &ref))
        return;
    if (!*ref.value && told_wall_us > 0)
        *ref.value = calloc(1, sizeof(int64_t));
    if (*ref.value)
        *(int64_t *)*ref.value = told_wall_us > 0 ? told_wall_us : 0;
    srv_map_release(&ref);
}

json_t *srv_early_json(srv_early *e)
{
    pthread_mutex_lock(&e->mu);
    json_t *by = json_deep_copy(e->per_client);
    pthread_mutex_unlock(&e->mu);
    if (!by)
        return NULL;
    return json_pack("{s:I,s:o,s:I}", "total",
                     (json_int_t)atomic_load_explicit(&e->total, memory_order_relaxed),
                     "by_client", by, "checked",
                     (json_int_t)atomic_load_explicit(&e->tracked, memory_order_relaxed));
}

void srv_early_print(srv_early *e, FILE *f)
{
    pthread_mutex_lock(&e->mu);
    fprintf(f, "stagger serve: early retries: %" PRIu64,
            (uint64_t)atomic_load_explicit(&e->total, memory_order_relaxed));
    const char *name;
    json_t *v;
    const char *sep = " (";
    json_object_foreach(e->per_client, name, v) {
        fprintf(f, "%s%s: %" PRId64, sep, name, (int64_t)json_integer_value(v));
        sep = ", ";
    }
    fprintf(f, "%s\n", *sep == ',' ? ")" : "");
    pthread_mutex_unlock(&e->mu);
}
