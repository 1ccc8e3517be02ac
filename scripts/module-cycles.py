#!/usr/bin/env python3
"""Reports import cycles between the files of one Rust crate (STYLE.md: no cycles between files).

    scripts/module-cycles.py storage/src [--edges]

A file depends on another when it names an item of it: a `use` path, or a path in code
(`crate::reader::Value`, `super::word(..)`, `$crate::field::FieldKind` in a macro, `image::decode`
where `image` is a child module or a module imported by `use`). Names reached through a
re-export are followed to the file that defines them, so `crate::SampleValue` is a dependency on
the file defining `SampleValue`, not on lib.rs. Not edges: `mod x;` declarations, and a module's
`pub use` of its own descendants (a parent facade re-exporting its children), since neither
makes the parent depend on what the child does. Comments, doc links and strings are ignored.

The granularity is the file (inline `mod tests { .. }` blocks belong to their file). Prints the
strongly connected components of more than one file with the edges that close them, each with
the line that makes it; `--edges` prints the whole graph. Exits 1 when there is a cycle.
"""
import os
import re
import sys
from collections import defaultdict

CRATE_ROOTS = ("lib.rs", "main.rs")


def strip(text):
    """The source with comments, strings and char literals blanked, newlines kept (for line numbers)."""
    out, i, n = [], 0, len(text)
    char_lit = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]+\}|.)|[^\\'\n])'")
    raw_str = re.compile(r'b?r(#*)"')

    def blank(s):
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        prev_ident = i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
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
            out.append(blank(text[i:j]))
            i = j
        elif not prev_ident and raw_str.match(text, i):
            m = raw_str.match(text, i)
            end = text.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'" and char_lit.match(text, i):
            m = char_lit.match(text, i)
            out.append(blank(m.group(0)))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::d as e, self}` -> [(["a", "b"], "b"), (["a", "c", "d"], "e"), (["a"], "a")]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    pos = 0

    def parse(prefix):
        nonlocal pos
        results = []
        segs = list(prefix)
        while True:
            while pos < len(tree) and tree[pos] == " ":
                pos += 1
            if tree.startswith("::", pos):
                pos += 2
                if not segs:
                    segs.append("::")  # a leading `::`: an external crate
                continue
            if pos < len(tree) and tree[pos] == "{":
                pos += 1
                while True:
                    while pos < len(tree) and tree[pos] in " ,":
                        pos += 1
                    if pos >= len(tree) or tree[pos] == "}":
                        pos += 1
                        return results
                    before = pos
                    results.extend(parse(segs))
                    if pos == before:
                        pos += 1  # not a path (a macro's `$(..)` repetition): skip it
            if pos < len(tree) and tree[pos] == "*":
                pos += 1
                return results + [(segs + ["*"], None)]
            m = re.compile(r"\$?\w+").match(tree, pos)
            if not m:
                return results
            pos = m.end()
            seg = m.group(0)
            if seg == "self" and segs:
                name = segs[-1]
                results.append((list(segs), name))
                return results
            segs.append(seg)
            rest = tree[pos:].lstrip()
            if rest.startswith("::"):
                continue
            alias = re.match(r"as\s+(\w+)", rest)
            if alias:
                pos = len(tree) - len(rest) + alias.end()
            results.append((segs, alias.group(1) if alias else seg))
            return results

    return parse([])


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # rel path -> module path (tuple)
        for dirpath, _, names in os.walk(src):
            for name in names:
                if name.endswith(".rs"):
                    rel = os.path.relpath(os.path.join(dirpath, name), src)
                    self.files[rel] = self.module_of(rel)
        if "lib.rs" in self.files and "main.rs" in self.files:
            del self.files["main.rs"]  # the binary is its own crate; it reaches the library by name
        self.modules = {m: f for f, m in self.files.items()}  # module path -> file
        self.text = {f: strip(open(os.path.join(src, f), encoding="utf-8").read()) for f in self.files}
        self.inline = {}  # file -> [(start, end, module path)]
        for f, text in self.text.items():
            self.inline[f] = []
            for m in re.finditer(r"\bmod\s+(\w+)\s*\{", text):
                end = match_brace(text, m.end() - 1)
                self.inline[f].append((m.start(), end, m.group(1)))
        for f in self.files:
            for start, _, _ in self.inline[f]:
                self.modules.setdefault(self.module_at(f, start + 1), f)
        self.uses = {f: self.parse_uses(f) for f in self.files}
        self.reexports = {}  # (module, name) -> (file, path, line)
        for f, uses in self.uses.items():
            for is_pub, mod, path, name, line in uses:
                if is_pub and name:
                    self.reexports[(mod, name)] = (f, mod, path, line)

    @staticmethod
    def module_of(rel):
        parts = rel[:-3].split(os.sep)
        if parts[-1] == "mod" or (len(parts) == 1 and parts[0] + ".rs" in CRATE_ROOTS):
            parts = parts[:-1]
        return tuple(parts)

    def module_at(self, f, pos):
        """The module (inline ones included) at byte `pos` of file `f`."""
        mod = self.files[f]
        for start, end, name in sorted(self.inline[f]):
            if start < pos < end:
                mod = mod + (name,)
        return mod

    def parse_uses(self, f):
        text, uses = self.text[f], []
        for m in re.finditer(r"(\bpub\s*(?:\([^)]*\))?\s*)?\buse\s+([^;{}]*(?:\{[^;]*\})?[^;{}]*);", text):
            line = text.count("\n", 0, m.start()) + 1
            mod = self.module_at(f, m.start())
            for path, name in expand_use_tree(m.group(2)):
                uses.append((bool(m.group(1)), mod, path, name, line))
        return uses

    def resolve(self, mod, path, f, seen=()):
        """(module, item) that `path` written in module `mod` of file `f` names, or None (external)."""
        head, rest = path[0], path[1:]
        if head in ("crate", "$crate"):
            base = ()
        elif head == "super" or head == "self":
            base = mod
            while rest and head in ("super", "self"):
                base = base[:-1] if head == "super" else base
                head, rest = rest[0], rest[1:]
            if head not in ("super", "self"):
                rest = [head] + rest
        elif mod + (head,) in self.modules:
            base, rest = mod, path
        else:
            alias = self.alias(f, mod, head)
            if alias is None:
                return None
            base, rest = alias, rest
        for i, seg in enumerate(rest):
            if base + (seg,) in self.modules:
                base = base + (seg,)
            else:
                return self.follow(base, seg, seen)
        return base, None

    def alias(self, f, mod, name):
        """The module a `use` of file `f` brought into scope as `name` (`use crate::image::{self}`)."""
        for _, m, path, n, _ in self.uses[f]:
            if n == name and m == mod and path[0] != name:
                target = self.resolve(m, path, f)
                if target and target[1] is None:
                    return target[0]
        return None

    def follow(self, mod, item, seen):
        """Follows re-exports of `item` from `mod` to the module that defines it."""
        key = (mod, item)
        if key in self.reexports and key not in seen:
            f, m, path, _ = self.reexports[key]
            target = self.resolve(m, path, f, seen + (key,))
            if target:
                return target
        return mod, item

    def file_of(self, mod):
        while mod not in self.modules and mod:
            mod = mod[:-1]
        return self.modules.get(mod)

    def edges(self):
        """{(from file, to file): (line, path text)}: the first place each dependency shows."""
        edges = {}

        def add(f, target, line, what):
            if target is None:
                return
            to = self.file_of(target[0])
            if to and to != f and (f, to) not in edges:
                edges[(f, to)] = (line, what)

        for f, uses in self.uses.items():
            for is_pub, mod, path, name, line in uses:
                if path[-1] == "*":
                    target = self.resolve(mod, path[:-1], f) if len(path) > 1 else None
                else:
                    target = self.resolve(mod, path, f)
                if target is None:
                    continue
                defining = target[0]
                if is_pub and defining[: len(mod)] == mod and defining != mod:
                    continue  # a facade re-exporting its own descendant
                add(f, target, line, "use " + "::".join(path))
            text = re.sub(r"(\bpub\s*(?:\([^)]*\))?\s*)?\buse\s+[^;]*;", lambda m: blank_keep_lines(m.group(0)), self.text[f])
            for m in re.finditer(r"(?<![\w:$])(\$crate|[A-Za-z_]\w*)((?:\s*::\s*[A-Za-z_]\w*)+)", text):
                head = m.group(1)
                if head[0].isupper() or head in ("std", "core", "alloc"):
                    continue
                path = [head] + re.findall(r"[A-Za-z_]\w*", m.group(2))
                mod = self.module_at(f, m.start())
                line = text.count("\n", 0, m.start()) + 1
                add(f, self.resolve(mod, path, f), line, "::".join(path))
        return edges


def blank_keep_lines(s):
    return "".join(c if c == "\n" else " " for c in s)


def match_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def strongly_connected(nodes, succ):
    """Tarjan's algorithm, iterative: components in reverse topological order."""
    index, low, on_stack, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(sorted(comp))
    return comps


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1 or not os.path.isdir(args[0]):
        sys.exit(__doc__.split("\n\n")[1])
    crate = Crate(args[0])
    edges = crate.edges()
    succ = defaultdict(set)
    for a, b in edges:
        succ[a].add(b)
    if "--edges" in argv:
        for (a, b), (line, what) in sorted(edges.items()):
            print(f"{a} -> {b}  ({a}:{line}: {what})")
    cycles = [c for c in strongly_connected(sorted(crate.files), succ) if len(c) > 1]
    print(f"{args[0]}: {len(crate.files)} files, {len(edges)} edges, {len(cycles)} cycle(s)")
    for n, comp in enumerate(sorted(cycles), 1):
        print(f"cycle {n} ({len(comp)} files): {', '.join(comp)}")
        for (a, b), (line, what) in sorted(edges.items()):
            if a in comp and b in comp:
                print(f"  {a} -> {b}  ({a}:{line}: {what})")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
