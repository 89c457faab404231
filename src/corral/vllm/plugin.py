"""The vLLM plugin that makes ``corral`` a structured-output backend name.

    pip install 'corral[vllm]'
    vllm serve MODEL --structured-outputs-config '{"backend": "corral"}'

Why a general plugin, and what it changes. vLLM (0.32) has no registry of structured-output
backends: the accepted names are a ``Literal`` in ``StructuredOutputsConfig``, the engine's
``StructuredOutputManager`` builds its backend from an ``if``/``elif`` list, and
``SamplingParams._validate_structured_outputs`` validates each request with the chosen backend's
own rules. The one hook vLLM loads in every process it starts (the API server, the engine core,
the workers), before it parses its arguments, is the ``vllm.general_plugins`` entry point — the
hook vLLM documents for adding choices to its arguments. corral's entry point calls
:func:`register`, which, without editing any vLLM file:

1. adds ``"corral"`` to the names ``StructuredOutputsConfig.backend`` accepts;
2. has the manager build :class:`corral.vllm._backend.CorralBackend` for requests routed to
   ``corral`` (it sets the manager's backend before vLLM's own ``grammar_init`` runs, which then
   compiles in the background as for any backend);
3. validates requests routed to ``corral`` with corral's rules (every vLLM constraint field, plus
   corral's own arguments from ``vllm_xargs``: slots, tool formats, thinking blocks), so a schema
   corral compiles is never refused by another engine's validator.

With any other backend configured, all three pass straight through to vLLM. On a vLLM whose
internals differ (a name this plugin wraps is missing), :func:`register` logs why and changes
nothing: the backend is then unavailable and the logits processor still works.

Offline (``vllm.LLM``), call :func:`register` before building the ``LLM`` when passing
``structured_outputs_config={"backend": "corral"}``: ``LLM`` checks that argument before vLLM
loads its plugins.
"""

from __future__ import annotations

import logging
import typing
from collections.abc import Mapping
from typing import Any

__all__ = ["register"]

log = logging.getLogger("corral.vllm")

_registered = False


def register() -> None:
    """Make ``corral`` a structured-output backend of the vLLM in this process (idempotent; a
    no-op without vLLM)."""
    global _registered
    if _registered:
        return
    try:
        from vllm.config import StructuredOutputsConfig
        from vllm.sampling_params import SamplingParams
        from vllm.v1.structured_output import StructuredOutputManager
    except ImportError as e:  # vLLM absent or reorganised: nothing to register into
        log.warning(
            "corral: vLLM's structured-output internals are not importable (%s); "
            "the corral backend is not registered",
            e,
        )
        return
    missing = [
        name
        for obj, name in (
            (StructuredOutputManager, "grammar_init"),
            (SamplingParams, "_validate_structured_outputs"),
        )
        if not callable(getattr(obj, name, None))
    ]
    fields = getattr(StructuredOutputsConfig, "__pydantic_fields__", {})
    if "backend" not in fields:
        missing.append("StructuredOutputsConfig.backend")
    if missing:
        log.warning("corral: this vLLM lacks %s; the corral backend is not registered", missing)
        return
    _accept_backend_name(StructuredOutputsConfig)
    _wrap_manager(StructuredOutputManager)
    _wrap_validation(SamplingParams)
    _registered = True


def _accept_backend_name(config: Any) -> None:
    """Add "corral" to the ``Literal`` of backend names and rebuild the config's validator."""
    import dataclasses

    from pydantic.dataclasses import rebuild_dataclass

    from corral.vllm._spec import BACKEND_NAME

    old = config.__pydantic_fields__["backend"].annotation
    names = typing.get_args(old)
    if BACKEND_NAME in names:
        return
    new = typing.Literal[names + (BACKEND_NAME,)]  # type: ignore[valid-type]
    config.__annotations__["backend"] = new
    for f in dataclasses.fields(config):
        if f.name == "backend":
            f.type = new
    # Pydantic keeps the fields it collected; dropping them makes the rebuild read the new type.
    del config.__pydantic_fields__
    config.__pydantic_complete__ = False
    rebuild_dataclass(config, force=True)


def _wrap_manager(manager: Any) -> None:
    from corral.vllm._spec import BACKEND_NAME

    original = manager.grammar_init

    def grammar_init(self: Any, request: Any) -> None:
        so = getattr(request.sampling_params, "structured_outputs", None)
        routed = (
            request.structured_output_request is not None and getattr(so, "_backend", None) == BACKEND_NAME
        )
        if not routed:
            return original(self, request)
        if self.backend is None:
            from corral.vllm._backend import CorralBackend

            self.backend = CorralBackend(
                self.vllm_config,
                tokenizer=self.tokenizer,
                vocab_size=self.vllm_config.model_config.get_vocab_size(),
            )
            if hasattr(self, "backend_name"):  # vLLM 0.34 checks each request's backend against it
                self.backend_name = BACKEND_NAME
        if not getattr(self, "_use_async_grammar_compilation", False) or not hasattr(
            self.backend, "grammar_future"
        ):
            return original(self, request)  # vLLM's synchronous mode (external_launcher)
        # Not vLLM's compile pool (one thread on two cores): a cached constraint is ready now
        # instead of queueing behind another request's compile (CorralBackend.grammar_future).
        kind, text = request.structured_output_request.structured_output_key
        request.structured_output_request.grammar = self.backend.grammar_future(kind, text)

    grammar_init.__wrapped__ = original  # type: ignore[attr-defined]
    manager.grammar_init = grammar_init


def _wrap_validation(sampling_params: Any) -> None:
    from corral.vllm._spec import BACKEND_NAME

    original = sampling_params._validate_structured_outputs

    def _validate_structured_outputs(
        self: Any, model_config: Any, structured_outputs_config: Any, tokenizer: Any
    ) -> None:
        if structured_outputs_config is None or structured_outputs_config.backend != BACKEND_NAME:
            return original(self, model_config, structured_outputs_config, tokenizer)
        from vllm.exceptions import VLLMValidationError

        try:
            route_to_corral(self, tokenizer)
        except ValueError as e:
            raise VLLMValidationError(str(e)) from None

    _validate_structured_outputs.__wrapped__ = original  # type: ignore[attr-defined]
    sampling_params._validate_structured_outputs = _validate_structured_outputs


def route_to_corral(params: Any, tokenizer: Any) -> None:
    """Check a request for the corral backend and route it there: its constraint (vLLM's
    ``structured_outputs`` fields, or corral's arguments from ``vllm_xargs`` /
    ``extra_args["corral"]``) compiled against a byte vocabulary, so a bad one is a 400 naming
    the problem; then ``structured_outputs`` carries it to the backend. Raises ValueError."""
    from vllm.sampling_params import StructuredOutputsParams

    from corral.vllm._spec import (
        BACKEND_NAME,
        corral_args,
        from_structured_outputs,
        parse_request,
        routed_grammar,
    )

    so = params.structured_outputs
    extra = params.extra_args or {}
    own = corral_args(extra)
    if so is None and not own:
        return
    if so is not None and own:
        raise ValueError(
            "corral: a request cannot ask for both corral's constraint (vllm_xargs corral_*) and "
            "vLLM's structured outputs (response_format / structured_outputs)"
        )
    chosen = getattr(so, "_backend", None) if so is not None else None
    if chosen not in (None, BACKEND_NAME) and not getattr(so, "_backend_was_auto", False):
        raise ValueError(
            f"corral: the request chose the structured-output backend {chosen!r}, but this server "
            f"runs {BACKEND_NAME!r}"
        )
    if tokenizer is None:
        raise ValueError("corral: structured outputs need a tokenizer (not with skip_tokenizer_init)")
    if own:
        args: Mapping[str, Any] = own
        # The arguments move into structured_outputs: a logits processor also loaded must not
        # apply them a second time.
        params.extra_args = {
            k: v for k, v in extra.items() if k != "corral" and not k.startswith("corral_")
        } or None
    else:
        args = from_structured_outputs(so) or {}
    request = parse_request({"corral": dict(args)})
    if request is None:
        raise ValueError("corral: structured_outputs names no constraint")
    _admission_check(request)
    # Always the routed form: it carries per-request options (not part of vLLM's grammar key)
    # and the request's max_tokens (the backend's budget), and reads the same in every process.
    so = StructuredOutputsParams(grammar=routed_grammar(args, params.max_tokens))
    so._backend = BACKEND_NAME
    so._backend_was_auto = False
    params.structured_outputs = so


_ENV_CHECK_MS = "CORRAL_VLLM_CHECK_MS"
_checker: Any = None  # (thread pool, schema converter), made on first use in the API process


def _admission_check(request: Any) -> None:
    """Compile the request's constraint against a byte vocabulary, waiting at most
    ``CORRAL_VLLM_CHECK_MS`` (default 50; -1: until it is done) for the result.

    vLLM validates requests synchronously on its API server's event loop, which also streams
    every other request's tokens: a check that took a second there held every stream for that
    second (measured: cached requests' time to first token p95 x3 while new schemas arrived). So
    the check runs on a helper thread, its schema conversion in a low-priority process (the
    event loop keeps the GIL), and admission waits only so long: a constraint that fails within
    the wait (malformed JSON, unknown keywords, bad regex syntax, most limits) is a 400 with
    corral's message; one still being checked is admitted, and if it then fails, the engine's
    own compile fails that request alone (vLLM reports an error for it) and the reason is
    logged here and in the engine."""
    global _checker
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    from corral.vllm._adapter import schema_converter
    from corral.vllm._spec import check_spec

    budget_ms = _check_ms()
    if _checker is None:
        pool = ThreadPoolExecutor(2, thread_name_prefix="corral-check")
        # The converter's process starts on the helper thread, off the event loop (about a
        # second); checks wait for it there. Lowest priority: past the wait a check only serves
        # the log (the engine compiles the request itself), so it must not take a core from
        # decoding.
        _checker = (pool, pool.submit(schema_converter, 19))
    pool, converter = _checker
    future = pool.submit(lambda: check_spec(request, converter.result()))
    try:
        future.result(timeout=None if budget_ms < 0 else budget_ms / 1000)
    except FutureTimeout:
        what = request.describe()

        def report(f: Any) -> None:
            e = f.exception()
            if e is not None:
                log.warning(
                    "corral: the check of a request admitted before it finished failed: %s (%s); "
                    "the engine's own compile decides the request",
                    e,
                    what,
                )

        future.add_done_callback(report)


def _check_ms() -> float:
    """``CORRAL_VLLM_CHECK_MS`` (default 50). A value that is not a number is the operator's
    mistake, not the client's: it is logged and the default used, never a 400."""
    import os

    raw = os.environ.get(_ENV_CHECK_MS, "50")
    try:
        return float(raw)
    except ValueError:
        log.warning("corral: %s=%r is not a number of milliseconds; using 50", _ENV_CHECK_MS, raw)
        return 50.0
