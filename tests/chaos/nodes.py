"""A rockstalkd cluster with every node in a network namespace of its own
(netns.Net), talking mutual TLS (certificates from scripts/cluster-certs.sh).

    c = NsCluster(base, net, n=3)   # starts n nodes
    c.node(i).stop(sig) / kill9() / pause() / resume() / start()
    c.view(i)                       # node i's own metrics (role, term, ...)
    c.leader()                      # id of a node saying it leads, or 0
    c.stop()

Ports are the same in every namespace: client 11300, Raft 7000, metrics
9100, on the node's own address. Logs: DIR.log beside each data dir.

With disk_mib, each node's data directory lives on a tmpfs of its own of
that size (mounted before the node starts; its source is named
rkdisk<pid>-n<i>, so a dead run's mounts are found and unmounted by the
next NsCluster), and node.fill_disk() / unfill_disk() take every free byte
of it and give them back: a full disk under a running node.
"""
import errno
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from cluster import ROCKSTALKD, make_certs  # noqa: E402
from chaos.netns import _pid_alive  # noqa: E402

CLIENT_PORT, RAFT_PORT, METRICS_PORT = 11300, 7000, 9100


_DISK = re.compile(r"^rkdisk(\d+)-n\d+$")


def remove_leftover_disks():
    """Unmounts the tmpfs disks of runs whose process no longer runs."""
    with open("/proc/self/mounts") as f:
        mounts = [ln.split() for ln in f]
    for m in mounts:
        g = _DISK.match(m[0]) if len(m) > 2 and m[2] == "tmpfs" else None
        if g and not _pid_alive(int(g.group(1))):
            subprocess.run(["umount", "-l", m[1]], check=False)


class NsNode:
    def __init__(self, cluster, nid, disk_mib=0):
        self.cluster, self.id = cluster, nid
        self.host = cluster.net.ip(nid)
        self.port = CLIENT_PORT
        name = "node%d" % nid
        self.log = open(os.path.join(cluster.base, name + ".log"), "ab")
        self.disk = None
        if disk_mib:
            self.disk = os.path.join(cluster.base, "disk%d" % nid)
            os.makedirs(self.disk)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0700"
                            % disk_mib, "rkdisk%d-n%d" % (os.getpid(), nid),
                            self.disk], check=True)
            self.dir = os.path.join(self.disk, name)
        else:
            self.dir = os.path.join(cluster.base, name)
        self.proc = None
        self.paused = False
        self.env = {}  # this node's own, over the cluster's

    def fill_disk(self):
        """Takes every free byte of the node's tmpfs (a file beside its
        data directory). Returns the bytes taken."""
        n = 0
        with open(os.path.join(self.disk, "filler"), "wb") as f:
            chunk = b"\0" * (1 << 20)
            try:
                while True:
                    n += f.write(chunk)
                    f.flush()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
        return n

    def unfill_disk(self):
        try:
            os.unlink(os.path.join(self.disk, "filler"))
        except FileNotFoundError:
            pass

    def unmount(self):
        if self.disk:
            subprocess.run(["umount", "-l", self.disk], check=False)
            self.disk = None

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
        env = dict(os.environ)
        env.update(self.cluster.env)
        env.update(self.env)
        self.proc = subprocess.Popen(
            self.cluster.net.exec_argv(self.id, self.argv()),
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
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
    def __init__(self, base, net, n=3, flags=(), start=True, disk_mib=0,
                 env=None, node_env=None):
        self.base, self.net, self.n = str(base), net, n
        self.flags, self.env = list(flags), dict(env or {})
        os.makedirs(self.base, exist_ok=True)
        self.certs = make_certs(os.path.join(self.base, "certs"), n)
        self.spec = ",".join("%d@%s:%d/%d" % (i, net.ip(i), RAFT_PORT,
                                              CLIENT_PORT)
                             for i in range(1, n + 1))
        remove_leftover_disks()
        self.nodes = []
        try:
            for i in range(1, n + 1):
                self.nodes.append(NsNode(self, i, disk_mib))
        except BaseException:
            for nd in self.nodes:
                nd.unmount()
            raise
        for nd in self.nodes:
            nd.env = dict((node_env or {}).get(nd.id, {}))
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
            nd.unmount()
