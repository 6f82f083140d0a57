"""The benchmark (`python -m utils.bench`): structure and sanity of one quick run; no timed asserts."""

import gc
import math
import weakref

import pytest
import torch

from utils.attention import MultiHeadSelfAttention
from utils.bench import (
    attention_cases,
    bench_training,
    format_table,
    main,
    run_benchmark,
    saved_bytes,
    set_attention_implementation,
)

IMPLEMENTATIONS = {"explicit", "fused", "mha"}


THREADS_BEFORE = torch.get_num_threads()


@pytest.fixture(scope="module")
def results():
    return run_benchmark(quick=True, threads=1)  # one thread: steadier on a busy machine


def attention_rows(results) -> dict[tuple[int, int], dict[str, dict]]:
    """{(tokens, dim): {implementation: row}} for the attention rows."""
    rows = {}
    for r in results:
        if r["benchmark"] == "attention":
            rows.setdefault((r["tokens"], r["dim"]), {})[r["implementation"]] = r
    return rows


def test_every_case_has_every_implementation(results):
    rows = attention_rows(results)
    assert set(rows) == {(17, 64), (65, 64), (257, 64)}  # the quick run: no 1025 tokens, no ViT-B/16
    for case, by_implementation in rows.items():
        assert set(by_implementation) == IMPLEMENTATIONS, case
    training = [r for r in results if r["benchmark"] == "training"]
    assert {r["implementation"] for r in training} == {"explicit", "fused"}
    assert all(r["tokens"] == 65 and r["dim"] == 64 for r in training)  # ViTConfig.tiny()


def test_numbers_are_finite_and_ratios_positive(results):
    keys = ["ms", "speedup", "saved_mb", "memory_ratio"]
    for r in results:
        extra = ["infer_ms", "infer_speedup"] if r["benchmark"] == "attention" else ["images_per_s"]
        for key in keys + extra:
            assert math.isfinite(r[key]) and r[key] > 0, (r["benchmark"], r["implementation"], key, r[key])
        if r["implementation"] == "explicit":  # the ratios are relative to the explicit implementation
            assert r["speedup"] == 1.0 and r["memory_ratio"] == 1.0
    for r in results:
        if r["benchmark"] == "training":
            assert r["images_per_s"] == pytest.approx(r["batch"] / (r["ms"] / 1e3))


def test_the_explicit_implementation_keeps_the_weights_and_grows_quadratically(results):
    rows = attention_rows(results)
    for (tokens, _dim), by_implementation in rows.items():
        e, f = by_implementation["explicit"], by_implementation["fused"]
        weights_bytes = e["batch"] * e["heads"] * tokens**2 * 4  # (B, heads, N, N) float32
        assert e["saved_bytes"] >= weights_bytes  # the softmax weights are kept for backward
        assert f["saved_bytes"] < e["saved_bytes"]
        assert by_implementation["mha"]["saved_bytes"] < e["saved_bytes"]

    def per_image(tokens, implementation):
        row = rows[tokens, 64][implementation]
        return row["saved_bytes"] / row["batch"]

    # 4x the patches (65 -> 257 tokens): N^2 gives 16x, N gives 4x; the explicit path's linear
    # activations (x, qkv, the merged heads) still weigh at 257 tokens, so it grows by 9x here
    explicit_growth = per_image(257, "explicit") / per_image(65, "explicit")
    fused_growth = per_image(257, "fused") / per_image(65, "fused")
    assert explicit_growth > 2 * fused_growth, (explicit_growth, fused_growth)
    assert 3.5 < fused_growth < 4.5, fused_growth


def test_training_the_tiny_vit_keeps_less_when_fused(results):
    training = {r["implementation"]: r for r in results if r["benchmark"] == "training"}
    e, f = training["explicit"], training["fused"]
    assert f["saved_bytes"] < e["saved_bytes"]
    assert f["memory_ratio"] == pytest.approx(f["saved_bytes"] / e["saved_bytes"])


def test_the_table_shows_every_case(results):
    table = format_table(results)
    lines = table.splitlines()
    for tokens in (17, 65, 257):
        assert any(line.split()[:1] == [str(tokens)] for line in lines), tokens
    assert "images/s" in table
    data = [line for line in lines if line[:6].strip().isdigit()]
    assert len({len(line) for line in data}) == 1  # aligned


def test_run_benchmark_restores_the_thread_count(results):
    assert torch.get_num_threads() == THREADS_BEFORE


def test_token_counts_are_the_courses():
    cases = attention_cases()
    # 8x8 digits / 2 px, 32 px / 4 px (the tiny ViT), 64 px / 4 px, 128 px / 4 px, plus cls; ViT-B/16
    assert [(c["tokens"], c["dim"], c["heads"]) for c in cases] == [
        (17, 64, 4),
        (65, 64, 4),
        (257, 64, 4),
        (1025, 64, 4),
        (197, 768, 12),
    ]
    assert all(c["batch"] * (c["tokens"] - 1) == 2048 for c in cases[:4])  # equal linear work
    quick = [(c["tokens"], c["dim"], c["batch"]) for c in attention_cases(quick=True)]
    assert quick == [(17, 64, 128), (65, 64, 32), (257, 64, 8)]  # lesson 6 on Binder: no 100 MB at once


def test_saved_bytes_counts_each_storage_once_and_skips_parameters():
    layer = MultiHeadSelfAttention(8, 2)
    x = torch.randn(3, 5, 8, requires_grad=True)
    explicit = saved_bytes(lambda: set_attention_implementation(layer, "explicit")(x), exclude=list(layer.parameters()))
    # x (3*5*8), qkv (3*5*24, q, k and v are views of it), weights (3*2*5*5), merged heads (3*5*8)
    assert explicit == 4 * (3 * 5 * 8 + 3 * 5 * 24 + 3 * 2 * 5 * 5 + 3 * 5 * 8)
    with_params = saved_bytes(lambda: layer(x))
    assert with_params == explicit + 4 * (8 * 8 + 24 * 8)  # the qkv and proj weights


def test_saved_bytes_frees_the_graph_it_measured():
    """Softmax saves its own output for backward: packed as itself, that output would hold its own
    graph, a cycle Python's garbage collector cannot see, and every measured run would stay in memory."""
    x = torch.randn(4, 64, 64, requires_grad=True)
    outputs = []

    def run():
        out = x.softmax(dim=-1)  # (4, 64, 64), saved by softmax's backward
        outputs.append(weakref.ref(out))
        return out

    assert saved_bytes(run) == 4 * 64 * 64 * 4
    gc.collect()
    assert outputs[0]() is None, "the measured output (and its graph) is still alive"


def test_set_attention_implementation_sets_every_layer_and_rejects_unknown_names():
    model = torch.nn.Sequential(MultiHeadSelfAttention(8, 2), MultiHeadSelfAttention(8, 2))
    assert set_attention_implementation(model, "fused") is model
    assert [layer.implementation for layer in model] == ["fused", "fused"]
    with pytest.raises(ValueError, match="implementation must be one of"):
        set_attention_implementation(model, "flash")


def test_training_is_timed_with_the_library_train_step(monkeypatch):
    import utils.bench

    calls = []
    library_step = utils.bench.train_step
    monkeypatch.setattr(utils.bench, "train_step", lambda *args, **kw: calls.append(1) or library_step(*args, **kw))
    rows = bench_training(batch=4, warmup=1, repeats=1)
    assert len(calls) == 2 * 2  # explicit and fused, one warm-up and one timed step each
    assert [r["implementation"] for r in rows] == ["explicit", "fused"]


def test_main_prints_the_machine_and_the_table(results, capsys, monkeypatch):
    import utils.bench

    calls = []
    monkeypatch.setattr(utils.bench, "run_benchmark", lambda **kwargs: calls.append(kwargs) or results)
    try:
        assert main(["--quick", "--threads", "1"]) is results
    finally:
        torch.set_num_threads(THREADS_BEFORE)
    assert calls == [dict(quick=True, verbose=True)]
    out = capsys.readouterr().out
    assert out.startswith(f"ViT from Scratch attention benchmark: torch {torch.__version__}, threads 1 of")
    assert format_table(results) in out
    assert "quick run" in out


@pytest.mark.parametrize("threads", [0, 1.5, "2", -1])
def test_run_benchmark_refuses_a_thread_count_that_is_no_count_before_measuring(threads):
    with pytest.raises(ValueError, match="threads must be a whole number"):
        run_benchmark(quick=True, threads=threads)
    assert torch.get_num_threads() == THREADS_BEFORE


def test_the_benchmark_command_refuses_zero_threads(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--quick", "--threads", "0"])
    assert stop.value.code == 2
    assert "threads must be a whole number" in capsys.readouterr().err
