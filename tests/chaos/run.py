"""One chaos round, and the `make chaos` command line.

    python3 tests/chaos/run.py [--seed S] [--rounds R] [--nodes 3|5]
                               [--nemesis NAME,...] [--keep]

Round r of a run with seed S uses seed S + r: its nemesis, the nodes it
hits, its timings and every client's choices are drawn from that seed, and
`--seed S+r --rounds 1` replays it (the network's own timing aside).
Prints the seed, then one line per round; exits 1 if any round found a
violation (its node logs stay in the printed directory).

A round: a fresh cluster in namespaces; producers and workers for a while;
the fault; probes of the majority side until it serves (unavailability);
the heal; probes until a leader serves; more load; stop the clients; a
final drain; the checkers (checker.py), node convergence, and bounds on
unavailability (MAX_UNAVAIL_S).
"""
import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from chaos import checker, nemesis  # noqa: E402
from chaos.netns import Net, NetError  # noqa: E402
from chaos.nodes import NsCluster  # noqa: E402
from chaos.workload import Client, History, Lost, Producer, Reader, \
    Worker, drain  # noqa: E402

MAX_UNAVAIL_S = 5.0  # the majority side serves again within; a leader
# serves within this long after the heal
PROBE_CAP_S = 10.0  # the most a fault is held waiting for the majority
DISK_MIB = 256  # each node's tmpfs disk, for the disk nemeses
# their Raft log in 64 KiB segments: a full disk fails the next segment's
# allocation within a few hundred entries (libraft preallocates segments,
# and RocksDB its WAL, so writes into space taken before would go on)
DISK_ENV = {"ROCKSTALKD_RAFT_SEGMENT": str(64 << 10)}


def probe(cluster, ids, timeout=1.0):
    """Whether a put (and its delete) succeeds through one of ids."""
    for i in ids:
        nd = cluster.node(i)
        try:
            c = Client(nd, timeout=timeout)
        except (OSError, Lost):
            continue
        try:
            c.cmd("use probe")
            w, _ = c.cmd("put 0 0 10 1", "p")
            if w and w[0] == "INSERTED":
                c.cmd("delete " + w[1])
                return True
        except (OSError, Lost, IndexError):
            pass
        finally:
            c.close()
    return False


def wait_serving(cluster, ids, cap):
    """Seconds until a probe through one of ids succeeds, or None after
    cap. Each node has its own probe loop (a thread): one node's probe
    waiting out its timeout does not delay the others', so the time is
    when the first node served, not when a round of probes reached it."""
    t0 = time.monotonic()
    done = threading.Event()
    first = []

    def loop(i):
        while not done.is_set() and time.monotonic() - t0 < cap:
            if probe(cluster, [i]):
                first.append(time.monotonic() - t0)
                done.set()
                return
            done.wait(0.05)

    threads = [threading.Thread(target=loop, args=(i,), daemon=True)
               for i in ids]
    for t in threads:
        t.start()
    for t in threads:  # each probe ends within its timeouts (seconds)
        t.join()
    return min(first) if first else None


def converge(cluster, st, timeout=30.0):
    """Waits until every node's own view has the same commit index and
    job count; returns [] or a violation."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        vs = cluster.views()
        last = vs
        if all(vs.values()):
            if len({(v["commit"], v["jobs"]) for v in vs.values()}) == 1 \
                    and sum(v["role"] == "leader" for v in vs.values()) == 1:
                st["converge"] = timeout - (end - time.monotonic())
                return []
        time.sleep(0.1)
    return ["diverged: nodes' own views %r" % last]


def round_(seed, n=3, names=None, base=None, log=print):
    """Runs one round; returns (line, violations, stats)."""
    rng = random.Random(seed)
    name = rng.choice(names or nemesis.names(n))
    warm = rng.uniform(1.0, 2.0)
    hold = rng.uniform(2.0, 4.0)
    after = rng.uniform(1.0, 2.5)
    nprod, nwork = 2, 3
    nread = 2
    seeds = [rng.randrange(1 << 30) for _ in range(nprod + nwork + nread)]
    net = Net(n)
    c = None
    hist = History()
    stop = threading.Event()
    procs = []
    out = []
    st = {"nemesis": name}
    try:
        nem = nemesis.NEMESES[name]
        node_env, flags = None, []
        if nem.skew:  # clocks set apart before the nodes start
            node_env = {i: {"ROCKSTALKD_FAULT_CLOCK_SKEW_MS": str(ms)}
                        for i, ms in nem.skews(rng, n).items()}
            flags = ["--dedup-window", str(nem.DEDUP_S)]
        c = NsCluster(base, net, n=n, flags=flags,
                      disk_mib=DISK_MIB if nem.disk else 0,
                      env=DISK_ENV if nem.disk else None, node_env=node_env)
        if wait_serving(c, range(1, n + 1), 20.0) is None:
            return ("seed %d %s: no leader at start" % (seed, name),
                    ["no leader at start"], st)
        for k in range(nprod):
            procs.append(Producer(c, hist, "p%d" % k, seeds[k], stop))
            procs[-1].delayed = nem.skew
        for k in range(nwork):
            procs.append(Worker(c, hist, "w%d" % k, seeds[nprod + k], stop))
            procs[-1].kick = not nem.skew
        for k in range(nread):
            procs.append(Reader(c, hist, "r%d" % k, seeds[nprod + nwork + k],
                                stop))
        for p in procs:
            p.start()
        time.sleep(warm)
        leader = c.wait_leader(timeout=3.0) or 1
        f = nemesis.NEMESES[name](rng, c, net, leader)
        t_fault = time.monotonic()
        major = f.apply()
        st["fault"] = f.describe()
        if major:
            u = wait_serving(c, major, PROBE_CAP_S)
            st["unavail"] = u if u is not None else PROBE_CAP_S
            if u is None or u > MAX_UNAVAIL_S:
                out.append("unavailable: majority %s did not serve within "
                           "%.1f s of %s (%s)" %
                           (major, MAX_UNAVAIL_S, f.describe(),
                            "never" if u is None else "%.2f s" % u))
        rest = hold - (time.monotonic() - t_fault)
        if rest > 0:
            time.sleep(rest)
        f.heal()
        u = wait_serving(c, range(1, n + 1), PROBE_CAP_S + 10)
        st["heal"] = u if u is not None else PROBE_CAP_S + 10
        if u is None or u > MAX_UNAVAIL_S:
            out.append("unavailable: no leader served within %.1f s of the "
                       "heal (%s)" % (MAX_UNAVAIL_S, "never" if u is None
                                      else "%.2f s" % u))
        time.sleep(after)
        stop.set()
        for p in procs:
            p.join(10)
        if not drain(c, hist):
            out.append("drain: could not empty the queue")
        out += checker.check(hist.ops)
        out += converge(c, st)
    finally:
        stop.set()
        if c:
            c.stop()
        net.close()
    ops = hist.ops
    st["ops"] = len(ops)
    st["acked"] = sum(o["op"] == "put" and o["reply"] == "INSERTED"
                      for o in ops)
    st["lost_replies"] = sum(o["reply"] is None for o in ops)
    line = "seed %d n=%d %-32s ops %5d puts-acked %4d no-reply %3d " \
        "unavail %s heal %.2fs converge %.1fs: %s" % (
            seed, n, st.get("fault", name), st["ops"], st["acked"],
            st["lost_replies"],
            "%.2fs" % st["unavail"] if "unavail" in st else "-",
            st.get("heal", -1), st.get("converge", -1), "OK" if not out else
            "%d VIOLATIONS" % len(out))
    return line, out, st


def _on_term(sig, frame):
    raise SystemExit("chaos: signal %d" % sig)  # cleanup runs (finally)


def main(argv=None):
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGHUP, _on_term)
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--nemesis", default="")
    ap.add_argument("--keep", action="store_true",
                    help="keep every round's directory")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(
        1 << 31)
    names = [x for x in a.nemesis.split(",") if x] or None
    print("chaos: seed %d, %d rounds, %d nodes" % (seed, a.rounds, a.nodes),
          flush=True)
    bad = 0
    worst = {}
    for r in range(a.rounds):
        base = tempfile.mkdtemp(prefix="rkchaos-")
        try:
            line, viol, st = round_(seed + r, a.nodes, names, base)
        except NetError as e:
            print("chaos: cannot run: %s" % e, flush=True)
            return 2
        print("round %d: %s" % (r, line), flush=True)
        w = worst.setdefault(st["nemesis"], [0, 0.0, 0.0])
        w[0] += 1
        w[1] = max(w[1], st.get("unavail", 0.0))
        w[2] = max(w[2], st.get("heal", 0.0))
        if viol:
            bad += 1
            for v in viol[:20]:
                print("    " + v, flush=True)
            print("    logs: %s (replay: --seed %d --rounds 1 --nodes %d)" %
                  (base, seed + r, a.nodes), flush=True)
        elif not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    for k, (cnt, u, h) in sorted(worst.items()):
        print("nemesis %-18s rounds %3d max-unavail %.2fs max-heal %.2fs" %
              (k, cnt, u, h))
    print("chaos: seed %d: %d of %d rounds with violations" %
          (seed, bad, a.rounds), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
