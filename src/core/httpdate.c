/*
 * HTTP-date (RFC 9110 section 5.6.7): parsing all three forms a recipient
 * must accept, and formatting IMF-fixdate. Used by Retry-After (hints.c)
 * and by anything that prints a date a server will read.
 *
 * Invariants (see core/internal.h for those of every parser): the value is
 * (pointer, length); calendar arithmetic is integer maths on the proleptic
 * Gregorian calendar (algorithms after H. Hinnant), never timegm or
 * strptime, so the result does not depend on the locale, the time zone or
 * the width of time_t. Every date that parses lies in years 0000..9999 and
 * formats back to itself.
 *
 * Choices the RFC leaves open, made here:
 *   - The structure is strict (exact separators, widths, "GMT"), but day
 *     and month names match case-insensitively. The day name must be one of
 *     the listed names but is not checked against the date: the date is
 *     what the server means, the weekday is decoration.
 *   - Seconds may be 60 only at 23:59 (a leap second) and then count as 59,
 *     since Unix time has no leap seconds: the wait errs a second short
 *     rather than past the next day's first second.
 *   - RFC 850 two-digit years: the year with those last two digits that is
 *     latest but at most 50 years after the current year (wall_now_us),
 *     compared as calendar years. This is RFC 9110's rule read as a sliding
 *     100-year window.
 *   - stg_http_date_format handles negative Unix times too, down to
 *     0000-01-01.
 */
#include <stagger/hints.h>

#include "core/internal.h"

#define SECS_PER_DAY INT64_C(86400)

/* Unix seconds of 0000-01-01T00:00:00 and 9999-12-31T23:59:59. */
#define MIN_DATE_S INT64_C(-62167219200)
#define MAX_DATE_S INT64_C(253402300799)

/* ---- calendar ---------------------------------------------------------- */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return (m == 2 && is_leap(y)) ? 29 : dim[m - 1];
}

/* Days since 1970-01-01 of y-m-d (m 1..12, d 1..31). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static const char *const day_short[7] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
static const char *const day_long[7] = {"sunday",   "monday", "tuesday", "wednesday",
                                        "thursday", "friday", "saturday"};
static const char *const month_lc[12] = {"jan", "feb", "mar", "apr", "may", "jun",
                                         "jul", "aug", "sep", "oct", "nov", "dec"};
static const char day_fmt[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char month_fmt[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* ---- HTTP-date --------------------------------------------------------- */

/* Exactly n digits. */
static bool cur_digits(stg__cursor *c, int n, int *out)
{
    int v = 0;
    if (c->len - c->pos < (size_t)n)
        return false;
    for (int i = 0; i < n; i++) {
        char ch = c->s[c->pos + (size_t)i];
        if (!stg__is_digit(ch))
            return false;
        v = v * 10 + (ch - '0');
    }
    c->pos += (size_t)n;
    *out = v;
    return true;
}

/* A three-letter month name; returns 1..12 or 0. */
static int cur_month(stg__cursor *c)
{
    if (c->len - c->pos < 3)
        return 0;
    for (int i = 0; i < 12; i++) {
        if (stg__eq_nocase(c->s + c->pos, 3, month_lc[i])) {
            c->pos += 3;
            return i + 1;
        }
    }
    return 0;
}

/* time-of-day = hour ":" minute ":" second */
static bool cur_time(stg__cursor *c, int *hh, int *mi, int *ss)
{
    return cur_digits(c, 2, hh) && stg__cur_char(c, ':') && cur_digits(c, 2, mi) &&
           stg__cur_char(c, ':') && cur_digits(c, 2, ss);
}

static bool cur_gmt(stg__cursor *c)
{
    if (c->len - c->pos < 3 || !stg__eq_nocase(c->s + c->pos, 3, "gmt"))
        return false;
    c->pos += 3;
    return true;
}

/* Year of a two-digit RFC 850 year: the latest year ending in yy that is
 * at most 50 years after the current one. */
static int64_t rfc850_year(int yy, int64_t wall_now_us)
{
    int64_t y, ceiling;
    int m, d;
    civil_from_days(floor_div(floor_div(wall_now_us, STG__US_PER_SEC), SECS_PER_DAY), &y, &m, &d);
    ceiling = y + 50;
    return ceiling - (((ceiling - yy) % 100) + 100) % 100;
}

int stg_http_date_parse(const char *s, size_t len, int64_t wall_now_us, int64_t *unix_s)
{
    stg__cursor c;
    size_t name = 0;
    int day = 0, mon = 0, yy = 0, hh = 0, mi = 0, ss = 0;
    int64_t year;
    bool found = false;

    if (!unix_s)
        return STG_EINVAL;
    if (!s)
        len = 0;
    stg__trim_ows(&s, &len);
    stg__cur_init(&c, s, len);

    while (name < len && stg__is_alpha(s[name]))
        name++;
    c.pos = name;
    if (name == 3 && stg__cur_peek(&c, ',')) {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        for (int i = 0; i < 7 && !found; i++)
            found = stg__eq_nocase(s, 3, day_short[i]);
        if (!found || !stg__cur_char(&c, ',') || !stg__cur_char(&c, ' ') || !cur_digits(&c, 2, &day) ||
            !stg__cur_char(&c, ' ') || !(mon = cur_month(&c)) || !stg__cur_char(&c, ' ') ||
            !cur_digits(&c, 4, &yy) || !stg__cur_char(&c, ' ') || !cur_time(&c, &hh, &mi, &ss) ||
            !stg__cur_char(&c, ' ') || !cur_gmt(&c))
            return STG_EPARSE;
        year = yy;
    } else if (name == 3 && stg__cur_peek(&c, ' ')) {
        /* asctime: Sun Nov  6 08:49:37 1994 */
        for (int i = 0; i < 7 && !found; i++)
            found = stg__eq_nocase(s, 3, day_short[i]);
        if (!found || !stg__cur_char(&c, ' ') || !(mon = cur_month(&c)) || !stg__cur_char(&c, ' '))
            return STG_EPARSE;
        if (stg__cur_char(&c, ' ')) {
            if (!cur_digits(&c, 1, &day))
                return STG_EPARSE;
        } else if (!cur_digits(&c, 2, &day)) {
            return STG_EPARSE;
        }
        if (!stg__cur_char(&c, ' ') || !cur_time(&c, &hh, &mi, &ss) || !stg__cur_char(&c, ' ') ||
            !cur_digits(&c, 4, &yy))
            return STG_EPARSE;
        year = yy;
    } else if (name > 3 && stg__cur_peek(&c, ',')) {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        for (int i = 0; i < 7 && !found; i++)
            found = stg__eq_nocase(s, name, day_long[i]);
        if (!found || !stg__cur_char(&c, ',') || !stg__cur_char(&c, ' ') || !cur_digits(&c, 2, &day) ||
            !stg__cur_char(&c, '-') || !(mon = cur_month(&c)) || !stg__cur_char(&c, '-') ||
            !cur_digits(&c, 2, &yy) || !stg__cur_char(&c, ' ') || !cur_time(&c, &hh, &mi, &ss) ||
            !stg__cur_char(&c, ' ') || !cur_gmt(&c))
            return STG_EPARSE;
        year = rfc850_year(yy, wall_now_us);
        if (year < 0 || year > 9999)
            return STG_EPARSE;
    } else {
        return STG_EPARSE;
    }
    if (!stg__cur_end(&c))
        return STG_EPARSE;
    if (day < 1 || day > days_in_month(year, mon) || hh > 23 || mi > 59 || ss > 60)
        return STG_EPARSE;
    if (ss == 60) {
        if (hh != 23 || mi != 59)
            return STG_EPARSE;
        ss = 59; /* leap second: Unix time has none */
    }
    *unix_s = days_from_civil(year, mon, day) * SECS_PER_DAY + hh * 3600 + mi * 60 + ss;
    STG_ASSERT(*unix_s >= MIN_DATE_S && *unix_s <= MAX_DATE_S);
    return STG_OK;
}

/* Write n decimal digits of v, zero padded. */
static void put_digits(char *p, int64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

size_t stg_http_date_format(int64_t unix_s, char *buf, size_t size)
{
    int64_t days, secs, year;
    int mon, day, wday;

    if (!buf || size < 30)
        return 0;
    if (unix_s < MIN_DATE_S || unix_s > MAX_DATE_S) {
        buf[0] = '\0';
        return 0;
    }
    days = floor_div(unix_s, SECS_PER_DAY);
    secs = unix_s - days * SECS_PER_DAY;
    civil_from_days(days, &year, &mon, &day);
    STG_ASSERT(year >= 0 && year <= 9999 && mon >= 1 && mon <= 12 && day >= 1 && day <= 31);
    wday = (int)(((days + 4) % 7 + 7) % 7); /* 1970-01-01 was a Thursday */

    /* "Sun, 06 Nov 1994 08:49:37 GMT" */
    buf[0] = day_fmt[wday][0];
    buf[1] = day_fmt[wday][1];
    buf[2] = day_fmt[wday][2];
    buf[3] = ',';
    buf[4] = ' ';
    put_digits(buf + 5, day, 2);
    buf[7] = ' ';
    buf[8] = month_fmt[mon - 1][0];
    buf[9] = month_fmt[mon - 1][1];
    buf[10] = month_fmt[mon - 1][2];
    buf[11] = ' ';
    put_digits(buf + 12, year, 4);
    buf[16] = ' ';
    put_digits(buf + 17, secs / 3600, 2);
    buf[19] = ':';
    put_digits(buf + 20, secs / 60 % 60, 2);
    buf[22] = ':';
    put_digits(buf + 23, secs % 60, 2);
    buf[25] = ' ';
    buf[26] = 'G';
    buf[27] = 'M';
    buf[28] = 'T';
    buf[29] = '\0';
    return 29;
}
