/*
 * curl_alloc_count.h: libcurl's allocations counted by size, for the
 * memory benchmarks (bench_curl_floor, bench_engine_mem). Included by one
 * .c each (everything here is static). Install the hooks with
 * ac_install() before anything else calls curl_global_init: libcurl then
 * allocates through them, so the table holds libcurl's bytes only, never
 * the caller's.
 *
 * Invariant: a free gives back what its malloc counted, because both
 * count malloc_usable_size of the same pointer; the peak table is a copy
 * taken when libcurl's live bytes reached their highest, so its classes
 * add up to curl_peak.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

/* Counted through curl_global_init_mem's hooks:
 * the live bytes per usable size (malloc_usable_size, so a free knows what
 * it gives back). At the heap's peak the table is copied: its biggest
 * classes say which of libcurl's structs dominate (the easy handle, the
 * connection, the download buffer, the header dynbufs). */
#define CLASSES 4096
typedef struct size_class {
    size_t size;
    long live;
} size_class;
static size_class live_tab[CLASSES], peak_tab[CLASSES];
static unsigned long n_allocs;
static size_t curl_live, curl_peak;

static void account(void *p, int sign)
{
    if (!p)
        return;
    size_t u = malloc_usable_size(p);
    size_t i = (u * 2654435761u) % CLASSES;
    while (live_tab[i].size && live_tab[i].size != u)
        i = (i + 1) % CLASSES;
    live_tab[i].size = u;
    live_tab[i].live += sign;
    curl_live += sign > 0 ? u : (size_t)0 - u;
}

static void *cnt_malloc(size_t n)
{
    void *p = malloc(n);
    n_allocs++;
    account(p, 1);
    return p;
}
static void cnt_free(void *p)
{
    account(p, -1);
    free(p);
}
static void *cnt_realloc(void *p, size_t n)
{
    account(p, -1);
    void *q = realloc(p, n);
    n_allocs++;
    account(q ? q : p, 1);
    return q;
}
static char *cnt_strdup(const char *s)
{
    char *p = strdup(s);
    n_allocs++;
    account(p, 1);
    return p;
}
static void *cnt_calloc(size_t a, size_t b)
{
    void *p = calloc(a, b);
    n_allocs++;
    account(p, 1);
    return p;
}

static void note_peak(void)
{
    if (curl_live > curl_peak) {
        curl_peak = curl_live;
        memcpy(peak_tab, live_tab, sizeof peak_tab);
    }
}

static int by_bytes(const void *a, const void *b)
{
    const size_class *x = a, *y = b;
    double bx = (double)x->size * (double)x->live, by = (double)y->size * (double)y->live;
    return bx < by ? 1 : bx > by ? -1 : 0;
}

static void print_top(size_class *tab, long n)
{
    qsort(tab, CLASSES, sizeof tab[0], by_bytes);
    for (int i = 0; i < 10 && tab[i].live > 0; i++)
        printf(" %zux%.2f", tab[i].size, (double)tab[i].live / (double)n);
    printf("\n");
}

/* What libcurl still holds now, per transfer: after the easy handles are
 * gone, that is the connections its cache keeps (what is per connection,
 * not per transfer). */
__attribute__((unused)) static void print_live(const char *tag, long n)
{
    static size_class tab[CLASSES];
    memcpy(tab, live_tab, sizeof tab);
    printf("%s live (usable bytes x live per transfer, %zu B = %.0f B/xfer):", tag, curl_live,
           (double)curl_live / (double)n);
    print_top(tab, n);
}

/* The classes holding most of the peak, as "size x count" per transfer. */
static void print_classes(const char *tag, long n)
{
    printf("%s classes (usable bytes x live per transfer, at libcurl's heap peak %zu B = %.0f "
           "B/xfer):",
           tag, curl_peak, (double)curl_peak / (double)n);
    print_top(peak_tab, n);
}

static CURLcode ac_install(void)
{
    return curl_global_init_mem(CURL_GLOBAL_DEFAULT, cnt_malloc, cnt_free, cnt_realloc,
                                cnt_strdup, cnt_calloc);
}

/* The process's own readings both benchmarks take beside the table: a
 * field of /proc/self/status in KiB (VmRSS:, VmHWM:), -1 when absent, and
 * every byte in use on the heap (the caller's and libcurl's). */
static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) {
            v = atol(line + n);
            break;
        }
    fclose(f);
    return v;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}
