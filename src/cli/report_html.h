/*
 * `stagger batch report --html FILE` (report_html.c): the report as one
 * self-contained HTML file with charts (issue #36).
 */
#ifndef STAGGER_CLI_REPORT_HTML_H
#define STAGGER_CLI_REPORT_HTML_H

#ifdef STG_HAVE_STORE
#include "batch/report.h"

/* Write the report r of store s (r->db: its path) to path as HTML: the timeline
 * the database holds (stg__store_timeline_json), the report as JSON and as
 * text, and the template and Chart.js of src/view, all in the one file.
 * Returns 0, or an exit code after a message on stderr (CLI_EXIT_DB when
 * the store cannot be read, CLI_EXIT_FAILED when the file cannot be
 * written, CLI_EXIT_USAGE in a build without the view part). */
int cli_report_html(const char *path, stg_store *s, const stg_batch_report *r);
#endif

#endif
