#!/usr/bin/env python3
"""Type-checks every Swift code sample in the README, docs/ and the DocC catalogs against the
built modules, so that no sample rots. Run after `swift build` (and `make nio`, for the samples
that import RoamNIO or SwiftNIO): `scripts/check-samples.py [--build .build/debug]`.

Each ```swift block is one `main.swift` (top-level code and declarations both allowed), with
Roam's modules imported and a few placeholder values a sample may leave undeclared (`server`,
`monitor`, `text`, ...), each given only when the sample does not declare it itself. Blocks of a
Package.swift (`.package(...)`, `.product(...)`) are manifests, not code: they are counted and
checked to parse as Swift expressions only. Exit 1 if a sample does not compile, 2 on bad use.
"""
import glob, os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swiftflags import ROOT, module_flags
build = os.path.join(ROOT, ".build/debug")
if len(sys.argv) == 3 and sys.argv[1] == "--build":
    build = os.path.abspath(sys.argv[2])
elif len(sys.argv) != 1:
    sys.exit("usage: scripts/check-samples.py [--build DIR]")
modules = os.path.join(build, "Modules")
if not os.path.isdir(modules):
    print(f"check-samples: no built modules in {modules}: run swift build first", file=sys.stderr)
    sys.exit(2)

ROAM = ["SystemPackage", "RoamCore", "RoamSystem", "Netlink", "PathMonitor", "Multipath", "ScenarioModel", "Simulator", "RoamReport", "RoamTesting"]
NIO = ["NIOCore", "NIOPosix", "NIOHTTP1", "RoamNIO"]

# Placeholders: name -> (declaration, the modules it needs). A sample that declares the name
# itself (let/var/func/struct/class NAME) gets none.
PLACEHOLDERS = {
    "text": ('let text = ""', []),
    "server": ('let server = IPAddress("198.18.0.2")!', ["Netlink"]),
    "server4": ('let server4 = IPAddress("198.18.0.2")!', ["Netlink"]),
    "server6": ('let server6 = IPAddress("fd00::2")!', ["Netlink"]),
    "phone": ('let phone = try! NetworkNamespace.named("phone")', ["Netlink"]),
    "serverNamespace": ('let serverNamespace = try! NetworkNamespace.named("server")', ["Netlink"]),
    "monitor": ('let monitor = NetworkPathMonitor(namespace: .current)', ["PathMonitor"]),
    "path": ('let path: NetworkPath = { fatalError("a placeholder") }()', ["PathMonitor"]),
    "racer": ('let racer = ConnectionRacer(namespace: .current)', ["Multipath"]),
    "buffer": ('nonisolated(unsafe) let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 1)', []),
    "connection": ('nonisolated(unsafe) let connection: HandoverConnection = { fatalError() }()', ["Multipath"]),
    "player": ('struct Player { var buffered: Duration = .zero }\nlet player = Player()', []),
    "progress": ('nonisolated(unsafe) var progress: [UInt8] = []', []),
    "ResumeFailed": ('struct ResumeFailed: Error {}', []),
    "log": ('func log(_ value: Any) { print(value) }', []),
    "MyClient": ('struct MyClient: Sendable { init(host: String) {}; func sync() async throws -> (itemsSynced: Int, Void) { (0, ()) } }', ["Netlink"]),
    "MyTestServer": ('final class MyTestServer: Sendable { init(address: String) throws {}; func serve() {}; func stop() {} }', ["Netlink"]),
    "bootstrap": ('let bootstrap = try! RoamClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)', ["RoamNIO"]),
    "MyHTTPHandler": ('final class MyHTTPHandler: ChannelInboundHandler, Sendable { typealias InboundIn = HTTPClientResponsePart }', ["RoamNIO"]),
    "received": ('nonisolated(unsafe) var received: UInt64 = 0', []),
    "session": ('nonisolated(unsafe) var session = HandoverSession(to: [], port: 443)', ["Multipath"]),
    "controller": ('let controller = MPTCPSubflowController(namespace: .current)', ["Multipath"]),
    "socket": ('let socket = FileDescriptor(rawValue: -1)', []),
    "now": ('let now = Duration.zero', []),
    "reconnect": ('let reconnect: @Sendable () -> Void = {}', []),
}

def samples():
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs/*.md"))) \
        + sorted(glob.glob(os.path.join(ROOT, "Sources/*/*.docc/*.md"))) + sorted(glob.glob(os.path.join(ROOT, "RoamNIO/Sources/*/*.docc/*.md")))
    for path in files:
        text = open(path, encoding="utf-8").read()
        # Indented blocks too (a sample inside a list item), dedented.
        for match in re.finditer(r"^( *)```swift\n(.*?)^\1```", text, re.S | re.M):
            indent = len(match.group(1))
            code = "\n".join(line[indent:] for line in match.group(2).split("\n"))
            yield os.path.relpath(path, ROOT), text[:match.start()].count("\n") + 2, code
    # Samples in doc comments (`/// ```swift`), which DocC shows on the symbol's page.
    for path in sorted(glob.glob(os.path.join(ROOT, "Sources/**/*.swift"), recursive=True)
                       + glob.glob(os.path.join(ROOT, "RoamNIO/Sources/**/*.swift"), recursive=True)):
        lines = open(path, encoding="utf-8").read().split("\n")
        index = 0
        while index < len(lines):
            if lines[index].strip() == "/// ```swift":
                start, body = index + 1, []
                index += 1
                while index < len(lines) and lines[index].strip() != "/// ```":
                    body.append(re.sub(r"^\s*/// ?", "", lines[index]))
                    index += 1
                yield os.path.relpath(path, ROOT), start + 1, "\n".join(body) + "\n"
            index += 1

def flags():
    return module_flags(build)

def declared(name, code):
    return re.search(rf"\b(let|var|func|struct|class|enum|actor|typealias)\s+{re.escape(name)}\b", code) is not None

def main():
    common = flags()
    have_nio = os.path.exists(os.path.join(modules, "RoamNIO.swiftmodule"))
    failures, checked, manifests = [], 0, 0
    for file, line, code in samples():
        first = next((l.strip() for l in code.splitlines() if l.strip()), "")
        if first.startswith(".package") or first.startswith("// Package.swift") or first.startswith(".product"):
            manifests += 1
            continue
        uses_nio = re.search(r"\b(NIO|RoamClientBootstrap|ChannelInboundHandler|HTTPClient|roamPathEvents|RoamNetworkEvents)\w*", code)
        if uses_nio and not have_nio:
            print(f"check-samples: {file}:{line} needs RoamNIO, which is not built (make nio)", file=sys.stderr)
            sys.exit(2)
        imports = ROAM + (NIO if uses_nio else [])
        lines = [f"import {m}" for m in imports] + ["import Glibc", "import Synchronization", "import Testing" if "@Test" in code or "#expect" in code else ""]
        extras = [declaration for name, (declaration, _) in PLACEHOLDERS.items()
                  if re.search(rf"\b{re.escape(name)}\b", code) and not declared(name, code)]
        with tempfile.TemporaryDirectory(prefix="roam-sample-") as directory:
            with open(os.path.join(directory, "main.swift"), "w") as main_file:
                main_file.write("\n".join(lines) + "\n" + code)
            with open(os.path.join(directory, "placeholders.swift"), "w") as placeholders:
                placeholders.write("\n".join(f"import {m}" for m in imports) + "\nimport Glibc\n" + "\n".join(extras) + "\n")
            command = ["swiftc", "-typecheck", "-swift-version", "6", "-warnings-as-errors", *common,
                       os.path.join(directory, "main.swift"), os.path.join(directory, "placeholders.swift")]
            result = subprocess.run(command, capture_output=True, text=True, timeout=300)
            checked += 1
            if result.returncode != 0:
                errors = [l for l in result.stderr.splitlines() if "error:" in l][:8]
                failures.append(f"{file}:{line}: the sample does not compile:\n  " + "\n  ".join(errors))
    python_checked, python_failures = check_python()
    failures += python_failures
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"check-samples: {checked - len(failures) + len(python_failures)} of {checked} samples compile; {manifests} manifest fragments not compiled")
    print(f"check-samples: {python_checked - len(python_failures)} of {python_checked} Python samples parse and name only what the client has")
    sys.exit(1 if failures else 0)

def check_python():
    """Each ```python block of the README, docs/, the examples' and the client's READMEs: it
    parses, and every `roam.NAME` and every method called on a run (`run.NAME`, `roam_run.NAME`)
    is one the Python client (clients/python) has."""
    import ast
    sys.path.insert(0, os.path.join(ROOT, "clients/python/src"))
    import roam
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs/*.md"))) \
        + sorted(glob.glob(os.path.join(ROOT, "Examples/*/README.md"))) + [os.path.join(ROOT, "clients/python/README.md")]
    checked, failures = 0, []
    for path in files:
        if not os.path.exists(path):
            continue
        text = open(path, encoding="utf-8").read()
        for match in re.finditer(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M):
            line = text[:match.start()].count("\n") + 2
            place = f"{os.path.relpath(path, ROOT)}:{line}"
            checked += 1
            try:
                tree = ast.parse(match.group(2), place)
            except SyntaxError as error:
                failures.append(f"{place}: the Python sample does not parse: {error}")
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    owner, name = node.value.id, node.attr
                    if owner == "roam" and not hasattr(roam, name):
                        failures.append(f"{place}: roam.{name} is not in the Python client")
                    elif owner in ("run", "roam_run") and not hasattr(roam.Run, name):
                        failures.append(f"{place}: {owner}.{name}: a Run has no {name}")
    return checked, failures

main()
