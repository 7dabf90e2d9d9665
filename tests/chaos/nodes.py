"""A rockstalkd cluster with every node in a network namespace of its own
(netns.Net), talking mutual TLS (certificates from scripts/cluster-certs.sh).

    c = NsCluster(base, net, n=3)   # starts n nodes
    c.node(i).stop(sig) / kill9() / pause() / resume() / start()
    c.view(i)                       # node i's own metrics (role, term, ...)
    c.leader()                      # id of a node saying it leads, or 0
    c.stop()

Ports are the same in every namespace: client 11300, Raft 7000, metrics
9100, on the node's own address. Logs: DIR.log beside each data dir.
"""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from cluster import ROCKSTALKD, make_certs  # noqa: E402

CLIENT_PORT, RAFT_PORT, METRICS_PORT = 11300, 7000, 9100


class NsNode:
    def __init__(self, cluster, nid):
        self.cluster, self.id = cluster, nid
        self.host = cluster.net.ip(nid)
        self.port = CLIENT_PORT
        self.dir = os.path.join(cluster.base, "node%d" % nid)
        self.log = open(self.dir + ".log", "ab")
        self.proc = None
        self.paused = False

    def argv(self):
        c = self.cluster
        return [ROCKSTALKD, "-l", self.host, "-p", str(self.port),
                "-b", self.dir, "--cluster", c.spec,
                "--node-id", str(self.id),
                "--metrics", "%s:%d" % (self.host, METRICS_PORT),
                "--cluster-cert", c.cert(self.id),
                "--cluster-key", c.cert(self.id, "key"),
                "--cluster-ca", c.cert(0)] + c.flags

    def start(self):
        self.proc = subprocess.Popen(
            self.cluster.net.exec_argv(self.id, self.argv()),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.paused = False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def pause(self):
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill9(self):
        if self.proc is not None:
            self.signal(signal.SIGKILL)
            self.proc.wait()
        self.paused = False

    def stop(self, timeout=15):
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.resume()
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
        return self.proc.returncode

    def connect(self, timeout=1.0):
        s = socket.create_connection((self.host, self.port), timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def view(self, timeout=0.5):
        """This node's own status and queue counts from its metrics:
        {"role", "leader", "term", "commit", "jobs"}; None if it does not
        answer."""
        if not self.alive() or self.paused:
            return None
        url = "http://%s:%d/metrics" % (self.host, METRICS_PORT)
        try:
            text = urllib.request.urlopen(url, timeout=timeout).read()
        except (OSError, ValueError):
            return None
        out = {"jobs": 0}
        for line in text.decode().splitlines():
            if line.startswith("rockstalk_cluster_role{"):
                out["role"] = line.split('"')[1]
            elif line.startswith("rockstalk_jobs{") and \
                    'state="urgent"' not in line:
                out["jobs"] += int(line.split()[1])
            for key, name in (("leader", "rockstalk_cluster_leader "),
                              ("term", "rockstalk_cluster_term "),
                              ("commit", "rockstalk_cluster_commit_index ")):
                if line.startswith(name):
                    out[key] = int(line.split()[1])
        return out if "role" in out else None


class NsCluster:
    def __init__(self, base, net, n=3, flags=(), start=True):
        self.base, self.net, self.n = str(base), net, n
        self.flags = list(flags)
        os.makedirs(self.base, exist_ok=True)
        self.certs = make_certs(os.path.join(self.base, "certs"), n)
        self.spec = ",".join("%d@%s:%d/%d" % (i, net.ip(i), RAFT_PORT,
                                              CLIENT_PORT)
                             for i in range(1, n + 1))
        self.nodes = [NsNode(self, i) for i in range(1, n + 1)]
        if start:
            for nd in self.nodes:
                nd.start()

    def node(self, i):
        return self.nodes[i - 1]

    def cert(self, nid, kind="pem"):
        name = "ca" if nid == 0 else "node%d" % nid
        return os.path.join(self.certs, "%s.%s" % (name, kind))

    def view(self, i):
        return self.node(i).view()

    def views(self):
        return {nd.id: nd.view() for nd in self.nodes}

    def leader(self, among=None):
        """The id of a node (of among, default all) that says it leads
        (the highest term wins), or 0."""
        best, term = 0, -1
        for nd in self.nodes:
            if among is not None and nd.id not in among:
                continue
            v = nd.view()
            if v and v["role"] == "leader" and v.get("term", 0) > term:
                best, term = nd.id, v.get("term", 0)
        return best

    def wait_leader(self, among=None, timeout=10.0):
        """leader(among), waiting up to timeout for one (metrics are
        refreshed about once a second); 0 if none."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            nid = self.leader(among)
            if nid:
                return nid
            time.sleep(0.1)
        return 0

    def stop(self):
        for nd in self.nodes:
            nd.resume()
            nd.signal(signal.SIGTERM)
        end = time.monotonic() + 15
        for nd in self.nodes:
            if nd.proc is None:
                continue
            try:
                nd.proc.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                nd.kill9()
        for nd in self.nodes:
            nd.log.close()
