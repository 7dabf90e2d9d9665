#!/usr/bin/env python3
"""threads.py - where a 3-node cluster's CPU and system calls go, per thread
and per put: put c=50 (rsbench -m put -c 50 -P 1 -s 100) through a
follower's client port (the follower relays to the leader) or the
leader's, in plaintext and with mutual TLS between the nodes (the
configurations rs-clf / rs-clft and rs-cl / rs-clt of run.sh).

For each cell: a fresh cluster (free ports, certificates from
scripts/cluster-certs.sh), a 1 s warm-up, then the measured run; each
thread's CPU time from /proc/PID/task/TID/stat before and after, its system
calls from `perf stat --per-thread` on the syscalls tracepoints (left out
when perf cannot attach: root or perf_event_paranoid <= -1 needed). Cells
alternate binaries and modes; the table gives the means per thread class
(a node's loop thread, its raft thread, libraft's helper threads, the
rest) and node (leader, the measured follower, the other follower).

    scripts/bench/threads.py [--secs 4] [--rounds 2] [--via follower]
        [--modes plain,tls] BINARY [BINARY...]

Prints one table per binary: CPU us per put and system calls per put
(read, write+writev, recvfrom+sendto, epoll_wait) in each mode.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
HZ = os.sysconf("SC_CLK_TCK")
CALLS = ("read", "write", "writev", "recvfrom", "sendto", "epoll_wait")


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def view(port):
    """(role, leader id) from port's stats, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), 2) as s:
            s.sendall(b"stats\r\n")
            buf = b""
            while b"rockstalk-cluster-leader" not in buf or \
                    not buf.endswith(b"\n"):
                b = s.recv(65536)
                if not b:
                    break
                buf += b
    except OSError:
        return None
    role = re.search(rb"rockstalk-cluster-role: (\w+)", buf)
    lead = re.search(rb"rockstalk-cluster-leader: (\d+)", buf)
    if not role or not lead:
        return None
    return role.group(1).decode(), int(lead.group(1))


def start(binary, tls, certs, d):
    """The nodes' Popen objects and client ports once a leader serves and
    every node relays to it; (procs, ports, leader index)."""
    ports = free_ports(6)
    cp, rp = ports[:3], ports[3:]
    spec = ",".join("%d@127.0.0.1:%d/%d" % (i + 1, rp[i], cp[i])
                    for i in range(3))
    procs = []
    for i in range(3):
        n = i + 1
        cmd = [binary, "-l", "127.0.0.1", "-p", str(cp[i]), "-b",
               os.path.join(d, "node%d" % n), "--cluster", spec,
               "--node-id", str(n)]
        if tls:
            cmd += ["--cluster-cert", os.path.join(certs, "node%d.pem" % n),
                    "--cluster-key", os.path.join(certs, "node%d.key" % n),
                    "--cluster-ca", os.path.join(certs, "ca.pem")]
        log = open(os.path.join(d, "node%d.log" % n), "w")
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=log))
    for _ in range(300):
        views = [view(p) for p in cp]
        leads = [i for i, v in enumerate(views) if v == ("leader", i + 1)]
        if leads and all(v and v[1] == leads[0] + 1 for v in views):
            return procs, cp, leads[0]
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.1)
    stop(procs)
    raise RuntimeError("no serving leader (logs in %s)" % d)


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def snapshot(pids):
    """{(pid, tid): (comm, CPU ticks)}"""
    out = {}
    for pid in pids:
        tdir = "/proc/%d/task" % pid
        for tid in os.listdir(tdir):
            try:
                with open("%s/%s/comm" % (tdir, tid)) as f:
                    comm = f.read().strip()
                with open("%s/%s/stat" % (tdir, tid)) as f:
                    st = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[(pid, int(tid))] = (comm, int(st[11]) + int(st[12]))
    return out


def perf_start(pids, d):
    if not shutil.which("perf"):
        return []
    ev = ",".join("syscalls:sys_enter_" + c for c in CALLS)
    ps = []
    for pid in pids:
        ps.append(subprocess.Popen(
            ["perf", "stat", "--per-thread", "-e", ev, "-p", str(pid), "-o",
             os.path.join(d, "perf%d.txt" % pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return ps


def perf_read(pids, d):
    """{tid: {call: count}}"""
    calls = {}
    for pid in pids:
        try:
            with open(os.path.join(d, "perf%d.txt" % pid)) as f:
                text = f.read()
        except OSError:
            continue
        for m in re.finditer(r"^\s*\S+-(\d+)\s+([\d,]+)\s+syscalls:"
                             r"sys_enter_(\w+)", text, re.M):
            calls.setdefault(int(m.group(1)), {})[m.group(3)] = \
                int(m.group(2).replace(",", ""))
    return calls


def cell(binary, tls, via, secs, certs, rsbench):
    """{(node, class): {"cpu": us/put, call: per put}}, ops/s"""
    d = tempfile.mkdtemp(prefix="threads-")
    procs, cp, lead = start(binary, tls, certs, d)
    try:
        port = cp[(lead + 1) % 3] if via == "follower" else cp[lead]
        base = [rsbench, "-m", "put", "-c", "50", "-P", "1", "-s", "100",
                "-p", str(port)]
        subprocess.run(base + ["-d", "1", "-t", "warm"], check=True,
                       capture_output=True)
        pids = [p.pid for p in procs]
        perfs = perf_start(pids, d)
        time.sleep(0.3)  # perf attached
        before = snapshot(pids)
        out = subprocess.run(base + ["-d", str(secs)], check=True,
                             capture_output=True, text=True).stdout
        after = snapshot(pids)
        for p in perfs:
            p.send_signal(signal.SIGINT)
        for p in perfs:
            p.wait()
        calls = perf_read(pids, d)
    finally:
        stop(procs)
    ops = int(re.search(r" ops=(\d+)", out).group(1))
    rate = float(re.search(r"ops_s=([\d.]+)", out).group(1))
    names = {procs[lead].pid: "leader"}
    if via == "follower":
        names[procs[(lead + 1) % 3].pid] = "follower (relay)"
    res = {}
    for (pid, tid), (comm, ticks) in after.items():
        node = names.get(pid, "follower")
        c = calls.get(tid, {})
        if tid == pid:
            cls = "loop"
        elif comm.startswith("rs-raft"):
            cls = "raft" if c.get("epoll_wait") else "raft helpers"
        else:
            cls = "rest"
        e = res.setdefault((node, cls), {"cpu": 0.0})
        used = ticks - before.get((pid, tid), (comm, 0))[1]
        e["cpu"] += used * 1e6 / HZ / ops
        for k in CALLS:
            e[k] = e.get(k, 0.0) + c.get(k, 0) / ops
    shutil.rmtree(d, ignore_errors=True)
    return res, rate


def mean(cells):
    tot = {}
    for res in cells:
        for k, v in res.items():
            t = tot.setdefault(k, {})
            for x, y in v.items():
                t[x] = t.get(x, 0.0) + y / len(cells)
    return tot


def table(binary, modes, results, rates):
    order = ["leader", "follower (relay)", "follower"]
    classes = ["loop", "raft", "raft helpers", "rest"]
    print("\n%s; ops/s per cell: %s" % (binary, "; ".join(
        "%s %s" % (m, " ".join("%.0f" % r for r in rates[m])) for m in modes)))
    head = "| node | thread |"
    for m in modes:
        head += " %s: CPU us | read | write(v) | recv/send | epoll |" % m
    print(head)
    print("| --- | --- |" + " ---: |" * (5 * len(modes)))
    total = {m: 0.0 for m in modes}
    for node in order:
        for cls in classes:
            if not any((node, cls) in results[m] for m in modes):
                continue
            line = "| %s | %s |" % (node, cls)
            for m in modes:
                e = results[m].get((node, cls), {})
                total[m] += e.get("cpu", 0.0)
                line += " %.1f | %.2f | %.2f | %.2f | %.2f |" % (
                    e.get("cpu", 0.0), e.get("read", 0.0),
                    e.get("write", 0.0) + e.get("writev", 0.0),
                    e.get("recvfrom", 0.0) + e.get("sendto", 0.0),
                    e.get("epoll_wait", 0.0))
            print(line)
    print("| all | |" + "".join(" %.1f | | | | |" % total[m] for m in modes))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--secs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--via", choices=("follower", "leader"),
                    default="follower")
    ap.add_argument("--modes", default="plain,tls")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    modes = a.modes.split(",")
    build = os.path.join(HERE, "build")
    os.makedirs(build, exist_ok=True)
    rsbench = os.path.join(build, "rsbench")
    src = os.path.join(HERE, "rsbench.c")
    if not os.path.exists(rsbench) or \
            os.path.getmtime(src) > os.path.getmtime(rsbench):
        subprocess.run(["cc", "-std=c11", "-O2", "-D_GNU_SOURCE", "-o",
                        rsbench, src, "-lssl", "-lcrypto"], check=True)
    certs = os.path.join(build, "certs")
    if not os.path.exists(os.path.join(certs, "ca.pem")):
        subprocess.run([os.path.join(REPO, "scripts", "cluster-certs.sh"),
                        certs, "3"], check=True, capture_output=True)
    got = {b: {m: [] for m in modes} for b in a.binaries}
    rates = {b: {m: [] for m in modes} for b in a.binaries}
    for r in range(a.rounds):
        for m in modes:
            for b in a.binaries:
                res, rate = cell(os.path.abspath(b), m == "tls", a.via,
                                 a.secs, certs, rsbench)
                got[b][m].append(res)
                rates[b][m].append(rate)
                print("round %d %s %s: %.0f ops/s" % (r + 1, m, b, rate),
                      file=sys.stderr)
    for b in a.binaries:
        table(b, modes, {m: mean(got[b][m]) for m in modes}, rates[b])


if __name__ == "__main__":
    main()
