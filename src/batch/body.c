/*
 * Response bodies as files under the caller's out_dir, one per job.
 *
 * A 2xx body streams there as it arrives (the engine's body sink,
 * stg_body_fn), so a run's memory does not grow with its bodies: 30
 * concurrent 200 MB bodies cost 30 file descriptors, not 6 GB. Any other
 * answer's body (the engine keeps at most 64 KiB of it) is written from
 * memory when the job ends, as before.
 *
 * Bodies kept in the database (no out_dir) are not streamed: they stay in
 * memory up to the engine's max_body (--max-body; 64 MiB by default) and
 * are inserted with the outcome, in its one transaction. Streaming them
 * would need a temp file and then an incremental blob write in the store's
 * transaction, which still writes the whole blob while the store's write
 * lock is held; the store's API takes a buffer; for large bodies, out_dir
 * is the way that never holds them.
 *
 * Invariants:
 *  - A body file is complete or absent: written to a temp file, then
 *    renamed, so a kill never leaves half a body under the job's name; a
 *    retry (RESTART) or a failure removes the temp file.
 *  - Files are created 0600: bodies are the user's data, possibly private.
 *  - Names cannot collide or escape the directory: a plain id (letters,
 *    digits, then also . _ -; at most 128) is used as is, anything else
 *    becomes "_job-N", and plain names never start with '_' or '.'.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int stg__batch_write_body(const char *dir, const char *name, const void *body, size_t len)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
            unlink(tmp);
            errno = e ? e : EIO;
            return -1;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

/* ---- streaming: the engine's body sink ------------------------------------------ */

void stg__batch_body_init(stg__batch_body *f, const char *dir, const stg_job *j)
{
    memset(f, 0, sizeof *f);
    f->dir = dir;
    f->fd = -1;
    stg__batch_body_name(j, f->name, sizeof f->name);
    snprintf(f->tmp, sizeof f->tmp, "%s/.%s.tmp", dir, f->name);
}

static int body_fail(stg__batch_body *f)
{
    if (!f->err)
        f->err = errno ? errno : EIO;
    return -1;
}

static int body_write(stg__batch_body *f, const char *p, size_t len)
{
    if (f->fd < 0) {
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (f->fd < 0)
            return body_fail(f);
        f->exists = true;
    }
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
    }
    return 0;
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
        if (f->fd >= 0) {
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
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", f->dir, f->name);
    if (rename(f->tmp, path) != 0) {
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
    if (f->exists)
        unlink(f->tmp);
    f->exists = false;
}
