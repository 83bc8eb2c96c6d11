#!/usr/bin/env bash
# Gather the Python 3.12 x86-64 wheels that the GPU machines lack (they have torch, triton, pandas,
# typer, rich, jinja2, pyyaml, httpx, but no package index and no openai / langgraph / pydantic /
# diskcache) into .whl/, for the device tool's `carry`. Run from the repository root on a machine
# with PyPI.
set -euo pipefail
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
  -d .whl openai langgraph langgraph-checkpoint-sqlite diskcache z3-solver
# Already on the GPU image (KINDS.md's package list): drop them so that the image's versions stay.
cd .whl && rm -f anyio-* httpx-* httpcore-* h11-* idna-* certifi-* typing_extensions-* \
  tqdm-* charset_normalizer-* urllib3-* requests-* packaging-* pyyaml-* PyYAML-* xxhash-*
du -sh . && ls
