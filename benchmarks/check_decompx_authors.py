"""normviz's ``decompx`` against the DecompX authors' own code, on the embedded encoder in float64.

    git clone https://github.com/mohsenfayyaz/DecompX /tmp/DecompX
    python benchmarks/check_decompx_authors.py /tmp/DecompX ["a sentence" ...]

Imports their ``src/modeling_bert.py`` from that checkout (nothing of it is kept in this repository), loads
minilm's encoder weights into their ``BertEncoder`` and runs it with the configuration of their demo
(``DecompXConfig``: absdot biases, GeLU_ZO, vector aggregation, all layers' aggregated norms) on minilm's own
embedding output. Prints the largest difference relative to their map's maximum, per layer. Their code adds
1e-12 to two denominators (the bias weights, the activation slope) that normviz leaves out; that alone
accounts for differences of order 1e-10 (measured: 3.9e-10; 1.1e-15 with the two guards removed).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers.modeling_utils as hf_utils  # noqa: E402

import normviz  # noqa: E402

TEXTS = [
    "The cat sat on the mat because it was warm.",
    "DecompX carries every token's part through the whole encoder, including the feed-forward block.",
]


def authors_encoder(checkout: str):
    """Their BertEncoder and DecompXConfig. Their module imports three helpers that newer transformers
    moved out of modeling_utils; none is used on this path, so placeholders are set before the import."""
    for name in ("apply_chunking_to_forward", "find_pruneable_heads_and_indices", "prune_linear_layer"):
        if not hasattr(hf_utils, name):
            setattr(hf_utils, name, None)
    sys.path.insert(0, checkout)
    from src.decompx_utils import DecompXConfig
    from src.modeling_bert import BertEncoder

    return BertEncoder, DecompXConfig


def main(argv: list[str]) -> float:
    if not argv:
        raise SystemExit(__doc__)
    BertEncoder, DecompXConfig = authors_encoder(argv[0])
    lm = normviz.load("minilm", dtype="float64")
    config = DecompXConfig(
        include_biases=True,
        bias_decomp_type="absdot",
        include_LN1=True,
        include_FFN=True,
        FFN_approx_type="GeLU_ZO",
        include_LN2=True,
        aggregation="vector",
        include_classifier_w_pooler=True,
        output_all_layers=True,
        output_aggregated="norm",
    )
    encoder = BertEncoder(lm.model.config).to(torch.float64).eval()
    encoder.load_state_dict(lm.model.encoder.state_dict(), strict=True)
    worst = 0.0
    for text in argv[1:] or TEXTS:
        session = normviz.Session(lm, text)
        ours = session.get(["decompx"])["decompx"]
        ids = torch.tensor([session.encoded.ids])
        with torch.no_grad():
            out = encoder(
                lm.model.embeddings(input_ids=ids),
                attention_mask=torch.zeros(1, 1, 1, ids.shape[1], dtype=torch.float64),
                decompx_config=config,
                return_dict=False,
            )
        theirs = np.stack([a[0].numpy() for a in out[-1].aggregated])
        rel = [float(np.abs(ours[l] - theirs[l]).max() / np.abs(theirs[l]).max()) for l in range(len(theirs))]
        print(f"{ids.shape[1]} tokens, max difference / max per layer: " + " ".join(f"{r:.1e}" for r in rel))
        worst = max(worst, *rel)
    print(f"largest: {worst:.1e}")
    return worst


if __name__ == "__main__":
    main(sys.argv[1:])
