/*
 * The writer's WAL hook: the autocheckpoint (every 4000 pages, 16 MB of
 * WAL, as PRAGMA wal_autocheckpoint=4000 did) and the WAL's write-back,
 * started early by a helper thread.
 *
 * Why: in WAL mode with synchronous=NORMAL a commit is a write() into the
 * page cache (what a killed process cannot lose) and only a checkpoint
 * syncs. That sync then waits for every page written since the last one
 * (16 MB: 10-20 ms on the test machine, in the middle of the runner's
 * loop, while no request is sent). Every 1 MiB of WAL the hook wakes a
 * thread that asks the kernel to start writing the WAL out
 * (sync_file_range SYNC_FILE_RANGE_WRITE: submits the write-back, does not
 * wait for it); the checkpoint's fdatasync then has little left to wait
 * for. The submission itself costs about what the sync would, so it is
 * done off the runner's thread.
 *
 * Invariants:
 *  - Durability is SQLite's, unchanged: the thread only starts write-back
 *    earlier (never later, never instead of a sync); the checkpoint is
 *    SQLite's own PASSIVE one, at the same WAL size as before, on the
 *    connection's thread. The helper never touches the connection.
 *  - Our descriptor of the -wal file is read-only and holds no lock (SQLite
 *    locks the database and -shm files, never the WAL), so closing it
 *    cannot drop a lock of SQLite's; it is closed after sqlite3_close, once
 *    the helper has been joined.
 *  - Without sync_file_range (not Linux), or when the thread or the
 *    descriptor cannot be had, the hook only checkpoints.
 *  - Like the SQLite connection itself, a store must not be used across a
 *    fork(): the child has no helper thread to join.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "store/internal.h"

#define AUTOCHECKPOINT_FRAMES 4000
#define KICK_FRAMES 256 /* 1 MiB of 4 KiB pages */

struct stg__walsync {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    bool want, stop;
};

static void *helper(void *arg)
{
    struct stg__walsync *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->want && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop)
            break;
        w->want = false;
        pthread_mutex_unlock(&w->mu);
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
        (void)sync_file_range(w->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The helper, started on first use: NULL when it cannot be had. */
static struct stg__walsync *helper_get(stg_store *s)
{
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    if (s->walsync || s->wal_fd_failed)
        return s->walsync;
    s->wal_fd_failed = true; /* until it works */
    char wal[4096];
    if ((size_t)snprintf(wal, sizeof wal, "%s-wal", s->path) >= sizeof wal)
        return NULL;
    struct stg__walsync *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if ((w->fd = open(wal, O_RDONLY | O_CLOEXEC)) < 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, helper, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        close(w->fd);
        free(w);
        return NULL;
    }
    s->wal_fd_failed = false;
    s->walsync = w;
    return w;
#else
    (void)s;
    return NULL;
#endif
}

static void kick(stg_store *s, int nframe)
{
    struct stg__walsync *w = helper_get(s);
    if (w) {
        pthread_mutex_lock(&w->mu);
        w->want = true;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    s->wal_kicked = nframe;
}

static int wal_hook(void *arg, sqlite3 *db, const char *name, int nframe)
{
    stg_store *s = arg;
    if (nframe < s->wal_kicked)
        s->wal_kicked = 0; /* the WAL restarted after a checkpoint */
    if (nframe >= AUTOCHECKPOINT_FRAMES) {
        (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        return SQLITE_OK; /* a checkpoint that could not finish is tried again */
    }
    if (nframe - s->wal_kicked >= KICK_FRAMES)
        kick(s, nframe);
    return SQLITE_OK;
}

void stg__store_walsync_install(stg_store *s)
{
    sqlite3_wal_hook(s->db, wal_hook, s); /* replaces the autocheckpoint's hook */
}

void stg__store_walsync_close(stg_store *s)
{
    struct stg__walsync *w = s->walsync;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    close(w->fd);
    free(w);
    s->walsync = NULL;
}
