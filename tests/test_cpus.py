"""Thread placement (rockstalkd(1) --loop-cpus, --store-cpus, --cpus auto;
src/base/cpus.h, src/server/place.h): the loop thread and the store's
threads run on the CPUs given, RocksDB's own pool is left alone; bad lists
stop the start with a message; --cpus auto places the store's threads on
the CPUs that take the data directory's disk interrupts, read from a fake
sysfs and /proc (ROCKSTALKD_TEST_SYSROOT), and places nothing (one log line
why) when it cannot find them."""
import os
import subprocess

import pytest

from conftest import ROCKSTALKD, free_port, wait_listening

pytestmark = pytest.mark.not_via_follower("the process's threads")

ALLOWED = sorted(os.sched_getaffinity(0))
LO, HI = ALLOWED[0], ALLOWED[-1]
STORE_THREADS = ("rs-mutation", "rs-applier", "rs-bodyring", "rs-reader")


def threads(pid):
    """{tid: (name, Cpus_allowed_list)} of process pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        base = "/proc/%d/task/%s/" % (pid, tid)
        with open(base + "comm") as f:
            name = f.read().strip()
        with open(base + "status") as f:
            cpus = next(line.split()[1] for line in f
                        if line.startswith("Cpus_allowed_list:"))
        out[int(tid)] = (name, cpus)
    return out


def cpulist(cpus):
    """The kernel's list format of a sorted list of CPU numbers."""
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(parts)


class Daemon:
    def __init__(self, tmp_path, args, env=None):
        """Starts rockstalkd with args on tmp_path/data, its log in
        tmp_path/rockstalkd.log; env: more environment variables."""
        self.port = free_port()
        self.logpath = tmp_path / "rockstalkd.log"
        self.log = open(self.logpath, "wb")
        self.proc = subprocess.Popen(
            [ROCKSTALKD, "-l", "127.0.0.1", "-p", str(self.port), "-b",
             str(tmp_path / "data")] + args,
            stdout=self.log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **(env or {})))
        wait_listening(self.port, self.proc)

    def text(self):
        return self.logpath.read_text()

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(10) == 0
        self.log.close()


@pytest.fixture
def daemon(tmp_path):
    started = []

    def start(args, env=None, sub=""):
        d = Daemon(tmp_path / sub if sub else tmp_path, args, env)
        started.append(d)
        return d
    yield start
    for d in started:
        if d.proc.poll() is None:
            d.stop()


def check_placed(pid, loop, store):
    ts = threads(pid)
    assert ts[pid][1] == loop, ts
    names = {name: cpus for name, cpus in ts.values()}
    for name in STORE_THREADS:
        assert names[name] == store, (name, ts)
    syncers = [c for n, c in ts.values() if n.startswith("rs-sync-")]
    assert syncers and all(c == store for c in syncers), ts
    # RocksDB's pool started before: left where the system puts it
    pool = [c for n, c in ts.values() if n.startswith("rocksdb:")]
    assert pool and all(c == cpulist(ALLOWED) for c in pool), ts


def test_loop_and_store_cpus(daemon):
    d = daemon(["--loop-cpus", str(LO), "--store-cpus", str(HI)])
    check_placed(d.proc.pid, str(LO), str(HI))
    assert "the loop thread on CPU %d, the store's threads on %d" % (
        LO, HI) in d.text()
    if LO == 0:  # the same CPU for both
        (d.logpath.parent / "two").mkdir()
        d2 = daemon(["--loop-cpus", "0", "--store-cpus", "0"], sub="two")
        check_placed(d2.proc.pid, "0", "0")


@pytest.mark.parametrize("args,msg", [
    (["--loop-cpus", ""], "--loop-cpus: empty CPU list"),
    (["--store-cpus", "a"], "unexpected \"a\" at 1"),
    (["--store-cpus", "3-1"], "range 3-1 descends"),
    (["--loop-cpus", "0,,1"], "unexpected \",\" at 3"),
    (["--loop-cpus", "4096"], "CPU numbers go up to 1023"),
    (["--store-cpus", "0," * 200], "longer than 256 characters"),
    (["--store-cpus", str(HI + 1)], "CPU %d not available to this process "
     "(it may use %s)" % (HI + 1, cpulist(ALLOWED))),
    (["--cpus", "yes"], "--cpus: auto or off, not yes"),
])
def test_refused(tmp_path, args, msg):
    p = subprocess.run([ROCKSTALKD, "-l", "127.0.0.1", "-p",
                        str(free_port()), "-b", str(tmp_path)] + args,
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1
    assert msg in p.stderr, p.stderr
    assert not os.listdir(tmp_path)  # stopped before opening anything


def fake_root(tmp_path, data, irq_cpus):
    """A sysfs and /proc tree where data's device is virtio disk vda whose
    request interrupt (IRQ 36) goes to irq_cpus."""
    os.makedirs(data, exist_ok=True)
    st = os.stat(data)
    root = tmp_path / "root"
    vda = root / "sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda"
    vda.mkdir(parents=True)
    (root / "sys/dev/block").mkdir(parents=True)
    os.symlink("../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
               root / "sys/dev/block" / ("%d:%d" % (os.major(st.st_dev),
                                                    os.minor(st.st_dev))))
    (root / "proc/irq/36").mkdir(parents=True)
    (root / "proc/interrupts").write_text(
        "      CPU0\n 36:   7  PCI-MSIX-0000:00:02.0  1-edge  virtio1-req.0\n")
    (root / "proc/irq/36/effective_affinity_list").write_text(irq_cpus + "\n")
    return str(root)


@pytest.mark.skipif(len(ALLOWED) < 2, reason="needs two CPUs")
def test_auto_places_store_on_the_interrupt_cpu(daemon, tmp_path):
    root = fake_root(tmp_path, tmp_path / "data", str(HI))
    d = daemon(["--cpus", "auto"], {"ROCKSTALKD_TEST_SYSROOT": root})
    check_placed(d.proc.pid, cpulist(ALLOWED[:-1]), str(HI))
    assert "--cpus auto: the store's threads on CPU %d, the loop on %s " \
        "(interrupts of " % (HI, cpulist(ALLOWED[:-1])) in d.text()


def test_auto_places_nothing_when_it_cannot_tell(daemon, tmp_path):
    root = fake_root(tmp_path, tmp_path / "data", cpulist(ALLOWED))
    d = daemon(["--cpus", "auto"], {"ROCKSTALKD_TEST_SYSROOT": root})
    everyone = cpulist(ALLOWED)
    check_placed(d.proc.pid, everyone, everyone)
    why = ("the interrupts go to every CPU" if len(ALLOWED) > 1
           else "one CPU only")
    assert "--cpus auto: placing no thread: " in d.text()
    assert why in d.text()
    d.stop()
    # no such device in the tree at all
    empty = tmp_path / "empty"
    empty.mkdir()
    d = daemon(["--cpus", "auto"], {"ROCKSTALKD_TEST_SYSROOT": str(empty)})
    check_placed(d.proc.pid, everyone, everyone)
    assert "is not a block device" in d.text()


def test_help_names_the_flags():
    out = subprocess.run([ROCKSTALKD, "--help"], capture_output=True,
                         text=True, timeout=10).stdout
    for flag in ("--loop-cpus LIST", "--store-cpus LIST", "--cpus auto|off"):
        assert flag in out
