#!/usr/bin/env python3
"""structure: the crate's structural numbers that issue 48 sets targets for, measured.

Run from anywhere: `scripts/structure.py` prints a short report, `--json` the same as JSON,
and `--check` also exits 1 when a target is missed (saying which); without it the exit status
is 0. Python 3 standard library only; nothing is built.

What is read: every src/**/*.rs except test code, that is files named `*_tests.rs` or
`tests.rs`, files under a `tests/` folder, files declared by a `#[cfg(test)] mod NAME;` (with
or without `#[path = ...]`) and the folders below them, and in the files kept every item or
statement under `#[cfg(test)]` (inline `mod tests { ... }`, test-only helpers). Comments
(`//`, nested `/* */`), string literals (normal, byte, raw `r#"..."#`) and char literals
(not lifetimes such as `'a`) are blanked before anything is matched, and braces are matched
on what is left.

The numbers:

- functions over 80 lines (target: at most 15, none in `ui` or `app`, that is src/ui.rs,
  src/ui/, src/app.rs, src/app/) and the longest function (target: at most 100 lines). A
  function is `fn NAME` with a body `{ ... }` (declarations ending in `;` are skipped); its
  length is the lines from the `fn` line to its closing brace, both included. A function
  inside another counts on its own and inside the other's length. Methods are named
  `Type::name` after their `impl` block.
- file-level import circles (target: 0). An edge goes from a file to the file a path in its
  code names: `crate::a::b::c`, and paths relative to the file's module (`self::`,
  `super::`), in `use` trees (`use crate::a::{b, c::d}` too) and in expressions. A path
  resolves to its longest prefix that is a module with a file: src/a/b.rs or
  src/a/b/mod.rs, or an inline `mod b { }` in src/a.rs (then src/a.rs). Edges from a file to
  itself and to or from src/lib.rs and src/main.rs are left out. The circles are the
  strongly connected components of more than one file (Tarjan's algorithm, iterative).
- the fields of the console's shared state, `pub struct UiState` in src/ui/state.rs (target:
  at most 16), all of them and the public ones (`pub` in any form).
- the files a new action verb and a new `simulate` policy touch, counted for existing ones:
  the non-test source files whose code names the verb's `Action` variant (`Action::Undrain`,
  or the variant in `enum Action`), and, with the command line and the console's keys, its
  `Command` (src/cli.rs) and `Intent` (src/ui/keymap.rs) variants; for a policy, the files
  naming `Policy::Adaptive` (or `Self::Adaptive` in `Policy`'s own file). This is an upper
  bound for a new verb or policy like them: each file names the variant because it does
  something for it, but some of it (a guard, a word in a message) a new one may not need.
  It is also a lower bound in one way: a backend that does two verbs with one function
  (drain and undrain) names neither, and text in strings is not counted.

At b63a883, the commit issue 48 counted, it gives the issue's own numbers: 39 functions over
80 lines (12 in ui), `UiState::apply` 173 lines, 46 fields of `UiState` (43 public), and the
five-file circle ui/state.rs, ui/actions.rs, ui/group.rs, ui/replay.rs, ui/views/advice.rs.

Approximations: a path to a name that a parent module re-exports (`crate::model::Fleet`)
resolves to the parent's file, not to the file that defines the name, so a circle through a
re-export is not seen; paths that start with a child module's bare name (`pub use
state::X;` in src/ui.rs) are not followed; macro bodies are read as plain code; an unknown
option exits 2.
"""

import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SRC = os.path.join(ROOT, "src")

LONG = 80
TARGETS = {
    "long_functions": 15,
    "long_functions_in_ui_app": 0,
    "longest_function": 100,
    "import_circles": 0,
    "uistate_fields": 16,
}
VERBS = ("Undrain", "Preempt")
VERB_ENUMS = ("Action", "Command", "Intent")
POLICY = "Adaptive"

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ---- blanking -------------------------------------------------------------------------------


def blank(text):
    """The text with comments, strings and char literals replaced by spaces (newlines kept),
    so offsets and line numbers stay those of the file."""
    out = list(text)
    n = len(text)
    i = 0

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    def ident_before(k):
        return k > 0 and (text[k - 1].isalnum() or text[k - 1] == "_")

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif c == "r" and not ident_before(i) or (
            c in "bc" and text.startswith("r", i + 1) and not ident_before(i)
        ):
            # raw string: r"..", r#".."#, br#".."#, cr".."; else an identifier (r#type too)
            k = i + (1 if c == "r" else 2)
            h = k
            while h < n and text[h] == "#":
                h += 1
            if h < n and text[h] == '"':
                end = text.find('"' + "#" * (h - k), h + 1)
                end = n if end < 0 else end + 1 + (h - k)
                wipe(i, end)
                i = end
            else:
                m = IDENT.match(text, i)
                i = m.end() if m else i + 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        elif c == "'":
            # a char literal ('x', '\n', '\u{..}', b'x'), else a lifetime or a label
            if text.startswith("\\", i + 1):
                j = i + 3
                while j < n and text[j] != "'" and text[j] != "\n":
                    j += 1
                wipe(i, j + 1)
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'" and text[i + 1] != "\n":
                wipe(i, i + 3)
                i += 3
            else:
                i += 1
        elif c.isalnum() or c == "_":
            m = IDENT.match(text, i)
            i = m.end() if m else i + 1
        else:
            i += 1
    return "".join(out)


def match_close(code, at):
    """The offset just past the brace, bracket or paren that closes the one at `at`."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    stack = []
    for j in range(at, len(code)):
        ch = code[j]
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}":
            if stack and stack[-1] == ch:
                stack.pop()
            if not stack:
                return j + 1
    return len(code)


def item_end(code, at):
    """From `at`, the end of one item or statement: past the first `;` outside brackets, or
    past the `{ ... }` that comes first."""
    depth = 0
    j = at
    n = len(code)
    while j < n:
        ch = code[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth <= 0 and ch == ";":
            return j + 1, False
        elif depth <= 0 and ch == "{":
            return match_close(code, j), True
        j += 1
    return n, False


def line_of(code, off):
    return code.count("\n", 0, off) + 1


# ---- the files ------------------------------------------------------------------------------

CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
ATTR = re.compile(r"\s*(#\s*\[)")
PATH_ATTR = re.compile(r"#\s*\[\s*path\s*=\s*")
MOD_DECL = re.compile(r"\s*(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;")


def strip_tests(raw, code, path):
    """`code` with every `#[cfg(test)]` item or statement blanked; and the files those
    declare as modules (`#[cfg(test)] mod x;`)."""
    out = list(code)
    test_files = []
    pos = 0
    while True:
        m = CFG_TEST.search(code, pos)
        if not m:
            break
        j = m.end()
        path_attr = None
        while True:
            a = ATTR.match(code, j)
            if not a:
                break
            end = match_close(code, a.end(1) - 1)
            pa = PATH_ATTR.match(code, a.start(1))
            if pa:
                q = raw.find('"', pa.end())
                r = raw.find('"', q + 1)
                path_attr = raw[q + 1 : r]
            j = end
        d = MOD_DECL.match(code, j)
        end, _ = item_end(code, j)
        if d:
            here = os.path.dirname(path)
            if path_attr:
                test_files.append(os.path.normpath(os.path.join(here, path_attr)))
            else:
                base = os.path.splitext(os.path.basename(path))[0]
                folder = here if base in ("mod", "lib", "main") else os.path.join(here, base)
                test_files.append(os.path.join(folder, d.group(1) + ".rs"))
                test_files.append(os.path.join(folder, d.group(1), "mod.rs"))
        for k in range(m.start(), end):
            if out[k] != "\n":
                out[k] = " "
        pos = end
    return "".join(out), test_files


def is_test_name(rel):
    parts = rel.split("/")
    return parts[-1].endswith("_tests.rs") or parts[-1] == "tests.rs" or "tests" in parts[:-1]


def load():
    """{relative path: (raw, code)} for the non-test source files, code blanked and without
    its test items; and the list of files left out as test code."""
    files = {}
    for dirpath, _, names in os.walk(SRC):
        for name in names:
            if name.endswith(".rs"):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, ROOT).replace(os.sep, "/")
                files[rel] = full
    kept, declared_tests = {}, set()
    for rel, full in sorted(files.items()):
        if is_test_name(rel):
            continue
        with open(full, encoding="utf-8") as f:
            raw = f.read()
        code, tests = strip_tests(raw, blank(raw), rel)
        kept[rel] = (raw, code)
        declared_tests.update(t.replace(os.sep, "/") for t in tests)
    # a test-only module's file, and everything in its folder
    test_dirs = {t[: -len("/mod.rs")] if t.endswith("/mod.rs") else t[:-3] for t in declared_tests}
    for rel in list(kept):
        if rel in declared_tests or any(rel.startswith(d + "/") for d in test_dirs):
            del kept[rel]
    left_out = sorted(set(files) - set(kept))
    return kept, left_out


# ---- functions ------------------------------------------------------------------------------

FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
IMPL = re.compile(r"\bimpl\b")


def impl_type(header):
    """`Type` of an impl header (`impl<T> Trait for Type<T> where ..`)."""
    h = re.sub(r"\bwhere\b.*", "", header, flags=re.S)
    # drop generic arguments, innermost first
    prev = None
    while prev != h:
        prev, h = h, re.sub(r"<[^<>]*>", "", h)
    h = h.strip()
    if h.startswith("impl"):
        h = h[4:]
    if re.search(r"\bfor\b", h):
        h = re.split(r"\bfor\b", h)[-1]
    names = IDENT.findall(h.replace("dyn", " "))
    return names[-1] if names else "?"


def functions(rel, code):
    impls = []
    for m in IMPL.finditer(code):
        # an impl block, not `impl Trait` in a type: the header runs to its `{`, with no `;`,
        # `(` of a call or `=` before it
        j = m.end()
        k = code.find("{", j)
        if k < 0:
            continue
        header = code[m.start() : k]
        if ";" in header:
            continue
        prefix = code[max(0, m.start() - 40) : m.start()]
        if re.search(r"(->|:|,|\(|<|&)\s*$", prefix):
            continue
        impls.append((k, match_close(code, k), impl_type(header)))
    found = []
    for m in FN.finditer(code):
        end, body = item_end(code, m.end())
        if not body:
            continue
        name = m.group(1)
        owners = [t for (a, b, t) in impls if a < m.start() < b]
        if owners:
            name = owners[-1] + "::" + name
        first = line_of(code, m.start())
        last = line_of(code, end - 1)
        found.append({"file": rel, "line": first, "name": name, "lines": last - first + 1})
    return found


def area(rel):
    """The top-level module a file belongs to: src/ui.rs and src/ui/x.rs are `ui`."""
    parts = rel.split("/")[1:]
    return parts[0][:-3] if len(parts) == 1 else parts[0]


# ---- imports --------------------------------------------------------------------------------

USE = re.compile(r"\buse\s+")
PATH = re.compile(r"(?<![A-Za-z0-9_:])(?:crate|self|super)(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+")
INLINE_MOD = re.compile(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")
VIS_IN = re.compile(r"\bpub\s*\(\s*in\s+[^)]*\)")


def module_of(rel):
    parts = rel.split("/")[1:]
    parts[-1] = parts[-1][:-3]
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts = parts[:-1]
    return tuple(parts)


def expand_use(tree):
    """The paths of one use tree, as lists of segments (`a::{b, c::d}` -> a::b, a::c::d; a glob
    or `self` names the module itself; `as NAME` is dropped)."""
    toks = re.findall(r"::|[{},*]|[A-Za-z_][A-Za-z0-9_]*", tree)

    def one(i, prefix):
        segs = list(prefix)
        while i < len(toks):
            t = toks[i]
            if t == "::":
                i += 1
            elif t == "{":
                return group(i + 1, segs)
            elif t == "*":
                return i + 1, [segs]
            elif t == "as":
                return i + 2, [segs]
            elif t in ",}":
                return i, [segs]
            else:
                segs.append(t)
                i += 1
        return i, [segs]

    def group(i, prefix):
        paths = []
        while i < len(toks) and toks[i] != "}":
            i, found = one(i, prefix)
            paths.extend(found)
            if i < len(toks) and toks[i] == ",":
                i += 1
        return i + 1, paths

    _, paths = one(0, [])
    return [p[:-1] if p and p[-1] == "self" else p for p in paths]


def absolute(segs, here):
    """Segments of a path written in module `here`, made absolute; None when it leaves the
    crate or is not a crate path."""
    if not segs:
        return None
    if segs[0] == "crate":
        return tuple(segs[1:])
    if segs[0] not in ("self", "super"):
        return None
    m = list(here)
    i = 0
    while i < len(segs) and segs[i] in ("self", "super"):
        if segs[i] == "super":
            if not m:
                return None
            m.pop()
        i += 1
    return tuple(m + segs[i:])


def import_graph(kept):
    modules = {}
    for rel in kept:
        modules[module_of(rel)] = rel
    inline = {}  # rel -> [(start, end, module path)]
    for rel, (_, code) in kept.items():
        spans = []
        for m in INLINE_MOD.finditer(code):
            k = m.end() - 1
            spans.append((k, match_close(code, k), m.group(1)))
        inline[rel] = spans
        for k, e, name in spans:
            outer = [s for s in spans if s[0] < k < s[1]]
            path = module_of(rel) + tuple(s[2] for s in outer) + (name,)
            modules.setdefault(path, rel)

    def module_at(rel, off):
        return module_of(rel) + tuple(s[2] for s in inline[rel] if s[0] < off < s[1])

    def resolve(path):
        for k in range(len(path), 0, -1):
            if path[:k] in modules:
                return modules[path[:k]]
        return None

    edges = {rel: set() for rel in kept}
    skip = ("src/lib.rs", "src/main.rs")
    for rel, (_, code) in kept.items():
        if rel in skip:
            continue
        code = VIS_IN.sub(lambda m: " " * len(m.group(0)), code)
        chars = list(code)
        targets = []
        for m in USE.finditer(code):
            end = code.find(";", m.end())
            if end < 0:
                continue
            for segs in expand_use(code[m.end() : end]):
                targets.append(absolute(segs, module_at(rel, m.start())))
            for k in range(m.start(), end):
                chars[k] = " "
        rest = "".join(chars)
        for m in PATH.finditer(rest):
            segs = [s.strip() for s in m.group(0).split("::")]
            targets.append(absolute(segs, module_at(rel, m.start())))
        for t in targets:
            if t is None:
                continue
            to = resolve(t)
            if to and to != rel and to not in skip:
                edges[rel].add(to)
    return edges


def circles(edges):
    """Strongly connected components of more than one node (Tarjan, without recursion)."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return sorted(comps, key=lambda c: (-len(c), c))


# ---- UiState --------------------------------------------------------------------------------


def struct_fields(code, name):
    m = re.search(r"\bstruct\s+" + name + r"\b[^{;]*\{", code)
    if not m:
        return None
    body = code[m.end() : match_close(code, m.end() - 1) - 1]
    fields, depth, cur = [], 0, ""
    i = 0
    while i < len(body):
        ch = body[i]
        if body.startswith("->", i):
            cur += "->"
            i += 2
            continue
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            fields.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    fields.append(cur)
    out = []
    for f in fields:
        f = re.sub(r"#\s*\[[^\]]*\]", " ", f).strip()
        if not f:
            continue
        vis = re.match(r"pub(\s*\([^)]*\))?\s", f)
        name_m = re.match(r"(?:pub(?:\s*\([^)]*\))?\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*:", f)
        out.append({"name": name_m.group(1) if name_m else f.split(":")[0].strip(),
                     "pub": re.sub(r"\s", "", vis.group(0)) if vis else ""})
    return out


# ---- files touched by a verb or a policy ----------------------------------------------------


def enum_bodies(code, name):
    spans = []
    for m in re.finditer(r"\b(?:enum|impl)\s+" + name + r"\b[^{;]*\{", code):
        spans.append((m.end(), match_close(code, m.end() - 1)))
    return spans


def names_variant(code, enum, variant):
    """Does the code name `enum::variant`, or the variant inside the enum's own definition or
    impl blocks (`Self::variant`, the bare variant)?"""
    if re.search(r"\b" + enum + r"\s*::\s*" + variant + r"\b", code):
        return True
    for a, b in enum_bodies(code, enum):
        if re.search(r"(?<![A-Za-z0-9_:])(?:Self\s*::\s*)?" + variant + r"\b", code[a:b]):
            return True
    return False


def touched(kept, enums, variant):
    out = []
    for rel, (_, code) in sorted(kept.items()):
        which = [e for e in enums if names_variant(code, e, variant)]
        if which:
            out.append({"file": rel, "names": which})
    return out


# ---- report ---------------------------------------------------------------------------------


def measure():
    kept, left_out = load()
    fns = [f for rel, (_, code) in sorted(kept.items()) for f in functions(rel, code)]
    long_fns = sorted((f for f in fns if f["lines"] > LONG), key=lambda f: (-f["lines"], f["file"], f["line"]))
    by_area = {}
    for f in long_fns:
        by_area[area(f["file"])] = by_area.get(area(f["file"]), 0) + 1
    longest = long_fns[0] if long_fns else max(fns, key=lambda f: f["lines"])
    edges = import_graph(kept)
    comps = circles(edges)
    with_state = kept.get("src/ui/state.rs")
    fields = struct_fields(with_state[1], "UiState") if with_state else None
    verbs = {}
    for v in VERBS:
        action = touched(kept, ("Action",), v)
        full = touched(kept, VERB_ENUMS, v)
        verbs[v] = {"action_files": len(action), "files": len(full), "list": full}
    policy = touched(kept, ("Policy",), POLICY)
    result = {
        "files_read": len(kept),
        "test_files_left_out": len(left_out),
        "functions": len(fns),
        "long_functions": len(long_fns),
        "long_functions_by_module": dict(sorted(by_area.items(), key=lambda kv: (-kv[1], kv[0]))),
        "long_functions_in_ui_app": by_area.get("ui", 0) + by_area.get("app", 0),
        "long_function_list": long_fns,
        "longest_function": longest,
        "import_edges": sum(len(v) for v in edges.values()),
        "import_circles": len(comps),
        "import_circle_list": comps,
        "uistate_fields": len(fields) if fields is not None else None,
        "uistate_pub_fields": sum(1 for f in fields if f["pub"]) if fields is not None else None,
        "uistate_field_list": fields,
        "verbs": verbs,
        "policy": {"name": POLICY, "files": len(policy), "list": [p["file"] for p in policy]},
    }
    missed = []
    for key, limit in TARGETS.items():
        value = result[key]["lines"] if key == "longest_function" else result[key]
        if value is None or value > limit:
            missed.append(f"{key} is {value}, target at most {limit}")
    result["targets"] = TARGETS
    result["missed"] = missed
    return result


def report(r):
    p = print
    p(f"structure of src/ ({r['files_read']} files read, {r['test_files_left_out']} test files left out; "
      f"comments and strings blanked, test items dropped)")
    p()
    lf = r["long_functions"]
    p(f"functions over {LONG} lines: {lf} of {r['functions']} (target <= {TARGETS['long_functions']}, none in ui/ or app/)")
    p("  by module: " + ", ".join(f"{k} {v}" for k, v in r["long_functions_by_module"].items()))
    for f in r["long_function_list"]:
        p(f"  {f['lines']:4d}  {f['file']}:{f['line']}  {f['name']}")
    lo = r["longest_function"]
    p(f"longest function: {lo['lines']} lines, {lo['file']}:{lo['line']} {lo['name']} "
      f"(target <= {TARGETS['longest_function']})")
    p()
    p(f"file-level import circles: {r['import_circles']} (target 0; {r['import_edges']} file edges)")
    for c in r["import_circle_list"]:
        p(f"  {len(c)} files: " + " ".join(c))
    p()
    if r["uistate_fields"] is None:
        p("UiState: not found in src/ui/state.rs")
    else:
        p(f"UiState fields: {r['uistate_fields']}, {r['uistate_pub_fields']} public "
          f"(target <= {TARGETS['uistate_fields']})")
    p()
    for v, d in r["verbs"].items():
        p(f"files naming the verb {v}: {d['files']} with its Command and Intent, "
          f"{d['action_files']} naming Action::{v}")
        for f in d["list"]:
            p(f"  {f['file']} ({', '.join(f['names'])})")
    p(f"files naming the policy {r['policy']['name']}: {r['policy']['files']}")
    for f in r["policy"]["list"]:
        p(f"  {f}")
    p()
    if r["missed"]:
        p("targets missed: " + "; ".join(r["missed"]))
    else:
        p("targets met")


def main(argv):
    args = set(argv[1:])
    unknown = args - {"--json", "--check", "-h", "--help"}
    if unknown or args & {"-h", "--help"}:
        print("usage: scripts/structure.py [--json] [--check]", file=sys.stderr)
        return 0 if not unknown else 2
    r = measure()
    if "--json" in args:
        json.dump(r, sys.stdout, indent=1)
        print()
    else:
        report(r)
    if "--check" in args and r["missed"]:
        for m in r["missed"]:
            print("structure: target missed: " + m, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
