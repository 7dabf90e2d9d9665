#!/usr/bin/env bash
# scripts/bench/jobtable.sh - the job-table benchmark (jobtable.c) against
# the working tree's src/queue/job.c (and jobhash.c), or against git
# revision $1's (src/job.c before the folders), for a before and after; `make bench-jobtable
# [REV=...]` runs it.
#
# Knobs (environment): JT_JOBS jobs to insert and remove (default 12600000,
# just past the growth to 2^25 slots), JT_STRIDE the ids' spacing (default
# 1), JT_ORDER fifo or random (the removes' order), CC the compiler.
# Output: the two lines of jobtable.c on stdout. Exit status as jobtable's,
# or 1 if the build failed.
set -eu -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
REV=${1:-}
SRC=$REPO/src
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rsjobtable.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

if [ -n "$REV" ]; then
    # revisions before the folders kept the module at src/job.{c,h}
    at=src/queue
    git -C "$REPO" cat-file -e "$REV:$at/job.c" 2>/dev/null || at=src
    mkdir -p "$TMP/queue"
    git -C "$REPO" show "$REV:$at/job.c" >"$TMP/queue/job.c"
    git -C "$REPO" show "$REV:$at/job.h" >"$TMP/queue/job.h"
    # since the chunked table, the overflow hash is a module of its own
    for f in jobhash.c jobhash.h; do
        git -C "$REPO" cat-file -e "$REV:$at/$f" 2>/dev/null &&
            git -C "$REPO" show "$REV:$at/$f" >"$TMP/queue/$f"
    done
    SRC=$TMP
fi
srcs=("$SRC/queue/job.c")
[ -e "$SRC/queue/jobhash.c" ] && srcs+=("$SRC/queue/jobhash.c")
${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$SRC" \
    -o "$TMP/jobtable" "$HERE/jobtable.c" "${srcs[@]}"
echo "job table: the job table of ${REV:-the working tree} at" \
    "$(git -C "$REPO" rev-parse --short "${REV:-HEAD}"), ${JT_JOBS:-12600000} jobs," \
    "ids ${JT_STRIDE:-1} apart, removed ${JT_ORDER:-fifo}"
"$TMP/jobtable" "${JT_JOBS:-12600000}" "${JT_STRIDE:-1}" "${JT_ORDER:-fifo}"
