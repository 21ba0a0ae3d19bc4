#!/usr/bin/env python3
"""The public API of Roam's libraries against a release's, with swift-api-digester: every
declaration added, removed or changed in a way that breaks callers is listed, and the check fails
on any of them that CHANGELOG.md's `## Unreleased` section does not name.

  scripts/api-check.py --build DIR --baseline api/0.4.0 [--changelog FILE] MODULE...   compare
  scripts/api-check.py --build DIR --baseline api/0.4.0 --dump MODULE...                write the baseline

A change is recorded when the Unreleased section names, in backticks, the declaration or one
that holds it, with its module (a module new since the release is named alone, `RoamDecisions`): `Multipath.HandoverSession` records the type and everything
added to it; `PathMonitor.NetworkPath.isUltraConstrained` one property. So the API changes only
on purpose: an addition that nothing outside the package needs is made `package` instead.

The baseline is the release's API, dumped once when the release is tagged (make api-baseline)
and kept in the repository, so the check needs neither the old tree nor the git history.
Exit 1 on an unrecorded change; 2 on bad use or a module that cannot be read.
"""
import json, os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swiftflags import module_flags

USAGE = "usage: scripts/api-check.py --build DIR --baseline DIR [--changelog FILE] [--dump] MODULE..."


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
        # An extension of another module's type (`extension Duration`) declares only its members.
        if node.get("usr") and not hidden and node.get("kind") not in ("TypeNominal", "TypeNameAlias", "TypeFunc") and not node.get("isExternal"):
            found[node["usr"]] = ".".join(path)
        for child in node.get("children", []):
            walk(child, path, hidden)
    with open(path) as file:
        walk(json.load(file).get("ABIRoot", {}), [], False)
    return found


def signatures(path, modules):
    """USR -> the declaration's types as its source spells them, without the module of any of
    `modules` (`RoamCore.NetworkPath` -> `NetworkPath`): equal for a declaration whose USR
    changed only because a type it names moved between Roam's modules, which re-export each
    other, so that callers' code reads and compiles as before."""
    qualifier = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(modules))) + r")\.") if modules else None
    found = {}
    def types(node):
        spelled = []
        for child in node.get("children", []):
            if isinstance(child, dict) and child.get("kind") in ("TypeNominal", "TypeNameAlias", "TypeFunc"):
                spelled.append(child.get("printedName", ""))
        text = ", ".join(spelled)
        return qualifier.sub("", text) if qualifier else text
    def walk(node):
        if not isinstance(node, dict):
            return
        if node.get("usr") and node.get("kind") not in ("TypeNominal", "TypeNameAlias", "TypeFunc"):
            found[node["usr"]] = types(node)
        for child in node.get("children", []):
            walk(child)
    with open(path) as file:
        walk(json.load(file).get("ABIRoot", {}))
    return found


def unreleased_names(text):
    """The names CHANGELOG.md's `## Unreleased` section records: every backticked span in it,
    up to the next `## ` heading."""
    names, inside, fenced = set(), False, False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        if line.startswith("## "):
            inside = line[3:].strip().lower().startswith("unreleased")
            continue
        if inside:
            names.update(part for index, part in enumerate(line.split("`")) if index % 2 == 1 and part)
    return names


def is_recorded(name, names):
    """Whether `name` (`Module.Type.member(_:)`) or a declaration that holds it is in `names`."""
    for recorded in names:
        if name == recorded or (name.startswith(recorded) and name[len(recorded)] in ".("):
            return True
    return False


def changes(module, before, now, breaks, spelled_before=None, spelled_now=None):
    """What changed in `module`'s API: (kind, name, line) for each addition (a declaration a user
    can reach now and could not in the release), each break the digester reported, and each
    declaration no longer public. `before`, `now`: public_declarations of the two dumps;
    `spelled_before`, `spelled_now`: their signatures. A declaration removed and added again
    with the same name and the same types as spelled (only a type it names moved to another of
    Roam's modules) did not change for its callers, and is not listed."""
    spelled_before, spelled_now = spelled_before or {}, spelled_now or {}
    added = {usr: name for usr, name in now.items() if usr not in before}
    removed = {usr: name for usr, name in before.items() if usr not in now}
    respelled = {(name, spelled_now.get(usr)) for usr, name in added.items() if usr in spelled_now}
    moved = {(name, spelled_before[usr]) for usr, name in removed.items() if usr in spelled_before} & respelled
    moved_names = {name for name, _ in moved}
    found = [("added", f"{module}.{name}", f"{name} is new") for usr, name in sorted(added.items(), key=lambda item: item[1])
             if (name, spelled_now.get(usr)) not in moved]
    found += [("changed", f"{module}.{subject(line)}", line.strip()) for line in breaks
              if not (subject(line) in moved_names and "has been removed" in line)]
    found += [("removed", f"{module}.{name}", f"{name} is no longer public") for usr, name in sorted(removed.items(), key=lambda item: item[1])
              if (name, spelled_before.get(usr)) not in moved]
    return found


def main(argv):
    args = list(argv)
    def option(name, default=None):
        if name not in args:
            if default is not None:
                return default
            print(f"{USAGE} (missing {name})", file=sys.stderr)
            sys.exit(2)
        index = args.index(name)
        if index + 1 >= len(args):
            print(f"{USAGE} ({name} needs a value)", file=sys.stderr)
            sys.exit(2)
        value = args[index + 1]
        del args[index:index + 2]
        return value

    build, baseline = os.path.abspath(option("--build")), option("--baseline")
    changelog = option("--changelog", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "CHANGELOG.md"))
    dump = "--dump" in args
    if dump:
        args.remove("--dump")
    modules = args
    if not modules:
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    flags = module_flags(build)
    recorded = set()
    if not dump:
        try:
            with open(changelog, encoding="utf-8") as file:
                recorded = unreleased_names(file.read())
        except OSError as error:
            print(f"api-check: cannot read {changelog}: {error.strerror}", file=sys.stderr)
            sys.exit(2)
    failed = []
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
            # A module the release's baseline does not hold (new since, or checked since): all of
            # it is an addition, which the Unreleased section records by naming the module.
            if module not in recorded:
                print(f"api-check: no baseline for {module} in {baseline}: name `{module}` in {os.path.basename(changelog)}'s Unreleased "
                      "section if the release's baseline does not hold it (new, or checked from now on), else dump the release's API (make api-baseline)", file=sys.stderr)
                sys.exit(2)
            with tempfile.NamedTemporaryFile("r", suffix=".json") as current:
                result = subprocess.run(["swift-api-digester", "-dump-sdk", "-module", module, "-o", current.name, *flags], capture_output=True, text=True)
                if result.returncode != 0:
                    print(f"api-check: cannot read {module}: {result.stderr.strip()[-2000:]}", file=sys.stderr)
                    sys.exit(2)
                now = public_declarations(current.name)
            print(f"api-check: {module}: not in {os.path.basename(baseline)}'s baseline, {len(now)} public declaration(s), recorded in {os.path.basename(changelog)}")
            continue
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
            spelled_before, spelled_now = signatures(path, modules), signatures(current.name, modules)
            hidden = hidden_names(path) | hidden_names(current.name)
        breaks = [line for line in breaks if subject(line) not in hidden]
        found = changes(module, before, now, breaks, spelled_before, spelled_now)
        unrecorded = [change for change in found if not is_recorded(change[1], recorded)]
        release = os.path.basename(baseline)
        print(f"api-check: {module}: {sum(k == 'added' for k, _, _ in found)} addition(s), "
              f"{sum(k != 'added' for k, _, _ in found)} break(s) since {release}; {len(found) - len(unrecorded)} recorded in {os.path.basename(changelog)}")
        if unrecorded:
            failed.append(module)
            print(f"api-check: {module}: {len(unrecorded)} change(s) that {os.path.basename(changelog)}'s Unreleased section does not name "
                  "(name each, or a type that holds it, in backticks there; or make it `package` if nothing outside Roam needs it):")
            # A new type is listed once, with a count of its members, rather than member by member.
            names = {name for _, name, _ in unrecorded}
            def holder(name):
                return next((other for other in names if other != name and is_recorded(name, {other})), None)
            members = {}
            for _, name, _ in unrecorded:
                top = name
                while (outer := holder(top)) is not None:
                    top = outer
                if top != name:
                    members[top] = members.get(top, 0) + 1
            listed = [change for change in unrecorded if holder(change[1]) is None]
            for kind, name, line in listed[:200]:
                extra = f" and its {members[name]} member(s)" if name in members else ""
                print(f"  {kind}: `{name}`{extra}" + (f"  ({line})" if kind == "changed" else ""))
            if len(listed) > 200:
                print(f"  ... and {len(listed) - 200} more")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
