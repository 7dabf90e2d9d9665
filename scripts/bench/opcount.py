#!/usr/bin/env python3
"""opcount.py - a single rockstalkd's cost per operation, per thread:
CPU time (schedstat), voluntary and involuntary context switches, read and
write system calls (/proc/PID/task/TID/status and io), and the store's
records, groups and syncs per operation (stats), over a window of a load
made by rsbench.

An operation is a cycle (put, reserve, delete: cmd-delete counts them) in
the cycle rows, a put in the put rows. A fresh server and data directory
(under $TMPDIR) per cell; the window starts after a warm-up. CPU figures
move with the machine's load; switch counts move with group sizes; read
and write calls per operation are steady. Instructions per operation:
run the server under valgrind --tool=callgrind instead.

    scripts/bench/opcount.py [--warm 1.5] [--secs 3] [--rsbench PATH]
        [--server-args "-f 50"] BINARY ROW [ROW...]

ROW: cycle100t1000 cycle100t1 put50 put1 (the rows of run.sh).
"""
import argparse
import collections
import os
import shutil
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = {
    "cycle100t1000": "-m cycle -c 100 -P 1 -s 100 -U 1000",
    "cycle100t1": "-m cycle -c 100 -P 1 -s 100 -U 1",
    "put50": "-m put -c 50 -P 1 -s 100",
    "put1": "-m put -c 1 -P 1 -s 100",
}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stats(port):
    """The server's stats as a dict."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"stats\r\n")
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        head, _, rest = buf.partition(b"\r\n")
        if head.startswith(b"OK ") and len(rest) >= int(head.split()[1]) + 2:
            break
    s.close()
    out = {}
    for line in buf.decode().splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def threads(pid):
    """{tid: (name, run ns, voluntary, involuntary, syscr, syscw)}."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        d = f"/proc/{pid}/task/{tid}"
        try:
            name = open(f"{d}/comm").read().strip()
            run = int(open(f"{d}/schedstat").read().split()[0])
            st = dict(l.split(":", 1) for l in open(f"{d}/status")
                      if ":" in l)
            io = dict(l.split(":", 1) for l in open(f"{d}/io"))
            out[tid] = (name, run, int(st["voluntary_ctxt_switches"]),
                        int(st["nonvoluntary_ctxt_switches"]),
                        int(io["syscr"]), int(io["syscw"]))
        except (OSError, KeyError, ValueError):
            pass
    return out


def cell(binary, row, args):
    port = free_port()
    d = tempfile.mkdtemp(prefix="opcount.")
    srv = subprocess.Popen([binary, "-l", "127.0.0.1", "-p", str(port),
                            "-b", d] + args.server_args.split(), stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.8)
        secs = args.warm + args.secs + 1.5
        bench = subprocess.Popen(
            [args.rsbench, "-p", str(port), "-d", str(secs)]
            + ROWS[row].split(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        time.sleep(args.warm)
        s0, t0, w0 = stats(port), threads(srv.pid), time.time()
        time.sleep(args.secs)
        s1, t1, w1 = stats(port), threads(srv.pid), time.time()
        bench.communicate()
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)
    key = "cmd-delete" if row.startswith("cycle") else "cmd-put"
    ops = int(s1[key]) - int(s0[key])

    def per(k):
        return (int(s1[k]) - int(s0[k])) / ops

    by = collections.OrderedDict()
    for tid, v in t1.items():
        if tid in t0:
            a = by.setdefault(v[0], [0] * 6)
            for i in range(1, 6):
                a[i - 1] += v[i] - t0[tid][i]
            a[5] += 1
    tot = [sum(a[i] for a in by.values()) for i in range(3)]
    print(f"{row} {binary}: {ops / (w1 - w0):.0f} ops/s, per op: CPU "
          f"{tot[0] / ops / 1000:.2f} us, switches {tot[1] / ops:.3f} "
          f"voluntary + {tot[2] / ops:.3f} involuntary; records "
          f"{per('binlog-records-written'):.2f}, groups "
          f"{per('rockstalk-groups'):.3f}, syncs {per('rockstalk-syncs'):.3f}")
    for name, a in by.items():
        if a[0] / ops > 50 or a[1] or a[2]:
            print(f"    {name:16s} x{a[5]:<2d} CPU {a[0] / ops / 1000:6.2f} us"
                  f"  vcs {a[1] / ops:.3f}  ivcs {a[2] / ops:.3f}  read "
                  f"{a[3] / ops:.2f}  write {a[4] / ops:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=float, default=1.5)
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--rsbench", default=os.path.join(HERE, "build",
                                                      "rsbench"))
    ap.add_argument("--server-args", default="",
                    help="more server options, e.g. \"-f 50\" (rs-f50)")
    ap.add_argument("binary")
    ap.add_argument("rows", nargs="+", choices=sorted(ROWS))
    args = ap.parse_args()
    for row in args.rows:
        cell(os.path.abspath(args.binary), row, args)


if __name__ == "__main__":
    main()
