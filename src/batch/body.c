/*
 * Response bodies as files under the caller's out_dir, one per job.
 *
 * A 2xx body streams there as it arrives (the engine's body sink,
 * stg_body_fn), so a run's memory does not grow with its bodies: 30
 * concurrent 200 MB bodies cost 30 file descriptors, not 6 GB. Any other
 * answer's body (the engine keeps at most 64 KiB of it) is written from
 * memory when the job ends, as before.
 *
 * Bodies kept in the database (no out_dir) stream the same way: up to
 * BODY_IN_MEMORY (64 KiB: most API answers, not worth a file) in memory,
 * beyond that into an anonymous temp file (O_TMPFILE in $TMPDIR or /tmp,
 * 0600, gone when closed), which the store copies into the row with
 * incremental blob I/O in the outcome's transaction (stg_job_outcome
 * body_in_fd). So no body is ever whole in memory in either mode.
 *
 * A slot's body state is its file name until the first byte: the temp
 * file's path is built when it is opened, renamed or removed, so a job in
 * flight does not carry a 4 KiB path buffer (at 10 000 in flight that was
 * most of the batch's memory).
 *
 * Invariants:
 *  - A body file is complete or absent: written to a temp file, then
 *    renamed, so a kill never leaves half a body under the job's name; a
 *    retry (RESTART) or a failure removes the temp file.
 *  - Files are created 0600: bodies are the user's data, possibly private.
 *  - Names cannot collide or escape the directory: a plain id (letters,
 *    digits, then also . _ -; at most 128) is used as is, anything else
 *    becomes "_job-N", and plain names never start with '_' or '.'.
 *  - Nothing is written through a link: out_dir is opened once
 *    (O_DIRECTORY|O_NOFOLLOW: itself no symbolic link, and a rename of its
 *    path during the run changes nothing) and every file is created or
 *    renamed relative to that descriptor; a temp file is created with
 *    O_CREAT|O_EXCL|O_NOFOLLOW, so an entry planted at .NAME.tmp (a link to
 *    a file elsewhere) is never opened. A stale temp file of a killed run
 *    (a regular file of this user) is removed, never followed, and created
 *    again; anything else in the way is an error (tmp_in_way) and the run
 *    stops. rename replaces a link at the final name, never its target.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_TMPFILE, mkostemp */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch/internal.h"

void stg__batch_body_name(const stg_job *j, char *buf, size_t size)
{
    size_t n = strlen(j->key);
    bool plain = n > 0 && n <= 128;
    for (size_t i = 0; plain && i < n; i++) {
        char c = j->key[i];
        plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                (i > 0 && (c == '.' || c == '_' || c == '-'));
    }
    if (plain)
        snprintf(buf, size, "%s", j->key);
    else
        snprintf(buf, size, "_job-%lld", (long long)j->id);
}

int stg__batch_out_open(const char *dir)
{
    return open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Create dirfd/tmp for writing (0600), never through what is there: a
 * stale regular file of ours (a killed run's) is removed and the create
 * tried once more; anything else there (a link, a directory, another
 * user's file) leaves *in_way set and -1 with errno EEXIST. */
static int tmp_create(int dirfd, const char *tmp, bool *in_way)
{
    *in_way = false;
    for (int tries = 0;; tries++) {
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
        struct stat st;
        if (fstatat(dirfd, tmp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT && tries < 2)
                continue; /* gone meanwhile */
            return -1;
        }
        if (tries >= 2 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
            *in_way = true;
            errno = EEXIST;
            return -1;
        }
        /* unlinkat removes the entry itself, whatever it became since. */
        if (unlinkat(dirfd, tmp, 0) != 0 && errno != ENOENT)
            return -1;
    }
}

int stg__batch_write_body(int dirfd, const char *name, const void *body, size_t len,
                          bool *in_way)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, ".%s.tmp", name);
    int fd = tmp_create(dirfd, tmp, in_way);
    if (fd < 0)
        return -1;
    const char *p = body;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlinkat(dirfd, tmp, 0);
            errno = e ? e : EIO;
            return -1;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0 || renameat(dirfd, tmp, dirfd, name) != 0) {
        int e = errno;
        unlinkat(dirfd, tmp, 0);
        errno = e;
        return -1;
    }
    return 0;
}

/* ---- streaming: the engine's body sink ------------------------------------------ */

#define BODY_IN_MEMORY ((size_t)64 << 10)

void stg__batch_body_init(stg__batch_body *f, const char *dir, int dirfd, const stg_job *j)
{
    memset(f, 0, sizeof *f);
    f->dir = dir;
    f->dirfd = dirfd;
    f->fd = -1;
    stg__batch_body_name(j, f->name, sizeof f->name);
}

/* .name.tmp (relative to dirfd): built when used, so a slot does not keep
 * a path buffer. */
static void tmp_path(const stg__batch_body *f, char *buf, size_t size)
{
    snprintf(buf, size, ".%s.tmp", f->name);
}

/* An anonymous temp file for a database body: O_TMPFILE, or a named one
 * unlinked at once where the file system has no O_TMPFILE. */
static int anon_open(void)
{
    const char *d = getenv("TMPDIR");
    if (!d || !*d)
        d = "/tmp";
    int fd = open(d, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    char path[4096];
    snprintf(path, sizeof path, "%s/stagger-body.XXXXXX", d);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path);
    return fd;
}

static int body_fail(stg__batch_body *f)
{
    if (!f->err)
        f->err = errno ? errno : EIO;
    return -1;
}

static int write_all(stg__batch_body *f, const char *p, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t w = write(f->fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return body_fail(f);
        }
        off += (size_t)w;
        f->len += (size_t)w;
    }
    return 0;
}

/* A database body: in memory while small, then the spilled prefix and the
 * rest into an anonymous file. */
static int db_write(stg__batch_body *f, const char *p, size_t len)
{
    if (f->fd < 0 && f->mem_len + len <= BODY_IN_MEMORY) {
        if (f->mem_len + len > f->mem_cap) {
            /* What the body needs, doubling from 1 KiB: a request in flight
             * costs its body's size, not 64 KiB up front. */
            size_t cap = f->mem_cap ? f->mem_cap : 1024;
            while (cap < f->mem_len + len)
                cap *= 2;
            char *m = realloc(f->mem, cap);
            if (!m)
                return body_fail(f);
            f->mem = m;
            f->mem_cap = cap;
        }
        memcpy(f->mem + f->mem_len, p, len);
        f->mem_len += len;
        return 0;
    }
    if (f->fd < 0) {
        if ((f->fd = anon_open()) < 0 || write_all(f, f->mem, f->mem_len) != 0)
            return body_fail(f);
        free(f->mem);
        f->mem = NULL;
        f->mem_len = f->mem_cap = 0;
    }
    return write_all(f, p, len);
}

static int body_write(stg__batch_body *f, const char *p, size_t len)
{
    if (!f->dir)
        return db_write(f, p, len);
    if (f->fd < 0) {
        char tmp[256];
        tmp_path(f, tmp, sizeof tmp);
        f->fd = tmp_create(f->dirfd, tmp, &f->tmp_in_way);
        if (f->fd < 0)
            return body_fail(f);
        f->exists = true;
    }
    return write_all(f, p, len);
}

int stg__batch_body_sink(stg_body_op op, const void *buf, size_t len, void *data)
{
    stg__batch_body *f = data;
    if (f->err)
        return -1;
    switch (op) {
    case STG_BODY_DATA:
        return body_write(f, buf, len);
    case STG_BODY_RESTART:
        stg__batch_body_discard(f); /* a retry: the next byte starts a new file */
        return 0;
    case STG_BODY_END:
        if (f->fd >= 0 && f->dir) { /* a database body's file is read at the commit */
            int rc = close(f->fd);
            f->fd = -1;
            if (rc != 0)
                return body_fail(f); /* not known to be on disk: not a body */
        }
        return 0;
    }
    return 0;
}

int stg__batch_body_commit(stg__batch_body *f)
{
    if (f->fd >= 0) { /* END always closes; a guard */
        close(f->fd);
        f->fd = -1;
    }
    char tmp[256];
    tmp_path(f, tmp, sizeof tmp);
    if (renameat(f->dirfd, tmp, f->dirfd, f->name) != 0) {
        int e = errno;
        stg__batch_body_discard(f);
        errno = e;
        return -1;
    }
    f->exists = false;
    return 0;
}

void stg__batch_body_discard(stg__batch_body *f)
{
    if (f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
    }
    if (f->exists) {
        char tmp[256];
        tmp_path(f, tmp, sizeof tmp);
        unlinkat(f->dirfd, tmp, 0);
    }
    f->exists = false;
    free(f->mem);
    f->mem = NULL;
    f->mem_len = f->mem_cap = f->len = 0;
}

bool stg__batch_body_to_outcome(stg__batch_body *f, stg_job_outcome *o)
{
    if (f->dir || (f->fd < 0 && !f->mem))
        return false;
    if (f->fd >= 0) {
        o->body_in_fd = true;
        o->body_fd = f->fd;
        o->body_len = f->len;
    } else {
        o->body = f->mem;
        o->body_len = f->mem_len;
    }
    return true;
}
