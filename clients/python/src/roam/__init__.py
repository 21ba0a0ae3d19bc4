"""Drive Roam's network-mobility runs from Python: start a scenario, change its links while it
plays, read each node's path, wait for events, run programs inside its nodes, and stop it.

    import roam

    with roam.start("walk-out-of-home", hold=True) as run:
        run.blackhole("wifi")
        run.wait_for_path("phone", lambda path: path["primaryInterface"] == "cell", timeout=10)
        print(run.exec("phone", ["ip", "route"]).stdout)

Everything goes through `roam run --control` (a Unix socket only the caller can reach) and
`roam exec`; the only dependency is the standard library.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

from ._http import ControlError, Transport
from .path import PathMonitor

__all__ = ["Run", "RoamError", "ControlError", "PathMonitor", "start", "attach", "bundled_scenario", "roam_binary"]
__version__ = "0.1.0"


class RoamError(Exception):
    """A run could not be started, or ended otherwise than asked."""


def roam_binary(explicit: Optional[str] = None) -> str:
    """The `roam` executable: `explicit`, else $ROAM_BINARY, else `roam` on PATH."""
    candidate = explicit or os.environ.get("ROAM_BINARY") or shutil.which("roam")
    if not candidate:
        raise RoamError("cannot find roam: set ROAM_BINARY to its path (e.g. .build/debug/roam), or put it on PATH")
    if not os.access(candidate, os.X_OK):
        raise RoamError(f"{candidate} is not an executable roam")
    return candidate


def bundled_scenario(name: str, binary: Optional[str] = None) -> str:
    """The path of a scenario bundled with Roam (`walk-out-of-home`): in $ROAM_SCENARIOS, else in
    the `scenarios/` directory of the checkout the roam binary was built in."""
    places = []
    if os.environ.get("ROAM_SCENARIOS"):
        places.append(Path(os.environ["ROAM_SCENARIOS"]))
    executable = Path(roam_binary(binary)).resolve()
    for parent in executable.parents:
        if (parent / "scenarios").is_dir() and (parent / "Package.swift").is_file():
            places.append(parent / "scenarios")
            break
    for place in places:
        path = place / f"{name}.yaml"
        if path.is_file():
            return str(path)
    raise RoamError(f"no bundled scenario named {name!r} (looked in {', '.join(map(str, places)) or 'nowhere: set ROAM_SCENARIOS'})")


def _scenario_path(scenario: Union[str, os.PathLike], binary: str) -> str:
    text = os.fspath(scenario)
    if os.sep in text or text.endswith((".yaml", ".yml")) or os.path.exists(text):
        return text
    return bundled_scenario(text, binary)


class Run:
    """A run in progress with a control API. Made by `start` (which owns the `roam run` process)
    or `attach` (a run started elsewhere). Every method raises ControlError when the API refuses
    (a 400 carries the change's placed problems in `diagnostics`)."""

    def __init__(self, run_id: str, transport: Transport, binary: str, process: Optional[subprocess.Popen] = None,
                 report_directory: Optional[str] = None) -> None:
        self.run_id = run_id
        self.transport = transport
        self.binary = binary
        self.process = process
        self.report_directory = report_directory
        self.result: Optional[dict] = None
        self._stdout: List[str] = []
        self._stderr: List[str] = []
        self._readers: List[threading.Thread] = []
        self._environment: Optional[Dict[str, str]] = None
        #: What `roam run` announced: `runId`, `socket`, and with `--control-port` `url` and `tokenFile`.
        self.announcement: Dict[str, Any] = {}

    # -- The run --------------------------------------------------------------------------

    def info(self) -> dict:
        """Scenario, nodes, links, networks, elapsed time, seed (GET /v1/run)."""
        return self.transport.request("GET", "/v1/run")

    def path(self, node: str) -> dict:
        """`node`'s current path, as `roam monitor --json` prints it."""
        return self.transport.request("GET", f"/v1/nodes/{_segment(node)}/path")

    def link(self, name: str) -> dict:
        """A link's carrier and each direction's conditions now."""
        return self.transport.request("GET", f"/v1/links/{_segment(name)}")

    def change_link(self, name: str, change: Dict[str, Any]) -> dict:
        """Applies a timeline event (without `at` and `link`) to link `name` now."""
        return self.transport.request("POST", f"/v1/links/{_segment(name)}", change)

    def change_network(self, name: str, change: Dict[str, Any]) -> dict:
        """Applies a network event (join, leave, renumber, rebind, dns, portal) now."""
        return self.transport.request("POST", f"/v1/networks/{_segment(name)}", change)

    def set(self, link: str, direction: Optional[str] = None, match: Optional[Dict[str, Any]] = None, **settings: Any) -> dict:
        """`set` (delay="80ms", loss="5%", rate="1mbit", ...), both directions unless `direction`;
        with `match` ({"protocol": "udp", "port": 53}), only the packets it selects."""
        return self.change_link(link, _directed({"set": _settings(settings)}, direction, match))

    def ramp(self, link: str, over: str, direction: Optional[str] = None, match: Optional[Dict[str, Any]] = None, **settings: Any) -> dict:
        return self.change_link(link, _directed({"ramp": {"to": _settings(settings), "over": over}}, direction, match))

    def reset(self, link: str, match: Dict[str, Any], direction: Optional[str] = None) -> dict:
        """The flow `match` selects gets the link's own conditions again."""
        return self.change_link(link, _directed({"reset": True}, direction, match))

    def down(self, link: str) -> dict:
        return self.change_link(link, {"down": True})

    def up(self, link: str) -> dict:
        return self.change_link(link, {"up": True})

    def blackhole(self, link: str, on: bool = True, direction: Optional[str] = None, match: Optional[Dict[str, Any]] = None) -> dict:
        return self.change_link(link, _directed({"blackhole": on}, direction, match))

    def flap(self, link: str, period: str, duty: Optional[str] = None, for_: Optional[str] = None, until: Optional[str] = None) -> dict:
        flap: Dict[str, Any] = {"period": period}
        if duty is not None:
            flap["duty"] = duty
        if for_ is not None:
            flap["for"] = for_
        if until is not None:
            flap["until"] = until
        return self.change_link(link, {"flap": flap})

    def profile(self, link: str, name: str) -> dict:
        return self.change_link(link, {"profile": name})

    # -- Events ---------------------------------------------------------------------------

    def events(self, start: int = 0, follow: bool = True) -> Iterator[dict]:
        """The run's events (timeline.jsonl's, each with its `seq`) from `start`; with `follow`,
        as they happen, until the run ends."""
        return self.transport.events(start, follow)

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float, start: Optional[int] = None) -> dict:
        """The first event from `start` (default: the next one recorded) for which `predicate`
        holds; TimeoutError after `timeout` seconds."""
        if start is None:
            start = int(self.info()["nextEvent"])
        found: Dict[str, Any] = {}
        done = threading.Event()

        def watch() -> None:
            try:
                for event in self.transport.events(start, True):
                    if done.is_set():
                        return
                    if event.get("type") != "gap" and predicate(event):
                        found["event"] = event
                        break
            except Exception as error:  # noqa: BLE001 - handed to the waiting thread
                found["error"] = error
            finally:
                done.set()

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        if not done.wait(timeout):
            done.set()
            raise TimeoutError(f"no matching event within {timeout} s")
        if "error" in found:
            raise found["error"]
        if "event" not in found:
            raise RoamError("the run ended before a matching event")
        return found["event"]

    def wait_for_path(self, node: str, predicate: Callable[[dict], bool], timeout: float) -> dict:
        """`node`'s path once `predicate` holds for it (now, or at a later path update)."""
        start = int(self.info()["nextEvent"])
        current = self.path(node)
        if predicate(current):
            return current
        event = self.wait_for(lambda e: e.get("type") == "path" and e.get("node") == node and predicate(e["path"]), timeout, start)
        return event["path"]

    # -- Programs in nodes ----------------------------------------------------------------

    @property
    def toxiproxy(self) -> Optional[str]:
        """Where the run serves toxiproxy's HTTP API (`HOST:PORT`, started with
        `extra_args=["--toxiproxy-port", "0"]`), or None: point toxiproxy's clients at it."""
        return self.announcement.get("toxiproxy")

    @property
    def environment(self) -> Dict[str, str]:
        """What a command workload gets: ROAM_RUN_ID, ROAM_NODES, each node's addresses
        (ROAM_<NODE>_ADDR, ROAM_<NODE>_<LINK>_ADDR and their _ADDR6), ROAM_REPORT_DIR.

        Only those names are taken from what the run answers: `ROAM_` and capitals, digits and
        underscores, each value one line of at most 4,096 characters. Whatever else a server
        says (an impostor on a freed loopback port could say `LD_PRELOAD` or `PATH`) never
        reaches the environment of the programs `exec` and `spawn` start."""
        if self._environment is None:
            answered = self.info().get("environment")
            self._environment = _roam_variables(answered if isinstance(answered, dict) else {})
        return self._environment

    def _env(self, extra: Optional[Dict[str, str]]) -> Dict[str, str]:
        return {**os.environ, **self.environment, **(extra or {})}

    def _exec_argv(self, node: str, argv: Sequence[str]) -> List[str]:
        if not argv:
            raise ValueError("argv names a program")
        return [self.binary, "exec", self.run_id, node, "--", *argv]

    def exec(self, node: str, argv: Sequence[str], timeout: Optional[float] = 60, check: bool = False,
             input: Optional[str] = None, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        """Runs `argv` inside `node` (through `roam exec`, with the run's `environment` and `env`)
        and waits: its exit status and output (text)."""
        return subprocess.run(self._exec_argv(node, argv), capture_output=True, timeout=timeout, check=check,
                              input=input, text=True, env=self._env(env))

    def spawn(self, node: str, argv: Sequence[str], env: Optional[Dict[str, str]] = None, **popen: Any) -> subprocess.Popen:
        """Starts `argv` inside `node` (through `roam exec`, with the run's `environment` and
        `env`); stdout and stderr are pipes unless given. The caller waits for it (or kills it)."""
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(self._exec_argv(node, argv), env=self._env(env), **popen)

    # -- The end --------------------------------------------------------------------------

    def stop(self, timeout: float = 120) -> dict:
        """Ends the run: the report is written and the network removed; returns where the report
        is and whether the scenario's expectations held (`passed`)."""
        if self.result is not None:
            return self.result
        try:
            self.result = self.transport.request("POST", "/v1/stop", timeout=timeout)
        except ControlError as error:
            if error.status != 410:
                raise
            self.result = {"message": error.message}
        except OSError:
            # The run ended on its own (no --hold) and took its socket with it.
            if self.process is None or self.process.poll() is None:
                raise
            self.result = {"message": "the run had ended", "exitCode": self.process.returncode}
        self._wait(timeout)
        return self.result

    def _wait(self, timeout: float) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(30)
        for reader in self._readers:
            reader.join(5)

    def close(self) -> None:
        """Stops the run if it still plays; a run that cannot be stopped is terminated."""
        if self.process is not None and self.process.poll() is None:
            try:
                self.stop()
            except Exception:  # noqa: BLE001 - ends the process below
                self.process.send_signal(signal.SIGTERM)
                self._wait(30)

    @property
    def output(self) -> str:
        """What `roam run` printed on standard output after its API line (its final table)."""
        return "".join(self._stdout)

    @property
    def errors(self) -> str:
        """What `roam run` printed on standard error."""
        return "".join(self._stderr)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start(scenario: Union[str, os.PathLike], *, hold: bool = False, rootless: bool = True, backend: Optional[str] = None,
          seed: Optional[int] = None, time_scale: Optional[float] = None, report: Optional[str] = None,
          extra_args: Sequence[str] = (), binary: Optional[str] = None, startup_timeout: float = 120,
          cwd: Optional[str] = None) -> Run:
    """Starts `roam run --control` on `scenario` (a path, or the name of a bundled scenario) and
    returns once its network is built and its time zero has come. Rootless by default (a user
    namespace of the run's own: nothing on the host changes); `hold` keeps the network up after
    the timeline until `stop()`."""
    executable = roam_binary(binary)
    argv = [executable, "run", _scenario_path(scenario, executable), "--control", "--quiet"]
    if hold:
        argv.append("--hold")
    if rootless:
        argv.append("--rootless")
    if backend is not None:
        argv += ["--backend", backend]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if time_scale is not None:
        argv += ["--time-scale", str(time_scale)]
    if report is not None:
        argv += ["--report", report]
    argv += list(extra_args)
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, start_new_session=True)
    assert process.stdout is not None and process.stderr is not None
    stderr: List[str] = []

    def drain_errors() -> None:
        for line in iter(process.stderr.readline, b""):  # type: ignore[union-attr]
            if sum(map(len, stderr)) < 1 << 20:
                stderr.append(line.decode(errors="replace"))

    errors = threading.Thread(target=drain_errors, daemon=True)
    errors.start()
    deadline = time.monotonic() + startup_timeout
    first = b""
    while not first.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([process.stdout], [], [], max(0.0, remaining))
        if not ready:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
            raise RoamError(f"roam run did not start within {startup_timeout} s: {''.join(stderr).strip()}")
        chunk = os.read(process.stdout.fileno(), 1)
        if not chunk:
            process.wait(30)
            errors.join(5)
            raise RoamError(f"roam run exited {process.returncode} before its network was up: {''.join(stderr).strip()}")
        first += chunk
    announced = json.loads(first)["control"]
    run = Run(announced["runId"], Transport(socket_path=announced["socket"]), executable, process, announced.get("reportDirectory"))
    run.announcement = announced
    run._stderr = stderr

    def drain_output() -> None:
        for line in iter(process.stdout.readline, b""):  # type: ignore[union-attr]
            run._stdout.append(line.decode(errors="replace"))

    output = threading.Thread(target=drain_output, daemon=True)
    output.start()
    run._readers = [errors, output]
    return run


def attach(run_id: str, binary: Optional[str] = None) -> Run:
    """A run started elsewhere with `roam run --control`, by its id (the caller must be the user
    who started it)."""
    executable = roam_binary(binary)
    found = subprocess.run([executable, "ctl", run_id, "address"], capture_output=True, text=True)
    if found.returncode != 0:
        raise RoamError(found.stderr.strip() or f"no control API for run {run_id}")
    return Run(run_id, Transport(socket_path=found.stdout.strip()), executable)


_VARIABLE = re.compile(r"ROAM_[A-Z0-9_]{1,128}")


def _roam_variables(answered: Dict[Any, Any]) -> Dict[str, str]:
    """The run's variables among `answered`: ROAM_ names with one-line values, nothing else."""
    return {
        key: value
        for key, value in answered.items()
        if isinstance(key, str) and _VARIABLE.fullmatch(key) and isinstance(value, str)
        and len(value) <= 4096 and value.isprintable()
    }


def _segment(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


def _settings(settings: Dict[str, Any]) -> Dict[str, Any]:
    return {key: value if isinstance(value, (str, bool)) else str(value) for key, value in settings.items()}


def _directed(change: Dict[str, Any], direction: Optional[str], match: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    if direction is not None:
        change["direction"] = direction
    if match is not None:
        change["match"] = {key: value if isinstance(value, (str, bool, list)) else str(value) for key, value in match.items()}
    return change
