"""A candidate is never verified as other text than its own (red team #41j, K02).

A kernel file declared Latin-1 (``# -*- coding: latin-1 -*-``) and a reply whose docstring holds
characters Latin-1 cannot encode (the euro sign, a CJK character, an emoji): the candidate was
written as UTF-8 bytes under the Latin-1 coding line, so the worker verified the mojibake Python
read from it, and ``--in-place`` then said the verified text "changed after verification". Now the
splice refuses such a candidate with a reason that names the encoding and the characters (the model
is told), and ``write_sealed`` never writes a text in other bytes than its declared encoding."""
from __future__ import annotations

from pathlib import Path

import pytest

from swizzleperf.agent.verification.candidate import CandidateError, splice
from swizzleperf.agent.verification.evaluate import Evaluator
from swizzleperf.sandbox.write_back import digest, source_bytes, source_text, verified_text, write_sealed

ARGS = ["pid", "num_pid_m", "num_pid_n"]

MODULE = ("# -*- coding: latin-1 -*-\n"
          "# Ein Kernel f\xfcr Matrizen, gepr\xfcft (Gr\xf6\xdfe egal)\n"
          "import triton\n"
          "import triton.language as tl\n"
          "\n"
          "\n"
          "@triton.jit\n"
          "def swizzle(pid, num_pid_m, num_pid_n):\n"
          "    return pid // num_pid_n, pid % num_pid_n\n")


def _candidate(doc: str, local: str = "group_id") -> str:
    return (f'@triton.jit\n'
            f'def swizzle(pid, num_pid_m, num_pid_n):\n'
            f'    """{doc}"""\n'
            f'    GROUP_SIZE_N: tl.constexpr = 32\n'
            f'    num_pid_in_group = GROUP_SIZE_N * num_pid_m\n'
            f'    {local} = pid // num_pid_in_group\n'
            f'    first_pid_n = {local} * GROUP_SIZE_N\n'
            f'    group_size_n = tl.minimum(num_pid_n - first_pid_n, GROUP_SIZE_N)\n'
            f'    pid_n = first_pid_n + (pid % num_pid_in_group) % group_size_n\n'
            f'    pid_m = (pid % num_pid_in_group) // group_size_n\n'
            f'    return pid_m, pid_n\n')


UNENCODABLE = _candidate("grouped-n \u20ac 32 \u4e2d \U0001F600 order")   # the red team's reply


def _evaluator(tmp_path: Path, module: str = MODULE) -> Evaluator:
    kernel = tmp_path / "kernel.py"
    kernel.write_bytes(source_bytes(module))
    return Evaluator(kernel_path=kernel, module_source=source_text(kernel.read_bytes()), target_name="swizzle",
                     arg_names=ARGS, candidates_dir=tmp_path / "candidates", verify_config=None, measurer=None)


def test_a_candidate_the_kernels_encoding_cannot_hold_is_refused_naming_encoding_and_characters():
    with pytest.raises(CandidateError) as info:
        splice(MODULE, "swizzle", UNENCODABLE)
    message = str(info.value)
    assert "latin-1" in message
    for char in ("\u20ac", "\u4e2d", "\U0001F600"):
        assert char in message
    assert "\n" not in message


def test_a_local_name_the_encoding_cannot_hold_is_refused_too():
    with pytest.raises(CandidateError, match="latin-1.*\u03c0"):
        splice(MODULE, "swizzle", _candidate("grouped", local="\u03c0"))


def test_prepare_records_the_refusal_and_writes_nothing(tmp_path):
    prepared = _evaluator(tmp_path).prepare("k02", UNENCODABLE)
    assert prepared["verdict"] == "INVALID"
    assert "latin-1" in prepared["reason"] and "\u20ac" in prepared["reason"]
    assert prepared["kernel_file"] == ""
    assert not list(tmp_path.glob("candidates/*"))


@pytest.mark.parametrize("doc", ["grouped-n 32 order", "grouped-n \xe9t\xe9 \xa3 32 order"])
def test_an_ascii_or_latin1_candidate_is_verified_as_the_text_it_is(tmp_path, doc):
    """ASCII and Latin-1 characters pass, and the sealed file reads back as the very text whose
    digest was kept (what ``--in-place`` checks)."""
    prepared = _evaluator(tmp_path).prepare("k02", _candidate(doc))
    assert prepared["verdict"] == ""
    path = Path(prepared["kernel_file"])
    assert path.read_bytes().startswith(b"# -*- coding: latin-1 -*-\n# Ein Kernel f\xfcr")
    text, why = verified_text(path, prepared["kernel_sha256"])
    assert why == "verified" and doc in text
    assert digest(source_text(path.read_bytes())) == prepared["kernel_sha256"]


def test_a_utf8_kernel_takes_every_character(tmp_path):
    module = MODULE.replace("# -*- coding: latin-1 -*-\n", "")
    prepared = _evaluator(tmp_path, module).prepare("k02", UNENCODABLE)
    assert prepared["verdict"] == ""
    text, why = verified_text(Path(prepared["kernel_file"]), prepared["kernel_sha256"])
    assert why == "verified" and "\u20ac" in text


def test_write_sealed_never_writes_other_text_than_its_own(tmp_path):
    """A text its declared encoding cannot hold is refused, not written as UTF-8 (which would read
    back as other text under its coding line); whatever stood there is left."""
    path = tmp_path / "sealed.py"
    write_sealed(path, "x = 1\n")
    with pytest.raises(ValueError, match="iso-8859-1|latin-1"):
        write_sealed(path, "# -*- coding: latin-1 -*-\nx = '\u20ac'\n")
    assert path.read_text() == "x = 1\n"
