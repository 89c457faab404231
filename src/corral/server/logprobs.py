"""OpenAI ``logprobs`` / ``top_logprobs`` and corral's per-token trace, from a row's StepTrace.

In:  a request body's ``logprobs`` / ``top_logprobs`` (chat: ``logprobs: true, top_logprobs: N``;
     completions: ``logprobs: N``) and the corral extension ``corral_trace: true``; after
     decoding, the row's :class:`~corral.runtime.trace.StepTrace` (``RowOutput.trace``).
Out: the choice's ``logprobs`` object in the endpoint's OpenAI shape, and ``corral.trace``: one
     entry per output token with how it came (``sampled``, ``forced`` by jump-ahead, or
     ``completion``: the shortest valid completion appended when the budget ran out), the
     allowed-token count of its step, its logprob, the masked top choices and the model's top
     choices the mask removed — what the playground draws.

Invariants:
* Logprobs are those of the *masked, renormalised* distribution at temperature 1
  (:mod:`corral.runtime.trace`): the allowed tokens' probabilities sum to 1, so every logprob is
  <= 0, and ``top_logprobs`` lists allowed tokens only. The model's preferences for tokens the
  mask forbade are in ``corral.trace[i].removed`` (unmasked logprobs), never in ``top_logprobs``.
* A token the constraint forced (jump-ahead, the constraint's fixed opening, the budget's
  completion) had no alternative in corral's decoding and no forward pass of its own: its
  logprob is 0.0 and its ``top_logprobs`` list is just itself.
* Every output token appears exactly once, in order: the entries' ids are ``RowOutput.tokens``
  (an EOS that ended the row is not an output token, as in OpenAI's responses).
* Streaming: a step's record is complete once the next one exists (its forced tokens are filled
  in after the step's text is emitted), so a stream sends the complete entries with each text
  event and the rest when the row ends — the same entries as the non-streamed response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corral.runtime.trace import MAX_TOP_K, StepTrace
from corral.server.errors import APIError

__all__ = ["TokenEntry", "TraceRequest", "TraceStream", "choice_extras", "parse_trace", "token_entries"]


@dataclass(frozen=True)
class TraceRequest:
    """What a request asked for: OpenAI logprobs (with ``top`` alternatives) and/or corral's
    per-token trace (``corral_trace``)."""

    logprobs: bool
    top: int
    corral: bool

    @property
    def top_k(self) -> int:
        """Alternatives the decode loop keeps per step: the trace always shows a few."""
        return max(self.top, 5) if self.corral else self.top


def _bad(message: str, param: str) -> APIError:
    return APIError(400, message, "invalid_request", param)


def parse_trace(body: dict[str, Any], endpoint: str) -> TraceRequest | None:
    """The request's logprob/trace options (None: neither asked for); 400 for bad values."""
    lp = body.get("logprobs")
    top_raw = body.get("top_logprobs")
    corral = body.get("corral_trace", False)
    if not isinstance(corral, bool):
        raise _bad("corral_trace must be a boolean", "corral_trace")
    if endpoint == "chat":
        if lp is not None and not isinstance(lp, bool):
            raise _bad("logprobs must be a boolean (use top_logprobs for alternatives)", "logprobs")
        want = bool(lp)
        top = _top(top_raw, "top_logprobs")
        if top and not want:
            raise _bad("top_logprobs requires logprobs: true", "top_logprobs")
    else:
        if top_raw is not None:
            raise _bad("top_logprobs is a chat parameter; completions take logprobs: N", "top_logprobs")
        want = lp is not None and lp is not False
        top = 0 if isinstance(lp, bool) else _top(lp, "logprobs")
    if not want and not corral:
        return None
    return TraceRequest(logprobs=want, top=top, corral=corral)


def _top(v: Any, name: str) -> int:
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOP_K:
        raise _bad(f"{name} must be an integer in [0, {MAX_TOP_K}], got {v!r}", name)
    return v


@dataclass(frozen=True)
class TokenEntry:
    """One output token: its id, how it came, and (sampled only) its step's figures."""

    id: int
    how: str  # "sampled" | "forced" | "completion"
    logprob: float
    allowed: int | None = None
    top: tuple[tuple[int, float], ...] = ()
    removed: tuple[tuple[int, float], ...] = ()


def token_entries(trace: StepTrace, tokens: list[int], steps: int | None = None) -> list[TokenEntry]:
    """The entries of ``tokens`` (the row's output) from ``trace``: the leading forced tokens,
    then each of the first ``steps`` steps (default: all, plus the completion tail)."""
    out = [TokenEntry(t, "forced", 0.0) for t in trace.leading]
    pos = len(out)
    records = trace.steps if steps is None else trace.steps[:steps]
    for rec in records:
        if tokens[pos : pos + 1] == [rec.token]:  # not an EOS or a step rolled back for the budget
            out.append(
                TokenEntry(rec.token, "sampled", rec.logprob, rec.allowed, tuple(rec.top), tuple(rec.removed))
            )
            pos += 1
        # (The decode loop files a step's forced tokens before the row's on_finish runs.)
        out += [TokenEntry(t, "forced", 0.0) for t in rec.forced]
        pos += len(rec.forced)
    if steps is None:
        out += [TokenEntry(t, "completion", 0.0) for t in trace.tail]
    return out


class _Text:
    """Token text for a tokenizer: the token's bytes, as text (invalid UTF-8 replaced)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer

    def raw(self, t: int) -> bytes:
        return bytes(self.tok.decode([t]))

    def __call__(self, t: int) -> str:
        return self.raw(t).decode("utf-8", errors="replace")


def _chat_logprobs(entries: list[TokenEntry], top: int, text: _Text) -> dict[str, Any]:
    def one(t: int, lp: float) -> dict[str, Any]:
        return {"token": text(t), "logprob": lp, "bytes": list(text.raw(t))}

    content = []
    for e in entries:
        alts = e.top[:top] if e.how == "sampled" else ((e.id, 0.0),)[:top]
        content.append({**one(e.id, e.logprob), "top_logprobs": [one(t, lp) for t, lp in alts]})
    return {"content": content, "refusal": None}


def _completion_logprobs(entries: list[TokenEntry], top: int, text: _Text, offset: int) -> dict[str, Any]:
    tokens = [text(e.id) for e in entries]
    offsets = []
    for s in tokens:
        offsets.append(offset)
        offset += len(s)
    tops = []
    for e in entries:
        alts = e.top[:top] if e.how == "sampled" else ((e.id, 0.0),)[:top]
        tops.append({text(t): lp for t, lp in alts})
    return {
        "tokens": tokens,
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": tops if top else None,
        "text_offset": offsets,
    }


def _trace_json(entries: list[TokenEntry], text: _Text) -> list[dict[str, Any]]:
    def alts(pairs: tuple[tuple[int, float], ...]) -> list[dict[str, Any]]:
        return [{"id": t, "token": text(t), "logprob": lp} for t, lp in pairs]

    return [
        {
            "id": e.id,
            "token": text(e.id),
            "how": e.how,
            "forced": e.how != "sampled",
            "logprob": e.logprob,
            "allowed": e.allowed,
            "top": alts(e.top),
            "removed": alts(e.removed),
        }
        for e in entries
    ]


def _extras(
    req: TraceRequest, endpoint: str, entries: list[TokenEntry], text: _Text, offset: int
) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if req.logprobs:
        if endpoint == "chat":
            extra["logprobs"] = _chat_logprobs(entries, req.top, text)
        else:
            extra["logprobs"] = _completion_logprobs(entries, req.top, text, offset)
    if req.corral:
        extra["corral"] = {"trace": _trace_json(entries, text)}
    return extra


def summary(out: Any, entries: list[TokenEntry], error: str | None, constrained: bool) -> dict[str, Any]:
    """The trace's closing figures: validation result and token counts by how they came."""
    sampled = sum(e.how == "sampled" for e in entries)
    return {
        "validation": {"valid": error is None, "error": error} if constrained else None,
        "stats": {
            "tokens": len(entries),
            "sampled": sampled,
            "forced": len(entries) - sampled,
            "forward_passes": out.forward_passes,
            "masked_steps": out.masked_steps,
            "allowed_total": out.allowed_total,
            "stop_reason": out.stop_reason,
        },
    }


def choice_extras(
    req: TraceRequest | None, endpoint: str, out: Any, tokenizer: Any, error: str | None, constrained: bool
) -> dict[str, Any]:
    """The ``logprobs`` and ``corral`` fields of a finished (non-streamed) choice."""
    if req is None or out.trace is None:
        return {}
    entries = token_entries(out.trace, list(out.tokens))
    extra = _extras(req, endpoint, entries, _Text(tokenizer), 0)
    if req.corral:
        extra["corral"].update(summary(out, entries, error, constrained))
    return extra


class TraceStream:
    """Per-row progress of a streamed response: which entries have been sent."""

    def __init__(self, req: TraceRequest | None, endpoint: str, tokenizer: Any, rows: list[Any]) -> None:
        self.req = req
        self.endpoint = endpoint
        self.text = _Text(tokenizer)
        self.rows = rows  # the job's decode rows (filled by the scheduler thread)
        self.sent: dict[int, int] = {}  # row -> entries sent
        self.offset: dict[int, int] = {}  # row -> text characters sent (completions' text_offset)

    def _send(self, i: int, entries: list[TokenEntry]) -> dict[str, Any]:
        done = self.sent.get(i, 0)
        new = entries[done:]
        if not new:
            return {}
        self.sent[i] = len(entries)
        extra = _extras(self.req, self.endpoint, new, self.text, self.offset.get(i, 0))  # type: ignore[arg-type]
        self.offset[i] = self.offset.get(i, 0) + sum(len(self.text(e.id)) for e in new)
        return extra

    def progress(self, i: int) -> dict[str, Any]:
        """Fields for a chunk after a text event of row ``i``: its newly complete entries."""
        if self.req is None or i >= len(self.rows):
            return {}
        out = self.rows[i].out
        if out.trace is None:
            return {}
        complete = len(out.trace.steps) - 1  # the last step's forced tokens may still be coming
        if complete < 0:
            return {}
        return self._send(i, token_entries(out.trace, list(out.tokens), complete))

    def final(self, i: int, out: Any, error: str | None, constrained: bool) -> dict[str, Any]:
        """Fields for the chunk that ends row ``i``: the remaining entries and the summary."""
        if self.req is None or out.trace is None:
            return {}
        entries = token_entries(out.trace, list(out.tokens))
        extra = self._send(i, entries)
        if self.req.corral:
            extra.setdefault("corral", {"trace": []}).update(summary(out, entries, error, constrained))
        return extra
