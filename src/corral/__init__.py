"""corral — output that is guaranteed to match a regex, a grammar or JSON.

corral compiles a constraint once into automata over bytes, binds it to a model's vocabulary,
and at every decoding step gives the sampler a bitmask of the tokens that keep the output
completable. See the README for the API, the grammar syntax and the limits.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers and the API reference (resolved lazily)
    from corral.backends.loading import load_tokenizer
    from corral.classification import Classification, classify, fit_temperature
    from corral.compile import Constraint, ConstraintSpec, compile_constraint
    from corral.compile.artifact import load_artifact, save_artifact
    from corral.engine import (
        DEFAULT_LIMITS,
        CompiledGrammar,
        Matcher,
        allocate_bitmask,
        allowed_tokens,
        compile_grammar,
        compile_json,
        compile_regex,
        fill_next_token_bitmasks,
    )
    from corral.errors import (
        ArtifactError,
        BudgetError,
        CompileError,
        CorralError,
        InternalError,
        LimitExceeded,
        ModelError,
        ModelNotFoundError,
        OutputValidationError,
        SchemaError,
        SlotError,
        TokenizerError,
        ToolError,
        UnsupportedSchemaError,
    )
    from corral.generation import (
        GenerationResult,
        SamplingParams,
        TextStream,
        generate,
        load_model,
        stream,
    )
    from corral.generation.validation import CheckFailure, ValidationReport
    from corral.grammar.tools import ToolCall
    from corral.integrations.llama_cpp import LlamaCppLogitsProcessor
    from corral.integrations.transformers import TransformersLogitsProcessor
    from corral.linter import LintResult, lint
    from corral.schema import JsonSchemaGrammar, compile_json_schema
    from corral.tokenizer import Tokenizer

# Public name -> the module that defines it. Imported on first use (PEP 562), so `import corral`
# and every `corral` command start without importing what they do not use: `corral generate`
# refuses a bad schema before generation, the linter or the integrations are imported.
_LAZY: dict[str, str] = {
    "load_tokenizer": "corral.backends.loading",
    "Classification": "corral.classification",
    "classify": "corral.classification",
    "fit_temperature": "corral.classification",
    "Constraint": "corral.compile",
    "ConstraintSpec": "corral.compile",
    "compile_constraint": "corral.compile",
    "load_artifact": "corral.compile.artifact",
    "save_artifact": "corral.compile.artifact",
    "DEFAULT_LIMITS": "corral.engine",
    "CompiledGrammar": "corral.engine",
    "Matcher": "corral.engine",
    "allocate_bitmask": "corral.engine",
    "allowed_tokens": "corral.engine",
    "compile_grammar": "corral.engine",
    "compile_json": "corral.engine",
    "compile_regex": "corral.engine",
    "fill_next_token_bitmasks": "corral.engine",
    "ArtifactError": "corral.errors",
    "BudgetError": "corral.errors",
    "CompileError": "corral.errors",
    "CorralError": "corral.errors",
    "InternalError": "corral.errors",
    "LimitExceeded": "corral.errors",
    "ModelError": "corral.errors",
    "ModelNotFoundError": "corral.errors",
    "OutputValidationError": "corral.errors",
    "SchemaError": "corral.errors",
    "SlotError": "corral.errors",
    "TokenizerError": "corral.errors",
    "ToolError": "corral.errors",
    "UnsupportedSchemaError": "corral.errors",
    "CheckFailure": "corral.generation.validation",
    "ValidationReport": "corral.generation.validation",
    "GenerationResult": "corral.generation",
    "SamplingParams": "corral.generation",
    "TextStream": "corral.generation",
    "generate": "corral.generation",
    "load_model": "corral.generation",
    "stream": "corral.generation",
    "ToolCall": "corral.grammar.tools",
    "LlamaCppLogitsProcessor": "corral.integrations.llama_cpp",
    "TransformersLogitsProcessor": "corral.integrations.transformers",
    "LintResult": "corral.linter",
    "lint": "corral.linter",
    "JsonSchemaGrammar": "corral.schema",
    "compile_json_schema": "corral.schema",
    "Tokenizer": "corral.tokenizer",
}

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_LIMITS",
    "ArtifactError",
    "BudgetError",
    "Classification",
    "classify",
    "fit_temperature",
    "Constraint",
    "ConstraintSpec",
    "LintResult",
    "LlamaCppLogitsProcessor",
    "ToolCall",
    "ToolError",
    "CheckFailure",
    "ValidationReport",
    "TransformersLogitsProcessor",
    "compile_constraint",
    "load_artifact",
    "save_artifact",
    "GenerationResult",
    "SamplingParams",
    "TextStream",
    "generate",
    "lint",
    "load_model",
    "load_tokenizer",
    "stream",
    "CompileError",
    "CompiledGrammar",
    "CorralError",
    "InternalError",
    "JsonSchemaGrammar",
    "LimitExceeded",
    "Matcher",
    "ModelError",
    "ModelNotFoundError",
    "OutputValidationError",
    "SchemaError",
    "SlotError",
    "Tokenizer",
    "TokenizerError",
    "UnsupportedSchemaError",
    "allocate_bitmask",
    "allowed_tokens",
    "compile_grammar",
    "compile_json",
    "compile_json_schema",
    "compile_regex",
    "fill_next_token_bitmasks",
]


# Subpackages an eager `import corral` used to load: `corral.compile.spec`-style attribute access
# after a bare `import corral` keeps working (each is imported on first access).
_SUBMODULES = frozenset(
    "_native backends classification compile engine errors generation grammar integrations linter "
    "models progress runtime schema tokenizer".split()
)


def __getattr__(name: str) -> Any:
    import importlib

    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    # Deprecated aliases, kept for one release.
    if name == "CorralLogitsProcessor":
        import warnings

        warnings.warn(
            "corral.CorralLogitsProcessor is deprecated: use corral.TransformersLogitsProcessor "
            "(corral.vllm.CorralLogitsProcessor is vLLM's processor, a different class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__("TransformersLogitsProcessor")
    raise AttributeError(f"module 'corral' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
