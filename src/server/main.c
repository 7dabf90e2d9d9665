/* main.c - rockstalkd: command line (beanstalkd's flags plus long options),
 * signal mask, privilege drop, then the server. See rockstalkd(1). */
#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sys/resource.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/cpus.h"
#include "base/log.h"
#include "cluster/cluster.h"
#include "cluster/peer.h"
#include "server/listeners.h"
#include "server/access.h"
#include "server/server.h"

#define DEFAULT_DIR "/var/lib/rockstalkd"

static void
usage(FILE *f)
{
    fprintf(f,
            "Use: rockstalkd [OPTIONS]\n\n"
            "Options:\n"
            " -b, --dir DIR          data directory (default " DEFAULT_DIR ")\n"
            " -f, --fsync-ms MS      0 (default): reply after fsync (group "
            "commit);\n"
            "                        MS > 0: reply after write, fsync every MS "
            "ms\n"
            " -F, --no-fsync         never fsync; reply after write\n"
            "     --memory           keep nothing on disk\n"
            " -S, --shards N         RocksDB shards for a new data directory "
            "(1-64)\n"
            " -l ADDR                listen address (default 0.0.0.0), or "
            "unix:PATH\n"
            " -p, --port PORT        listen port (default 11300)\n"
            "     --listen URL       one more listener (repeatable): "
            "tcp://HOST:PORT,\n"
            "                        tls://HOST:PORT or unix:PATH; alone "
            "(without -l/-p),\n"
            "                        the only ones\n"
            " -u, --user USER        become user and group USER\n"
            " -m, --cache-bytes N    bytes of job bodies kept in memory "
            "(default 64 MiB);\n"
            "                        the rest are read back from disk\n"
            " -z, --max-job-size N   maximum job size in bytes (default "
            "65535,\n"
            "                        at most 1073741824)\n"
            " -s BYTES               accepted for beanstalkd compatibility; "
            "only\n"
            "                        reported as binlog-max-size in stats\n"
            " -c, -n                 accepted for beanstalkd compatibility; "
            "ignored\n"
            "     --max-connections N  close new connections beyond N "
            "(default: no limit)\n"
            "     --max-timeouts N   bury a job whose TTR ran out N times "
            "(default 0: never)\n"
            "     --dedup-window S   seconds a put-unique key is remembered "
            "(default 300)\n"
            "     --journal-size N   bytes of each of the 2 commit journal "
            "files\n"
            "                        (default mode and -f MS; default 16 "
            "MiB, 0: none)\n"
            "     --body-ring N      bodies of N bytes or more are written and "
            "synced\n"
            "                        by their own thread, beside the journal "
            "(default\n"
            "                        65536, 0: never; at least 4096)\n"
            "     --body-ring-size N bytes of each of the 4 body ring files "
            "(default 64 MiB)\n"
            "     --http HOST:PORT   serve HTTP: /healthz, /readyz, "
            "/metrics (Prometheus)\n"
            "                        and the JSON API /api/v1/; no HOST: "
            "127.0.0.1\n"
            "     --metrics HOST:PORT  the same as --http\n"
            "     --http-plain       plain HTTP even with --tls-cert "
            "(default: HTTPS then)\n"
            "     --cluster ID@HOST:PORT[/CLIENTPORT],...  the members of a "
            "Raft cluster\n"
            "                        (3 or 5 to start one; Raft addresses; "
            "CLIENTPORT\n"
            "                        defaults to -p)\n"
            "     --node-id ID       this node's id among --cluster's\n"
            "     --join             a new node: --cluster names the current "
            "members and\n"
            "                        it; it waits, serving nothing, until "
            "rockstalk cluster add\n"
            "     --seed             the backup in -b DIR (RESTORE) becomes "
            "the single voter\n"
            "                        of a new cluster (--cluster names it "
            "alone); grow it with --join\n"
            "     --cluster-cert FILE, --cluster-key FILE, --cluster-ca FILE\n"
            "                        this node's certificate, its key and the "
            "cluster's CA\n"
            "                        (PEM): mutual TLS between the nodes\n"
            "     --cluster-insecure  let the nodes talk in plaintext, "
            "unauthenticated\n"
            "     --tls-cert FILE, --tls-key FILE  the certificate (PEM chain) "
            "and key of\n"
            "                        tls:// listeners\n"
            "     --tls-ca FILE      tls:// clients must present a "
            "certificate from this CA\n"
            "     --auth-file FILE   identities, their tokens or certificates "
            "and their\n"
            "                        per-tube rules (mode 600; SIGHUP "
            "re-reads it): clients\n"
            "                        must authenticate (auth TOKEN)\n"
            "     --auth-unix        unix-socket clients authenticate too "
            "(default: trusted)\n"
            "     --allow-plaintext-auth  let tokens cross a plaintext "
            "listener beyond\n"
            "                        loopback\n"
            "     --max-unauth N     unauthenticated connections kept "
            "(default 128;\n"
            "                        beyond it the oldest is closed)\n"
            "     --import-binlog BINLOGDIR  first load the jobs of "
            "beanstalkd's binlog\n"
            "                        (1.12/1.13) into the new, empty data "
            "directory\n"
            "     --loop-cpus LIST   run the event loop thread on these CPUs "
            "(\"0\", \"0-3\",\n"
            "                        \"0,2-3\")\n"
            "     --store-cpus LIST  run the store's threads (and the Raft "
            "thread) on these\n"
            "     --cpus auto|off    auto: the store's threads on the CPUs "
            "taking the data\n"
            "                        directory's disk interrupts, the loop on "
            "the others\n"
            "                        (default off)\n"
            " -V, --verbose          more log output (repeatable)\n"
            " -v, --version          show version information\n"
            " -h, --help             show this help\n");
}

/* Parses a decimal in [lo, hi] or exits with a usage error. */
static long
num(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "rockstalkd: invalid value for %s: %s\n", opt, s);
        exit(1);
    }
    return v;
}

/* --loop-cpus, --store-cpus LIST: parsed now, and every CPU named must be
 * one this process may use (sched_getaffinity), or the start stops. */
static void
cpu_list(const char *opt, const char *arg, cpu_set_t *out, int *given)
{
    char err[512], a[CPUS_LIST_MAX + 2];
    cpu_set_t allowed, extra;
    if (cpus_parse(arg, out, err, sizeof err) < 0) {
        fprintf(stderr, "rockstalkd: %s: %s\n", opt, err);
        exit(1);
    }
    if (cpus_get_self(&allowed, err, sizeof err) < 0) {
        fprintf(stderr, "rockstalkd: %s: %s\n", opt, err);
        exit(1);
    }
    CPU_OR(&extra, out, &allowed);
    CPU_XOR(&extra, &extra, &allowed); /* named but not allowed */
    if (CPU_COUNT(&extra)) {
        fprintf(stderr,
                "rockstalkd: %s %s: CPU %s not available to this process "
                "(it may use %s)\n",
                opt, arg, cpus_format(&extra, err, sizeof err),
                cpus_format(&allowed, a, sizeof a));
        exit(1);
    }
    *given = 1;
}

/* --listen URL: parsed now, so a bad one stops the start at once. */
static void
add_listen(ServerConfig *cfg, const char *url)
{
    char err[512];
    if (cfg->nlisten == SERVER_LISTENERS_MAX) {
        fprintf(stderr, "rockstalkd: more than %d listeners\n",
                SERVER_LISTENERS_MAX);
        exit(1);
    }
    if (listen_parse(url, &cfg->listen[cfg->nlisten++], err, sizeof err) < 0) {
        fprintf(stderr, "rockstalkd: %s\n", err);
        exit(1);
    }
}

static const struct option longopts[] = {
    {"dir", required_argument, NULL, 'b'},
    {"fsync-ms", required_argument, NULL, 'f'},
    {"no-fsync", no_argument, NULL, 'F'},
    {"memory", no_argument, NULL, 'M'},
    {"shards", required_argument, NULL, 'S'},
    {"listen", required_argument, NULL, 1005},
    {"port", required_argument, NULL, 'p'},
    {"user", required_argument, NULL, 'u'},
    {"max-job-size", required_argument, NULL, 'z'},
    {"cache-bytes", required_argument, NULL, 'm'},
    {"max-connections", required_argument, NULL, 'C'},
    {"max-timeouts", required_argument, NULL, 'T'},
    {"dedup-window", required_argument, NULL, 'D'},
    {"journal-size", required_argument, NULL, 'J'},
    {"body-ring", required_argument, NULL, 1601},
    {"body-ring-size", required_argument, NULL, 1602},
    {"metrics", required_argument, NULL, 'P'},
    {"http", required_argument, NULL, 1401},
    {"http-plain", no_argument, NULL, 1402},
    {"cluster", required_argument, NULL, 'K'},
    {"node-id", required_argument, NULL, 'N'},
    {"cluster-cert", required_argument, NULL, 1001},
    {"cluster-key", required_argument, NULL, 1002},
    {"cluster-ca", required_argument, NULL, 1003},
    {"cluster-insecure", no_argument, NULL, 1004},
    {"join", no_argument, NULL, 1501},
    {"seed", no_argument, NULL, 1502},
    {"tls-cert", required_argument, NULL, 1101},
    {"tls-key", required_argument, NULL, 1102},
    {"tls-ca", required_argument, NULL, 1103},
    {"auth-file", required_argument, NULL, 1201},
    {"auth-unix", no_argument, NULL, 1202},
    {"allow-plaintext-auth", no_argument, NULL, 1203},
    {"max-unauth", required_argument, NULL, 1204},
    {"import-binlog", required_argument, NULL, 1301},
    {"loop-cpus", required_argument, NULL, 1701},
    {"store-cpus", required_argument, NULL, 1702},
    {"cpus", required_argument, NULL, 1703},
    {"verbose", no_argument, NULL, 'V'},
    {"version", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void
parse_opt(ServerConfig *cfg, int ch, const char *arg)
{
    switch (ch) {
    case 'b':
        cfg->dir = arg;
        break;
    case 'f':
        cfg->sync_ms = (int)num("-f", arg, 0, INT_MAX);
        cfg->sync_mode = cfg->sync_ms ? STORE_SYNC_INTERVAL : STORE_SYNC_ALWAYS;
        break;
    case 'F':
        cfg->sync_mode = STORE_SYNC_NEVER;
        break;
    case 'M':
        cfg->memory_only = 1;
        break;
    case 'S':
        cfg->nshards = (int)num("-S", arg, 1, STORE_SHARDS_MAX);
        break;
    case 'l':
        cfg->listen_addr = arg;
        cfg->listen_flags = 1;
        break;
    case 'p':
        cfg->port = (int)num("-p", arg, 0, 65535);
        cfg->listen_flags = 1;
        break;
    case 1005:
        add_listen(cfg, arg);
        break;
    case 'u':
        cfg->user = arg;
        break;
    case 'z':
        cfg->max_job_size = (uint32_t)num("-z", arg, 0, JOB_SIZE_LIMIT);
        break;
    case 'C':
        cfg->max_conns = (uint32_t)num("--max-connections", arg, 0, 1 << 30);
        break;
    case 'D':
        cfg->dedup_window = (uint32_t)num("--dedup-window", arg, 0, 1 << 30);
        break;
    case 'J':
        cfg->journal_bytes = (uint64_t)num("--journal-size", arg, 0, 1L << 40);
        if (cfg->journal_bytes && cfg->journal_bytes < STORE_JOURNAL_SIZE_MIN) {
            fprintf(stderr,
                    "rockstalkd: --journal-size: 0 or at least %llu bytes\n",
                    (unsigned long long)STORE_JOURNAL_SIZE_MIN);
            exit(1);
        }
        break;
    case 1601:
        cfg->ring_min = (uint32_t)num("--body-ring", arg, 0, UINT32_MAX);
        if (cfg->ring_min && cfg->ring_min < STORE_RING_MIN_LOW) {
            fprintf(stderr, "rockstalkd: --body-ring: 0 or at least %u bytes\n",
                    STORE_RING_MIN_LOW);
            exit(1);
        }
        break;
    case 1602:
        cfg->ring_file_bytes =
            (uint64_t)num("--body-ring-size", arg, 1, 1L << 40);
        if (cfg->ring_file_bytes < STORE_RING_FILE_MIN) {
            fprintf(stderr,
                    "rockstalkd: --body-ring-size: at least %llu bytes\n",
                    (unsigned long long)STORE_RING_FILE_MIN);
            exit(1);
        }
        break;
    case 'T':
        cfg->max_timeouts = (uint32_t)num("--max-timeouts", arg, 0, UINT32_MAX);
        break;
    case 'P':
    case 1401:
        if (cfg->http_addr) {
            fprintf(stderr, "rockstalkd: --http (or --metrics) given twice\n");
            exit(1);
        }
        cfg->http_addr = arg;
        cfg->http_opt = ch == 'P' ? "--metrics" : "--http";
        break;
    case 1402:
        cfg->http_plain = 1;
        break;
    case 'K':
        cfg->cluster_arg = arg;
        break;
    case 'N':
        cfg->node_id_arg = arg;
        break;
    case 1001:
        cfg->peer_cert = arg;
        break;
    case 1002:
        cfg->peer_key = arg;
        break;
    case 1003:
        cfg->peer_ca = arg;
        break;
    case 1004:
        cfg->peer_insecure = 1;
        break;
    case 1501:
        cfg->cluster_join = 1;
        break;
    case 1502:
        cfg->cluster_seed = 1;
        break;
    case 1101:
        cfg->tls_cert = arg;
        break;
    case 1102:
        cfg->tls_key = arg;
        break;
    case 1103:
        cfg->tls_ca = arg;
        break;
    case 1201:
        cfg->auth_file = arg;
        break;
    case 1202:
        cfg->auth_unix = 1;
        break;
    case 1203:
        cfg->allow_plaintext_auth = 1;
        break;
    case 1204:
        cfg->max_unauth = (uint32_t)num("--max-unauth", arg, 1, 1 << 20);
        break;
    case 1301:
        cfg->import_dir = arg;
        break;
    case 1701:
        cpu_list("--loop-cpus", arg, &cfg->cpus.loop, &cfg->cpus.has_loop);
        break;
    case 1702:
        cpu_list("--store-cpus", arg, &cfg->cpus.store, &cfg->cpus.has_store);
        break;
    case 1703:
        if (strcmp(arg, "auto") != 0 && strcmp(arg, "off") != 0) {
            fprintf(stderr, "rockstalkd: --cpus: auto or off, not %s\n", arg);
            exit(1);
        }
        cfg->cpus.automatic = strcmp(arg, "auto") == 0;
        break;
    case 'm':
        cfg->cache_max = (size_t)num("-m", arg, 0, LONG_MAX);
        break;
    case 's':
        cfg->binlog_size = num("-s", arg, 0, LONG_MAX);
        break;
    case 'c':
    case 'n':
        break;
    case 'V':
        cfg->verbose++;
        break;
    case 'v':
        printf("rockstalkd %s\n", ROCKSTALK_VERSION);
        exit(0);
    case 'h':
        usage(stdout);
        exit(0);
    default:
        usage(stderr);
        exit(1);
    }
}

/* The user and group -u switches to, for chown_cb (nftw passes no
 * context). Written once in main before any thread starts. */
static uid_t chown_uid;
static gid_t chown_gid;

static int
chown_cb(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return lchown(path, chown_uid, chown_gid) < 0 ? -1 : 0;
}

/* Running as root with -u: hands the data directory to USER (before the
 * store opens, and again for what opening created), because RocksDB keeps
 * creating files (WALs, SSTs) after the privileges are gone. */
static int
give_dir(const char *dir, const char *user, char *err, size_t errcap)
{
    struct passwd *pw = getpwnam(user);
    if (!pw) {
        snprintf(err, errcap, "unknown user %s", user);
        return -1;
    }
    chown_uid = pw->pw_uid;
    chown_gid = pw->pw_gid;
    if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
        snprintf(err, errcap, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (nftw(dir, chown_cb, 16, FTW_PHYS) < 0) {
        snprintf(err, errcap, "cannot give %s to %s: %s", dir, user,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* Running as root with -u: the unix socket files made go to USER. */
static int
give_sockets(Server *s, const char *user, char *err, size_t errcap)
{
    struct passwd *pw = getpwnam(user);
    if (geteuid() != 0) return 0; /* drop_privileges will refuse */
    if (!pw) return snprintf(err, errcap, "unknown user %s", user), -1;
    return listeners_chown(s, pw->pw_uid, pw->pw_gid, err, errcap);
}

static int
drop_privileges(const char *user, char *err, size_t errcap)
{
    struct passwd *pw = getpwnam(user);
    if (!pw) {
        snprintf(err, errcap, "unknown user %s", user);
        return -1;
    }
    if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
        setuid(pw->pw_uid) < 0) {
        snprintf(err, errcap, "cannot become %s: %s", user, strerror(errno));
        return -1;
    }
    return 0;
}

/* Cluster mode's flags: both given, valid, a store, and a job size that
 * fits in a Raft entry (store.h). Returns 0, or -1 with a message. */
static int
check_cluster(const ServerConfig *cfg, ClusterConfig *cc, char *err,
              size_t errcap)
{
    if (!cfg->cluster_arg || !cfg->node_id_arg)
        return errfmt(err, errcap, "--cluster and --node-id go together");
    if (cfg->memory_only)
        return errfmt(err, errcap, "--cluster needs a store, not --memory");
    if (cfg->max_job_size > STORE_RAFT_ENTRY_MAX - (64u << 10))
        return errfmt(err, errcap,
                      "-z: at most %u bytes in cluster mode (a job "
                      "travels in one Raft entry)",
                      STORE_RAFT_ENTRY_MAX - (64u << 10));
    if (cluster_parse(cfg->cluster_arg, cfg->node_id_arg, cc, err, errcap) < 0)
        return -1;
    if (cfg->cluster_join && cfg->cluster_seed)
        return errfmt(err, errcap, "--join and --seed exclude each other");
    if (cfg->cluster_join) cc->state = CLUSTER_JOINING;
    if (cfg->cluster_seed) cc->state = CLUSTER_SEEDING;
    return peer_policy_check(cc, cfg->peer_cert, cfg->peer_key, cfg->peer_ca,
                             cfg->peer_insecure, err, errcap);
}

int
main(int argc, char **argv)
{
    ServerConfig cfg = {.listen_addr = NULL,
                        .port = 11300,
                        .dir = DEFAULT_DIR,
                        .max_job_size = JOB_SIZE_DEFAULT,
                        .binlog_size = 10485760,
                        .cache_max = 64 << 20,
                        .dedup_window = 300,
                        .max_unauth = ACCESS_MAX_UNAUTH_DEFAULT,
                        .journal_bytes = STORE_JOURNAL_SIZE_DEFAULT,
                        .ring_min = STORE_RING_MIN_DEFAULT};
    static Server srv; /* the one Server; everything hangs off it */
    char err[1024];
    int ch;
    while ((ch = getopt_long(argc, argv, "b:f:FS:l:p:u:z:m:s:cnVvh", longopts,
                             NULL)) != -1)
        parse_opt(&cfg, ch, optarg);
    if (optind < argc) {
        usage(stderr);
        return 1;
    }
    static ClusterConfig cc;
    if (cfg.import_dir && (cfg.cluster_arg || cfg.node_id_arg)) {
        fprintf(stderr, "rockstalkd: --import-binlog does not go with "
                        "--cluster: it fills a single node's data "
                        "directory\n");
        return 1;
    }
    if (cfg.import_dir && cfg.memory_only) {
        fprintf(stderr, "rockstalkd: --import-binlog needs a data directory, "
                        "not --memory\n");
        return 1;
    }
    if (!cfg.cluster_arg && !cfg.node_id_arg &&
        (cfg.peer_cert || cfg.peer_key || cfg.peer_ca || cfg.peer_insecure ||
         cfg.cluster_join || cfg.cluster_seed)) {
        fprintf(stderr, "rockstalkd: --cluster-cert, --cluster-key, "
                        "--cluster-ca, --cluster-insecure, --join and --seed "
                        "need --cluster\n");
        return 1;
    }
    if (cfg.auth_file && cfg.cluster_arg && !cfg.peer_cert) {
        /* a node that fell behind fetches the state through a peer's
         * client port (rockstalk-snapshot), which the auth file closes */
        fprintf(stderr, "rockstalkd: --auth-file in cluster mode needs "
                        "--cluster-cert, --cluster-key and --cluster-ca\n");
        return 1;
    }
    if (cfg.cluster_arg || cfg.node_id_arg) {
        if (check_cluster(&cfg, &cc, err, sizeof err) < 0) {
            fprintf(stderr, "rockstalkd: %s\n", err);
            return 1;
        }
        cfg.cluster = &cc;
        cfg.argv = argv;
    }
    log_set_verbosity(cfg.verbose);
    /* One descriptor per client: take all the kernel allows us. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Signals are taken by the loop through signalfd: block them before any
     * thread (RocksDB's included) exists, so every thread inherits the
     * mask (ev(3), EVFLAG_SIGNALFD). */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!cfg.memory_only) log_msg(0, "data directory %s", cfg.dir);
    int give = cfg.user && !cfg.memory_only && geteuid() == 0;
    if ((give && give_dir(cfg.dir, cfg.user, err, sizeof err) < 0) ||
        server_init(&srv, &cfg, err, sizeof err) < 0 ||
        (give && give_dir(cfg.dir, cfg.user, err, sizeof err) < 0) ||
        (cfg.user && give_sockets(&srv, cfg.user, err, sizeof err) < 0) ||
        (cfg.user && drop_privileges(cfg.user, err, sizeof err) < 0)) {
        log_msg(0, "%s", err);
        if (!cfg.memory_only && strcmp(cfg.dir, DEFAULT_DIR) == 0)
            log_msg(0, "(the default data directory; -b DIR chooses another)");
        return 1;
    }
    int code = server_run(&srv);
    server_free(&srv);
    return code ? code : srv.exit_code;
}
