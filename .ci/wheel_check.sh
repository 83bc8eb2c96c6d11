#!/usr/bin/env bash
# The wheel as a user installs it: built from this tree (pip wheel, no dependencies), installed
# non-editable into a fresh virtual environment of its own (torch as .ci/run installs it, from the
# same wheel cache), then .ci/wheel_check.py runs the README's main job, a simulated distributed
# run and the tuned GEMM look-up from temporary folders with it and with CHECKOUT_BIN (the bin/
# folder of an environment with the checkout installed, e.g. .ci/run's) and fails on a difference.
#   bash .ci/wheel_check.sh CHECKOUT_BIN
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT_BIN=$(cd "${1:?usage: .ci/wheel_check.sh CHECKOUT_BIN}" && pwd)
WHEEL_VENV=$(mktemp -d "${TMPDIR:-/tmp}/swizzleperf-wheel-venv.XXXXXX")
BUILD=$(mktemp -d "${TMPDIR:-/tmp}/swizzleperf-wheel-build.XXXXXX")
trap 'rm -rf "$WHEEL_VENV" "$BUILD"' EXIT
# Built from a copy of the tracked and untracked-but-not-ignored files, so that the build's own
# folders (build/, *.egg-info) stay out of the working tree and nothing ignored is shipped.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"; done | xargs -0 cp --parents -t "$BUILD"
python3 -m pip wheel -q --no-deps -w "$BUILD/dist" "$BUILD"
python3 -m venv "$WHEEL_VENV"
"$WHEEL_VENV/bin/python" -m pip install -q --upgrade pip
"$WHEEL_VENV/bin/python" -m pip install -q torch==2.13.0 "$BUILD"/dist/swizzleperf-*.whl
# The product only: no committed results in the wheel.
python3 - "$BUILD"/dist/swizzleperf-*.whl <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
results = [n for n in names if "/results/" in n]
sys.exit(f"the wheel ships results: {results[:5]}" if results else None)
PY
python3 .ci/wheel_check.py "$CHECKOUT_BIN" "$WHEEL_VENV/bin"
