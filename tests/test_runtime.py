"""Seeding, the CPU thread count, device choice and a model's mode."""

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tools.notebook_budget import resident_mb
from utils import runtime
from utils.runtime import cpu_kind, eval_mode, get_device, release_memory, set_seed, torch_threads


def draw():
    return torch.randn(5), np.random.rand(5), [random.random() for _ in range(5)]


def test_set_seed_repeats_torch_numpy_and_python():
    assert set_seed(123) == 123
    first = draw()
    set_seed(123)
    second = draw()
    assert torch.equal(first[0], second[0])
    assert np.array_equal(first[1], second[1])
    assert first[2] == second[2]
    set_seed(124)
    third = draw()
    assert not torch.equal(first[0], third[0])
    assert not np.array_equal(first[1], third[1])
    assert first[2] != third[2]


@pytest.mark.parametrize(
    ("seed", "words"),
    [(-1, "got -1"), (1.5, r"got 1.5 \(float\)"), ("0", r"got '0' \(str\)"), (2**32, "got 4294967296"), (True, "bool")],
)
def test_set_seed_names_a_seed_that_is_no_seed(seed, words):
    with pytest.raises(ValueError, match=rf"seed must be a whole number.*{words}"):
        set_seed(seed)


def test_set_seed_default_is_zero():
    assert set_seed() == 0
    first = torch.randn(3)
    torch.manual_seed(0)
    assert torch.equal(first, torch.randn(3))


def test_get_device_defaults_to_cpu_without_an_accelerator(monkeypatch):
    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("an accelerator is available here, so the default device is not the CPU")
    monkeypatch.delenv("VIT_DEVICE", raising=False)
    assert get_device() == torch.device("cpu")


def test_get_device_by_name(monkeypatch):
    monkeypatch.delenv("VIT_DEVICE", raising=False)
    device = get_device("cpu")
    assert isinstance(device, torch.device) and device.type == "cpu"


def unavailable_device() -> str:
    for name, available in [("cuda", torch.cuda.is_available()), ("mps", torch.backends.mps.is_available())]:
        if not available:
            return name
    pytest.skip("both CUDA and MPS are available here")


def test_get_device_rejects_an_unavailable_device(monkeypatch):
    monkeypatch.delenv("VIT_DEVICE", raising=False)
    name = unavailable_device()
    with pytest.raises(ValueError, match=rf"device '{name}' is not available here.*'cpu'"):
        get_device(name)


def test_get_device_honours_vit_device(monkeypatch):
    monkeypatch.setenv("VIT_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
    name = unavailable_device()
    monkeypatch.setenv("VIT_DEVICE", name)
    with pytest.raises(ValueError, match=rf"device '{name}' is not available"):
        get_device()
    assert get_device("cpu") == torch.device("cpu")  # an explicit name wins over the variable


def test_get_device_names_a_misspelt_device():
    with pytest.raises(ValueError, match=r"unknown device 'gpu'.*'cuda'"):
        get_device("gpu")


def test_an_empty_vit_device_means_choose(monkeypatch):
    monkeypatch.setenv("VIT_DEVICE", "")
    assert isinstance(get_device(), torch.device)


def modes(model: nn.Module) -> list[bool]:
    return [module.training for module in model.modules()]


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_switches_dropout_off_and_restores_the_mode(training):
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).train(training)
    x = torch.ones(1000, 4)
    with eval_mode(model) as inside:
        assert inside is model and modes(model) == [False, False, False]
        assert torch.equal(model(x), model[0](x))  # no dropout
    assert modes(model) == [training] * 3


def test_eval_mode_restores_each_submodule_and_survives_an_exception():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Dropout(0.1)).train()
    model[2].eval()  # a frozen part stays frozen afterwards
    with pytest.raises(RuntimeError, match="boom"), eval_mode(model):
        raise RuntimeError("boom")
    assert modes(model) == [True, True, True, False]


def test_eval_mode_wants_a_module():
    with pytest.raises(ValueError, match="nn.Module, got function"), eval_mode(lambda x: x):
        pass


def test_torch_threads_sets_the_count_and_restores_it_also_after_an_error():
    before = torch.get_num_threads()
    with torch_threads(1) as threads:
        assert threads == torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError, match="boom"), torch_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
    with torch_threads(None) as threads:  # None: torch's own choice, untouched
        assert threads == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, 10**6])
def test_torch_threads_refuses_a_count_that_is_no_positive_whole_number(bad):
    with pytest.raises(ValueError, match="threads"), torch_threads(bad):
        pass


def test_a_fixed_thread_count_repeats_a_training_run_bit_for_bit_and_fit_restores_torchs_count():
    """The reason fit and evaluate default to one thread: the count decides the order of additions.
    Ten steps of the tiny ViT left on torch's own count (threads=None) end with other weights on 1
    and on 2 threads (this shows the test can tell); with fit's default they are identical, whatever
    torch was set to around them."""
    from utils import VisionTransformer, ViTConfig
    from utils.training import fit

    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.rand(256, 1, 8, 8, generator=generator), torch.arange(256) % 10)

    def trained(threads_around: int, **options) -> torch.Tensor:
        torch.set_num_threads(threads_around)
        set_seed(0)
        model = VisionTransformer(ViTConfig.tiny(image_size=8, patch_size=2, in_channels=1, num_classes=10))
        fit(model, data, steps=10, batch_size=128, progress=False, **options)
        assert torch.get_num_threads() == threads_around
        return torch.cat([parameter.detach().flatten() for parameter in model.parameters()])

    before = torch.get_num_threads()
    try:
        assert not torch.equal(trained(1, threads=None), trained(2, threads=None))
        assert torch.equal(trained(1), trained(2))
    finally:
        torch.set_num_threads(before)


def test_cpu_kind_names_the_processor_the_vector_unit_and_any_pin(monkeypatch):
    for name in ("MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    plain = cpu_kind()
    assert plain.endswith(f", torch {torch.backends.cpu.get_cpu_capability()}") and len(plain) > len(", torch ") + 2
    monkeypatch.setenv("MKL_CBWR", "AVX2")  # another code path in MKL: another kind, as far as the last bits go
    assert cpu_kind() == plain + ", MKL_CBWR=AVX2"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads resident memory from /proc (Linux)")
def test_release_memory_hands_freed_memory_back_to_the_system():
    """Blocks below glibc's mmap threshold come from its heap; freed, they stay resident while a
    live block above them pins the heap's top, until release_memory trims the heap."""
    blocks = [bytearray(64 * 1024) for _ in range(3000)]  # about 190 MB, touched (zero-filled)
    pin = bytearray(64 * 1024)  # allocated last: the top of the heap stays in use
    del blocks
    before = resident_mb(os.getpid())
    assert release_memory() is True
    assert before - resident_mb(os.getpid()) > 100, "the freed blocks are still resident"
    del pin


def test_release_memory_says_where_it_cannot_trim(monkeypatch):
    monkeypatch.setattr(runtime.ctypes.util, "find_library", lambda name: None)
    assert release_memory() is False
