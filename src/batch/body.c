/*
 * Response bodies as files under the caller's out_dir, one per job.
 *
 * Invariants:
 *  - A body file is complete or absent: written to a temp file, then
 *    renamed, so a kill never leaves half a body under the job's name.
 *  - Files are created 0600: bodies are the user's data, possibly private.
 *  - Names cannot collide or escape the directory: a plain id (letters,
 *    digits, then also . _ -; at most 128) is used as is, anything else
 *    becomes "_job-N", and plain names never start with '_' or '.'.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "batch/batch.h"

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
