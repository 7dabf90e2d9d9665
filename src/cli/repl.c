/* repl.c - see repl.h. */
#include "repl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "helpers.h"

/* Most words on one command line (the longest command has 6). */
#define REPL_MAX_WORDS 16

/* History kept across sessions, in the home directory. */
#define REPL_HISTORY_FILE ".rockstalk_history"
#define REPL_HISTORY_LINES 1000

typedef struct Repl {
    Session *s;
    int tty;           /* stdin is a terminal: libedit, prompt, history */
    char history[512]; /* history file path, "" for none */
} Repl;

/* One line without its line end (LF or CRLF), malloc'd; NULL at the end
 * of input. */
static char *
read_line(const Repl *r, const char *prompt)
{
    char *line = NULL;
    if (r->tty) {
        line = readline(prompt);
    } else {
        size_t cap = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            free(line);
            return NULL;
        }
    }
    if (line) line[strcspn(line, "\r\n")] = '\0';
    return line;
}

/* Splits line in place into at most max words. */
static int
split(char *line, char **words, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, " \t", &save); tok && n < max;
         tok = strtok_r(NULL, " \t", &save))
        words[n++] = tok;
    return n;
}

static void
help(void)
{
    helpers_help(stdout);
    printf("In this prompt: put [PRI DELAY TTR] takes the job body from "
           "the next line;\nquit or exit (or Ctrl-D) leaves.\n");
}

/* Runs one command line; the body of a put comes from the next line. */
static void
run(Repl *r, int n, char **w)
{
    char err[CLIENT_ERR_LEN] = "";
    const CmdSpec *spec = commands_find(w[0]);
    Body body = {NULL, 0}, *b = NULL;
    char *data = NULL;
    if (helpers_check(n, w, err, sizeof err) == 0 && spec &&
        (spec->flags & CMD_BODY)) {
        if (!(data = read_line(r, r->tty ? "body> " : ""))) return;
        body = (Body){data, strlen(data)};
        b = &body;
    }
    if (err[0] == '\0' &&
        helpers_run(r->s, n, w, b, err, sizeof err) != RC_FAIL)
        err[0] = '\0';
    if (err[0]) fprintf(stderr, "rockstalk: %s\n", err);
    free(data);
}

static void
history_setup(Repl *r)
{
    const char *home = getenv("HOME");
    r->history[0] = '\0';
    if (!r->tty) return;
    using_history();
    stifle_history(REPL_HISTORY_LINES);
    if (!home || !*home) return;
    snprintf(r->history, sizeof r->history, "%s/%s", home, REPL_HISTORY_FILE);
    read_history(r->history);
}

int
repl_run(Session *s)
{
    Repl r = {.s = s, .tty = isatty(STDIN_FILENO)};
    char prompt[sizeof s->conn.where + sizeof s->used + 8], *line;
    int eof = 0;
    history_setup(&r);
    s->interactive = 1;
    for (;;) {
        snprintf(prompt, sizeof prompt, "%s (%s)> ", s->conn.where, s->used);
        if ((eof = !(line = read_line(&r, r.tty ? prompt : "")))) break;
        char *w[REPL_MAX_WORDS];
        if (r.tty && line[0]) add_history(line);
        int n = split(line, w, REPL_MAX_WORDS);
        int quit = n > 0 && (!strcmp(w[0], "quit") || !strcmp(w[0], "exit"));
        if (n > 0 && !quit && !strcmp(w[0], "help"))
            help();
        else if (n > 0 && !quit)
            run(&r, n, w);
        free(line);
        if (quit || s->conn.broken) break;
    }
    if (r.history[0]) write_history(r.history);
    if (r.tty && eof) putchar('\n');
    return s->conn.broken ? RC_FAIL : RC_OK;
}
