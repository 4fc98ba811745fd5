#!/usr/bin/env python3
"""Counts railyard-core's public functions and methods and how many carry a
runnable example (a Rust code block in their own doc comment, not a module
example), from rustdoc's JSON output (a nightly rustdoc feature):

  CARGO_TARGET_DIR=target/doc-json cargo +nightly rustdoc -p railyard-core \
      --features std,peer-feedback -- -Z unstable-options --output-format json
  python3 scripts/doc-examples.py target/doc-json/doc/railyard_core.json [--missing | --list]

Counted: free functions and inherent methods reachable from the crate root
(through public modules and re-exports) and the methods declared by its
public traits; trait implementations are not counted. `--missing` lists
the ones without an example. Not part of CI (it needs a nightly rustdoc).
"""
import json, re, sys

FENCE = re.compile(r"^\s*```(.*)$", re.M)
NOT_RUST = {"text", "sh", "bash", "c", "cpp", "c++", "json", "toml", "console", "ignore", "python"}


def has_example(docs):
    if not docs:
        return False
    tags = FENCE.findall(docs)
    # Fences alternate open/close; the openers are every other one.
    for info in tags[0::2]:
        attrs = {a.strip() for a in info.split(",") if a.strip()}
        if not attrs & NOT_RUST:
            return True
    return False


def main():
    data = json.load(open(sys.argv[1]))
    index = data["index"]
    root = data["root"]
    fns = {}  # id -> path
    seen = set()

    def public(it):
        return it.get("visibility") == "public"

    def visit(iid, path):
        iid = str(iid)
        if iid in seen or iid not in index:
            return
        seen.add(iid)
        it = index[iid]
        inner = it["inner"]
        kind = next(iter(inner))
        name = it.get("name") or ""
        if kind == "module":
            for c in inner["module"]["items"]:
                ci = index.get(str(c))
                if ci and (public(ci) or next(iter(ci["inner"])) == "use"):
                    visit(c, path + [ci.get("name") or ""])
        elif kind == "use":
            u = inner["use"]
            if u.get("id") is not None and public(it):
                tgt = index.get(str(u["id"]))
                if tgt is not None:
                    visit(u["id"], path[:-1] + [u["name"]])
        elif kind == "function":
            fns[iid] = "::".join(path)
        elif kind in ("struct", "enum", "union"):
            for imp in inner[kind]["impls"]:
                ii = index.get(str(imp))
                if not ii:
                    continue
                im = ii["inner"]["impl"]
                if im.get("trait") is not None or im.get("is_synthetic") or im.get("blanket_impl"):
                    continue
                for m in im["items"]:
                    mi = index.get(str(m))
                    if mi and public(mi) and "function" in mi["inner"]:
                        fns[str(m)] = "::".join(path + [mi["name"]])
        elif kind == "trait":
            for m in inner["trait"]["items"]:
                mi = index.get(str(m))
                if mi and "function" in mi["inner"]:
                    fns[str(m)] = "::".join(path + [mi["name"]])

    visit(root, ["railyard_core"])
    rows = sorted((p, has_example(index[i].get("docs"))) for i, p in fns.items())
    with_ex = sum(1 for _, e in rows if e)
    if "--list" in sys.argv:
        for p, e in rows:
            print(("x " if e else "  ") + p)
    if "--missing" in sys.argv:
        for p, e in rows:
            if not e:
                print(p)
    print(f"{with_ex} of {len(rows)} public functions/methods have an example")


main()
