"""Value zeroing's score (Mohebbi et al. 2023) on a hand-worked case."""

from __future__ import annotations

import numpy as np
import torch

from normviz.methods.zeroing import scores


def test_scores_by_hand():
    """Three tokens, 2-d outputs. base o = (1,0), (0,1), (1,1).
    Zeroing token 0 turns them into (0,1), (0,1), (1,0): d = 1 − cos = 1, 0 (identical), 1 − 1/√2.
    Zeroing token 1: (1,0), (1,1), (2,2): d = 0, 1 − 1/√2, 0 (same direction).
    Zeroing token 2: (−1,0), (0,2), (1,1): d = 2, 0, 0 (identical).
    Rows: token 0: (1, 0, 2)/3; token 1: (0, 1 − 1/√2, 0)/(1 − 1/√2) = (0, 1, 0);
          token 2: (1 − 1/√2, 0, 0) → (1, 0, 0)."""
    base = torch.tensor([[1.0, 0], [0, 1], [1, 1]], dtype=torch.float64)
    zeroed = torch.tensor(
        [[[0.0, 1], [0, 1], [1, 0]], [[1, 0], [1, 1], [2, 2]], [[-1, 0], [0, 2], [1, 1]]], dtype=torch.float64
    )
    np.testing.assert_allclose(scores(zeroed, base), [[1 / 3, 0, 2 / 3], [0, 1, 0], [1, 0, 0]], atol=1e-15)
