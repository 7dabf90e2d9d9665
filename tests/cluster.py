"""A 3-node rockstalkd cluster on loopback for the tests.

    c = Cluster(tmpdir, flags=[...], env={...})   # starts 3 nodes
    c.wait_leader()                # -> leader's node id, once it serves
    c.node(i)                      # -> Node (1-based): port, proc, dir, ...
    c.follower()                   # -> a Node that is not the leader
    c.stop()

Each node's client port, Raft port and metrics port are free loopback
ports, below the kernel's ephemeral range where it leaves room (node_port);
its log is DIR.log beside its data directory. The nodes talk mutual TLS
(certificates from scripts/cluster-certs.sh in BASE/certs: node<i>.pem for
each node, and two more, for ids no voter has) unless tls=False, which
starts them in plaintext (loopback allows it). A node's own view of
the cluster (role, leader, term, commit index) comes from its --metrics
endpoint (stats through a follower are the leader's: commands are relayed).
"""
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

from replay import free_port, wait_listening

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROCKSTALKD = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALKD", "rockstalkd")))

_rand = random.SystemRandom()  # not the tests' seeded random
# Every port node_port gave in this process: clusters started at once (in
# threads) check their ports before any node binds one.
_given = set()
_lock = threading.Lock()


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = map(int, f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return None


def _worker_slice(lo, hi):
    """The part of [lo, hi] this process picks node ports from: all of it,
    or under pytest-xdist (PYTEST_XDIST_WORKER gwN of
    PYTEST_XDIST_WORKER_COUNT) the N-th of as many disjoint slices, so
    that two workers never pick the same port between a pick and a
    node's bind."""
    w = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        n = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        i = int(w[2:]) if w.startswith("gw") else 0
    except ValueError:
        return lo, hi
    if n <= 1 or not 0 <= i < n:
        return lo, hi
    width = (hi - lo + 1) // n
    return lo + i * width, lo + (i + 1) * width - 1


def node_port():
    """A free loopback port for a node, given once per process. A port
    from free_port (bind to port 0) is in the ephemeral range, where
    between its pick and the node's bind any outgoing connect (a readiness
    probe, a relay, a Raft peer's, or another test run's) can take it as
    its local port, or it is a port another run's killed node had, which
    that run's peers keep calling; below the range neither can happen.
    Falls back to free_port if the range starts too low to leave room."""
    rng = _ephemeral_range()
    with _lock:
        if rng and rng[0] > 12000:
            for _ in range(200):
                p = _rand.randint(*_worker_slice(10000, rng[0] - 1))
                if p in _given:
                    continue
                with socket.socket() as s:
                    try:
                        s.bind(("127.0.0.1", p))
                    except OSError:
                        continue
                _given.add(p)
                return p
        while True:
            p = free_port()
            if p not in _given:
                _given.add(p)
                return p


class Node:
    """One member: id, host, port (client), raft_port, metrics_port, dir,
    argv, proc, log; flags: this node's own extra flags (after the
    cluster's), for its next start."""

    def __init__(self, cluster, nid, port, raft_port, metrics_port, d):
        self.cluster, self.id, self.host = cluster, nid, "127.0.0.1"
        self.port, self.raft_port, self.metrics_port = (port, raft_port,
                                                        metrics_port)
        self.dir = d
        os.makedirs(os.path.dirname(d), exist_ok=True)
        self.log = open(d + ".log", "ab")
        self.proc = None
        self.env = None
        self.flags = []

    def argv(self):
        return [ROCKSTALKD, "-l", "127.0.0.1", "-p", str(self.port),
                "-b", self.dir, "--cluster", self.cluster.spec,
                "--node-id", str(self.id),
                "--metrics", "127.0.0.1:%d" % self.metrics_port,
                # view() reads /metrics over plain HTTP, also when a test
                # gives the nodes --tls-cert for tls:// clients
                "--http-plain"
                ] + self.cluster.tls_flags(self.id) + self.cluster.flags + \
            self.flags

    def start(self, wait=True):
        env = dict(os.environ)
        env.update(self.cluster.env)
        self.proc = subprocess.Popen(self.argv(), stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env)
        if wait:
            wait_listening(self.host, self.port, self.proc)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, sig=signal.SIGTERM):
        if self.alive():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def connect(self, timeout=5.0):
        s = socket.create_connection((self.host, self.port), timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def view(self):
        """This node's own cluster status from its metrics endpoint:
        {"role", "leader", "term", "commit"}; None if it does not answer."""
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        try:
            text = urllib.request.urlopen(url, timeout=1).read().decode()
        except OSError:
            return None
        out = {}
        for line in text.splitlines():
            if line.startswith("rockstalk_cluster_role{"):
                out["role"] = line.split('"')[1]
            for key, name in (("leader", "rockstalk_cluster_leader "),
                              ("term", "rockstalk_cluster_term "),
                              ("commit", "rockstalk_cluster_commit_index "),
                              ("refused", "rockstalk_cluster_peer_refused ")):
                if line.startswith(name):
                    out[key] = int(line.split()[1])
        return out if "role" in out else None


class Cluster:
    """Three (or five) rockstalkd nodes forming one Raft cluster."""

    def __init__(self, base, flags=(), env=None, n=3, start=True, tls=True):
        self.flags, self.env = list(flags), dict(env or {})
        self.nodes = []
        self.certs = make_certs(os.path.join(str(base), "certs"), n + 2) \
            if tls else None
        ports = [(node_port(), node_port(), node_port()) for _ in range(n)]
        self.spec = ",".join("%d@127.0.0.1:%d/%d" % (i + 1, rp, cp)
                             for i, (cp, rp, mp) in enumerate(ports))
        for i, (cp, rp, mp) in enumerate(ports):
            d = os.path.join(str(base), "node%d" % (i + 1))
            self.nodes.append(Node(self, i + 1, cp, rp, mp, d))
        if start:
            for nd in self.nodes:
                nd.start(wait=False)
            for nd in self.nodes:
                wait_listening(nd.host, nd.port, nd.proc)

    def node(self, nid):
        return self.nodes[nid - 1]

    def tls_flags(self, nid):
        """Node nid's --cluster-cert/-key/-ca, or [] in plaintext."""
        if not self.certs:
            return []
        return ["--cluster-cert", self.cert(nid), "--cluster-key",
                self.cert(nid, "key"), "--cluster-ca", self.cert(0)]

    def cert(self, nid, kind="pem"):
        """Path of node nid's certificate (kind "pem") or key ("key"); nid
        0: the CA's."""
        name = "ca" if nid == 0 else "node%d" % nid
        return os.path.join(self.certs, "%s.%s" % (name, kind))

    def views(self):
        return {nd.id: nd.view() for nd in self.nodes if nd.alive()}

    def leader(self):
        """The id of a live node that says it leads, or 0."""
        for nid, v in self.views().items():
            if v and v["role"] == "leader":
                return nid
        return 0

    def wait_leader(self, timeout=15.0):
        """Waits until a live node leads and serves a command; its id."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            nid = self.leader()
            if nid and serves(self.node(nid)):
                return nid
            time.sleep(0.05)
        raise AssertionError("no leader within %.0f s: %r" %
                             (timeout, self.views()))

    def follower(self):
        lead = self.wait_leader()
        return next(nd for nd in self.nodes if nd.id != lead and nd.alive())

    def wait_caught_up(self, nid, timeout=15.0):
        """Waits until node nid knows the leader's commit index."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            lead = self.leader()
            lv = self.node(lead).view() if lead else None
            v = self.node(nid).view()
            if lv and v and v["commit"] >= lv["commit"] and \
                    v["leader"] == lead:
                return
            time.sleep(0.05)
        raise AssertionError("node %d did not catch up: %r\n%s" %
                             (nid, self.views(), self.diagnose(nid)))

    def diagnose(self, nid, lines=40):
        """What a stuck node nid shows: its log's last lines and, where gdb
        can attach, every thread's stack (a raft thread blocked in a state
        fetch, say). For an assertion's message; never raises."""
        nd = self.node(nid)
        out = []
        try:
            with open(nd.dir + ".log", "rb") as f:
                tail = f.read()[-16384:].decode(errors="replace")
            out.append("node %d log:\n%s" % (nid, "\n".join(
                tail.splitlines()[-lines:])))
        except OSError as e:
            out.append("node %d log: %s" % (nid, e))
        if nd.alive() and shutil.which("gdb"):
            try:
                r = subprocess.run(
                    ["gdb", "-p", str(nd.proc.pid), "-batch", "-nx", "-ex",
                     "thread apply all bt 30"], capture_output=True,
                    timeout=60)
                bt = []
                for ln in r.stdout.decode(errors="replace").splitlines():
                    m = re.match(r"(#\d+)\s+(?:0x\S+ in )?(\S+)", ln)
                    if ln.startswith("Thread"):
                        bt.append(ln.split(" (")[0])
                    elif m:
                        bt.append("  %s %s" % m.groups())
                out.append("node %d threads:\n%s" % (nid, "\n".join(
                    bt[:400])))
            except (OSError, subprocess.SubprocessError) as e:
                out.append("node %d threads: %s" % (nid, e))
        return "\n".join(out)

    def stop(self):
        """Stops every node (SIGTERM to all at once, then waits)."""
        for nd in self.nodes:
            if nd.alive():
                try:
                    nd.proc.send_signal(signal.SIGCONT)
                    nd.proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for nd in self.nodes:
            nd.stop()
            nd.log.close()


def make_certs(d, n):
    """A CA and n node certificates in d (scripts/cluster-certs.sh), made
    once per directory."""
    if not os.path.exists(os.path.join(d, "ca.pem")):
        subprocess.run([os.path.join(ROOT, "scripts", "cluster-certs.sh"), d,
                        str(n)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT)
    return d


def serves(node, timeout=2.0):
    """Whether node answers a command (list-tube-used) within timeout; with
    --auth-file the answer is UNAUTHORIZED, which serves too."""
    try:
        with node.connect(timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"list-tube-used\r\n")
            return s.recv(64).startswith((b"USING", b"UNAUTHORIZED"))
    except OSError:
        return False
