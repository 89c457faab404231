"""Classification over HTTP: ``POST /v1/classify``, and greedy ``choices`` on ``/v1/completions``
scored as whole answers — both computed by the library's own functions, so a client gets what
``corral.classify`` / ``corral.generate(..., choices=...)`` return for the same inputs.

``POST /v1/classify`` (a corral endpoint; OpenAI has none)::

    {"model": "corral", "texts": ["My card was charged twice"],
     "labels": ["billing", "technical", "account"],
     "calibrate": true, "threshold": 0.6}                 # options: flat, or in "options": {...}
    -> {"object": "list", "model": "corral",
        "data": [{"index": 0, "object": "classification", "label": "billing",
                  "top_label": "billing", "probability": 0.93, "review": false,
                  "probabilities": {...}, "logprobs": {...}}]}

The options are :func:`corral.classify`'s keyword arguments that make sense on the wire
(:data:`OPTIONS`); an unknown field is a 400 rather than silently ignored, and a ``template``
may only use the plain fields ``{text}``, ``{labels}``, ``{legend}``, ``{instructions}``.

The scoring runs on the scheduler thread (which owns the model) between two decoding steps
(:meth:`Scheduler.call`): running generations pause for it, which is why one request takes at
most :data:`MAX_TEXTS` texts. Invariant: nothing here touches the backend from the event loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from corral.classification import classify
from corral.compile import Constraint
from corral.generation.api import GenerationResult, best_choices
from corral.server.deadlines import request_deadline, within
from corral.server.errors import APIError, error_from_exception
from corral.server.logs import log_event, new_request_id
from corral.server.protocol import GenRequest, envelope, usage

if TYPE_CHECKING:
    from corral.server.app import CorralServer

__all__ = ["MAX_TEXTS", "OPTIONS", "ClassifyAPI", "choices_response", "scored_choices"]

#: Most texts one /v1/classify request may carry (the scheduler pauses decoding while it scores).
MAX_TEXTS = 256

#: The options /v1/classify takes, with their JSON types (checked before any model work).
OPTIONS: dict[str, tuple[type, ...]] = {
    "threshold": (int, float),
    "temperature": (int, float),
    "calibrate": (bool, list),
    "descriptions": (dict,),
    "template": (str,),
    "instructions": (str,),
    "system": (str,),
    "chat": (bool,),
    "length_normalize": (bool,),
    "score_end": (bool,),
    "batch_size": (int,),
}


def _bad(message: str, param: str | None) -> APIError:
    return APIError(400, message, "invalid_request", param)


def _strings(value: Any, name: str, limit: int | None = None) -> list[str]:
    if not isinstance(value, list) or not value:
        raise _bad(f"{name} must be a non-empty array of strings", name)
    for i, x in enumerate(value):
        if not isinstance(x, str):
            raise _bad(f"{name}[{i}] must be a string, got {type(x).__name__}", f"{name}[{i}]")
    if limit is not None and len(value) > limit:
        raise _bad(f"{name} has {len(value)} entries; at most {limit} per request", name)
    return list(value)


def parse_classify(
    body: dict[str, Any], served: str, aliases: set[str]
) -> tuple[list[str], list[str], dict[str, Any]]:
    """``(texts, labels, classify keyword arguments)`` of a /v1/classify body (raises APIError)."""
    model = body.get("model", served)
    if model != served and model not in aliases:
        msg = f"The model {model!r} does not exist; this server serves {served!r}"
        raise APIError(404, msg, "model_not_found", "model")
    texts = _strings(body.get("texts"), "texts", MAX_TEXTS)
    labels = _strings(body.get("labels"), "labels")
    nested = body.get("options", {})
    if not isinstance(nested, dict):
        raise _bad("options must be an object", "options")
    flat = {k: v for k, v in body.items() if k not in ("model", "texts", "labels", "options")}
    both = sorted(set(flat) & set(nested))
    if both:
        raise _bad(f"{both[0]} given twice (at the top level and in options)", both[0])
    kwargs: dict[str, Any] = {}
    for name, value in {**flat, **nested}.items():
        param = name if name in flat else f"options.{name}"
        if name not in OPTIONS:
            raise _bad(f"unknown field {name!r}; classify takes {', '.join(OPTIONS)}", param)
        kinds = OPTIONS[name]
        if value is None:
            continue
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            want = " or ".join("number" if k in (int, float) else k.__name__ for k in kinds)
            raise _bad(f"{name} must be a {want}, got {json.dumps(value)[:40]}", param)
        kwargs[name] = value
    if isinstance(kwargs.get("calibrate"), list):
        kwargs["calibrate"] = _strings(kwargs["calibrate"], "calibrate", MAX_TEXTS)
    descriptions = kwargs.get("descriptions")
    if descriptions is not None and not all(isinstance(v, str) for v in descriptions.values()):
        raise _bad("descriptions must map labels to strings", "descriptions")
    if not 1 <= kwargs.get("batch_size", 1) <= 64:
        raise _bad("batch_size must be an integer in [1, 64]", "batch_size")
    return texts, labels, kwargs


class ClassifyAPI:
    """The ``/v1/classify`` route of a :class:`~corral.server.app.CorralServer`."""

    def __init__(self, server: CorralServer) -> None:
        self.server = server

    async def classify(self, request: Request) -> Response:
        s = self.server
        rid = new_request_id()
        t0 = time.perf_counter()
        if s.inflight >= s.config.max_batch + s.config.max_queue:
            err = APIError(429, "too many concurrent requests; retry later", "too_many_requests")
            return s._fail(err, "classify", rid, t0, headers={"Retry-After": str(s.config.retry_after)})
        s.inflight += 1
        try:
            body = await within(s._read_json(request), t0 + s.config.request_timeout, 408, "reading the body")
            deadline = request_deadline(s.config.request_timeout, request, body, t0)
            texts, labels, kwargs = parse_classify(body, s.config.model_name, s.config.aliases)
            results = await run_on_scheduler(
                s, lambda: classify(s.backend, texts, labels, **kwargs), deadline, "classifying"
            )
            _served(
                s,
                "classify",
                rid,
                t0,
                texts=len(texts),
                labels=len(labels),
                review=sum(r.review for r in results),
            )
            data = [{"index": i, "object": "classification", **r.to_dict()} for i, r in enumerate(results)]
            body_out = {"object": "list", "model": s.config.model_name, "data": data}
            return JSONResponse(body_out, headers={"x-request-id": rid})
        except APIError as e:
            return s._fail(e, "classify", rid, t0)
        except Exception as e:  # a bug: a 500 with the request id; the server keeps serving
            return s._fail(error_from_exception(e), "classify", rid, t0, exc=e)
        finally:
            s.inflight -= 1


def _served(server: CorralServer, endpoint: str, rid: str, t0: float, **fields: Any) -> None:
    """Count and log a request answered with 200 (what every route of this module records)."""
    server.metrics.requests.inc(endpoint=endpoint, status="200")
    server.metrics.latency.observe(time.perf_counter() - t0, endpoint=endpoint)
    log_event(
        "request",
        request_id=rid,
        endpoint=endpoint,
        status=200,
        seconds=round(time.perf_counter() - t0, 4),
        **fields,
    )


async def run_on_scheduler(server: CorralServer, fn: Any, deadline: float, what: str) -> Any:
    """``fn()`` on the scheduler thread, within the request's deadline; its errors as APIErrors
    (bad input: 400; a failure of the model: 500)."""
    if not server.scheduler.alive:
        raise APIError(503, "the model worker has stopped; restart the server", "unavailable")
    fut = server.scheduler.call(fn)
    try:
        return await within(asyncio.wrap_future(fut), deadline, 504, what)
    except APIError:
        raise
    except Exception as e:
        raise error_from_exception(e) from None


def scored_choices(req: GenRequest, constraint: Constraint | None) -> bool:
    """Is this a greedy ``choices`` completion — answered by scoring each choice as a whole answer,
    as :func:`corral.classify` does, instead of token-by-token decoding?"""
    return (
        req.endpoint == "completions"
        and constraint is not None
        and constraint.kind == "choices"
        and constraint.think is None
        and req.params.greedy
    )


async def choices_response(
    server: CorralServer,
    req: GenRequest,
    constraint: Constraint,
    max_tokens: int,
    rid: str,
    t0: float,
    deadline: float,
    headers: dict[str, str],
) -> Response:
    """The /v1/completions response for a greedy ``choices`` request (see :func:`scored_choices`):
    each prompt's most probable choice, ``n`` times (greedy), whole or as a stream."""

    def run() -> list[GenerationResult]:
        return best_choices(server.backend, req.prompts, constraint, chat=False, max_new_tokens=max_tokens)

    results = await run_on_scheduler(server, run, deadline, "scoring the choices")
    picked = [r for r in results for _ in range(req.n)]
    u = usage(sum(r.prompt_tokens for r in results), sum(r.completion_tokens for r in picked))
    _served(
        server,
        "completions",
        rid,
        t0,
        scored_choices=len(constraint.choices or ()),
        prompt_tokens=u["prompt_tokens"],
        completion_tokens=u["completion_tokens"],
        forward_passes=max((r.forward_passes for r in results), default=0),
    )
    base = envelope("text_completion", rid, req.model)
    if not req.stream:
        choices = [
            {"index": i, "text": r.text, "finish_reason": "stop", "logprobs": None}
            for i, r in enumerate(picked)
        ]
        return JSONResponse({**base, "choices": choices, "usage": u}, headers=headers)

    def events() -> Iterator[str]:
        for i, r in enumerate(picked):
            for text, finish in ((r.text, None), ("", "stop")):
                c = {"index": i, "text": text, "finish_reason": finish, "logprobs": None}
                yield "data: " + json.dumps({**base, "choices": [c]}, ensure_ascii=False) + "\n\n"
        if req.include_usage:
            yield "data: " + json.dumps({**base, "choices": [], "usage": u}) + "\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={**headers, "cache-control": "no-cache"}
    )
