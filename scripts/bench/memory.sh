#!/usr/bin/env bash
# scripts/bench/memory.sh - memory and restart benchmark (BENCHMARKS.md,
# "Memory and restart"); `make bench-memory` runs it.
#
# Rows, rockstalkd beside Debian's beanstalkd 1.12 where stated:
#   1  load MEM_JOBS 1 KiB jobs: puts/s and RSS after the load, both servers
#   2  load MEM_JOBS_BIG 1 KiB jobs into rockstalkd: puts/s and RSS after;
#      a light client's p99 and maximum round trip (MEM_RTT_CMD, one at a
#      time, 1 ms apart) during that load: loop stalls show there; and
#      those of the same client on an idle second rockstalkd meanwhile,
#      the machine's own noise
#   3  restart (SIGTERM, start again on the same directory): time until the
#      server answers `stats`, both servers at MEM_JOBS, rockstalkd (and
#      beanstalkd when feasible) at MEM_JOBS_BIG
#   4  drain (reserve + delete, 50 connections) right after a restart (cold:
#      bodies on disk) against a fresh server with -m above the data size
#      (warm); p50/p99 of a one-connection latency client during both drains
#      and on the idle server
#   5  RSS after the drain against the idle RSS, both servers
# Every server runs on a free 127.0.0.1 port with a fresh data directory,
# which is removed afterwards. Progress goes to stderr, the table to stdout
# and to scripts/bench/build/memory-report.txt.
#
# Knobs (environment):
#   MEM_JOBS            jobs of rows 1, 3, 4, 5 (default 1000000)
#   MEM_JOBS_BIG        jobs of rows 2 and 3 (default 10000000; 0 skips them)
#   MEM_SIZE            body bytes (default 1024)
#   MEM_BS_BIG=auto|1|0 beanstalkd at MEM_JOBS_BIG too: auto (default) runs
#                       it when memory, disk and the time estimated from its
#                       MEM_JOBS row allow (MEM_BS_BIG_BUDGET s, default 600)
#   MEM_BIG_FLAGS       rockstalkd flags of the MEM_JOBS_BIG load (default
#                       auto: durable mode, or -f 50 if the MEM_JOBS load rate
#                       says the durable load would take over 900 s)
#   MEM_LAT_SECS        seconds of each latency-client run (default 10)
#   MEM_RTT_CMD         the light client's command (default "stats-tube
#                       rsbench", the load's tube: O(1), no store access)
#   MEM_TMP             where data directories go (default $TMPDIR or /tmp)
#   MEM_DROP_CACHES=1   as root, drop the kernel's page cache (whole machine)
#                       before the cold restart, so the cold drain reads the
#                       disk too (default 0: the files may still be cached)
#   MEM_RS_ONLY=1       rockstalkd's MEM_JOBS load and restart only (rows 1
#                       and 3, rockstalkd column): no drain, no beanstalkd,
#                       no warm or MEM_JOBS_BIG rows (a quick memory check)
#   MEM_REPORT=FILE     only print the table again from the "V key=value"
#                       lines of an earlier run's memory-results.txt
#   ROCKSTALKD, BEANSTALKD, CC   binaries and compiler
# Exit status: 0, or 1 when a step failed (a server did not start, lost
# jobs, rsbench failed); target misses are reported, not fatal.
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
JOBS=${MEM_JOBS:-1000000}
BIG=${MEM_JOBS_BIG:-10000000}
SIZE=${MEM_SIZE:-1024}
BS_BIG=${MEM_BS_BIG:-auto}
BS_BIG_BUDGET=${MEM_BS_BIG_BUDGET:-600}
BIG_FLAGS=${MEM_BIG_FLAGS-auto}
LAT_SECS=${MEM_LAT_SECS:-10}
RTT_CMD=${MEM_RTT_CMD:-stats-tube rsbench}
DROP_CACHES=${MEM_DROP_CACHES:-0}
RS_ONLY=${MEM_RS_ONLY:-0}
TMPBASE=${MEM_TMP:-${TMPDIR:-/tmp}}
BUILD=$HERE/build
LOGS=$BUILD/logs
RAW=$BUILD/memory-results.txt
REPORT=$BUILD/memory-report.txt
ROCKSTALKD=${ROCKSTALKD:-$REPO/rockstalkd}
BEANSTALKD=${BEANSTALKD:-$(command -v beanstalkd || echo /usr/bin/beanstalkd)}
RSBENCH=$BUILD/rsbench
RTT=$BUILD/rtt
WARM_CACHE=2000000000 # -m of the warm server: above any MEM_JOBS we run

T0=$SECONDS
FAILED=0
DIRS=()
SRV_PID= # the server running now, if any (cleanup also kills the latency
         # client LAT_PID and the control server and client CTL_SRV, CTL_RTT)
LAT_PID=
CTL_SRV="" # the idle control server of row 2
CTL_RTT="" # and its light client

say() { printf '[%4d s] %s\n' "$((SECONDS - T0))" "$*" >&2; }
note() { echo "$*" >>"$RAW"; }
fail() {
    say "FAILED: $*"
    note "FAILED: $*"
    FAILED=1
}

cleanup() {
    local p
    for p in $SRV_PID $LAT_PID $CTL_RTT $CTL_SRV; do
        kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    for p in "${DIRS[@]}"; do rm -rf "$p"; done
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

# ---- small helpers --------------------------------------------------------

now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
mib() { # kB -> MiB, "-" stays
    case ${1:--} in -) echo - ;; *) awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }' ;; esac
}
kv() { # value of key $1 in RESULT line $2
    local v
    v=$(sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2")
    echo "${v:--}"
}
int() { case ${1:--} in -) echo - ;; *) printf '%.0f' "$1" ;; esac; }
free_kb() { df -Pk "$TMPBASE" | awk 'NR == 2 { print $4 }'; }
avail_kb() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

new_dir() {
    DIR=$(mktemp -d "$TMPBASE/rsmem.XXXXXX") || { say "mktemp failed"; exit 1; }
    DIRS+=("$DIR")
}

# shellcheck source=scripts/bench/common.sh
. "$HERE/common.sh"

build_tools() {
    mkdir -p "$BUILD" "$LOGS" || exit 1
    bench_build rsbench || exit 1
    bench_build rtt || exit 1
    if [ ! -x "$ROCKSTALKD" ]; then
        say "rockstalkd missing: make -C $REPO rockstalkd"
        make -C "$REPO" rockstalkd >"$LOGS/memory-make.log" 2>&1 ||
            { say "cannot build rockstalkd (see $LOGS/memory-make.log)"; exit 1; }
    fi
    ensure_beanstalkd || exit 1
}

# ---- servers --------------------------------------------------------------

# Connects to $1 (retrying every 10 ms while nothing listens), sends `stats`
# and reads the reply up to current-jobs-ready. Times are from $3 (an
# EPOCHREALTIME); gives up after $4 s or when pid $2 exits. Sets CONN_S
# (connect accepted), READY_S (stats answered) and READY_JOBS.
wait_ready() {
    local port=$1 pid=$2 t0=$3 limit=$4 line
    CONN_S=- READY_S=- READY_JOBS=-
    while :; do
        kill -0 "$pid" 2>/dev/null || return 1
        { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null && break
        [ "$(since "$t0" | cut -d. -f1)" -ge "$limit" ] && return 1
        sleep 0.01
    done
    CONN_S=$(since "$t0")
    printf 'stats\r\n' >&3
    while IFS= read -r -t "$limit" line <&3; do
        line=${line%$'\r'}
        case $line in
        current-jobs-ready:*)
            READY_S=$(since "$t0")
            READY_JOBS=${line#*: }
            break
            ;;
        esac
    done
    exec 3<&-
    [ "$READY_S" != - ]
}

# start_srv rs|bs DIR LOG [flags...]: starts the server on a free port and
# waits until it answers stats (up to 600 s). Sets SRV_PID, SRV_PORT and
# wait_ready's variables (from just before the exec).
start_srv() {
    local kind=$1 dir=$2 log=$3 port t0 bin
    shift 3
    case $kind in rs) bin=$ROCKSTALKD ;; bs) bin=$BEANSTALKD ;; esac
    for _ in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 12000)) # below the ephemeral range
        listening "$port" && continue
        echo "== $bin -l 127.0.0.1 -p $port -b $dir $*" >>"$log"
        t0=$(now)
        "$bin" -l 127.0.0.1 -p "$port" -b "$dir" "$@" >>"$log" 2>&1 &
        SRV_PID=$! SRV_PORT=$port
        wait_ready "$port" "$SRV_PID" "$t0" 600 && return 0
        if ! kill -0 "$SRV_PID" 2>/dev/null; then
            wait "$SRV_PID" 2>/dev/null
            SRV_PID=
            continue
        fi
        stop_srv
        return 1
    done
    return 1
}

# SIGTERM, wait up to 300 s for the exit (then SIGKILL); sets STOP_S to the
# seconds the exit took ("-" if it had to be killed).
stop_srv() {
    local t0 i
    STOP_S=-
    t0=$(now)
    kill -TERM "$SRV_PID" 2>/dev/null
    for ((i = 0; i < 30000; i++)); do
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.01
    done
    if kill -0 "$SRV_PID" 2>/dev/null; then
        kill -KILL "$SRV_PID" 2>/dev/null
        wait "$SRV_PID" 2>/dev/null
        SRV_PID=
        return
    fi
    STOP_S=$(since "$t0")
    wait "$SRV_PID" 2>/dev/null
    SRV_PID=
}

# Runs rsbench "$@" against the running server with a time limit of $1 s;
# sets OUT (all output), RES (the RESULT line), RC.
bench() {
    local limit=$1
    shift
    OUT=$(timeout "$limit" "$RSBENCH" -p "$SRV_PORT" -S "$SRV_PID" "$@" 2>&1)
    RC=$?
    RES=$(grep '^RESULT ' <<<"$OUT")
    echo "$OUT" >>"$CUR_LOG"
    note "rsbench $* -> rc=$RC $RES"
    [ "$RC" -eq 0 ] && [ -z "$RES" ] && RC=1
    return "$RC"
}

# Loads $1 jobs into the running server; sets LOAD_OPS (puts/s), LOAD_N.
load() {
    local n=$1 limit=$2
    LOAD_OPS=- LOAD_N=-
    if ! bench $((limit + 60)) -m put -c 50 -P 16 -s "$SIZE" -n "$n" -d "$limit"; then
        return 1
    fi
    LOAD_OPS=$(int "$(kv ops_s "$RES")")
    LOAD_N=$(kv puts "$RES")
}

# Drains the running server's tube (expecting $1 jobs); with $2 = lat, a
# latency client runs on another tube meanwhile, from 1 s into the drain.
# Sets DRAIN_OPS, LAT_P50, LAT_P99.
drain() {
    local want=$1 lat=${2:-} lout
    DRAIN_OPS=- LAT_P50=- LAT_P99=-
    lout=$(mktemp "$TMPBASE/rsmem-lat.XXXXXX")
    if [ "$lat" = lat ]; then
        (sleep 1 && exec timeout $((LAT_SECS + 60)) "$RSBENCH" -p "$SRV_PORT" \
            -m latency -t rsmem-lat -d "$LAT_SECS") >"$lout" 2>&1 &
        LAT_PID=$!
    fi
    bench 1800 -m drain -c 50 -s "$SIZE" -d 0
    local rc=$?
    if [ "$lat" = lat ]; then
        wait "$LAT_PID"
        LAT_PID=
        cat "$lout" >>"$CUR_LOG"
        local l
        l=$(grep '^RESULT ' "$lout")
        note "latency during drain: $l"
        LAT_P50=$(kv p50_us "$l") LAT_P99=$(kv p99_us "$l")
    fi
    rm -f "$lout"
    [ "$rc" -eq 0 ] || return 1
    [ "$(kv jobs_before "$RES")" = "$want" ] || {
        fail "drain started with $(kv jobs_before "$RES") jobs, want $want"
        return 1
    }
    DRAIN_OPS=$(int "$(kv ops_s "$RES")")
}

# The latency client alone on the running (idle) server: IDLE_P50, IDLE_P99.
idle_latency() {
    IDLE_P50=- IDLE_P99=-
    bench $((LAT_SECS + 60)) -m latency -t rsmem-lat -d "$LAT_SECS" || return 1
    IDLE_P50=$(kv p50_us "$RES") IDLE_P99=$(kv p99_us "$RES")
}

# Starts the light client (rtt.c) on the running server, output to $1
# (round trips of 20 ms or more are listed there, and then in the log).
rtt_start() {
    "$RTT" -p "$SRV_PORT" -c "$RTT_CMD" -t 20000 >"$1" 2>&1 &
    LAT_PID=$!
}

# Stops it and sets RTT_P99, RTT_MAX (us), RTT_MAX_AT (s into its run) and
# RTT_MAX_JOBS (ready jobs then, for stats-tube).
rtt_stop() {
    local out=$1 l
    kill -TERM "$LAT_PID" 2>/dev/null
    wait "$LAT_PID"
    LAT_PID=
    cat "$out" >>"$CUR_LOG"
    l=$(grep '^RESULT ' "$out")
    note "light client ($RTT_CMD) during the load: $l"
    RTT_P99=$(kv p99_us "$l") RTT_MAX=$(kv max_us "$l") RTT_MAX_AT=$(kv max_at_s "$l")
    RTT_MAX_JOBS=$(kv max_jobs "$l")
    rm -f "$out"
}

# The control of row 2: a second, idle rockstalkd (fresh directory, free
# port) with the light client on it, output to $1, for the big load. What
# that client sees is the machine's noise (CPU contention, scheduling).
ctl_start() {
    local dir port i
    dir=$(mktemp -d "$TMPBASE/rsmem.XXXXXX") || return 1
    DIRS+=("$dir")
    for _ in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 12000))
        listening "$port" || break
    done
    "$ROCKSTALKD" -l 127.0.0.1 -p "$port" -b "$dir" >>"$CUR_LOG" 2>&1 &
    CTL_SRV=$!
    for ((i = 0; i < 500; i++)); do
        listening "$port" && break
        sleep 0.01
    done
    "$RTT" -p "$port" -c "stats-tube default" >"$1" 2>&1 &
    CTL_RTT=$!
}

# Stops the control; sets CTL_P99 and CTL_MAX (us).
ctl_stop() {
    local l
    kill -TERM "$CTL_RTT" 2>/dev/null
    wait "$CTL_RTT"
    kill -TERM "$CTL_SRV" 2>/dev/null
    wait "$CTL_SRV"
    CTL_RTT="" CTL_SRV=""
    l=$(grep '^RESULT ' "$1")
    note "light client on an idle second server meanwhile: $l"
    CTL_P99=$(kv p99_us "$l") CTL_MAX=$(kv max_us "$l")
    rm -f "$1"
}

# rockstalkd's last "recovered N jobs ... in X s" in log $1, shortened.
recovered() {
    sed -n 's/.*\(recovered [0-9]* jobs\) .* \(in [0-9.]* s\).*/\1 \2/p' "$1" |
        tail -n 1
}

# RSS of the running server after 2 s of rest, in kB.
settled_rss() {
    sleep 2
    rss_kb "$SRV_PID"
}

# Restarts the server of kind $1 on $DIR expecting $2 jobs: sets STOP_S,
# RESTART_S (start to stats answered), RESTART_CONN_S, RESTART_RSS.
restart() {
    local kind=$1 want=$2
    shift 2
    stop_srv
    RESTART_S=- RESTART_CONN_S=- RESTART_RSS=-
    [ "$STOP_S" = - ] && fail "$kind did not exit within 300 s of SIGTERM"
    if [ "${DROP_NOW:-0}" = 1 ]; then
        { sync && echo 3 >/proc/sys/vm/drop_caches && V[dropped]=1; } 2>/dev/null ||
            say "  could not drop the page cache"
    fi
    if ! start_srv "$kind" "$DIR" "$CUR_LOG" "$@"; then
        fail "$kind did not come back on its directory (log: $CUR_LOG)"
        return 1
    fi
    RESTART_S=$READY_S RESTART_CONN_S=$CONN_S
    RESTART_RSS=$(rss_kb "$SRV_PID")
    note "$kind restart with $want jobs: stop ${STOP_S}s, accepted ${CONN_S}s," \
        "answered ${READY_S}s, jobs $READY_JOBS, rss ${RESTART_RSS}kB"
    if [ "$READY_JOBS" != "$want" ]; then
        fail "$kind came back with $READY_JOBS ready jobs, want $want"
        return 1
    fi
}

# ---- the rows -------------------------------------------------------------

declare -A V # results, keyed by name; "-" when not measured

v() { echo "${V[$1]:--}"; }

# Rows 1, 3, 4 (cold), 5 for rockstalkd at MEM_JOBS.
rs_small() {
    CUR_LOG=$LOGS/memory-rs.log
    : >"$CUR_LOG"
    new_dir
    say "rockstalkd: load $JOBS x $SIZE B (durable mode, -c 50 -P 16)"
    start_srv rs "$DIR" "$CUR_LOG" || { fail "rockstalkd did not start"; return; }
    V[rs_idle_rss]=$(settled_rss)
    load "$JOBS" 1800 || { fail "rockstalkd load"; stop_srv; return; }
    V[rs_load_ops]=$LOAD_OPS
    V[rs_load_rss]=$(settled_rss)
    say "  $LOAD_OPS puts/s, RSS $(mib "$(v rs_load_rss)") MiB; restart"
    DROP_NOW=$DROP_CACHES
    restart rs "$JOBS" || return
    DROP_NOW=0
    V[rs_stop_s]=$STOP_S V[rs_restart_s]=$RESTART_S
    V[rs_restart_rss]=$RESTART_RSS
    V[rs_recovered]=$(recovered "$CUR_LOG")
    if [ "$RS_ONLY" = 1 ]; then
        say "  back in $RESTART_S s (stop took $STOP_S s)," \
            "RSS $(mib "$RESTART_RSS") MiB (MEM_RS_ONLY=1: no drain)"
        stop_srv
        rm -rf "$DIR"
        return
    fi
    say "  back in $RESTART_S s (stop took $STOP_S s); cold drain, c=50," \
        "latency client for $LAT_SECS s"
    drain "$JOBS" lat || { fail "rockstalkd cold drain"; stop_srv; return; }
    V[rs_cold_ops]=$DRAIN_OPS V[rs_cold_p50]=$LAT_P50 V[rs_cold_p99]=$LAT_P99
    V[rs_drain_rss]=$(settled_rss)
    say "  $DRAIN_OPS ops/s; RSS after the drain $(mib "$(v rs_drain_rss)") MiB;" \
        "latency client on the idle server"
    idle_latency || fail "latency client on the idle rockstalkd"
    V[rs_idle_p50]=$IDLE_P50 V[rs_idle_p99]=$IDLE_P99
    stop_srv
    rm -rf "$DIR"
}

# Row 4 (warm) for rockstalkd.
rs_warm() {
    CUR_LOG=$LOGS/memory-rs-warm.log
    : >"$CUR_LOG"
    new_dir
    say "rockstalkd -m $WARM_CACHE: load $JOBS, warm drain c=50 with the latency client"
    start_srv rs "$DIR" "$CUR_LOG" -m "$WARM_CACHE" ||
        { fail "rockstalkd -m did not start"; return; }
    load "$JOBS" 1800 || { fail "rockstalkd warm load"; stop_srv; return; }
    V[rs_warm_load_rss]=$(rss_kb "$SRV_PID")
    drain "$JOBS" lat || { fail "rockstalkd warm drain"; stop_srv; return; }
    V[rs_warm_ops]=$DRAIN_OPS V[rs_warm_p50]=$LAT_P50 V[rs_warm_p99]=$LAT_P99
    V[rs_warm_drain_rss]=$(settled_rss)
    say "  $DRAIN_OPS ops/s; RSS $(mib "$(v rs_warm_load_rss)") MiB loaded," \
        "$(mib "$(v rs_warm_drain_rss)") MiB drained"
    stop_srv
    rm -rf "$DIR"
}

# Rows 1, 3, 4, 5 for beanstalkd -b at MEM_JOBS.
bs_small() {
    CUR_LOG=$LOGS/memory-bs.log
    : >"$CUR_LOG"
    new_dir
    say "beanstalkd -b: load $JOBS x $SIZE B (-c 50 -P 16)"
    start_srv bs "$DIR" "$CUR_LOG" || { fail "beanstalkd did not start"; return; }
    V[bs_idle_rss]=$(settled_rss)
    load "$JOBS" 1800 || { fail "beanstalkd load"; stop_srv; return; }
    V[bs_load_ops]=$LOAD_OPS
    V[bs_load_rss]=$(settled_rss)
    V[bs_dir_kb]=$(du -sk "$DIR" | cut -f1)
    say "  $LOAD_OPS puts/s, RSS $(mib "$(v bs_load_rss)") MiB; restart (binlog replay)"
    restart bs "$JOBS" || return
    V[bs_stop_s]=$STOP_S V[bs_restart_s]=$RESTART_S
    V[bs_restart_conn_s]=$RESTART_CONN_S
    say "  answered after $RESTART_S s (connect accepted after $RESTART_CONN_S s); drain c=50"
    drain "$JOBS" || { fail "beanstalkd drain"; stop_srv; return; }
    V[bs_drain_ops]=$DRAIN_OPS
    V[bs_drain_rss]=$(settled_rss)
    say "  $DRAIN_OPS ops/s; RSS after the drain $(mib "$(v bs_drain_rss)") MiB"
    stop_srv
    rm -rf "$DIR"
}

# Rows 2 and 3 for rockstalkd at MEM_JOBS_BIG.
rs_big() {
    local need=$((BIG * 25 / 10)) have flags=() est
    have=$(free_kb)
    if [ "$have" -lt "$need" ]; then
        V[big_skip]="skipped: $((have / 1048576)) GiB free in $TMPBASE, need $((need / 1048576)) GiB"
        say "rockstalkd $BIG jobs: ${V[big_skip]}"
        return
    fi
    if [ "$BIG_FLAGS" = auto ]; then
        est=$(awk -v n="$BIG" -v r="$(v rs_load_ops)" \
            'BEGIN { print (r == "-" || r <= 0) ? 0 : int(n / r) }')
        if [ "$est" -gt 900 ]; then flags=(-f 50); fi
        V[big_mode]="${flags[*]:-durable}"
        [ "${#flags[@]}" -gt 0 ] &&
            V[big_mode]="-f 50 (durable would take ~${est} s)"
    else
        read -r -a flags <<<"$BIG_FLAGS"
        V[big_mode]="${BIG_FLAGS:-durable}"
    fi
    CUR_LOG=$LOGS/memory-rs-big.log
    : >"$CUR_LOG"
    new_dir
    say "rockstalkd: load $BIG x $SIZE B (${V[big_mode]}, -c 50 -P 16)"
    start_srv rs "$DIR" "$CUR_LOG" "${flags[@]}" || { fail "rockstalkd did not start"; return; }
    local rout cout
    rout=$(mktemp "$TMPBASE/rsmem-rtt.XXXXXX")
    cout=$(mktemp "$TMPBASE/rsmem-rtt.XXXXXX")
    rtt_start "$rout"
    ctl_start "$cout"
    if ! load "$BIG" 1500; then
        fail "rockstalkd big load"
        ctl_stop "$cout"
        rtt_stop "$rout"
        stop_srv
        return
    fi
    ctl_stop "$cout"
    rtt_stop "$rout"
    V[rsbig_ctl_p99]=$CTL_P99 V[rsbig_ctl_max]=$CTL_MAX
    V[rsbig_rtt_p99]=$RTT_P99 V[rsbig_rtt_max]=$RTT_MAX V[rsbig_rtt_max_at]=$RTT_MAX_AT
    V[rsbig_rtt_max_jobs]=$RTT_MAX_JOBS
    [ "$LOAD_N" = "$BIG" ] || V[big_partial]="stopped at the 1500 s bound after $LOAD_N jobs"
    V[rsbig_load_ops]=$LOAD_OPS V[rsbig_n]=$LOAD_N
    V[rsbig_load_rss]=$(settled_rss)
    V[rsbig_dir_kb]=$(du -sk "$DIR" | cut -f1)
    say "  $LOAD_OPS puts/s, RSS $(mib "$(v rsbig_load_rss)") MiB," \
        "data dir $(mib "$(v rsbig_dir_kb)") MiB; light client p99 $RTT_P99 us," \
        "max $RTT_MAX us ($RTT_MAX_AT s in); restart (default mode)"
    restart rs "$LOAD_N" || return
    V[rsbig_stop_s]=$STOP_S V[rsbig_restart_s]=$RESTART_S
    V[rsbig_restart_rss]=$RESTART_RSS
    V[rsbig_recovered]=$(recovered "$CUR_LOG")
    say "  back in $RESTART_S s (stop took $STOP_S s), RSS $(mib "$RESTART_RSS") MiB"
    stop_srv
    rm -rf "$DIR"
}

# Row 3 for beanstalkd at MEM_JOBS_BIG, if feasible.
bs_big() {
    local per_kb disk_kb mem_need disk_need est why=""
    [ "$BS_BIG" = 0 ] && { V[bsbig_skip]="skipped (MEM_BS_BIG=0)"; return; }
    if [ "$(v bs_load_rss)" = - ] || [ "$(v bs_load_ops)" = - ]; then
        V[bsbig_skip]="skipped: no beanstalkd $JOBS row to size it from"
        return
    fi
    per_kb=$(awk -v a="$(v bs_load_rss)" -v n="$JOBS" 'BEGIN { print a / n }')
    disk_kb=$(awk -v a="$(v bs_dir_kb)" -v n="$JOBS" 'BEGIN { print a / n }')
    mem_need=$(awk -v p="$per_kb" -v n="$BIG" 'BEGIN { printf "%d", p * n * 1.2 + 2097152 }')
    disk_need=$(awk -v p="$disk_kb" -v n="$BIG" 'BEGIN { printf "%d", p * n * 1.2 + 1048576 }')
    # load at the MEM_JOBS rate, replay 10x as long as the MEM_JOBS one
    est=$(awk -v n="$BIG" -v m="$JOBS" -v r="$(v bs_load_ops)" -v s="$(v bs_restart_s)" \
        'BEGIN { printf "%d", n / r + (n / m) * s + 30 }')
    [ "$(avail_kb)" -lt "$mem_need" ] &&
        why="needs ~$((mem_need / 1048576)) GiB of memory, $(($(avail_kb) / 1048576)) GiB available"
    [ "$(free_kb)" -lt "$disk_need" ] &&
        why="needs ~$((disk_need / 1048576)) GiB of disk, $(($(free_kb) / 1048576)) GiB free"
    [ "$BS_BIG" = auto ] && [ "$est" -gt "$BS_BIG_BUDGET" ] &&
        why="would take ~$est s, over MEM_BS_BIG_BUDGET=$BS_BIG_BUDGET s"
    if [ -n "$why" ]; then
        V[bsbig_skip]="skipped: $why"
        say "beanstalkd $BIG jobs: ${V[bsbig_skip]}"
        return
    fi
    CUR_LOG=$LOGS/memory-bs-big.log
    : >"$CUR_LOG"
    new_dir
    say "beanstalkd -b: load $BIG x $SIZE B (estimated ~$est s with the replay)"
    start_srv bs "$DIR" "$CUR_LOG" || { fail "beanstalkd did not start"; return; }
    load "$BIG" 1500 || { fail "beanstalkd big load"; stop_srv; return; }
    V[bsbig_load_ops]=$LOAD_OPS V[bsbig_n]=$LOAD_N
    V[bsbig_load_rss]=$(settled_rss)
    say "  $LOAD_OPS puts/s, RSS $(mib "$(v bsbig_load_rss)") MiB; restart (binlog replay)"
    restart bs "$LOAD_N" || return
    V[bsbig_stop_s]=$STOP_S V[bsbig_restart_s]=$RESTART_S
    V[bsbig_restart_conn_s]=$RESTART_CONN_S
    say "  answered after $RESTART_S s (connect accepted after $RESTART_CONN_S s)"
    stop_srv
    rm -rf "$DIR"
}

# ---- the table ------------------------------------------------------------

verdict() { # $1 = awk condition on x; $2 = x
    case ${2:--} in
    -) echo "FAIL (no data)" ;;
    *) awk -v x="$2" "BEGIN { print ($1) ? \"PASS\" : \"FAIL\" }" ;;
    esac
}
pct() { # $1 / $2 as a percentage
    if [ "${1:--}" = - ] || [ "${2:--}" = - ]; then echo -; else
        awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b ? 100 * a / b : 0 }'
    fi
}
ms() { # us -> ms, "-" stays
    case ${1:--} in -) echo - ;; *) awk -v u="$1" 'BEGIN { printf "%.2f", u / 1000 }' ;; esac
}
num() { # thousands separators
    case ${1:--} in -) echo - ;; *) printf "%'d" "$1" 2>/dev/null || echo "$1" ;; esac
}
human() { # 1000000 -> 1M
    awk -v n="$1" 'BEGIN { if (n >= 1e6 && n % 1e6 == 0) print n / 1e6 "M";
        else if (n >= 1e3 && n % 1e3 == 0) print n / 1e3 "k"; else print n }'
}
gave_back() { # share of the load's RSS growth that the drain gave back
    awk -v s="$1" -v i="$(v "$1_idle_rss")" -v l="$(v "$1_load_rss")" \
        -v d="$(v "$1_drain_rss")" 'BEGIN {
        if (i == "-" || l == "-" || d == "-" || l <= i) { print s " -"; exit }
        g = 100 * (l - d) / (l - i); if (g > -0.5 && g < 0.5) g = 0
        printf "%s gave back %.0f%%\n", s, g }'
}
row() { printf '| %s | %s | %s | %s | %s | %s |\n' "$@"; }

report() {
    local j b ratio cold
    j=$(human "$JOBS") b=$(human "$BIG")
    ratio=$(pct "$(v rs_load_rss)" "$(v bs_load_rss)")
    cold=$(pct "$(v rs_cold_ops)" "$(v rs_warm_ops)")
    echo "rockstalk memory and restart benchmark, ${V[date]:-$(date '+%Y-%m-%d %H:%M %Z')}"
    echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo |
        head -n 1), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' \
        /proc/meminfo), Linux $(uname -r)"
    echo "beanstalkd: $("$BEANSTALKD" -v 2>&1 | head -n 1) (-b DIR, default -f 50);" \
        "rockstalkd: ${V[commit]:-?} (default durable mode unless said)"
    echo "jobs of $SIZE B; loads: rsbench put -c 50 -P 16; drains: rsbench drain -c 50;" \
        "data dirs in $TMPBASE"
    echo
    row "row" "measurement" "rockstalkd" "beanstalkd 1.12" "target" "result"
    row "---" "---" "---:" "---:" "---" "---"
    row 1 "load $j: puts/s" "$(num "$(v rs_load_ops)")" "$(num "$(v bs_load_ops)")" "" ""
    row 1 "RSS after load $j, MiB" "$(mib "$(v rs_load_rss)")" "$(mib "$(v bs_load_rss)")" \
        "rs/bs <= 25%" "$ratio% $(verdict 'x <= 25' "$ratio")"
    if [ -n "${V[big_skip]:-}" ]; then
        row 2 "load $b" "${V[big_skip]}" "-" "RSS < 2 GiB" "SKIPPED"
    else
        row 2 "load $b: puts/s (rs: ${V[big_mode]:-durable})" \
            "$(num "$(v rsbig_load_ops)")" "$(num "$(v bsbig_load_ops)")" "" \
            "${V[big_partial]:-}"
        row 2 "RSS after load $b, MiB" "$(mib "$(v rsbig_load_rss)")" \
            "$(mib "$(v bsbig_load_rss)")" "rs < 2048 MiB" \
            "$(verdict 'x < 2097152' "$(v rsbig_load_rss)")"
        row 2 "light client p99 / max round trip during load $b, ms" \
            "$(ms "$(v rsbig_rtt_p99)") / $(ms "$(v rsbig_rtt_max)")" "-" \
            "max < 10 ms" "$(verdict 'x < 10000' "$(v rsbig_rtt_max)")"
        row 2 "control: the same client on an idle second server, ms" \
            "$(ms "$(v rsbig_ctl_p99)") / $(ms "$(v rsbig_ctl_max)")" "-" \
            "" "machine noise"
    fi
    row 3 "restart $j: SIGTERM to exit, s" "$(v rs_stop_s)" "$(v bs_stop_s)" "" ""
    row 3 "restart $j: start to first reply, s" "$(v rs_restart_s)" "$(v bs_restart_s)" "" ""
    row 3 "RSS right after restart $j, MiB" "$(mib "$(v rs_restart_rss)")" "-" "" ""
    if [ -n "${V[big_skip]:-}" ]; then
        row 3 "restart $b" "${V[big_skip]}" "-" "< 20 s" "SKIPPED"
    else
        row 3 "restart $b: SIGTERM to exit, s" "$(v rsbig_stop_s)" "$(v bsbig_stop_s)" "" ""
        row 3 "restart $b: start to first reply, s" "$(v rsbig_restart_s)" \
            "$(v bsbig_restart_s)" "rs < 20 s" \
            "$(verdict 'x < 20' "$(v rsbig_restart_s)")"
        row 3 "RSS right after restart $b, MiB" "$(mib "$(v rsbig_restart_rss)")" "-" "" ""
    fi
    row 4 "drain $j c=50, cold (after restart), ops/s" "$(num "$(v rs_cold_ops)")" \
        "$(num "$(v bs_drain_ops)")" "" ""
    row 4 "drain $j c=50, warm (-m $WARM_CACHE, fresh load), ops/s" \
        "$(num "$(v rs_warm_ops)")" "-" "cold >= 80% of warm" \
        "$cold% $(verdict 'x >= 80' "$cold")"
    row 4 "latency client p50 / p99 us, idle server" \
        "$(v rs_idle_p50) / $(v rs_idle_p99)" "-" "" ""
    row 4 "latency client p50 / p99 us, during warm drain" \
        "$(v rs_warm_p50) / $(v rs_warm_p99)" "-" "" ""
    row 4 "latency client p50 / p99 us, during cold drain" \
        "$(v rs_cold_p50) / $(v rs_cold_p99)" "-" "" ""
    row 5 "RSS idle (fresh, empty), MiB" "$(mib "$(v rs_idle_rss)")" "$(mib "$(v bs_idle_rss)")" "" ""
    row 5 "RSS after the drain of $j, MiB" "$(mib "$(v rs_drain_rss)")" \
        "$(mib "$(v bs_drain_rss)")" "near idle" \
        "$(gave_back rs), $(gave_back bs)"
    echo
    if [ -n "${V[bsbig_skip]:-}" ] && [ -z "${V[big_skip]:-}" ]; then
        echo "beanstalkd at $b: ${V[bsbig_skip]}"
    fi
    [ -n "$(v rs_recovered)" ] && echo "rockstalkd log at $j: $(v rs_recovered)"
    [ -n "$(v rsbig_recovered)" ] && [ "$(v rsbig_recovered)" != - ] &&
        echo "rockstalkd log at $b: $(v rsbig_recovered); data dir $(mib "$(v rsbig_dir_kb)") MiB"
    if [ "$(v bs_restart_conn_s)" != - ]; then
        local big_conn=""
        [ "$(v bsbig_restart_conn_s)" != - ] && big_conn=", $(v bsbig_restart_conn_s) s ($b)"
        echo "beanstalkd listens before its binlog replay: connect accepted after" \
            "$(v bs_restart_conn_s) s ($j)$big_conn; the table gives the time until" \
            "stats is answered"
    fi
    [ "$(v dropped)" = 1 ] &&
        echo "page cache dropped before the last restart of the cold drain"
    echo "warm rockstalkd RSS: $(mib "$(v rs_warm_load_rss)") MiB loaded," \
        "$(mib "$(v rs_warm_drain_rss)") MiB after its drain"
    echo "latency client: rsbench -m latency (put, reserve-with-timeout 0, delete" \
        "on its own tube, one at a time) for $LAT_SECS s"
    [ -z "${V[big_skip]:-}" ] &&
        echo "light client of row 2: rtt '$RTT_CMD', one at a time, 1 ms apart," \
            "for the whole load; slowest round trip began $(v rsbig_rtt_max_at) s in," \
            "with $(v rsbig_rtt_max_jobs) jobs ready"
}

main() {
    if [ -n "${MEM_REPORT:-}" ]; then
        local k val
        while IFS='=' read -r k val; do
            V[${k#V }]=$val
        done < <(grep '^V [a-z_0-9]*=' "$MEM_REPORT")
        report
        return
    fi
    V[date]=$(date '+%Y-%m-%d %H:%M %Z')
    V[commit]=$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?')
    build_tools
    : >"$RAW"
    say "memory benchmark: MEM_JOBS=$JOBS MEM_JOBS_BIG=$BIG MEM_SIZE=$SIZE" \
        "MEM_BS_BIG=$BS_BIG; results in $RAW, logs in $LOGS/memory-*.log"
    rs_small
    if [ "$RS_ONLY" = 1 ]; then
        V[big_skip]="skipped (MEM_RS_ONLY=1)"
    else
        bs_small
        rs_warm
    fi
    if [ "$RS_ONLY" = 1 ]; then
        :
    elif [ "$BIG" -gt 0 ]; then
        rs_big
        [ -z "${V[big_skip]:-}" ] && bs_big
    else
        V[big_skip]="skipped (MEM_JOBS_BIG=0)"
    fi
    local k
    for k in $(printf '%s\n' "${!V[@]}" | sort); do note "V $k=${V[$k]}"; done
    echo >&2
    report | tee "$REPORT"
    echo
    echo "took $((SECONDS - T0)) s; table: $REPORT; raw: $RAW"
    return "$FAILED"
}

main "$@"
