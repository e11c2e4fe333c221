/*
 * `stagger`: the command-line tool. Dispatches to one subcommand per file;
 * subcommands whose library part was not built (missing Debian package) are
 * left out of the table and reported as such.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"plan", cli_plan_main, "show what a retry policy does: schedules and decisions"},
#ifdef STG_HAVE_SIM
    {"sim", cli_sim_main, "replay retry storms in virtual time"},
#endif
#ifdef STG_HAVE_SERVER
    {"serve", cli_serve_main, "run a rate-limited HTTP test server on loopback"},
#endif
#ifdef STG_HAVE_CURL
    {"fetch", cli_fetch_main, "one HTTP request with polite retries (curl-like)"},
#endif
#ifdef STG_HAVE_STORE
    {"batch", cli_batch_main, "durable, resumable batch of requests"},
#endif
};

static void usage(FILE *out)
{
    fprintf(out, "usage: stagger COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`stagger COMMAND --help` describes each; `stagger --version` prints the version.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("stagger %s\n", stg_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "stagger: unknown command '%s' (see stagger --help)\n", cmd);
    return CLI_EXIT_USAGE;
}
