# shellcheck shell=bash
# scripts/bench/common.sh - set-up shared by run.sh and memory.sh (sourced;
# they define say() and set HERE, BUILD and BEANSTALKD first).

# Builds $BUILD/NAME from $HERE/NAME.c (and the further sources and
# flags $2...; rsbench also gets -lssl -lcrypto) when missing or older
# than its source. Returns 1 (after saying so) if the compiler fails.
bench_build() {
    local name=$1
    shift
    # rsbench speaks TLS (-T) with OpenSSL 3
    [ "$name" = rsbench ] && set -- "$@" -lssl -lcrypto
    if [ ! -x "$BUILD/$name" ] || [ "$HERE/$name.c" -nt "$BUILD/$name" ]; then
        ${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror \
            -Wformat=2 -Wstrict-prototypes -Wshadow \
            -o "$BUILD/$name" "$HERE/$name.c" "$@" || { say "cannot build $name"; return 1; }
    fi
}

# Builds $BUILD/ceiling (bench_build; $REPO: the tree's root): the Raft
# ceiling (-R) runs libraft with the Raft node's workarounds, the RocksDB
# write ceiling (-k) rockstalkd's shard with its options, the in-loop
# sync ceiling (-u) liburing. tests/test_bench_tools.py builds it so too.
bench_build_ceiling() {
    bench_build ceiling -I"$REPO/src" "$REPO/src/cluster/rafttune.c" \
        "$REPO/src/store/shard.c" "$REPO/src/store/enc.c" \
        "$REPO/src/store/merge.c" \
        "$REPO/src/store/util.c" -lraft -luv -lrocksdb -luring -lpthread
}

# Installs Debian's beanstalkd package when $BEANSTALKD is not there and
# points BEANSTALKD at it. Returns 1 if there is still none.
ensure_beanstalkd() {
    [ -x "$BEANSTALKD" ] && return
    say "beanstalkd missing: installing Debian's package"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq beanstalkd
    BEANSTALKD=$(command -v beanstalkd || echo /usr/bin/beanstalkd)
    [ -x "$BEANSTALKD" ] || { say "no beanstalkd"; return 1; }
}

# Installs Debian's stunnel4 package when $STUNNEL is not there (for
# bs-stunnel) and points STUNNEL at it. Returns 1 if there is still none.
ensure_stunnel() {
    [ -x "$STUNNEL" ] && return
    say "stunnel missing: installing Debian's stunnel4"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq stunnel4
    STUNNEL=$(command -v stunnel4 || echo /usr/bin/stunnel4)
    [ -x "$STUNNEL" ] || { say "no stunnel"; return 1; }
}
