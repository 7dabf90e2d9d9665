#!/bin/sh
# Installs the Debian packages rockstalk builds and tests with, if missing.
set -e
PKGS="build-essential pkg-config libev-dev librocksdb-dev zlib1g-dev libmicrohttpd-dev libcmocka-dev \
beanstalkd python3 python3-pytest python3-yaml netcat-openbsd mandoc clang libclang-rt-14-dev \
ruby ruby-beaneater php-cli php-pda-pheanstalk php-yaml nodejs \
libedit-dev libncurses-dev python3-pexpect python3-pyte \
libraft-dev libuv1-dev libssl-dev openssl stunnel4 gdb chromium liburing-dev libisal-dev \
python3-pytest-xdist"
# python3-pytest-xdist: make test and make asan run the suite on 3
# workers (PYTEST_JOBS in the Makefile).
# chromium: the web console's browser tests (tests/test_console.py, driven
# by npm's playwright-core, which downloads no browser of its own).
# libisal-dev (Intel ISA-L): the body ring's CRC-32 (zlib's value,
# crc32_gzip_refl; 256 KiB in ~6 us against zlib's ~75 us here).
# libssl-dev (OpenSSL 3) for src/net/tls.c; openssl, the command, for
# scripts/cluster-certs.sh and the TLS tests. stunnel4 for make bench's
# bs-stunnel (beanstalkd behind stunnel, what its users run for TLS).
# liburing-dev for make bench's in-loop sync ceiling (ceiling -u).
# libraft-dev is Debian 12's own 0.15.0 (canonical raft), not 0.22.1 from
# bookworm-backports (cowsql's maintained fork). src/cluster/raftnode.c builds
# unchanged against both (the API subset they share: one entry per
# raft_apply, as 0.22.1 takes no more), but tests/unit/test_raftnode.c
# crashed inside 0.22.1 (a follower taking 200 pipelined entries) in 5 of 35
# runs, while 0.15.0 passed every run, ASan included (src/README, "The Raft
# node"). Switching is adding the suite (deb http://deb.debian.org/debian
# bookworm-backports main) and installing libraft-dev/bookworm-backports.
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
        || missing="$missing $p"
done
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    echo "installing:$missing"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086 # one word per package, on purpose
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
# The web console's npm packages (package.json at the top: uplot, compiled
# into rockstalkd; playwright-core for its browser tests), as the lock
# file pins them, unless npm installed them since the lock last changed.
cd "$(dirname "$0")/.."
if ! [ node_modules/.package-lock.json -nt package-lock.json ] \
    || ! [ -d node_modules/uplot ] || ! [ -d node_modules/playwright-core ]; then
    npm ci --no-audit --no-fund
fi
# Debian starts the packaged beanstalkd as a service where it can; the tests
# start their own on free ports.
