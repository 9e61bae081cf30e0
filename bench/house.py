#!/usr/bin/env python3
"""The house's figures (issue 35): lines per crate without tests, the longest functions, and the
file-level import circles inside each crate. Reads `crates/*/src/**/*.rs` as text; a file's
tests are everything from its first `#[cfg(test)]` line at column 0. Run from the repository
root: `python3 bench/house.py`."""
import os, re, sys
from collections import defaultdict

def code_lines(path):
    lines = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("#[cfg(test)]"):
            break
        lines.append(line)
    return lines

def functions(lines):
    """(name, length) of each fn, by brace matching from its `fn` line (strings and comments
    are stripped crudely: good enough to rank)."""
    out = []
    fn_re = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")
    i = 0
    while i < len(lines):
        m = fn_re.match(lines[i])
        if not m:
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            text = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j].split("//")[0])
            text = re.sub(r"'(\\.|[^'\\])'", "''", text)
            if not started and ";" in text and "{" not in text:
                break  # a declaration without a body
            for ch in text:
                if ch == "{":
                    depth += 1
                    started = True
                elif ch == "}":
                    depth -= 1
            if started and depth <= 0:
                out.append((m.group(6), j - i + 1, i + 1))
                break
            j += 1
        i += 1
    return out

def modules(src):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                p = os.path.join(root, f)
                rel = os.path.relpath(p, src)[:-3]
                name = rel.replace(os.sep, "::")
                if name in ("lib", "main"):
                    continue
                mods[name] = p
    return mods

def circles(src):
    mods = modules(src)
    edges = defaultdict(set)
    for name, p in mods.items():
        text = "".join(l.split("//")[0] + "\n" for l in code_lines(p))
        for m in re.finditer(r"crate::((?:\w+::)*\w+)", text):
            parts = m.group(1).split("::")
            for k in range(len(parts), 0, -1):
                target = "::".join(parts[:k])
                if target in mods and target != name:
                    edges[name].add(target)
                    break
        for m in re.finditer(r"\bsuper::(\w+)", text):
            parent = name.rsplit("::", 1)[0] if "::" in name else None
            target = f"{parent}::{m.group(1)}" if parent else None
            if parent and parent in mods:
                edges[name].add(parent)
            if target in mods and target != name:
                edges[name].add(target)
    # Tarjan's strongly connected components.
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1:
                out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in list(mods):
        if v not in index:
            visit(v)
    return out

def main():
    crates = sorted(d for d in os.listdir("crates") if os.path.isdir(f"crates/{d}/src"))
    all_fns = []
    print("lines without tests, per crate")
    total = 0
    for c in crates:
        count = 0
        for name, p in sorted(modules(f"crates/{c}/src").items()) + [("lib", f"crates/{c}/src/lib.rs"), ("main", f"crates/{c}/src/main.rs")]:
            if not os.path.exists(p):
                continue
            lines = code_lines(p)
            count += len(lines)
            all_fns += [(length, f"{p}:{line} {fn}") for fn, length, line in functions(lines)]
        total += count
        print(f"  {c:14} {count:6}")
    print(f"  {'total':14} {total:6}")
    all_fns.sort(reverse=True)
    print(f"functions over 80 lines: {sum(1 for l, _ in all_fns if l > 80)}, over 150: "
          f"{sum(1 for l, _ in all_fns if l > 150)}, over 200: {sum(1 for l, _ in all_fns if l > 200)}")
    for length, where in [f for f in all_fns if f[0] > 200] or all_fns[:8]:
        print(f"  {length:5}  {where}")
    print("import circles inside a crate (files that reach each other through crate:: paths)")
    for c in crates:
        for comp in circles(f"crates/{c}/src"):
            print(f"  {c}: {len(comp)} files: {', '.join(comp)}")

main()
