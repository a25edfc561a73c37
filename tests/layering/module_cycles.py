#!/usr/bin/env python3
"""Import cycles between the modules of the library crates (CI runs this after clippy).

A module "uses" another when its non-test source names it through `crate::`, `super::` or
`self::` paths or `use` groups (comments are ignored; a child's use of its ancestors is not
counted: a parent declares its children). Cycles are found as strongly connected components.

The rule: silt-bson, silt-wire, silt-query and silt-collection have none. In silt-storage no
cycle passes through the tree or format modules, and the one cycle allowed is the engine's
core (the environment, its dictionaries, transactions, the write path, bulk loading and the
tree's I/O side, which hold references to one another by design); a module joining it, or a
new cycle, fails. Exit status 1 names the cycle.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates")
ACYCLIC = ["silt-bson", "silt-wire", "silt-query", "silt-collection"]
STORAGE_CORE = {"bulk", "dict", "env", "tree_io", "txn", "write"}


def modules(src_dir):
    out = {}
    for dirpath, _, names in os.walk(src_dir):
        for n in names:
            if not n.endswith(".rs") or n == "tests.rs" or n.startswith("tests_"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, n), src_dir)[:-3]
            if rel.endswith("/mod"):
                rel = rel[:-4]
            mod = "" if rel in ("lib", "main") else rel.replace("/", "::")
            out[mod] = os.path.join(dirpath, n)
    return out


def edges_of(mods):
    names = set(mods)

    def resolve(path):
        parts = path.split("::")
        for i in range(len(parts), 0, -1):
            m = "::".join(parts[:i])
            if m in names:
                return m
        return None

    edges = {m: set() for m in mods}
    for m, path in mods.items():
        src = open(path, encoding="utf-8").read()
        src = re.split(r"#\[cfg\(test\)\]\s*mod tests", src)[0]
        src = re.sub(r"//[^\n]*", "", src)
        parent = m.rsplit("::", 1)[0] if "::" in m else ""

        def add(full):
            t = resolve(full)
            if t and t != m and not m.startswith(t + "::"):
                edges[m].add(t)

        for hit in re.finditer(r"\b(crate|super|self)((?:::\w+)+)", src):
            base, rest = hit.group(1), hit.group(2)[2:]
            prefix = {"crate": "", "super": parent, "self": m}[base]
            add(f"{prefix}::{rest}" if prefix else rest)
        for hit in re.finditer(r"use (crate|super)::\{([^}]*)\}", src):
            prefix = "" if hit.group(1) == "crate" else parent
            for name in re.split(r"[,\s]+", hit.group(2)):
                if name:
                    add(f"{prefix}::{name}" if prefix else name)
    return edges


def cycles(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def main():
    bad = []
    for crate in ACYCLIC + ["silt-storage"]:
        edges = edges_of(modules(os.path.join(ROOT, crate, "src")))
        for comp in cycles(edges):
            if crate == "silt-storage" and set(comp) <= STORAGE_CORE:
                continue
            detail = "; ".join(f"{a} -> {', '.join(sorted(edges[a] & set(comp)))}" for a in comp)
            bad.append(f"{crate}: import cycle through {', '.join(comp)} ({detail})")
    for line in bad:
        print(line)
    if bad:
        sys.exit(1)
    print("module cycles: none outside silt-storage's engine core")


if __name__ == "__main__":
    main()
