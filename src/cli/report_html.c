/*
 * `stagger batch report --html FILE` (report_html.h): the template
 * (src/view/report.html) with Chart.js put in at its /\*@CHARTJS@*\/ mark
 * and the report's data at its @DATA@ mark, written as one file a person
 * can mail: it loads nothing when opened.
 *
 * Invariants:
 *  - the data is JSON made by jansson, with every '<' written \u003c and
 *    '/' escaped, so nothing in it can end the script element it sits in
 *    (a status text, an error line, a file name);
 *  - it holds what `report --json` and `report` print and the timeline,
 *    none of which carries a URL or a header: no secret;
 *  - the file is written to FILE.tmp.PID and renamed over FILE, so a
 *    reader never opens half a report.
 */
#ifdef STG_HAVE_STORE

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/report_html.h"
#ifdef STG_HAVE_VIEW
#include "view/view.h"
#endif

#ifdef STG_HAVE_VIEW
/* What f printed, as a string to free (NULL when out of memory). */
static char *captured(const stg_batch_report *r, bool json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    if (json)
        stg__batch_report_json(r, f);
    else
        stg__batch_report_text(r, f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The data element's text: {"timeline", "report", "text"}. */
static char *data_json(stg_store *s, const stg_batch_report *r, int *ex)
{
    char *tl = NULL;
    if (stg__store_timeline_json(s, &tl) != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(s));
        *ex = CLI_EXIT_DB;
        return NULL;
    }
    char *rj = captured(r, true), *text = captured(r, false);
    json_t *o = tl && rj && text ? json_pack("{s:o,s:o,s:s}", "timeline", json_loads(tl, 0, NULL),
                                             "report", json_loads(rj, 0, NULL), "text", text)
                                 : NULL;
    free(tl);
    free(rj);
    free(text);
    char *d = o ? json_dumps(o, JSON_COMPACT | JSON_ESCAPE_SLASH) : NULL;
    json_decref(o);
    if (!d) {
        fprintf(stderr, "stagger batch: out of memory\n");
        *ex = CLI_EXIT_FAILED;
        return NULL;
    }
    /* '<' only ever sits inside a JSON string, where \u003c means it. */
    size_t n = 0;
    for (const char *p = d; *p; p++)
        n += *p == '<';
    char *safe = malloc(strlen(d) + 5 * n + 1), *w = safe;
    if (safe) {
        for (const char *p = d; *p; p++)
            if (*p == '<')
                w += sprintf(w, "\\u003c");
            else
                *w++ = *p;
        *w = '\0';
    } else {
        fprintf(stderr, "stagger batch: out of memory\n");
        *ex = CLI_EXIT_FAILED;
    }
    free(d);
    return safe;
}

int cli_report_html(const char *path, stg_store *s, const stg_batch_report *r)
{
    int ex = 0;
    char *data = data_json(s, r, &ex);
    if (!data)
        return ex;
    size_t tlen, clen;
    const char *tpl = stg__view_report_template(&tlen);
    const char *js = stg__view_chartjs(&clen);
    const char *mark_js = strstr(tpl, "/*@CHARTJS@*/");
    const char *mark_data = strstr(tpl, "@DATA@");
    if (!mark_js || !mark_data || mark_data < mark_js) { /* the build's own template */
        fprintf(stderr, "stagger batch: the HTML template has no place for its data\n");
        free(data);
        return CLI_EXIT_FAILED;
    }
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    FILE *f = NULL;
    if (tmp) {
        snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
        f = fopen(tmp, "w");
    }
    if (f) {
        fwrite(tpl, 1, (size_t)(mark_js - tpl), f);
        fwrite(js, 1, clen, f);
        const char *after_js = mark_js + strlen("/*@CHARTJS@*/");
        fwrite(after_js, 1, (size_t)(mark_data - after_js), f);
        fputs(data, f);
        const char *after_data = mark_data + strlen("@DATA@");
        fwrite(after_data, 1, tlen - (size_t)(after_data - tpl), f);
    }
    bool ok = f && !ferror(f);
    if (f && fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        fprintf(stderr, "stagger batch: --html %s: %s\n", path, strerror(errno ? errno : EIO));
        if (tmp)
            unlink(tmp);
        ex = CLI_EXIT_FAILED;
    }
    free(tmp);
    free(data);
    return ex;
}
#else
int cli_report_html(const char *path, stg_store *s, const stg_batch_report *r)
{
    (void)path, (void)s, (void)r;
    fprintf(stderr, "stagger batch: --html needs a build with Chart.js (libjs-chart.js)\n");
    return CLI_EXIT_USAGE;
}
#endif

#endif
