#!/usr/bin/env bash
# scripts/cluster-demo.sh - a local 3-node rockstalkd cluster (`make cluster`).
#
# Starts three rockstalkd nodes on 127.0.0.1 that form one Raft cluster,
# waits until a leader serves, prints each node's role and how to try it,
# then stays in the foreground: it reports a node that exits and each new
# leader, restarts the nodes that are down on SIGUSR1, and on Ctrl-C or
# SIGTERM stops the three nodes (SIGTERM, SIGKILL after 10 s) and exits.
#
# Environment:
#   CLUSTER_DIR           data dirs DIR/node1..3, logs DIR/node1..3.log
#                         (default /tmp/rockstalk-cluster); the data is kept
#                         from one run to the next
#   CLUSTER_PORT          node 1's client port (default 11301; node N: +N-1)
#   CLUSTER_RAFT_PORT     node 1's Raft port (default 11401)
#   CLUSTER_METRICS_PORT  node 1's metrics port (default 11501)
#   CLUSTER_FLAGS         more rockstalkd options for every node (e.g. -f 50)
#   CLUSTER_TLS=0         the nodes talk plaintext (default: mutual TLS, with
#                         certificates made once in DIR/certs by
#                         scripts/cluster-certs.sh)
#   ROCKSTALKD            the binary (default: ./rockstalkd of this checkout)
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DIR=${CLUSTER_DIR:-/tmp/rockstalk-cluster}
PORT=${CLUSTER_PORT:-11301}
RAFT_PORT=${CLUSTER_RAFT_PORT:-11401}
METRICS_PORT=${CLUSTER_METRICS_PORT:-11501}
FLAGS=${CLUSTER_FLAGS:-}
ROCKSTALKD=${ROCKSTALKD:-$REPO/rockstalkd}
NODES="1 2 3"
PIDS=(- 0 0 0) # by node id; 0: not running
LEADER=0       # the last leader reported
RESTART=0

say() { printf '%s\n' "$*"; }
die() {
    printf 'cluster-demo: %s\n' "$*" >&2
    exit 1
}

cport() { echo $((PORT + $1 - 1)); }
rport() { echo $((RAFT_PORT + $1 - 1)); }
mport() { echo $((METRICS_PORT + $1 - 1)); }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

SPEC=""
for i in $NODES; do
    SPEC="$SPEC${SPEC:+,}$i@127.0.0.1:$(rport "$i")/$(cport "$i")"
done

# Node $1's own view from its metrics endpoint: "ROLE LEADER TERM", or
# nothing if it does not answer.
view() {
    local fd text
    exec {fd}<>"/dev/tcp/127.0.0.1/$(mport "$1")" || return 0
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&"$fd"
    text=$(timeout 2 cat <&"$fd") || true
    exec {fd}>&-
    awk '/^rockstalk_cluster_role\{/ && $2 == 1 {
            split($1, a, "\""); role = a[2] }
        $1 == "rockstalk_cluster_leader" { lead = $2 }
        $1 == "rockstalk_cluster_term" { term = $2 }
        END { if (role != "") print role, lead + 0, term + 0 }' \
        <<<"${text//$'\r'/}"
}

# Does node $1's client port answer a command within 2 s?
serves() {
    local fd line=""
    exec {fd}<>"/dev/tcp/127.0.0.1/$(cport "$1")" || return 1
    printf 'list-tube-used\r\n' >&"$fd"
    IFS= read -r -t 2 line <&"$fd" || true
    exec {fd}>&-
    [ "${line#USING}" != "$line" ]
}

alive() { [ "${PIDS[$1]}" != 0 ] && kill -0 "${PIDS[$1]}" 2>/dev/null; }

any_alive() {
    local i
    for i in $NODES; do alive "$i" && return 0; done
    return 1
}

# Node $1's --cluster-cert/-key/-ca (nothing with CLUSTER_TLS=0).
tls_flags() {
    [ "${CLUSTER_TLS:-1}" = 0 ] && return
    echo "--cluster-cert $DIR/certs/node$1.pem" \
        "--cluster-key $DIR/certs/node$1.key --cluster-ca $DIR/certs/ca.pem"
}

start_node() {
    # shellcheck disable=SC2086,SC2046 # CLUSTER_FLAGS: one word per option
    "$ROCKSTALKD" -l 127.0.0.1 -p "$(cport "$1")" -b "$DIR/node$1" \
        --cluster "$SPEC" --node-id "$1" --metrics "127.0.0.1:$(mport "$1")" \
        $(tls_flags "$1") $FLAGS >>"$DIR/node$1.log" 2>&1 &
    PIDS[$1]=$!
}

# The id of the live node that says it leads, 0 if none.
leader() {
    local i v
    for i in $NODES; do
        alive "$i" || continue
        v=$(view "$i" 2>/dev/null)
        [ "${v%% *}" = leader ] && {
            echo "$i"
            return
        }
    done
    echo 0
}

stop_all() {
    local i
    trap - INT TERM EXIT
    say ""
    say "stopping the nodes"
    for i in $NODES; do
        if alive "$i"; then kill -TERM "${PIDS[$i]}" 2>/dev/null || true; fi
    done
    for _ in $(seq 100); do
        any_alive || break
        sleep 0.1
    done
    for i in $NODES; do
        if alive "$i"; then
            say "node $i (pid ${PIDS[$i]}) did not stop in 10 s: SIGKILL"
            kill -KILL "${PIDS[$i]}" 2>/dev/null || true
        fi
        [ "${PIDS[$i]}" = 0 ] || wait "${PIDS[$i]}" 2>/dev/null || true
        PIDS[i]=0
    done
    say "stopped; data and logs are in $DIR (rm -rf $DIR for a fresh cluster)"
    exit "${1:-0}"
}

# Reports a node that exited since the last look (and reaps it).
reap() {
    local i rc
    for i in $NODES; do
        [ "${PIDS[$i]}" = 0 ] && continue
        kill -0 "${PIDS[$i]}" 2>/dev/null && continue
        rc=0
        wait "${PIDS[$i]}" 2>/dev/null || rc=$?
        if [ "$rc" -gt 128 ]; then
            rc="killed by signal $((rc - 128))"
        else
            rc="exit status $rc"
        fi
        say "$(date +%T) node $i (pid ${PIDS[$i]}) exited: $rc;" \
            "kill -USR1 $$ restarts it"
        PIDS[i]=0
        if [ "$LEADER" = "$i" ]; then LEADER=0; fi
    done
}

status_lines() {
    local i v role lead term
    for i in $NODES; do
        if ! alive "$i"; then
            printf '  node %s  client 127.0.0.1:%s  down\n' "$i" "$(cport "$i")"
            continue
        fi
        v=$(view "$i" 2>/dev/null)
        read -r role lead term <<<"${v:-? 0 0}"
        case $role in
        leader) role="leader (term $term)" ;;
        follower) role="follower (relays clients to node $lead)" ;;
        esac
        printf '  node %s  client 127.0.0.1:%s  raft :%s  metrics :%s  pid %s  %s\n' \
            "$i" "$(cport "$i")" "$(rport "$i")" "$(mport "$i")" "${PIDS[$i]}" \
            "$role"
    done
}

[ -x "$ROCKSTALKD" ] || die "no $ROCKSTALKD (make rockstalkd)"
mkdir -p "$DIR"
if [ -f "$DIR/spec" ] && [ "$(cat "$DIR/spec")" != "$SPEC" ]; then
    die "$DIR holds a cluster of other ports ($(cat "$DIR/spec")); rm -rf $DIR or set CLUSTER_DIR"
fi
for i in $NODES; do
    for p in "$(cport "$i")" "$(rport "$i")" "$(mport "$i")"; do
        listening "$p" && die "127.0.0.1:$p is in use (set CLUSTER_PORT," \
            "CLUSTER_RAFT_PORT, CLUSTER_METRICS_PORT)"
    done
done
echo "$SPEC" >"$DIR/spec"
if [ "${CLUSTER_TLS:-1}" != 0 ] && [ ! -e "$DIR/certs/ca.pem" ]; then
    "$REPO/scripts/cluster-certs.sh" "$DIR/certs" 3 >/dev/null ||
        die "cannot make certificates in $DIR/certs"
fi

trap 'stop_all 130' INT
trap 'stop_all 0' TERM
trap 'stop_all 1' EXIT
trap 'RESTART=1' USR1

say "starting 3 rockstalkd nodes: --cluster $SPEC"
for i in $NODES; do start_node "$i"; done
for _ in $(seq 300); do
    reap
    LEADER=$(leader)
    [ "$LEADER" != 0 ] && serves "$LEADER" && break
    LEADER=0
    sleep 0.1
done
if [ "$LEADER" = 0 ]; then
    say "no leader serves after 30 s; the nodes' logs:"
    for i in $NODES; do tail -n 5 "$DIR/node$i.log" | sed "s/^/  node $i: /"; done
    exit 1
fi
F1=$((LEADER % 3 + 1))
F2=$((F1 % 3 + 1))

say ""
say "rockstalk cluster: 3 nodes on 127.0.0.1, data and logs in $DIR"
status_lines
cat <<EOF

Every node takes clients; a follower relays each connection to the leader,
and a reply leaves once its change is on a majority of the nodes' disks.
Try it (in another terminal):

  printf 'put 0 0 60 5\r\nhello\r\n' | nc -q1 127.0.0.1 $(cport "$F1")
  printf 'reserve-with-timeout 0\r\n' | nc -q1 127.0.0.1 $(cport "$F2")
  nc -C 127.0.0.1 $(cport "$F2")                # type commands yourself
  $REPO/rockstalk -p $(cport "$F2") tubes
  printf 'stats\r\n' | nc -q1 127.0.0.1 $(cport "$F1") | grep cluster
  curl -s http://127.0.0.1:$(mport "$F1")/metrics | grep cluster

Fail over: kill -9 ${PIDS[$LEADER]}   (node $LEADER, the leader); a new leader
is elected among the other two and serves the same jobs within seconds.
kill -USR1 $$ restarts the nodes that are down. Ctrl-C stops all three.

EOF

# Watch: nodes that exit, leadership changes, restarts on SIGUSR1.
while :; do
    sleep 1 &
    wait $! 2>/dev/null || true # (and no "Killed" line from bash)
    if [ "$RESTART" = 1 ]; then
        RESTART=0
        for i in $NODES; do
            alive "$i" && continue
            start_node "$i"
            say "$(date +%T) node $i restarted (pid ${PIDS[$i]})"
        done
    fi
    reap
    l=$(leader)
    if [ "$l" != 0 ] && [ "$l" != "$LEADER" ] && serves "$l"; then
        LEADER=$l
        say "$(date +%T) node $l leads and serves" \
            "($(view "$l" | awk '{print "term " $3}')); its client port" \
            "is $(cport "$l")"
    fi
done
