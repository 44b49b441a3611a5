"""held-prompt's common prefix found region by region from the region cache's records, engine-free.

The shortcut skips regions that are the same list object; everything else must still be compared, so the
cases here are the ones a wrong shortcut gets wrong: a region of the same length with one token changed,
regions equal by value but not the same object, the same regions with a different cut token between them,
a record that no longer describes its list. Each is checked against the full comparison, and a naive
shortcut (regions skipped by length) is shown to get the discriminating cases wrong. Then the records the
real encoder (the tiny model's tokenizer) makes, and held-prompt's choice of a reference with them.
"""

from __future__ import annotations

import random

import pytest

from frank.plugins.front_end import held_prompt as hp
from frank.plugins.front_end.held_prompt import choose_reference, common_prefix, common_prefix_by_regions
from frank.plugins.region_cache import composition
from frank.plugins.region_cache.composition import Composition, composition_of

tokenizers = pytest.importorskip("tokenizers", reason="pip install -e '.[test]' (tokenizers is a test extra)")

from frank.plugins.region_cache.core import RegionCache, RegionEncoder, RustAdapter  # noqa: E402

U, A, S = "<｜User｜>", "<｜Assistant｜>", "<｜System｜>"


def join(regions: list[list[int]], seps: list[int]) -> tuple[list[int], Composition]:
    out: list[int] = []
    for k, region in enumerate(regions):
        out.extend(region)
        if k < len(seps):
            out.append(seps[k])
    return out, Composition(tuple(regions), tuple(seps), len(out))


def naive_by_length(a_joined: Composition, b_joined: Composition) -> int:
    """A wrong shortcut: regions of the same length taken as equal."""
    i = 0
    for x, y, s, t in zip(a_joined.regions, b_joined.regions, a_joined.seps, b_joined.seps):
        if len(x) != len(y) or s != t:
            break
        i += len(x) + 1
    return i


def test_shared_regions_are_skipped_and_the_first_difference_is_found_exactly():
    rng = random.Random(3)
    big, mid = [rng.randrange(90) for _ in range(20_000)], [rng.randrange(90) for _ in range(3_000)]
    a, a_joined = join([big, mid, [1, 2, 3, 4, 5]], [900, 901])
    b, b_joined = join([big, mid, [1, 2, 3, 9, 9, 9], [7] * 50], [900, 901, 902])  # a near-prefix
    assert common_prefix_by_regions(b, b_joined, a, a_joined) == common_prefix(a, b) == 20_000 + 3_000 + 2 + 3
    a2, a2_joined = join([big, mid, [1, 2, 3, 4, 5]], [900, 901])  # a whole prefix of c
    c, c_joined = join([big, mid, [1, 2, 3, 4, 5, 6], [7]], [900, 901, 902])
    assert common_prefix_by_regions(c, c_joined, a2, a2_joined) == len(a2)


def test_a_region_of_the_same_length_with_a_changed_token_is_caught():
    rng = random.Random(4)
    big = [rng.randrange(90) for _ in range(20_000)]
    changed = list(big)
    changed[12_345] = 99
    a, a_joined = join([[5, 6], big, [1, 2]], [900, 901])
    b, b_joined = join([[5, 6], changed, [1, 2]], [900, 901])
    assert common_prefix_by_regions(b, b_joined, a, a_joined) == common_prefix(a, b) == 2 + 1 + 12_345
    assert naive_by_length(b_joined, a_joined) > 12_348  # the case is one a wrong shortcut gets wrong


def test_regions_equal_by_value_but_not_the_same_object_give_the_whole_common_prefix():
    rng = random.Random(5)
    big = [rng.randrange(90) for _ in range(20_000)]
    a, a_joined = join([big, [1, 2, 3]], [900])
    b, b_joined = join([list(big), [1, 2, 3], [4]], [900, 901])  # re-encoded: a copy, equal by value
    assert b_joined.regions[0] is not a_joined.regions[0]
    assert common_prefix_by_regions(b, b_joined, a, a_joined) == common_prefix(a, b) == len(a)


def test_the_same_regions_with_a_different_cut_token_stop_at_the_cut_token():
    big = list(range(5000))
    a, a_joined = join([big, [1, 2, 3]], [900])
    b, b_joined = join([big, [1, 2, 3]], [901])
    assert common_prefix_by_regions(b, b_joined, a, a_joined) == common_prefix(a, b) == 5000
    c, c_joined = join([big], [])  # a prompt that ends where the other has a cut token
    assert common_prefix_by_regions(a, a_joined, c, c_joined) == 5000


def test_a_record_that_does_not_describe_its_list_is_not_used():
    big = list(range(5000))
    a, a_joined = join([big, [1, 2, 3]], [900])
    b, b_joined = join([big, [1, 2, 3, 4]], [900])
    assert common_prefix_by_regions(b, None, a, a_joined) is None
    a.append(7)  # grown after it was recorded
    assert common_prefix_by_regions(b, b_joined, a, a_joined) is None


def test_random_compositions_agree_with_the_full_comparison():
    rng = random.Random(6)
    pool = [[rng.randrange(40) for _ in range(rng.choice((0, 1, 5, 300, 4000)))] for _ in range(12)]
    for _ in range(600):
        n = rng.randrange(1, 7)
        regions = [rng.choice(pool) for _ in range(n)]
        seps = [rng.choice((900, 901)) for _ in range(n - 1)]
        other = list(regions)
        other_seps = list(seps)
        for _ in range(rng.randrange(4)):  # share, copy, change a token, cut, change a cut token, extend
            k = rng.randrange(len(other))
            what = rng.randrange(6)
            if what == 0:
                other[k] = list(other[k])
            elif what == 1 and other[k]:
                changed = list(other[k])
                changed[rng.randrange(len(changed))] = rng.randrange(40)
                other[k] = changed
            elif what == 2:
                other, other_seps = other[: k + 1], other_seps[:k]
            elif what == 3 and other_seps:
                other_seps[rng.randrange(len(other_seps))] = rng.choice((900, 901, 902))
            elif what == 4:
                other = other + [rng.choice(pool)]
                other_seps = other_seps + [900]
            else:
                other[k] = other[k][: rng.randrange(len(other[k]) + 1)]
        a, a_joined = join(regions, seps)
        b, b_joined = join(other, other_seps)
        expected = common_prefix(a, b)
        assert common_prefix_by_regions(a, a_joined, b, b_joined) == expected
        assert common_prefix_by_regions(b, b_joined, a, a_joined) == expected


# ---- the records the real encoder makes, and held-prompt's choice with them ----


def _turns(rng: random.Random, system: str, n: int) -> list[str]:
    """A conversation's prompts: each the last one's messages plus a reply and a new user message, ending
    with the generation prompt (so a turn is a near-prefix of the next, as W01's are)."""
    words = ["alpha", "beta", "gamma", "delta\n", "x = 1;", "def f():", "日本", "🙂"]
    history = S + system
    out = []
    for _ in range(n):
        history += U + " ".join(rng.choice(words) for _ in range(rng.randrange(50, 300)))
        out.append(history + A + "<think>")
        history += A + " ".join(rng.choice(words) for _ in range(rng.randrange(20, 100)))
    return out


def test_the_encoder_records_what_it_joined_and_the_turns_compare_by_regions(tiny_tokenizer_json):
    rng = random.Random(7)
    system = "\n".join(f"line {i} of the context: " + "word " * rng.randrange(5, 30) for i in range(1500))
    cache = RegionCache()
    enc = RegionEncoder(RustAdapter(tokenizers.Tokenizer.from_str(tiny_tokenizer_json)), cache)
    composition.clear()
    prompts = [enc.encode(text) for text in _turns(rng, system, 4)]
    for ids in prompts:
        joined = composition_of(ids)
        assert joined is not None and join(list(joined.regions), list(joined.seps))[0] == ids
        assert composition_of(list(ids)) is None  # a copy has no record: compared in full
    prev, new = prompts[-2], prompts[-1]
    a, b = composition_of(prev), composition_of(new)
    assert a.regions[1] is b.regions[1] and len(a.regions[1]) > 10_000  # the system region: one cached list
    common = common_prefix(new, prev)
    assert len(prev) - 10 < common < len(prev)  # a near-prefix: "<think>" is not in the next turn
    assert common_prefix_by_regions(new, b, prev, a) == common
    # the same prompts encoded again after the cache was cleared: new lists, equal by value, same answer
    cache.clear()
    rng2 = random.Random(7)
    system2 = "\n".join(f"line {i} of the context: " + "word " * rng2.randrange(5, 30) for i in range(1500))
    new2 = enc.encode(_turns(rng2, system2, 4)[-1])
    b2 = composition_of(new2)
    assert new2 == new and b2.regions[1] is not a.regions[1]
    assert common_prefix_by_regions(new2, b2, prev, a) == common


def test_verify_and_affixes_leave_no_record(tiny_tokenizer_json):
    from frank.plugins.region_cache.core import CacheLimits

    text = S + "some context\nmore" + U + "hi" + A
    enc = RegionEncoder(RustAdapter(tokenizers.Tokenizer.from_str(tiny_tokenizer_json)), RegionCache())
    assert composition_of(enc.encode(text, add_special_tokens=True)) is None  # BOS + the join: a new list
    verifying = RegionEncoder(
        RustAdapter(tokenizers.Tokenizer.from_str(tiny_tokenizer_json)), RegionCache(CacheLimits(verify=1.0))
    )
    verifying.adapter.encode_regions = lambda texts: [[5] * 3 for _ in texts]  # a deliberately wrong encode
    ids = verifying.encode(text)
    assert verifying.cache.stats()["mismatches"] == 1 and composition_of(ids) is None  # the fresh list served


def _conversations(rng, tokenizer_json, systems: str, lines: int, turns: int):
    """An encoder through a fresh cache, and one conversation per system prompt, each turn encoded."""
    enc = RegionEncoder(RustAdapter(tokenizers.Tokenizer.from_str(tokenizer_json)), RegionCache())
    composition.clear()
    texts = ["\n".join(f"{c} line {i}: " + "word " * rng.randrange(5, 30) for i in range(lines)) for c in systems]
    return enc, [[enc.encode(t) for t in _turns(rng, text, turns)] for text in texts]


def test_the_reference_chosen_by_regions_is_the_one_chosen_in_full(tiny_tokenizer_json):
    rng = random.Random(8)
    enc, convs = _conversations(rng, tiny_tokenizer_json, systems="abc", lines=600, turns=4)
    held: list[hp.Held] = []
    number = 0
    for turn in range(4):
        for conv in convs:
            ids = conv[turn]
            before = hp.switch.snapshot()["counts"].get("compared_by_regions", 0)
            by_regions = choose_reference(ids, held[-hp.HOLD :], composition_of(ids))
            in_full = choose_reference(ids, [(n, ref, None) for n, ref, _ in held[-hp.HOLD :]])
            assert by_regions == in_full
            if turn:
                assert by_regions is not None and by_regions[1] is conv[turn - 1]
                assert hp.switch.snapshot()["counts"]["compared_by_regions"] > before
            number += 1
            held.append((number, ids, composition_of(ids)))


def test_a_joined_view_reads_the_same_ids_as_its_list_at_every_index_and_slice():
    rng = random.Random(11)
    for _ in range(200):
        regions = [[rng.randrange(50) for _ in range(rng.choice((0, 0, 1, 3, 40)))] for _ in range(rng.randrange(1, 7))]
        ids, joined = join(regions, [900 + k for k in range(len(regions) - 1)])
        view = composition.JoinedView(joined)
        assert len(view) == len(ids)
        assert [view[i] for i in range(len(ids))] == ids and [view[-i] for i in range(1, len(ids) + 1)] == ids[::-1]
        for _ in range(20):
            i, j = rng.randrange(-3, len(ids) + 3), rng.randrange(-3, len(ids) + 3)
            assert view[i:j] == ids[i:j] and view[i:] == ids[i:] and view[:j] == ids[:j]
        for bad in (len(ids), -len(ids) - 1):
            with pytest.raises(IndexError):
                view[bad]
    with pytest.raises(ValueError, match="step 1"):
        view[::2]
    _, joined = join([[1, 2], [3]], [9])
    with pytest.raises(ValueError, match="make 4"):  # a record that does not add up is refused
        composition.JoinedView(Composition(joined.regions, joined.seps, 5))


def test_a_held_turn_is_a_view_of_its_join_and_the_list_is_let_go(tiny_tokenizer_json):
    """hold_sent keeps a JoinedView where the region cache recorded the list (and drops the record, so
    nothing here keeps the 170K-entry list alive past its request), the list itself otherwise (no record, or
    a list changed after its record was made); the choice over views is the choice over lists."""
    rng = random.Random(12)
    enc, convs = _conversations(rng, tiny_tokenizer_json, systems="ab", lines=300, turns=3)
    hp._held.clear()
    as_lists: list[hp.Held] = []
    number = 100
    for turn in range(3):
        for conv in convs:
            ids = conv[turn]
            held = [(n, ref, j) for n, (ref, j) in hp._held.newest_first(7)]
            chosen = choose_reference(ids, held, composition_of(ids))
            in_full = choose_reference(ids, [(n, ref, None) for n, ref, _ in as_lists[-hp.HOLD :]])
            assert (chosen is None) == (in_full is None)
            if chosen is not None:
                assert (chosen[0], len(chosen[1]), chosen[2]) == (in_full[0], len(in_full[1]), in_full[2])
                assert isinstance(chosen[1], composition.JoinedView) and chosen[1][:] == in_full[1]
            number += 1
            hp.hold_sent(7, number, ids)
            as_lists.append((number, ids, None))
            kept, joined = hp._held.get(7, number)
            assert isinstance(kept, composition.JoinedView) and kept.joined is joined and kept[:] == ids
            assert composition_of(ids) is None  # the record was taken: the list is not kept by it
    plain = list(convs[0][0])  # a copy: no record, held as the list itself
    hp.hold_sent(7, 900, plain)
    assert hp._held.get(7, 900) == (plain, None)
    grown = enc.encode("x" * 3 + U + "y")
    grown.append(5)  # changed after its record was made: the record no longer describes it
    hp.hold_sent(7, 901, grown)
    assert hp._held.get(7, 901)[0] is grown and hp._held.get(7, 901)[1] is None
    hp._held.clear()
