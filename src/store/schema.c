/*
 * Opening a batch database: the file, the runner lock, WAL mode, the busy
 * timeout, the schema, and error messages that name the cause.
 *
 * Invariants:
 *  - A database this code writes to carries application_id "STGB" and
 *    user_version = STG_STORE_SCHEMA_VERSION; any other non-empty SQLite
 *    file is refused untouched (not ours, or newer than us).
 *  - The schema is created in one transaction: a kill during creation
 *    leaves an empty file, which the next open initialises again.
 *  - The runner lock is an flock() on the database file itself, held from
 *    open to close by `stagger batch` runs (report/export do not take it).
 *    flock and SQLite's POSIX locks are independent on Linux, and the lock
 *    fd is closed only after sqlite3_close, so SQLite's own locks are never
 *    dropped by closing another descriptor of the file.
 *  - A file this code creates is 0600 (it will hold response bodies), and
 *    every open checks the file is whole (integrity.c) before reading it.
 *  - journal_mode=WAL, synchronous=NORMAL: committed transactions survive a
 *    killed process; readers (report/export) never block the runner.
 *    (NORMAL in WAL mode syncs at checkpoints only: a power cut may lose
 *    the last commits, a killed process none.) The autocheckpoint is
 *    raised to 4000 pages (16 MB of WAL): each checkpoint syncs the WAL
 *    and the database, and a batch writes a page or more per job. It is
 *    walsync.c's WAL hook, which also starts the WAL's write-back early
 *    and has a helper thread checkpoint ahead on its own connection (so
 *    the close, still the last connection, has only the last frames to
 *    sync and copy).
 *    A database this open creates is set up (WAL mode, schema) with
 *    synchronous=OFF, then NORMAL: the switch to WAL is a rollback-journal
 *    transaction of its own, and with the WAL's first header that made
 *    six fsyncs (journal, directory, journal, database, WAL, directory),
 *    a third of a small batch's start, for a file that holds nothing yet;
 *    a power cut there leaves an empty or unreadable new file (refused
 *    on open: delete it), never a job lost. Every later transaction is
 *    under NORMAL, as before.
 *  - Group commit (stg__store_group): while a group is open, begin and
 *    commit join its one transaction; flush commits it, and any failure
 *    inside it rolls all of it back. The run counters a transaction adds
 *    are summed in memory and written once, just before its COMMIT: they
 *    are in the same transaction as the changes that counted them (a kill
 *    loses both or neither), at one UPDATE per commit instead of per job.
 *  - The writer's connection runs with ignore_check_constraints: the
 *    jobs.state CHECK (an IN list) costs SQLite an ephemeral b-tree built
 *    for every row written, about a tenth of a run's CPU. The states this
 *    code writes come from one table (stg__job_state_name; an outcome with
 *    any other state is refused before it is bound), other
 *    writers (sqlite3 by hand) still meet the CHECK, and quick_check at
 *    open (run before the pragma) still refuses a row that breaks it.
 *  - BEGIN, COMMIT and ROLLBACK are prepared once, like the hot statements.
 *  - The one index on state is partial, over the pending jobs only (the
 *    claim's "lowest pending ids"): a claim deletes one entry, an outcome
 *    touches no index, so a pass writes the jobs leaf and the run row, not
 *    also three regions of an index over every state. Counting by state
 *    reads the table (a few ms per 50 000 jobs, at start and end). A
 *    database with the old jobs_by_state index is moved to it at a
 *    writer's open (migrate_indexes).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/internal.h"
#include "util/assert.h"

static const char schema_sql[] =
    "CREATE TABLE meta(\n"
    "  key TEXT PRIMARY KEY,\n"
    "  value TEXT NOT NULL\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE jobs(\n"
    "  id INTEGER PRIMARY KEY,            -- 1-based position in the job set\n"
    "  key TEXT NOT NULL UNIQUE,          -- JSONL id, template key or line number\n"
    "  line INTEGER NOT NULL,             -- line of the input file\n"
    "  method TEXT NOT NULL,\n"
    "  url TEXT,                          -- replayable URL; NULL when it carries a secret\n"
    "  url_redacted TEXT NOT NULL,        -- for reports and exports\n"
    "  headers TEXT,                      -- JSON array of non-secret 'Name: value'\n"
    "  body BLOB,                         -- request body\n"
    "  idempotency_key TEXT,\n"
    "  needs_input INTEGER NOT NULL DEFAULT 0, -- rebuilt from the input at run time\n"
    "  replay_safe INTEGER NOT NULL DEFAULT 1, -- idempotent method or idempotency key\n"
    "  state TEXT NOT NULL DEFAULT 'pending'\n"
    "    CHECK (state IN ('pending','inflight','done','failed','deferred','review')),\n"
    "  sent INTEGER NOT NULL DEFAULT 0,   -- inflight: an attempt may have left\n"
    "  attempts INTEGER NOT NULL DEFAULT 0, -- HTTP attempts over all runs\n"
    "  runs INTEGER NOT NULL DEFAULT 0,   -- times claimed\n"
    "  run_id INTEGER,                    -- the run that last claimed it\n"
    "  last_status INTEGER,               -- last HTTP status\n"
    "  last_error TEXT,\n"
    "  reason TEXT,                       -- stg_reason name of the last outcome\n"
    "  response_file TEXT,                -- under --out\n"
    "  created_at INTEGER NOT NULL,       -- Unix ms\n"
    "  started_at INTEGER,\n"
    "  finished_at INTEGER,\n"
    "  updated_at INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX jobs_pending ON jobs(id) WHERE state = 'pending';\n"
    "CREATE TABLE responses(\n"
    "  job_id INTEGER PRIMARY KEY REFERENCES jobs(id),\n"
    "  body BLOB NOT NULL\n"
    ");\n"
    "CREATE TABLE bad_lines(\n"
    "  line INTEGER PRIMARY KEY,\n"
    "  message TEXT NOT NULL\n"
    ");\n"
    "CREATE TABLE runs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  started_at INTEGER NOT NULL,\n"
    "  wall_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  calls INTEGER NOT NULL DEFAULT 0,\n"
    "  retries INTEGER NOT NULL DEFAULT 0,\n"
    "  status_429 INTEGER NOT NULL DEFAULT 0,\n"
    "  status_503 INTEGER NOT NULL DEFAULT 0,\n"
    "  finished INTEGER NOT NULL DEFAULT 0,\n"
    "  exit_code INTEGER                  -- NULL while running or after a kill\n"
    ");\n";

int64_t stg__store_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct sqlite3 *stg__store_db(stg_store *s)
{
    return s ? s->db : NULL;
}

const char *stg__store_errmsg(const stg_store *s)
{
    return s ? s->err : "";
}

int stg__store_error(stg_store *s, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return err;
}

/* A hint for the user by SQLite's primary result code. */
static const char *hint_for(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return "the database is locked by another process; nothing was changed, try again "
               "when it is done (or raise --busy-timeout)";
    case SQLITE_READONLY:
        return "the database (or its directory, for the -wal/-shm files) is read-only";
    case SQLITE_FULL:
        return "the disk (or the database) is full; the last change was rolled back and "
               "nothing is lost: free some space and run again";
    case SQLITE_CANTOPEN:
        return "cannot open the file or create its -wal/-shm files next to it";
    case SQLITE_NOTADB:
        return "the file is not an SQLite database";
    case SQLITE_CORRUPT:
        return "the database file is damaged (corrupt); nothing was changed: restore it from "
               "a copy, or delete it to start over";
    case SQLITE_IOERR:
        return "input/output error";
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return "permission denied";
    case SQLITE_NOMEM:
        return "out of memory";
    default:
        return NULL;
    }
}

int stg__store_fail(stg_store *s, int rc, const char *what)
{
    const char *hint = hint_for(rc);
    const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    if (hint)
        snprintf(s->err, sizeof s->err, "%s: %s: %s (%s)", s->path, what, hint, msg);
    else
        snprintf(s->err, sizeof s->err, "%s: %s: %s", s->path, what, msg);
    return STG_EDB;
}

int stg__store_fail_rollback(stg_store *s, int rc, const char *what)
{
    int err = stg__store_fail(s, rc, what); /* SQLite's message, before the rollback */
    stg__store_rollback(s);
    return err;
}

int stg__store_prepare(stg_store *s, sqlite3_stmt **st, const char *sql)
{
    if (*st)
        return SQLITE_OK;
    return sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
}

/* Step a statement prepared once (BEGIN, COMMIT, ROLLBACK): no SQL parsed
 * per transaction. SQLITE_OK or the error. */
static int exec_once(stg_store *s, sqlite3_stmt **st, const char *sql)
{
    int rc = stg__store_prepare(s, st, sql);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(*st);
    sqlite3_reset(*st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int stg__store_begin(stg_store *s)
{
    if (s->group && s->group_open)
        return STG_OK;
    memset(&s->run_add, 0, sizeof s->run_add); /* none without a transaction */
    int rc = exec_once(s, &s->st_begin, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot start a transaction");
    s->group_open = s->group;
    return STG_OK;
}

/* The run counters pending in the open transaction, into their row. */
static int write_run_add(stg_store *s)
{
    if (s->run_add.run_id <= 0)
        return SQLITE_DONE;
    int rc = stg__store_prepare(s, &s->st_run_add,
                                "UPDATE runs SET calls = calls + ?2, retries = retries + ?3, "
                                "status_429 = status_429 + ?4, status_503 = status_503 + ?5, "
                                "finished = finished + ?6 WHERE id = ?1");
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_stmt *st = s->st_run_add;
    sqlite3_bind_int64(st, 1, s->run_add.run_id);
    sqlite3_bind_int64(st, 2, s->run_add.calls);
    sqlite3_bind_int64(st, 3, s->run_add.retries);
    sqlite3_bind_int64(st, 4, s->run_add.n429);
    sqlite3_bind_int64(st, 5, s->run_add.n503);
    sqlite3_bind_int64(st, 6, s->run_add.finished);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    memset(&s->run_add, 0, sizeof s->run_add);
    return rc;
}

int stg__store_run_add(stg_store *s, int64_t run_id, int calls, int retries, int n429,
                       int n503, int finished)
{
    if (run_id <= 0)
        return SQLITE_DONE;
    STG_ASSERT(!sqlite3_get_autocommit(s->db)); /* inside the change's transaction */
    if (s->run_add.run_id != run_id) {
        int rc = write_run_add(s); /* another run's: written first, same transaction */
        if (rc != SQLITE_DONE)
            return rc;
        s->run_add.run_id = run_id;
    }
    s->run_add.calls += calls;
    s->run_add.retries += retries;
    s->run_add.n429 += n429;
    s->run_add.n503 += n503;
    s->run_add.finished += finished;
    return SQLITE_DONE;
}

static int commit_now(stg_store *s)
{
    s->group_open = false;
    int rc = write_run_add(s);
    if (rc == SQLITE_DONE)
        rc = exec_once(s, &s->st_commit, "COMMIT");
    if (rc != SQLITE_OK)
        return stg__store_fail_rollback(s, rc, "cannot commit");
    s->commits++;
    return STG_OK;
}

int64_t stg__store_commits(const stg_store *s)
{
    return s ? s->commits : 0;
}

int stg__store_commit(stg_store *s)
{
    if (s->group && s->group_open)
        return STG_OK; /* stg__store_flush commits it */
    return commit_now(s);
}

void stg__store_rollback(stg_store *s)
{
    s->group_open = false;
    memset(&s->run_add, 0, sizeof s->run_add); /* rolled back with the rest */
    if (!sqlite3_get_autocommit(s->db) &&
        exec_once(s, &s->st_rollback, "ROLLBACK") != SQLITE_OK)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

void stg__store_undo_nothing(stg_store *s)
{
    if (!(s->group && s->group_open))
        stg__store_rollback(s);
}

int stg__store_flush(stg_store *s)
{
    if (!s->group_open)
        return STG_OK;
    STG_ASSERT(!sqlite3_get_autocommit(s->db));
    return commit_now(s);
}

int stg__store_group(stg_store *s, bool on)
{
    int err = on ? STG_OK : stg__store_flush(s);
    s->group = on;
    return err;
}

/* Take the runner lock, retrying until the busy timeout. */
static int take_lock(stg_store *s, bool create)
{
    int fd = open(s->path, O_RDONLY | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0)
        return stg__store_error(s, STG_EDB, "%s: cannot open: %s", s->path, strerror(errno));
    int64_t waited = 0;
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            break;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            int e = errno;
            close(fd);
            return stg__store_error(s, STG_EDB, "%s: cannot lock: %s", s->path, strerror(e));
        }
        if (waited >= s->busy_timeout_us) {
            close(fd);
            return stg__store_error(
                s, STG_EAGAIN,
                "%s: in use by another `stagger batch` run (waited %.1f s); one run per "
                "database at a time",
                s->path, (double)s->busy_timeout_us / 1e6);
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        waited += 50 * 1000;
    }
    s->lock_fd = fd;
    return STG_OK;
}

static int pragma_int(stg_store *s, const char *sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

static int create_schema(stg_store *s)
{
    int err = stg__store_begin(s);
    if (err)
        return err;
    char sql[256];
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d;",
             STG_STORE_APP_ID, STG_STORE_SCHEMA_VERSION);
    int rc = sqlite3_exec(s->db, schema_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        char ins[256];
        snprintf(ins, sizeof ins,
                 "INSERT INTO meta(key, value) VALUES('schema_version', '%d'), "
                 "('created_at', '%lld'), ('created_by', 'stagger %s')",
                 STG_STORE_SCHEMA_VERSION, (long long)stg__store_now_ms(), stg_version());
        rc = sqlite3_exec(s->db, ins, NULL, NULL, NULL);
    }
    if (rc != SQLITE_OK)
        return stg__store_fail_rollback(s, rc, "cannot create the schema");
    return stg__store_commit(s);
}

/* Check the file is ours (or empty: create the schema). */
static int check_identity(stg_store *s)
{
    int64_t tables = 0, app = 0, version = 0;
    int rc = pragma_int(s, "SELECT count(*) FROM sqlite_master", &tables);
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot read the database");
    if (tables == 0) {
        if (s->readonly)
            return stg__store_error(s, STG_ENOTFOUND, "%s: holds no batch (empty database)",
                                    s->path);
        return create_schema(s);
    }
    if ((rc = pragma_int(s, "PRAGMA application_id", &app)) != SQLITE_OK ||
        (rc = pragma_int(s, "PRAGMA user_version", &version)) != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot read the database header");
    if (app != STG_STORE_APP_ID)
        return stg__store_error(s, STG_ESTATE,
                                "%s: not a stagger batch database (another program's "
                                "SQLite file); refusing to touch it",
                                s->path);
    if (version > STG_STORE_SCHEMA_VERSION)
        return stg__store_error(s, STG_ESTATE,
                                "%s: written by a newer stagger (schema %lld, this one "
                                "knows %d); refusing to touch it",
                                s->path, (long long)version, STG_STORE_SCHEMA_VERSION);
    if (version < 1)
        return stg__store_error(s, STG_ESTATE, "%s: unknown schema version %lld", s->path,
                                (long long)version);
    return STG_OK;
}

/* The claim's index, on a database an earlier version made: jobs_by_state
 * (every state, so two index moves per state change) becomes jobs_pending
 * (see the top of the file). One transaction; the same schema version
 * (an index changes no row, and any version reads either). */
static int migrate_indexes(stg_store *s)
{
    int64_t old = 0;
    int rc = pragma_int(s,
                        "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                        "name = 'jobs_by_state'",
                        &old);
    if (rc == SQLITE_OK && !old)
        return STG_OK;
    int err = rc == SQLITE_OK ? stg__store_begin(s) : STG_OK;
    if (rc == SQLITE_OK && err)
        return err;
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db,
                          "DROP INDEX jobs_by_state; CREATE INDEX IF NOT EXISTS jobs_pending "
                          "ON jobs(id) WHERE state = 'pending'",
                          NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return stg__store_fail_rollback(s, rc, "cannot update the job index");
    return stg__store_commit(s);
}

/* A reader that cannot create the -shm file (a read-only directory, another
 * user's files) cannot open a WAL database the normal way. When no -wal file
 * with content exists, every committed change is in the main file and no
 * run is writing (a run keeps the -wal file), so the file can be read as
 * immutable. Returns STG_OK when reopened that way. */
static int reopen_immutable(stg_store *s)
{
    char wal[4096];
    snprintf(wal, sizeof wal, "%s-wal", s->path);
    struct stat st;
    if (stat(wal, &st) == 0 && st.st_size > 0)
        return STG_EDB;
    size_t n = strlen(s->path);
    char *uri = malloc(n * 3 + 32);
    if (!uri)
        return STG_ENOMEM;
    char *w = uri + sprintf(uri, "file:");
    for (const char *p = s->path; *p; p++) {
        if (*p == '?' || *p == '#' || *p == '%')
            w += sprintf(w, "%%%02X", (unsigned char)*p);
        else
            *w++ = *p;
    }
    strcpy(w, "?immutable=1");
    sqlite3_close(s->db);
    s->db = NULL;
    int rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    free(uri);
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot open");
    sqlite3_extended_result_codes(s->db, 1);
    return STG_OK;
}

int stg__store_open(const char *path, const stg_store_options *opt, stg_store **out, char *err,
                   size_t errlen)
{
    stg_store_options o = {0};
    if (opt)
        o = *opt;
    if (out)
        *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!path || !*path || !out) {
        if (err)
            snprintf(err, errlen, "no database path");
        return STG_EINVAL;
    }
    if (o.readonly)
        o.create = false;
    bool memory = !strcmp(path, ":memory:");
    stg_store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        if (err)
            snprintf(err, errlen, "out of memory");
        return STG_ENOMEM;
    }
    s->lock_fd = -1;
    s->readonly = o.readonly;
    s->busy_timeout_us = o.busy_timeout_us > 0 ? o.busy_timeout_us : STG_SEC(5);

    int result = STG_OK;
    struct stat stt;
    bool fresh = false; /* a new, empty file: set up without syncs (header) */
    if (!memory && stat(path, &stt) != 0) {
        if (errno != ENOENT || !o.create) {
            result = errno == ENOENT
                         ? stg__store_error(s, STG_ENOTFOUND, "%s: no such database", path)
                         : stg__store_error(s, STG_EDB, "%s: %s", path, strerror(errno));
            goto fail;
        }
        /* Created here, 0600: the file will hold response bodies (the
         * user's data), and SQLite gives -wal and -shm the same mode. */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) {
            result = stg__store_error(s, STG_EDB, "%s: cannot create: %s", path, strerror(errno));
            goto fail;
        }
        if (fd >= 0)
            close(fd);
        fresh = fd >= 0;
    } else if (!memory && !S_ISREG(stt.st_mode)) {
        result = stg__store_error(s, STG_EDB, "%s: not a regular file", path);
        goto fail;
    }
    if (o.exclusive && !memory && (result = take_lock(s, o.create)) != STG_OK)
        goto fail;

    int flags = o.readonly ? SQLITE_OPEN_READONLY
                           : SQLITE_OPEN_READWRITE | (o.create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        result = stg__store_fail(s, rc, "cannot open");
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, (int)(s->busy_timeout_us / 1000 > 0x7fffffff
                                          ? 0x7fffffff
                                          : s->busy_timeout_us / 1000));
    if (!o.readonly && sqlite3_db_readonly(s->db, "main") == 1) {
        result = stg__store_error(s, STG_EDB,
                                  "%s: the database is read-only (file permissions?); a run "
                                  "needs to write its state; nothing was changed",
                                  path);
        goto fail;
    }
    if (!o.readonly) {
        /* WAL first: the schema is then created in WAL mode (a new file
         * without syncs: header). */
        rc = sqlite3_exec(s->db, fresh ? "PRAGMA synchronous=OFF" : "PRAGMA synchronous=NORMAL",
                          NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(s->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            stg__store_walsync_install(s); /* the autocheckpoint, 4000 pages */
        if (rc != SQLITE_OK) {
            result = stg__store_fail(s, rc, "cannot set up the database");
            goto fail;
        }
    }
    if ((result = check_identity(s)) != STG_OK && o.readonly && !memory &&
        reopen_immutable(s) == STG_OK)
        result = check_identity(s);
    if (result == STG_OK && fresh &&
        (rc = sqlite3_exec(s->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL)) != SQLITE_OK)
        result = stg__store_fail(s, rc, "cannot set up the database");
    if (result == STG_OK)
        result = stg__store_check(s);
    if (result == STG_OK && !o.readonly)
        result = migrate_indexes(s);
    /* After the check (quick_check reads CHECK constraints only while they
     * are on): this connection's own writes skip the state CHECK (header). */
    if (result == STG_OK && !o.readonly &&
        (rc = sqlite3_exec(s->db, "PRAGMA ignore_check_constraints=ON", NULL, NULL, NULL)) !=
            SQLITE_OK)
        result = stg__store_fail(s, rc, "cannot set up the database");
    if (result != STG_OK)
        goto fail;
    *out = s;
    return STG_OK;

fail:
    if (err)
        snprintf(err, errlen, "%s", s->err);
    stg__store_close(s);
    return result;
}

void stg__store_close(stg_store *s)
{
    if (!s)
        return;
    sqlite3_stmt **sts[] = {&s->st_claim,        &s->st_finish,       &s->st_response_put,
                            &s->st_response_del, &s->st_sent,         &s->st_run_add,
                            &s->st_begin,        &s->st_commit,       &s->st_rollback};
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++) {
        sqlite3_finalize(*sts[i]);
        *sts[i] = NULL;
    }
    stg__store_walsync_stop(s); /* its connection first: ours is the last */
    if (s->db)
        sqlite3_close(s->db);
    stg__store_walsync_close(s);
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* after sqlite3_close: see the top of the file */
    free(s->path);
    free(s);
}

int stg__store_meta_get(stg_store *s, const char *key, char **out)
{
    *out = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *v = (const char *)sqlite3_column_text(st, 0);
            if (v && !(*out = strdup(v))) {
                sqlite3_finalize(st);
                return stg__store_error(s, STG_ENOMEM, "out of memory");
            }
            rc = SQLITE_DONE;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return stg__store_fail(s, rc, "cannot read the meta table");
    return STG_OK;
}
