"""GPU path: the same maps on CUDA as on the CPU (runs only where a CUDA device exists: pytest -m gpu)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_cuda_matches_cpu(name):
    text = "The quick brown fox jumps over the lazy dog."
    cpu = normviz.analyze(normviz.load(name, device="cpu"), text)
    gpu_lm = normviz.load(name, device="cuda")
    assert gpu_lm.device.type == "cuda" and gpu_lm.dtype == torch.float32
    gpu = normviz.analyze(gpu_lm, text)
    for key in cpu.keys():
        scale = np.abs(cpu[key]).max()
        assert np.abs(gpu[key] - cpu[key]).max() <= 1e-3 * scale, key
