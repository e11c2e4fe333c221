/*
 * One option table per subcommand (the model is curl's tool_getparam.c
 * aliases[]): each option is declared once, with its long and short name,
 * the name of its value, its --help text and what it sets, and the parser,
 * `--help` and `stagger help --options CMD` (which the man-page test reads)
 * are all generated from that one declaration. A second place that knows an
 * option's name is how a man page, a help screen and the parser drift apart.
 *
 * Invariants: a table ends with a CLI_END entry; no two visible entries of
 * one command (groups included) share a long or a short name; an entry that
 * takes a value has `arg` set and one that takes none has it NULL, so
 * "does it take a value" has exactly one answer, which the parser, the help
 * and the man page all show. Values are argv strings, never copied: they
 * live as long as argv.
 */
#ifndef STAGGER_CLI_OPT_H
#define STAGGER_CLI_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct cli_opt cli_opt;
typedef struct cli_parser cli_parser;
typedef struct cli_command cli_command;
struct stg_policy;

/* A default that depends on the command (a policy preset's value): written
 * into buf (NUL-terminated), "" when none. */
typedef void (*cli_default_fn)(const cli_command *c, char *buf, size_t size);

/* Apply an option: field is the parser's ctx plus the entry's off (inside a
 * group: the group's ctx plus off); val is the value, NULL for a flag.
 * Returns 0, or an exit status after one line on stderr (usually
 * CLI_EXIT_USAGE through cli_opt_bad or cli_usage_error). */
typedef int (*cli_opt_fn)(cli_parser *p, const cli_opt *o, void *field, const char *val);

enum cli_opt_kind {
    CLI_END = 0,
    CLI_HEADING, /* --help: a section title ("Output") */
    CLI_TEXT,    /* --help: a paragraph, printed as is */
    CLI_FLAG,    /* bool at off becomes true */
    CLI_STRING,  /* const char * at off becomes the value */
    CLI_FN,      /* fn(p, o, ctx + off, val) */
    CLI_GROUP,   /* the entries of group, with ctx + off as their ctx */
    CLI_HELP,    /* -h, --help: print the help, parse returns 0 */
    CLI_VERSION, /* -V, --version: print the version, parse returns 0 */
};

enum {
    CLI_OPT_EARLY = 1u << 0,  /* applied before every other option wherever it
                                 appears (--preset resets the policy) */
    CLI_OPT_HIDDEN = 1u << 1, /* parsed, but in no help and no man page: only
                                 for an option that exists to say "not here"
                                 (fetch --share-breaker) */
    CLI_OPT_NO_DEFAULTS = 1u << 2, /* on a CLI_GROUP: its entries' defaults are not
                                      this command's (sim: each scenario sets its
                                      own policy), so none is shown or applied */
};

struct cli_opt {
    enum cli_opt_kind kind;
    const char *name;     /* long name without "--"; NULL: short only */
    char letter;          /* short name; 0: none */
    const char *arg;      /* the value's name as --help and the man page write it;
                             NULL: the option takes no value */
    const char *help;     /* --help text; lines separated by '\n' */
    size_t off;           /* offset of the field in ctx */
    cli_opt_fn fn;        /* CLI_FN */
    const cli_opt *group; /* CLI_GROUP */
    unsigned flags;       /* CLI_OPT_* */
    /* Where the man text is: NULL, the command's own page describes the
     * option in full; else the page that does (e.g. "stagger-plan(1)") and
     * the command's page only lists it and refers there. On a CLI_GROUP,
     * for every option in it. Checked by test_cli_options.sh. */
    const char *man;
    /* The option's default, written once, here (curl's test1139 model):
     * --help appends "(default DEF)" to the text, `stagger help --options`
     * lists it (test_cli_options.sh checks the man page says the same),
     * and cli_parse applies it through fn before reading argv, so the code
     * starts from it too. As it is typed ("30s", "wait"). NULL: none here. */
    const char *def;
    /* Or a default the command decides (its policy preset's value, sim's
     * scenario's): shown and listed like def; the command applies it itself
     * (policy_defaults, sim_opts_default), never cli_parse. */
    cli_default_fn def_fn;
    /* The values the option takes, space-separated, for the shell
     * completions ("auto bar lines none"); NULL: none listed, or the
     * lower-case words of an arg such as "wait|defer". */
    const char *values;
};

/* Table-building shorthands. */
#define CLI_OPT_END                                                                                \
    {                                                                                              \
        .kind = CLI_END                                                                            \
    }
#define CLI_OPT_HELP_ENTRY                                                                         \
    {                                                                                              \
        .kind = CLI_HELP, .name = "help", .letter = 'h', .help = "show this help"                  \
    }

/* In every command's table (stagger(1): -V works after any subcommand). */
#define CLI_OPT_VERSION_ENTRY                                                                      \
    {                                                                                              \
        .kind = CLI_VERSION, .name = "version", .letter = 'V',                                     \
        .help = "print the version and exit"                                                       \
    }

/* A subcommand: its table and the text around the generated list. */
struct cli_command {
    const char *name;  /* "fetch", "batch report" */
    const char *usage; /* help text before the options */
    const cli_opt *opts;
    const char *epilogue; /* help text after the options (may be NULL) */
    const int *exits;     /* the exit statuses it uses, ending with -1 */
    /* The command's retry policy before its options (batch: the "batch"
     * preset; proxy: a 10 min deadline); NULL: the zeroed policy, the
     * project default. The command calls it, and --help reads the policy
     * options' defaults from it (cli_policy_default_*): one source. */
    void (*policy_defaults)(struct stg_policy *p);
};

struct cli_parser {
    const cli_command *cmd;
    void *ctx;
    /* A positional argument; NULL: positional arguments are a usage error.
     * Returns 0 or an exit status, as cli_opt_fn. */
    int (*positional)(cli_parser *p, const char *arg);
    const char *spelled; /* the option being applied, as typed ("-X", "--request") */
    bool in_defaults;    /* applying the table's defaults (before argv): a handler
                            that must know "given" (a check such as "needs
                            --queue") looks here */
};

/* Parse argv (argv[0] is skipped): "--name value", "--name=value", "-X
 * value", "-Xvalue", bundled short flags ("-sv"), positional arguments,
 * "--" ending the options, "-" alone is positional. Entries flagged
 * CLI_OPT_EARLY are applied in a first pass. Returns -1 when parsed and the
 * command should run, 0 after --help, or an exit status after a one-line
 * usage error. */
int cli_parse(cli_parser *p, int argc, char **argv);

/* "stagger CMD: bad value 'V' for --name: WHAT"; returns CLI_EXIT_USAGE. */
int cli_opt_bad(const cli_parser *p, const char *val, const char *what);

/* The command's name for messages ("fetch"). */
const char *cli_cmd_name(const cli_parser *p);

/* Write the command's --help (generated from its table) to out. */
void cli_help(const cli_command *c, FILE *out);

/* The default of o in c (def, def_fn, or a "(default X" its help text
 * writes) into buf; false when it has none. */
bool cli_opt_default(const cli_command *c, const cli_opt *o, char *buf, size_t size);

/* One line per visible option, "NAME\tLETTER\tARG\tMAN\tDEFAULT\tVALUES\tHELP"
 * (empty fields as "-"; VALUES space-separated, HELP the first line of the
 * help text, for the completions' descriptions),
 * in table order: what docs/stagger-*.1 must list (tests/integration/
 * test_cli_options.sh). */
void cli_dump_options(const cli_command *c, FILE *out);

/* ---- `stagger help --defaults CMD [ARG...]` (hidden; test_cli_options.sh) ----------
 * The check that a table's default is the value the command really runs
 * with (curl's test1139 model, issue #37). main sets cli_defaults_out and
 * runs the command as usual, with ARGs that touch no defaulted option; the
 * command, once it has built the config it would run with (and before any
 * side effect: no socket, file or thread), sees cli_defaults_probe() and
 * prints one cli_defaults_row per option from that config, then returns
 * 0. A row parses the table's default the way the option's value kind is
 * parsed and compares it with the value given, so the check reads the real
 * config, never the table with itself. */
enum cli_val_kind {
    CLI_VAL_INT,      /* long long */
    CLI_VAL_DOUBLE,   /* double */
    CLI_VAL_DURATION, /* int64_t microseconds; "none" is 0 */
    CLI_VAL_SIZE,     /* long long bytes; k, M, G suffixes (cli_parse_size) */
    CLI_VAL_STRING,   /* const char *; NULL as "" */
};

extern FILE *cli_defaults_out;

/* True when the command is run by `stagger help --defaults`. */
bool cli_defaults_probe(void);

/* "NAME\tTABLE\tACTUAL\tVERDICT" on cli_defaults_out: VERDICT is "ok" when
 * the default of --name in c's table, read as kind, equals the value (the
 * one vararg, of kind's type), "DIFFERS" when not, "NO-DEFAULT" when there
 * is none, "NOT-IN-TABLE" when only the help text writes it (no def or
 * def_fn) and "UNPARSED" when it is not a value of kind. */
void cli_defaults_row(const cli_command *c, const char *name, enum cli_val_kind kind, ...);

/* Whether c has a visible option named name. */
bool cli_command_has_option(const cli_command *c, const char *name);

/* The visible long name of c closest to the unknown name (n bytes), or
 * NULL when none is close enough to be a likely typo: for "did you mean". */
const char *cli_closest_option(const cli_command *c, const char *name, size_t n);

/* The edit distance of a and b (adjacent transpositions count one), for
 * "did you mean"; SIZE_MAX for names of 64 bytes or more. */
size_t cli_distance(const char *a, const char *b);

#endif
