"""The HTTP API's cluster (protocol/PROTOCOL.md 18.7 and 18.21): GET
/api/v1/cluster with each member's role and, on the leader, its match
index, lag and contact age (null on a follower, which knows no
progress), checked against rockstalk-cluster-status; POST
/api/v1/cluster/transfer?to=ID, the leadership hand-over of
rockstalk-cluster-transfer, its answer and every refusal (401, 403 for
an identity that is not a bare admin and for a cookie without its CSRF
token or a cross-origin request, 400, 404, 405, 409 on a follower and
standalone), then leadership moved, seen through the protocol. One
3-node cluster with an --auth-file for the module (about 10 s)."""
import time

import pytest

from cluster import Cluster
from conftest import wait_for
from httpclient import call, ok
from test_auth import TOKENS, Client, auth_text, write_auth

pytestmark = pytest.mark.not_via_follower("the HTTP server of each node")

ROOT = TOKENS["root"]  # a bare admin


def status_of(node):
    """rockstalk-cluster-status through node (relayed to the leader):
    (top-level fields, {voter id: its fields}), all strings."""
    c = Client(node, ROOT)
    try:
        ln, body = c.cmd("rockstalk-cluster-status")
    finally:
        c.close()
    assert ln.startswith("OK "), ln
    top, voters, cur = {}, {}, None
    for x in body.decode().splitlines():
        if x.startswith("- id: "):
            cur = voters.setdefault(int(x[6:]), {})
        elif x.startswith("  ") and ": " in x and cur is not None:
            k, v = x.strip().split(": ", 1)
            cur[k] = v
        elif ": " in x:
            k, v = x.split(": ", 1)
            top[k] = v
    return top, voters


def cluster_doc(node):
    return ok(node.metrics_port, "cluster", token=ROOT)


def transfer(node, query="", token=ROOT, **kw):
    return call(node.metrics_port, "cluster/transfer" + query, "POST",
                token=token, **kw)


def leading(c, nid):
    """Whether node nid leads, serves and its API says so."""
    if c.leader() != nid:
        return False
    try:
        d = cluster_doc(c.node(nid))
    except (AssertionError, OSError):
        return False
    return d["serving"] and d["leader"] == nid


@pytest.fixture(scope="module")
def clu(tmp_path_factory):
    base = tmp_path_factory.mktemp("httpcluster")
    p = write_auth(base / "auth", auth_text())
    c = Cluster(base / "c", flags=["--auth-file", p])  # mTLS: auth needs it
    try:
        lead = c.wait_leader()
        wait_for(lambda: leading(c, lead), timeout=15,
                 what="the leader's API")
        yield c
    finally:
        c.stop()


def wait_progress(c, lead):
    """The leader's document once every voter answered once."""
    doc = {}

    def known():
        doc.update(cluster_doc(c.node(lead)))
        return all(v["contact-ms"] is not None for v in doc["voters"])
    wait_for(known, timeout=10, what="every voter's contact age")
    return doc


def test_leader_document(clu):
    lead = clu.wait_leader()
    d = wait_progress(clu, lead)
    assert d["role"] == "leader" and d["leader"] == lead
    assert isinstance(d["applied-index"], int) and d["applied-index"] >= 1
    assert d["last-index"] >= d["commit-index"] >= 1
    assert [v["id"] for v in d["voters"]] == [1, 2, 3]
    for v in d["voters"]:
        assert v["role"] == ("leader" if v["id"] == lead else "follower")
        assert 0 <= v["match-index"] <= d["last-index"]
        assert v["lag"] == d["last-index"] - v["match-index"]
        assert v["contact-ms"] >= 0
        assert v["raft"].startswith("127.0.0.1:")
    # the leader itself: the age of the raft thread's view, a few ms
    assert next(v for v in d["voters"]
                if v["id"] == lead)["contact-ms"] < 1000
    # what rockstalk-cluster-status says of the same voters
    top, voters = status_of(clu.node(lead))
    assert int(top["leader"]) == lead and top["progress"] == "known"
    assert sorted(voters) == [1, 2, 3]
    for v in d["voters"]:
        s = voters[v["id"]]
        assert s["role"] == v["role"]
        assert s["raft-address"] == v["raft"]
        assert int(s["match-index"]) >= v["match-index"]  # a second later


def test_follower_document(clu):
    lead = clu.wait_leader()
    f = next(nd for nd in clu.nodes if nd.id != lead)
    d = cluster_doc(f)
    assert (d["role"], d["serving"], d["leader"]) == ("follower", False, lead)
    assert d["applied-index"] >= 1 and d["last-index"] >= 1
    for v in d["voters"]:  # a follower knows roles, not progress
        assert v["role"] == ("leader" if v["id"] == lead else "follower")
        assert (v["match-index"], v["lag"], v["contact-ms"]) == \
            (None, None, None)


def test_transfer_refusals(clu):
    lead = clu.wait_leader()
    ld = clu.node(lead)
    f = next(nd for nd in clu.nodes if nd.id != lead)
    other = next(nd for nd in clu.nodes if nd.id not in (lead, f.id))
    # authentication and access: a bare admin only
    st, hd, e = transfer(ld, "?to=%d" % f.id, token=None)
    assert st == 401 and "error" in e
    assert transfer(ld, "?to=%d" % f.id, token="no-such-token")[0] == 401
    for who in ("tadm", "insp", "prod"):
        st, _, e = transfer(ld, "?to=%d" % f.id, token=TOKENS[who])
        assert (st, e) == (403, {"error": "a leadership transfer needs a "
                                          "bare admin identity"}), who
    # a session cookie without its CSRF token
    st, hd, b = call(ld.metrics_port, "session", "POST",
                     data=b"token=" + ROOT.encode(),
                     headers={"Content-Type":
                              "application/x-www-form-urlencoded"})
    assert st == 200, b
    ck = {"Cookie": hd["Set-Cookie"].split(";")[0]}
    st, _, e = transfer(ld, "?to=%d" % f.id, token=None, headers=ck)
    assert (st, e) == (403, {"error": "csrf"})
    # bad ids, unknown voters, this leader itself, another method
    for q in ("?to=abc", "?to=-1", "?to=", "?to=1x",
              "?to=18446744073709551616"):
        st, _, e = transfer(ld, q)
        assert st == 400 and e["error"].startswith("to: "), q
    st, _, e = transfer(ld, "?to=99")
    assert (st, e) == (404, {"error": "no such voter"})
    st, _, e = transfer(ld, "?to=%d" % lead)
    assert (st, e) == (404, {"error": "that voter leads already"})
    st, hd, e = call(ld.metrics_port, "cluster/transfer?to=%d" % f.id,
                     token=ROOT)
    assert (st, e) == (405, {"error": "method not allowed"})
    # a follower does not lead: 409 naming the leader, whatever the id
    for q in ("", "?to=%d" % other.id, "?to=99"):
        st, _, e = transfer(f, q)
        assert (st, e) == (409, {"error": "this node does not lead",
                                 "leader": lead}), q
    # none of these moved the leadership
    time.sleep(0.3)
    assert clu.wait_leader() == lead


def test_transfer_moves_leadership(clu):
    lead = clu.wait_leader()
    ld = clu.node(lead)
    wait_progress(clu, lead)
    to = next(nd.id for nd in clu.nodes if nd.id != lead)
    st, _, b = transfer(ld, "?to=%d" % to)
    assert (st, b) == (200, {"ok": True, "to": to})
    wait_for(lambda: leading(clu, to), timeout=15, what="node %d leads" % to)
    top, voters = status_of(clu.node(to))
    assert (int(top["node-id"]), int(top["leader"])) == (to, to)
    assert voters[to]["role"] == "leader"
    assert voters[lead]["role"] == "follower"
    with open(ld.dir + ".log", "rb") as f:
        log = f.read().decode(errors="replace")
    assert "http: root asked node %d to lead" % to in log
    assert "handing the leadership to node %d (asked over HTTP)" % to in log
    # the old leader came back as a follower, and says so
    wait_for(lambda: ld.view() and ld.view()["leader"] == to, timeout=15,
             what="the old leader following")
    # without to=, the leader picks the most up-to-date other voter
    wait_progress(clu, to)
    st, _, b = transfer(clu.node(to), "?to=0")
    assert st == 200 and b["ok"] and b["to"] in (1, 2, 3) and b["to"] != to
    wait_for(lambda: leading(clu, b["to"]), timeout=15,
             what="node %d leads" % b["to"])
    top, _ = status_of(clu.node(b["to"]))
    assert int(top["leader"]) == b["to"]


def test_standalone(api):
    s, hp = api()
    wait_for(lambda: call(hp, "cluster")[0] == 200, what="the documents")
    assert call(hp, "cluster")[2] == {"mode": "standalone"}
    st, _, e = call(hp, "cluster/transfer?to=2", "POST")
    assert (st, e) == (409, {"error": "not a cluster node"})
    st, _, e = call(hp, "cluster/transfer", "POST")
    assert (st, e) == (409, {"error": "not a cluster node"})
    assert call(hp, "cluster/transfer?to=x", "POST")[0] == 400
    assert call(hp, "cluster/transfer", "DELETE")[0] == 405
    # the open API's Origin rule holds here too
    st, _, e = call(hp, "cluster/transfer", "POST",
                    headers={"Origin": "http://evil.example"})
    assert st == 403, e
    assert "cross-origin" in e["error"]
