/*
 * HTTP-date (RFC 9110 section 5.6.7): parsing all three forms a recipient
 * must accept (and the variants real servers send), formatting IMF-fixdate,
 * and RFC 3339 timestamps (Anthropic's resets). Used by hints.c and by
 * anything that prints a date a server will read.
 *
 * Invariants (see core/internal.h for those of every parser): the value is
 * (pointer, length); calendar arithmetic is integer maths on the proleptic
 * Gregorian calendar (algorithms after H. Hinnant), never timegm or
 * strptime, so the result does not depend on the locale, the time zone or
 * the width of time_t. Every date that parses lies in years 0000..9999 and
 * formats back to itself.
 *
 * Choices the RFC leaves open, made here:
 *   - Lenient as curl's parsedate is, because servers are: the parts may
 *     come in any order, separated by spaces, tabs, commas or (between date
 *     parts) dashes; the weekday may be missing; the day and the hour may
 *     have one digit; RFC 850 may have a four-digit
 *     year; asctime may end in "GMT"; the zone may be GMT, UT, UTC, Z, a
 *     US zone of RFC 5322 or a numeric offset (+hhmm), and is applied, so
 *     the instant is the one the server meant. Only asctime (month before
 *     day) may lack a zone, and means GMT: an IMF or RFC 850 date without
 *     its zone may have lost a "-0500" and would read hours early.
 *   - What could mean two instants is refused (STG_EPARSE), so the caller
 *     falls back to its plain backoff and never retries early on a guess:
 *     two zones ("GMT+0100"), a zone name of two places (IST), a numeric
 *     month, a missing year, time, seconds or (day first) zone, a two-digit year outside the
 *     RFC 850 "06-Nov-94" shape, a three-digit year, any unknown word
 *     or character, any part given twice.
 *   - Day and month names match case-insensitively. The day name must be
 *     one of the listed names but is not checked against the date: the
 *     date is what the server means, the weekday is decoration.
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

/* Zone names with one meaning (RFC 5322 section 4.3 obs-zone, plus UTC and
 * Z): offsets east of UTC in minutes. Names that mean two places (IST,
 * BST, CST outside the US...) are not here: they are ambiguous. */
static const struct {
    const char *name;
    int east_min;
} zones[] = {{"gmt", 0},    {"utc", 0},    {"ut", 0},     {"z", 0},      {"est", -300},
             {"edt", -240}, {"cst", -360}, {"cdt", -300}, {"mst", -420}, {"mdt", -360},
             {"pst", -480}, {"pdt", -420}};

/* What a date has said so far; -1 = not yet. */
typedef struct date_parts {
    int wday, mon, day, year, year_digits, hh, mi, ss;
    bool day_first; /* the IMF / RFC 850 order: a zone is then required */
    bool zone;
    int east_min;
} date_parts;

/* A word: a day name, a month name or a zone name, each at most once. */
static bool date_word(const char *w, size_t n, date_parts *d)
{
    for (int i = 0; i < 7; i++) {
        if (stg__eq_nocase(w, n, day_short[i]) || stg__eq_nocase(w, n, day_long[i])) {
            if (d->wday >= 0)
                return false;
            d->wday = i;
            return true;
        }
    }
    for (int i = 0; i < 12; i++) {
        if (stg__eq_nocase(w, n, month_lc[i])) {
            if (d->mon > 0)
                return false;
            d->mon = i + 1;
            return true;
        }
    }
    for (size_t i = 0; i < sizeof zones / sizeof zones[0]; i++) {
        if (stg__eq_nocase(w, n, zones[i].name)) {
            if (d->zone)
                return false;
            d->zone = true;
            d->east_min = zones[i].east_min;
            return true;
        }
    }
    return false;
}

/* H:MM:SS (one or two hour digits) at c, whose first digits (n of them)
 * are already known to be followed by ':'. Seconds are required: a value
 * cut after the minutes would otherwise read up to 59 s early. */
static bool date_time(stg__cursor *c, size_t n, date_parts *d)
{
    int hh, mi, ss;
    if (d->hh >= 0 || n > 2 || !cur_digits(c, (int)n, &hh) || !stg__cur_char(c, ':') ||
        !cur_digits(c, 2, &mi) || !stg__cur_char(c, ':') || !cur_digits(c, 2, &ss))
        return false;
    d->hh = hh;
    d->mi = mi;
    d->ss = ss;
    return true;
}

/* "+hhmm" / "-hhmm" at c (the sign not yet read). */
static bool date_offset(stg__cursor *c, date_parts *d)
{
    int v;
    bool east = c->s[c->pos] == '+';
    c->pos++;
    if (d->zone || !cur_digits(c, 4, &v) || v / 100 > 23 || v % 100 > 59)
        return false;
    if (c->pos < c->len && stg__is_digit(c->s[c->pos]))
        return false;
    d->zone = true;
    d->east_min = (east ? 1 : -1) * (v / 100 * 60 + v % 100);
    return true;
}

/* Digits: a time of day, a four-digit year, the day, or (after the day and
 * the month, behind a dash) a two-digit year. */
static bool date_number(stg__cursor *c, date_parts *d)
{
    size_t n = 0;
    while (c->pos + n < c->len && stg__is_digit(c->s[c->pos + n]))
        n++;
    if (c->pos + n < c->len && c->s[c->pos + n] == ':')
        return date_time(c, n, d);
    if (n == 4 && d->year < 0) {
        d->year_digits = 4;
        return cur_digits(c, 4, &d->year);
    }
    if ((n == 1 || n == 2) && d->day < 0) {
        d->day_first = d->mon < 0;
        return cur_digits(c, (int)n, &d->day);
    }
    /* A two-digit year only where RFC 850 puts it ("06-Nov-94"): "Nov 6 08:49:37 19"
     * may be a four-digit year cut short. */
    if (n == 2 && d->year < 0 && d->mon > 0 && c->pos > 0 && c->s[c->pos - 1] == '-') {
        d->year_digits = 2;
        return cur_digits(c, 2, &d->year);
    }
    return false;
}

int stg_http_date_parse(const char *s, size_t len, int64_t wall_now_us, int64_t *unix_s)
{
    stg__cursor c;
    date_parts d = {-1, -1, -1, -1, 0, -1, -1, -1, false, false, 0};
    int64_t year, t;

    if (!unix_s)
        return STG_EINVAL;
    stg__trim_ows(&s, &len);
    if (len == 0)
        return STG_EPARSE;
    stg__cur_init(&c, s, len);
    while (!stg__cur_end(&c)) {
        char ch = c.s[c.pos];
        char prev = c.pos > 0 ? c.s[c.pos - 1] : ' ';
        if (ch == ' ' || ch == '\t' || ch == ',') {
            c.pos++;
        } else if ((ch == '+' || ch == '-') && d.hh >= 0 && !stg__is_alpha(prev) &&
                   c.len - c.pos > 1 && stg__is_digit(c.s[c.pos + 1])) {
            /* After the time, a sign not glued to a word is a zone offset. */
            if (!date_offset(&c, &d))
                return STG_EPARSE;
        } else if (ch == '-' && c.pos > 0 && (stg__is_alpha(prev) || stg__is_digit(prev))) {
            c.pos++; /* 06-Nov-94 */
        } else if (stg__is_alpha(ch)) {
            size_t n = 0;
            while (c.pos + n < c.len && stg__is_alpha(c.s[c.pos + n]))
                n++;
            if (!date_word(c.s + c.pos, n, &d))
                return STG_EPARSE;
            c.pos += n;
        } else if (stg__is_digit(ch)) {
            if (!date_number(&c, &d))
                return STG_EPARSE;
            /* A number is never glued to a word: "6Nov" is not a date. */
            if (c.pos < c.len && stg__is_alpha(c.s[c.pos]))
                return STG_EPARSE;
        } else {
            return STG_EPARSE;
        }
    }
    if (d.day < 0 || d.mon < 0 || d.year < 0 || d.hh < 0)
        return STG_EPARSE;
    if (d.day_first && !d.zone)
        return STG_EPARSE; /* cut before its zone: maybe hours off */
    year = d.year_digits == 2 ? rfc850_year(d.year, wall_now_us) : d.year;
    if (year < 0 || year > 9999)
        return STG_EPARSE;
    if (d.day < 1 || d.day > days_in_month(year, d.mon) || d.hh > 23 || d.mi > 59 || d.ss > 60)
        return STG_EPARSE;
    if (d.ss == 60) {
        if (d.hh != 23 || d.mi != 59)
            return STG_EPARSE;
        d.ss = 59; /* leap second: Unix time has none */
    }
    t = days_from_civil(year, d.mon, d.day) * SECS_PER_DAY + d.hh * 3600 + d.mi * 60 + d.ss -
        (int64_t)d.east_min * 60;
    if (t < MIN_DATE_S || t > MAX_DATE_S)
        return STG_EPARSE;
    *unix_s = t;
    return STG_OK;
}

/* ---- RFC 3339 ------------------------------------------------------------ */

int stg__rfc3339_parse(const char *s, size_t len, int64_t *unix_us)
{
    stg__cursor c;
    int y, mo, dd, hh, mi, ss, oh = 0, om = 0, sign = 0;
    int64_t frac = 0, scale = STG__US_PER_SEC, t;
    bool rest = false;
    stg__trim_ows(&s, &len);
    stg__cur_init(&c, s, len);
    if (!cur_digits(&c, 4, &y) || !stg__cur_char(&c, '-') || !cur_digits(&c, 2, &mo) ||
        !stg__cur_char(&c, '-') || !cur_digits(&c, 2, &dd))
        return STG_EPARSE;
    if (!(stg__cur_char(&c, 'T') || stg__cur_char(&c, 't') || stg__cur_char(&c, ' ')))
        return STG_EPARSE;
    if (!cur_digits(&c, 2, &hh) || !stg__cur_char(&c, ':') || !cur_digits(&c, 2, &mi) ||
        !stg__cur_char(&c, ':') || !cur_digits(&c, 2, &ss))
        return STG_EPARSE;
    if (stg__cur_char(&c, '.')) {
        size_t start = c.pos;
        while (c.pos < c.len && stg__is_digit(c.s[c.pos])) {
            int dg = c.s[c.pos++] - '0';
            if (scale > 1) {
                scale /= 10;
                frac += dg * scale;
            } else if (dg) {
                rest = true;
            }
        }
        if (c.pos == start)
            return STG_EPARSE;
    }
    if (stg__cur_char(&c, 'Z') || stg__cur_char(&c, 'z')) {
        sign = 0;
    } else if (stg__cur_peek(&c, '+') || stg__cur_peek(&c, '-')) {
        sign = c.s[c.pos++] == '+' ? 1 : -1;
        if (!cur_digits(&c, 2, &oh) || !stg__cur_char(&c, ':') || !cur_digits(&c, 2, &om) ||
            oh > 23 || om > 59)
            return STG_EPARSE;
    } else {
        return STG_EPARSE;
    }
    if (!stg__cur_end(&c))
        return STG_EPARSE;
    if (mo < 1 || mo > 12 || dd < 1 || dd > days_in_month(y, mo) || hh > 23 || mi > 59 ||
        ss > 60)
        return STG_EPARSE;
    if (ss == 60) {
        if (hh != 23 || mi != 59)
            return STG_EPARSE;
        ss = 59;
        frac = 999999; /* the leap second's end is the next day's start */
        rest = false;
    }
    t = days_from_civil(y, mo, dd) * SECS_PER_DAY + hh * 3600 + mi * 60 + ss -
        (int64_t)sign * (oh * 3600 + om * 60);
    *unix_us = t * STG__US_PER_SEC + frac + (rest ? 1 : 0);
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
