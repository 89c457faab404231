"""Every exception corral raises on purpose, in one hierarchy.

In: nothing (a leaf module: it imports nothing from corral, so any layer may raise these).
Out: :class:`CorralError` and its subclasses. ``except corral.CorralError`` catches all of
them; each class has a stable snake_case :attr:`~CorralError.code` that hosts map to their own
wire format (the server's HTTP statuses and OpenAI error codes are a table keyed by it).

==========================  ===================  ==========================
class                       parent               code
==========================  ===================  ==========================
:class:`CorralError`        ``Exception``        ``corral_error``
:class:`CompileError`       CorralError          ``compile_error``
:class:`SchemaError`        CompileError         ``schema_error``
:class:`UnsupportedSchemaError`  SchemaError     ``unsupported_schema``
:class:`LimitExceeded`      CorralError          ``limit_exceeded``
:class:`TokenizerError`     CorralError          ``tokenizer_error``
:class:`SlotError`          CorralError          ``slot_error``
:class:`BudgetError`        CorralError          ``budget_error``
:class:`OutputValidationError`  CorralError      ``output_validation_error``
:class:`ModelError`         CorralError          ``model_error``
:class:`ModelNotFoundError` ModelError (and ``FileNotFoundError``)  ``model_not_found``
:class:`InternalError`      CorralError          ``internal_error``
:class:`ToolError`          CorralError          ``tool_error``
:class:`ArtifactError`      CorralError          ``artifact_error``
==========================  ===================  ==========================

Invariants
----------
- Every class defines its own ``code``, and no two classes share one (a test checks it).
- The engine's error types (``cpp/errors.hpp``) are twins of these: the same name, parent and
  code; ``corral._core.error_types()`` lists them and a test checks every one has its twin here.
  The bindings raise the twin of a native error by its code (:func:`error_class`).
- A message never shows a position that is not known: no "line 0", no "(at #)".
- Every class pickles (``__reduce__`` rebuilds it from its constructor arguments), so errors
  cross process boundaries (compile workers, multiprocessing) intact.
- Bad *input* gets a typed error; :class:`InternalError` is reserved for broken invariants.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ArtifactError",
    "BudgetError",
    "CompileError",
    "CorralError",
    "InternalError",
    "LimitExceeded",
    "ModelError",
    "ModelNotFoundError",
    "OutputValidationError",
    "SchemaError",
    "SlotError",
    "TokenizerError",
    "ToolError",
    "UnsupportedSchemaError",
    "error_class",
]


class CorralError(Exception):
    """Base class of every exception raised by corral.

    Attributes
    ----------
    code : str
        Stable machine-readable kind of the error (class attribute; never changes between
        releases).
    """

    code: ClassVar[str] = "corral_error"


class CompileError(CorralError):
    """A regex, grammar or JSON schema could not be compiled.

    Parameters
    ----------
    message : str
        Human-readable description of the problem.
    offset : int or None, optional
        0-based character offset of the problem in the source text.
    line : int or None, optional
        1-based line number of the problem in the source text.
    column : int or None, optional
        1-based column number of the problem in the source text.

    Attributes
    ----------
    message : str
        The description, without position information.
    offset, line, column : int or None
        Position of the problem, when known (``None`` when the error is about the text as a
        whole; the message then names no position).
    """

    code: ClassVar[str] = "compile_error"

    def __init__(
        self,
        message: str,
        offset: int | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column
        super().__init__(self._format())

    def _format(self) -> str:
        if self.line is not None and self.column is not None:
            return f"{self.message} (line {self.line}, column {self.column})"
        if self.offset is not None:
            return f"{self.message} (at offset {self.offset})"
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.offset, self.line, self.column))


class SchemaError(CompileError):
    """A JSON Schema that is malformed or contradictory, or that allows no value.

    Parameters
    ----------
    message : str
        What is wrong.
    pointer : str, optional
        JSON pointer of the offending keyword; ``"#"`` (the default) is the schema as a whole.

    Attributes
    ----------
    pointer : str
        JSON pointer of the offending keyword, e.g. ``"#/properties/age/minimum"``. The
        message names it unless it is ``"#"``, which says nothing the message does not.
    """

    code: ClassVar[str] = "schema_error"

    def __init__(self, message: str, pointer: str = "#") -> None:
        self.pointer = pointer
        super().__init__(message if pointer == "#" else f"{message} (at {pointer})")
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.pointer))


class UnsupportedSchemaError(SchemaError):
    """A JSON Schema keyword or value that corral cannot enforce (raised in strict mode, or when
    there is no way to honour it even after decoding, such as a remote ``$ref``)."""

    code: ClassVar[str] = "unsupported_schema"


class LimitExceeded(CorralError):
    """A configured resource limit (states, nesting depth, ...) was exceeded.

    Parameters
    ----------
    limit : str
        Name of the limit, e.g. ``"max_states"``.
    given : int
        The amount that was needed or requested.
    limit_value : int
        The configured maximum.
    message : str or None, optional
        The full message; by default one naming the limit and both numbers.

    Attributes
    ----------
    limit : str
    given : int
    limit_value : int
    message : str
    """

    code: ClassVar[str] = "limit_exceeded"

    def __init__(self, limit: str, given: int, limit_value: int, message: str | None = None) -> None:
        self.limit = limit
        self.given = given
        self.limit_value = limit_value
        self.message = message or f"limit {limit!r} exceeded: needed {given}, limit is {limit_value}"
        super().__init__(self.message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.limit, self.given, self.limit_value, self.message))


class TokenizerError(CorralError):
    """A tokenizer could not be loaded, validated or used.

    Raised for malformed or unsupported vocabularies, invalid ``width`` or
    EOS ids, undeterminable EOS tokens, and ``encode`` on a tokenizer that has
    no encoder.
    """

    code: ClassVar[str] = "tokenizer_error"


class SlotError(CorralError):
    """Bad values for a grammar's slots (``${name}``) at bind time: an unknown, missing or
    repeated slot name, an empty value list, a value that is not a ``str``, is empty (raw
    slots), repeats or is not valid UTF-8; binding a binding; matching an unbound skeleton.

    Not a :class:`CompileError`: the grammar compiled; the per-request *values* are wrong (a
    server answers with a 400 about the slots, not about the schema), and there is no position
    in a source text to report.

    Attributes
    ----------
    message : str
    slot : str
        The slot concerned ("" when the error is about the binding as a whole).
    """

    code: ClassVar[str] = "slot_error"

    def __init__(self, message: str, slot: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.slot = slot

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.slot))


class BudgetError(CorralError):
    """The shortest output the constraint allows does not fit in ``max_new_tokens``."""

    code: ClassVar[str] = "budget_error"


class OutputValidationError(CorralError):
    """Decoded output that violates a schema keyword the grammar could not enforce (listed in
    the report as "checked after decoding"), or that is not JSON at all.

    Attributes
    ----------
    message : str
    errors : list of str
        The validator's messages.
    """

    code: ClassVar[str] = "output_validation_error"

    def __init__(self, message: str, errors: list[str]) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.errors))


class ModelError(CorralError):
    """A model (weights, backend) that cannot be found, loaded or used."""

    code: ClassVar[str] = "model_error"


class ModelNotFoundError(ModelError, FileNotFoundError):
    """A model or a packaged model/tokenizer file is not installed or does not exist.

    Also a :class:`FileNotFoundError`, so code written for missing files catches it.
    """

    code: ClassVar[str] = "model_not_found"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),))


class InternalError(CorralError):
    """A broken internal invariant: a bug in corral, never the caller's fault. Please report it."""

    code: ClassVar[str] = "internal_error"


class ToolError(CorralError):
    """A tool definition that cannot be used: not a function tool, a missing, malformed or
    duplicate name, parameters that are not a JSON Schema for an object.

    Attributes
    ----------
    param : str
        The offending field, e.g. ``"tools[1].function.name"``.
    pointer : str or None
        JSON pointer inside the tool's parameters, when the problem is there.
    """

    code: ClassVar[str] = "tool_error"
    #: True when the problem is a schema keyword corral cannot enforce (not a malformed tool).
    unsupported: bool = False

    def __init__(self, message: str, param: str = "tools", pointer: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.pointer = pointer

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.param, self.pointer))


class ArtifactError(CorralError):
    """Compiled-grammar artifact bytes (engine bytes or a ``.corral`` file) that cannot be loaded.

    Attributes
    ----------
    message : str
    reason : str
        Which check refused the bytes: ``bad_magic`` (not an artifact), ``unsupported_version``
        (a format version this engine does not read), ``engine_version`` (made by another
        engine version: recompile), ``wrong_vocabulary`` (compiled for another tokenizer) or
        ``corrupt`` (truncated, damaged or malformed; the message names the field and byte
        offset). A ``.corral`` file loaded with trusted keys may also be refused as
        ``unsigned`` (no signature), ``wrong_key`` (signed by a key not trusted) or
        ``tampered`` (modified after signing).
    """

    code: ClassVar[str] = "artifact_error"

    def __init__(self, message: str, reason: str = "corrupt") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.reason))


def _classes() -> dict[str, type[CorralError]]:
    out: dict[str, type[CorralError]] = {}
    stack: list[type[CorralError]] = [CorralError]
    while stack:
        cls = stack.pop()
        if cls.__module__ == __name__ and "code" in cls.__dict__:
            out.setdefault(cls.code, cls)
        stack.extend(cls.__subclasses__())
    return out


_BY_CODE: dict[str, type[CorralError]] = _classes()


def error_class(code: str) -> type[CorralError]:
    """The class of this module whose ``code`` is ``code``.

    Raises
    ------
    KeyError
        If no class has that code.
    """
    return _BY_CODE[code]
