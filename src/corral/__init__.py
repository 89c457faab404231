"""corral — output that is guaranteed to match a regex, a grammar or JSON.

corral compiles a constraint once into automata over bytes, binds it to a model's vocabulary,
and at every decoding step gives the sampler a bitmask of the tokens that keep the output
completable. See the README for the API, the grammar syntax and the limits.
"""

from typing import Any

from corral.backends.loading import load_tokenizer
from corral.classification import Classification, classify, fit_temperature
from corral.compile import Constraint, ConstraintSpec, compile_constraint
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

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_LIMITS",
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


def __getattr__(name: str) -> Any:
    # Deprecated aliases, kept for one release.
    if name == "CorralLogitsProcessor":
        import warnings

        warnings.warn(
            "corral.CorralLogitsProcessor is deprecated: use corral.TransformersLogitsProcessor "
            "(corral.vllm.CorralLogitsProcessor is vLLM's processor, a different class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return TransformersLogitsProcessor
    raise AttributeError(f"module 'corral' has no attribute {name!r}")
