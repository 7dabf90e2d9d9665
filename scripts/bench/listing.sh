#!/usr/bin/env bash
# scripts/bench/listing.sh - the web console's listing row (issue 29; see
# BENCHMARKS.md): how long the HTTP API takes to list 1,000 jobs of a tube
# that holds LIST_JOBS (default 1,000,000) ready jobs, on the first page and
# on deep ones, and what that listing adds to the p99 of clients putting
# meanwhile (put c=50 on another tube), with one page listed every 2 s as an
# open console page would.
#
# Knobs (environment): LIST_JOBS (jobs in the listed tube), LIST_SECS (each
# client phase, default 10), LIST_REQS (timed listings of each kind,
# default 20), ROCKSTALKD (default ../../build/rockstalkd), BENCH_TMP.
# Prints one line per measure and the two targets with PASS/FAIL (listing
# <= 50 ms; p99 added <= 5 ms). Exit status 1 if a step failed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"
BUILD=$HERE/build
ROCKSTALKD=${ROCKSTALKD:-$REPO/build/rockstalkd}
JOBS=${LIST_JOBS:-1000000}
SECS=${LIST_SECS:-10}
REQS=${LIST_REQS:-20}
mkdir -p "$BUILD"
bench_build rsbench || exit 1

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

DIR=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/rslist.XXXXXX") || exit 1
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

PORT=$((20000 + RANDOM % 12000))
HTTP=$((PORT + 1))
"$ROCKSTALKD" -l 127.0.0.1 -p "$PORT" -b "$DIR/data" \
    --http "127.0.0.1:$HTTP" >"$DIR/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
    listening "$PORT" && listening "$HTTP" && break
    sleep 0.1
done
listening "$HTTP" || { echo "server did not start" >&2; exit 1; }

echo "loading $JOBS jobs into tube big ..." >&2
"$BUILD/rsbench" -p "$PORT" -m put -c 50 -P 16 -s 100 -n "$JOBS" -d 0 \
    -t big -x >/dev/null || { echo "load failed" >&2; exit 1; }

URL="http://127.0.0.1:$HTTP/api/v1/tubes/big/jobs?state=ready&limit=1000"
# ms of one listing ($1: the query's after= part, or nothing)
list_ms() {
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$URL$1" |
        awk '$1 != 200 { exit 1 } { printf "%.2f\n", $2 * 1000 }'
}
# median and max of REQS listings ($1 after= part)
list_stats() {
    local i
    for i in $(seq "$REQS"); do list_ms "$1" || return 1; done |
        sort -n | awk '{ v[NR] = $1 } END { printf "%s %s\n", v[int((NR + 1) / 2)], v[NR] }'
}
read -r first_med first_max < <(list_stats "")
read -r deep_med deep_max < <(list_stats "&after=$((JOBS / 2))")
read -r last_med last_max < <(list_stats "&after=$((JOBS - 1000))")
printf 'listing 1000 of %d, first page: median %s ms, max %s ms\n' \
    "$JOBS" "$first_med" "$first_max"
printf 'listing 1000 of %d, page at depth %d: median %s ms, max %s ms\n' \
    "$JOBS" "$((JOBS / 2))" "$deep_med" "$deep_max"
printf 'listing 1000 of %d, last page: median %s ms, max %s ms\n' \
    "$JOBS" "$last_med" "$last_max"

# put c=50 on another tube for SECS; $1 = 1: a deep page listed every 2 s
clients_p99() {
    local lp=""
    if [ "$1" = 1 ]; then
        (while :; do
            list_ms "&after=$((JOBS / 2))" >/dev/null
            sleep 2
        done) &
        lp=$!
    fi
    "$BUILD/rsbench" -p "$PORT" -m put -c 50 -s 100 -d "$SECS" -t other -x |
        awk '/^RESULT/ { for (i = 1; i <= NF; i++) if ($i ~ /^p99_us=/) { sub(/p99_us=/, "", $i); print $i / 1000 } }'
    [ -n "$lp" ] && kill "$lp" 2>/dev/null && wait "$lp" 2>/dev/null
}
p_without=$(clients_p99 0)
p_with=$(clients_p99 1)
p_without2=$(clients_p99 0)
p_with2=$(clients_p99 1)
printf 'put c=50 beside it, p99: %s and %s ms without listings, %s and %s ms with a deep page every 2 s\n' \
    "$p_without" "$p_without2" "$p_with" "$p_with2"

worst=$(printf '%s\n%s\n%s\n' "$first_max" "$deep_max" "$last_max" | sort -n | tail -1)
added=$(awk -v a="$p_with" -v b="$p_with2" -v c="$p_without" -v d="$p_without2" \
    'BEGIN { w = (a > b ? a : b); o = (c < d ? c : d); printf "%.2f", w - o }')
verdict() { awk -v v="$1" -v g="$2" 'BEGIN { print (v <= g ? "PASS" : "FAIL") }'; }
printf 'target: listing 1000 jobs <= 50 ms (worst max %s ms): %s\n' \
    "$worst" "$(verdict "$worst" 50)"
printf 'target: p99 added <= 5 ms (worst with - best without: %s ms): %s\n' \
    "$added" "$(verdict "$added" 5)"
