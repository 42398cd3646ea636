#!/usr/bin/env bash
# The outside-clients suite (tests/python): other people's Python libraries
# (PyBrowserID, tokenlib, mohawk, hawkauthlib, requests-hawk) against the
# embedded stack, which its pytest fixture starts with `npm start` and stops.
# The virtualenv (.tools/venv, or PYTHON_TESTS_VENV) is made from PyPI with the
# pinned tests/python/requirements.txt and reused while that file and the
# Python version stay the same. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
venv="${PYTHON_TESTS_VENV:-.tools/venv}"
requirements=tests/python/requirements.txt
stamp="$(cat "$requirements"; "$python" --version 2>&1)"
stamp="$(printf '%s' "$stamp" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$stamp" ]; then
  echo "python-tests.sh: creating $venv from $requirements" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
  echo "$stamp" >"$venv/.requirements.sha256"
fi
exec "$venv/bin/python" -m pytest tests/python "$@"
