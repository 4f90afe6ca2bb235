#!/usr/bin/env python3
"""Lists the import edges between sibling modules of a crate and reports every cycle.

An edge A -> B means code in module A (or below it) names something in its sibling B (or
below it) through `crate::`, `super::`, `self::` or a child module's name: in a `use`, a
path in code or a `pub use` that B's parent re-exports. Edges are taken at every level
(the crate's top-level modules, then the children of each module), so `report::html` ->
`report::heatmap` is an edge between siblings of `report`, and `gguf::split` ->
`model::Model` is an edge `gguf -> model` between the crate's top-level modules. Tests
(files named `tests.rs` or `*_tests.rs`, and items under `#[cfg(test)]`) and comments are
not code the crate depends on and are skipped.

With --drawing DOC, the core's top-level modules are also held to the layers drawn in
DOC's organ-core box (docs/architecture.md): each row names its modules as `name:`, and a
module may use only modules named in rows below its own.

Usage: scripts/module-cycles.py [--edges] [--drawing DOC] [SRC_DIR...]
  SRC_DIR          crate source roots (default: core/src native/src native-cli/src)
  --edges          also print every edge, with the first place that makes it (FILE:LINE)
  --drawing DOC    also check core/src's top-level edges against DOC's drawing
Exits 1 when a cycle exists or an edge goes up the drawing.
"""
import os
import re
import sys
from collections import defaultdict

CRATE_ROOTS = ("lib.rs", "main.rs")


def module_of(src, path):
    """The module path (tuple) of the file `path` under the crate root `src`."""
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel[-1] == "mod" or (len(rel) == 1 and rel[0] + ".rs" in CRATE_ROOTS):
        rel = rel[:-1]
    return tuple(rel)


def is_test_file(path):
    name = os.path.basename(path)
    return name == "tests.rs" or name.endswith("_tests.rs")


def clean(text):
    """`text` with comments, string and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:  # a char literal; otherwise a lifetime
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_items(code):
    """`code` with every item under `#[cfg(test)]` blanked."""
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]", code))):
        j = m.end()
        while j < len(code) and code[j] not in "{;":
            j += 1
        if j < len(code) and code[j] == "{":
            depth = 0
            while j < len(code):
                depth += {"{": 1, "}": -1}.get(code[j], 0)
                j += 1
                if depth == 0:
                    break
        code = code[: m.start()] + re.sub(r"[^\n]", " ", code[m.start() : j + 1]) + code[j + 1 :]
    return code


def expand_use(tree):
    """The paths a use tree names: `a::{b, c::{d as e, self}}` -> [a::b, a::c::d, a::c]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))

    def parse(s, i):  # the paths of the tree at s[i:], and where it ends
        prefix = ""
        while i < len(s) and s[i] not in ",}":
            if s[i] == "{":
                paths, i = [], i + 1
                while i < len(s) and s[i] != "}":
                    sub, i = parse(s, i)
                    paths += [prefix + p for p in sub]
                    i += s[i : i + 1] == ","
                return paths, i + 1
            prefix += s[i]
            i += 1
        return [prefix], i

    paths, _ = parse(tree, 0)
    return [re.sub(r"(::(\*|self))?$", "", p).rstrip(":") for p in paths if p.strip(":")]


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module -> (path, cleaned code)
        for dirpath, _, names in os.walk(src):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                if not name.endswith(".rs") or is_test_file(path):
                    continue
                if dirpath == src and name == "main.rs" and os.path.exists(os.path.join(src, "lib.rs")):
                    continue  # the binary: a crate of its own over the library
                with open(path, encoding="utf-8") as f:
                    self.files[module_of(src, path)] = (path, drop_test_items(clean(f.read())))
        self.modules = set(self.files)
        # `pub use x::y::Name;` in module M: (M, Name) -> the path it names.
        self.reexports = {}
        for module, (_, code) in self.files.items():
            for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
                for p in expand_use(m.group(1)):
                    segs = p.split("::")
                    self.reexports[(module, segs[-1])] = self.absolute(module, segs)

    def absolute(self, module, segs):
        """The absolute path (tuple) of `segs` named in `module`, or None (another crate)."""
        if not segs:
            return None
        if segs[0] == "crate":
            base, rest = (), segs[1:]
        elif segs[0] in ("self", "super"):
            base, rest = module, segs
            while rest and rest[0] in ("self", "super"):
                base = base if rest[0] == "self" else base[:-1]
                rest = rest[1:]
        elif module + (segs[0],) in self.modules:
            base, rest = module, segs
        else:
            return None
        return tuple(base) + tuple(rest)

    def target(self, path, seen=0):
        """The module `path` lands in: its longest module prefix, through re-exports."""
        for k in range(len(path), -1, -1):
            if path[:k] in self.modules:
                break
        module = path[:k]
        if k < len(path) and (module, path[k]) in self.reexports and seen < 8:
            again = self.reexports[(module, path[k])]
            if again is not None:
                return self.target(again + tuple(path[k + 1 :]), seen + 1)
        return module

    def edges(self):
        """(parent, a, b) -> first (file, line) where sibling a names sibling b."""
        found = {}
        for module, (path, code) in sorted(self.files.items()):
            refs = []
            for m in re.finditer(r"\buse\s+([^;]+);", code):
                line = code.count("\n", 0, m.start()) + 1
                refs += [(line, p.split("::")) for p in expand_use(m.group(1))]
            rest = re.sub(r"\buse\s+[^;]+;", lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
            for m in re.finditer(r"\b(?:crate|super|self)(?:\s*::\s*\w+)+", rest):
                line = code.count("\n", 0, m.start()) + 1
                refs.append((line, re.sub(r"\s+", "", m.group(0)).split("::")))
            for line, segs in refs:
                absolute = self.absolute(module, segs)
                if absolute is None:
                    continue
                target = self.target(absolute)
                k = 0
                while k < min(len(module), len(target)) and module[k] == target[k]:
                    k += 1
                if k < len(module) and k < len(target):
                    key = (module[:k], module[k], target[k])
                    found.setdefault(key, (os.path.relpath(path), line))
        return found


def cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def drawn_rows(doc):
    """Core module -> its row in the organ-core box of `doc` (0 = top), from `name:`."""
    rows, inside, row = {}, False, 0
    with open(doc, encoding="utf-8") as f:
        for line in f:
            if "| organ-core" in line:
                inside = True
            elif inside and re.match(r"\s*\+-+\+", line):
                break
            elif inside:
                for name in re.findall(r"\b([a-z_]+):", line):
                    rows.setdefault(name, row)
                row += 1
    return rows


def check_drawing(doc, found):
    """The core's top-level edges that do not go down `doc`'s drawing, printed; their count."""
    rows, bad = drawn_rows(doc), 0
    top = {(a, b): where for (parent, a, b), where in found.items() if parent == ()}
    for name in sorted({m for edge in top for m in edge} - set(rows)):
        bad += 1
        print(f"core module {name} is not drawn in {doc}'s organ-core box (as `{name}:`)")
    for (a, b), (f, line) in sorted(top.items()):
        if a in rows and b in rows and rows[b] <= rows[a]:
            bad += 1
            print(f"core: {a} uses {b}, drawn {'beside' if rows[a] == rows[b] else 'above'} it in {doc}   ({f}:{line})")
    return bad


def main(argv):
    show_edges = "--edges" in argv
    doc = argv[argv.index("--drawing") + 1] if "--drawing" in argv else None
    dirs = [a for i, a in enumerate(argv) if a not in ("--edges", "--drawing") and (i == 0 or argv[i - 1] != "--drawing")]
    dirs = dirs or ["core/src", "native/src", "native-cli/src"]
    bad = 0
    for src in dirs:
        found = Crate(src).edges()
        if doc and os.path.normpath(src) == os.path.normpath("core/src"):
            bad += check_drawing(doc, found)
        by_parent = defaultdict(lambda: defaultdict(set))
        for parent, a, b in found:
            by_parent[parent][a].add(b)
        for parent in sorted(by_parent):
            graph = by_parent[parent]
            where = "::".join(parent) or "crate root"
            if show_edges:
                for a in sorted(graph):
                    for b in sorted(graph[a]):
                        f, line = found[(parent, a, b)]
                        print(f"{src} [{where}] {a} -> {b}   ({f}:{line})")
            nodes = set(graph) | {b for bs in graph.values() for b in bs}
            for comp in cycles(nodes, graph):
                bad += 1
                print(f"cycle in {src} [{where}]: {' <-> '.join(comp)}")
                for a in comp:
                    for b in sorted(graph[a] & set(comp)):
                        f, line = found[(parent, a, b)]
                        print(f"  {a} -> {b}   ({f}:{line})")
    if bad:
        print(f"{bad} problem(s): cycles between sibling modules, or core edges against the drawing")
        return 1
    drawn = f"; core's imports follow {doc}'s drawing" if doc else ""
    print(f"no cycles between sibling modules in {', '.join(dirs)}{drawn}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
