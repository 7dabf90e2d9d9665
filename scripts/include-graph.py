#!/usr/bin/env python3
"""Prints the module graph of a C source folder and fails on a cycle.

A module is a .c/.h pair (or a lone .h or .c) named by its stem; an edge
m -> x is an `#include "x.h"` in m.c or m.h. Modules are printed by layer:
layer 0 includes nothing of ours, layer n only modules of lower layers.

    scripts/include-graph.py [DIR]      (default: src)

Exit status: 0 with no cycle, 1 (and the cycle printed) otherwise.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)\.h"', re.M)


def graph(folder):
    edges = {}
    for name in sorted(os.listdir(folder)):
        stem, ext = os.path.splitext(name)
        if ext not in (".c", ".h"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            deps = set(INCLUDE.findall(f.read()))
        edges.setdefault(stem, set()).update(d for d in deps if d != stem)
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


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "src"
    edges = graph(folder)
    cyc = find_cycle(edges)
    if cyc:
        print("include cycle: " + " -> ".join(cyc))
        return 1
    layer = layers(edges)
    for n in range(max(layer.values()) + 1):
        mods = [m for m in sorted(layer) if layer[m] == n]
        print("layer %d:" % n)
        for m in mods:
            deps = ", ".join(sorted(edges[m])) or "-"
            print("  %-10s -> %s" % (m, deps))
    print("no include cycle among %d modules" % len(edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
