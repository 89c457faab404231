"""Closed-set classification: score every label as a whole sequence, with calibrated confidence.

    model = corral.load_model()
    results = corral.classify(model, ["I was charged twice"], ["billing", "technical", "account"])
    results[0].label, results[0].probability     # 'billing', 0.93

For each text the prompt is rendered (a template, with the model's chat template when it has
one) and each label is scored as the model would write it as the answer: the log-probability of
its tokens exactly as the tokenizer produces them after that prompt (plus that of the end token
after it when one label is a prefix of another). The probabilities are normalised over the label
set. With ``calibrate=True`` the label prior the model shows on content-free inputs ("N/A",
"", "[MASK]" through the same template) is divided out (contextual calibration, Zhao et al.
2021: a small model that favours the first label listed no longer does so for every text).
One forward pass per batch of texts when every label is a single token; otherwise one more
pass over the distinct label-token prefixes, forked from the prompts' KV cache (see
:mod:`corral.generation.scoring`) — never one pass per label. The prompts' common prefix (system
prompt, instructions) is computed once per call.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.compile.spec import validate_choices
from corral.errors import CorralError
from corral.generation.api import as_backend
from corral.generation.scoring import (
    answer_ids,
    calibrated_probs,
    content_free_prior,
    score_continuations,
    shared_prefix,
)

__all__ = [
    "CONTENT_FREE_TEXTS",
    "Classification",
    "classify",
    "content_free_prior",
    "fit_temperature",
    "DEFAULT_TEMPLATE",
    "check_template",
]

DEFAULT_TEMPLATE = "{instructions}\n\nLabels:\n{legend}\n\nText:\n{text}\n\nAnswer with the label only."
DEFAULT_INSTRUCTIONS = "Classify the text into exactly one of the labels."
# Inputs that carry no information about the label: what the model answers for them is its prior.
CONTENT_FREE_TEXTS = ("N/A", "", "[MASK]")


@dataclass
class Classification:
    """The outcome for one text.

    Attributes
    ----------
    label : str or None
        The winning label, or None when its probability is below ``threshold`` (``review``).
    top_label : str
        The most probable label, whatever the threshold.
    probability : float
        ``top_label``'s probability, normalised over the label set.
    probabilities : dict
        Every label's normalised probability (summing to 1), in label order.
    logprobs : dict
        Every label's sequence log-probability under the model, as scored (per token when
        ``length_normalize`` is on), before calibration.
    review : bool
        True when routed to review by ``threshold``.
    rationale : str or None
        The model's reasoning before the label (``reasoning=``), else None.
    """

    label: str | None
    top_label: str
    probability: float
    probabilities: dict[str, float]
    logprobs: dict[str, float]
    review: bool
    rationale: str | None = None

    def to_dict(self) -> dict[str, Any]:
        extra = {} if self.rationale is None else {"rationale": self.rationale}
        return {
            **extra,
            "label": self.label,
            "top_label": self.top_label,
            "probability": self.probability,
            "review": self.review,
            "probabilities": self.probabilities,
            "logprobs": self.logprobs,
        }


_TEMPLATE_FIELDS = ("text", "labels", "legend", "instructions")


def check_template(template: str) -> None:
    """Raise ``ValueError`` unless ``template`` is a prompt template :func:`classify` can fill:
    ``{text}`` present, and only the plain fields ``{text}``, ``{labels}``, ``{legend}``,
    ``{instructions}`` (no attribute or index access, conversions or format specs: a template
    from a stranger, as the server takes, must not reach into Python objects)."""
    if not isinstance(template, str):
        raise TypeError(f"template must be a string, got {type(template).__name__}")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as e:
        raise ValueError(
            f"template is not a valid format string: {e} (write {{{{ and }}}} for braces)"
        ) from None
    names = set()
    for _, name, spec, conv in parts:
        if name is None:
            continue
        if name not in _TEMPLATE_FIELDS or spec or conv:
            shown = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            raise ValueError(
                f"template field {shown} is not allowed: use {{text}}, {{labels}}, {{legend}} or "
                "{instructions} (write {{ and }} for literal braces)"
            )
        names.add(name)
    if "text" not in names:
        raise ValueError("template must contain {text}")


def _legend(labels: Sequence[str], descriptions: Mapping[str, str] | None) -> str:
    lines = []
    for label in labels:
        d = (descriptions or {}).get(label)
        lines.append(f"- {label}: {d}" if d else f"- {label}")
    return "\n".join(lines)


def _has_prefix_pair(seqs: Sequence[Sequence[int]]) -> bool:
    """Is some token sequence a proper prefix of another (``refund`` / ``refund_request``)?"""
    return any(len(a) < len(b) and list(b[: len(a)]) == list(a) for a in seqs for b in seqs)


def score_labels(
    model: Any,
    texts: Sequence[str],
    labels: Sequence[str],
    *,
    template: str = DEFAULT_TEMPLATE,
    instructions: str = DEFAULT_INSTRUCTIONS,
    descriptions: Mapping[str, str] | None = None,
    system: str | None = None,
    chat: bool | None = None,
    length_normalize: bool = False,
    score_end: bool | None = None,
    batch_size: int = 8,
    on_batch: Callable[[int], None] | None = None,
    tokenizer: Any = None,
    legend_order: Sequence[str] | None = None,
    answer_prefixes: Sequence[str] | None = None,
) -> np.ndarray:
    """``(texts, labels)`` sequence log-probabilities (the raw scores :func:`classify` uses).

    ``legend_order``: the labels in the order the prompt lists them (default: ``labels``'s;
    the scores stay in ``labels`` order). ``answer_prefixes``: per text, what the answer starts
    with before the label (a rationale, in ``reasoning`` mode)."""
    backend = as_backend(model, tokenizer)
    validate_choices(labels, what="label")
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings (got one string)")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    check_template(template)
    shown = list(labels) if legend_order is None else list(legend_order)
    if sorted(shown) != sorted(labels):
        raise ValueError("legend_order must list the same labels")
    if answer_prefixes is not None and len(answer_prefixes) != len(texts):
        raise ValueError("one answer prefix per text")
    legend = _legend(shown, descriptions)
    end_ids = tuple(backend.tokenizer.eos_ids)
    # Render everything first: bad input fails before any model work, and the prompts' common
    # prefix (chat system prompt, instructions) is computed once for the whole job.
    prompts: list[list[int]] = []
    conts: list[list[list[int]]] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, not a string")
        body = template.format(text=text, labels=", ".join(shown), legend=legend, instructions=instructions)
        prompt: Any = body
        if system is not None:
            prompt = [{"role": "system", "content": system}, {"role": "user", "content": body}]
        ptext, add_special = backend.render_text(prompt, chat=chat)
        if answer_prefixes is not None:
            ptext += answer_prefixes[i]
        pids = backend.encode(ptext, add_special=add_special)
        ids = [answer_ids(backend, ptext, pids, lab, add_special) for lab in labels]
        for lab, lid in zip(labels, ids, strict=True):
            if not lid:
                raise ValueError(f"label {lab!r} tokenizes to nothing")
        longest = max(len(x) for x in ids) + 1
        if len(pids) + longest > backend.context_length:
            raise CorralError(
                f"text {i}: the prompt is {len(pids)} tokens; with the longest label it exceeds "
                f"the model's context of {backend.context_length}"
            )
        prompts.append(pids)
        conts.append(ids)
    if score_end is None:
        score_end = any(_has_prefix_pair(c) for c in conts)
    end_ids = end_ids if score_end else ()
    prefix = shared_prefix(backend, prompts) if len(prompts) > 1 else None
    out = np.zeros((len(texts), len(labels)))
    for start in range(0, len(texts), batch_size):
        stop = start + batch_size
        scores = score_continuations(
            backend, prompts[start:stop], conts[start:stop], end_ids=end_ids, prefix=prefix
        )
        if length_normalize:
            lengths = np.array([[len(x) + 1 for x in c] for c in conts[start:stop]], dtype=np.float64)
            scores = scores / lengths
        out[start:stop] = scores
        if on_batch is not None:
            on_batch(len(scores))
    return out


def classify(
    model: Any,
    texts: Sequence[str],
    labels: Sequence[str],
    *,
    threshold: float | None = None,
    temperature: float = 1.0,
    template: str = DEFAULT_TEMPLATE,
    instructions: str = DEFAULT_INSTRUCTIONS,
    descriptions: Mapping[str, str] | None = None,
    system: str | None = None,
    chat: bool | None = None,
    length_normalize: bool = False,
    score_end: bool | None = None,
    batch_size: int = 8,
    progress: bool = False,
    tokenizer: Any = None,
    calibrate: bool | Sequence[str] = False,
    label_orders: int = 1,
    reasoning: bool | int = False,
) -> list[Classification]:
    """Classify each text into one of ``labels`` by scoring every label.

    Parameters
    ----------
    model
        A backend from :func:`corral.load_model`, a path, or a transformers model (with
        ``tokenizer=``).
    texts, labels
        The items and the closed label set (non-empty, distinct, non-empty strings).
    threshold
        Items whose top probability is below it get ``label=None, review=True``.
    temperature
        Calibration: probabilities are ``softmax(logprob / temperature)`` over the labels; fit it
        with :func:`fit_temperature` on a small labelled set.
    template
        The prompt; ``{text}`` is required, ``{labels}`` (comma-separated), ``{legend}`` (one
        line per label, with its description) and ``{instructions}`` are optional. Use
        ``"{text}"`` to send each text as is.
    descriptions
        ``{label: description}`` shown in the legend.
    system, chat
        A system message; whether to use the chat template (default: when the model has one).
    length_normalize
        Score labels by mean log-probability per token (label tokens + the end token) instead of
        the total, which otherwise favours labels of fewer tokens.
    score_end
        Also score the end of the answer (the model's end-of-turn/EOS right after the label).
        Needed when a label's tokens are a prefix of another's (``refund`` /
        ``refund_request``: without it the shorter one always wins); None (default) turns it on
        exactly then. Off, a label's score is the log-probability of its tokens, and labels with
        distinct single-token spellings take one forward pass per batch.
    batch_size, progress
        Texts per forward pass; a progress bar on stderr.
    calibrate
        Contextual calibration: True scores :data:`CONTENT_FREE_TEXTS` through the same prompt
        (a few more rows in the same batches), takes the mean of their label distributions as
        the model's prior ``p_cf`` and returns ``probabilities ∝ softmax(logprob / T) / p_cf``;
        a list of strings chooses the content-free texts. ``logprobs`` stay the raw scores.
    label_orders
        Score each text with the legend listed in this many orders (cyclic rotations of
        ``labels``) and average the probabilities, so no label gains from being listed first;
        costs that many scoring passes. ``logprobs`` are the mean raw scores.
    reasoning
        Let the model write a short rationale (one line, at most ``reasoning`` tokens; True:
        :data:`REASONING_TOKENS`) before the label, then score the labels after it (``Label:``);
        ``rationale`` holds it. Costs a decode per batch of texts.
    """
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings (got one string)")
    validate_choices(labels, what="label")
    free = _content_free(calibrate)
    if (
        isinstance(label_orders, bool)
        or not isinstance(label_orders, int)
        or not 1 <= label_orders <= len(labels)
    ):
        raise ValueError(f"label_orders must be an integer in [1, {len(labels)}] (the number of labels)")
    budget = _reasoning_budget(reasoning)
    every = [*texts, *free]
    opts: dict[str, Any] = {
        "template": template if not budget else template + REASONING_NOTE,
        "instructions": instructions,
        "descriptions": descriptions,
        "system": system,
        "chat": chat,
        "length_normalize": length_normalize,
        "score_end": score_end,
        "batch_size": batch_size,
        "tokenizer": tokenizer,
    }
    rationales: list[str] | None = None
    if budget:
        rationales = rationales_for(model, every, labels, budget, **opts)
    bar = None
    if progress:
        from corral.progress import Progress

        bar = Progress(len(every) * label_orders, "classify")
    n = len(texts)
    probs = np.zeros((n, len(labels)))
    raw = np.zeros((n, len(labels)))
    try:
        for k in range(label_orders):
            scores = score_labels(
                model,
                every,
                labels,
                **opts,
                on_batch=bar.update if bar is not None else None,
                legend_order=[*labels[k:], *labels[:k]],
                answer_prefixes=[_answer_prefix(r) for r in rationales] if rationales is not None else None,
            )
            prior = content_free_prior(scores[n:], temperature) if free else None
            probs += calibrated_probs(scores[:n], temperature, prior) / label_orders
            raw += scores[:n] / label_orders
    finally:
        if bar is not None:
            bar.close()
    out = _results(raw, probs, labels, threshold)
    for r, why in zip(out, rationales or [], strict=False):
        r.rationale = why
    return out


#: The rationale budget of ``classify(reasoning=True)``, in tokens.
REASONING_TOKENS = 48
#: What the prompt asks for in reasoning mode (after the template).
REASONING_NOTE = (
    "\n\nFirst write one short sentence of reasoning about which label fits; then, on a new line, "
    "'Label: ' and the label."
)


def _reasoning_budget(reasoning: bool | int) -> int:
    if reasoning is True:
        return REASONING_TOKENS
    if reasoning is False or reasoning is None:
        return 0
    if isinstance(reasoning, int) and 1 <= reasoning <= 1024:
        return reasoning
    raise ValueError(f"reasoning must be True/False or a token budget in [1, 1024], got {reasoning!r}")


def _answer_prefix(rationale: str) -> str:
    return f"{rationale}\nLabel: "


def rationales_for(
    model: Any, texts: Sequence[str], labels: Sequence[str], budget: int, **opts: Any
) -> list[str]:
    """One line of reasoning per text (greedy, at most ``budget`` tokens), written as the start of
    the answer to the same prompt :func:`score_labels` renders (``opts``: its options)."""
    from corral.generation.api import generate

    backend = as_backend(model, opts.get("tokenizer"))
    check_template(opts["template"])
    legend = _legend(labels, opts.get("descriptions"))
    prompts: list[Any] = []
    for text in texts:
        body = opts["template"].format(
            text=text, labels=", ".join(labels), legend=legend, instructions=opts["instructions"]
        )
        system = opts.get("system")
        prompts.append(
            body
            if system is None
            else [{"role": "system", "content": system}, {"role": "user", "content": body}]
        )
    out: list[str] = []
    step = max(1, opts.get("batch_size", 8))
    for start in range(0, len(prompts), step):
        rs = generate(
            backend,
            prompts[start : start + step],
            regex=r"[^\n]{1,400}",
            max_new_tokens=budget,
            chat=opts.get("chat"),
        )
        out += [r.text.strip() for r in rs]
    return out


def _content_free(calibrate: bool | Sequence[str]) -> list[str]:
    if calibrate is False or calibrate is None:
        return []
    if calibrate is True:
        return list(CONTENT_FREE_TEXTS)
    if isinstance(calibrate, str) or not all(isinstance(t, str) for t in calibrate):
        raise TypeError("calibrate must be True/False or a list of content-free strings")
    if not calibrate:
        raise ValueError("calibrate needs at least one content-free text")
    return list(calibrate)


def results_from_scores(
    scores: np.ndarray,
    labels: Sequence[str],
    *,
    threshold: float | None = None,
    temperature: float = 1.0,
    prior: np.ndarray | None = None,
) -> list[Classification]:
    """Turn ``(texts, labels)`` log-probabilities into :class:`Classification` results
    (``prior``: divide each distribution by it and renormalise, see :func:`content_free_prior`)."""
    return _results(scores, calibrated_probs(scores, temperature, prior), labels, threshold)


def _results(
    scores: np.ndarray, probs: np.ndarray, labels: Sequence[str], threshold: float | None
) -> list[Classification]:
    out = []
    for row_scores, row in zip(scores, probs, strict=True):
        best = int(np.argmax(row))
        p = float(row[best])
        review = threshold is not None and p < threshold
        out.append(
            Classification(
                label=None if review else labels[best],
                top_label=labels[best],
                probability=p,
                probabilities={lab: float(x) for lab, x in zip(labels, row, strict=True)},
                logprobs={lab: float(x) for lab, x in zip(labels, row_scores, strict=True)},
                review=review,
            )
        )
    return out


def fit_temperature(
    model: Any, texts: Sequence[str], gold: Sequence[str], labels: Sequence[str], **kwargs: Any
) -> float:
    """Fit the calibration temperature on a labelled set: the ``T`` minimising the negative
    log-likelihood of the gold labels under ``softmax(logprob / T)`` (temperature scaling).

    ``kwargs`` are passed to :func:`score_labels` (template, chat, ...); use the same ones when
    classifying. With ``calibrate`` (as for :func:`classify`) the temperature is fitted for
    calibrated probabilities (the prior recomputed at each candidate ``T``). Returns ``T``; pass
    it as ``classify(..., temperature=T)``.
    """
    if len(texts) != len(gold):
        raise ValueError("one gold label per text")
    index = {lab: i for i, lab in enumerate(labels)}
    unknown = [g for g in gold if g not in index]
    if unknown:
        raise ValueError(f"gold label {unknown[0]!r} is not in the label set")
    free = _content_free(kwargs.pop("calibrate", False))
    scores = score_labels(model, [*texts, *free], labels, **kwargs)
    n = len(texts)
    return temperature_for(scores[:n], [index[g] for g in gold], cf_scores=scores[n:] if free else None)


def temperature_for(scores: np.ndarray, gold: Sequence[int], cf_scores: np.ndarray | None = None) -> float:
    """The NLL-minimising temperature for given scores and gold indices (golden-section search on
    log T in [-4, 4]; the NLL is convex in 1/T without calibration). ``cf_scores``: content-free
    scores, for calibrated probabilities."""
    idx = np.asarray(gold)

    def nll(log_t: float) -> float:
        t = math.exp(log_t)
        prior = content_free_prior(cf_scores, t) if cf_scores is not None else None
        p = calibrated_probs(scores, t, prior)
        return float(-np.log(np.maximum(p[np.arange(len(idx)), idx], 1e-300)).mean())

    lo, hi = -4.0, 4.0
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = nll(a), nll(b)
    for _ in range(80):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = nll(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = nll(b)
    return math.exp((lo + hi) / 2)
