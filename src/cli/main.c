/*
 * `stagger`: the command-line tool. Dispatches to one subcommand per file;
 * subcommands whose library part was not built (missing Debian package) are
 * left out of the table and reported as such.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cli/cli.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    const cli_command *table;
};

static const struct command commands[] = {
    {"plan", cli_plan_main, "show what a retry policy does: schedules and decisions",
     &cli_plan_command},
#ifdef STG_HAVE_SIM
    {"sim", cli_sim_main, "replay retry storms in virtual time", &cli_sim_command},
#endif
#ifdef STG_HAVE_SERVER
    {"serve", cli_serve_main, "run a rate-limited HTTP test server on loopback",
     &cli_serve_command},
#endif
#ifdef STG_HAVE_CURL
    {"fetch", cli_fetch_main, "one HTTP request with polite retries (curl-like)",
     &cli_fetch_command},
#endif
#if defined(STG_HAVE_PROXY) && defined(STG_HAVE_CURL)
    {"proxy", cli_proxy_main, "a local HTTP proxy: polite retries for any program",
     &cli_proxy_command},
#endif
#ifdef STG_HAVE_STORE
    {"batch", cli_batch_main, "durable, resumable batch of requests", &cli_batch_command},
    {"batch report", NULL, NULL, &cli_batch_report_command},
    {"batch export", NULL, NULL, &cli_batch_export_command},
#endif
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: stagger COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (commands[i].run)
            fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n`stagger COMMAND --help` describes each; `stagger --version` prints the version.\n"
            "`stagger help --exit-codes` lists the exit statuses, the same for every command;\n"
            "`stagger help --options COMMAND` its options, one a line;\n"
            "`stagger help --commands` the commands. See stagger(1).\n");
}

static const struct command *lookup(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return &commands[i];
    return NULL;
}

/* stagger help [COMMAND | --exit-codes | --commands | --options COMMAND |
 * --defaults COMMAND [ARG...]] */
static int help(int argc, char **argv)
{
    if (argc < 2) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--exit-codes") && argc == 2) {
        cli_exit_dump(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--commands") && argc == 2) { /* for the shell completions */
        for (size_t i = 0; i < N_COMMANDS; i++)
            if (commands[i].run)
                printf("%s\n", commands[i].name);
        return CLI_EXIT_OK;
    }
    /* Hidden (test_cli_options.sh): the command run with ARGs up to where
     * its config is built, one row per option: the table's default and
     * the value the config holds (opt.h, cli_defaults_row). */
    if (!strcmp(argv[1], "--defaults") && argc >= 3) {
        const struct command *c = lookup(argv[2]);
        if (!c || !c->run)
            return cli_usage_error("help", "unknown command '%s'", argv[2]);
        cli_defaults_out = stdout;
        return c->run(argc - 2, argv + 2);
    }
    bool options = !strcmp(argv[1], "--options");
    if (argc != (options ? 3 : 2))
        return cli_usage_error("help", "expected COMMAND, --exit-codes, --commands or "
                                       "--options COMMAND");
    const char *name = argv[options ? 2 : 1];
    const struct command *c = lookup(name);
    if (!c)
        return cli_usage_error("help", "unknown command '%s'", name);
    if (options)
        cli_dump_options(c->table, stdout);
    else
        cli_help(c->table, stdout);
    return CLI_EXIT_OK;
}

/* Keep 4 MiB above the top of glibc's heap instead of giving it back to the
 * kernel at every free that leaves 128 KiB there (its default). Why: SQLite
 * frees and takes back about that much at each of a batch's transactions,
 * and each time the pages came back from the kernel as new page faults:
 * 11 000 to 16 000 faults in a 5000-job run against curl's 1300, a fifth of
 * its CPU. With the pad: 1400 faults, the same peak RSS (untouched pad pages
 * are not resident). A process-wide setting, so the tool's (libraries must
 * not make it for their embedders); a GLIBC_TUNABLES malloc setting given by
 * the user wins. */
static void tune_malloc(void)
{
#ifdef __GLIBC__
    const char *t = getenv("GLIBC_TUNABLES");
    if (!t || !strstr(t, "glibc.malloc."))
        mallopt(M_TOP_PAD, 4 << 20);
#endif
}

int main(int argc, char **argv)
{
    tune_malloc();
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "help"))
        return help(argc - 1, argv + 1);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V") || !strcmp(cmd, "version")) {
        printf("stagger %s\n", stg_version());
        return 0;
    }
    const struct command *c = lookup(cmd);
    if (c && c->run)
        return c->run(argc - 1, argv + 1);
    /* A slip ("bach"): the closest command, one edit for a short name. */
    const char *near = NULL;
    size_t best = SIZE_MAX, n = strlen(cmd);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        size_t d = commands[i].run ? cli_distance(cmd, commands[i].name) : SIZE_MAX;
        if (d < best)
            best = d, near = commands[i].name;
    }
    if (near && best <= (n <= 6 ? 1 : n / 3)) {
        fprintf(stderr, "stagger: unknown command '%s'; did you mean '%s'?\n", cmd, near);
        return CLI_EXIT_USAGE;
    }
    fprintf(stderr, "stagger: unknown command '%s' (see stagger --help)\n", cmd);
    return CLI_EXIT_USAGE;
}
