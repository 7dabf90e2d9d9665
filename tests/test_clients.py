"""Client-library interop: real beanstalkd clients against the server.

Each script in tests/clients/ drives one client library through the
protocol and asserts every result, printing "ok - NAME" / "not ok - NAME:
reason" per check and a final "N passed, M failed":

    beaneater   Ruby, Debian's ruby-beaneater
    pheanstalk  PHP, Debian's php-pda-pheanstalk (+ php-yaml)
    jackd       Node.js, npm jackd 2.2.2
    fivebeans   Node.js, npm fivebeans 1.5.0 (pipelines concurrent calls)
    telnet      a person typing into `nc -C` (netcat-openbsd)

Every script runs against a fresh ./rockstalkd and against a fresh
beanstalkd 1.12: both must pass, and the beanstalkd run shows that a
rockstalkd failure is the server's, not the test's. The Node.js packages
are installed from tests/clients/package-lock.json (`npm ci`) when
tests/clients/node_modules is missing. Run one script by hand with
`ruby tests/clients/beaneater_check.rb 127.0.0.1 11300` and so on.
"""
import fcntl
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENTS_DIR = os.path.join(HERE, "clients")
ROCKSTALKD = os.path.abspath(os.path.join(ROOT, os.environ.get("ROCKSTALKD", "rockstalkd")))

# name -> (interpreter, script, check count it must report)
CLIENTS = {
    "beaneater": ("ruby", "beaneater_check.rb", 21),
    "pheanstalk": ("php", "pheanstalk_check.php", 20),
    "jackd": ("node", "jackd_check.js", 22),
    "fivebeans": ("node", "fivebeans_check.js", 22),
    "telnet": (sys.executable, "telnet_session.py", 7),
}
RUN_TIMEOUT = 60  # seconds for one script run (about 8 s when all is well)
NODE_PACKAGES = ("jackd", "fivebeans", "js-yaml")


def _node_modules_ready():
    nm = os.path.join(CLIENTS_DIR, "node_modules")
    return all(os.path.isfile(os.path.join(nm, p, "package.json")) for p in NODE_PACKAGES)


@pytest.fixture(scope="session")
def node_modules():
    """Installs the Node.js clients from the lock file, once, if missing.
    Under a lock file in tests/clients: with pytest-xdist each worker has
    its own session, and two concurrent `npm ci` in one directory break
    each other."""
    with open(os.path.join(CLIENTS_DIR, ".npm-ci.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _npm_ci_if_missing()


def _npm_ci_if_missing():
    if _node_modules_ready():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm not found: run scripts/deps.sh (Node.js and npm are needed "
                    "for the jackd and fivebeans checks)")
    try:
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=CLIENTS_DIR,
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("npm ci in tests/clients took over 300 s")
    if r.returncode != 0 or not _node_modules_ready():
        pytest.fail("npm ci in tests/clients failed (exit %d):\n%s\n%s"
                    % (r.returncode, r.stdout, r.stderr))


def run_client(name, server):
    interp, script, count = CLIENTS[name]
    exe = interp if os.path.isabs(interp) else shutil.which(interp)
    if exe is None:
        pytest.fail("%s not found: run scripts/deps.sh to install the client test packages"
                    % interp)
    argv = [exe, os.path.join(CLIENTS_DIR, script), server.host, str(server.port)]
    env = dict(os.environ)
    env.pop("TOLERATE_BEANSTALKD_1_12_BUGS", None)
    if server.argv[0] != ROCKSTALKD:
        # The reference run tolerates beanstalkd 1.12's known idle-holder TTR
        # bug (the scripts mark it with a "# tolerated" note); rockstalkd
        # must expire on time.
        env["TOLERATE_BEANSTALKD_1_12_BUGS"] = "1"
    try:
        r = subprocess.run(argv, cwd=CLIENTS_DIR, capture_output=True, text=True,
                           timeout=RUN_TIMEOUT, errors="replace", env=env)
        out, err, code = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        pytest.fail("%s did not finish within %d s; output so far:\n%s\n%s"
                    % (script, RUN_TIMEOUT, text(e.stdout), text(e.stderr)))
    report = "%s against %s exited %d\n--- stdout\n%s--- stderr\n%s" % (
        script, os.path.basename(server.argv[0]), code, out, err)
    lines = out.splitlines()
    assert lines and lines[-1] == "%d passed, 0 failed" % count, report
    assert code == 0, report
    assert len([ln for ln in lines if re.match(r"ok - ", ln)]) == count, report


@pytest.fixture(params=["beanstalkd-1.12", "rockstalkd"])
def server(request):
    if request.param == "rockstalkd":
        if not os.access(ROCKSTALKD, os.X_OK):
            pytest.skip("%s does not exist yet (build it with make); the beanstalkd "
                        "1.12 half of this test still runs" % ROCKSTALKD)
        return request.getfixturevalue("rockstalkd")()
    return request.getfixturevalue("beanstalkd")()


@pytest.mark.parametrize("client", ["beaneater", "pheanstalk"])
def test_client(client, server):
    run_client(client, server)


@pytest.mark.parametrize("client", ["jackd", "fivebeans"])
def test_node_client(client, server, node_modules):
    run_client(client, server)


def test_telnet_session(server):
    if shutil.which("nc") is None:
        pytest.fail("nc not found: run scripts/deps.sh (netcat-openbsd)")
    run_client("telnet", server)


def test_fivebeans_over_tls(rockstalkd, node_modules, tmp_path):
    """A stock client library over TLS: the whole fivebeans check, every
    connection through a tls:// listener (fivebeans_check.js hands the
    library a TLS socket when BEANSTALK_TLS_CA is set; the server's
    certificate is verified)."""
    from cluster import make_certs
    from conftest import free_port
    certs = make_certs(str(tmp_path / "certs"), 1)
    port = free_port()
    rockstalkd("--listen", "tls://127.0.0.1:%d" % port, "--tls-cert",
               os.path.join(certs, "node1.pem"), "--tls-key",
               os.path.join(certs, "node1.key"))
    node = shutil.which("node")
    if node is None:
        pytest.fail("node not found: run scripts/deps.sh")
    env = dict(os.environ, BEANSTALK_TLS_CA=os.path.join(certs, "ca.pem"),
               BEANSTALK_TLS_NAME="rockstalk-node-1")
    env.pop("TOLERATE_BEANSTALKD_1_12_BUGS", None)
    r = subprocess.run([node, os.path.join(CLIENTS_DIR, "fivebeans_check.js"),
                        "127.0.0.1", str(port)], cwd=CLIENTS_DIR,
                       capture_output=True, text=True, timeout=RUN_TIMEOUT,
                       env=env)
    count = CLIENTS["fivebeans"][2]
    report = "exit %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr)
    assert r.stdout.splitlines()[-1:] == ["%d passed, 0 failed" % count], \
        report
    assert r.returncode == 0, report
