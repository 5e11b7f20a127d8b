"""The papers the map families implement; each family lists its own in ``REFERENCES`` (the Learn page and
the docs read them from there)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    title: str
    url: str

    def __str__(self) -> str:
        return self.title


VASWANI_2017 = Paper("Vaswani et al. 2017, Attention Is All You Need", "https://arxiv.org/abs/1706.03762")
KOBAYASHI_2020 = Paper(
    "Kobayashi et al. 2020, Attention is Not Only a Weight: Analyzing Transformers with Vector Norms (EMNLP)",
    "https://arxiv.org/abs/2004.10102",
)
KOBAYASHI_2021 = Paper(
    "Kobayashi et al. 2021, Incorporating Residual and Normalization Layers into Analysis of "
    "Masked Language Models (EMNLP)",
    "https://arxiv.org/abs/2109.07152",
)
KOBAYASHI_2024 = Paper(
    "Kobayashi et al. 2024, Analyzing Feed-Forward Blocks in Transformers through the Lens of Attention Maps (ICLR)",
    "https://arxiv.org/abs/2302.00456",
)
ABNAR_2020 = Paper(
    "Abnar & Zuidema 2020, Quantifying Attention Flow in Transformers (ACL)", "https://arxiv.org/abs/2005.00928"
)
BRUNNER_2020 = Paper(
    "Brunner et al. 2020, On Identifiability in Transformers (ICLR)", "https://arxiv.org/abs/1908.04211"
)
FERRANDO_2022 = Paper(
    "Ferrando et al. 2022, Measuring the Mixing of Contextual Information in the Transformer (EMNLP)",
    "https://arxiv.org/abs/2203.04212",
)
MOHEBBI_2023 = Paper(
    "Mohebbi et al. 2023, Quantifying Context Mixing in Transformers (EACL)", "https://arxiv.org/abs/2301.12971"
)
MODARRESSI_2022 = Paper(
    "Modarressi et al. 2022, GlobEnc: Quantifying Global Token Attribution by Incorporating the "
    "Whole Encoder Layer in Transformers (NAACL)",
    "https://aclanthology.org/2022.naacl-main.19/",
)
MODARRESSI_2023 = Paper(
    "Modarressi et al. 2023, DecompX: Explaining Transformers Decisions by Propagating Token Decomposition (ACL)",
    "https://aclanthology.org/2023.acl-long.149/",
)
