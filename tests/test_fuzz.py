"""Runs the libFuzzer targets of tests/fuzz/ (`make fuzz`) for a short while:
the command-line parser, the on-disk job record codec, the TLS server's
handshake, the HTTP API's own parsing and the multiplexed relay's framing
(every target the Makefile's FUZZ_TARGETS names), under ASan+UBSan, each
for 10 s from its seed corpus. Needs clang
with libFuzzer (Debian: clang, libclang-rt-14-dev); without them this test
fails, on purpose, so CI installs them rather than skipping the fuzzers.

    /usr/bin/python3 -m pytest -q tests/test_fuzz.py
    make fuzz FUZZ_SECONDS=300        # a longer run by hand
"""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = "clang libclang-rt-14-dev"


def libfuzzer_missing():
    """None if clang can build a libFuzzer binary, else why not."""
    cc = shutil.which("clang")
    if not cc:
        return "clang not found"
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "t.c")
        with open(src, "w") as f:
            f.write("#include <stddef.h>\n#include <stdint.h>\n"
                    "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)"
                    "{ (void)d; (void)n; return 0; }\n")
        r = subprocess.run(
            [cc, "-fsanitize=fuzzer,address,undefined", "-o",
             os.path.join(d, "t"), src],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if r.returncode != 0:
            return "clang -fsanitize=fuzzer failed:\n" + r.stdout.decode(
                "utf-8", "replace")[-2000:]
    return None


def fuzz_targets():
    """The targets `make fuzz` runs (the Makefile's FUZZ_TARGETS)."""
    with open(os.path.join(ROOT, "Makefile")) as f:
        m = re.search(r"^FUZZ_TARGETS\s*:=\s*(.+)$", f.read(), re.M)
    assert m, "no FUZZ_TARGETS in the Makefile"
    return m.group(1).split()


def test_fuzz_targets():
    why = libfuzzer_missing()
    if why:
        pytest.fail("libFuzzer is not available (%s); install the Debian "
                    "packages: apt-get install %s" % (why, PACKAGES),
                    pytrace=False)
    r = subprocess.run(["make", "-C", ROOT, "fuzz", "FUZZ_SECONDS=10"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=600)
    out = r.stdout.decode("utf-8", "replace")
    assert r.returncode == 0, "make fuzz failed:\n" + out[-6000:]
    runs = [int(n) for n in
            re.findall(r"stat::number_of_executed_units:\s*(\d+)", out)]
    targets = fuzz_targets()
    assert len(targets) >= 5, targets
    assert len(runs) == len(targets), (targets, out[-3000:])
    # each target must really have run (hundreds of thousands a second)
    assert min(runs) > 10000, runs
    print("fuzz executions per target:", runs)
