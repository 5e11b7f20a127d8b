"""Learn's row table on every embedded model: its product column is the norm map's cell, as step 3 says. On
gemma3 (a norm after the attention output) α_ij · ‖f(x_j)‖ was 195.27 beside the map's 30.29 for "cat [2]"
(screenshot pass): the map carries 1/s_i of that norm (docs/maps.md), and the product now does too."""

from __future__ import annotations

import numpy as np
import pytest

from normviz.ui.views import learn

from ..helpers.app import app, no_exception
from .models import MODELS

TEXT = "The cat sat on the mat because it was tired."


@pytest.mark.parametrize("model", MODELS)
def test_the_rows_product_column_is_the_map(model):
    at = app("app_pages/2_Learn.py", {"model": model, "text": TEXT})
    at.run(timeout=300)
    no_exception(at)
    table = at.dataframe[0].value
    product = [c for c in table.columns if c.startswith(learn.PRODUCT)]
    assert len(product) == 1, list(table.columns)
    got, want = table[product[0]].to_numpy(float), table[learn.MAP_COLUMN].to_numpy(float)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4)
    step3 = [m.value for m in at.markdown if "**3.**" in m.value]
    assert step3 and "agree" in step3[0]
    assert ("/ s_i" in step3[0]) == (model == "gemma3"), step3[0]


def _px(cell: str) -> float:
    """A rough width of a st.dataframe column (glide-data-grid, 14 px font): ~4.7 px a character plus its padding,
    fitted to the issue 42 screenshots (“‖α_ij f(x_j)‖ (map)”: 110 px, “α_ij·‖f(x_j)‖”: 82 px, “token j”: 58 px)."""
    return 22 + 4.7 * len(cell)


@pytest.mark.parametrize("scale", [1.0, 1 / 6.446])  # gemma3's row scale adds "/s_i" to the product's name
def test_the_row_table_fits_half_a_1280_px_page(scale):
    """Issue 42 (screenshots at 1280 px): the row table's last column ("rank ‖αf‖") scrolled out of its half of
    the page (~450 px); with gemma3's large ‖f‖ and a long token it still fits."""
    alpha, fx = np.array([0.8401, 0.0481, 0.1118]), np.array([232.45, 126.351, 798.105])
    w = learn.why_rows(alpha, fx, alpha * fx * scale, row_scale=scale)
    table = learn.row_table(w, ["<bos>", "The", "because"], [0, 1, 2])
    width = sum(max(_px(str(c)) for c in [name, *cells]) for name, cells in table.items())
    assert width <= 440, (round(width), list(table))
