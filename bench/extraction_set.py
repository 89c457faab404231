"""A JSON-extraction set for the generation benchmark: 36 short texts, 3 schemas.

Written for this repository (synthetic records, no external data). Each item is
``(prompt, schema)``; the prompt names the fields so a small model knows what to extract.
"""

from __future__ import annotations

from typing import Any

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 30},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 30},
        "email": {"type": ["string", "null"], "maxLength": 32},
    },
    "required": ["name", "age", "city", "email"],
    "additionalProperties": False,
}

PRODUCT = {
    "type": "object",
    "properties": {
        "product": {"type": "string", "maxLength": 30},
        "price": {"type": "number", "minimum": 0},
        "currency": {"enum": ["USD", "EUR", "GBP"]},
        "in_stock": {"type": "boolean"},
    },
    "required": ["product", "price", "currency", "in_stock"],
    "additionalProperties": False,
}

EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "maxLength": 30},
        "date": {"type": "string", "format": "date"},
        "attendees": {"type": "integer", "minimum": 0},
        "topics": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
    },
    "required": ["event", "date", "attendees", "topics"],
    "additionalProperties": False,
}

_PEOPLE = [
    ("Anna Kowalski", 34, "Warsaw", "anna.k@example.com"),
    ("Ben Okafor", 27, "Lagos", None),
    ("Chloe Martin", 45, "Lyon", "chloe@martin.fr"),
    ("Diego Alvarez", 19, "Seville", None),
    ("Emma Lindqvist", 52, "Uppsala", "emma.l@example.se"),
    ("Farid Haddad", 38, "Beirut", "farid@haddad.lb"),
    ("Grace Chen", 23, "Taipei", None),
    ("Hugo Weber", 61, "Graz", "hugo.weber@example.at"),
    ("Isla Murray", 30, "Glasgow", "isla@murray.scot"),
    ("Jonas Berg", 41, "Bergen", None),
    ("Keiko Tanaka", 29, "Osaka", "keiko@example.jp"),
    ("Liam Byrne", 36, "Cork", "liam.byrne@example.ie"),
]
_PRODUCTS = [
    ("wireless mouse", 24.99, "USD", True),
    ("espresso machine", 349.0, "EUR", False),
    ("hiking boots", 129.5, "GBP", True),
    ("desk lamp", 39.0, "USD", True),
    ("mechanical keyboard", 89.9, "EUR", False),
    ("rain jacket", 75.0, "GBP", True),
    ("coffee grinder", 59.99, "USD", False),
    ("yoga mat", 19.5, "EUR", True),
    ("bike helmet", 64.0, "GBP", True),
    ("water bottle", 12.0, "USD", True),
    ("office chair", 219.0, "EUR", False),
    ("phone stand", 9.99, "GBP", True),
]
_EVENTS = [
    ("PyData Berlin", "2025-04-11", 450, ["data", "python"]),
    ("Rust Nation", "2025-02-19", 800, ["rust", "systems"]),
    ("ML Summit", "2025-06-03", 1200, ["ml", "llm", "mlops"]),
    ("Open Source Day", "2025-09-20", 300, ["community"]),
    ("Cloud Expo", "2025-10-07", 2500, ["cloud", "devops"]),
    ("Design Week", "2025-05-15", 640, ["ux", "design"]),
    ("Security Con", "2025-11-12", 900, ["security"]),
    ("Edge AI Meetup", "2025-03-27", 85, ["edge", "ai"]),
    ("Data Viz Camp", "2025-08-02", 120, ["charts"]),
    ("Robotics Fair", "2025-07-18", 3000, ["robots", "hardware"]),
    ("Web Perf Day", "2025-01-30", 210, ["web", "performance"]),
    ("Startup Night", "2025-12-04", 150, ["startups", "funding"]),
]


def items() -> list[tuple[str, dict[str, Any]]]:
    """The 36 (prompt, schema) pairs, in a fixed order."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, age, city, email in _PEOPLE:
        contact = f" You can reach them at {email}." if email else " No e-mail address is known."
        text = f"{name} is {age} years old and lives in {city}.{contact}"
        out.append((f"Extract name, age, city and email (null if unknown) as JSON.\n\n{text}", PERSON))
    for product, price, cur, stock in _PRODUCTS:
        avail = "available now" if stock else "currently sold out"
        text = f"The {product} costs {price} {cur} and is {avail}."
        out.append((f"Extract product, price, currency and in_stock as JSON.\n\n{text}", PRODUCT))
    for event, date, n, topics in _EVENTS:
        text = f"{event} takes place on {date} with {n} attendees; topics: {', '.join(topics)}."
        out.append((f"Extract event, date, attendees and topics as JSON.\n\n{text}", EVENT))
    return out
