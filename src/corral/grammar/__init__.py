"""Frontends that turn constraints (JSON Schema, Pydantic, ...) into corral grammar text."""
