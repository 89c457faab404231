"""Which request fields ``corral serve`` knows, and what happens to the others.

Every top-level field of a ``/v1/chat/completions`` or ``/v1/completions`` body is one of:

- **known**: read by :mod:`corral.server.protocol` (or :mod:`~corral.server.logprobs`,
  :mod:`~corral.server.deadlines`), or an OpenAI field that changes nothing a server like this
  one does (``user``, ``metadata``, ``store``, ...);
- **refused** (400 naming it): a field that looks like a constraint but is not one corral
  understands on this endpoint. A constraint that is dropped gives a 200 with unconstrained
  output, the one failure a client cannot see, so the rule errs towards refusing. An unknown
  field is refused when, lower-cased with ``-`` read as ``_``, it

  1. starts with ``corral_`` (corral's own namespace: an unknown one is a typo);
  2. contains one of :data:`CONSTRAINT_WORDS` (``guided``, ``structured``, ``schema``,
     ``regex``, ``grammar``, ``json``, ``choice``, ``constraint``, ``whitespace``, ``tool``,
     ``function``, ``format``): ``guided_jsn``, ``structured_output``, ``json_shema``, a chat
     request's ``regex`` (a completions extension), a completions request's ``tools``;
  3. is within edit distance 2 (1 for names of 5 characters or fewer) of a constraint field of
     either endpoint: ``response_fromat``, ``regx``, ``tool_choise``;
  4. or is one of vLLM's other output constraints corral does not implement
     (:data:`UNSUPPORTED`: ``allowed_token_ids``, ``bad_words``, ...).

- **ignored** (reported): anything else. The request is served; the response carries
  ``x-corral-ignored-fields: a, b`` and the server logs an ``ignored_fields`` line, so a client
  finds out that e.g. ``repetition_penalty`` had no effect. vLLM's ``guided_decoding_backend``
  (it picks an engine; corral is the engine) is reported this way too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from corral.compile.vllm_fields import GUIDED_FIELDS
from corral.server.errors import APIError

__all__ = [
    "CHAT_FIELDS",
    "COMPLETION_FIELDS",
    "CONSTRAINT_WORDS",
    "IGNORED_HEADER",
    "UNSUPPORTED",
    "check_fields",
    "header_value",
]

IGNORED_HEADER = "x-corral-ignored-fields"

# Read by _common / parse_trace / request_deadline on both endpoints.
_COMMON = frozenset(
    {
        "model",
        "n",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "top_k",
        "seed",
        "stream",
        "stream_options",
        "frequency_penalty",
        "presence_penalty",
        "stop",
        "logit_bias",
        "logprobs",
        "top_logprobs",  # completions refuse it by name (logprobs.parse_trace)
        "corral_trace",
        "corral_slots",
        "corral_constraint",
        "response_format",
        "thinking",
        "timeout",
        "structured_outputs",
        *GUIDED_FIELDS,
        # OpenAI fields that change nothing here: who is asking, what to keep, billing tiers.
        "user",
        "metadata",
        "store",
        "service_tier",
        "safety_identifier",
        "prompt_cache_key",
    }
)

CHAT_FIELDS = _COMMON | {
    "messages",
    "tools",
    "tool_choice",
    "tool_format",
    "parallel_tool_calls",
    "chat_template_kwargs",
}
"""Fields ``/v1/chat/completions`` reads or knows to change nothing."""

COMPLETION_FIELDS = _COMMON | {
    "prompt",
    "echo",
    "suffix",
    "best_of",
    "regex",
    "grammar",
    "choices",
    "json_schema",
}
"""Fields ``/v1/completions`` reads or knows to change nothing."""

# Fields that constrain output on some endpoint: an unknown field close to one is a misspelling.
_CONSTRAINT_NAMES = (
    "response_format",
    "structured_outputs",
    *GUIDED_FIELDS,
    "regex",
    "grammar",
    "choices",
    "json_schema",
    "corral_constraint",
    "corral_slots",
    "tools",
    "tool_choice",
    "tool_format",
    "thinking",
)

CONSTRAINT_WORDS = (
    "guided",
    "structured",
    "schema",
    "regex",
    "grammar",
    "json",
    "choice",
    "constraint",
    "whitespace",
    "tool",
    "function",
    "format",
)
"""Words that make an unknown field look like a constraint (rule 2 above)."""

UNSUPPORTED = {
    "allowed_token_ids": "a token allow-list",
    "bad_words": "banned words",
    "stop_token_ids": "stop tokens (the constraint decides where the output ends)",
    "logits_processors": "custom logits processors",
    "vllm_xargs": "vLLM's extra arguments (send corral's own fields instead)",
}
"""vLLM's request fields that restrict output in ways corral serve does not implement."""

_ENGINE_CHOICE = frozenset({"guided_decoding_backend"})  # picks an engine: reported, not refused

_OTHER_ENDPOINT = {"chat": COMPLETION_FIELDS - CHAT_FIELDS, "completions": CHAT_FIELDS - COMPLETION_FIELDS}

_HEADER_NAMES = 32  # a body with thousands of unknown fields must not make a header that size
_HEADER_NAME_CHARS = 64


def _distance(a: str, b: str, cap: int) -> int:
    """Optimal-string-alignment distance (a swap of neighbours counts 1), or ``cap + 1`` once it
    must exceed ``cap``."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        if min(row) > cap:
            return cap + 1
        prev2, prev = prev, row
    return prev[-1]


def _refusal(field: str, endpoint: str) -> APIError | None:
    """The 400 for an unknown field that looks like a constraint (None: it does not)."""
    key = field.lower().replace("-", "_")
    other = "/v1/completions" if endpoint == "chat" else "/v1/chat/completions"
    if field in _OTHER_ENDPOINT[endpoint] and any(w in key for w in CONSTRAINT_WORDS):
        return APIError(
            400,
            f"{field} is a {other} field; on this endpoint constrain output with response_format, "
            "structured_outputs or the guided_* fields",
            "unknown_parameter",
            field,
        )
    if key in UNSUPPORTED:
        return APIError(
            400,
            f"{field} ({UNSUPPORTED[key]}) is not supported by corral serve",
            "unsupported_parameter",
            field,
        )
    cap = 1 if len(key) <= 5 else 2
    near = [n for n in _CONSTRAINT_NAMES if _distance(key, n, cap) <= cap]
    if key.startswith("corral_") or near or any(w in key for w in CONSTRAINT_WORDS):
        hint = f" (did you mean {near[0]}?)" if near else ""
        return APIError(
            400,
            f"unknown field {field!r} looks like a constraint{hint}; corral refuses it rather than "
            "answer unconstrained. Constraint fields: response_format, structured_outputs "
            f"(json, regex, choice, grammar, json_object, structural_tag), {', '.join(GUIDED_FIELDS)}",
            "unknown_parameter",
            field,
        )
    return None


def check_fields(body: Mapping[str, Any], endpoint: str) -> list[str]:
    """The body's fields the ``endpoint`` ("chat" or "completions") ignores, sorted; raises
    :class:`APIError` (400) for the first unknown field that looks like a constraint."""
    known = CHAT_FIELDS if endpoint == "chat" else COMPLETION_FIELDS
    ignored = []
    for field in body:
        if field in known:
            continue
        if field not in _ENGINE_CHOICE:
            error = _refusal(field, endpoint)
            if error is not None:
                raise error
        ignored.append(field)
    return sorted(ignored)


def header_value(fields: Iterable[str]) -> str:
    """The ignored fields as a header value: ``a, b``. Names are percent-encoded outside
    ``[A-Za-z0-9_.~-]`` (a header is ASCII without commas or line breaks; a field name is any
    string), long names are cut, and past 32 names the rest are counted."""
    names = [quote(f[:_HEADER_NAME_CHARS], safe="_.-~") for f in fields]
    if len(names) > _HEADER_NAMES:
        names = [*names[:_HEADER_NAMES], f"... ({len(names) - _HEADER_NAMES} more)"]
    return ", ".join(names)
