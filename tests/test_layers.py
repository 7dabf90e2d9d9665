"""src/ is layered: folders stack in the order src/LAYERS gives, no module
includes a header of a folder above its own, and no two modules include
each other's headers in a cycle (scripts/include-graph.py prints the
folders and modules by layer)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "include-graph.py")
SRC = os.path.join(ROOT, "src")


def run(folder):
    return subprocess.run([sys.executable, SCRIPT, folder],
                          capture_output=True, text=True)


def plant(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_src_has_no_include_cycle_and_no_upward_include():
    r = run(SRC)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no include cycle, no upward include" in r.stdout
    with open(os.path.join(SRC, "LAYERS"), encoding="utf-8") as f:
        order = [ln.split("#")[0].strip() for ln in f
                 if ln.split("#")[0].strip()]
    # every folder of src/ is in LAYERS, printed in its order
    folders = sorted(d for d in os.listdir(SRC)
                     if os.path.isdir(os.path.join(SRC, d)))
    assert sorted(order) == folders
    at = [("\n" + r.stdout).index("\n%s/ (" % f) for f in order]
    assert at == sorted(at), r.stdout


def test_a_cycle_is_found(tmp_path):
    """The check itself can fail: a.h includes b.h, b.c includes a.h."""
    plant(tmp_path, {"a.h": '#include "b.h"\n', "b.h": "\n",
                     "b.c": '#include "b.h"\n#include "a.h"\n'})
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "include cycle: a -> b -> a" in r.stdout, r.stdout


def test_a_cycle_across_folders_is_found(tmp_path):
    """Paths from the root and paths beside the includer name one module."""
    plant(tmp_path, {"LAYERS": "low\nhigh\n",
                     "low/a.h": '#include "b.h"\n', "low/b.h": "\n",
                     "low/b.c": '#include "low/a.h"\n'})
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "include cycle: low/a -> low/b -> low/a" in r.stdout, r.stdout


def test_an_upward_include_is_found(tmp_path):
    """No cycle, but a lower folder includes a higher one's header."""
    plant(tmp_path, {"LAYERS": "# bottom up\nlow\nhigh  # top\n",
                     "low/a.h": "\n", "low/a.c": '#include "high/b.h"\n',
                     "high/b.h": "\n"})
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "upward include: low/a -> high/b (low is below high)" \
        in r.stdout, r.stdout
    # the same include downward passes
    plant(tmp_path, {"low/a.c": "\n", "high/b.c": '#include "low/a.h"\n'})
    r = run(str(tmp_path))
    assert r.returncode == 0, r.stdout
    assert "no include cycle, no upward include among 2 modules in 2 " \
        "folders" in r.stdout


def test_a_folder_outside_layers_is_found(tmp_path):
    plant(tmp_path, {"LAYERS": "low\n", "low/a.h": "\n",
                     "stray/c.c": '#include "low/a.h"\n'})
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "folder not in LAYERS: stray" in r.stdout, r.stdout


def test_a_private_header_belongs_to_its_module(tmp_path):
    """x_impl.h is module x's: x.c including it is no edge, y.c including
    it is an edge to x; x.c including y.h would then be a cycle."""
    files = {"x.h": "\n", "x_impl.h": '#include "x.h"\n',
             "x.c": '#include "x.h"\n#include "x_impl.h"\n',
             "y.c": '#include "x_impl.h"\n'}
    plant(tmp_path, files)
    r = run(str(tmp_path))
    assert r.returncode == 0, r.stdout
    assert "y                  -> x" in r.stdout, r.stdout
    plant(tmp_path, {"y.h": "\n",
                     "x.c": '#include "x_impl.h"\n#include "y.h"\n'})
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "include cycle: x -> y -> x" in r.stdout, r.stdout
