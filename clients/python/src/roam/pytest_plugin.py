"""pytest plugin: the `roam_run` fixture starts a scenario for a test and always stops it.

    import pytest

    @pytest.mark.roam_scenario("walk-out-of-home", hold=True)
    def test_app_moves_to_cellular(roam_run):
        roam_run.blackhole("wifi")
        ...

The marker takes the scenario (a path, or a bundled scenario's name) and `roam.start`'s
keyword arguments; without it, the scenario comes from the test's parameter
(`@pytest.mark.parametrize("roam_run", [...], indirect=True)`). `roam_start` is a factory for
tests that start several runs. The roam executable: --roam-binary, $ROAM_BINARY, or PATH.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List

import pytest

import roam


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roam")
    group.addoption("--roam-binary", action="store", default=None, help="the roam executable (default: $ROAM_BINARY, then PATH)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "roam_scenario(scenario, **options): the scenario the roam_run fixture starts, and roam.start's options")


@pytest.fixture
def roam_start(request: pytest.FixtureRequest) -> Iterator[Callable[..., roam.Run]]:
    """Starts runs (roam.start's arguments); each is stopped when the test ends, pass or fail."""
    runs: List[roam.Run] = []
    binary = request.config.getoption("--roam-binary")

    def start(scenario: Any, **options: Any) -> roam.Run:
        options.setdefault("binary", binary)
        run = roam.start(scenario, **options)
        runs.append(run)
        return run

    yield start
    for run in reversed(runs):
        run.close()


@pytest.fixture
def roam_run(request: pytest.FixtureRequest, roam_start: Callable[..., roam.Run]) -> roam.Run:
    """A run of the test's scenario (its roam_scenario marker, or its parameter), stopped at the end."""
    marker = request.node.get_closest_marker("roam_scenario")
    if marker is not None:
        if not marker.args:
            raise pytest.UsageError("roam_scenario names a scenario: @pytest.mark.roam_scenario('walk-out-of-home')")
        return roam_start(marker.args[0], **marker.kwargs)
    scenario = getattr(request, "param", None)
    if scenario is None:
        raise pytest.UsageError("roam_run needs a scenario: mark the test @pytest.mark.roam_scenario(NAME_OR_PATH, ...) or parametrize it indirectly")
    if isinstance(scenario, dict):
        options = dict(scenario)
        return roam_start(options.pop("scenario"), **options)
    return roam_start(scenario)
