#!/usr/bin/env bash
# The compatibility suite: builds siltd, makes a Python venv with pymongo and pytest (once),
# and runs the tests, each of which talks to a real siltd over TCP.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$root/target/compat-venv"
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$stamp"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$stamp"
fi
(cd "$root" && cargo build --release -p siltd -p siltctl --quiet)
export SILTD_BIN="$root/target/release/siltd"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here" "$@"
