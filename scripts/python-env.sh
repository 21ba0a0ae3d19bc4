#!/usr/bin/env bash
# The Python environment the Python client's tests and Examples/PythonApp run in: a venv in
# .build/python with pytest, schemathesis (the control API against its OpenAPI document),
# toxiproxy-python (toxiproxy's own Python client, against a run's toxiproxy API), aioquic
# (Examples/QUICApp's HTTP/3) and the
# client (clients/python) installed from its path, as a user would install it. Idempotent: quick when both are there and the client has not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/python
stamp="$venv/.roam-client-installed"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# Reinstalled when the client's files (or this list) are newer than the last install.
if [ ! -f "$stamp" ] || [ -n "$(find clients/python scripts/python-env.sh -newer "$stamp" -type f -not -path '*/__pycache__/*' -not -path '*.egg-info*' -not -path 'clients/python/build/*' -not -path '*/.pytest_cache/*' | head -1)" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'pytest>=7' 'schemathesis>=4' 'toxiproxy-python==0.1.1' 'aioquic>=1.2' ./clients/python
  touch "$stamp"
fi
echo "$venv/bin/python"
