#!/usr/bin/env bash
# scripts/bench/run.sh - rockstalk's benchmark matrix (see BENCHMARKS.md).
#
# Runs every row of the matrix against rockstalkd (default durable mode and
# -f 50), Debian's beanstalkd (-b -f0, -b, in memory) and the ceiling probe
# (in memory, and with -b: the sync ceiling; put rows, and with -q, the
# queue work of the cycle rows, in those: see is_queue_ceiling), alternating
# servers, each cell on a freshly started server with a fresh data directory
# on a free 127.0.0.1 port; and, in the put c=50 and cycle c=50 rows, a
# 3-node rockstalkd cluster on this machine (cluster mode, default durable
# mode), measured through the leader's port and through a follower's. Prints
# the medians, the ratios and the targets with PASS/FAIL.
#
# Knobs (environment):
#   BENCH_QUICK=1       1 repetition of 2 s cells (default: 3 of 5 s)
#   BENCH_REPS, BENCH_SECS  repetitions and seconds per cell, explicitly
#   BENCH_DRAIN_JOBS    jobs preloaded for the drain row (default 200000)
#   BENCH_SERVERS       subset of: rs rs-f50 rs-F bs-f0 bs-b bs-mem ceiling
#                       ceiling-sync ceiling-over (the sync ceiling writing
#                       a preallocated, zero-filled log in place)
#                       ceiling-uring (the in-loop sync ceiling, below) rs-cl
#                       rs-clf (a fresh 3-node cluster per cell, measured
#                       through the leader / a follower; the nodes talk
#                       plaintext), rs-clt rs-clft (the same with mutual TLS
#                       between the nodes, scripts/cluster-certs.sh),
#                       ceiling-raft
#                       (the Raft ceiling: 3 ceiling nodes on libraft,
#                       measured through the leader), ceiling-raftt (the
#                       same with mutual TLS between the nodes through
#                       stunnel; not in the default set), ceiling-raftk
#                       (the Raft ceiling whose nodes also put every
#                       applied job into one rockstalkd shard, as the
#                       cluster's nodes do: its storage work; not in the
#                       default set), rs-tls (rs
#                       measured through its tls:// listener), bs-stunnel
#                       (bs-b behind an stunnel TLS server with the same
#                       certificate; the CPU of both counted), or also
#                       (not in the default set) ceiling-syncN (the sync
#                       ceiling with N = 1-16 log files whose syncs
#                       overlap), ceiling-write (the write ceiling: the
#                       sync ceiling without its fdatasync, the promise
#                       of -f 50), ceiling-rocks (the RocksDB write
#                       ceiling: the write ceiling that also puts every
#                       job's meta and body into one rockstalkd shard,
#                       the least -f 50 must do as it keeps every job in
#                       RocksDB), ceiling-orocks (the RocksDB sync ceiling:
#                       the overwrite sync ceiling that also keeps every
#                       job in the shard as -k does, the least the default
#                       mode must do at put c=50); ceiling-uring (in the
#                       default set: the
#                       in-loop sync ceiling: no syncer thread, the loop
#                       writes each generation in place through io_uring,
#                       O_DIRECT | O_DSYNC; the put c=1 row's other shape),
#                       ceiling-overg (the overwrite sync ceiling whose
#                       syncer fills each generation as rockstalkd's
#                       mutation thread does under -f 0, ceiling -g),
#                       ceiling-overd (the overwrite sync ceiling's syncer
#                       thread with ceiling-uring's I/O: O_DIRECT |
#                       O_DSYNC writes, no fdatasync, ceiling -d),
#                       ceiling-overs (its syncer writing each generation
#                       with pwritev2 RWF_DSYNC, no fdatasync, ceiling -s),
#                       ceiling-split (the split sync ceiling, bigsmall
#                       rows only: the overwrite sync ceiling whose put
#                       bodies of 64 KiB or more go to a body file of
#                       their own, written and synced by a second syncer
#                       thread, ceiling -o -L 65536), ceiling-splitk
#                       (in the default set: the same with rockstalkd's
#                       body ring's write-back window, -K)
#                       and rs-mem (rockstalkd --memory: the
#                       server's own work without any storage); rs-console
#                       (rs with --http and one open console page's polls
#                       every 2 s: stats, tubes, history, the measured
#                       tube's first page of jobs; in CONSOLE_ROWS only).
#                       The ceilings answer puts only, except ceiling,
#                       ceiling-sync(N), ceiling-over(g,d,s), ceiling-uring and
#                       ceiling-write, which in the cycle rows (cycle50,
#                       cycle100t1, cycle100t1000) run with -q: the same
#                       work as any server's there (jobs kept by tube,
#                       reserve, delete), the same-work ceiling
#   BENCH_FORK          a beanstalkd fork's binary (issue 30 names the C
#                       fork antikirra/beanstalkd, built by hand from its
#                       public source; nothing of it is kept here): adds
#                       the servers fk-b (its -b DIR) and fk-D (-b DIR -D,
#                       its durable mode with group commit), if asked for
#   BENCH_BODY          job body bytes (default 100; the 4 KiB row: 4096)
#   BENCH_ROWS          subset of: put1 put50 put50p16 put50-4k cycle50 drain50
#                       conn1 (one client: connect, with TLS the handshake,
#                       one put, close, in a loop; an op is a connection;
#                       run by rs, rs-tls, bs-b and bs-stunnel only)
#                       cycle100t1000 cycle100t1 (cycle c=100 over 1,000
#                       tubes, rsbench -U 1000, and over one, -U 1; run by
#                       rs, rs-f50, bs-b, bs-f0, fk-b, fk-D and the queue
#                       ceilings only; the put-to-reserve p99 and max are
#                       recorded too)
#                       bigsmall (one small producer, c=1, beside
#                       BENCH_BIG_CONNS producers of BENCH_BIG_BODY-byte
#                       bodies, all putting, one in flight each; three
#                       cells per server: both, the small one alone, the
#                       large ones alone; run by rs, rs-f50, bs-b and
#                       bs-f0 only, each with -z BENCH_BIG_BODY)
#                       bigsmall-r (not in the default list): bigsmall
#                       with incompressible bodies (rsbench -R), its three
#                       cells bigsmall-r-s, bigsmall-r, bigsmall-r-l
#   BENCH_BIG_BODY      the bigsmall row's large body bytes (default 262144)
#   BENCH_BIG_CONNS     its large producers (default 8)
#   BENCH_BIG_MIB       its disk budget: a cell ends once the large
#                       producers have put this many MiB (default 1024),
#                       or at its time bound
#   BENCH_TLS_ROWS      the rows rs-tls and bs-stunnel run in (default
#                       put50 cycle50 conn1)
#   BENCH_CONSOLE_ROWS  the rows rs-console runs in (default put50)
#   BENCH_CLUSTER=0     leave rs-cl, rs-clf and ceiling-raft out of the
#                       default servers
#   BENCH_CLUSTER_ROWS  the rows rs-cl, rs-clf and ceiling-raft run in
#                       (default put50 cycle50; ceiling-raft: puts only)
#   BENCH_PIN=split     servers on CPU 0, rsbench on CPU 1 (default: no pinning)
#   BENCH_TMP           where data directories go (default $TMPDIR or /tmp)
#   BENCH_STRICT=1      exit 1 when a target fails or a rockstalkd cell errs
#   ROCKSTALKD, BEANSTALKD  server binaries (default ../../rockstalkd and the
#                       beanstalkd on PATH); CC the C compiler (default cc)
# Exit status: 0, or 1 when a beanstalkd or ceiling cell failed (the harness
# or the machine is broken) or, with BENCH_STRICT=1, as said above.
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    REPS=${BENCH_REPS:-1}
    SECS=${BENCH_SECS:-2}
else
    REPS=${BENCH_REPS:-3}
    SECS=${BENCH_SECS:-5}
fi
DRAIN_JOBS=${BENCH_DRAIN_JOBS:-200000}
SERVERS="rs rs-f50 rs-F bs-f0 bs-b bs-mem ceiling ceiling-sync ceiling-over ceiling-uring ceiling-splitk"
SERVERS="$SERVERS rs-tls bs-stunnel rs-console"
[ "${BENCH_CLUSTER:-1}" = 0 ] ||
    SERVERS="$SERVERS rs-cl rs-clf rs-clt rs-clft ceiling-raft"
SERVERS=${BENCH_SERVERS:-$SERVERS}
CLUSTER_ROWS=${BENCH_CLUSTER_ROWS:-put50 cycle50}
BODY=${BENCH_BODY:-100}
ROWS=${BENCH_ROWS:-put1 put50 put50p16 put50-4k cycle50 drain50 conn1 cycle100t1 cycle100t1000 bigsmall}
BIG_BODY=${BENCH_BIG_BODY:-262144}
BIG_CONNS=${BENCH_BIG_CONNS:-8}
BIG_MIB=${BENCH_BIG_MIB:-1024}
BIG_JOBS=$((BIG_MIB * 1048576 / BIG_BODY)) # rsbench -n: the budget in jobs
[ "$BIG_JOBS" -ge 1 ] || BIG_JOBS=1
TLS_ROWS=${BENCH_TLS_ROWS:-put50 cycle50 conn1}
CONSOLE_ROWS=${BENCH_CONSOLE_ROWS:-put50}
PIN=${BENCH_PIN:-none}
TMPBASE=${BENCH_TMP:-${TMPDIR:-/tmp}}
BUILD=$HERE/build
ROCKSTALKD=${ROCKSTALKD:-$REPO/rockstalkd}
BEANSTALKD=${BEANSTALKD:-$(command -v beanstalkd || echo /usr/bin/beanstalkd)}
STUNNEL=${STUNNEL:-$(command -v stunnel4 || echo /usr/bin/stunnel4)}
RAW=$BUILD/results.txt   # one line per cell, see record()
LOGS=$BUILD/logs         # server and rsbench output of failed cells

say() { printf '%s\n' "$*" >&2; }

# shellcheck source=scripts/bench/common.sh
. "$HERE/common.sh"

build_tools() {
    mkdir -p "$BUILD" "$LOGS" || exit 1
    rm -f "$LOGS"/*.log
    bench_build rsbench || exit 1
    bench_build_ceiling || exit 1
}

ensure_rockstalkd() {
    [ -x "$ROCKSTALKD" ] && return
    [ "$ROCKSTALKD" = "$REPO/rockstalkd" ] || return
    say "rockstalkd missing: make -C $REPO rockstalkd"
    make -C "$REPO" rockstalkd >"$LOGS/make-rockstalkd.log" 2>&1 ||
        say "  build failed (see $LOGS/make-rockstalkd.log); its cells will be ERR"
}

# The server command line of configuration $1 on port $2, data dir $3
# (rs-tls: TLS on port $2, plaintext on port $4).
server_cmd() {
    local l=(-l 127.0.0.1 -p "$2")
    case $1 in
    rs) CMD=("$ROCKSTALKD" "${l[@]}" -b "$3") ;;
    rs-tls)
        ensure_certs
        CMD=("$ROCKSTALKD" -l 127.0.0.1 -p "$4" -b "$3"
            --listen "tls://127.0.0.1:$2"
            --tls-cert "$BUILD/certs/node1.pem"
            --tls-key "$BUILD/certs/node1.key")
        ;;
    rs-console) CMD=("$ROCKSTALKD" "${l[@]}" -b "$3" --http "127.0.0.1:$4") ;;
    rs-f50) CMD=("$ROCKSTALKD" "${l[@]}" -b "$3" -f 50) ;;
    rs-F) CMD=("$ROCKSTALKD" "${l[@]}" -b "$3" -F) ;;
    rs-mem) CMD=("$ROCKSTALKD" "${l[@]}" --memory) ;;
    bs-f0) CMD=("$BEANSTALKD" "${l[@]}" -b "$3" -f0) ;;
    bs-b) CMD=("$BEANSTALKD" "${l[@]}" -b "$3") ;;
    fk-b) CMD=("$BENCH_FORK" "${l[@]}" -b "$3") ;;
    fk-D) CMD=("$BENCH_FORK" "${l[@]}" -b "$3" -D) ;;
    bs-mem) CMD=("$BEANSTALKD" "${l[@]}") ;;
    ceiling) CMD=("$BUILD/ceiling" "${l[@]}") ;;
    ceiling-sync) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3") ;;
    ceiling-over) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -o) ;;
    ceiling-uring) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -o -u) ;;
    ceiling-overg) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -o -g) ;;
    ceiling-overd) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -o -d) ;;
    ceiling-overs) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -o -s) ;;
    ceiling-split) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -o -L 65536) ;;
    ceiling-splitk) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -o -L 65536 -K) ;;
    ceiling-write) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -w) ;;
    ceiling-rocks) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -w -k) ;;
    ceiling-orocks) CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -o -k) ;;
    ceiling-sync[0-9]*)
        CMD=("$BUILD/ceiling" "${l[@]}" -b "$3" -n "${1#ceiling-sync}")
        ;;
    esac
    # in the cycle rows the ceilings keep the jobs and answer reserve and
    # delete too (-q: the least work those rows need)
    case $ROW in cycle*) is_queue_ceiling "$1" && CMD+=(-q) ;; esac
    # the bigsmall cells' large bodies exceed both servers' default (the
    # ceilings take any size)
    case $ROW.$1 in bigsmall*.ceiling*) ;; bigsmall*) CMD+=(-z "$BIG_BODY") ;; esac
    pin_cmd
}

# Is configuration $1 a ceiling that runs the cycle rows (ceiling -q: the
# queue work those rows need and no more, in memory, with -b's sync paths
# or -w's write)? The RocksDB and Raft ceilings answer puts only.
is_queue_ceiling() {
    case $1 in
    ceiling | ceiling-sync | ceiling-sync[0-9]* | ceiling-over | ceiling-overg | ceiling-overd | ceiling-overs | ceiling-uring | ceiling-write) ;;
    *) return 1 ;;
    esac
}

pin_cmd() { if [ "$PIN" = split ]; then CMD=(taskset -c 0 "${CMD[@]}"); fi; }

# Is configuration $1 a 3-node cluster (rs-cl: measured through the leader's
# client port, rs-clf: through a follower's, which relays to the leader;
# ceiling-raft: the Raft ceiling, through its leader)?
is_cluster() { case $1 in rs-cl | rs-clf | rs-clt | rs-clft | ceiling-raft*) ;; *) return 1 ;; esac; }

# Is configuration $1 the Raft ceiling (ceiling-raft; ceiling-raftt: the
# same over mutual TLS between the nodes, through stunnel; ceiling-raftk:
# the same whose nodes keep every job in a rockstalkd shard)?
is_raft_ceiling() { case $1 in ceiling-raft | ceiling-raftt | ceiling-raftk) ;; *) return 1 ;; esac; }

# Is cluster configuration $1 measured through a follower?
via_follower() { [ "$1" = rs-clf ] || [ "$1" = rs-clft ]; }

# The mutual-TLS flags of node $2 for configuration $1 (rs-clt, rs-clft),
# certificates made once per run in $BUILD/certs.
tls_flags() {
    case $1 in rs-clt | rs-clft) ;; *) return ;; esac
    ensure_certs
    echo "--cluster-cert $BUILD/certs/node$2.pem" \
        "--cluster-key $BUILD/certs/node$2.key --cluster-ca $BUILD/certs/ca.pem"
}

# Makes the certificates of a run once, in $BUILD/certs (a CA and 3 nodes'
# certificates; the cluster's mutual TLS and the TLS listeners use them).
ensure_certs() {
    [ -e "$BUILD/certs/ca.pem" ] ||
        "$REPO/scripts/cluster-certs.sh" "$BUILD/certs" 3 >/dev/null 2>&1
}

# Is configuration $1 measured through TLS?
is_tls() { [ "$1" = rs-tls ] || [ "$1" = bs-stunnel ]; }

# bs-stunnel: beanstalkd -b on port $2 (data dir $3) behind stunnel's TLS
# server on port $1 (log $4), with rs-tls's certificate; sets SRV_PIDS
# (stunnel's, beanstalkd's).
start_stunnel() {
    ensure_certs
    CMD=("$BEANSTALKD" -l 127.0.0.1 -p "$2" -b "$3")
    pin_cmd
    "${CMD[@]}" >>"$4" 2>&1 &
    SRV_PIDS=($!)
    # one process, a thread per connection (Debian's build); TCP_NODELAY
    # on both sides and no per-connection log lines, as a tuned setup has
    CMD=("$STUNNEL" -fd 3)
    pin_cmd
    "${CMD[@]}" >>"$4" 2>&1 3<<EOF &
foreground = yes
pid =
debug = 4
[beanstalkd]
accept = 127.0.0.1:$1
connect = 127.0.0.1:$2
cert = $BUILD/certs/node1.pem
key = $BUILD/certs/node1.key
sslVersionMin = TLSv1.2
socket = l:TCP_NODELAY=1
socket = r:TCP_NODELAY=1
EOF
    SRV_PIDS=($! "${SRV_PIDS[0]}")
}

# ceiling-raftt's TLS between the nodes (log $1): one stunnel process with,
# for each node i, a client side accepting plaintext on ${$3[i]} (the
# address the other nodes know node i by) and connecting with TLS to
# ${$4[i]}, and a server side accepting that TLS and connecting to node i's
# bound Raft port ${$2[i]}; both sides present a certificate of the run's
# CA and require one (mutual TLS, as rs-clt's nodes), TLS 1.3 with
# AES-128-GCM first (as rockstalkd's peer TLS), TCP_NODELAY. Appends
# stunnel's pid to SRV_PIDS, so its CPU counts as the cluster's.
start_raft_tls() {
    local -n _rp=$2 _ap=$3 _tp=$4
    local i c="$BUILD/certs"
    ensure_certs
    {
        printf 'foreground = yes\npid =\ndebug = 4\n'
        printf 'sslVersionMin = TLSv1.3\n'
        printf 'ciphersuites = TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384\n'
        printf 'CAfile = %s/ca.pem\nverifyChain = yes\n' "$c"
        printf 'socket = l:TCP_NODELAY=1\nsocket = r:TCP_NODELAY=1\n'
        for i in 0 1 2; do
            printf '[c%d]\nclient = yes\naccept = 127.0.0.1:%s\n' \
                "$i" "${_ap[i]}"
            printf 'connect = 127.0.0.1:%s\n' "${_tp[i]}"
            printf 'cert = %s/node%d.pem\nkey = %s/node%d.key\n' \
                "$c" $(((i + 1) % 3 + 1)) "$c" $(((i + 1) % 3 + 1))
            printf '[s%d]\naccept = 127.0.0.1:%s\n' "$i" "${_tp[i]}"
            printf 'connect = 127.0.0.1:%s\n' "${_rp[i]}"
            printf 'cert = %s/node%d.pem\nkey = %s/node%d.key\n' \
                "$c" $((i + 1)) "$c" $((i + 1))
        done
    } >"$BUILD/raftt.conf"
    CMD=("$STUNNEL" "$BUILD/raftt.conf")
    pin_cmd
    "${CMD[@]}" >>"$1" 2>&1 &
    SRV_PIDS+=($!)
}

# The Raft ceiling's leader: the node whose data dir $1/nodeN holds LEADER.
ceiling_leader() {
    local i
    for i in 1 2 3; do [ -e "$1/node$i/LEADER" ] && echo "$i" && return; done
}

row_args() {
    case $1 in
    put1) echo "-m put -c 1 -P 1 -s $BODY" ;;
    put50) echo "-m put -c 50 -P 1 -s $BODY" ;;
    put50p16) echo "-m put -c 50 -P 16 -s $BODY" ;;
    put50-4k) echo "-m put -c 50 -P 1 -s 4096" ;;
    cycle50) echo "-m cycle -c 50 -P 1 -s $BODY" ;;
    cycle100t1) echo "-m cycle -c 100 -P 1 -s $BODY -U 1" ;;
    cycle100t1000) echo "-m cycle -c 100 -P 1 -s $BODY -U 1000" ;;
    conn1) echo "-m conn -s $BODY" ;;
    bigsmall | bigsmall-s | bigsmall-l | bigsmall-r | bigsmall-r-s | bigsmall-r-l)
        local c=1 g=$BIG_CONNS r=
        case $1 in *-s) g=0 ;; *-l) c=0 ;; esac
        case $1 in bigsmall-r*) r=" -R" ;; esac
        echo "-m bigsmall -c $c -P 1 -s $BODY -g $g -G $BIG_BODY -n $BIG_JOBS$r"
        ;;
    drain50) echo "-m drain -c 50 -P 1 -s $BODY -L $DRAIN_JOBS" ;;
    esac
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Starts configuration $1 with data dir $2 and log $3; sets SRV_PIDS (the
# server's pid, or the cluster nodes', or stunnel's and beanstalkd's),
# SRV_PORT (the one measured) and SRV_TLS (rsbench's -T, or nothing).
start_server() {
    local port port2 i
    SRV_TLS=()
    is_tls "$1" && SRV_TLS=(-T)
    if is_cluster "$1"; then
        start_cluster "$@"
        return
    fi
    for _ in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 12000))  # below the ephemeral range
        port2=$((20000 + RANDOM % 12000)) # rs-tls, bs-stunnel: the other
        [ "$port" = "$port2" ] && continue
        listening "$port" && continue
        listening "$port2" && continue
        if [ "$1" = bs-stunnel ]; then
            start_stunnel "$port" "$port2" "$2" "$3"
        else
            server_cmd "$1" "$port" "$2" "$port2"
            "${CMD[@]}" >>"$3" 2>&1 &
            SRV_PIDS=($!)
        fi
        SRV_PORT=$port
        for i in $(seq 100); do
            srv_alive || break
            if listening "$port" && { [ "$1" != bs-stunnel ] ||
                listening "$port2"; }; then
                [ "$1" = rs-console ] && start_console_poll "$port2"
                return 0
            fi
            sleep 0.1
        done
        stop_server
    done
    return 1
}

# Are all the server's processes running?
srv_alive() {
    local p
    for p in "${SRV_PIDS[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done
}

# Is any of them?
srv_any() {
    local p
    for p in "${SRV_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done
    return 1
}

# rs-console: what one open console page asks the HTTP server on port $1
# every 2 s (the console polls at that period), in the background; sets
# POLL_PID. Its requests are not counted as operations.
start_console_poll() {
    local port=$1
    (
        while :; do
            for p in stats tubes history "tubes/rsbench/jobs?limit=100"; do
                curl -s -o /dev/null --max-time 2 \
                    "http://127.0.0.1:$port/api/v1/$p"
            done
            sleep 2
        done
    ) &
    POLL_PID=$!
}

stop_server() {
    local i p
    if [ -n "${POLL_PID:-}" ]; then
        kill "$POLL_PID" 2>/dev/null
        wait "$POLL_PID" 2>/dev/null
        POLL_PID=""
    fi
    kill -TERM "${SRV_PIDS[@]}" 2>/dev/null
    for i in $(seq 100); do
        srv_any || break
        sleep 0.1
    done
    kill -KILL "${SRV_PIDS[@]}" 2>/dev/null
    for p in "${SRV_PIDS[@]}"; do wait "$p" 2>/dev/null; done
}

# "ROLE LEADER" from the stats that port $1 answers within 2 s: the
# rockstalk-cluster-role and -leader values. A follower relays the command,
# so its answer is the leader's ("leader L"); empty if there is no answer.
cluster_view() {
    local fd line role="" lead=""
    exec {fd}<>"/dev/tcp/127.0.0.1/$1" || return 0
    printf 'stats\r\n' >&"$fd"
    while [ -z "$role" ] || [ -z "$lead" ]; do
        IFS= read -r -t 2 line <&"$fd" || break
        line=${line%$'\r'}
        case $line in
        "rockstalk-cluster-role: "*) role=${line#*: } ;;
        "rockstalk-cluster-leader: "*) lead=${line#*: } ;;
        esac
    done
    exec {fd}>&-
    [ -n "$role" ] && [ -n "$lead" ] && echo "$role $lead"
    return 0
}

# The id of the leader of the nodes whose client ports are $@ (node i at
# the i-th), once it answers on its own port and every other node relays
# to it; empty otherwise.
serving_leader() {
    local ports=("$@") i lead=""
    for i in "${!ports[@]}"; do
        if [ "$(cluster_view "${ports[i]}" 2>/dev/null)" = "leader $((i + 1))" ]; then
            lead=$((i + 1))
            break
        fi
    done
    [ -n "$lead" ] || return 0
    for i in "${!ports[@]}"; do
        [ "$(cluster_view "${ports[i]}" 2>/dev/null)" = "leader $lead" ] ||
            return 0
    done
    echo "$lead"
}

# Starts a 3-node cluster (configuration $1: rs-cl or rs-clf) with the
# nodes' data dirs $2/node1..3 and logs ${3%.log}.node1..3.log on free
# ports; waits up to 30 s until the leader serves and the followers relay
# to it. Sets SRV_PIDS to the nodes' pids and SRV_PORT to the leader's
# client port (rs-cl) or the next node's after the leader (rs-clf).
start_cluster() {
    local i p spec rspec lead n=6
    local -a cp rp ap tp ports
    [ "$1" = ceiling-raftt ] && n=12
    for _ in 1 2 3; do
        ports=()
        while [ ${#ports[@]} -lt $n ]; do
            p=$((20000 + RANDOM % 12000))
            listening "$p" && continue
            case " ${ports[*]} " in *" $p "*) continue ;; esac
            ports+=("$p")
        done
        # client ports, Raft ports; ceiling-raftt: the TLS proxy's client
        # side (the addresses the nodes know each other by) and server side
        cp=("${ports[@]:0:3}") rp=("${ports[@]:3:3}")
        ap=("${ports[@]:6:3}") tp=("${ports[@]:9:3}")
        spec="" rspec=""
        for i in 0 1 2; do
            spec="$spec${spec:+,}$((i + 1))@127.0.0.1:${rp[i]}/${cp[i]}"
            p=${rp[i]}
            [ "$1" = ceiling-raftt ] && p=${ap[i]}
            rspec="$rspec${rspec:+,}$((i + 1))@127.0.0.1:$p"
        done
        SRV_PIDS=()
        for i in 0 1 2; do
            # shellcheck disable=SC2046 # the flags are words
            CMD=("$ROCKSTALKD" -l 127.0.0.1 -p "${cp[i]}" -b "$2/node$((i + 1))"
                --cluster "$spec" --node-id "$((i + 1))"
                $(tls_flags "$1" "$((i + 1))"))
            if is_raft_ceiling "$1"; then
                mkdir -p "$2/node$((i + 1))"
                CMD=("$BUILD/ceiling" -l 127.0.0.1 -p "${cp[i]}"
                    -b "$2/node$((i + 1))" -R "$((i + 1))" -r "$rspec"
                    -B "127.0.0.1:${rp[i]}")
                [ "$1" = ceiling-raftk ] && CMD+=(-k)
            fi
            pin_cmd
            echo "${CMD[*]}" >>"${3%.log}.node$((i + 1)).log"
            "${CMD[@]}" >>"${3%.log}.node$((i + 1)).log" 2>&1 &
            SRV_PIDS+=($!)
        done
        [ "$1" = ceiling-raftt ] &&
            start_raft_tls "${3%.log}.stunnel.log" rp ap tp
        for i in $(seq 300); do
            srv_alive || break
            if is_raft_ceiling "$1"; then
                lead=$(ceiling_leader "$2")
            else
                lead=$(serving_leader "${cp[@]}")
            fi
            if [ -n "$lead" ]; then
                SRV_PORT=${cp[lead - 1]}
                via_follower "$1" && SRV_PORT=${cp[$((lead % 3))]}
                echo "leader: node $lead; measured through port $SRV_PORT" \
                    >>"$3"
                return 0
            fi
            sleep 0.1
        done
        echo "no serving leader (nodes alive: $(srv_alive && echo yes ||
            echo no))" >>"$3"
        stop_server
        rm -rf "$2"/node*
    done
    return 1
}

# rep row server status [ops_s p50 p99 p999 cpu_us_op hwm_kb preload_s cell_s
# e2e_p99 e2e_max e2e_p50] (e2e: put sent to job reserved, us; cycle rows)
record() { echo "$*" >>"$RAW"; }

# The value of key $1 in RESULT line $2, "-" if absent.
kv() {
    local v
    v=$(sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2")
    echo "${v:--}"
}

# Runs rsbench "$@" against the running server; sets OUT and RC.
bench() {
    local pin=() limit=$((SECS + 60))
    [ "$PIN" = split ] && pin=(taskset -c 1)
    [ "$ROW" = drain50 ] && limit=$((SECS + 240))
    OUT=$(timeout "$limit" "${pin[@]}" "$BUILD/rsbench" -p "$SRV_PORT" \
        -S "$(IFS=,; echo "${SRV_PIDS[*]}")" "${SRV_TLS[@]}" "$@" 2>&1)
    RC=$?
    if ! srv_alive; then
        RC=99
        OUT="$OUT
server exited during the run"
    fi
}

# beanstalkd -f0 fsyncs every put, so preloading the drain row that way would
# take a minute per cell; it is preloaded under beanstalkd -b instead (same
# binlog) and the directory then restarted with -f0, which replays it.
preload_via() { [ "$1" = bs-f0 ] && echo bs-b; }

# Preloads DRAIN_JOBS jobs into data dir $2 under configuration $1.
preload_dir() {
    start_server "$1" "$2" "$3" || return 1
    bench -m put -c 50 -P 64 -s "$BODY" -n "$DRAIN_JOBS" -d 0
    stop_server
    echo "$OUT" >>"$3"
    [ "$RC" -eq 0 ] || return 1
    PRELOAD_S=$(kv secs "$(grep '^RESULT ' <<<"$OUT")")
}

# Records an ERR cell ($1 rep, $2 server, $3 data dir, $4 log, $5 why).
cell_fail() {
    echo "$5" >>"$4"
    record "$1 $ROW $2 ERR"
    rm -rf "$3"
}

# Runs one cell: rep $1, row $2, server configuration $3.
run_cell() {
    local rep=$1 srv=$3 dir log t0 args x="" via res
    ROW=$2 PRELOAD_S=""
    t0=$(date +%s.%N)
    dir=$(mktemp -d "$TMPBASE/rsbench.XXXXXX") || exit 1
    log=$LOGS/$ROW.$srv.$rep.log
    : >"$log"
    args=$(row_args "$ROW")
    if [ "${srv#rs}" != "$srv" ] && [ ! -x "$ROCKSTALKD" ]; then
        cell_fail "$rep" "$srv" "$dir" "$log" "no rockstalkd binary"
        return
    fi
    via=$(preload_via "$srv")
    if [ "$ROW" = drain50 ] && [ -n "$via" ]; then
        if ! preload_dir "$via" "$dir" "$log"; then
            cell_fail "$rep" "$srv" "$dir" "$log" "preload under $via failed"
            return
        fi
        args="-m drain -c 50 -P 1 -s $BODY"
    fi
    if ! start_server "$srv" "$dir" "$log"; then
        cell_fail "$rep" "$srv" "$dir" "$log" "server did not start"
        return
    fi
    [ "${srv#ceiling}" != "$srv" ] && x=-x
    # shellcheck disable=SC2086
    bench $args -d "$SECS" $x
    stop_server
    rm -rf "$dir"
    echo "$OUT" >>"$log"
    res=$(grep '^RESULT ' <<<"$OUT")
    if [ "$RC" -ne 0 ] || [ -z "$res" ]; then
        record "$rep $ROW $srv ERR"
        return
    fi
    if [ "$ROW" = drain50 ] && [ "$(kv jobs_before "$res")" != "$DRAIN_JOBS" ]; then
        echo "drain started with $(kv jobs_before "$res") jobs" >>"$log"
        record "$rep $ROW $srv ERR"
        return
    fi
    rm -f "$log" "${log%.log}".node*.log
    if [ "${ROW#bigsmall}" != "$ROW" ]; then
        record_bigsmall "$rep" "$srv" "$res" "$t0"
        return
    fi
    record "$rep $ROW $srv ok $(kv ops_s "$res") $(kv p50_us "$res")" \
        "$(kv p99_us "$res") $(kv p999_us "$res")" \
        "$(kv srv_cpu_us_op "$res") $(kv srv_hwm_kb "$res")" \
        "${PRELOAD_S:-$(kv preload_s "$res")} $(awk -v a="$t0" \
            -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" \
        "$(kv e2e_p99_us "$res") $(kv e2e_max_us "$res")" \
        "$(kv e2e_p50_us "$res")"
}

# Records a bigsmall cell (rep $1, server $2, RESULT line $3, start time
# $4): the small producer's ops/s and p50/p99/p99.9 as columns 5-8 ("-"
# in the large-only cell), CPU us per put (both sizes) and RSS, cell
# seconds; then 16 the large producers' ops/s ("-" in the small-only
# cell), 17 the small put's max latency, 18 the large puts' p99, 19 the
# measured seconds (below BENCH_SECS when the disk budget ended it).
record_bigsmall() {
    local res=$3
    record "$1 $ROW $2 ok $(kv small_ops_s "$res") $(kv small_p50_us "$res")" \
        "$(kv small_p99_us "$res") $(kv small_p999_us "$res")" \
        "$(kv srv_cpu_us_op "$res") $(kv srv_hwm_kb "$res") -" \
        "$(awk -v a="$4" -v b="$(date +%s.%N)" \
            'BEGIN { printf "%.1f", b - a }') - - -" \
        "$(kv large_ops_s "$res") $(kv small_max_us "$res")" \
        "$(kv large_p99_us "$res") $(kv secs "$res")"
}

# The cells of row $1 for one server: bigsmall is three, the small
# producer alone (bigsmall-s), both (bigsmall) and the large ones alone
# (bigsmall-l), run back to back so that what each side keeps is measured
# over the least drift of a shared machine; bigsmall-r likewise.
cell_rows() {
    case $1 in
    bigsmall) echo "bigsmall-s bigsmall bigsmall-l" ;;
    bigsmall-r) echo "bigsmall-r-s bigsmall-r bigsmall-r-l" ;;
    *) echo "$1" ;;
    esac
}

# Servers in a different order each repetition, so none always goes first.
rotated() {
    local -a s
    read -r -a s <<<"$SERVERS"
    local n=${#s[@]} i
    for ((i = 0; i < n; i++)); do echo -n "${s[$(((i + $1) % n))]} "; done
}

# The ceiling probes answer puts only, except the queue ceilings
# (is_queue_ceiling), which run the cycle rows too (with -q); the cluster
# runs in CLUSTER_ROWS, rs-tls and bs-stunnel in TLS_ROWS; conn1 compares
# TLS with plaintext beside beanstalkd only, and the default mode with the
# durable beanstalkds (bs-f0, fk-D); the many-tubes rows run rs,
# rs-f50, bs-b, bs-f0, the fork (fk-b, fk-D) and the queue ceilings, the
# bigsmall cells those but the queue ceilings, and ceiling (no disk: what
# the load generator and this machine's cores leave of the small put's
# rate and latency beside the large bodies' bytes) and the split sync
# ceilings, which run nowhere else (with 100-byte bodies they are
# ceiling-over).
skip_cell() {
    if is_cluster "$2"; then
        case " $CLUSTER_ROWS " in *" $1 "*) ;; *) return 0 ;; esac
    fi
    if is_tls "$2"; then
        case " $TLS_ROWS " in *" $1 "*) ;; *) return 0 ;; esac
    fi
    if [ "$2" = rs-console ]; then
        case " $CONSOLE_ROWS " in *" $1 "*) ;; *) return 0 ;; esac
    fi
    if [ "$1" = conn1 ]; then
        case $2 in rs | rs-tls | bs-b | bs-f0 | fk-D | bs-stunnel) ;; *) return 0 ;; esac
    fi
    case $1 in cycle100t*)
        case $2 in rs | rs-f50 | bs-b | bs-f0 | fk-b | fk-D) ;; *) is_queue_ceiling "$2" || return 0 ;; esac ;;
    esac
    case $1 in bigsmall*)
        case $2 in rs | rs-f50 | bs-b | bs-f0 | fk-b | fk-D | ceiling | ceiling-split | ceiling-splitk) return 1 ;; *) return 0 ;; esac
        ;;
    esac
    case $2 in ceiling-split*) return 0 ;; esac
    case $1 in cycle*) is_queue_ceiling "$2" && return 1 ;; esac
    [ "${2#ceiling}" != "$2" ] && [ "${1#put}" = "$1" ]
}

run_matrix() {
    local rep row srv cr total=0 done=0 line
    for row in $ROWS; do
        for srv in $SERVERS; do
            for cr in $(cell_rows "$row"); do
                skip_cell "$cr" "$srv" || total=$((total + 1))
            done
        done
    done
    total=$((total * REPS))
    for rep in $(seq "$REPS"); do
        for row in $ROWS; do
            for srv in $(rotated "$rep"); do
                for cr in $(cell_rows "$row"); do
                    skip_cell "$cr" "$srv" && continue
                    done=$((done + 1))
                    run_cell "$rep" "$cr" "$srv"
                    line=$(tail -n 1 "$RAW")
                    printf '[%d/%d] rep %d %-10s %-8s %s\n' "$done" "$total" \
                        "$rep" "$cr" "$srv" "$(progress <<<"$line")" >&2
                done
            done
        done
    done
}

# What a cell's line in results.txt (stdin) says, for the progress lines.
progress() {
    awk '$4 != "ok" { print "ERR"; next }
        $2 ~ /^bigsmall/ {
            printf "small %s/s, large %s/s, in %s s, cell %s s\n",
                $5, $16, $19, $12; next }
        { printf "%.0f ops/s, preload %s s, cell %s s\n", $5, $11, $12 }'
}

# Percent of all CPUs busy over one second (other sessions, builds, ...).
cpu_busy() {
    local a b
    a=$(head -n 1 /proc/stat)
    sleep 1
    b=$(head -n 1 /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ")
        for (i = 2; i <= n; i++) t += y[i] - x[i]
        idle = y[5] - x[5] + y[6] - x[6]
        printf "%.0f", t ? 100 * (t - idle) / t : 0 }'
}

header() {
    echo "rockstalk benchmark, $(date '+%Y-%m-%d %H:%M %Z')"
    echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' \
        /proc/cpuinfo | head -n 1), $(awk '/MemTotal/ {printf "%.0f GiB", \
        $2 / 1048576}' /proc/meminfo), Linux $(uname -r)"
    echo "beanstalkd: $("$BEANSTALKD" -v 2>&1 | head -n 1)"
    case " $SERVERS " in *" bs-stunnel "*)
        echo "stunnel: $("$STUNNEL" -version 2>&1 |
            sed -n 's/^.*\(stunnel [0-9.]*\) .*/\1/p' | head -n 1)," \
            "$("$STUNNEL" -version 2>&1 | sed -n 's/^.*Running  *with //p' |
                head -n 1)" ;;
    esac
    case " $SERVERS " in *" rs-tls "* | *" bs-stunnel "*)
        echo "TLS: rsbench -T ($(openssl version | cut -d' ' -f1,2)," \
            "no resumption), EC P-256 server certificate; rows: $TLS_ROWS" ;;
    esac
    echo "rockstalkd: $ROCKSTALKD ($(git -C "$REPO" describe --always \
        --dirty 2>/dev/null || echo 'no commit'))"
    echo "cells: $REPS x ${SECS}s, medians; bodies $BODY B;" \
        "drain preload $DRAIN_JOBS jobs;" \
        "pinning: $PIN; data dirs in $TMPBASE"
    case " $ROWS " in *" bigsmall "* | *" bigsmall-r "*)
        echo "bigsmall: 1 producer of $BODY B beside $BIG_CONNS of" \
            "$BIG_BODY B, one put in flight each; servers -z $BIG_BODY;" \
            "a cell ends after $BIG_JOBS large puts ($BIG_MIB MiB) or" \
            "${SECS}s; bigsmall-r: the same with incompressible bodies" \
            "(rsbench -R)" ;;
    esac
    case " $SERVERS " in *" rs-cl"*)
        echo "cluster: 3 rockstalkd nodes on this machine (Raft, default" \
            "durable mode), fresh per cell; rows: $CLUSTER_ROWS" ;;
    esac
    local busy
    busy=$(cpu_busy)
    echo "CPU busy before the run: ${busy}%$([ "$busy" -ge 10 ] &&
        echo ' - WARNING: something else is running; numbers will be noisy')"
}

main() {
    local t0=$SECONDS
    build_tools
    ensure_beanstalkd
    case " $SERVERS " in *" bs-stunnel "*) ensure_stunnel ;; esac
    ensure_rockstalkd
    : >"$RAW"
    header >"$BUILD/header.txt"
    cat "$BUILD/header.txt" >&2
    run_matrix
    local rc
    {
        echo
        cat "$BUILD/header.txt"
        echo
        REPS=$REPS ROWS="$ROWS" SERVERS="$SERVERS" DRAIN_JOBS=$DRAIN_JOBS \
            BIG_BODY=$BIG_BODY BIG_CONNS=$BIG_CONNS \
            STRICT=${BENCH_STRICT:-0} awk -f "$HERE/report.awk" "$RAW"
    } | tee "$BUILD/report.txt"
    rc=${PIPESTATUS[0]}
    echo
    echo "took $((SECONDS - t0)) s; table: $BUILD/report.txt;" \
        "raw results: $RAW; logs of failed cells: $LOGS"
    return "$rc"
}

main "$@"
