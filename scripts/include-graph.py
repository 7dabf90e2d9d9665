#!/usr/bin/env python3
"""Prints the layers of a C source tree and fails on a cycle or an upward
include.

A module is a .c/.h pair (or a lone .h or .c) named by its folder and stem
(`store/shard`), with its private header X_impl.h if it has one (a struct
shared by the .c files that implement X: raftnode_impl.h belongs to module
raftnode, and raftfsm.c, which includes it, sits above raftnode); an edge
m -> x is an `#include "x.h"` in m.c or m.h. An
include with a folder (`"store/shard.h"`) names the module from the tree's
root, one without (`"shard.h"`) a module in the includer's own folder, as
the C preprocessor looks first beside the including file. Headers of the
system (`<...>`) are not modules.

Two checks:
  1. no include cycle between modules;
  2. if DIR/LAYERS exists (one folder a line, bottom up; `#` starts a
     comment), no include from a folder into a folder above it, and no
     folder that LAYERS does not name.
Modules are printed folder by folder, bottom up, each with its layer in
the module graph (layer 0 includes nothing of ours, layer n only modules of
lower layers).

    scripts/include-graph.py [DIR]      (default: src)

Exit status: 0 when both checks pass, 1 (and what failed printed)
otherwise.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)\.h"', re.M)


def modules(root):
    """{module: path of each of its files}, module = 'folder/stem'."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(folder, root)
        for name in sorted(files):
            stem, ext = os.path.splitext(name)
            if ext not in (".c", ".h"):
                continue
            mod = stem if rel == "." else rel + "/" + stem
            mod = module_of(mod)
            found.setdefault(mod, []).append(os.path.join(folder, name))
    return found


def module_of(name):
    """The module a file stem or an include names: X_impl is X's."""
    return name[:-len("_impl")] if name.endswith("_impl") else name


def folder_of(mod):
    return mod.rsplit("/", 1)[0] if "/" in mod else "."


def graph(root):
    edges = {}
    for mod, paths in modules(root).items():
        deps = edges.setdefault(mod, set())
        for path in paths:
            with open(path, encoding="utf-8") as f:
                for inc in INCLUDE.findall(f.read()):
                    if "/" not in inc and folder_of(mod) != ".":
                        inc = folder_of(mod) + "/" + inc
                    inc = module_of(inc)
                    if inc != mod:
                        deps.add(inc)
    for deps in list(edges.values()):
        for d in deps:
            edges.setdefault(d, set())
    return edges


def find_cycle(edges):
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(edges[m]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state:
                cyc = visit(d)
                if cyc:
                    return cyc
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            cyc = visit(m)
            if cyc:
                return cyc
    return None


def layers(edges):
    layer = {}
    while len(layer) < len(edges):
        for m in sorted(edges):
            if m not in layer and all(d in layer for d in edges[m]):
                layer[m] = 1 + max((layer[d] for d in edges[m]), default=-1)
    return layer


def read_layers(root):
    """The folders of DIR/LAYERS, bottom up, or None without the file."""
    path = os.path.join(root, "LAYERS")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return [ln.split("#", 1)[0].strip() for ln in f
                if ln.split("#", 1)[0].strip()]


def folder_faults(edges, order):
    """Lines naming each module outside LAYERS and each upward include."""
    rank = {f: i for i, f in enumerate(order)}
    faults = []
    for f in sorted({folder_of(m) for m in edges} - set(rank)):
        faults.append("folder not in LAYERS: " + f)
    for m in sorted(edges):
        for d in sorted(edges[m]):
            fm, fd = folder_of(m), folder_of(d)
            if fm in rank and fd in rank and rank[fd] > rank[fm]:
                faults.append("upward include: %s -> %s (%s is below %s)"
                              % (m, d, fm, fd))
    return faults


def show(edges, order):
    layer = layers(edges)
    folders = order or sorted({folder_of(m) for m in edges})
    for f in folders:
        mods = sorted((m for m in edges if folder_of(m) == f),
                      key=lambda m: (layer[m], m))
        print("%s/ (%d modules)" % (f, len(mods)))
        for m in mods:
            deps = ", ".join(sorted(edges[m])) or "-"
            print("  %2d %-18s -> %s" % (layer[m], m, deps))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "src"
    edges = graph(root)
    cyc = find_cycle(edges)
    if cyc:
        print("include cycle: " + " -> ".join(cyc))
        return 1
    order = read_layers(root)
    faults = folder_faults(edges, order) if order is not None else []
    if faults:
        print("\n".join(faults))
        return 1
    show(edges, order)
    nfold = len({folder_of(m) for m in edges})
    if order is None:
        print("no include cycle among %d modules (no LAYERS: folders "
              "not checked)" % len(edges))
    else:
        print("no include cycle, no upward include among %d modules in %d "
              "folders" % (len(edges), nfold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
