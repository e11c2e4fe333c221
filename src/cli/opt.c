/*
 * The option-table parser and the help generator (see opt.h), and the
 * exit-status table's printers (exit.h).
 *
 * Invariants: lookup walks groups depth-first in table order, so the first
 * visible entry with a name wins (a table that declared a name twice would
 * shadow the second: STG_ASSERT on it in cli_help, which every --help and
 * the option test run). Pass 1 applies only CLI_OPT_EARLY entries and
 * reports nothing, pass 2 everything else in argv order, so an error is
 * reported by the same pass for the same argv whatever the flag order.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "cli/opt.h"
#include "util/assert.h"

#define HELP_COLUMN 25 /* where --help texts start */

const char *cli_cmd_name(const cli_parser *p)
{
    return p->cmd->name;
}

int cli_opt_bad(const cli_parser *p, const char *val, const char *what)
{
    return cli_usage_error(p->cmd->name, "bad value '%s' for %s: %s", val ? val : "",
                           p->spelled ? p->spelled : "?", what);
}

static bool is_option(const cli_opt *o)
{
    return o->kind == CLI_FLAG || o->kind == CLI_STRING || o->kind == CLI_FN ||
           o->kind == CLI_HELP || o->kind == CLI_VERSION;
}

/* Find by long name (n bytes of name) or by letter; *ctx is updated to the
 * entry's group ctx. */
static const cli_opt *find(const cli_opt *t, void **ctx, const char *name, size_t n, char letter)
{
    for (const cli_opt *o = t; o->kind != CLI_END; o++) {
        if (o->kind == CLI_GROUP) {
            void *sub = (char *)*ctx + o->off;
            const cli_opt *hit = find(o->group, &sub, name, n, letter);
            if (hit) {
                *ctx = sub;
                return hit;
            }
            continue;
        }
        if (!is_option(o))
            continue;
        if (name && o->name && strlen(o->name) == n && !strncmp(o->name, name, n))
            return o;
        if (!name && letter && o->letter == letter)
            return o;
    }
    return NULL;
}

static int apply(cli_parser *p, const cli_opt *o, void *ctx, const char *val)
{
    void *field = (char *)ctx + o->off;
    switch (o->kind) {
    case CLI_FLAG:
        *(bool *)field = true;
        return 0;
    case CLI_STRING:
        *(const char **)field = val;
        return 0;
    case CLI_FN:
        return o->fn(p, o, field, val);
    case CLI_HELP:
        cli_help(p->cmd, stdout);
        return 0;
    case CLI_VERSION:
        printf("stagger %s\n", stg_version());
        return 0;
    default:
        STG_ASSERT(!"not an option");
        return CLI_EXIT_USAGE;
    }
}

/* Edit distance with adjacent transpositions (optimal string alignment):
 * "retreis" is one step from "retries", as a typing slip is. */
static size_t distance(const char *a, size_t na, const char *b, size_t nb)
{
    enum { W = 64 };
    if (na >= W || nb >= W)
        return SIZE_MAX;
    size_t d[W][W];
    for (size_t i = 0; i <= na; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= nb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[na][nb];
}

static void closest(const cli_opt *t, const char *name, size_t n, const char **best,
                    size_t *best_d)
{
    for (const cli_opt *o = t; o->kind != CLI_END; o++) {
        if (o->flags & CLI_OPT_HIDDEN)
            continue;
        if (o->kind == CLI_GROUP) {
            closest(o->group, name, n, best, best_d);
            continue;
        }
        if (!is_option(o) || !o->name)
            continue;
        size_t len = strlen(o->name);
        /* A prefix ("--retr") is as likely a slip as one wrong letter. */
        bool prefix = n >= 3 && n < len && !strncmp(o->name, name, n);
        size_t d = prefix ? 1 : distance(name, n, o->name, len);
        if (d < *best_d) {
            *best_d = d;
            *best = o->name;
        }
    }
}

size_t cli_distance(const char *a, const char *b)
{
    return distance(a, strlen(a), b, strlen(b));
}

const char *cli_closest_option(const cli_command *c, const char *name, size_t n)
{
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    closest(c->opts, name, n, &best, &best_d);
    /* One slip in a short name, up to a third of a long one. */
    size_t limit = n <= 6 ? 1 : n / 3;
    return best && best_d <= limit ? best : NULL;
}

static int unknown_long(const cli_parser *p, const char *spelled, const char *name, size_t n)
{
    const char *near = cli_closest_option(p->cmd, name, n);
    if (near)
        return cli_usage_error(p->cmd->name, "unknown option %s; did you mean --%s?", spelled,
                               near);
    return cli_usage_error(p->cmd->name, "unknown option %s (see --help)", spelled);
}

/* Whether this pass applies o. */
static bool now(const cli_opt *o, int pass)
{
    bool early = (o->flags & CLI_OPT_EARLY) != 0;
    return pass == 1 ? early : !early;
}

/* One option argument at argv[*i] (a long or a short bundle). Returns 0, an
 * exit status, or -2 after --help. */
static int one(cli_parser *p, int argc, char **argv, int *i, int pass)
{
    const char *s = argv[*i];
    char spelled[80];
    p->spelled = spelled;
    if (s[1] == '-') {
        const char *name = s + 2, *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        void *ctx = p->ctx;
        const cli_opt *o = find(p->cmd->opts, &ctx, name, n, 0);
        snprintf(spelled, sizeof spelled, "--%.*s", (int)(n < 60 ? n : 60), name);
        if (!o)
            return pass == 1 ? 0 : unknown_long(p, spelled, name, n);
        const char *val = NULL;
        if (o->arg) {
            val = eq ? eq + 1 : *i + 1 < argc ? argv[++*i] : NULL;
            if (!val)
                return pass == 1 ? 0 : cli_missing_value(p->cmd->name, spelled);
        } else if (eq) {
            return pass == 1 ? 0
                             : cli_usage_error(p->cmd->name, "option %s takes no value", spelled);
        }
        if (!now(o, pass))
            return 0;
        int rc = apply(p, o, ctx, val);
        return rc == 0 && (o->kind == CLI_HELP || o->kind == CLI_VERSION) ? -2 : rc;
    }
    for (const char *c = s + 1; *c; c++) {
        void *ctx = p->ctx;
        const cli_opt *o = find(p->cmd->opts, &ctx, NULL, 0, *c);
        snprintf(spelled, sizeof spelled, "-%c", *c);
        if (!o)
            return pass == 1 ? 0
                             : cli_usage_error(p->cmd->name, "unknown option %s (see --help)",
                                               spelled);
        const char *val = NULL;
        if (o->arg) {
            val = c[1] ? c + 1 : *i + 1 < argc ? argv[++*i] : NULL;
            if (!val)
                return pass == 1 ? 0 : cli_missing_value(p->cmd->name, spelled);
        }
        if (now(o, pass)) {
            int rc = apply(p, o, ctx, val);
            if (rc != 0)
                return rc;
            if (o->kind == CLI_HELP || o->kind == CLI_VERSION)
                return -2;
        }
        if (o->arg)
            break; /* the rest of this argument was the value */
    }
    return 0;
}

static int walk(cli_parser *p, int argc, char **argv, int pass)
{
    bool only_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!only_positional && !strcmp(s, "--")) {
            only_positional = true;
            continue;
        }
        if (only_positional || s[0] != '-' || s[1] == '\0') {
            if (pass == 1)
                continue;
            p->spelled = NULL;
            int rc = p->positional ? p->positional(p, s)
                                   : cli_usage_error(p->cmd->name, "unexpected argument '%s'", s);
            if (rc != 0)
                return rc;
            continue;
        }
        int rc = one(p, argc, argv, &i, pass);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Pass 0: every entry's def through its own handler (the table is where
 * the code's defaults come from, as the help's). A def the handler refuses
 * is a bug in the table: asserted. */
static void apply_defaults(cli_parser *p, const cli_opt *t, void *ctx)
{
    for (const cli_opt *o = t; o->kind != CLI_END; o++) {
        if (o->kind == CLI_GROUP) {
            if (!(o->flags & CLI_OPT_NO_DEFAULTS))
                apply_defaults(p, o->group, (char *)ctx + o->off);
            continue;
        }
        if (!o->def || (o->kind != CLI_FN && o->kind != CLI_STRING))
            continue;
        p->spelled = o->name;
        p->in_defaults = true;
        int rc = apply(p, o, ctx, o->def);
        p->in_defaults = false;
        STG_ASSERT(rc == 0);
        (void)rc;
    }
}

int cli_parse(cli_parser *p, int argc, char **argv)
{
    apply_defaults(p, p->cmd->opts, p->ctx);
    for (int pass = 1; pass <= 2; pass++) {
        int rc = walk(p, argc, argv, pass);
        if (rc == -2)
            return 0;
        if (rc != 0)
            return rc;
    }
    p->spelled = NULL;
    return -1;
}

/* ---- help ------------------------------------------------------------------- */

/* Print text (lines separated by '\n') starting at column col, the first
 * line continuing what is already printed. */
static void indented(FILE *out, const char *text, int col)
{
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (line != text)
            fprintf(out, "%*s", col, "");
        fprintf(out, "%.*s\n", (int)n, line);
        line = nl ? nl + 1 : line + n;
    }
}

bool cli_opt_default(const cli_command *c, const cli_opt *o, char *buf, size_t size)
{
    STG_ASSERT(size > 0);
    buf[0] = '\0';
    if (o->def)
        snprintf(buf, size, "%s", o->def);
    else if (o->def_fn)
        o->def_fn(c, buf, size);
    else if (o->help) { /* "(default X)" or "(default X; ...)" written in the text */
        const char *d = strstr(o->help, "(default ");
        if (!d)
            return false;
        d += 9;
        size_t n = 0;
        int depth = 0;
        while (d[n] && d[n] != '\n' && !(depth == 0 && strchr(";:,)", d[n]))) {
            depth += d[n] == '(' ? 1 : d[n] == ')' ? -1 : 0;
            n++;
        }
        snprintf(buf, size, "%.*s", (int)n, d);
    }
    return buf[0] != '\0';
}

/* The help text, then "(default X)" for an option whose default the table
 * holds (def, def_fn). */
static void help_text(FILE *out, const cli_command *c, const cli_opt *o, bool nodef)
{
    char def[96];
    if (nodef || !(o->def || o->def_fn) || !cli_opt_default(c, o, def, sizeof def)) {
        indented(out, o->help, HELP_COLUMN);
        return;
    }
    const char *last = strrchr(o->help, '\n');
    size_t last_len = strlen(last ? last + 1 : o->help);
    char text[1024];
    snprintf(text, sizeof text, "%s%s(default %s)", o->help,
             last_len + strlen(def) + 11 <= 80 - HELP_COLUMN ? " " : "\n", def);
    indented(out, text, HELP_COLUMN);
}

static void help_option(FILE *out, const cli_command *c, const cli_opt *o, bool nodef)
{
    char left[160];
    int n;
    if (o->letter && o->name)
        n = snprintf(left, sizeof left, "  -%c, --%s", o->letter, o->name);
    else if (o->letter)
        n = snprintf(left, sizeof left, "  -%c", o->letter);
    else
        n = snprintf(left, sizeof left, "      --%s", o->name);
    if (o->arg)
        n += snprintf(left + n, sizeof left - (size_t)n, " %s", o->arg);
    fputs(left, out);
    if (!o->help || !*o->help) {
        fputc('\n', out);
        return;
    }
    if (n >= HELP_COLUMN)
        fprintf(out, "\n%*s", HELP_COLUMN, "");
    else
        fprintf(out, "%*s", HELP_COLUMN - n, "");
    help_text(out, c, o, nodef);
}

/* Every visible option of t, in order, for the duplicate check. */
static size_t collect(const cli_opt *t, const cli_opt **all, size_t n, size_t cap)
{
    for (const cli_opt *o = t; o->kind != CLI_END; o++) {
        if (o->kind == CLI_GROUP)
            n = collect(o->group, all, n, cap);
        else if (is_option(o) && n < cap)
            all[n++] = o;
    }
    return n;
}

/* No two entries of a command share a name (opt.h's invariant). */
static bool names_unique(const cli_command *c)
{
    const cli_opt *all[256];
    size_t n = collect(c->opts, all, 0, sizeof all / sizeof all[0]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            if (all[i]->name && all[j]->name && !strcmp(all[i]->name, all[j]->name))
                return false;
            if (all[i]->letter && all[i]->letter == all[j]->letter)
                return false;
        }
    return n < sizeof all / sizeof all[0];
}

static void help_table(FILE *out, const cli_command *c, const cli_opt *t, bool nodef)
{
    for (const cli_opt *o = t; o->kind != CLI_END; o++) {
        if (o->flags & CLI_OPT_HIDDEN)
            continue;
        switch (o->kind) {
        case CLI_HEADING:
            fprintf(out, "\n%s:\n", o->help);
            break;
        case CLI_TEXT:
            fputs(o->help, out);
            break;
        case CLI_GROUP:
            help_table(out, c, o->group, nodef || (o->flags & CLI_OPT_NO_DEFAULTS));
            break;
        default:
            help_option(out, c, o, nodef);
            break;
        }
    }
}

void cli_help(const cli_command *c, FILE *out)
{
    STG_ASSERT(names_unique(c));
    fputs(c->usage, out);
    help_table(out, c, c->opts, false);
    if (c->epilogue) {
        fputc('\n', out);
        fputs(c->epilogue, out);
    }
    fputc('\n', out);
    cli_exit_help(c->exits, out);
}

/* The values of o for the completions: its list, or the lower-case words
 * of an arg such as "wait|defer" or "KEY|auto". */
static void opt_values(const cli_opt *o, char *buf, size_t size)
{
    buf[0] = '\0';
    if (o->values) {
        snprintf(buf, size, "%s", o->values);
        return;
    }
    if (!o->arg || !strchr(o->arg, '|'))
        return;
    size_t w = 0;
    for (const char *p = o->arg; *p;) {
        size_t n = strcspn(p, "|");
        bool word = n > 0;
        for (size_t i = 0; i < n; i++)
            word = word && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') ||
                            p[i] == '-');
        if (word && w + n + 2 < size) {
            if (w)
                buf[w++] = ' ';
            memcpy(buf + w, p, n);
            w += n;
            buf[w] = '\0';
        }
        p += n + (p[n] == '|');
    }
}

static void dump_table(FILE *out, const cli_command *c, const cli_opt *t, const char *man,
                       bool nodef)
{
    for (const cli_opt *o = t; o->kind != CLI_END; o++) {
        if (o->flags & CLI_OPT_HIDDEN)
            continue;
        const char *ref = o->man ? o->man : man;
        char def[96], values[256];
        if (o->kind == CLI_GROUP) {
            dump_table(out, c, o->group, ref, nodef || (o->flags & CLI_OPT_NO_DEFAULTS));
        } else if (is_option(o)) {
            opt_values(o, values, sizeof values);
            const char *h = o->help ? o->help : "";
            int hl = (int)strcspn(h, "\n\t");
            fprintf(out, "%s\t%c\t%s\t%s\t%s\t%s\t%.*s\n", o->name ? o->name : "-",
                    o->letter ? o->letter : '-', o->arg ? o->arg : "-", ref ? ref : "-",
                    !nodef && cli_opt_default(c, o, def, sizeof def) ? def : "-",
                    values[0] ? values : "-", hl ? hl : 1, hl ? h : "-");
        }
    }
}

void cli_dump_options(const cli_command *c, FILE *out)
{
    STG_ASSERT(names_unique(c));
    dump_table(out, c, c->opts, NULL, false);
}

/* ---- help --defaults: the table's defaults against the config the command built -- */

FILE *cli_defaults_out;

bool cli_defaults_probe(void)
{
    return cli_defaults_out != NULL;
}

/* The visible entry named name in t (groups included). */
static const cli_opt *named(const cli_opt *t, const char *name)
{
    for (const cli_opt *o = t; o->kind != CLI_END; o++) {
        if (o->kind == CLI_GROUP) {
            const cli_opt *hit = named(o->group, name);
            if (hit)
                return hit;
        } else if (is_option(o) && o->name && !strcmp(o->name, name) &&
                   !(o->flags & CLI_OPT_HIDDEN)) {
            return o;
        }
    }
    return NULL;
}

bool cli_command_has_option(const cli_command *c, const char *name)
{
    return named(c->opts, name) != NULL;
}

void cli_defaults_row(const cli_command *c, const char *name, enum cli_val_kind kind, ...)
{
    STG_ASSERT(cli_defaults_out);
    const cli_opt *o = named(c->opts, name);
    STG_ASSERT(o); /* a row for an option the command does not have: a typo here */
    char def[96], actual[256];
    bool has = o && cli_opt_default(c, o, def, sizeof def);
    bool parsed = false, same = false;
    va_list ap;
    va_start(ap, kind);
    switch (kind) {
    case CLI_VAL_INT: {
        long long v = va_arg(ap, long long), d;
        snprintf(actual, sizeof actual, "%lld", v);
        parsed = has && cli_parse_int(def, LLONG_MIN, LLONG_MAX, &d);
        same = parsed && d == v;
        break;
    }
    case CLI_VAL_DOUBLE: {
        double v = va_arg(ap, double), d;
        snprintf(actual, sizeof actual, "%g", v);
        parsed = has && cli_parse_double(def, -1e300, 1e300, &d);
        same = parsed && d == v;
        break;
    }
    case CLI_VAL_DURATION: {
        int64_t v = va_arg(ap, int64_t), d = 0;
        snprintf(actual, sizeof actual, "%" PRId64 "us", v);
        parsed = has && (!strcmp(def, "none") || cli_parse_duration(def, &d));
        same = parsed && d == v;
        break;
    }
    case CLI_VAL_SIZE: {
        long long v = va_arg(ap, long long), d;
        snprintf(actual, sizeof actual, "%lld", v);
        parsed = has && cli_parse_size(def, 0, LLONG_MAX, &d);
        same = parsed && d == v;
        break;
    }
    case CLI_VAL_STRING: {
        const char *v = va_arg(ap, const char *);
        snprintf(actual, sizeof actual, "%s", v ? v : "");
        parsed = has;
        same = parsed && !strcmp(def, actual);
        break;
    }
    }
    va_end(ap);
    /* A default only written in the help text is a second source. */
    bool table = o && (o->def || o->def_fn);
    fprintf(cli_defaults_out, "%s\t%s\t%s\t%s\n", name, has ? def : "-", actual,
            !has     ? "NO-DEFAULT"
            : !table ? "NOT-IN-TABLE"
            : !parsed ? "UNPARSED"
            : same    ? "ok"
                      : "DIFFERS");
}

/* ---- exit statuses -------------------------------------------------------------- */

static const struct {
    int num;
    const char *word, *text;
} exits[] = {
#define CLI_EXIT_ROW(name, num, word, text) {num, word, text},
    CLI_EXIT_MAP(CLI_EXIT_ROW)
#undef CLI_EXIT_ROW
};

const char *cli_exit_word(int status)
{
    for (size_t i = 0; i < sizeof exits / sizeof exits[0]; i++)
        if (exits[i].num == status)
            return exits[i].word;
    return "?";
}

void cli_exit_help(const int *list, FILE *out)
{
    int col = fprintf(out, "Exit status:");
    for (size_t i = 0; list && list[i] >= 0; i++) {
        char item[64];
        int n = snprintf(item, sizeof item, " %d %s%s", list[i], cli_exit_word(list[i]),
                         list[i + 1] >= 0 ? ";" : ".");
        const char *text = item;
        if (col + n > 78) {
            fputc('\n', out);
            col = 0;
            text++, n--; /* no leading space on a new line */
        }
        fputs(text, out);
        col += n;
    }
    fputs("\nSee stagger(1) for what each status means.\n", out);
}

void cli_exit_dump(FILE *out)
{
    for (size_t i = 0; i < sizeof exits / sizeof exits[0]; i++)
        fprintf(out, "%d\t%s\n", exits[i].num, exits[i].text);
}
