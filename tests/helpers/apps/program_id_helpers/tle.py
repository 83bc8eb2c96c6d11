"""Another module's program-id function, in the manner of FlagGems' triton_lang_extension."""
import triton
import triton.language as tl


@triton.jit
def program_id(axis: tl.constexpr):
    return tl.program_id(axis).to(tl.int64)
