/*
 * Server hints: Retry-After, X-RateLimit-*, RateLimit / RateLimit-Policy.
 *
 * Everything here parses untrusted bytes, so the invariants are:
 *
 *   - A value is (pointer, length) and is never NUL-terminated: every read
 *     goes through a bounds check against the length. Nothing allocates,
 *     nothing touches global state or reads a clock, and nothing uses a
 *     locale-dependent libc function (no strtol, sscanf, strptime, timegm,
 *     tolower): numbers, names and calendar arithmetic are done here in
 *     plain ASCII and integer maths.
 *   - Integer maths never overflows: digit strings saturate and report
 *     STG_ERANGE, and every seconds-to-microseconds conversion is bounded
 *     first. A wait is never negative (a moment in the past means 0) and
 *     never longer than STG_DELTA_SECONDS_MAX seconds (longer is
 *     STG_ERANGE, whether it came from delta-seconds, an HTTP-date or a
 *     reset timestamp).
 *   - A header either parses completely and is then merged into the
 *     stg_hints, or it changes nothing but its bit in h->malformed.
 *
 * Choices the RFCs leave open, made here:
 *
 *   - HTTP-date: the structure is strict (exact separators, widths,
 *     "GMT"), but day and month names match case-insensitively. The day
 *     name must be one of the listed names but is not checked against the
 *     date: the date is what the server means, the weekday is decoration.
 *     Seconds may be 60 only at 23:59 (a leap second) and then count as 59,
 *     since Unix time has no leap seconds: the wait errs a second short
 *     rather than past the next day's first second. Years 0000..9999 are
 *     accepted (proleptic Gregorian calendar).
 *   - RFC 850 two-digit years: the year with those last two digits that is
 *     latest but at most 50 years after the current year (wall_now_us),
 *     compared as calendar years. This is RFC 9110's rule read as a sliding
 *     100-year window.
 *   - stg_http_date_format handles negative Unix times too, down to
 *     0000-01-01.
 *   - Reset values (X-RateLimit-Reset, RateLimit-Reset, and the t= and
 *     reset= of the RateLimit field) all use STG_RESET_EPOCH_THRESHOLD to
 *     tell delta-seconds from a Unix timestamp, may be decimals, and are
 *     truncated to whole microseconds.
 *   - Several values for the same thing in one response are combined, not
 *     overwritten: Retry-After keeps the longest wait. Remaining/reset go
 *     together as a pair: the least remaining wins, and on a tie the longer
 *     reset; a reset without a remaining count (X-RateLimit-Reset alone)
 *     keeps the longer reset. Limits go with their window: a limit with a
 *     window beats one without, two windows compare by rate (limit/window,
 *     lower wins, then the smaller limit), two bare limits by size.
 *   - Structured fields (RFC 8941, plus RFC 9651 dates and display strings)
 *     are parsed tolerantly: keys may be upper case, any number of digits
 *     is read, unknown parameters and dictionary keys are ignored, inner
 *     lists are skipped. But a field that is not well formed, or a
 *     member that lacks its required parameter (r= in RateLimit, q= in
 *     RateLimit-Policy) or has a negative or mistyped one, makes the whole
 *     field malformed. An empty field value is malformed too.
 */
#include <stagger/hints.h>

#define US_PER_SEC INT64_C(1000000)
#define SECS_PER_DAY INT64_C(86400)

/* Unix seconds of 0000-01-01T00:00:00 and 9999-12-31T23:59:59. */
#define MIN_DATE_S INT64_C(-62167219200)
#define MAX_DATE_S INT64_C(253402300799)

/* Largest whole seconds that still convert to microseconds with a fraction
 * added, without overflowing int64_t. */
#define MAX_SECS_TO_US ((INT64_MAX - (US_PER_SEC - 1)) / US_PER_SEC)

/* ------------------------------------------------------------------------ */
/* ASCII helpers                                                            */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static char to_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Strip leading and trailing spaces and tabs. */
static void trim_ows(const char **s, size_t *len)
{
    while (*len > 0 && is_ows((*s)[0])) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && is_ows((*s)[*len - 1]))
        (*len)--;
}

/* Does s[0..len) equal the NUL-terminated lower-case lit, ignoring case? */
static bool eq_nocase(const char *s, size_t len, const char *lit)
{
    size_t i = 0;
    for (; i < len; i++) {
        if (lit[i] == '\0' || to_lower(s[i]) != lit[i])
            return false;
    }
    return lit[i] == '\0';
}

/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */

/* All of s[0..len) must be digits (at least one). STG_ERANGE if the value
 * exceeds max; the digits are still all checked first, so garbage is
 * STG_EPARSE however long it is. */
static int parse_digits(const char *s, size_t len, int64_t max, int64_t *out)
{
    int64_t v = 0;
    bool big = false;
    if (len == 0)
        return STG_EPARSE;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i]))
            return STG_EPARSE;
        int d = s[i] - '0';
        if (big || v > (max - d) / 10)
            big = true;
        else
            v = v * 10 + d;
    }
    if (big)
        return STG_ERANGE;
    *out = v;
    return STG_OK;
}

/* A non-negative decimal: 1*DIGIT [ "." 1*DIGIT ]. The integer part must be
 * at most max (else STG_ERANGE); the fraction is truncated to microseconds. */
static int parse_udecimal(const char *s, size_t len, int64_t max, int64_t *ipart,
                          int64_t *frac_us)
{
    size_t dot = 0;
    while (dot < len && s[dot] != '.')
        dot++;
    if (dot < len) {
        int64_t f = 0, scale = US_PER_SEC;
        if (dot + 1 == len)
            return STG_EPARSE;
        for (size_t i = dot + 1; i < len; i++) {
            if (!is_digit(s[i]))
                return STG_EPARSE;
            if (scale > 1) {
                scale /= 10;
                f += (s[i] - '0') * scale;
            }
        }
        *frac_us = f;
    } else {
        *frac_us = 0;
    }
    return parse_digits(s, dot, max, ipart);
}

/* a - b for a wait: negative results become 0; STG_ERANGE when the result
 * is above STG_DELTA_SECONDS_MAX seconds (or would overflow). */
static int wait_until(int64_t target_us, int64_t now_us, int64_t *wait_us)
{
    const int64_t max_us = STG_DELTA_SECONDS_MAX * US_PER_SEC;
    if (now_us < 0 && target_us > INT64_MAX + now_us)
        return STG_ERANGE;
    if (now_us > 0 && target_us < INT64_MIN + now_us) {
        *wait_us = 0;
        return STG_OK;
    }
    int64_t d = target_us - now_us;
    if (d > max_us)
        return STG_ERANGE;
    *wait_us = d < 0 ? 0 : d;
    return STG_OK;
}

/* Seconds (whole part ipart, fraction frac_us) of a reset value into the
 * time until the reset, using STG_RESET_EPOCH_THRESHOLD. */
static int reset_to_us(int64_t ipart, int64_t frac_us, int64_t wall_now_us, int64_t *out)
{
    if (ipart > MAX_SECS_TO_US)
        return STG_ERANGE;
    int64_t us = ipart * US_PER_SEC + frac_us;
    if (ipart < STG_RESET_EPOCH_THRESHOLD) {
        *out = us;
        return STG_OK;
    }
    return wait_until(us, wall_now_us, out);
}

/* ------------------------------------------------------------------------ */
/* Calendar (proleptic Gregorian; algorithms after H. Hinnant)              */

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

/* ------------------------------------------------------------------------ */
/* HTTP-date                                                                */

/* A read position in a value of known length. */
typedef struct cursor {
    const char *s;
    size_t len;
    size_t pos;
} cursor;

static bool cur_end(const cursor *c)
{
    return c->pos >= c->len;
}

static bool cur_peek(const cursor *c, char ch)
{
    return c->pos < c->len && c->s[c->pos] == ch;
}

static bool cur_char(cursor *c, char ch)
{
    if (!cur_peek(c, ch))
        return false;
    c->pos++;
    return true;
}

/* Exactly n digits. */
static bool cur_digits(cursor *c, int n, int *out)
{
    int v = 0;
    if (c->len - c->pos < (size_t)n)
        return false;
    for (int i = 0; i < n; i++) {
        char ch = c->s[c->pos + (size_t)i];
        if (!is_digit(ch))
            return false;
        v = v * 10 + (ch - '0');
    }
    c->pos += (size_t)n;
    *out = v;
    return true;
}

/* A three-letter month name; returns 1..12 or 0. */
static int cur_month(cursor *c)
{
    if (c->len - c->pos < 3)
        return 0;
    for (int i = 0; i < 12; i++) {
        if (eq_nocase(c->s + c->pos, 3, month_lc[i])) {
            c->pos += 3;
            return i + 1;
        }
    }
    return 0;
}

/* time-of-day = hour ":" minute ":" second */
static bool cur_time(cursor *c, int *hh, int *mi, int *ss)
{
    return cur_digits(c, 2, hh) && cur_char(c, ':') && cur_digits(c, 2, mi) &&
           cur_char(c, ':') && cur_digits(c, 2, ss);
}

static bool cur_gmt(cursor *c)
{
    if (c->len - c->pos < 3 || !eq_nocase(c->s + c->pos, 3, "gmt"))
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
    civil_from_days(floor_div(floor_div(wall_now_us, US_PER_SEC), SECS_PER_DAY), &y, &m, &d);
    ceiling = y + 50;
    return ceiling - (((ceiling - yy) % 100) + 100) % 100;
}

int stg_http_date_parse(const char *s, size_t len, int64_t wall_now_us, int64_t *unix_s)
{
    cursor c;
    size_t name = 0;
    int day = 0, mon = 0, yy = 0, hh = 0, mi = 0, ss = 0;
    int64_t year;
    bool found = false;

    if (!unix_s)
        return STG_EINVAL;
    if (!s)
        len = 0;
    trim_ows(&s, &len);
    c.s = s;
    c.len = len;
    c.pos = 0;

    while (name < len && is_alpha(s[name]))
        name++;
    c.pos = name;
    if (name == 3 && cur_peek(&c, ',')) {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        for (int i = 0; i < 7 && !found; i++)
            found = eq_nocase(s, 3, day_short[i]);
        if (!found || !cur_char(&c, ',') || !cur_char(&c, ' ') || !cur_digits(&c, 2, &day) ||
            !cur_char(&c, ' ') || !(mon = cur_month(&c)) || !cur_char(&c, ' ') ||
            !cur_digits(&c, 4, &yy) || !cur_char(&c, ' ') || !cur_time(&c, &hh, &mi, &ss) ||
            !cur_char(&c, ' ') || !cur_gmt(&c))
            return STG_EPARSE;
        year = yy;
    } else if (name == 3 && cur_peek(&c, ' ')) {
        /* asctime: Sun Nov  6 08:49:37 1994 */
        for (int i = 0; i < 7 && !found; i++)
            found = eq_nocase(s, 3, day_short[i]);
        if (!found || !cur_char(&c, ' ') || !(mon = cur_month(&c)) || !cur_char(&c, ' '))
            return STG_EPARSE;
        if (cur_char(&c, ' ')) {
            if (!cur_digits(&c, 1, &day))
                return STG_EPARSE;
        } else if (!cur_digits(&c, 2, &day)) {
            return STG_EPARSE;
        }
        if (!cur_char(&c, ' ') || !cur_time(&c, &hh, &mi, &ss) || !cur_char(&c, ' ') ||
            !cur_digits(&c, 4, &yy))
            return STG_EPARSE;
        year = yy;
    } else if (name > 3 && cur_peek(&c, ',')) {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        for (int i = 0; i < 7 && !found; i++)
            found = eq_nocase(s, name, day_long[i]);
        if (!found || !cur_char(&c, ',') || !cur_char(&c, ' ') || !cur_digits(&c, 2, &day) ||
            !cur_char(&c, '-') || !(mon = cur_month(&c)) || !cur_char(&c, '-') ||
            !cur_digits(&c, 2, &yy) || !cur_char(&c, ' ') || !cur_time(&c, &hh, &mi, &ss) ||
            !cur_char(&c, ' ') || !cur_gmt(&c))
            return STG_EPARSE;
        year = rfc850_year(yy, wall_now_us);
        if (year < 0 || year > 9999)
            return STG_EPARSE;
    } else {
        return STG_EPARSE;
    }
    if (!cur_end(&c))
        return STG_EPARSE;
    if (day < 1 || day > days_in_month(year, mon) || hh > 23 || mi > 59 || ss > 60)
        return STG_EPARSE;
    if (ss == 60) {
        if (hh != 23 || mi != 59)
            return STG_EPARSE;
        ss = 59; /* leap second: Unix time has none */
    }
    *unix_s = days_from_civil(year, mon, day) * SECS_PER_DAY + hh * 3600 + mi * 60 + ss;
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

/* ------------------------------------------------------------------------ */
/* Retry-After and reset values                                             */

int stg_retry_after_parse(const char *value, size_t len, int64_t wall_now_us, int64_t *wait_us)
{
    int64_t v;
    int rc;

    if (!wait_us)
        return STG_EINVAL;
    if (!value)
        len = 0;
    trim_ows(&value, &len);
    if (len == 0)
        return STG_EPARSE;
    if (is_digit(value[0])) {
        rc = parse_digits(value, len, STG_DELTA_SECONDS_MAX, &v);
        if (rc == STG_OK)
            *wait_us = v * US_PER_SEC;
        return rc;
    }
    rc = stg_http_date_parse(value, len, wall_now_us, &v);
    if (rc != STG_OK)
        return rc;
    /* |v| <= MAX_DATE_S, so v * 10^6 fits easily. */
    return wait_until(v * US_PER_SEC, wall_now_us, wait_us);
}

int stg_ratelimit_reset_parse(const char *value, size_t len, int64_t wall_now_us,
                              int64_t *reset_us)
{
    int64_t ipart, frac_us, out;
    int rc;

    if (!reset_us)
        return STG_EINVAL;
    if (!value)
        len = 0;
    trim_ows(&value, &len);
    rc = parse_udecimal(value, len, INT64_MAX, &ipart, &frac_us);
    if (rc == STG_OK)
        rc = reset_to_us(ipart, frac_us, wall_now_us, &out);
    if (rc == STG_OK)
        *reset_us = out;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Merging several values into one stg_hints                                */

/* 128-bit product of two 64-bit numbers. */
static void mul_u128(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32;
    uint64_t b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    *lo = (mid << 32) | (p00 & 0xffffffffu);
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* Sign of q1/w1 - q2/w2, all arguments non-negative and w1, w2 > 0. */
static int cmp_rate(int64_t q1, int64_t w1, int64_t q2, int64_t w2)
{
    uint64_t h1, l1, h2, l2;
    mul_u128((uint64_t)q1, (uint64_t)w2, &h1, &l1);
    mul_u128((uint64_t)q2, (uint64_t)w1, &h2, &l2);
    if (h1 != h2)
        return h1 < h2 ? -1 : 1;
    if (l1 != l2)
        return l1 < l2 ? -1 : 1;
    return 0;
}

/* A limit q (>= 0) with its window (> 0, or STG_UNKNOWN). */
static void merge_policy(stg_hints *h, int64_t q, int64_t window_us)
{
    if (h->limit == STG_UNKNOWN) {
        h->limit = q;
        h->window_us = window_us;
    } else if (window_us != STG_UNKNOWN && h->window_us != STG_UNKNOWN) {
        int c = cmp_rate(q, window_us, h->limit, h->window_us);
        if (c < 0 || (c == 0 && q < h->limit)) {
            h->limit = q;
            h->window_us = window_us;
        }
    } else if (window_us != STG_UNKNOWN) {
        h->limit = q;
        h->window_us = window_us;
    } else if (h->window_us == STG_UNKNOWN && q < h->limit) {
        h->limit = q;
    }
}

/* A remaining count and its reset; either may be STG_UNKNOWN. */
static void merge_pair(stg_hints *h, int64_t remaining, int64_t reset_us)
{
    if (remaining == STG_UNKNOWN) {
        if (reset_us > h->reset_us)
            h->reset_us = reset_us;
    } else if (h->remaining == STG_UNKNOWN || remaining < h->remaining) {
        h->remaining = remaining;
        if (reset_us != STG_UNKNOWN)
            h->reset_us = reset_us;
    } else if (remaining == h->remaining && reset_us > h->reset_us) {
        h->reset_us = reset_us;
    }
}

/* ------------------------------------------------------------------------ */
/* Structured fields (RFC 8941 / RFC 9651), tolerant and allocation-free    */

typedef enum sf_type {
    SF_NONE = 0, /* absent */
    SF_INT,
    SF_DEC,
    SF_STR,
    SF_TOKEN,
    SF_BYTES,
    SF_BOOL,
    SF_DATE,
    SF_DSTR,
    SF_INNER
} sf_type;

/* A bare item. Only numbers keep their value: nothing here needs a string. */
typedef struct sf_item {
    sf_type type;
    bool neg;
    bool big;        /* integer part above INT64_MAX (saturated) */
    int64_t ipart;   /* magnitude of the integer part */
    int64_t frac_us; /* SF_DEC: fraction in microseconds, truncated */
} sf_item;

/* One list or dictionary member with the parameters this file cares about. */
typedef struct sf_member {
    bool is_dict;        /* key "=" value */
    const char *key;     /* dictionary key, when is_dict */
    size_t key_len;
    sf_item item;        /* the bare item, or the dictionary value */
    sf_item r, t, q, w;  /* parameters; type SF_NONE when absent */
} sf_member;

static bool sf_is_key_start(char c)
{
    return is_alpha(c) || c == '*';
}

static bool sf_is_key_char(char c)
{
    return is_alpha(c) || is_digit(c) || c == '_' || c == '-' || c == '.' || c == '*';
}

static bool sf_is_tchar(char c)
{
    if (is_alpha(c) || is_digit(c))
        return true;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*':
    case '+': case '-': case '.': case '^': case '_': case '`': case '|':
    case '~': case ':': case '/':
        return true;
    default:
        return false;
    }
}

static bool sf_is_b64(char c)
{
    return is_alpha(c) || is_digit(c) || c == '+' || c == '/' || c == '=';
}

static bool sf_is_hex_lc(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f');
}

static void sf_skip_sp(cursor *c)
{
    while (c->pos < c->len && c->s[c->pos] == ' ')
        c->pos++;
}

static void sf_skip_ows(cursor *c)
{
    while (c->pos < c->len && is_ows(c->s[c->pos]))
        c->pos++;
}

/* sf-integer / sf-decimal, with any number of digits. */
static int sf_number(cursor *c, sf_item *it)
{
    int64_t v = 0, f = 0, scale = US_PER_SEC;
    size_t start;
    it->neg = cur_char(c, '-');
    start = c->pos;
    while (c->pos < c->len && is_digit(c->s[c->pos])) {
        int d = c->s[c->pos++] - '0';
        if (it->big || v > (INT64_MAX - d) / 10)
            it->big = true;
        else
            v = v * 10 + d;
    }
    if (c->pos == start)
        return STG_EPARSE;
    it->ipart = it->big ? INT64_MAX : v;
    it->type = SF_INT;
    if (cur_char(c, '.')) {
        start = c->pos;
        while (c->pos < c->len && is_digit(c->s[c->pos])) {
            if (scale > 1) {
                scale /= 10;
                f += (c->s[c->pos] - '0') * scale;
            }
            c->pos++;
        }
        if (c->pos == start)
            return STG_EPARSE;
        it->type = SF_DEC;
        it->frac_us = f;
    }
    return STG_OK;
}

static int sf_bare_item(cursor *c, sf_item *it)
{
    char ch;
    it->type = SF_NONE;
    it->neg = it->big = false;
    it->ipart = it->frac_us = 0;
    if (cur_end(c))
        return STG_EPARSE;
    ch = c->s[c->pos];
    if (ch == '-' || is_digit(ch))
        return sf_number(c, it);
    if (ch == '"') {
        c->pos++;
        while (c->pos < c->len) {
            ch = c->s[c->pos++];
            if (ch == '"') {
                it->type = SF_STR;
                return STG_OK;
            }
            if (ch == '\\') {
                if (cur_end(c) || (c->s[c->pos] != '"' && c->s[c->pos] != '\\'))
                    return STG_EPARSE;
                c->pos++;
            } else if (ch < 0x20 || ch > 0x7e) {
                return STG_EPARSE;
            }
        }
        return STG_EPARSE;
    }
    if (sf_is_key_start(ch)) { /* token; "*" or ALPHA first */
        c->pos++;
        while (c->pos < c->len && sf_is_tchar(c->s[c->pos]))
            c->pos++;
        it->type = SF_TOKEN;
        return STG_OK;
    }
    if (ch == ':') {
        c->pos++;
        while (c->pos < c->len && sf_is_b64(c->s[c->pos]))
            c->pos++;
        if (!cur_char(c, ':'))
            return STG_EPARSE;
        it->type = SF_BYTES;
        return STG_OK;
    }
    if (ch == '?') {
        c->pos++;
        if (cur_char(c, '0') || cur_char(c, '1')) {
            it->type = SF_BOOL;
            it->ipart = c->s[c->pos - 1] - '0';
            return STG_OK;
        }
        return STG_EPARSE;
    }
    if (ch == '@') {
        c->pos++;
        if (sf_number(c, it) != STG_OK || it->type != SF_INT)
            return STG_EPARSE;
        it->type = SF_DATE;
        return STG_OK;
    }
    if (ch == '%') {
        c->pos++;
        if (!cur_char(c, '"'))
            return STG_EPARSE;
        while (c->pos < c->len) {
            ch = c->s[c->pos++];
            if (ch == '"') {
                it->type = SF_DSTR;
                return STG_OK;
            }
            if (ch == '%') {
                if (c->len - c->pos < 2 || !sf_is_hex_lc(c->s[c->pos]) ||
                    !sf_is_hex_lc(c->s[c->pos + 1]))
                    return STG_EPARSE;
                c->pos += 2;
            } else if (ch < 0x20 || ch > 0x7e) {
                return STG_EPARSE;
            }
        }
        return STG_EPARSE;
    }
    return STG_EPARSE;
}

static int sf_key(cursor *c, const char **key, size_t *key_len)
{
    size_t start = c->pos;
    if (cur_end(c) || !sf_is_key_start(c->s[c->pos]))
        return STG_EPARSE;
    while (c->pos < c->len && sf_is_key_char(c->s[c->pos]))
        c->pos++;
    *key = c->s + start;
    *key_len = c->pos - start;
    return STG_OK;
}

/* *( ";" *SP key [ "=" bare-item ] ); m may be NULL to discard them. A
 * parameter without a value is boolean true; a repeated one keeps the
 * last value. */
static int sf_params(cursor *c, sf_member *m)
{
    while (cur_char(c, ';')) {
        const char *key;
        size_t key_len;
        sf_item v = {SF_BOOL, false, false, 1, 0};
        sf_skip_sp(c);
        if (sf_key(c, &key, &key_len) != STG_OK)
            return STG_EPARSE;
        if (cur_char(c, '=') && sf_bare_item(c, &v) != STG_OK)
            return STG_EPARSE;
        if (!m || key_len != 1)
            continue;
        switch (to_lower(key[0])) {
        case 'r': m->r = v; break;
        case 't': m->t = v; break;
        case 'q': m->q = v; break;
        case 'w': m->w = v; break;
        default: break;
        }
    }
    return STG_OK;
}

/* "(" *SP [ sf-item *( 1*SP sf-item ) *SP ] ")" parameters; all skipped. */
static int sf_inner_list(cursor *c, sf_item *it)
{
    c->pos++; /* '(' */
    for (;;) {
        sf_item inner;
        sf_skip_sp(c);
        if (cur_char(c, ')'))
            break;
        if (sf_bare_item(c, &inner) != STG_OK || sf_params(c, NULL) != STG_OK)
            return STG_EPARSE;
        if (!cur_peek(c, ' ') && !cur_peek(c, ')'))
            return STG_EPARSE;
    }
    it->type = SF_INNER;
    return STG_OK;
}

/* A list member, or a dictionary member "key=value" / bare "key". A bare key
 * is read as a token item (both readings give the same parameters). */
static int sf_member_parse(cursor *c, sf_member *m)
{
    static const sf_member empty;
    *m = empty;
    if (!cur_end(c) && sf_is_key_start(c->s[c->pos])) {
        size_t save = c->pos;
        const char *key;
        size_t key_len;
        (void)sf_key(c, &key, &key_len);
        if (cur_char(c, '=')) {
            m->is_dict = true;
            m->key = key;
            m->key_len = key_len;
        } else {
            c->pos = save;
        }
    }
    if (cur_peek(c, '(')) {
        if (sf_inner_list(c, &m->item) != STG_OK)
            return STG_EPARSE;
    } else if (sf_bare_item(c, &m->item) != STG_OK) {
        return STG_EPARSE;
    }
    return sf_params(c, m);
}

/* What a structured field's members mean; fn gets each member in order and
 * may reject it. */
typedef int (*sf_member_fn)(void *ctx, const sf_member *m);

/* A list or dictionary: member *( OWS "," OWS member ), OWS trimmed. Empty
 * values and trailing commas are malformed. */
static int sf_parse_field(const char *s, size_t len, sf_member_fn fn, void *ctx)
{
    cursor c;
    trim_ows(&s, &len);
    if (len == 0)
        return STG_EPARSE;
    c.s = s;
    c.len = len;
    c.pos = 0;
    for (;;) {
        sf_member m;
        int rc;
        if (sf_member_parse(&c, &m) != STG_OK)
            return STG_EPARSE;
        rc = fn(ctx, &m);
        if (rc != STG_OK)
            return rc;
        sf_skip_ows(&c);
        if (cur_end(&c))
            return STG_OK;
        if (!cur_char(&c, ','))
            return STG_EPARSE;
        sf_skip_ows(&c);
        if (cur_end(&c))
            return STG_EPARSE;
    }
}

/* A count (r=, q=, limit=, remaining=): a non-negative integer. */
static int sf_count(const sf_item *it, int64_t *out)
{
    if (it->type != SF_INT || it->neg)
        return STG_EPARSE;
    if (it->big)
        return STG_ERANGE;
    *out = it->ipart;
    return STG_OK;
}

/* A reset (t=, reset=): non-negative integer or decimal seconds. */
static int sf_reset(const sf_item *it, int64_t wall_now_us, int64_t *out)
{
    if ((it->type != SF_INT && it->type != SF_DEC) || it->neg)
        return STG_EPARSE;
    if (it->big)
        return STG_ERANGE;
    return reset_to_us(it->ipart, it->frac_us, wall_now_us, out);
}

/* A window (w=): positive seconds, integer or decimal. */
static int sf_window(const sf_item *it, int64_t *out)
{
    if ((it->type != SF_INT && it->type != SF_DEC) || it->neg)
        return STG_EPARSE;
    if (it->big || it->ipart > MAX_SECS_TO_US)
        return STG_ERANGE;
    *out = it->ipart * US_PER_SEC + it->frac_us;
    return *out > 0 ? STG_OK : STG_EPARSE;
}

/* What one field contributes before it is merged into the caller's hints. */
typedef struct field_acc {
    stg_hints h;
    int64_t wall_now_us;
    int64_t dict_remaining; /* RateLimit dictionary form */
    int64_t dict_reset_us;
    bool saw_dict;          /* a key=value member */
    bool bare_token;        /* a token without r=: a bare dictionary key, or
                             * (if saw_dict stays false) a list item
                             * missing its r= */
} field_acc;

/* RateLimit: "name";r=R;t=T items, or limit=, remaining=, reset= members. */
static int on_ratelimit(void *ctx, const sf_member *m)
{
    field_acc *a = ctx;
    int64_t r, t = STG_UNKNOWN;
    int rc;
    if (m->is_dict) {
        a->saw_dict = true;
        if (eq_nocase(m->key, m->key_len, "limit")) {
            if ((rc = sf_count(&m->item, &r)) != STG_OK)
                return rc;
            merge_policy(&a->h, r, STG_UNKNOWN);
        } else if (eq_nocase(m->key, m->key_len, "remaining")) {
            return sf_count(&m->item, &a->dict_remaining);
        } else if (eq_nocase(m->key, m->key_len, "reset")) {
            return sf_reset(&m->item, a->wall_now_us, &a->dict_reset_us);
        }
        return STG_OK;
    }
    if (m->r.type == SF_NONE) {
        if (m->item.type != SF_TOKEN)
            return STG_EPARSE;
        a->bare_token = true;
        return STG_OK;
    }
    if ((rc = sf_count(&m->r, &r)) != STG_OK)
        return rc;
    if (m->t.type != SF_NONE && (rc = sf_reset(&m->t, a->wall_now_us, &t)) != STG_OK)
        return rc;
    merge_pair(&a->h, r, t);
    return STG_OK;
}

/* RateLimit-Policy: "name";q=Q;w=W items, or draft-07 Q;w=W items. */
static int on_policy(void *ctx, const sf_member *m)
{
    field_acc *a = ctx;
    int64_t q, w = STG_UNKNOWN;
    int rc;
    if (m->is_dict)
        return STG_EPARSE;
    if (m->q.type != SF_NONE)
        rc = sf_count(&m->q, &q);
    else if (m->item.type == SF_INT)
        rc = sf_count(&m->item, &q);
    else
        rc = STG_EPARSE;
    if (rc != STG_OK)
        return rc;
    if (m->w.type != SF_NONE && (rc = sf_window(&m->w, &w)) != STG_OK)
        return rc;
    merge_policy(&a->h, q, w);
    return STG_OK;
}

/* RateLimit-Limit (early drafts): Q or Q;w=W items. */
static int on_old_limit(void *ctx, const sf_member *m)
{
    field_acc *a = ctx;
    int64_t q, w = STG_UNKNOWN;
    int rc;
    if (m->is_dict)
        return STG_EPARSE;
    if ((rc = sf_count(&m->item, &q)) != STG_OK)
        return rc;
    if (m->w.type != SF_NONE && (rc = sf_window(&m->w, &w)) != STG_OK)
        return rc;
    merge_policy(&a->h, q, w);
    return STG_OK;
}

/* RateLimit-Remaining (early drafts): an integer. */
static int on_old_remaining(void *ctx, const sf_member *m)
{
    field_acc *a = ctx;
    int64_t r;
    int rc;
    if (m->is_dict)
        return STG_EPARSE;
    if ((rc = sf_count(&m->item, &r)) != STG_OK)
        return rc;
    merge_pair(&a->h, r, STG_UNKNOWN);
    return STG_OK;
}

/* ------------------------------------------------------------------------ */
/* Headers                                                                  */

void stg_hints_init(stg_hints *h)
{
    if (!h)
        return;
    h->retry_after_us = STG_UNKNOWN;
    h->limit = STG_UNKNOWN;
    h->remaining = STG_UNKNOWN;
    h->reset_us = STG_UNKNOWN;
    h->window_us = STG_UNKNOWN;
    h->seen = 0;
    h->malformed = 0;
}

enum hint_name {
    H_NONE,
    H_RETRY_AFTER,
    H_X_LIMIT,
    H_X_REMAINING,
    H_X_RESET,
    H_RL,
    H_RL_POLICY,
    H_RL_LIMIT,
    H_RL_REMAINING,
    H_RL_RESET
};

static enum hint_name hint_lookup(const char *name, size_t len)
{
    static const struct {
        const char *name;
        enum hint_name id;
    } names[] = {
        {"retry-after", H_RETRY_AFTER},
        {"x-ratelimit-limit", H_X_LIMIT},
        {"x-ratelimit-remaining", H_X_REMAINING},
        {"x-ratelimit-reset", H_X_RESET},
        {"ratelimit", H_RL},
        {"ratelimit-policy", H_RL_POLICY},
        {"ratelimit-limit", H_RL_LIMIT},
        {"ratelimit-remaining", H_RL_REMAINING},
        {"ratelimit-reset", H_RL_RESET},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (eq_nocase(name, len, names[i].name))
            return names[i].id;
    }
    return H_NONE;
}

int stg_hints_header(stg_hints *h, const char *name, size_t name_len, const char *value,
                     size_t value_len, int64_t wall_now_us)
{
    field_acc a;
    unsigned bit;
    int64_t v;
    int rc;
    enum hint_name id;

    if (!h)
        return STG_EINVAL;
    if (!name)
        name_len = 0;
    if (!value)
        value_len = 0;
    trim_ows(&name, &name_len);
    id = hint_lookup(name, name_len);
    if (id == H_NONE)
        return STG_OK;

    stg_hints_init(&a.h);
    a.wall_now_us = wall_now_us;
    a.dict_remaining = STG_UNKNOWN;
    a.dict_reset_us = STG_UNKNOWN;
    a.saw_dict = a.bare_token = false;
    switch (id) {
    case H_RETRY_AFTER:
        bit = STG_HINT_RETRY_AFTER;
        rc = stg_retry_after_parse(value, value_len, wall_now_us, &v);
        if (rc == STG_OK && v > h->retry_after_us)
            h->retry_after_us = v;
        break;
    case H_X_LIMIT:
        bit = STG_HINT_X_RATELIMIT;
        trim_ows(&value, &value_len);
        rc = parse_digits(value, value_len, INT64_MAX, &v);
        if (rc == STG_OK)
            merge_policy(h, v, STG_UNKNOWN);
        break;
    case H_X_REMAINING:
        bit = STG_HINT_X_RATELIMIT;
        trim_ows(&value, &value_len);
        rc = parse_digits(value, value_len, INT64_MAX, &v);
        if (rc == STG_OK)
            merge_pair(h, v, STG_UNKNOWN);
        break;
    case H_X_RESET:
    case H_RL_RESET:
        bit = id == H_X_RESET ? STG_HINT_X_RATELIMIT : STG_HINT_RATELIMIT;
        rc = stg_ratelimit_reset_parse(value, value_len, wall_now_us, &v);
        if (rc == STG_OK)
            merge_pair(h, STG_UNKNOWN, v);
        break;
    case H_RL:
    case H_RL_LIMIT:
    case H_RL_REMAINING:
    case H_RL_POLICY:
    default:
        bit = id == H_RL_POLICY ? STG_HINT_RATELIMIT_POLICY : STG_HINT_RATELIMIT;
        rc = sf_parse_field(value, value_len,
                            id == H_RL            ? on_ratelimit
                            : id == H_RL_POLICY   ? on_policy
                            : id == H_RL_LIMIT    ? on_old_limit
                                                  : on_old_remaining,
                            &a);
        if (rc == STG_OK && a.bare_token && !a.saw_dict)
            rc = STG_EPARSE;
        if (rc == STG_OK) {
            merge_pair(&a.h, a.dict_remaining, a.dict_reset_us);
            if (a.h.limit != STG_UNKNOWN)
                merge_policy(h, a.h.limit, a.h.window_us);
            merge_pair(h, a.h.remaining, a.h.reset_us);
        }
        break;
    }
    if (rc != STG_OK) {
        h->malformed |= bit;
        return rc;
    }
    h->seen |= bit;
    return STG_OK;
}

int stg_hints_header_line(stg_hints *h, const char *line, size_t len, int64_t wall_now_us)
{
    size_t colon = 0;
    if (!h)
        return STG_EINVAL;
    if (!line)
        return STG_OK;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    while (colon < len && line[colon] != ':')
        colon++;
    if (colon == len)
        return STG_OK;
    return stg_hints_header(h, line, colon, line + colon + 1, len - colon - 1, wall_now_us);
}

bool stg_hints_server_wait(const stg_hints *h, int64_t *wait_us)
{
    int64_t w;
    if (!h)
        return false;
    if (h->retry_after_us >= 0)
        w = h->retry_after_us;
    else if (h->remaining == 0 && h->reset_us >= 0)
        w = h->reset_us;
    else
        return false;
    if (wait_us)
        *wait_us = w;
    return true;
}
