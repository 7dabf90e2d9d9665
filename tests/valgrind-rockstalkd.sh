#!/bin/sh
# Runs rockstalkd under valgrind memcheck, as a drop-in for the binary the
# pytest suites start (conftest.py's ROCKSTALKD). Too slow for `make test`;
# run it by hand after a change to memory handling:
#
#     make
#     ROCKSTALKD=tests/valgrind-rockstalkd.sh \
#         /usr/bin/python3 -m pytest -q tests/test_protocol.py
#     grep -l "ERROR SUMMARY: [1-9]\|definitely lost: [1-9]" \
#         /tmp/rockstalkd-valgrind/*.log      # nothing printed = clean
#
# Each server's report goes to $ROCKSTALKD_VG_DIR/vg.<pid>.log (default
# /tmp/rockstalkd-valgrind, emptied by nobody: remove it between runs). The
# server exits 99 on an invalid access or a definite/possible leak, but the
# fixtures do not check exit codes, so read the reports. Tests that assert
# timings may fail under valgrind's slowdown; that alone is not a finding.
# ROCKSTALKD_BIN picks another binary (default: ./rockstalkd of this tree).
here=$(cd "$(dirname "$0")" && pwd)
bin=${ROCKSTALKD_BIN:-$here/../rockstalkd}
dir=${ROCKSTALKD_VG_DIR:-/tmp/rockstalkd-valgrind}
mkdir -p "$dir"
exec valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,possible --errors-for-leak-kinds=definite,possible \
    --track-origins=yes --num-callers=30 --log-file="$dir/vg.%p.log" \
    "$bin" "$@"
