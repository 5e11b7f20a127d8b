"""Bundled corpus samples (public domain; see assets/corpus/SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "corpus"
SAMPLES = {
    "US Declaration of Independence + Constitution (219 sentences)": ASSETS / "us_founding_documents.txt",
    "US Declaration, consecutive sentence pairs (17 pairs, tab-separated)": ASSETS / "us_declaration_pairs.tsv",
}
DEFAULT_SAMPLE = next(iter(SAMPLES))


def sample_path(name: str = DEFAULT_SAMPLE) -> Path:
    return SAMPLES[name]
