"""The checkers: what a history (workload.History.ops, after the heal and
a final drain) must satisfy. Each returns a list of violations (strings);
check() runs them all. Each is named in PROTOCOL.md 15.7.

    lost          every acknowledged put (INSERTED) was deleted: DELETED,
                  or a delete without a reply (maybe done)
    stale         no RESERVED/FOUND of a job from a request sent after its
                  DELETED was received
    double_delete no two DELETED for one id
    unexpected    every delivered body was sent by someone
    one_to_one    no body under two ids (a put-unique retried inserts
                  once), no id under two bodies
    early         no job put with a delay is reserved (but by the final
                  drain, which kicks) before the delay has passed since its
                  put was sent, less EARLY_TOL_S
"""
import collections


def lost(ops):
    acked = {o["id"]: o for o in ops
             if o["op"] == "put" and o["reply"] == "INSERTED"}
    gone = {o["id"] for o in ops if o["op"] == "delete" and
            o["reply"] in ("DELETED", None)}
    return ["lost: job %d (%r) acknowledged at %.3f by node %d, never "
            "deleted nor drained" % (i, o["body"], o["t1"], o["node"])
            for i, o in sorted(acked.items()) if i not in gone]


def stale(ops):
    deleted = {}
    for o in ops:
        if o["op"] == "delete" and o["reply"] == "DELETED":
            deleted[o["id"]] = min(o["t1"], deleted.get(o["id"], o["t1"]))
    out = []
    for o in ops:
        if o["reply"] in ("RESERVED", "FOUND") and o.get("id") in deleted:
            t = deleted[o["id"]]
            if o["t0"] > t:
                out.append("stale: %s of job %d by node %d sent %.3f s "
                           "after its DELETED was received" %
                           (o["reply"], o["id"], o["node"], o["t0"] - t))
    return out


def double_delete(ops):
    n = collections.Counter(o["id"] for o in ops
                            if o["op"] == "delete" and o["reply"] == "DELETED")
    return ["double delete: job %d DELETED %d times" % (i, k)
            for i, k in sorted(n.items()) if k > 1]


def unexpected(ops):
    sent = {o["body"] for o in ops if o["op"] == "put"}
    return ["unexpected: job %d delivered %r, which nobody sent" %
            (o["id"], o["body"]) for o in ops
            if o["reply"] in ("RESERVED", "FOUND") and
            o.get("body") not in sent]


def one_to_one(ops):
    ids, bodies = collections.defaultdict(set), collections.defaultdict(set)
    for o in ops:
        if (o["op"] == "put" and o["reply"] == "INSERTED") or \
                o["reply"] in ("RESERVED", "FOUND"):
            if o.get("body") is None:
                continue
            ids[o["body"]].add(o["id"])
            bodies[o["id"]].add(o["body"])
    out = ["duplicate: body %r under ids %s" % (b, sorted(s))
           for b, s in sorted(ids.items()) if len(s) > 1]
    out += ["mixed: id %d under bodies %s" % (i, sorted(s))
            for i, s in sorted(bodies.items()) if len(s) > 1]
    return out


EARLY_TOL_S = 0.5  # the clock estimate's error and the timers' slack


def early(ops):
    due = {o["id"]: o["t0"] + o["delay"] for o in ops
           if o["op"] == "put" and o["reply"] == "INSERTED" and
           o.get("delay")}
    return ["early: job %d reserved by node %d %.2f s before its delay "
            "was over" % (o["id"], o["node"], due[o["id"]] - o["t1"])
            for o in ops if o["reply"] == "RESERVED" and o["p"] != "drain"
            and o.get("id") in due and o["t1"] < due[o["id"]] - EARLY_TOL_S]


def crashes(ops):
    return ["workload error: %s" % o["reply"] for o in ops
            if o["op"] == "crash"]


CHECKS = (lost, stale, double_delete, unexpected, one_to_one, early,
          crashes)


def check(ops):
    out = []
    for f in CHECKS:
        out += f(ops)
    return out
