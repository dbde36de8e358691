"""GPU checks of the scorer (skipped without CUDA): fp32 on GPU equals fp32 on CPU, bf16 chunked equals bf16
full logits, and an end-to-end rescore on ``cuda`` matches the CPU run."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

from helpers.rescore_fixtures import QWEN3_VOCAB, build_tiny_model  # noqa: E402
from helpers.rescore_scan_data import checkpoints, scan_run  # noqa: E402

from trajlab.rescore.scoring import ChunkedScorer, ScoreRequest  # noqa: E402


def _requests(n=3, length=700, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        L = length - 100 * k
        ids = rng.integers(0, 151_000, L)
        out.append(ScoreRequest(ids, np.sort(rng.choice(np.arange(1, L), L // 2, replace=False))))
    return out


def test_gpu_fp32_equals_cpu_fp32():
    model = build_tiny_model("qwen3", QWEN3_VOCAB)
    reqs = _requests()
    ctrl = [151643, 151644, 151645, 151657, 151658]
    cpu = ChunkedScorer(model, ctrl, [[True] * 5], chunk=100).score(reqs)
    gpu = ChunkedScorer(model.to("cuda"), ctrl, [[True] * 5], chunk=333, device="cuda").score(reqs)
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(a.logprob, b.logprob, atol=1e-3)
        np.testing.assert_allclose(a.entropy, b.entropy, atol=1e-3)
        np.testing.assert_allclose(a.control_mass, b.control_mass, atol=1e-5)


def test_gpu_bf16_chunked_equals_bf16_full_logits():
    model = build_tiny_model("qwen3_5_text", QWEN3_VOCAB).to("cuda", torch.bfloat16)
    req = _requests(1)[0]
    res = ChunkedScorer(model, [151645], [[True]], chunk=128, device="cuda").score([req])[0]
    with torch.inference_mode():
        ids = torch.from_numpy(req.ids)[None].cuda()
        lp = torch.log_softmax(model(ids).logits[0].float(), -1)
    p = torch.from_numpy(req.positions).cuda()
    ref = lp[p - 1, ids[0, p]].cpu().numpy()
    np.testing.assert_allclose(res.logprob, ref, atol=2e-2)


def test_rescore_on_cuda_matches_cpu(tmp_path):
    import pyarrow.parquet as pq

    from trajlab.rescore import RescoreOptions, rescore

    out = scan_run(tmp_path)
    a, _ = checkpoints(tmp_path)
    rescore(out, [a], RescoreOptions(device="cpu", progress=False))
    cpu = pq.read_table(out / "rescore" / "ckpt_a" / "tokens.parquet").to_pandas().sort_values(["trajectory_id", "position"])
    rescore(out, [a], RescoreOptions(device="cuda", dtype="float32", progress=False))
    gpu = pq.read_table(out / "rescore" / "ckpt_a" / "tokens.parquet").to_pandas().sort_values(["trajectory_id", "position"])
    assert (cpu.token_id.to_numpy() == gpu.token_id.to_numpy()).all()
    np.testing.assert_allclose(cpu.logprob.to_numpy(), gpu.logprob.to_numpy(), atol=1e-3)
