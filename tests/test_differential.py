"""Differential protocol test: every exchange file in protocol/exchanges/
is replayed against a fresh Debian beanstalkd 1.12 (the reference) and
against a fresh rockstalkd. Both must match every expected byte, so any
difference between the two servers fails one of the two halves.

    /usr/bin/python3 -m pytest -q tests/test_differential.py
    /usr/bin/python3 -m pytest -q tests/test_differential.py -k reserve

The exchange format is described in protocol/exchanges/README.md; the
replayer is tests/replay.py (also a CLI).
"""
import glob
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replay  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXCHANGE_DIR = os.path.join(ROOT, "protocol", "exchanges")
EXCHANGES = sorted(glob.glob(os.path.join(EXCHANGE_DIR, "*.txt")))
# The same binary the rockstalkd fixture in conftest.py starts.
ROCKSTALKD = os.path.abspath(
    os.path.join(ROOT, os.environ.get("ROCKSTALKD", "rockstalkd")))


def _name(path):
    return os.path.basename(path)


def _replay(server, path):
    mismatches = replay.run_file(path, server.host, server.port)
    assert not mismatches, "%s against %s:\n%s" % (
        _name(path), server.argv[0], "\n".join(str(m) for m in mismatches))


def test_exchange_files_exist_and_parse():
    assert EXCHANGES, "no exchange files in %s" % EXCHANGE_DIR
    for path in EXCHANGES:
        steps = replay.parse_file(path)
        assert steps, "%s has no steps" % path
        assert any(s.op in ("expect", "match", "eof") for s in steps), \
            "%s checks nothing" % path


@pytest.mark.parametrize("path", EXCHANGES, ids=_name)
def test_beanstalkd(beanstalkd, path):
    """The exchanges are right: the reference server passes them."""
    _replay(beanstalkd(), path)


@pytest.mark.parametrize("path", EXCHANGES, ids=_name)
def test_rockstalkd(rockstalkd, path):
    """rockstalkd answers byte for byte like beanstalkd 1.12."""
    if not os.path.exists(ROCKSTALKD):
        pytest.skip("rockstalkd binary not built (%s does not exist)" %
                    ROCKSTALKD)
    _replay(rockstalkd(), path)


# The replayer must fail when the server is wrong, and fail quickly.
SELF_TEST = r"""
1> list-tube-used\r\n
1< USING nope\r\n
1> list-tube-used\r\n
1~ USING [0-9]+\r\n
1> reserve-with-timeout 0\r\n
1 silent 0.2
1> list-tube-used\r\n
1 eof
2> list-tube-used\r\n
2< USING default\r\nEXTRA\r\n
3> list-tube-used\r\n
"""


def test_replay_reports_mismatches(beanstalkd):
    import time
    s = beanstalkd()
    steps = replay.parse_text(SELF_TEST, "self-test")
    t0 = time.monotonic()
    ms = replay.run_steps(steps, s.host, s.port, timeout=1.0,
                          max_mismatches=0, path="self-test")
    elapsed = time.monotonic() - t0
    got = sorted((m.lineno, m.conn) for m in ms)
    # 3: wrong bytes; 5: regex; 7: a reply during silence; 9: no EOF;
    # 11: missing bytes (timeout); the end check: 3's unread reply.
    assert got == [(3, "1"), (5, "1"), (7, "1"), (9, "1"), (11, "2"),
                   (12, "3")], "\n".join(map(str, ms))
    assert elapsed < 6, "replayer too slow to fail: %.1f s" % elapsed
