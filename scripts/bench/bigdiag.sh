#!/usr/bin/env bash
# scripts/bench/bigdiag.sh - where the time of issue 30's "big beside small"
# row goes: one bigsmall cell (rsbench -m bigsmall) against one rockstalkd,
# with the device's bytes written (/proc/diskstats), each server thread's
# CPU time and bytes written (/proc/PID/task/*/{stat,io}) and, with
# DIAG_STRACE=1, the mutation thread's and the body writer's fdatasync
# latencies (strace -T on those two threads alone).
#
# usage: bigdiag.sh ROCKSTALKD [SECS]     (default 5 s)
# Environment: DIAG_DEV (block device, default vda), DIAG_PORT (default
# 41931), DIAG_STRACE=1, DIAG_WARM (MiB the large producers put first,
# unmeasured; default 0), DIAG_BIG_MIB (the large producers' budget, default 1024), BENCH_BIG_BODY (default 262144), and the server's
# own environment, passed through. Prints a report on stdout.
set -u -o pipefail
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$1
SECS=${2:-5}
DEV=${DIAG_DEV:-vda}
PORT=${DIAG_PORT:-41931}
BIG=${BENCH_BIG_BODY:-262144}
RSBENCH=$HERE/build/rsbench
[ -x "$RSBENCH" ] || { echo "build rsbench first (run.sh does)" >&2; exit 2; }
DIR=$(mktemp -d "${TMPDIR:-/tmp}/bigdiag.XXXXXX")
trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; rm -rf "$DIR"' EXIT

"$BIN" -l 127.0.0.1 -p "$PORT" -b "$DIR/data" -z "$BIG" >"$DIR/log" 2>&1 &
PID=$!
for _ in $(seq 100); do
    (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
    sleep 0.05
done

# thread table: tid name utime+stime(ticks) write_bytes
threads() {
    local t
    for t in /proc/"$PID"/task/*; do
        local name st wb
        name=$(cat "$t/comm" 2>/dev/null) || continue
        st=$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null) || continue
        wb=$(awk '/^write_bytes/ {print $2}' "$t/io" 2>/dev/null)
        echo "${t##*/} $name $st ${wb:-0}"
    done
}
disk() { awk -v d="$DEV" '$3 == d {print $10, $8, $11}' /proc/diskstats; }

# DIAG_WARM=MIB: the large producers alone put MIB MiB first (unmeasured),
# so the measured cell starts past the body ring's first (sparse) lap
if [ "${DIAG_WARM:-0}" -gt 0 ]; then
    "$RSBENCH" -p "$PORT" -m bigsmall -c 0 -g 8 -G "$BIG" -x \
        -n $((DIAG_WARM * 1048576 / BIG)) -d 30 >/dev/null 2>&1
fi
STR=()
if [ "${DIAG_STRACE:-0}" = 1 ]; then
    for t in /proc/"$PID"/task/*; do
        case $(cat "$t/comm") in rs-mutation | rs-bodyring) ;; *) continue ;; esac
        strace -T -e trace=fdatasync,pwritev,pwrite64 -p "${t##*/}" \
            -o "$DIR/strace.$(cat "$t/comm")" 2>/dev/null &
        STR+=($!)
    done
    sleep 0.3
fi
threads >"$DIR/t0"
read -r s0 w0 ms0 < <(disk)
T0=$(date +%s.%N)
OUT=$("$RSBENCH" -p "$PORT" -m bigsmall -c 1 -P 1 -s 100 -g 8 -G "$BIG" \
    -n $((${DIAG_BIG_MIB:-1024} * 1048576 / BIG)) -d "$SECS" -S "$PID" 2>&1)
T1=$(date +%s.%N)
read -r s1 w1 ms1 < <(disk)
threads >"$DIR/t1"
for p in "${STR[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done

echo "$OUT" | tail -1
awk -v s0="$s0" -v s1="$s1" -v w0="$w0" -v w1="$w1" -v t0="$T0" -v t1="$T1" \
    -v ms0="$ms0" -v ms1="$ms1" -v res="$(echo "$OUT" | tail -1)" 'BEGIN {
    secs = t1 - t0
    n = split(res, kv, " ")
    for (i = 1; i <= n; i++) { split(kv[i], p, "="); r[p[1]] = p[2] }
    mib = (s1 - s0) * 512 / 1048576
    printf "elapsed %.2f s; device %s: %.0f MiB written, %.1f MiB/s, %d writes, %.1f ms write time per write\n",
        secs, "'"$DEV"'", mib, mib / secs, w1 - w0, (w1 > w0) ? (ms1 - ms0) / (w1 - w0) : 0
}'
echo "per thread (CPU s, MiB dirtied/written by the thread):"
join -a1 <(sort "$DIR/t1") <(sort "$DIR/t0") | awk '{
    cpu = ($3 - ($6 == "" ? 0 : $6)) / 100
    wb = ($4 - ($7 == "" ? 0 : $7)) / 1048576
    k = $2; c[k] += cpu; w[k] += wb; m[k]++
} END { for (k in c) if (c[k] > 0.01 || w[k] > 0.1)
    printf "  %-16s x%-2d cpu %6.2f s  write %8.1f MiB\n", k, m[k], c[k], w[k] }' | sort -k4 -n -r
for f in "$DIR"/strace.*; do
    [ -f "$f" ] || continue
    echo "fdatasync latency, ${f##*strace.}:"
    grep fdatasync "$f" | sed -n 's/.*<\([0-9.]*\)>$/\1/p' | sort -n | awk '
        { v[NR] = $1 * 1000 } END { if (!NR) { print "  none"; exit }
        printf "  n %d  p50 %.2f ms  p90 %.2f  p99 %.2f  max %.2f\n", NR,
            v[int(NR * .5) + 1], v[int(NR * .9) + 1], v[int(NR * .99) + 1], v[NR] }'
done
du -sh "$DIR/data"/* | sed 's/^/  /'
