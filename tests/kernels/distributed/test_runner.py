"""kernels/distributed/runner.py's ``launch_outputs`` on CPU, with a one-rank stand-in for the
heap and a launch of one line: the back-to-back part scales the linear input and tells a launch
that uses it from one that reads a stale copy."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from swizzleperf.kernels.distributed import runner


class _Heap:
    def barrier(self) -> None:
        pass

    def check(self) -> None:
        pass


def _outputs(launch_reads_b_now: bool) -> list:
    spec = SimpleNamespace(output=lambda state: state["out"], linear_input="b")
    inputs = {"b": torch.tensor([1.0, -3.0, 0.5])}
    state = {"b": inputs["b"], "out": torch.empty(3), "stale": inputs["b"].clone()}

    def launch() -> None:
        state["out"].copy_(2 * (state["b"] if launch_reads_b_now else state["stale"]))

    return runner.launch_outputs(spec, _Heap(), state, inputs, launch, 2, lambda: None,
                                 back_to_back=True), inputs


def test_back_to_back_scales_the_linear_input_and_restores_it():
    outputs, inputs = _outputs(True)
    expected = torch.tensor([2.0, -6.0, 1.0])
    assert [scale for _, scale in outputs] == [1.0, -2.0, -1.0, 4.0, 1.0]
    assert all(torch.equal(out, scale * expected) for out, scale in outputs)
    assert torch.equal(inputs["b"], torch.tensor([1.0, -3.0, 0.5]))   # the product of the factors is 1


def test_a_launch_that_reads_a_stale_buffer_is_off_by_its_scale():
    outputs, _ = _outputs(False)
    expected = torch.tensor([2.0, -6.0, 1.0])
    errors = [runner.relative_error(out, scale * expected) for out, scale in outputs]
    # |1 - s| / |s| for the scales -2, -1, 4; the last launch is at scale 1 again, so a stale
    # read there would not show (the ones before it do)
    assert errors == [0.0, 1.5, 2.0, 0.75, 0.0]
