#!/usr/bin/env python3
"""Every public function, method, initializer and subscript of the named modules says in its doc
comment what its parameters are, what it returns and what it throws, as DocC reads them:

  - Parameter name: ...          (or `- Parameters:` with `- name: ...` under it), one a parameter
  - Returns: ...                  when it returns anything but Void
  - Throws: ...                   when it throws

  scripts/doc-check.py --build DIR MODULE...      DIR: `swift build --show-bin-path`
  MODULE:Type,Type                                 only those types of the module (a part done)

Read from the modules' symbol graphs (swift-symbolgraph-extract), so what is checked is what a
user of the module sees: `package` and internal declarations are left out, and so are the
witnesses of the standard library's protocols (`==`, `<`, `hash(into:)`, `description`,
`encode(to:)`, `init(from:)`) and operators, whose meaning their protocol documents. Exit 1
with each place and what it lacks; 2 on bad use or a module that cannot be read.
"""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swiftflags import module_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USAGE = "usage: scripts/doc-check.py --build DIR MODULE..."
KINDS = {"swift.func", "swift.method", "swift.type.method", "swift.init", "swift.subscript", "swift.type.subscript"}
WITNESSES = {"==(_:_:)", "<(_:_:)", "hash(into:)", "encode(to:)", "init(from:)", "description"}


def lacks(symbol):
    """What `symbol`'s doc comment does not say that it should, as a list of phrases."""
    lines = [line.get("text", "") for line in (symbol.get("docComment") or {}).get("lines", [])]
    text = [line.strip() for line in lines]
    signature = symbol.get("functionSignature") or {}
    names = [parameter.get("internalName") or parameter.get("name") for parameter in signature.get("parameters", [])]
    names = [name for name in names if name and name != "_"]
    missing = []
    if not any(text):
        return ["a doc comment"]
    documented = set()
    in_list = False
    for line in text:
        if line.startswith("- Parameters:"):
            in_list = True
            continue
        if line.startswith("- Parameter ") and ":" in line:
            documented.add(line[len("- Parameter "):].split(":", 1)[0].strip())
            continue
        if in_list and line.startswith("- ") and ":" in line:
            documented.add(line[2:].split(":", 1)[0].strip())
            continue
        if line.startswith("- ") and not line.startswith("- Parameter"):
            in_list = False
    for name in names:
        if name not in documented:
            missing.append(f"- Parameter {name}:")
    returns = "".join(fragment.get("spelling", "") for fragment in signature.get("returns", [])).strip()
    if symbol["kind"]["identifier"] != "swift.init" and returns not in ("", "()", "Void"):
        if not any(line.startswith("- Returns:") for line in text):
            missing.append("- Returns:")
    throws = any(fragment.get("kind") == "keyword" and fragment.get("spelling") in ("throws", "rethrows")
                 for fragment in symbol.get("declarationFragments", []))
    if throws and not any(line.startswith("- Throws:") for line in text):
        missing.append("- Throws:")
    return missing


def check(module, graph, types=None):
    found, checked = [], 0
    for symbol in graph.get("symbols", []):
        if types is not None and (symbol.get("pathComponents") or [""])[0] not in types:
            continue
        if symbol.get("kind", {}).get("identifier") not in KINDS or symbol.get("accessLevel") not in ("public", "open"):
            continue
        title = symbol.get("names", {}).get("title", "")
        if title in WITNESSES:
            continue
        # A comment written in another module (a protocol's, inherited) is that module's to keep.
        comment = symbol.get("docComment") or {}
        if comment.get("module") not in (None, module):
            continue
        checked += 1
        missing = lacks(symbol)
        if missing:
            location = symbol.get("location", {})
            path = location.get("uri", "").removeprefix("file://")
            line = location.get("position", {}).get("line", 0) + 1
            name = ".".join(symbol.get("pathComponents", [title]))
            found.append(f"{os.path.relpath(path, ROOT) if path else module}:{line}: {module}.{name} lacks {', '.join(missing)}")
    return found, checked


def main(argv):
    args = list(argv)
    if len(args) < 3 or args[0] != "--build":
        print(USAGE, file=sys.stderr)
        return 2
    build, modules = os.path.abspath(args[1]), args[2:]
    flags = module_flags(build)
    failed = 0
    with tempfile.TemporaryDirectory() as output:
        for argument in modules:
            module, _, only = argument.partition(":")
            types = set(only.split(",")) if only else None
            result = subprocess.run(["swift-symbolgraph-extract", "-module-name", module, "-target", "x86_64-unknown-linux-gnu",
                                     "-minimum-access-level", "public", "-output-dir", output, *flags], capture_output=True, text=True)
            path = os.path.join(output, f"{module}.symbols.json")
            if result.returncode != 0 or not os.path.exists(path):
                print(f"doc-check: cannot read {module}: {result.stderr.strip()[-2000:]}", file=sys.stderr)
                return 2
            with open(path) as file:
                found, checked = check(module, json.load(file), types)
            for line in sorted(found):
                print(line)
            part = f" ({only})" if only else ""
            print(f"doc-check: {module}{part}: {checked - len(found)} of {checked} public functions say their parameters, result and errors")
            failed += len(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
