#!/usr/bin/env python3
"""lagdel.py - a deleter for the held-file loads of BENCHMARKS.md ("Held
files under a standing backlog", "Copy-outs off the writer's path"): beside
producers that put into one server, deletes jobs in id order, keeping the
newest LAG jobs alive, and (with KEEP > 0) every job whose id is a multiple
of KEEP for ever, for SECS seconds; then prints "deleted N".

    lagdel.py PORT LAG SECS [KEEP]

The newest id is read from the server's total-jobs stat (ids are given in
order from 1 on a fresh server); deletes go 200 to a write. Standard
library only."""
import re
import socket
import sys
import time

BATCH = 200


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    port, lag, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    keep = int(sys.argv[4]) if len(sys.argv) == 5 else 0
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")

    def total_jobs():
        s.sendall(b"stats\r\n")
        n = int(f.readline().split()[1])
        body = f.read(n + 2).decode()
        return int(re.search(r"total-jobs: (\d+)", body).group(1))

    nxt, deleted, end = 1, 0, time.monotonic() + secs
    while time.monotonic() < end:
        upto = total_jobs() - lag
        if upto < nxt:
            time.sleep(0.01)
            continue
        while nxt <= upto:
            last = min(upto, nxt + BATCH - 1)
            ids = [j for j in range(nxt, last + 1) if not keep or j % keep]
            s.sendall(b"".join(b"delete %d\r\n" % j for j in ids))
            for _ in ids:
                if f.readline().startswith(b"DELETED"):
                    deleted += 1
            nxt = last + 1
    print("deleted", deleted)


if __name__ == "__main__":
    main()
