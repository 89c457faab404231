"""Workloads for ``bench_engine.py``: the constraints and the valid strings decoded through them.

Each workload is one constraint (a regex, or "any JSON value") and a handful of fixed strings
that satisfy it.  The benchmark tokenizes every string with the Llama 3.2 tokenizer's canonical
encoding and replays the tokens through each engine.

The regexes use only syntax that corral (Python ``re``), XGrammar, llguidance (Rust ``regex``)
and outlines-core all read the same way: explicit ``[0-9]`` classes instead of ``\\d`` (which is
Unicode-aware in Python and Rust but ASCII in XGrammar), no ``\\w``/``\\s``, no anchors, no
lookaround.  Every engine matches the whole output against the pattern.

Run ``python bench/workloads.py`` to check the examples against the patterns (Python ``re``) and
the JSON documents against ``json.loads``.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

__all__ = ["WORKLOADS", "Workload", "product_codes", "self_check"]


@dataclass(frozen=True)
class Workload:
    """One constraint plus the valid strings to decode through it."""

    name: str
    kind: str  # "json" (any JSON value) or "regex"
    pattern: str  # the regex; empty for kind == "json"
    examples: tuple[str, ...]
    description: str


EMAIL = r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9-]+(\.[a-zA-Z0-9-]+)*\.[a-zA-Z]{2,}"

DATETIME = (
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
)

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

PHONE = r"\+?[1-9][0-9]{0,2}[ -]?\(?[0-9]{1,4}\)?([ -]?[0-9]{2,4}){2,4}"

PRODUCT_SEED = 20240607
PRODUCT_COUNT = 200


def product_codes(count: int = PRODUCT_COUNT, seed: int = PRODUCT_SEED) -> list[str]:
    """Deterministic, distinct product codes such as ``PRD-00042-XL``."""
    rng = random.Random(seed)
    prefixes = ("PRD", "SKU", "ACC", "KIT")
    sizes = ("XS", "S", "M", "L", "XL", "XXL")
    seen: set[str] = set()
    codes: list[str] = []
    while len(codes) < count:
        code = f"{rng.choice(prefixes)}-{rng.randrange(100000):05d}-{rng.choice(sizes)}"
        if code not in seen:
            seen.add(code)
            codes.append(code)
    return codes


_CODES = product_codes()
PRODUCTS = "(" + "|".join(re.escape(c) for c in _CODES) + ")"

# --- JSON documents -------------------------------------------------------------------------
# Written out literally (not via json.dumps) so that the exact bytes, escapes and whitespace are
# fixed.  Together they cover: compact and pretty-printed layouts, nesting up to six levels,
# string escapes (\" \\ \/ \n \t \uXXXX incl. a surrogate pair), non-ASCII text written
# directly (Latin, CJK, emoji: tokens that split UTF-8 sequences), and the number grammar
# (negative, fraction, exponent with and without sign, -0, big integers).

JSON_PROFILE = (
    '{"id": 48213, "username": "jmuller", "name": "José Müller", '
    '"email": "jose.muller@example.com", "verified": true, "score": 87.25, '
    '"balance": -1520.5, "ratio": 1.5e-3, "roles": ["admin", "editor", "billing"], '
    '"address": {"street": "Hauptstraße 12", "city": "Zürich", "postcode": "8001", '
    '"geo": {"lat": 47.3769, "lon": 8.5417}}, '
    '"bio": "Says \\"hello\\" a lot.\\nLikes tabs\\tand backslashes \\\\.", '
    '"manager": null, "tags": [], "prefs": {}}'
)

JSON_ORDER = """{
  "order_id": "ORD-2024-000917",
  "created_at": "2024-03-15T09:42:17.123Z",
  "customer": {
    "id": 90211,
    "name": "Åsa Lindqvist",
    "vip": false
  },
  "items": [
    {
      "sku": "PRD-00042-XL",
      "title": "Merino wool sweater",
      "qty": 2,
      "unit_price": 89.9,
      "discounts": [
        {"code": "SPRING10", "pct": 10}
      ]
    },
    {
      "sku": "ACC-10077-M",
      "title": "Leather belt, brown",
      "qty": 1,
      "unit_price": 45,
      "discounts": []
    }
  ],
  "shipping": {
    "method": "express",
    "cost": 12.5,
    "address": {
      "line1": "Storgatan 5",
      "city": "Göteborg",
      "country": "SE"
    }
  },
  "total": 238.3,
  "notes": null
}"""

JSON_LOGS = (
    '[{"ts":"2024-05-01T12:00:00Z","level":"info","msg":"Server started on port 8080",'
    '"ctx":{"pid":4121,"host":"web-01"}},'
    '{"ts":"2024-05-01T12:00:03Z","level":"warn",'
    '"msg":"Slow query: SELECT * FROM \\"orders\\" took 1.2s",'
    '"ctx":{"ms":1204,"path":"C:\\\\data\\\\db\\\\orders.db"}},'
    '{"ts":"2024-05-01T12:01:10Z","level":"error","msg":"アップロードに失敗しました 🚀 retrying",'
    '"ctx":{"attempt":3,"url":"https:\\/\\/example.com\\/upload","ok":false}},'
    '{"ts":"2024-05-01T12:01:11Z","level":"debug","msg":"payload\\tsize=0",'
    '"ctx":{"bytes":0,"ratio":-0.0,"big":12345678901234567890}}]'
)

JSON_TOOL_CALL = """{"name": "search_flights", "arguments": {
    "origin": "SFO",
    "destination": "NRT",
    "depart": "2024-10-12",
    "return": "2024-10-26",
    "passengers": {"adults": 2, "children": 1, "infants": 0},
    "cabin": "premium_economy",
    "max_stops": 1,
    "budget_usd": 3200.0,
    "flexible_dates": true,
    "preferred_airlines": ["NH", "JL", "UA"],
    "notes": "Window seats if possible; one passenger needs a vegetarian meal (\\"VGML\\")."
}}"""

JSON_RFC_EDGES = (
    '{"unicode_escapes": "caf\\u00e9 \\u2014 \\ud83d\\ude80", "control": "bell\\u0007 esc\\u001b", '
    '"numbers": [0, -0, 6.02e23, 1E+2, 2.5E-10, -123.456e7], '
    '"empty": {"a": [], "b": {}, "c": ""}, "nested": [[1, [2, [3, [4]]]]], '
    '"bools": [true, false, null], "slash": "\\/", "ws": [ 1 , 2 ]}'
)

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "json",
            "json",
            "",
            (JSON_PROFILE, JSON_ORDER, JSON_LOGS, JSON_TOOL_CALL, JSON_RFC_EDGES),
            "any JSON value (RFC 8259)",
        ),
        Workload(
            "email",
            "regex",
            EMAIL,
            (
                "john.doe@example.com",
                "a.b-c+tag@mail.co.uk",
                "support@corral-ai.dev",
                "X_Y%z@sub.domain.example.org",
                "user123@gmail.com",
                "firstname.lastname@company-name.io",
            ),
            "e-mail address",
        ),
        Workload(
            "datetime",
            "regex",
            DATETIME,
            (
                "2024-03-15T09:42:17Z",
                "1999-12-31T23:59:59.999+01:00",
                "2025-01-01T00:00:00.000000001-05:30",
                "2000-02-29T12:30:45Z",
                "2023-07-04T18:05:09.5+00:00",
                "2031-11-20T06:07:08-11:00",
            ),
            "ISO 8601 date-time",
        ),
        Workload(
            "uuid",
            "regex",
            UUID,
            (
                "123e4567-e89b-12d3-a456-426614174000",
                "550e8400-e29b-41d4-a716-446655440000",
                "f47ac10b-58cc-4372-a567-0e02b2c3d479",
                "6BA7B810-9DAD-11D1-80B4-00C04FD430C8",
                "00000000-0000-0000-0000-000000000000",
                "9c5b94b1-35ad-49bb-b118-8e8fc24abf80",
            ),
            "UUID (any version, either case)",
        ),
        Workload(
            "phone",
            "regex",
            PHONE,
            (
                "+1 (415) 555-2671",
                "+44 20 7946 0958",
                "+49-30-1234-5678",
                "+81 3 1234 5678",
                "1 800 555 0199",
                "+353 1 234 5678",
            ),
            "international phone number",
        ),
        Workload(
            "products",
            "regex",
            PRODUCTS,
            tuple(_CODES[i] for i in (0, 17, 42, 99, 150, 199)),
            f"{PRODUCT_COUNT}-way alternation of product codes (seed {PRODUCT_SEED})",
        ),
    )
}


def self_check() -> list[str]:
    """Return a list of problems (empty when every example satisfies its constraint)."""
    problems: list[str] = []
    for w in WORKLOADS.values():
        for i, text in enumerate(w.examples):
            if w.kind == "json":
                try:
                    json.loads(text)
                except ValueError as e:
                    problems.append(f"{w.name}[{i}]: not valid JSON: {e}")
            elif re.fullmatch(w.pattern, text) is None:
                problems.append(f"{w.name}[{i}]: {text!r} does not match the pattern")
    return problems


if __name__ == "__main__":
    issues = self_check()
    for line in issues:
        print(line)
    print("workloads OK" if not issues else f"{len(issues)} problem(s)")
    raise SystemExit(1 if issues else 0)
