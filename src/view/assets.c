/*
 * The embedded assets by name (view.h). The arrays come from
 * cmake/embed.cmake, each ending with a NUL past its length, so text can
 * be used as a C string. Nothing here reads a file at run time.
 */
#include <string.h>

#include "view/view.h"

extern const unsigned char stg__asset_chartjs[], stg__asset_live_html[],
    stg__asset_report_html[];
extern const size_t stg__asset_chartjs_len, stg__asset_live_html_len,
    stg__asset_report_html_len;

const char *stg__view_asset(const char *name, size_t *len, const char **type)
{
    if (!strcmp(name, "") || !strcmp(name, "index.html")) {
        *len = stg__asset_live_html_len;
        *type = "text/html; charset=utf-8";
        return (const char *)stg__asset_live_html;
    }
    if (!strcmp(name, "chart.js")) {
        *len = stg__asset_chartjs_len;
        *type = "text/javascript; charset=utf-8";
        return (const char *)stg__asset_chartjs;
    }
    return NULL;
}

const char *stg__view_report_template(size_t *len)
{
    *len = stg__asset_report_html_len;
    return (const char *)stg__asset_report_html;
}

const char *stg__view_chartjs(size_t *len)
{
    *len = stg__asset_chartjs_len;
    return (const char *)stg__asset_chartjs;
}
