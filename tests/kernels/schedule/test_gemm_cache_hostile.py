"""The tuned GEMM configuration cache holds only data (#41): an entry of the wrong shape (``5``,
no ``config``, a knob that is text or zero, alternatives that are not a list) is a miss, as if the
shape had never been tuned there; a file nested 50 000 deep, or of 20 MB, is one line
(``ValueError``) that the distributed evaluator takes as "this cache cannot be read" and goes on
with the next cache. Before, each of these was a ``TypeError``, ``KeyError``,
``ZeroDivisionError`` or ``RecursionError`` from inside the evaluator's constructor."""
from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from swizzleperf.agent.distributed import evaluator as distributed, problems as dist_problems
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.kernels.schedule import gemm_tuning

ROOT = Path(__file__).resolve().parents[3]
AGG = ROOT / "kernels" / "distributed" / "all_gather_gemm.py"
DEVICE = "NVIDIA H100 80GB HBM3"
SHAPE = (8192, 14336, 8192)          # llama70b-up-8k's per-rank GEMM at W = 2
GOOD = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "STREAM_K": 2}
KEY = gemm_tuning.cache_key("gemm/grouped-m:8", DEVICE, 132, "bfloat16", *SHAPE)
DEEP = "[" * 50_000 + "]" * 50_000

BAD_ENTRIES = {
    "5": 5,
    "no config": {"ours_ms": 0.3},
    "a config that is text": {"config": "fast"},
    "a knob as text": {"config": {**GOOD, "BLOCK_M": "128"}},
    "a zero tile": {"config": {**GOOD, "BLOCK_M": 0}},
    "a switch that is a list": {"config": {**GOOD, "STREAM_K": [2]}},
    "a boolean knob": {"config": {**GOOD, "num_warps": True}},
    "ours_ms as text": {"config": GOOD, "ours_ms": "fast"},
    "alternatives that are text": {"config": GOOD, "alternatives": "all"},
    "an alternative without config": {"config": GOOD, "alternatives": [{"ours_ms": 0.1}]},
}


@pytest.mark.parametrize("name", list(BAD_ENTRIES))
def test_an_entry_of_the_wrong_shape_is_a_miss(tmp_path, name):
    path = tmp_path / "gemm_configs.json"
    other = gemm_tuning.cache_key("gemm/grouped-m:8", DEVICE, 132, "bfloat16", 4096, 1280, 8192)
    path.write_text(json.dumps({KEY: BAD_ENTRIES[name], other: {"config": GOOD, "ours_ms": 0.1},
                                "not|a|key|of|ours|x": 7, "gemm|d|sms=lots|t|bfloat16|1x1x1": {"config": GOOD}}))
    assert gemm_tuning.ranked_configs(*SHAPE, "bfloat16", DEVICE, 116, path=path) == []
    assert gemm_tuning.lookup("gemm/grouped-m:8", DEVICE, 132, "bfloat16", *SHAPE, path=path) is None
    assert gemm_tuning.best_config(4096, 1280, 8192, "bfloat16", DEVICE, path=path)["BLOCK_M"] == 128  # the good one
    assert gemm_tuning.best_config(1, 1, 1, "bfloat16", "d", path=path) is None
    gemm_tuning.store(KEY, {"config": GOOD, "ours_ms": 0.2}, path)   # tuned again: replaced
    assert gemm_tuning.lookup("gemm/grouped-m:8", DEVICE, 132, "bfloat16", *SHAPE, path=path) == GOOD


@pytest.mark.parametrize("text, expected", [
    ('{"k": ' + DEEP + "}", "nests 50001 levels deep"),
    ('{"k": "' + "x" * (20 << 20) + '"}', "longer than the 16777216 bytes allowed"),
    ("5", "must be a JSON object, got int"),
    ('{"k": 1e999}', "out of range"),
])
def test_a_file_that_cannot_be_read_is_one_line(tmp_path, text, expected):
    path = tmp_path / "gemm_configs.json"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        gemm_tuning.ranked_configs(*SHAPE, "bfloat16", DEVICE, path=path)
    message = str(info.value)
    assert expected in message and "remove it to start a new one" in message and "\n" not in message, message
    assert len(message) < 600


@pytest.mark.parametrize("text", [json.dumps({KEY: 5}), json.dumps({KEY: {"ours_ms": 1}}),
                                  '{"' + KEY + '": ' + DEEP + "}"], ids=["5", "no config", "50 000 deep"])
def test_the_distributed_evaluator_takes_a_hostile_cache_as_a_miss(tmp_path, monkeypatch, text):
    from swizzleperf import hwspecs
    path = tmp_path / "gemm_configs.json"
    path.write_text(text)
    spec = load_spec(AGG)
    knobs, source = dist_problems.tuned_gemm(spec, spec.problems["llama70b-up-8k"], 2, "bfloat16", DEVICE, 132,
                                             caches=(path,))
    assert knobs == {} and "the kernel's defaults" in source and "\n" not in source
    monkeypatch.setenv("SWIZZLEPERF_GEMM_CACHE", str(path))
    target = distributed.DistTarget(hwspecs.load_spec("h100"), 2, "measured", "two H100s (test)",
                                    types.SimpleNamespace(name=DEVICE))
    ev = distributed.DistEvaluator(kernel_path=AGG, module_source=AGG.read_text(), spec=spec,
                                   problem_name="llama70b-up-8k", world_size=2, target=target,
                                   candidates_dir=tmp_path / "c")
    assert ev.meta(distributed.default_candidate(ev.spec))   # built; the committed cache or the defaults
