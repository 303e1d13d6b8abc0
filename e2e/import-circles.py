#!/usr/bin/env python3
"""Fails when two or more Rust files of one crate import each other in a circle.

Every crate target of the workspace (src/lib.rs, src/main.rs, src/bin/*, tests/*, benches/*,
examples/*) is read from its root through its `mod` declarations (`#[path]` included). A file
depends on another when it names an item of it: in a `use` tree, or in a path in its code
(`crate::x::f()`, `super::X`, `child::Y`). A path to an item that a module only imports or
re-exports is followed to the module that defines it, so `pub use` at a crate root or in a
folder's mod.rs is not a dependency of the files that name the item through it. Declaring a
module (`mod x;`) is not a dependency.

Usage: import-circles.py [--edges FILE] [ROOT]   (ROOT: the repository, by default this
script's parent folder). Prints each circle with the imports that make it; exit status 1 when
there is one. `--edges FILE` also prints what FILE depends on. `--self-test` checks the
checker on small made-up crates.
"""
import os
import re
import sys
import tempfile

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(src):
    """The source with comments, strings and char literals blanked (line numbers kept)."""
    out, i, n = [], 0, len(src)
    blank = lambda s: re.sub(r"[^\n]", " ", s)
    while i < n:
        c = src[i]
        word_before = i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(src[i:j]))
            i = j
            continue
        raw = re.match(r'b?r(#*)"', src[i : i + 20])
        if raw and not word_before:
            end = '"' + raw.group(1)
            j = src.find(end, i + len(raw.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(blank(src[i:j]))
            i = j
            continue
        if c == '"' or (src.startswith('b"', i) and not word_before):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(blank(src[i:j]))
            i = j
            continue
        if c == "'":
            ch = re.match(r"'(?:\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", src[i : i + 14])
            if ch:
                out.append(blank(ch.group(0)))
                i += len(ch.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def use_tree(text):
    """A `use` tree as (segments, name) pairs; name is None for a glob."""
    res = []

    def split_top(t):
        parts, depth, cur = [], 0, ""
        for ch in t:
            depth += (ch == "{") - (ch == "}")
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        return parts + ([cur] if cur.strip() else [])

    def walk(prefix, t):
        t = t.strip()
        if t.startswith("::"):
            t = t[2:]
        if not t:
            return
        brace = t.find("{")
        if brace >= 0:
            head = [s.strip() for s in t[:brace].split("::") if s.strip()]
            for part in split_top(t[brace + 1 : t.rfind("}")]):
                walk(prefix + head, part)
            return
        alias = None
        m = re.match(r"(.*)\bas\s+(" + IDENT + r")\s*$", t, re.S)
        if m:
            t, alias = m.group(1), m.group(2)
        segs = prefix + [s.strip() for s in t.split("::") if s.strip()]
        if segs and segs[-1] == "*":
            res.append((segs[:-1], None))
        elif segs:
            if segs[-1] == "self":
                segs = segs[:-1]
            if segs:
                res.append((segs, alias or segs[-1]))

    walk([], text)
    return res


class Crate:
    def __init__(self):
        self.modules = {}  # module path (tuple) -> file
        self.children = {}  # module path -> names of child modules
        self.uses = {}  # module path -> [(segments, name, file)]
        self.paths = []  # (file, module path, segments)

    def load(self, path, module, mod_rs):
        path = os.path.normpath(path)
        if not os.path.exists(path) or module in self.modules:
            return
        self.modules[module] = path
        self.children.setdefault(module, set())
        raw = open(path, encoding="utf-8").read()
        src = strip(raw)
        folder = os.path.dirname(path)
        child_folder = folder if mod_rs else os.path.join(folder, os.path.splitext(os.path.basename(path))[0])
        token = re.compile(
            r"(\{|\}|\bmod\s+(" + IDENT + r")\s*([;{])|\buse\s+([^;]*);"
            r"|(?<![A-Za-z0-9_:$])((?:" + IDENT + r")(?:\s*::\s*" + IDENT + r")+))"
        )
        inline, depth, current = [], 0, module
        for m in token.finditer(src):
            text = m.group(0)
            if text == "{":
                depth += 1
            elif text == "}":
                depth -= 1
                if inline and inline[-1][0] == depth:
                    inline.pop()
                    current = current[:-1]
            elif m.group(2):
                name = m.group(2)
                self.children.setdefault(current, set()).add(name)
                sub = current + (name,)
                if m.group(3) == "{":
                    inline.append((depth, name))
                    depth += 1
                    current = sub
                    self.modules[sub] = path
                    self.children.setdefault(sub, set())
                    continue
                attr = re.search(
                    r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s*)?$',
                    raw[max(0, m.start() - 200) : m.start()],
                )
                if attr:
                    self.load(os.path.join(folder, attr.group(1)), sub, False)
                    continue
                base = os.path.join(child_folder, *[n for _, n in inline])
                if os.path.exists(os.path.join(base, name + ".rs")):
                    self.load(os.path.join(base, name + ".rs"), sub, False)
                else:
                    self.load(os.path.join(base, name, "mod.rs"), sub, True)
            elif m.group(4) is not None:
                for segs, name in use_tree(m.group(4)):
                    self.uses.setdefault(current, []).append((segs, name, path))
            elif m.group(5):
                self.paths.append((path, current, [s.strip() for s in m.group(5).split("::")]))

    def absolute(self, module, segs, seen=None):
        """(rest, base module) of a path named in `module`; None for another crate's."""
        seen = seen if seen is not None else set()
        if not segs or (module, segs[0]) in seen:
            return None
        seen.add((module, segs[0]))
        first = segs[0]
        if first == "crate":
            return list(segs[1:]), ()
        if first == "self":
            return list(segs[1:]), module
        if first == "super":
            base, i = module, 0
            while i < len(segs) and segs[i] == "super":
                base, i = base[:-1], i + 1
            return list(segs[i:]), base
        if first in self.children.get(module, ()):
            return list(segs), module
        for use_segs, name, _ in self.uses.get(module, []):
            if name == first:
                found = self.absolute(module, use_segs, seen)
                return None if found is None else (found[0] + list(segs[1:]), found[1])
        return None

    def target(self, module, segs, seen=None):
        """The file that defines what the path names."""
        found = self.absolute(module, segs)
        if found is None:
            return None
        rest, mod = found
        i = 0
        while i < len(rest) and mod + (rest[i],) in self.modules:
            mod, i = mod + (rest[i],), i + 1
        if i < len(rest):
            seen = seen if seen is not None else set()
            if (mod, rest[i]) not in seen:
                seen.add((mod, rest[i]))
                for use_segs, name, _ in self.uses.get(mod, []):
                    if name == rest[i]:
                        followed = self.target(mod, use_segs + rest[i + 1 :], seen)
                        if followed is not None:
                            return followed
        return self.modules.get(mod)

    def edges(self):
        out = {}
        named = [(f, mod, segs, "use " + "::".join(segs)) for mod, lst in self.uses.items() for segs, _, f in lst]
        named += [(f, mod, segs, "::".join(segs)) for f, mod, segs in self.paths]
        for f, mod, segs, why in named:
            t = self.target(mod, segs)
            if t and t != f:
                out.setdefault(f, {}).setdefault(t, set()).add(why)
        return out


def roots(repo):
    for folder, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in ("target", ".git", "node_modules") and not d.startswith("."))
        if "Cargo.toml" not in files:
            continue
        for f in ("src/lib.rs", "src/main.rs"):
            if os.path.exists(os.path.join(folder, f)):
                yield os.path.join(folder, f)
        for sub in ("src/bin", "tests", "benches", "examples"):
            d = os.path.join(folder, sub)
            if not os.path.isdir(d):
                continue
            for f in sorted(os.listdir(d)):
                if f.endswith(".rs"):
                    yield os.path.join(d, f)
                elif os.path.exists(os.path.join(d, f, "main.rs")):
                    yield os.path.join(d, f, "main.rs")


def circles(edges):
    """Strongly connected sets of more than one file (Tarjan, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(edges) | {t for ts in edges.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def check(repo, show=None, out=sys.stdout):
    total, files = 0, 0
    for root in roots(repo):
        crate = Crate()
        crate.load(root, (), True)
        files += len(set(crate.modules.values()))
        edges = crate.edges()
        rel = lambda p: os.path.relpath(p, repo)
        if show:
            for t, why in sorted(edges.get(os.path.normpath(os.path.join(repo, show)), {}).items()):
                print(f"{show} -> {rel(t)}: {', '.join(sorted(why))}", file=out)
        for comp in circles({f: set(ts) for f, ts in edges.items()}):
            total += 1
            print("circle: " + " ".join(rel(f) for f in comp), file=out)
            for a in comp:
                for b in comp:
                    why = sorted(edges.get(a, {}).get(b, ()))
                    if why:
                        more = f" (+{len(why) - 4} more)" if len(why) > 4 else ""
                        print(f"    {rel(a)} -> {rel(b)}: {', '.join(why[:4])}{more}", file=out)
    return total, files


def self_test():
    cases = {
        # a and b name each other's items: a circle.
        "circle": ({"src/lib.rs": "mod a;\nmod b;\n", "src/a.rs": "use crate::b::B;\npub struct A;\n",
                    "src/b.rs": "pub struct B;\npub fn f() -> crate::a::A { crate::a::A }\n"}, 1),
        # The root re-exports an item that a child uses through it: followed to its file.
        "re-export": ({"src/lib.rs": "mod a;\nmod b;\npub use a::A;\nfn g() { b::f() }\n",
                       "src/a.rs": "pub struct A;\n", "src/b.rs": "use crate::A;\npub fn f() { let _ = A; }\n"}, 0),
        # A test file of a module uses its parent; the parent only declares it.
        "tests": ({"src/lib.rs": "pub mod p;\n", "src/p.rs": "pub fn f() {}\n#[cfg(test)]\nmod tests;\n",
                   "src/p/tests.rs": "use super::*;\n#[test]\nfn t() { f() }\n"}, 0),
        # Paths in comments and strings are not imports.
        "comments": ({"src/lib.rs": "mod a;\nmod b;\n", "src/a.rs": "// crate::b::B\npub struct A;\n",
                      "src/b.rs": "use crate::a::A;\nconst S: &str = \"crate::a::A\";\n"}, 0),
    }
    ok = True
    for name, (tree, want) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "Cargo.toml"), "w").write("[package]\nname = \"t\"\n")
            for f, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(d, f)), exist_ok=True)
                open(os.path.join(d, f), "w").write(text)
            got, _ = check(d, out=open(os.devnull, "w"))
            if got != want:
                ok = False
                print(f"self-test {name}: {got} circles, want {want}", file=sys.stderr)
    print("self-test: " + ("ok" if ok else "FAILED"), file=sys.stderr)
    return ok


def main(argv):
    if "--self-test" in argv:
        return 0 if self_test() else 1
    show = None
    if "--edges" in argv:
        show = argv[argv.index("--edges") + 1]
        argv = [a for a in argv if a not in ("--edges", show)]
    args = [a for a in argv if not a.startswith("--")]
    repo = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    total, files = check(os.path.normpath(repo), show)
    print(f"import circles: {total} in {files} files", file=sys.stderr)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
