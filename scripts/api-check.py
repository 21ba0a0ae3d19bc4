#!/usr/bin/env python3
"""The public API of Roam's libraries against a release's, with swift-api-digester: every
declaration removed or changed in a way that breaks callers is listed, and the check fails.

  scripts/api-check.py --build DIR --baseline api/0.3.0 MODULE...          compare (exit 1 on a break)
  scripts/api-check.py --build DIR --baseline api/0.3.0 --dump MODULE...   write the baseline

The baseline is the release's API, dumped once when the release is tagged (make api-baseline)
and kept in the repository, so the check needs neither the old tree nor the git history.
Exit 2 on bad use or a module that cannot be read.
"""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swiftflags import module_flags

args = sys.argv[1:]
def option(name):
    if name not in args:
        sys.exit(f"usage: scripts/api-check.py --build DIR --baseline DIR [--dump] MODULE... (missing {name})")
    index = args.index(name)
    value = args[index + 1]
    del args[index:index + 2]
    return value

build, baseline = os.path.abspath(option("--build")), option("--baseline")
dump = "--dump" in args
if dump:
    args.remove("--dump")
modules = args
if not modules:
    sys.exit("usage: scripts/api-check.py --build DIR --baseline DIR [--dump] MODULE...")
flags = module_flags(build)
failed = []


def hidden_names(path):
    """The dotted names of a dump's `package` declarations (isInternal, or inside one): the
    digester's diagnosis reports their changes too, which no user of the module can see."""
    found = set()
    def walk(node, parents, hidden):
        if not isinstance(node, dict):
            return
        hidden = hidden or node.get("isInternal", False)
        name = node.get("printedName", "")
        path = parents + [name] if node.get("kind") not in ("Root", None) and name else parents
        if hidden and node.get("usr"):
            found.add(".".join(path))
        for child in node.get("children", []):
            walk(child, path, hidden)
    with open(path) as file:
        walk(json.load(file).get("ABIRoot", {}), [], False)
    return found


def subject(line):
    """`Func A.b(_:) has been removed` -> `A.b(_:)`."""
    words = line.strip().split(" ", 1)
    rest = words[1] if len(words) > 1 else ""
    for marker in (" has ", " is ", " now ", " changes "):
        if marker in rest:
            return rest.split(marker, 1)[0]
    return rest


def public_declarations(path):
    """Every declaration of a dump that a user of the module can reach (the digester also dumps
    `package` declarations, marked isInternal), as USR -> a readable name."""
    found = {}
    def walk(node, parents, hidden):
        if not isinstance(node, dict):
            return
        hidden = hidden or node.get("isInternal", False)
        name = node.get("printedName", "")
        path = parents + [name] if node.get("kind") not in ("Root", None) and name else parents
        if node.get("usr") and not hidden and node.get("kind") not in ("TypeNominal", "TypeNameAlias", "TypeFunc"):
            found[node["usr"]] = ".".join(path)
        for child in node.get("children", []):
            walk(child, path, hidden)
    with open(path) as file:
        walk(json.load(file).get("ABIRoot", {}), [], False)
    return found

for module in modules:
    path = os.path.join(baseline, module + ".json")
    if dump:
        os.makedirs(baseline, exist_ok=True)
        result = subprocess.run(["swift-api-digester", "-dump-sdk", "-module", module, "-o", path, *flags], capture_output=True, text=True)
        if result.returncode != 0 or not os.path.exists(path):
            print(f"api-check: cannot dump {module}: {result.stderr.strip()[-2000:]}", file=sys.stderr)
            sys.exit(2)
        print(f"api-check: {module}'s API written to {path}")
        continue
    if not os.path.exists(path):
        print(f"api-check: no baseline for {module} in {baseline} (make api-baseline)", file=sys.stderr)
        sys.exit(2)
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as report:
        result = subprocess.run(["swift-api-digester", "-diagnose-sdk", "-module", module, "-baseline-path", path, "-o", report.name, *flags],
                                capture_output=True, text=True)
        if result.returncode != 0:
            print(f"api-check: cannot read {module}: {result.stderr.strip()[-2000:]}", file=sys.stderr)
            sys.exit(2)
        # The report is section headers (/* Removed Decls */ ...) with a line per breaking change.
        breaks = [line for line in report.read().splitlines() if line.strip() and not line.startswith("/*")]
    # The digester does not report a public declaration that became `package`: compare what a
    # user can reach in the release with what they can reach now.
    with tempfile.NamedTemporaryFile("r", suffix=".json") as current:
        result = subprocess.run(["swift-api-digester", "-dump-sdk", "-module", module, "-o", current.name, *flags], capture_output=True, text=True)
        if result.returncode != 0:
            print(f"api-check: cannot read {module}: {result.stderr.strip()[-2000:]}", file=sys.stderr)
            sys.exit(2)
        before, now = public_declarations(path), public_declarations(current.name)
        hidden = hidden_names(path) | hidden_names(current.name)
    breaks = [line for line in breaks if subject(line) not in hidden]
    breaks += [f"{name} is no longer public" for usr, name in sorted(before.items(), key=lambda item: item[1]) if usr not in now]
    if breaks:
        failed.append(module)
        print(f"api-check: {module}: {len(breaks)} breaking change(s) since {os.path.basename(baseline)}:")
        for line in breaks[:200]:
            print("  " + line)
    else:
        print(f"api-check: {module}: no breaking change since {os.path.basename(baseline)}")
sys.exit(1 if failed else 0)
