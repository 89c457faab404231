"""The front door for constraints: one spec, one compile path, one cache, for every host.

    spec = ConstraintSpec.json_schema(Invoice)            # or spec_from_args({...}) from a host
    c = compile_constraint(spec, tokenizer)               # cached by content + tokenizer
    m = c.grammar.matcher()                               # ... decode ...
    value, error = c.read(text)

``corral.generate``, ``corral serve``, the transformers / llama-cpp-python processors and the vLLM
processor all build a :class:`ConstraintSpec` from their own input and compile it here, so the
defaults, the "exactly one constraint" rule, the cache and the way outputs are read back are
defined once.
"""

from __future__ import annotations

from concurrent.futures import Future

from corral.compile.cache import CompileCache, default_cache
from corral.compile.constraint import Constraint
from corral.compile.converter import SchemaConverter
from corral.compile.spec import (
    KINDS,
    SCHEMA_DEFAULTS,
    ConstraintSpec,
    choices_regex,
    spec_from_args,
    validate_choices,
)
from corral.tokenizer import Tokenizer

__all__ = [
    "KINDS",
    "SCHEMA_DEFAULTS",
    "CompileCache",
    "Constraint",
    "ConstraintSpec",
    "SchemaConverter",
    "choices_regex",
    "clear_cache",
    "compile_constraint",
    "compile_constraint_async",
    "default_cache",
    "spec_from_args",
    "validate_choices",
]


def compile_constraint(
    spec: ConstraintSpec,
    tokenizer: Tokenizer,
    *,
    cache: CompileCache | None = None,
    converter: SchemaConverter | None = None,
) -> Constraint:
    """The compiled constraint for ``spec`` on ``tokenizer``, from ``cache`` (default: the
    process-wide :func:`default_cache`) or compiled now in this thread.

    Raises corral's compile errors (:class:`corral.CompileError`, :class:`corral.SchemaError`,
    :class:`corral.LimitExceeded`, :class:`corral.errors.ToolError`, ...)."""
    from corral.compile.build import compile_spec

    c = cache if cache is not None else default_cache()
    value, _ = c.get_or_compile(
        spec.key(tokenizer.hash), lambda: compile_spec(spec, tokenizer, converter), spec.kind, tokenizer
    )
    return value.with_model(spec.model)


def compile_constraint_async(
    spec: ConstraintSpec,
    tokenizer: Tokenizer,
    *,
    cache: CompileCache | None = None,
    converter: SchemaConverter | None = None,
) -> tuple[Future[Constraint], bool]:
    """(future, hit): the compiled constraint from ``cache``, compiling in a background thread on
    a miss (the server and vLLM keep decoding meanwhile). The future's result carries the spec's
    Pydantic model, like :func:`compile_constraint`."""
    from corral.compile.build import compile_spec

    c = cache if cache is not None else default_cache()
    fut, hit = c.get(
        spec.key(tokenizer.hash), lambda: compile_spec(spec, tokenizer, converter), spec.kind, tokenizer
    )
    if spec.model is None:
        return fut, hit
    out: Future[Constraint] = Future()

    def done(f: Future[Constraint]) -> None:
        e = f.exception()
        if e is not None:
            out.set_exception(e)
        else:
            out.set_result(f.result().with_model(spec.model))

    fut.add_done_callback(done)
    return out, hit


def clear_cache() -> None:
    """Forget every constraint in the process-wide cache (benchmarks; memory)."""
    default_cache().clear()
