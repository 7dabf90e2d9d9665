#!/bin/sh
# Installs the Debian packages rockstalk builds and tests with, if missing.
set -e
PKGS="build-essential pkg-config libev-dev librocksdb-dev zlib1g-dev libmicrohttpd-dev libcmocka-dev \
beanstalkd python3 python3-pytest python3-yaml netcat-openbsd mandoc clang libclang-rt-14-dev \
ruby ruby-beaneater php-cli php-pda-pheanstalk php-yaml nodejs \
libedit-dev libncurses-dev python3-pexpect python3-pyte"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
        || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "installing:$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # one word per package, on purpose
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
# Debian starts the packaged beanstalkd as a service where it can; the tests
# start their own on free ports.
