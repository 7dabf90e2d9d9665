"""The loop side is layered: no two modules of src/ include each other's
headers in a cycle (scripts/include-graph.py prints the layers)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "include-graph.py")


def run(folder):
    return subprocess.run([sys.executable, SCRIPT, folder],
                          capture_output=True, text=True)


def test_src_has_no_include_cycle():
    r = run(os.path.join(ROOT, "src"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no include cycle" in r.stdout


def test_a_cycle_is_found(tmp_path):
    """The check itself can fail: a.h includes b.h, b.c includes a.h."""
    (tmp_path / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "b.h").write_text("\n")
    (tmp_path / "b.c").write_text('#include "b.h"\n#include "a.h"\n')
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "include cycle: a -> b -> a" in r.stdout, r.stdout
