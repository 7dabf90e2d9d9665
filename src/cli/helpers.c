/* helpers.c - see helpers.h. */
#include "helpers.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backup.h"
#include "clusterops.h"
#include "top.h"
#include "view.h"
#include "yaml.h"

/* list's default COUNT: list-jobs' largest. */
#define LIST_DEFAULT "1000"

/* kick TUBE without N: every buried (else delayed) job; kick's bound is a
 * u32, so this is "all". */
#define KICK_ALL "4294967295"

typedef int HelperFn(Session *s, int argc, char **argv, char *err,
                     size_t errcap);

typedef struct Helper {
    const char *name;
    int min, max; /* arguments after the name */
    const char *usage, *help;
    HelperFn *fn;
} Helper;

/* Runs the protocol command argv with TUBE in use, then puts back the
 * tube that was in use (it matters in the REPL). */
static int
with_tube(Session *s, const char *tube, int argc, char **argv, char *err,
          size_t errcap)
{
    char prev[sizeof s->used], line[TUBE_NAME_MAX + 8];
    Reply r;
    snprintf(prev, sizeof prev, "%s", s->used);
    if (commands_check_arg('t', tube, err, errcap) < 0) return RC_FAIL;
    snprintf(line, sizeof line, "use %s", tube);
    if (session_ask(s, line, &r, err, errcap) < 0) return RC_FAIL;
    int ok = reply_is(&r, "USING");
    if (!ok) session_status(s, r.line);
    reply_free(&r);
    if (!ok) return RC_REPLY;
    int rc = session_command(s, argc, argv, NULL, err, errcap);
    if (rc != RC_FAIL && strcmp(prev, tube) != 0) {
        snprintf(line, sizeof line, "use %s", prev);
        if (session_ask(s, line, &r, err, errcap) < 0) return RC_FAIL;
        reply_free(&r);
    }
    return rc;
}

static int
h_peek(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    (void)argc;
    char verb[32];
    const char *st = argv[2];
    if (strcmp(st, "ready") && strcmp(st, "delayed") && strcmp(st, "buried")) {
        snprintf(err, errcap,
                 "peek: STATE is ready, delayed or buried, not '%s'", st);
        return RC_FAIL;
    }
    snprintf(verb, sizeof verb, "peek-%s", st);
    char *cmd[] = {verb, NULL};
    return with_tube(s, argv[1], 1, cmd, err, errcap);
}

static int
h_kick(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    char *cmd[] = {"kick", argc > 2 ? argv[2] : KICK_ALL, NULL};
    return with_tube(s, argv[1], 2, cmd, err, errcap);
}

static int
h_list(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    char *cmd[] = {"list-jobs", argv[1], argv[2],
                   argc > 3 ? argv[3] : LIST_DEFAULT, NULL};
    uint64_t n = strtoull(cmd[3], NULL, 10);
    if (commands_is_number(cmd[3]) && (n < 1 || n > 1000)) {
        snprintf(err, errcap, "list: COUNT is 1 to 1000");
        return RC_FAIL;
    }
    return session_command(s, 4, cmd, NULL, err, errcap);
}

static int
h_tubes(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    (void)argc;
    (void)argv;
    Snapshot snap;
    char line[TUBE_NAME_MAX + 128];
    int rc = view_fetch(s, &snap, err, errcap);
    if (rc == 0) {
        int w = view_name_width(&snap);
        view_sort(&snap, VIEW_COL_NAME, 0);
        view_header(line, sizeof line, w, 0);
        printf("%s\n", line);
        for (size_t i = 0; i < snap.ntubes; i++) {
            view_row(&snap.tubes[i], line, sizeof line, w, 0);
            printf("%s\n", line);
        }
        fflush(stdout);
    }
    view_free(&snap);
    return rc < 0 ? RC_FAIL : RC_OK;
}

static int
h_top(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    (void)argc;
    (void)argv;
    return top_run(s, err, errcap) < 0 ? RC_FAIL : RC_OK;
}

/* Asks question on stderr and reads y/yes from the terminal on stdin.
 * Returns 1 for yes, 0 for anything else, -1 when stdin is no terminal. */
static int
confirm(const char *question)
{
    char ans[16];
    if (!isatty(STDIN_FILENO)) return -1;
    fprintf(stderr, "%s [y/N] ", question);
    fflush(stderr);
    if (!fgets(ans, sizeof ans, stdin)) return 0;
    return strcmp(ans, "y\n") == 0 || strcmp(ans, "yes\n") == 0;
}

/* The question clear asks, from the tube's stats; RC_REPLY when the tube
 * does not exist (the reply is printed). */
static int
clear_question(Session *s, const char *tube, char *q, size_t qcap, char *err,
               size_t errcap)
{
    char line[TUBE_NAME_MAX + 16];
    uint64_t n[4] = {0};
    Reply r;
    if (commands_check_arg('t', tube, err, errcap) < 0) return RC_FAIL;
    snprintf(line, sizeof line, "stats-tube %s", tube);
    if (session_ask(s, line, &r, err, errcap) < 0) return RC_FAIL;
    if (!reply_is(&r, "OK") || !r.body) {
        session_status(s, r.line);
        reply_free(&r);
        return RC_REPLY;
    }
    yaml_u64(r.body, "current-jobs-ready", &n[0]);
    yaml_u64(r.body, "current-jobs-delayed", &n[1]);
    yaml_u64(r.body, "current-jobs-buried", &n[2]);
    yaml_u64(r.body, "current-jobs-reserved", &n[3]);
    reply_free(&r);
    snprintf(q, qcap,
             "delete every job in tube '%s' (%llu ready, %llu delayed, %llu "
             "buried, %llu reserved)?",
             tube, (unsigned long long)n[0], (unsigned long long)n[1],
             (unsigned long long)n[2], (unsigned long long)n[3]);
    return RC_OK;
}

static int
h_clear(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    (void)argc;
    char q[TUBE_NAME_MAX + 160];
    int rc = clear_question(s, argv[1], q, sizeof q, err, errcap);
    if (rc != RC_OK) return rc;
    int yes = s->yes ? 1 : confirm(q);
    if (yes < 0) {
        snprintf(err, errcap,
                 "clear needs a confirmation on a terminal, or -y");
        return RC_FAIL;
    }
    if (!yes) {
        snprintf(err, errcap, "not cleared");
        return RC_FAIL;
    }
    char *cmd[] = {"clear-tube", argv[1], NULL};
    return session_command(s, 2, cmd, NULL, err, errcap);
}

static int
h_drain(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    (void)s;
    (void)argc;
    (void)argv;
    snprintf(err, errcap,
             "drain is not offered: the protocol has no safe way to stop "
             "new jobs; send SIGUSR1 to the server (see rockstalk(1))");
    return RC_FAIL;
}

/* hash-token TOKEN (or - : the first line of stdin, so the token stays
 * out of the process list): the auth file's sha256:<hex> of its bytes. */
static int
h_hash_token(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    char buf[CLIENT_LINE_MAX + 2];
    const char *tok = argv[1];
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    (void)s, (void)argc;
    if (strcmp(tok, "-") == 0) {
        if (!fgets(buf, sizeof buf, stdin)) {
            snprintf(err, errcap, "hash-token -: no line on stdin");
            return RC_FAIL;
        }
        buf[strcspn(buf, "\r\n")] = '\0';
        tok = buf;
    }
    if (!*tok || strlen(tok) > SESSION_TOKEN_MAX) {
        snprintf(err, errcap, "a token takes 1-%d bytes", SESSION_TOKEN_MAX);
        return RC_FAIL;
    }
    if (!EVP_Digest(tok, strlen(tok), d, &n, EVP_sha256(), NULL)) {
        snprintf(err, errcap, "SHA-256 failed (OpenSSL)");
        return RC_FAIL;
    }
    OPENSSL_cleanse(buf, sizeof buf);
    printf("sha256:");
    for (unsigned int i = 0; i < n; i++)
        printf("%02x", d[i]);
    printf("\n");
    return RC_OK;
}

static int
h_backup(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    (void)argc;
    BackupResult r;
    int rc = backup_run(s, argv[1], &r, err, errcap);
    if (rc == RC_REPLY) session_status(s, err); /* the refusal */
    if (rc != RC_OK) return rc;
    printf("backup: %llu jobs, %llu bytes (%u shards) in %.3f s into %s\n"
           "serve it with: rockstalkd -b %s\n",
           (unsigned long long)r.jobs, (unsigned long long)r.bytes, r.shards,
           r.seconds, argv[1], argv[1]);
    return RC_OK;
}

static int
h_cluster(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    int rc = clusterops_run(s, argc, argv, err, errcap);
    if (rc == RC_REPLY && err[0]) fprintf(stderr, "rockstalk: %s\n", err);
    return rc;
}

static int
h_help(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    (void)s;
    (void)argc;
    (void)argv;
    (void)err;
    (void)errcap;
    helpers_help(stdout);
    return RC_OK;
}

/* clang-format off */
static const Helper helpers[] = {
    {"tubes", 0, 0, "", "the table of tubes, once", h_tubes},
    {"top", 0, 0, "", "live view of the server and its tubes", h_top},
    {"peek", 2, 2, "TUBE STATE", "show TUBE's next ready, delayed or "
     "buried job", h_peek},
    {"kick", 1, 2, "TUBE [N]", "kick up to N (default all) buried, else "
     "delayed, jobs of TUBE", h_kick},
    {"list", 2, 3, "TUBE STATE [N]", "list up to N (default 1000) job ids "
     "(extension)", h_list},
    {"clear", 1, 1, "TUBE", "delete every job of TUBE, after asking "
     "(extension)", h_clear},
    {"drain", 0, 0, "", "not offered; see rockstalk(1)", h_drain},
    {"hash-token", 1, 1, "TOKEN|-", "print the auth file's sha256:<hex> of "
     "TOKEN (-: read it from stdin)", h_hash_token},
    {"backup", 1, 1, "DIR", "copy the server's state of one moment into "
     "the new data directory DIR", h_backup},
    {"cluster", 1, 2, "status|transfer ID|add ID@HOST:PORT[/CP]|remove ID",
     "the members as the leader sees them; hand the leadership to node ID "
     "and wait for it; add or remove a member and wait for the commit",
     h_cluster},
    {"help", 0, 0, "", "this list", h_help},
};
/* clang-format on */

/* The helper argv means: by name and count; "peek ID" and "kick BOUND"
 * (one number) are the protocol commands. */
static const Helper *
find_helper(int argc, char **argv)
{
    for (size_t i = 0; i < sizeof helpers / sizeof helpers[0]; i++) {
        const Helper *h = &helpers[i];
        if (strcmp(h->name, argv[0]) != 0) continue;
        if (commands_find(h->name) &&
            (argc - 1 < h->min || argc - 1 > h->max ||
             (argc == 2 && commands_is_number(argv[1]))))
            return NULL;
        return h;
    }
    return NULL;
}

int
helpers_offline(int argc, char **argv)
{
    const Helper *h = find_helper(argc, argv);
    return h && (h->fn == h_help || h->fn == h_drain || h->fn == h_hash_token);
}

static int
helper_usage(const Helper *h, int argc, char *err, size_t errcap)
{
    if (argc - 1 >= h->min && argc - 1 <= h->max) return 0;
    snprintf(err, errcap, "wrong number of arguments; usage: %s%s%s", h->name,
             *h->usage ? " " : "", h->usage);
    return -1;
}

int
helpers_check(int argc, char **argv, char *err, size_t errcap)
{
    const Helper *h = find_helper(argc, argv);
    if (h) return helper_usage(h, argc, err, errcap);
    const CmdSpec *spec = commands_find(argv[0]);
    if (!spec) {
        snprintf(err, errcap, "unknown command '%s' (try: rockstalk help)",
                 argv[0]);
        return -1;
    }
    return commands_check(spec, argc - 1, argv + 1, err, errcap);
}

int
helpers_run(Session *s, int argc, char **argv, const Body *body, char *err,
            size_t errcap)
{
    const Helper *h = find_helper(argc, argv);
    if (!h) return session_command(s, argc, argv, body, err, errcap);
    if (helper_usage(h, argc, err, errcap) < 0) return RC_FAIL;
    return h->fn(s, argc, argv, err, errcap);
}

void
helpers_help(FILE *f)
{
    size_t n;
    const CmdSpec *c = commands_all(&n);
    fprintf(f, "Operator commands:\n");
    for (size_t i = 0; i < sizeof helpers / sizeof helpers[0]; i++) {
        char u[64];
        snprintf(u, sizeof u, "%s %s", helpers[i].name, helpers[i].usage);
        fprintf(f, "  %-26s %s\n", u, helpers[i].help);
    }
    fprintf(f, "Protocol commands:\n");
    for (size_t i = 0; i < n; i++) {
        char u[64];
        snprintf(u, sizeof u, "%s %s", c[i].name, c[i].usage);
        fprintf(f, "  %-26s %s%s\n", u, c[i].help,
                (c[i].flags & CMD_EXT) ? " (extension)" : "");
    }
}
