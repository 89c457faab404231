"""Where the schema → grammar-text conversion runs: in this process, or in a separate one.

A JSON Schema compiles in two stages: the conversion to grammar text (pure Python) and the
engine's compile (C++, GIL released). A server runs the first in a :class:`SchemaConverter`
*process*: in the server's own process it would hold the GIL for up to seconds on a big schema,
and the decode thread — which takes the GIL back after every model call — would stall with it
(measured: a 3-pass request took 1.7 s instead of 0.3 s while a big schema converted).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from corral.grammar.json_schema import SchemaOptions, SchemaReport, schema_to_grammar
from corral.schema import _check_regex

__all__ = ["IN_PROCESS", "SchemaConverter", "convert_schema"]


def convert_schema(schema: Any, options: Mapping[str, Any]) -> tuple[str, SchemaReport]:
    """Schema → (grammar text, report) with the given converter options."""
    return schema_to_grammar(schema, SchemaOptions(**options), check_regex=_check_regex)


def _converter_init() -> None:
    try:  # the converter only ever competes with decoding for the CPU: let decoding win
        os.nice(19)
    except OSError:  # pragma: no cover - not permitted
        pass


class SchemaConverter:
    """Runs conversions in ``workers`` separate low-priority processes (see the module doc); in
    the calling thread when ``workers`` is 0."""

    def __init__(self, workers: int = 1) -> None:
        self._pool: ProcessPoolExecutor | None = None
        if workers > 0:
            # spawn: a fork of a process that holds torch threads is not safe.
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_converter_init)
            self._pool.submit(convert_schema, {}, {}).result()  # start it now, not on the first request

    def convert(self, schema: Any, options: Mapping[str, Any]) -> tuple[str, SchemaReport]:
        if self._pool is None:
            return convert_schema(schema, options)
        return self._pool.submit(convert_schema, schema, dict(options)).result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


IN_PROCESS = SchemaConverter(0)
