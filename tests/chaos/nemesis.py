"""The faults. A Fault is applied to a running cluster and later healed;
apply() returns the ids of the nodes left as a connected, running
majority (the side that must serve again within 5 s), or None when no
majority is left.

    NEMESES[name](rng, cluster, net, leader) -> Fault

Every choice (which node, which split) comes from rng, a random.Random
seeded by the round: the same seed gives the same schedule.
"""
import signal  # noqa: F401 (documentation: SIGSTOP/SIGCONT via nodes)


class Fault:
    name = "none"
    disk = False  # needs the nodes' data directories on tmpfs disks
    skew = False  # needs the nodes' clocks set apart (skews())

    def __init__(self, rng, cluster, net, leader):
        self.rng, self.c, self.net, self.leader = rng, cluster, net, leader
        self.n = cluster.n
        self.ids = list(range(1, self.n + 1))
        self.killed, self.paused = [], []

    def others(self, i):
        return [j for j in self.ids if j != i]

    def pick(self, k, among=None):
        return sorted(self.rng.sample(among or self.ids, k))

    def apply(self):
        raise NotImplementedError

    def heal(self):
        self.net.heal()
        for i in self.paused:
            self.c.node(i).resume()
        for i in self.killed:
            self.c.node(i).start()
        self.paused, self.killed = [], []

    def describe(self):
        return self.name

    # helpers for the subclasses
    def kill(self, ids):
        for i in ids:
            self.c.node(i).kill9()
        self.killed += ids

    def pause(self, ids):
        for i in ids:
            self.c.node(i).pause()
        self.paused += ids

    def majority(self, ids):
        return sorted(ids) if len(ids) > self.n // 2 else None


class PartitionLeader(Fault):
    name = "partition-leader"

    def apply(self):
        self.net.partition([[self.leader], self.others(self.leader)])
        return self.majority(self.others(self.leader))


class PartitionOne(Fault):
    name = "partition-one"

    def apply(self):
        self.v = self.rng.choice(self.ids)
        self.net.partition([[self.v], self.others(self.v)])
        return self.majority(self.others(self.v))

    def describe(self):
        return "%s(%d)" % (self.name, self.v)


class PartitionHalf(Fault):
    """Majority/minority at random (the leader on either side)."""
    name = "partition-half"

    def apply(self):
        self.minor = self.pick(self.n // 2)
        major = [i for i in self.ids if i not in self.minor]
        self.net.partition([self.minor, major])
        return self.majority(major)

    def describe(self):
        return "%s(%s)" % (self.name, self.minor)


class Bridge(Fault):
    """Two halves joined by one node that sees both (5 nodes: 2+1+2)."""
    name = "bridge"

    def apply(self):
        order = self.pick(self.n)
        self.rng.shuffle(order)
        h = self.n // 2
        self.a, self.b, self.mid = order[:h], order[h + 1:], order[h]
        for i in self.a:
            for j in self.b:
                self.net.cut_both(i, j)
        return None  # no fully connected majority in general

    def describe(self):
        return "%s(%s|%d|%s)" % (self.name, self.a, self.mid, self.b)


class Ring(Fault):
    """Majorities ring: every node sees a majority (itself and its two
    neighbours, 5 nodes), no two the same one."""
    name = "ring"

    def apply(self):
        order = self.pick(self.n)
        self.rng.shuffle(order)
        self.order = order
        k = len(order)
        for x in range(k):
            for y in range(k):
                d = min((x - y) % k, (y - x) % k)
                if d > 1:
                    self.net.cut(order[x], order[y])
        return None

    def describe(self):
        return "%s(%s)" % (self.name, self.order)


class OneWay(Fault):
    """The leader's packets to every other node are dropped (its
    namespace only); what others send it still arrives."""
    name = "oneway-leader"

    def apply(self):
        for j in self.others(self.leader):
            self.net.cut(self.leader, j)
        return self.majority(self.others(self.leader))


class OneWayIn(Fault):
    """Every other node drops what it sends to one node (a node that hears
    nobody but is heard)."""
    name = "oneway-in"

    def apply(self):
        self.v = self.rng.choice(self.ids)
        for j in self.others(self.v):
            self.net.cut(j, self.v)
        return self.majority(self.others(self.v))

    def describe(self):
        return "%s(%d)" % (self.name, self.v)


class PauseLeader(Fault):
    name = "pause-leader"

    def apply(self):
        self.pause([self.leader])
        return self.majority(self.others(self.leader))


class PauseMinority(Fault):
    name = "pause-minority"

    def apply(self):
        self.v = self.pick((self.n - 1) // 2)
        self.pause(self.v)
        return self.majority([i for i in self.ids if i not in self.v])

    def describe(self):
        return "%s(%s)" % (self.name, self.v)


class KillOne(Fault):
    name = "kill-one"

    def apply(self):
        self.v = self.rng.choice(self.ids)
        self.kill([self.v])
        return self.majority(self.others(self.v))

    def describe(self):
        return "%s(%d)" % (self.name, self.v)


class KillLeader(Fault):
    name = "kill-leader"

    def apply(self):
        self.kill([self.leader])
        return self.majority(self.others(self.leader))


class KillAll(Fault):
    name = "kill-all"

    def apply(self):
        self.kill(list(self.ids))
        return None


class PauseKill(Fault):
    """Pause the leader, kill one more node (Jepsen's pause-kill)."""
    name = "pause-kill"

    def apply(self):
        self.pause([self.leader])
        self.v = self.rng.choice(self.others(self.leader))
        self.kill([self.v])
        return self.majority([i for i in self.ids
                              if i not in (self.leader, self.v)])

    def describe(self):
        return "%s(%d,%d)" % (self.name, self.leader, self.v)


class PartitionKill(Fault):
    """Cut the leader off, then kill a node of the other side."""
    name = "partition-kill"

    def apply(self):
        rest = self.others(self.leader)
        self.net.partition([[self.leader], rest])
        self.v = self.rng.choice(rest)
        self.kill([self.v])
        return self.majority([i for i in rest if i != self.v])

    def describe(self):
        return "%s(%d,%d)" % (self.name, self.leader, self.v)


class SlowOne(Fault):
    """One node's link slow and lossy both ways (Net.throttle: 128 kbit/s
    to 2 Mbit/s, a 300 ms queue, drops beyond it), its peers' and its
    clients' traffic alike. Everyone stays connected: the cluster must go
    on serving."""
    name = "slow-one"

    def target(self):
        return self.rng.choice(self.ids)

    def apply(self):
        self.v = self.target()
        self.rate = self.rng.choice(["128kbit", "512kbit", "2mbit"])
        self.net.throttle(self.v, rate=self.rate)
        return list(self.ids)

    def describe(self):
        return "%s(%d,%s)" % (self.name, self.v, self.rate)


class SlowLeader(SlowOne):
    name = "slow-leader"

    def target(self):
        return self.leader


class SkewKillLeader(Fault):
    """The nodes' clocks set apart (skews(), given at their start: one
    right, one SKEW_S ahead, one SKEW_S behind, in an order drawn from the
    seed; put-unique keys kept DEDUP_S), then the leader killed: the new
    leader's clock differs from the old one's by SKEW_S or twice that,
    several times the dedup window and every delay the workload puts."""
    name = "skew-kill-leader"
    skew = True
    SKEW_S, DEDUP_S = 20, 5

    @classmethod
    def skews(cls, rng, n):
        """{node id: its clock's skew in ms}, drawn from rng."""
        ms = cls.SKEW_S * 1000
        sk = [0, ms, -ms, ms // 2, -ms // 2][:n]
        rng.shuffle(sk)
        return {i + 1: s for i, s in enumerate(sk)}

    def apply(self):
        self.kill([self.leader])
        return self.majority(self.others(self.leader))


class DiskFull(Fault):
    """Every free byte of one node's disk taken (its data directory, Raft
    log included, is on a tmpfs of its own: disk_mib): its next write
    fails, and a node whose write failed stops (fail-stop, PROTOCOL.md
    15.4). The heal frees the disk and starts the node again if it
    stopped."""
    name = "disk-full-one"
    disk = True

    def target(self):
        return self.rng.choice(self.ids)

    def apply(self):
        self.v = self.target()
        self.taken = self.c.node(self.v).fill_disk()
        return self.majority(self.others(self.v))

    def heal(self):
        nd = self.c.node(self.v)
        nd.unfill_disk()
        self.exited = None if nd.alive() else nd.proc.returncode
        if self.exited is not None:
            nd.start()
        super().heal()

    def describe(self):
        return "%s(%d)" % (self.name, self.v)


class DiskFullLeader(DiskFull):
    name = "disk-full-leader"

    def target(self):
        return self.leader


ALL = (PartitionLeader, PartitionOne, PartitionHalf, OneWay, OneWayIn,
       PauseLeader, PauseMinority, KillOne, KillLeader, KillAll, PauseKill,
       PartitionKill, Bridge, Ring, DiskFull, DiskFullLeader, SkewKillLeader,
       SlowOne, SlowLeader)
NEMESES = {f.name: f for f in ALL}
FIVE_ONLY = ("bridge", "ring")


def names(n):
    return [f.name for f in ALL if n >= 5 or f.name not in FIVE_ONLY]
