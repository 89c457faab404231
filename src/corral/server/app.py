"""The HTTP side of ``corral serve``: a Starlette app with the OpenAI endpoints.

Request path (``POST /v1/chat/completions`` and ``/v1/completions``):

1. admission: more than ``max_batch + max_queue`` requests in flight → 429 with ``Retry-After``;
2. the body is read with a size bound (413), within the request's deadline (408), and parsed
   (400 for malformed JSON); the deadline (``request_timeout``, or less when the request asks:
   ``"timeout"`` in the body, the OpenAI client's ``x-stainless-read-timeout`` header) bounds
   everything after it: compile wait, queue and decoding (504, rows freed);
3. the fields are checked (:mod:`corral.server.protocol`; 400/404);
4. the constraint is fetched from the compile cache, or compiled in a compile thread while this
   coroutine waits (other requests keep decoding);
5. the prompt is rendered and tokenized, its length and the output budget checked (400);
6. a :class:`~corral.server.scheduler.Job` goes to the scheduler thread, and its text deltas and
   results come back through an asyncio queue — returned as one response or streamed as
   server-sent events. A client that disconnects cancels its job: its rows are freed at the
   next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from corral import __version__
from corral.backends.base import Backend
from corral.compile import CompileCache, Constraint, ConstraintSpec, SchemaConverter, compile_constraint_async
from corral.compile.thinking import ReasoningSplitter
from corral.errors import BudgetError, CorralError, LimitExceeded, SlotError
from corral.generation.decode import RowOutput, check_budget
from corral.grammar import bounded_json
from corral.grammar.tool_formats import detect_format
from corral.runtime.thinking import think_budget
from corral.runtime.tokens import tools_for
from corral.server.admin import AdminAPI
from corral.server.classify import ClassifyAPI, choices_response, scored_choices
from corral.server.config import ServerConfig, disk_cache
from corral.server.deadlines import request_deadline, within
from corral.server.errors import APIError, error_from_exception
from corral.server.fields import IGNORED_HEADER, header_value
from corral.server.logprobs import TraceStream, choice_extras
from corral.server.logs import log_event, new_request_id
from corral.server.metrics import ServerMetrics
from corral.server.observe import RequestObserver
from corral.server.playground import routes as playground_routes
from corral.server.protocol import (
    FINISH,
    GenRequest,
    envelope,
    parse_chat,
    parse_completion,
    usage,
)
from corral.server.registry import ConstraintRegistry, served_version
from corral.server.scheduler import Job, Scheduler
from corral.server.tool_stream import ToolDeltas, tool_message

__all__ = ["CorralServer"]

# Deepest request body read (JSON nesting levels): below Python's own recursion limit.
_MAX_BODY_DEPTH = 900


class _SSEResponse(StreamingResponse):
    """A streaming response that runs ``on_close`` however the stream ends (finished, client
    gone, send failed), so an abandoned job is always cancelled."""

    def __init__(self, content: AsyncIterator[str], on_close: Any, **kw: Any) -> None:
        super().__init__(content, media_type="text/event-stream", **kw)
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


class CorralServer:
    """The server: model, compile cache, scheduler, metrics and the Starlette ``app``.

    Parameters
    ----------
    backend : Backend
        The loaded model (owned by the scheduler thread from now on).
    config : ServerConfig
        Limits and options.
    """

    def __init__(self, backend: Backend, config: ServerConfig) -> None:
        self.backend = backend
        self.config = config
        self.tokenizer = backend.tokenizer
        self.metrics = ServerMetrics()
        disk = disk_cache(config, self.metrics)  # None: memory only
        self.cache = CompileCache(config.cache_mb * 1024 * 1024, config.compile_workers, self.metrics, disk)
        self.converter = SchemaConverter(config.compile_workers)
        self.scheduler = Scheduler(backend, self.metrics, config.max_batch)
        self.registry = ConstraintRegistry(  # --schema-dir and the admin API (server/registry.py)
            self.tokenizer,
            self.cache,
            self._configured,
            self.converter,
            config.schema_dir if config.registry_persist else None,
            config.trusted_keys or None,
            config.limits,
        )
        self.inflight = 0
        self.started = time.time()
        # (requests' default tool-call format, the format the chat template declares)
        declared = detect_format(backend.chat_template_source)
        self.tool_formats = (declared if config.tool_format == "auto" else config.tool_format, declared)
        m = self.metrics
        m.gauge("corral_compile_cache_entries", "Compiled constraints cached.", lambda: self.cache.entries)
        m.gauge(
            "corral_compile_cache_bytes", "Estimated memory of the compile cache.", lambda: self.cache.bytes
        )
        m.gauge(
            "corral_active_rows",
            "Sequences decoding or waiting for prefill.",
            lambda: self.scheduler.active_rows,
        )
        m.gauge(
            "corral_queued_requests", "Requests waiting for room in the batch.", lambda: self.scheduler.queued
        )
        m.gauge("corral_inflight_requests", "Requests being served.", lambda: self.inflight)
        if config.schema_dir is not None:
            self.registry.load_dir(config.schema_dir)
        m.gauge(
            "corral_registry_versions",
            "Live versions in the constraint registry.",
            lambda: len(self.registry),
        )
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/classify", ClassifyAPI(self).classify, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/health", self.health, methods=["GET"]),
                Route("/metrics", self.metrics_endpoint, methods=["GET"]),
                *(playground_routes() if config.playground else []),
                *AdminAPI(self, self.registry).routes(),
            ],
            lifespan=self._lifespan,
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.scheduler.start()
        log_event("ready", model=self.config.model_name, backend=self.backend.describe())
        try:
            yield
        finally:
            self.scheduler.stop()
            self.cache.close()
            self.converter.close()

    def _configured(self, spec: ConstraintSpec) -> ConstraintSpec:
        """The spec with the operator's limits and schema options (``--limit``,
        ``--schema-option``)."""
        spec = spec.with_limits(self.config.limits)
        opts = {k: v for k, v in self.config.schema_options.items() if k != "strict"}
        if opts and spec.kind in ("json_schema", "json", "json_object", "tools"):
            spec = spec.with_options(**opts)
        return spec

    @staticmethod
    def _api_error(e: BaseException, spec: ConstraintSpec) -> APIError:
        """A compile failure as the client sees it (tool errors name the tool's own field)."""
        return error_from_exception(e, spec.param)

    # ---------------------------------------------------------------- small endpoints

    async def models(self, request: Request) -> Response:
        self.metrics.requests.inc(endpoint="models", status="200")
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.config.model_name,
                        "object": "model",
                        "created": int(self.started),
                        "owned_by": "corral",
                    }
                ],
            }
        )

    async def health(self, request: Request) -> Response:
        ok = self.scheduler.alive
        status = 200 if ok else 503
        self.metrics.requests.inc(endpoint="health", status=str(status))
        return JSONResponse(
            {
                "status": "ok" if ok else "error",
                "model": self.config.model_name,
                "backend": self.backend.name,
                "version": __version__,
                "active_rows": self.scheduler.active_rows,
                "queued": self.scheduler.queued,
                "inflight": self.inflight,
            },
            status_code=status,
        )

    async def metrics_endpoint(self, request: Request) -> Response:
        self.metrics.requests.inc(endpoint="metrics", status="200")
        return PlainTextResponse(self.metrics.render(), media_type="text/plain; version=0.0.4")

    # ---------------------------------------------------------------- generation

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate(request, "chat")

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, "completions")

    def _fail(
        self,
        e: APIError,
        endpoint: str,
        rid: str,
        t0: float,
        headers: dict[str, str] | None = None,
        exc: BaseException | None = None,
        obs: RequestObserver | None = None,
    ) -> Response:
        if obs is not None:
            obs.failed(e.code, e.status)
        self.metrics.errors.inc(kind=e.code)
        self.metrics.requests.inc(endpoint=endpoint, status=str(e.status))
        self.metrics.latency.observe(time.perf_counter() - t0, endpoint=endpoint)
        level = logging.ERROR if e.status >= 500 else logging.INFO
        # One log line per failed request; an internal error carries its traceback in it.
        log_event(
            "request",
            level,
            exc_info=exc,
            request_id=rid,
            endpoint=endpoint,
            status=e.status,
            error=e.code,
            message=e.message,
        )
        body = e.body()
        if e.status >= 500:
            body["error"]["request_id"] = rid  # what to quote when reporting it
        return JSONResponse(body, status_code=e.status, headers={"x-request-id": rid, **(headers or {})})

    async def _generate(self, request: Request, endpoint: str) -> Response:
        rid = new_request_id()
        t0 = time.perf_counter()
        obs = RequestObserver(self.metrics, self.tokenizer, request.headers, endpoint, rid)
        if self.inflight >= self.config.max_batch + self.config.max_queue:
            return self._fail(
                APIError(429, "too many concurrent requests; retry later", "too_many_requests"),
                endpoint,
                rid,
                t0,
                headers={"Retry-After": str(self.config.retry_after)},
                obs=obs,
            )
        self.inflight += 1
        handed_off = False
        try:
            deadline = t0 + self.config.request_timeout
            body = await within(self._read_json(request), deadline, 408, "reading the body")
            deadline = request_deadline(self.config.request_timeout, request, body, t0)
            parse = parse_chat if endpoint == "chat" else parse_completion
            aliases = self.config.aliases
            extra = {"tool_formats": self.tool_formats} if endpoint == "chat" else {}
            req = parse(body, self.config.model_name, aliases, self.registry, self.config.max_n, **extra)
            # Fields that changed nothing are said, to the client (a header) and in the log.
            ignored = {IGNORED_HEADER: header_value(req.ignored)} if req.ignored else {}
            if req.ignored:
                log_event(
                    "ignored_fields",
                    logging.WARNING,
                    request_id=rid,
                    endpoint=endpoint,
                    fields=req.ignored[:100],
                )
            obs.stage = "constraint"  # failures from here to the binding are refusals
            constraint, cache, compile_s = await within(
                self._constraint(req.spec, obs), deadline, 504, "compiling the constraint"
            )
            constraint = self._bind_slots(constraint, req.slots, obs)
            obs.stage = ""
            prompts = await asyncio.to_thread(self._render, req)
            max_tokens = self._budget(req, prompts, constraint)
            if constraint is not None and scored_choices(
                req, constraint
            ):  # greedy choices: whole answers, as corral.classify
                hdrs = {"x-request-id": rid, "x-corral-cache": cache, **ignored}
                return await choices_response(self, req, constraint, max_tokens, rid, t0, deadline, hdrs)
            job = Job(
                id=rid,
                prompts=[p for p in prompts for _ in range(req.n)],
                constraint=constraint,
                max_tokens=max_tokens,
                params=req.params,
                loop=asyncio.get_running_loop(),
                events=asyncio.Queue(),
                t_arrival=t0,
                obs=obs,
                trace=req.trace.top_k if req.trace is not None else None,
            )
            info = {"cache": cache, "compile_s": round(compile_s, 4)}
            # Exposed to clients too: whether the constraint was cached and how long it took.
            headers = {
                "x-request-id": rid,
                "x-corral-cache": cache,
                "x-corral-compile-seconds": f"{compile_s:.4f}",
                **served_version(req.spec),  # x-corral-constraint: the registry version served
                **ignored,
            }
            self.scheduler.submit(job)
            if req.stream:
                handed_off = True
                state: dict[str, Any] = {"finished": False}

                def on_close() -> None:
                    if not state["finished"]:
                        self.scheduler.cancel(job)
                        obs.close(error="the stream ended before the output did")
                    self.inflight -= 1

                return _SSEResponse(
                    self._stream(job, req, prompts, rid, endpoint, t0, info, state, deadline),
                    on_close,
                    headers={**headers, "cache-control": "no-cache"},
                )
            outs = await within(self._collect(job, request), deadline, 504, "generating")
            response = self._response(req, job, prompts, outs, rid)
            self._done(endpoint, rid, t0, job, outs, info)
            return JSONResponse(response, headers=headers)
        except APIError as e:
            return self._fail(e, endpoint, rid, t0, obs=obs)
        except Exception as e:  # a bug: reported as 500 (with the request id), the server keeps serving
            return self._fail(error_from_exception(e), endpoint, rid, t0, exc=e, obs=obs)
        finally:
            if not handed_off:
                self.inflight -= 1

    async def _read_json(self, request: Request) -> dict[str, Any]:
        limit = self.config.max_body_bytes
        too_big = APIError(413, f"request body exceeds {limit} bytes", "request_too_large")
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise too_big
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > limit:
                raise too_big
        try:
            # Depth-checked before parsing: json.loads would raise RecursionError (a 500) on a
            # body nested thousands deep; schemas inside are held to max_schema_depth later.
            body = bounded_json.loads(bytes(data), _MAX_BODY_DEPTH, "max_body_depth", "the request body")
        except LimitExceeded as e:
            raise APIError(400, str(e), "invalid_json") from None
        except ValueError as e:
            raise APIError(400, f"the request body is not valid JSON: {e}", "invalid_json") from None
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object", "invalid_json")
        return body

    async def _constraint(
        self, spec: ConstraintSpec | None, obs: RequestObserver | None = None
    ) -> tuple[Constraint | None, str, float]:
        """The compiled constraint (awaiting its compile thread on a miss): (constraint, where
        it came from: ``hit`` (memory, or a compile already running), ``disk`` (loaded from
        ``--cache-dir``), ``miss`` (compiled) or ``none`` (no constraint), seconds waited)."""
        if spec is None:
            return None, "none", 0.0
        t0 = time.perf_counter()
        spec = self._configured(spec)
        try:
            fut, hit = compile_constraint_async(
                spec, self.tokenizer, cache=self.cache, converter=self.converter
            )
            waited = not fut.done()  # on a compile thread (this request's, or one already running)
            # Shielded: the future is shared by every request waiting on this compile, and a
            # request that gives up (its deadline, a disconnect) must not cancel it for the rest.
            constraint = await asyncio.shield(asyncio.wrap_future(fut))
            if obs is not None:
                obs.compiled(spec, self.tokenizer.hash, hit, waited, t0)
        except APIError:
            raise
        except Exception as e:
            raise self._api_error(e, spec) from None
        source = (
            "hit" if hit else "disk" if self.cache.loaded_from_disk(spec.key(self.tokenizer.hash)) else "miss"
        )
        return constraint, source, time.perf_counter() - t0

    def _bind_slots(
        self,
        constraint: Constraint | None,
        slots: dict[str, list[str]] | None,
        obs: RequestObserver | None = None,
    ) -> Constraint | None:
        """Bind the request's ``corral_slots`` to the cached skeleton (per request, sub-ms; the
        skeleton itself is never recompiled, so its cache entry serves every value set)."""
        if constraint is None:
            if slots:
                raise APIError(
                    400,
                    "corral_slots given, but the constraint has no slots (x-corral-slot)",
                    "invalid_slots",
                    "corral_slots",
                )
            return None
        missing = constraint.missing_slots(slots)
        if missing:
            raise APIError(
                400,
                f"the schema's slot(s) {missing} need values in corral_slots",
                "missing_slots",
                "corral_slots",
            )
        t0 = time.perf_counter()
        try:
            bound = constraint.bind(slots)
        except (SlotError, LimitExceeded) as e:
            raise APIError(400, str(e), "invalid_slots", "corral_slots") from None
        if bound is not constraint:
            self.metrics.slot_bind_time.observe(time.perf_counter() - t0)
            if obs is not None:
                obs.bound(constraint.slot_names, t0)
        return bound

    def _render(self, req: GenRequest) -> list[list[int]]:
        """Token ids of each prompt (chat: the model's template; completions: raw text)."""
        try:
            if req.endpoint == "chat":
                tools, kwargs = req.template_tools, req.template_kwargs
                return [self.backend.render(req.prompts[0], chat=True, tools=tools, template_kwargs=kwargs)]
            return [self.backend.render(p, chat=False) for p in req.prompts]
        except CorralError as e:
            raise APIError(400, str(e), "invalid_request", "messages") from None

    def _budget(self, req: GenRequest, prompts: list[list[int]], constraint: Constraint | None) -> int:
        """The output budget, after checking the prompt length and that the constraint's
        shortest output fits (400 otherwise)."""
        ctx = self.backend.context_length
        longest = max(len(p) for p in prompts)
        cap = min(ctx, self.config.max_prompt_tokens or ctx)
        param = "messages" if req.endpoint == "chat" else "prompt"
        if longest == 0:
            raise APIError(400, "the prompt is empty", "invalid_request", param)
        if longest > cap or longest >= ctx:
            raise APIError(
                400,
                f"the prompt has {longest} tokens; this model's limit is {cap - 1 if cap == ctx else cap}",
                "context_length_exceeded",
                param,
            )
        room = ctx - longest
        if req.max_tokens is None:
            max_tokens = min(self.config.max_tokens_default, room)
        elif req.max_tokens > room:
            raise APIError(
                400,
                f"{longest} prompt tokens + max_tokens={req.max_tokens} exceed the model's context "
                f"of {ctx} tokens",
                "context_length_exceeded",
                "max_tokens",
            )
        else:
            max_tokens = req.max_tokens
        if constraint is not None:
            try:
                check_budget(self.backend, constraint.grammar, max_tokens)
            except BudgetError as e:
                raise APIError(400, str(e), "max_tokens_too_small", "max_tokens") from None
            try:
                think_budget(constraint.think, tools_for(self.tokenizer))
            except BudgetError as e:
                raise APIError(400, str(e), "thinking_budget_too_small", "thinking") from None
        return max_tokens

    async def _collect(self, job: Job, request: Request) -> list[RowOutput]:
        """Wait for every row's result; cancel the job if the client disconnects meanwhile."""
        outs: list[RowOutput | None] = [None] * len(job.prompts)

        async def watch() -> None:
            while True:
                await asyncio.sleep(0.25)
                if await request.is_disconnected():
                    self.scheduler.cancel(job)
                    return

        watcher = asyncio.create_task(watch())
        try:
            while any(o is None for o in outs):
                kind, i, payload = await job.events.get()
                if kind == "done":
                    outs[i] = payload
                elif kind == "error":
                    raise APIError(500, f"generation failed: {payload}", "generation_failed")
        except asyncio.CancelledError:
            self.scheduler.cancel(job)
            raise
        finally:
            watcher.cancel()
        return [o for o in outs if o is not None]

    @staticmethod
    def _splitter(constraint: Constraint | None) -> ReasoningSplitter:
        assert constraint is not None and constraint.think is not None
        kind = constraint.spec.without_thinking().kind
        return ReasoningSplitter(constraint.think, kind in ("json_schema", "json", "json_object", "tools"))

    def _text(self, out: RowOutput) -> str:
        return self.tokenizer.decode(out.tokens).decode("utf-8", errors="replace")

    def _choice(self, req: GenRequest, job: Job, index: int, out: RowOutput, rid: str) -> dict[str, Any]:
        if out.stop_reason == "error":
            raise APIError(500, f"generation failed: {out.error}", "generation_failed")
        text = self._text(out)
        finish = FINISH.get(out.stop_reason, "stop")
        t_read = time.perf_counter()
        value, error = job.constraint.read(text) if job.constraint is not None else (text, None)
        if job.constraint is not None and job.obs is not None:
            job.obs.validated(job.constraint, text, error, t_read)
        choice: dict[str, Any] = {"index": index, "finish_reason": finish, "logprobs": None}
        if req.endpoint == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if job.constraint is not None and job.constraint.think is not None:
                # The think block goes out as reasoning_content (vLLM's / DeepSeek's field).
                message["reasoning_content"], message["content"] = job.constraint.split(text)
            if job.constraint is not None and job.constraint.spec.without_thinking().kind == "tools":
                fields, error = tool_message(job.constraint, text, f"call_{rid[:16]}_{index}")
                message.update(fields)
                if "tool_calls" in fields:
                    choice["finish_reason"] = "tool_calls" if finish == "stop" else finish
            choice["message"] = message
        else:
            choice["text"] = text
        if error is not None or out.truncated:
            # corral extension: why a (rare) output did not validate; whether it was cut short.
            choice["corral"] = {"validation_error": error, "truncated": out.truncated}
        extra = choice_extras(req.trace, req.endpoint, out, self.tokenizer, error, job.constraint is not None)
        if "corral" in extra:  # logprobs, and the corral_trace extension (server/logprobs.py)
            extra["corral"] = {**choice.get("corral", {}), **extra["corral"]}
        choice.update(extra)
        return choice

    def _response(
        self, req: GenRequest, job: Job, prompts: list[list[int]], outs: list[RowOutput], rid: str
    ) -> dict[str, Any]:
        kind = "chat.completion" if req.endpoint == "chat" else "text_completion"
        body = envelope(kind, rid, req.model)
        body["choices"] = [self._choice(req, job, i, o, rid) for i, o in enumerate(outs)]
        body["usage"] = usage(sum(len(p) for p in prompts), sum(len(o.tokens) for o in outs))
        return body

    def _done(
        self, endpoint: str, rid: str, t0: float, job: Job, outs: list[RowOutput], info: dict[str, Any]
    ) -> None:
        if job.obs is not None:  # quality metrics, spans (a streamed reply is validated here)
            job.obs.finish(job, outs, validate=True)
        elapsed = time.perf_counter() - t0
        self.metrics.requests.inc(endpoint=endpoint, status="200")
        self.metrics.latency.observe(elapsed, endpoint=endpoint)
        ttft = job.t_first_token - t0 if job.t_first_token is not None else None
        log_event(
            "request",
            request_id=rid,
            endpoint=endpoint,
            status=200,
            seconds=round(elapsed, 4),
            ttft_s=round(ttft, 4) if ttft is not None else None,
            queue_s=round(job.t_admitted - t0, 4) if job.t_admitted is not None else None,
            prompt_tokens=sum(o.prompt_tokens for o in outs),
            completion_tokens=sum(len(o.tokens) for o in outs),
            forward_passes=max((o.forward_passes for o in outs), default=0),
            forced_tokens=sum(o.forced_tokens for o in outs),
            stop=[o.stop_reason for o in outs],
            **info,
        )

    async def _stream(
        self,
        job: Job,
        req: GenRequest,
        prompts: list[list[int]],
        rid: str,
        endpoint: str,
        t0: float,
        info: dict[str, Any],
        state: dict[str, Any],
        deadline: float,
    ) -> AsyncIterator[str]:
        """Server-sent events in OpenAI's chunk format, ending with ``data: [DONE]``.

        A tools reply streams as OpenAI's do: prose as content, each call as a delta with its
        id and name, then its argument deltas (:class:`~corral.server.tool_stream.ToolDeltas`)."""
        chat = req.endpoint == "chat"
        kind = "chat.completion.chunk" if chat else "text_completion"
        base = envelope(kind, rid, req.model)
        rows = len(job.prompts)
        c = job.constraint
        calls = chat and c is not None and c.spec.without_thinking().kind == "tools"
        # A tools reply streams as content and tool_calls deltas (corral.server.tool_stream).
        tool_rows = [ToolDeltas(c, f"call_{rid[:16]}_{i}") if calls else None for i in range(rows)]
        outs: list[RowOutput | None] = [None] * rows
        think = job.constraint.think if chat and job.constraint is not None else None
        # A think block streams as reasoning_content deltas, split off as the text arrives.
        splitters = [None if think is None else self._splitter(job.constraint) for _ in range(rows)]

        traces = TraceStream(req.trace, req.endpoint, self.tokenizer, job.rows)

        def chunk(i: int, delta: dict[str, Any] | str, finish: str | None = None, extra: Any = None) -> str:
            c: dict[str, Any] = {"index": i, "finish_reason": finish, "logprobs": None, **(extra or {})}
            if chat:
                c["delta"] = delta
            else:
                c["text"] = delta
            return "data: " + json.dumps({**base, "choices": [c]}, ensure_ascii=False) + "\n\n"

        if chat:
            for i in range(rows):
                yield chunk(i, {"role": "assistant", "content": ""})
        while any(o is None for o in outs):
            try:
                ev, i, payload = await asyncio.wait_for(
                    job.events.get(), timeout=max(0.0, deadline - time.perf_counter())
                )
            except TimeoutError:
                # Past the deadline: an error event, [DONE], and the rows are freed on close.
                err = APIError(504, "the request did not finish within its deadline (generating)", "timeout")
                self.metrics.errors.inc(kind="timeout")
                log_event("request", request_id=rid, endpoint=endpoint, status=504, error="timeout")
                yield "data: " + json.dumps(err.body()) + "\n\n"
                yield "data: [DONE]\n\n"
                return
            if ev == "error":
                err = APIError(500, f"generation failed: {payload}", "generation_failed")
                yield "data: " + json.dumps(err.body()) + "\n\n"
                break
            if ev == "text":
                sp = splitters[i]
                pieces = [("content", payload)] if sp is None else sp.feed(payload)
                for what, piece in pieces:
                    if what == "reasoning":
                        yield chunk(i, {"reasoning_content": piece})
                        continue
                    tr = tool_rows[i]
                    for d in tr.feed(piece) if tr is not None else [{"content": piece} if chat else piece]:
                        yield chunk(i, d)
                if extra := traces.progress(i):  # logprobs / trace of the tokens now complete
                    yield chunk(i, {} if chat else "", None, extra)
                continue
            out: RowOutput = payload
            outs[i] = out
            sp = splitters[i]
            tr = tool_rows[i]
            for what, piece in sp.finish() if sp is not None else []:
                if what == "reasoning":
                    yield chunk(i, {"reasoning_content": piece})
                elif tr is not None:
                    for d in tr.feed(piece):
                        yield chunk(i, d)
                else:
                    yield chunk(i, {"content": piece})
            if req.trace is not None:
                error = job.constraint.read(self._text(out))[1] if job.constraint is not None else None
                if extra := traces.final(i, out, error, job.constraint is not None):
                    yield chunk(i, {} if chat else "", None, extra)
            finish = FINISH.get(out.stop_reason, "stop")
            if tr is not None:
                deltas, called = tr.finish()
                for d in deltas:
                    yield chunk(i, d)
                finish = "tool_calls" if called and finish == "stop" else finish
            yield chunk(i, {} if chat else "", finish)
        state["finished"] = True
        done = [o for o in outs if o is not None]
        if req.include_usage:
            u = usage(sum(len(p) for p in prompts), sum(len(o.tokens) for o in done))
            yield "data: " + json.dumps({**base, "choices": [], "usage": u}) + "\n\n"
        yield "data: [DONE]\n\n"
        self._done(endpoint, rid, t0, job, done, info)
