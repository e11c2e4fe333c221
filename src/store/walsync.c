/*
 * The writer's WAL hook: the autocheckpoint (every 4000 pages, 16 MB of
 * WAL, as PRAGMA wal_autocheckpoint=4000 did), the WAL's write-back
 * started early, and checkpoints done ahead by a helper thread.
 *
 * Why: in WAL mode with synchronous=NORMAL a commit is a write() into the
 * page cache (what a killed process cannot lose) and only a checkpoint
 * syncs. That sync then waits for every page written since the last one
 * (16 MB: 10-20 ms on the test machine, in the middle of the runner's
 * loop, while no request is sent), and the checkpoint at close (a clean
 * exit is on disk) waits for the whole WAL of a short batch: sync the
 * WAL, copy every page into the database, sync it, a third of the time
 * from the last answer to the exit. So a helper thread does two things
 * off the runner's thread (the runner is CPU-bound on one core):
 *  - every 1 MiB of WAL it asks the kernel to start writing the WAL out
 *    (sync_file_range SYNC_FILE_RANGE_WRITE: submits, does not wait);
 *  - every 4 MiB of WAL (AHEAD_FRAMES) it runs a PASSIVE checkpoint on a
 *    connection of its own: it syncs the WAL, copies the frames committed
 *    so far into the database and syncs that. The checkpoint the runner's
 *    thread still does (at 4000 frames, and at close) then has only the
 *    frames since the last one to sync and copy;
 *  - when the writer's work is over (stg__store_walsync_catch_up: the
 *    final report of a run, report.c), it checkpoints everything
 *    committed while the report reads, so the close finds the WAL copied
 *    and synced already and only removes it.
 *
 * Invariants:
 *  - Durability is SQLite's, unchanged: the helper only syncs earlier and
 *    more often (never later, never instead of a sync). Its checkpoint is
 *    SQLite's own PASSIVE one (it takes SQLite's checkpointer lock, copies
 *    only frames no reader still needs, syncs the WAL before and the
 *    database after, like any other connection's), and the connection's
 *    thread still checkpoints at 4000 frames and at close exactly as
 *    before: a checkpoint finds what the helper copied already and syncs
 *    only what is left. So "a clean close is on disk" and "a kill at any
 *    instant loses no commit" hold as they did.
 *  - The helper never touches the runner's connection. Its own connection
 *    is opened, used and closed on the helper's thread only (NOMUTEX, like
 *    the runner's), and closed before the runner's connection is
 *    (stg__store_walsync_stop): the runner's close must be the last one,
 *    the one that checkpoints and removes the WAL.
 *  - Our descriptor of the -wal file is read-only and holds no lock (SQLite
 *    locks the database and -shm files, never the WAL), so closing it
 *    cannot drop a lock of SQLite's; it is closed after sqlite3_close, once
 *    the helper has been joined.
 *  - Without sync_file_range (not Linux), or when the thread or the
 *    descriptor cannot be had, the hook only checkpoints, on the
 *    connection's thread, as before; a helper connection that cannot be
 *    opened only leaves the checkpoints there.
 *  - After its checkpoint the helper starts the write-back of the database
 *    file too, through the store's runner-lock descriptor (schema.c): a
 *    descriptor the store holds anyway and closes only after sqlite3_close
 *    and the join, so no descriptor of the database is ever closed under
 *    SQLite's POSIX locks. A store without it (no exclusive lock) skips
 *    that; the close's sync then writes those pages itself.
 *  - Like the SQLite connection itself, a store must not be used across a
 *    fork(): the child has no helper thread to join.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/internal.h"

#define AUTOCHECKPOINT_FRAMES 4000
#define KICK_FRAMES 256   /* 1 MiB of 4 KiB pages */
#define AHEAD_FRAMES 1024 /* 4 MiB: the helper's checkpoint */

struct stg__walsync {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    int db_fd;   /* the store's runner lock, a descriptor of the database
                    file (-1: none); the store's, closed after the join */
    char *path;  /* the database, for the helper's connection */
    sqlite3 *db; /* the helper's connection (its thread only) */
    bool db_failed;
    bool want, want_ckpt, stop;
};

/* The helper's connection: opened on first use, NULL when it cannot be. */
static sqlite3 *helper_db(struct stg__walsync *w)
{
    if (w->db || w->db_failed)
        return w->db;
    w->db_failed = true;
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(w->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        /* the runner's sync level (a checkpoint syncs as its connection
         * says), and a read, which opens the WAL for the checkpoint */
        sqlite3_exec(db, "PRAGMA synchronous=NORMAL; SELECT 1 FROM sqlite_master LIMIT 1",
                     NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    w->db_failed = false;
    return w->db = db;
}

static void helper_checkpoint(struct stg__walsync *w)
{
    sqlite3 *db = helper_db(w);
    /* BUSY (the runner's thread is checkpointing) or a failure: the
     * runner's own checkpoints are still there, as before */
    if (!db ||
        sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL) != SQLITE_OK)
        return;
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    /* the pages it copied: their write-back started, as the WAL's */
    if (w->db_fd >= 0)
        (void)sync_file_range(w->db_fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
}

static void *helper(void *arg)
{
    struct stg__walsync *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->want && !w->want_ckpt && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop)
            break;
        bool ckpt = w->want_ckpt;
        w->want = w->want_ckpt = false;
        pthread_mutex_unlock(&w->mu);
        if (ckpt)
            helper_checkpoint(w); /* syncs the WAL itself */
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
        else
            (void)sync_file_range(w->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    sqlite3_close(w->db); /* before the runner's close (top of the file) */
    w->db = NULL;
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
    w->db_fd = s->lock_fd;
    if (!(w->path = strdup(s->path))) {
        free(w);
        return NULL;
    }
    if ((w->fd = open(wal, O_RDONLY | O_CLOEXEC)) < 0) {
        free(w->path);
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, helper, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        close(w->fd);
        free(w->path);
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

/* Wake the helper: a write-back, or (ckpt) a checkpoint ahead. */
static void kick(stg_store *s, int nframe, bool ckpt)
{
    struct stg__walsync *w = helper_get(s);
    if (w) {
        pthread_mutex_lock(&w->mu);
        w->want = true;
        w->want_ckpt = w->want_ckpt || ckpt;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    s->wal_kicked = nframe;
    if (ckpt)
        s->wal_ahead = nframe;
}

static int wal_hook(void *arg, sqlite3 *db, const char *name, int nframe)
{
    stg_store *s = arg;
    if (nframe < s->wal_kicked)
        s->wal_kicked = s->wal_ahead = 0; /* the WAL restarted after a checkpoint */
    if (nframe >= AUTOCHECKPOINT_FRAMES) {
        (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        return SQLITE_OK; /* a checkpoint that could not finish is tried again */
    }
    if (nframe - s->wal_kicked >= KICK_FRAMES)
        kick(s, nframe, nframe - s->wal_ahead >= AHEAD_FRAMES);
    return SQLITE_OK;
}

void stg__store_walsync_install(stg_store *s)
{
    sqlite3_wal_hook(s->db, wal_hook, s); /* replaces the autocheckpoint's hook */
}

void stg__store_walsync_catch_up(stg_store *s)
{
    struct stg__walsync *w = helper_get(s);
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->want_ckpt = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void stg__store_walsync_stop(stg_store *s)
{
    struct stg__walsync *w = s->walsync;
    if (!w || w->stop)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL); /* its connection is closed */
}

void stg__store_walsync_close(stg_store *s)
{
    struct stg__walsync *w = s->walsync;
    if (!w)
        return;
    stg__store_walsync_stop(s);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    close(w->fd);
    free(w->path);
    free(w);
    s->walsync = NULL;
}
