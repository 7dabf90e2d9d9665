/* main.c - rockstalk, the command-line client: options, then one command
 * (one-shot), the REPL, or top. See rockstalk(1). The only layer that
 * prints errors and picks the exit status. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "helpers.h"
#include "repl.h"
#include "session.h"

typedef struct Options {
    const char *host, *port, *unix_path, *tube;
    const char *token; /* --token, else $ROCKSTALK_TOKEN; NULL: none */
    int tls;           /* --tls */
    ClientTls tlsopt;  /* --cacert, --cert, --key, --tls-name */
    int verbose, yes;
} Options;

static void
usage(FILE *f)
{
    fprintf(f, "Use: rockstalk [OPTIONS] [COMMAND [ARGS...]]\n\n"
               "Options:\n"
               " -h HOST        server host (default 127.0.0.1)\n"
               " -p PORT        server port (default 11300)\n"
               " -s unix:PATH   connect to a unix socket instead\n"
               " -t TUBE        use and watch TUBE for the command\n"
               " -v             status lines to stdout, not stderr\n"
               " -y             clear without asking\n"
               "     --token T  authenticate first (auth T); default: "
               "$ROCKSTALK_TOKEN\n"
               "     --tls      speak TLS (a tls:// listener); the server's "
               "certificate\n"
               "                must verify and name HOST (or --tls-name)\n"
               "     --cacert F trust the CAs in F (default: the system's)\n"
               "     --cert F --key F  a client certificate (mutual TLS)\n"
               "     --tls-name N  the name the server's certificate "
               "carries\n"
               "     --help     this help\n"
               "     --version  show the version\n\n"
               "Without a COMMAND on a terminal: an interactive prompt.\n"
               "Exit status: 0 success, 1 error reply, 2 usage or "
               "connection error.\n\n");
    helpers_help(f);
}

static void
fail(const char *msg)
{
    fprintf(stderr, "rockstalk: %s\n", msg);
}

/* Returns -1 to exit 0 at once, 0 to go on, RC_FAIL on a usage error. */
static int
parse_options(int argc, char **argv, Options *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'H'},
        {"version", no_argument, NULL, 'V'},
        {"token", required_argument, NULL, 'T'},
        {"tls", no_argument, NULL, 1001},
        {"cacert", required_argument, NULL, 1002},
        {"cert", required_argument, NULL, 1003},
        {"key", required_argument, NULL, 1004},
        {"tls-name", required_argument, NULL, 1005},
        {NULL, 0, NULL, 0},
    };
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "+h:p:s:t:vy", longopts, NULL)) !=
           -1) {
        switch (ch) {
        case 'h':
            o->host = optarg;
            break;
        case 'p':
            o->port = optarg;
            break;
        case 's':
            o->unix_path = optarg;
            break;
        case 't':
            o->tube = optarg;
            break;
        case 'v':
            o->verbose = 1;
            break;
        case 'y':
            o->yes = 1;
            break;
        case 'T':
            o->token = optarg;
            break;
        case 1001:
            o->tls = 1;
            break;
        case 1002:
            o->tlsopt.cacert = optarg;
            break;
        case 1003:
            o->tlsopt.cert = optarg;
            break;
        case 1004:
            o->tlsopt.key = optarg;
            break;
        case 1005:
            o->tlsopt.name = optarg;
            break;
        case 'H':
            usage(stdout);
            return -1;
        case 'V':
            printf("rockstalk %s\n", ROCKSTALK_VERSION);
            return -1;
        default:
            fprintf(stderr, "rockstalk: bad option %s (see --help)\n",
                    argv[optind - 1]);
            return RC_FAIL;
        }
    }
    if (o->unix_path && strncmp(o->unix_path, "unix:", 5) != 0) {
        fail("-s takes unix:PATH");
        return RC_FAIL;
    }
    if (o->unix_path) o->unix_path += 5;
    if (!o->tls && (o->tlsopt.cacert || o->tlsopt.cert || o->tlsopt.key ||
                    o->tlsopt.name)) {
        fail("--cacert, --cert, --key and --tls-name go with --tls");
        return RC_FAIL;
    }
    if (!o->tlsopt.cert != !o->tlsopt.key) {
        fail("--cert and --key go together");
        return RC_FAIL;
    }
    int port = atoi(o->port);
    if (!commands_is_number(o->port) || port < 1 || port > 65535) {
        fail("-p takes a port number (1-65535)");
        return RC_FAIL;
    }
    return 0;
}

/* Connects and runs the command (or the REPL when argc is 0). */
static int
run(const Options *o, int argc, char **argv)
{
    char err[CLIENT_ERR_LEN] = "";
    Session s = {.verbose = o->verbose,
                 .yes = o->yes,
                 .used = "default",
                 .host = o->host,
                 .port = o->port,
                 .unix_path = o->unix_path,
                 .token = o->token,
                 .tls = o->tls ? &o->tlsopt : NULL};
    if (argc > 0 && helpers_check(argc, argv, err, sizeof err) < 0) {
        fail(err);
        return RC_FAIL;
    }
    if (client_open(&s.conn, o->host, o->port, o->unix_path,
                    o->tls ? &o->tlsopt : NULL, err, sizeof err) < 0) {
        fail(err);
        return RC_FAIL;
    }
    int rc = RC_OK;
    if (o->token) {
        rc = session_auth(&s, o->token, err, sizeof err);
        if (err[0]) fail(err); /* the refusal, or the warning */
        err[0] = '\0';
    }
    if (rc == RC_OK && o->tube) rc = session_tube(&s, o->tube, err, sizeof err);
    if (rc == RC_OK && argc == 0)
        rc = repl_run(&s);
    else if (rc == RC_OK)
        rc = helpers_run(&s, argc, argv, NULL, err, sizeof err);
    if (rc == RC_FAIL && err[0]) fail(err);
    client_close(&s.conn);
    return rc;
}

int
main(int argc, char **argv)
{
    Options o = {.host = "127.0.0.1", .port = "11300"};
    const char *env = getenv("ROCKSTALK_TOKEN");
    if (env && *env) o.token = env;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0) return rc < 0 ? 0 : rc;
    argc -= optind;
    argv += optind;
    if (argc > 0 && helpers_offline(argc, argv)) {
        char err[CLIENT_ERR_LEN] = "";
        rc = helpers_run(NULL, argc, argv, NULL, err, sizeof err);
        if (rc == RC_FAIL) fail(err);
        return rc;
    }
    return run(&o, argc, argv);
}
