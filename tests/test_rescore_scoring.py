"""Chunked scoring equals full-logits scoring: tiny qwen2 / qwen3 / qwen3_moe / qwen3_5_text models at Qwen3's
real vocabulary, real Qwen3 tokenizer, real ChatML token streams; odd chunk sizes and padded batches."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from helpers.rescore_fixtures import (  # noqa: E402
    QWEN3_VOCAB,
    QWEN35_VOCAB,
    build_tiny_model,
    qwen3_tokenizer,
    qwen35_tokenizer,
)
from helpers.verl_lines import output_of, xml_call  # noqa: E402

from trajlab.ingest.turns import split_turns  # noqa: E402
from trajlab.rescore.control_tokens import load_control_rules, resolve_control_set  # noqa: E402
from trajlab.rescore.scoring import ChunkedScorer, ScoreRequest, plan_batches  # noqa: E402
from trajlab.rescore.stream import TrajectoryText, build_streams  # noqa: E402

ARCHS = ("qwen2", "qwen3", "qwen3_moe", "qwen3_5_text")


def _streams(tok=None):
    tok = tok or qwen3_tokenizer()
    good = xml_call("search_web", queries=["japan gdp 2024"])
    bad = good.replace("</parameter>", '</parameter v2="">')
    texts = []
    for i, (a0, a1) in enumerate([(good, "The GDP was 4.1 trillion USD."), (bad, "<think>\nok\n</think>\n\nDone.")]):
        inp = f"system\nYou call tools.\nuser\nQuestion {i}: what is Japan's GDP?\nassistant\n"
        out = output_of(["<think>\nsearch first\n</think>\n\n" + a0, a1], ["result: 4.1T USD"])
        turns = [(t.index, t.role, t.char_start, t.char_end) for t in split_turns(out)]
        texts.append(TrajectoryText(f"t{i}", inp, out, turns, tool_format="qwen3_coder"))
    streams = build_streams(texts, tok, lambda tr, ti, text: [])
    return tok, streams


def _reference(model, ids: np.ndarray, positions: np.ndarray, ctrl: list[int]):
    """Full logits of the whole sequence (rows at the scored positions), log_softmax in float64: the truth."""
    with torch.inference_mode():
        logits = model(torch.from_numpy(ids)[None]).logits[0][torch.from_numpy(positions - 1)].double()
    lp = torch.log_softmax(logits, -1)
    tgt = torch.from_numpy(ids[positions])
    return {
        "logprob": lp.gather(1, tgt[:, None]).squeeze(1).numpy(),
        "entropy": (-(lp.exp() * lp).sum(-1)).numpy(),
        "top_id": lp.argmax(-1).numpy(),
        "top_prob": lp.max(-1).values.exp().numpy(),
        "control_probs": lp[:, ctrl].exp().numpy(),
        "lp": lp,
    }


@pytest.mark.parametrize("arch", [*ARCHS, "qwen3_5_text@qwen3.5"])
@pytest.mark.slow  # > 5 s on 2 shared cores
def test_chunked_equals_full_logits(arch):
    if arch.endswith("@qwen3.5"):  # the Qwen3.5/3.6 tokenizer and vocabulary (248,320)
        arch = arch.split("@")[0]
        tok, streams = _streams(qwen35_tokenizer())
        model = build_tiny_model(arch, QWEN35_VOCAB)
    else:
        tok, streams = _streams()
        model = build_tiny_model(arch, QWEN3_VOCAB)
    cset = resolve_control_set(tok, load_control_rules())
    fmt = cset.format_index("qwen3_coder")
    reqs = []
    for st in streams:
        # extra targets: the <|im_end|> id and a control id at two scored positions
        im_end = tok.convert_tokens_to_ids("<|im_end|>")
        reqs.append(ScoreRequest(st.ids, st.positions, fmt, [(0, im_end), (st.n_scored - 1, cset.ids[0])]))
    # chunk 7 crosses sequence borders; max_batch_tokens forces a padded batch of both sequences
    scorer = ChunkedScorer(model, cset.ids, cset.mask_rows(), chunk=7, max_batch_tokens=10_000)
    results = scorer.score(reqs)
    mask = np.array(cset.mask_rows()[fmt])
    for st, req, res in zip(streams, reqs, results, strict=True):
        ref = _reference(model, st.ids, st.positions, cset.ids)
        np.testing.assert_allclose(res.logprob, ref["logprob"], atol=1e-4, rtol=0)
        np.testing.assert_allclose(res.entropy, ref["entropy"], atol=1e-4, rtol=0)
        np.testing.assert_allclose(res.top_prob, ref["top_prob"], atol=1e-5, rtol=0)
        assert (res.top_id == ref["top_id"]).mean() > 0.99  # exact ties aside
        np.testing.assert_allclose(res.control_probs, ref["control_probs"], atol=1e-6, rtol=1e-4)
        np.testing.assert_allclose(res.control_mass, (ref["control_probs"] * mask).sum(-1), atol=1e-6, rtol=1e-4)
        exp_top = np.where(mask[None, :], ref["control_probs"], -1).argmax(-1)
        assert (res.top_control == exp_top).all()
        lp = ref["lp"]
        for k, (j, tid) in enumerate(req.extra):
            assert res.extra_logprob[k] == pytest.approx(float(lp[j, tid]), abs=1e-4)


def test_chunked_matches_fp32_full_logits_log_softmax():
    """The same check against the naive fp32 path the benchmark uses (model(ids).logits -> log_softmax)."""
    tok, streams = _streams()
    model = build_tiny_model("qwen3", QWEN3_VOCAB, seed=3)
    st = streams[1]
    res = ChunkedScorer(model, [151645], [[True]], chunk=33).score([ScoreRequest(st.ids, st.positions)])[0]
    with torch.inference_mode():
        lp = torch.log_softmax(model(torch.from_numpy(st.ids)[None]).logits[0].float(), -1)
    ref = lp[torch.from_numpy(st.positions - 1), torch.from_numpy(st.ids[st.positions])].numpy()
    np.testing.assert_allclose(res.logprob, ref, atol=1e-4, rtol=0)


def test_padding_does_not_change_scores():
    """A sequence scored alone equals the same sequence scored in a right-padded batch."""
    _, streams = _streams()
    model = build_tiny_model("qwen3_5_text", QWEN3_VOCAB, seed=1)
    short = ScoreRequest(streams[0].ids[:120], streams[0].positions[streams[0].positions < 120])
    long = ScoreRequest(streams[1].ids, streams[1].positions)
    alone = ChunkedScorer(model, [151645], [[True]], chunk=64, max_batch_tokens=1).score([short])[0]
    batched = ChunkedScorer(model, [151645], [[True]], chunk=64, max_batch_tokens=10**6).score([long, short])[1]
    np.testing.assert_allclose(alone.logprob, batched.logprob, atol=1e-4, rtol=0)
    np.testing.assert_allclose(alone.entropy, batched.entropy, atol=1e-4, rtol=0)


def test_plan_batches_bounds_padded_tokens():
    lengths = [100, 30, 2000, 64, 64, 900, 1]
    batches = plan_batches(lengths, 1024)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert longest * len(b) <= 1024 or len(b) == 1
    assert batches[0] == [2]  # longer than the budget: alone, and first (longest first)


def test_no_vocab_sized_tensor_is_materialised():
    """Watch every tensor op (a dispatch mode): no result is larger than `chunk x vocabulary`."""
    from torch.utils._python_dispatch import TorchDispatchMode

    _, streams = _streams()
    model = build_tiny_model("qwen3", QWEN3_VOCAB)
    weight_storage = model.get_output_embeddings().weight.untyped_storage().data_ptr()

    class Biggest(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() != weight_storage:
                    Biggest.largest = max(Biggest.largest, t.numel())  # views of the weights aside
            return out

    st = streams[0]
    chunk = 8
    assert st.n_scored > 4 * chunk
    scorer = ChunkedScorer(model, [151645], [[True]], chunk=chunk)
    with Biggest():
        res = scorer.score([ScoreRequest(st.ids, st.positions)])[0]
    assert res.logprob.shape == (st.n_scored,)
    assert Biggest.largest <= chunk * QWEN3_VOCAB


def test_token_mass_equals_full_softmax_sums():
    """The per-group probability sums (discovered tokens) equal full-softmax sums over the group's positions."""
    tok, streams = _streams()
    model = build_tiny_model("qwen3", QWEN3_VOCAB, seed=2)
    reqs = []
    for k, st in enumerate(streams):
        g = np.full(st.n_scored, -1, np.int64)
        g[k::3] = 0
        g[k + 1 :: 3] = 1
        reqs.append(ScoreRequest(st.ids, st.positions, groups=g))
    scorer = ChunkedScorer(model, [151645], [[True]], chunk=11, max_batch_tokens=10_000, mass_groups=2)
    scorer.score(reqs)
    mass = scorer.take_mass()
    want = np.zeros_like(mass)
    for st, req in zip(streams, reqs, strict=True):
        p = _reference(model, st.ids, st.positions, [151645])["lp"].exp().numpy()
        for grp in (0, 1):
            want[grp] += p[req.groups == grp].sum(0)
    assert mass.shape == (2, QWEN3_VOCAB)
    np.testing.assert_allclose(mass, want, atol=1e-5, rtol=1e-4)
    assert mass.sum() == pytest.approx(sum(int((r.groups >= 0).sum()) for r in reqs), rel=1e-5)
    assert not scorer.take_mass().any()  # taken: the running sum starts again
