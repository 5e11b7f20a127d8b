"""The models every page's AppTest runs on: the registry's embedded self-attention models (toy-mt, the
encoder–decoder, has its own page and tests), so a model added to the registry is picked up here."""

from normviz.models.loading import EMBEDDED

SEQ2SEQ = ("toy-mt",)
MODELS = [name for name in EMBEDDED if name not in SEQ2SEQ]
