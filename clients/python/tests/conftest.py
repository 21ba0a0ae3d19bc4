"""The client's tests start real runs: they need the roam binary ($ROAM_BINARY or --roam-binary)."""

import pytest

# A quarter of walk-out-of-home's 40 s, held open afterwards: the tests drive it.
SCENARIO = dict(scenario="walk-out-of-home", hold=True, backend="userspace", time_scale=0.25)


@pytest.fixture
def run(roam_start):
    options = dict(SCENARIO)
    return roam_start(options.pop("scenario"), **options)
