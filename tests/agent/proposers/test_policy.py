"""The built-in policy: catalog members ranked by the simulator, equivalent orders dropped, no
repeats, exhaustion ends the run."""
import pytest

from swizzleperf.agent.proposers.base import ProposalContext, ProposerExhausted
from swizzleperf.agent.proposers.policy import SearchPolicy
from swizzleperf.agent.verification.swizzles import catalog_source, family_members, group_sizes
from swizzleperf.hwspecs import load_spec

ARGS = ["pid", "num_pid_m", "num_pid_n"]


def _fake_score(members):
    """Hit rate by name, and an order id that makes grouped-n:64 the same order as row-major."""
    rates = {"row-major": 0.4, "column-major": 0.3}
    out = []
    for name, source in members:
        same_as = "row-major" if name in ("grouped-n:64", "current") else name
        rate = rates.get(name, 0.5 + 0.01 * len(name))
        out.append({"predicted_l2_hit_rate": rate, "predicted_dram_bytes": 1e9,
                    "predicted_source": "simulated:test", "order_sha1": same_as})
    return out


def _context(hw):
    return ProposalContext(kernel_name="gemm", kernel_source="", target_name="swizzle",
                           target_source=catalog_source("row-major", ARGS), hardware=hw,
                           mode="simulated", problem={}, meta={}, tile_grid=(128, 64),
                           swizzle_args=(128, 64), analysis="", profile={})


def test_group_sizes_follow_the_wave():
    # 132 programs per wave, B blocks twice the bytes of A blocks: G* = sqrt(264) ~ 16.
    sizes = group_sizes(132, (128, 64), aspect=2.0)
    assert 16 in sizes and min(sizes) >= 4 and max(sizes) <= 64
    assert group_sizes(38, (3, 64)) == [2]  # G* = 6.2 and 4 exceed the 3 tile rows


def test_xcd_members_only_on_chiplet_gpus():
    assert not any("xcd" in n for n in family_members(132, (128, 64), 1))
    assert any(n.startswith("xcd-grouped-m") for n in family_members(38, (128, 64), 8))
    # NVIDIA partitions are not chosen by p % 2: no XCD remap there.
    assert not any("xcd" in n for n in family_members(66, (128, 64), 2, dispatch="hashed_domains"))


def test_policy_proposes_in_rank_order_without_repeats_or_equivalents():
    policy = SearchPolicy(arg_names=ARGS, wave=132, aspect=2.0, score=_fake_score)
    context = _context(load_spec("h100"))
    names = []
    with pytest.raises(ProposerExhausted):
        for _ in range(100):
            proposal = policy.propose(context)
            names.append(proposal.name)
            context.history.append({"source": proposal.source})
    assert "row-major" not in names and "grouped-n:64" not in names  # same order as the kernel's
    assert names[-1] == "column-major"  # the lowest predicted hit rate comes last
    assert len(names) == len(set(names))
    assert "ranked 1 of" in SearchPolicy(arg_names=ARGS, wave=132, aspect=2.0,
                                         score=_fake_score).propose(_context(load_spec("h100"))).rationale


@pytest.mark.parametrize("expert", ["column-major", "grouped-m:8"])
def test_the_expert_evaluated_before_the_loop_is_never_proposed(expert):
    """transpose's expert (column-major) came back as candidate 1: the orders the run already
    evaluated are dropped by their tile map, whatever name a catalog member gives the same order."""
    def by_source(members):
        out = _fake_score(members)
        for (name, source), p in zip(members, out):
            if source == catalog_source(expert, ARGS):   # the expert's order under any name
                p["order_sha1"] = expert
        return out
    policy = SearchPolicy(arg_names=ARGS, wave=132, aspect=2.0, score=by_source,
                          known=[catalog_source(expert, ARGS)])
    context = _context(load_spec("h100"))
    names = []
    with pytest.raises(ProposerExhausted):
        for _ in range(100):
            proposal = policy.propose(context)
            names.append(proposal.name)
            context.history.append({"source": proposal.source})
    assert expert not in names and names


def test_a_candidate_handed_back_re_printed_is_still_a_repeat():
    """The loop records a candidate as re-printed from its tree (parentheses dropped, docstring
    changed): the policy still knows it proposed it (transpose proposed grouped-m:8 twice)."""
    import ast
    policy = SearchPolicy(arg_names=ARGS, wave=132, aspect=2.0, score=_fake_score)
    context = _context(load_spec("h100"))
    first = policy.propose(context)
    reprinted = ast.unparse(ast.parse(first.source)).replace('"""', '"""re-printed: ', 1)
    assert reprinted != first.source
    context.history.append({"source": reprinted})
    assert policy.propose(context).name != first.name


def test_on_one_row_of_tiles_the_policy_says_every_member_is_the_kernels_own_order():
    """A 1-D launch of 32768 programs (TritonBench-G destindex_copy_kv2 on an H100, 2026-12-06):
    every member is the kernel's own order; the stop once read "0 tried: the policy has tried every
    catalog member that passed verification"."""
    def all_the_same(members):
        return [{"predicted_l2_hit_rate": 0.0, "predicted_dram_bytes": 1e9, "predicted_source": "simulated:test",
                 "order_sha1": "identity"} for name, _ in members]
    context = _context(load_spec("h100"))
    context.tile_grid = (1, 32768)
    policy = SearchPolicy(arg_names=ARGS, wave=132, aspect=2.0, score=all_the_same)
    with pytest.raises(ProposerExhausted) as stop:
        policy.propose(context)
    members = policy.counts["members"]
    assert members > 0 and str(stop.value) == (
        f"no catalog order differs from the kernel's own: of {members} members, {members} map programs to "
        f"tiles as the kernel's own order (or another member) does on its 1 x 32768 tile grid")


def test_a_member_that_fails_the_check_is_counted_as_such():
    def failing(members):
        return [None if name == "column-major" else
                {"predicted_l2_hit_rate": 0.1, "predicted_dram_bytes": 1e9, "predicted_source": "simulated:test",
                 "order_sha1": "identity"} for name, _ in members]
    policy = SearchPolicy(arg_names=ARGS, wave=132, aspect=2.0, score=failing)
    with pytest.raises(ProposerExhausted) as stop:
        policy.propose(_context(load_spec("h100")))
    assert str(stop.value).endswith("tile grid, 1 got no program -> tile map (not a permutation, or its mapping failed or did not finish in time)"), str(stop.value)
