/*
 * A scratch directory for the store's unit tests, one per test group:
 * setup_dir makes /tmp/STORE_SCRATCH_PREFIX.XXXXXX (define the prefix
 * before including), teardown_dir removes it, path_of names a file in it
 * (four buffers used in turn, so one call may take two or three names).
 * Needs <stdio.h>, <stdlib.h> (mkdtemp, system) and cmocka.
 */
#ifndef STG_TEST_STORE_SCRATCH_H
#define STG_TEST_STORE_SCRATCH_H

#ifndef STORE_SCRATCH_PREFIX
#error "define STORE_SCRATCH_PREFIX before including store_scratch.h"
#endif

static char g_dir[256];

static const char *path_of(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/%s.XXXXXX", STORE_SCRATCH_PREFIX);
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
