"""Exception hierarchy for corral.

Every error raised deliberately by corral derives from :class:`CorralError`,
so ``except corral.errors.CorralError`` catches all of them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BudgetError",
    "CompileError",
    "CorralError",
    "InternalError",
    "LimitExceeded",
    "SchemaError",
    "SlotError",
    "TokenizerError",
    "ToolError",
    "UnsupportedSchemaError",
]


class CorralError(Exception):
    """Base class of every exception raised by corral."""


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
        Position of the problem, when known.
    """

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

    Attributes
    ----------
    limit : str
    given : int
    limit_value : int
    """

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


class InternalError(CorralError):
    """A broken internal invariant: a bug in corral, never the caller's fault. Please report it."""


class SchemaError(CompileError):
    """A JSON Schema that is malformed or contradictory, or that allows no value.

    Attributes
    ----------
    pointer : str
        JSON pointer of the offending keyword, e.g. ``"#/properties/age/minimum"``.
    """

    def __init__(self, message: str, pointer: str = "#") -> None:
        self.pointer = pointer
        super().__init__(f"{message} (at {pointer})")
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.pointer))


class UnsupportedSchemaError(SchemaError):
    """A JSON Schema keyword or value that corral cannot enforce (raised in strict mode, or when
    there is no way to honour it even after decoding, such as a remote ``$ref``)."""


class SlotError(CompileError):
    """Bad values for a grammar's slots (``${name}``) at bind time: an unknown, missing or
    repeated slot name, an empty value list, a value that is not a ``str``, is empty (raw
    slots), repeats or is not valid UTF-8; binding a binding; matching an unbound skeleton.

    Attributes
    ----------
    slot : str
        The slot concerned ("" when the error is about the binding as a whole).
    """

    def __init__(self, message: str, slot: str = "") -> None:
        super().__init__(message)
        self.slot = slot

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.slot))


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

    code = "invalid_tools"
    #: True when the problem is a schema keyword corral cannot enforce (not a malformed tool).
    unsupported: bool = False

    def __init__(self, message: str, param: str = "tools", pointer: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.pointer = pointer

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.param, self.pointer))


class BudgetError(CorralError):
    """The shortest output the constraint allows does not fit in ``max_new_tokens``."""

    code = "budget_error"
