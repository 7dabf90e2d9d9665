"""Network namespaces on one bridge, and the cuts between them.

    net = Net(n)            # n namespaces rk<pid>x<k>-n<i>, one bridge
    net.ip(i)               # node i's address (1-based); the host is .254
    net.cut(i, j)           # i drops what it sends to j (blackhole route)
    net.throttle(i)         # i's link slow and lossy (tc tbf), both ways
    net.heal()              # every cut removed
    net.exec_argv(i, argv)  # argv run inside node i's namespace
    net.close()             # everything removed (idempotent)

Names carry this process's pid: Net() first removes what a dead process
left (its pid no longer runs), so a crashed run's namespaces, links and
processes are found and removed at the next start. An atexit hook closes
every Net still open. Where namespaces cannot be made (not root, no
iproute2), Net raises NetError with the reason: the caller fails loudly.

Setting a Net up and closing it add and remove links and an address in
the host's own namespace. Chromium watches those (netlink) and fails every
request in flight with net::ERR_NETWORK_CHANGED, 127.0.0.1 included. So
those steps hold host_network_lock() exclusively, and a browser test holds
it shared for its run (tests/test_console.py): neither waits on the other
for long, and no browser sees the host's network change under it.
"""
import atexit
import contextlib
import fcntl
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

IP = "/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else "ip"
TC = "/usr/sbin/tc" if os.path.exists("/usr/sbin/tc") else "tc"
_NAME = re.compile(r"^rk(\d+)x(\d+)")
_open = []
_lock = threading.Lock()
_count = [0]


class NetError(RuntimeError):
    pass


LOCK_PATH = os.path.join(tempfile.gettempdir(), "rockstalk-hostnet.lock")
LOCK_WAIT_S = 180  # s: over a browser run's bound (120 s) or a setup


@contextlib.contextmanager
def host_network_lock(shared, wait_s=LOCK_WAIT_S):
    """Holds LOCK_PATH (flock, across processes and pytest workers): shared
    while a browser runs, exclusive while links and addresses of the
    host's namespace change. Raises NetError after wait_s seconds."""
    # read-only is enough for flock, and O_CREAT only when the file is
    # missing (fs.protected_regular refuses it on another user's file)
    try:
        fd = os.open(LOCK_PATH, os.O_RDONLY)
    except FileNotFoundError:
        fd = os.open(LOCK_PATH, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        stop = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, mode)
                break
            except BlockingIOError:
                if time.monotonic() > stop:
                    raise NetError("%s held for over %d s" %
                                   (LOCK_PATH, wait_s))
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _ip(*args, check=True):
    r = subprocess.run([IP] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise NetError("ip %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


def _tc(*args, check=True):
    r = subprocess.run([TC] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise NetError("tc %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_leftovers():
    """Removes namespaces (killing what runs in them) and links named for
    a process that no longer runs. Returns how many names it removed."""
    removed = 0
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        m = _NAME.match(name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        _kill_ns(name)
        _ip("netns", "del", name, check=False)
        removed += 1
    for line in _ip("-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        m = _NAME.match(name)
        if m and not _pid_alive(int(m.group(1))):
            _ip("link", "del", name, check=False)
            removed += 1
    return removed


def _kill_ns(name):
    for p in _ip("netns", "pids", name, check=False).split():
        try:
            os.kill(int(p), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def _free_subnet(start):
    """10.213.X (X in 1..250, from start on) that no address of this host
    is in: two runs at once never share a subnet."""
    used = _ip("-4", "-o", "addr", "show", check=False)
    for k in range(250):
        net = "10.213.%d" % ((start + k) % 250 + 1)
        if " %s." % net not in used:
            return net
    raise NetError("no free 10.213.X.0/24 subnet")


class Net:
    """n namespaces, each with one veth on a shared bridge, addresses
    10.213.<k>.<i>/24 (the host: .254)."""

    def __init__(self, n):
        if os.geteuid() != 0:
            raise NetError("the chaos harness needs root (network "
                           "namespaces); run it as root")
        with _lock:
            _count[0] += 1
            k = _count[0]
        self.tag = "rk%dx%d" % (os.getpid(), k)
        self.n = n
        self.subnet = None
        self.bridge = self.tag + "b"
        self.cuts = set()
        self.slow = set()
        self.closed = False
        with _lock:
            _open.append(self)
        try:  # the lock is released before close() takes it again
            with host_network_lock(shared=False):
                remove_leftovers()
                # chosen under the lock: two Nets at once never share one
                self.subnet = _free_subnet((os.getpid() * 7 + k) % 250)
                self._up()
        except Exception:
            self.close()
            raise

    def ns(self, i):
        return "%s-n%d" % (self.tag, i)

    def ip(self, i):
        return "%s.%d" % (self.subnet, i)

    def host_ip(self):
        return "%s.254" % self.subnet

    def _up(self):
        # no IPv6 link-local addresses on the host's side: they would come
        # a second or two later (after DAD), outside host_network_lock()
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "addrgenmode", "none")
        _ip("addr", "add", self.host_ip() + "/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(1, self.n + 1):
            ns, veth = self.ns(i), "%sv%d" % (self.tag, i)
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0",
                "netns", ns)
            _ip("link", "set", veth, "addrgenmode", "none")
            _ip("link", "set", veth, "master", self.bridge)
            _ip("link", "set", veth, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", self.ip(i) + "/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def exec_argv(self, i, argv):
        """argv to run argv inside node i's namespace (ip netns exec
        execs it: the process keeps the pid Popen gives)."""
        return [IP, "netns", "exec", self.ns(i)] + list(argv)

    def cut(self, i, j):
        """Node i can no longer send to node j (a blackhole route in i's
        namespace). A TCP link is then dead both ways; a cut one way only
        differs in what each side's stack sees."""
        if (i, j) in self.cuts:
            return
        _ip("-n", self.ns(i), "route", "add", "blackhole", self.ip(j) + "/32")
        self.cuts.add((i, j))

    def cut_both(self, i, j):
        self.cut(i, j)
        self.cut(j, i)

    def partition(self, groups):
        """Cuts every link between two different groups (lists of ids);
        nodes in no group are cut from everyone."""
        where = {}
        for g, ids in enumerate(groups):
            for i in ids:
                where[i] = g
        for i in range(1, self.n + 1):
            for j in range(1, self.n + 1):
                if i != j and where.get(i, -i) != where.get(j, -j):
                    self.cut(i, j)

    def throttle(self, i, rate="512kbit", burst="8kb", latency="300ms"):
        """Node i's link becomes slow and lossy both ways: a token bucket
        (tc tbf; netem is not available here) on its side of the veth and
        on the bridge's, at rate, whose queue holds latency's worth of
        packets and drops the rest."""
        if i in self.slow:
            return
        args = ["root", "tbf", "rate", rate, "burst", burst, "latency",
                latency]
        _tc("-n", self.ns(i), "qdisc", "add", "dev", "eth0", *args)
        _tc("qdisc", "add", "dev", "%sv%d" % (self.tag, i), *args)
        self.slow.add(i)

    def heal(self):
        for i in sorted(self.slow):
            _tc("-n", self.ns(i), "qdisc", "del", "dev", "eth0", "root",
                check=False)
            _tc("qdisc", "del", "dev", "%sv%d" % (self.tag, i), "root",
                check=False)
        self.slow.clear()
        for i, j in sorted(self.cuts):
            _ip("-n", self.ns(i), "route", "del", "blackhole",
                self.ip(j) + "/32", check=False)
        self.cuts.clear()

    def _down(self):
        for i in range(1, self.n + 1):
            _ip("netns", "del", self.ns(i), check=False)
            _ip("link", "del", "%sv%d" % (self.tag, i), check=False)
        _ip("link", "del", self.bridge, check=False)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for i in range(1, self.n + 1):
            _kill_ns(self.ns(i))
        try:
            with host_network_lock(shared=False):
                self._down()
        except NetError:  # a browser held it too long: remove them anyway
            self._down()
        with _lock:
            if self in _open:
                _open.remove(self)


@atexit.register
def _close_all():
    for net in list(_open):
        try:
            net.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
