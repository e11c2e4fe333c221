/*
 * The pictures' assets (issue #36), embedded at build time from
 * src/view/live.html, src/view/report.html and Debian's Chart.js
 * (src/view/CMakeLists.txt): a page shown by stagger never fetches
 * anything from elsewhere.
 *
 * Only in builds with STG_HAVE_VIEW (the part is left out without
 * libjs-chart.js).
 */
#ifndef STAGGER_VIEW_VIEW_H
#define STAGGER_VIEW_VIEW_H

#include <stddef.h>

/* The asset served at name ("" or "index.html": the live page;
 * "chart.js"), its length and Content-Type; NULL for any other name.
 * Static data. */
const char *stg__view_asset(const char *name, size_t *len, const char **type);

/* The HTML report's template and Chart.js, for src/store's report. */
const char *stg__view_report_template(size_t *len);
const char *stg__view_chartjs(size_t *len);

#endif
