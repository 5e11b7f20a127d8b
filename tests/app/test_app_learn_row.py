"""Learn's row table on every embedded model: its product column is the norm map's cell, as step 3 says. On
gemma3 (a norm after the attention output) α_ij · ‖f(x_j)‖ was 195.27 beside the map's 30.29 for "cat [2]"
(screenshot pass): the map carries 1/s_i of that norm (docs/maps.md), and the product now does too."""

from __future__ import annotations

import numpy as np
import pytest

from ..helpers.app import app, no_exception
from .models import MODELS

TEXT = "The cat sat on the mat because it was tired."


@pytest.mark.parametrize("model", MODELS)
def test_the_rows_product_column_is_the_map(model):
    at = app("app_pages/2_Learn.py", {"model": model, "text": TEXT})
    at.run(timeout=300)
    no_exception(at)
    table = at.dataframe[0].value
    product = [c for c in table.columns if c.startswith("α_ij·‖f(x_j)‖")]
    assert len(product) == 1, list(table.columns)
    got, want = table[product[0]].to_numpy(float), table["‖α_ij f(x_j)‖ (map)"].to_numpy(float)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4)
    step3 = [m.value for m in at.markdown if "**3.**" in m.value]
    assert step3 and "agree" in step3[0]
    assert ("/ s_i" in step3[0]) == (model == "gemma3"), step3[0]
