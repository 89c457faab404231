"""The task-accuracy set: 64 extraction items over 4 schemas and 90 routing tickets, with gold
answers, written for this repository (synthetic records, no external data).

Each extraction record is written once as its gold answer; the text the model reads is made
from it by one of several phrasings per schema, with dates written the way people write them
("March 5, 2024", "05/03/2024", ...) while the gold is ISO 8601, and amounts with currency
symbols or codes. So the gold is right by construction and the texts still vary.
"""

from __future__ import annotations

from typing import Any

CURRENCIES = ["EUR", "USD", "GBP", "CHF"]

INVOICE = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "maxLength": 20},
        "vendor": {"type": "string", "maxLength": 40},
        "date": {"type": "string", "format": "date"},
        "currency": {"enum": CURRENCIES},
        "total": {"type": "number", "minimum": 0},
        "line_items": {
            "type": "array",
            "minItems": 1,
            "maxItems": 5,
            "items": {
                "type": "object",
                "properties": {
                    "description": {"type": "string", "maxLength": 40},
                    "quantity": {"type": "integer", "minimum": 1},
                    "unit_price": {"type": "number", "minimum": 0},
                },
                "required": ["description", "quantity", "unit_price"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["invoice_number", "vendor", "date", "currency", "total", "line_items"],
    "additionalProperties": False,
}

RECEIPT = {
    "type": "object",
    "properties": {
        "merchant": {"type": "string", "maxLength": 40},
        "date": {"type": "string", "format": "date"},
        "payment_method": {"enum": ["cash", "card", "mobile"]},
        "currency": {"enum": CURRENCIES},
        "items": {
            "type": "array",
            "minItems": 1,
            "maxItems": 5,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 30},
                    "price": {"type": "number", "minimum": 0},
                },
                "required": ["name", "price"],
                "additionalProperties": False,
            },
        },
        "total": {"type": "number", "minimum": 0},
    },
    "required": ["merchant", "date", "payment_method", "currency", "items", "total"],
    "additionalProperties": False,
}

CONTACT = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "company": {"type": ["string", "null"], "maxLength": 40},
        "email": {"type": ["string", "null"], "maxLength": 40},
        "phone": {"type": ["string", "null"], "maxLength": 20},
        "role": {"enum": ["customer", "supplier", "partner", "press"]},
    },
    "required": ["name", "company", "email", "phone", "role"],
    "additionalProperties": False,
}

EVENT = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "date": {"type": "string", "format": "date"},
        "start_time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
        "city": {"type": "string", "maxLength": 30},
        "online": {"type": "boolean"},
        "speakers": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 30}},
    },
    "required": ["title", "date", "start_time", "city", "online", "speakers"],
    "additionalProperties": False,
}

# One worked example per schema for the few-shot modes of run.py (``*-1shot``): written apart
# from the 64 items (other names, places, amounts), each showing what the items ask for — a
# currency from its symbol, a description without its price, a missing field as null, a time
# in 24-hour form.
EXAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "invoice": (
        "Invoice 2024-117 from Harbour Print, dated 3 July 2024.\n2 x Poster printing at £40.00\n"
        "1 x Delivery at £5.00\nTotal due: £85.00",
        {
            "invoice_number": "2024-117",
            "vendor": "Harbour Print",
            "date": "2024-07-03",
            "currency": "GBP",
            "total": 85.0,
            "line_items": [
                {"description": "Poster printing", "quantity": 2, "unit_price": 40.0},
                {"description": "Delivery", "quantity": 1, "unit_price": 5.0},
            ],
        },
    ),
    "receipt": (
        "GREEN GROCER ODENSE\n12 March 2024\nMilk  1.20\nEggs  2.50\nTOTAL USD 3.70\nPaid in cash",
        {
            "merchant": "Green Grocer Odense",
            "date": "2024-03-12",
            "payment_method": "cash",
            "currency": "USD",
            "items": [{"name": "Milk", "price": 1.2}, {"name": "Eggs", "price": 2.5}],
            "total": 3.7,
        },
    ),
    "contact": (
        "Met Sofia Lindqvist of Nordhavn Logistics at the fair; she wants to resell our product as "
        "a partner. Phone +46 8 555 0199.",
        {
            "name": "Sofia Lindqvist",
            "company": "Nordhavn Logistics",
            "email": None,
            "phone": "+46 8 555 0199",
            "role": "partner",
        },
    ),
    "event": (
        "Rust Meetup Lyon: 14 November 2024 at 7 pm in Lyon. Talks by Camille Roux and Idris Benali.",
        {
            "title": "Rust Meetup Lyon",
            "date": "2024-11-14",
            "start_time": "19:00",
            "city": "Lyon",
            "online": False,
            "speakers": ["Camille Roux", "Idris Benali"],
        },
    ),
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "invoice": INVOICE,
    "receipt": RECEIPT,
    "contact": CONTACT,
    "event": EVENT,
}

INSTRUCTIONS = {
    "invoice": "Extract the invoice as JSON with fields invoice_number, vendor, date (YYYY-MM-DD), "
    "currency (EUR, USD, GBP or CHF), total and line_items (description, quantity, unit_price).",
    "receipt": "Extract the receipt as JSON with fields merchant, date (YYYY-MM-DD), payment_method "
    "(cash, card or mobile), currency (EUR, USD, GBP or CHF), items (name, price) and total.",
    "contact": "Extract the contact as JSON with fields name, company, email, phone (null when not "
    "given) and role (customer, supplier, partner or press).",
    "event": "Extract the event as JSON with fields title, date (YYYY-MM-DD), start_time (HH:MM, "
    "24-hour), city, online (true or false) and speakers (a list of names).",
}

_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
_SYMBOL = {"EUR": "€", "USD": "$", "GBP": "£", "CHF": "CHF "}


def _date(iso: str, style: int) -> str:
    y, m, d = (int(x) for x in iso.split("-"))
    if style == 0:
        return iso
    if style == 1:
        return f"{_MONTHS[m - 1]} {d}, {y}"
    if style == 2:
        return f"{d} {_MONTHS[m - 1]} {y}"
    return f"{d:02d}.{m:02d}.{y}"  # European dotted: day first


def _money(amount: float, cur: str, style: int) -> str:
    text = f"{amount:.2f}"
    return f"{text} {cur}" if style % 2 == 0 else f"{_SYMBOL[cur]}{text}"


# --- invoices: (number, vendor, date, currency, [(description, quantity, unit price)])
_INVOICES = [
    (
        "INV-1001",
        "Northwind Traders",
        "2024-03-05",
        "EUR",
        [("Ergonomic keyboard", 2, 49.5), ("USB-C dock", 1, 120.0)],
    ),
    ("A-2024-17", "Blue Harbor Supplies", "2024-01-22", "USD", [("Printer paper box", 5, 24.0)]),
    ("7781", "Kestrel Office GmbH", "2023-11-30", "EUR", [("Desk chair", 1, 310.0), ("Floor mat", 2, 35.5)]),
    (
        "INV-88213",
        "Greenleaf Catering",
        "2024-06-14",
        "GBP",
        [("Lunch buffet", 30, 12.5), ("Coffee service", 1, 85.0)],
    ),
    ("F-0042", "Alpenlicht AG", "2024-02-08", "CHF", [("LED panel", 4, 89.9)]),
    (
        "INV-3310",
        "Copperline Electric",
        "2024-04-19",
        "USD",
        [("Cable reel", 3, 42.0), ("Wall socket", 10, 6.75), ("Labour hour", 4, 65.0)],
    ),
    ("2024-0559", "Fjord Design Studio", "2024-05-02", "EUR", [("Logo design", 1, 900.0)]),
    (
        "INV-771",
        "Redwood Logistics",
        "2023-12-12",
        "USD",
        [("Pallet shipping", 2, 180.0), ("Insurance", 1, 25.0)],
    ),
    ("B-9930", "Marlow & Sons", "2024-07-01", "GBP", [("Window cleaning", 1, 60.0)]),
    (
        "INV-5124",
        "Sakura Tech Ltd",
        "2024-08-23",
        "USD",
        [("Laptop stand", 6, 29.99), ("HDMI cable", 6, 8.5)],
    ),
    ("00318", "Bergamo Vini", "2024-03-28", "EUR", [("Red wine case", 2, 96.0), ("Delivery", 1, 15.0)]),
    (
        "INV-6402",
        "Helvetia Print",
        "2024-09-10",
        "CHF",
        [("Business cards", 500, 0.12), ("Flyers", 1000, 0.08)],
    ),
    (
        "C-1187",
        "Oakridge Tools",
        "2024-10-04",
        "USD",
        [("Cordless drill", 1, 149.0), ("Drill bits set", 2, 22.5)],
    ),
    ("INV-2290", "Lumen Software", "2024-02-29", "EUR", [("Annual licence", 3, 240.0)]),
    (
        "INV-4477",
        "Thames Office Supply",
        "2024-11-18",
        "GBP",
        [("Toner cartridge", 4, 54.0), ("Stapler", 2, 11.25)],
    ),
    (
        "Q-5530",
        "Cascade Water Co",
        "2024-12-03",
        "USD",
        [("Water cooler rental", 1, 45.0), ("Water bottle 19 l", 8, 7.5)],
    ),
]


def _invoice_text(i: int, rec: tuple[Any, ...]) -> str:
    number, vendor, date, cur, lines = rec
    s = i % 4
    items = "\n".join(f"{q} x {d} at {_money(p, cur, s)}" for d, q, p in lines)
    total = _money(round(sum(q * p for _, q, p in lines), 2), cur, s)
    if s == 0:
        return f"Invoice {number} from {vendor}, dated {_date(date, 0)}.\n{items}\nTotal due: {total}"
    if s == 1:
        return f"{vendor}\nInvoice no. {number}\nDate: {_date(date, 1)}\n\n{items}\n\nAmount due {total}"
    if s == 2:
        head = f"Hello, please find our invoice {number} of {_date(date, 2)} below."
        return f"{head}\n{items}\nTotal {total}.\n{vendor}"
    return f"INVOICE #{number} | {vendor} | issued {_date(date, 3)}\n{items}\nTOTAL {total}"


def _invoice_gold(rec: tuple[Any, ...]) -> dict[str, Any]:
    number, vendor, date, cur, lines = rec
    return {
        "invoice_number": number,
        "vendor": vendor,
        "date": date,
        "currency": cur,
        "total": round(sum(q * p for _, q, p in lines), 2),
        "line_items": [{"description": d, "quantity": q, "unit_price": p} for d, q, p in lines],
    }


# --- receipts: (merchant, date, payment, currency, [(name, price)])
_RECEIPTS = [
    ("Café Lumière", "2024-03-09", "card", "EUR", [("Cappuccino", 3.2), ("Croissant", 2.1)]),
    ("Joe's Diner", "2024-01-15", "cash", "USD", [("Burger", 11.5), ("Fries", 3.75), ("Soda", 2.25)]),
    ("Boots Pharmacy", "2024-02-20", "card", "GBP", [("Vitamin C", 6.99)]),
    ("Migros Zürich", "2024-04-03", "mobile", "CHF", [("Bread", 3.4), ("Cheese", 8.9), ("Apples", 4.2)]),
    ("Shell Station 42", "2024-05-11", "card", "USD", [("Unleaded fuel", 48.6)]),
    ("Bäckerei Kraus", "2024-06-01", "cash", "EUR", [("Rye bread", 4.1), ("Pretzel", 1.2)]),
    ("Waterstones", "2024-07-19", "card", "GBP", [("Paperback novel", 9.99), ("Notebook", 5.5)]),
    ("Taqueria El Sol", "2024-08-08", "mobile", "USD", [("Tacos", 9.0), ("Horchata", 3.5)]),
    ("Fnac Lyon", "2024-09-14", "card", "EUR", [("Headphones", 79.99)]),
    ("Coop Basel", "2024-10-22", "cash", "CHF", [("Milk", 1.85), ("Eggs", 4.6)]),
    ("Pret A Manger", "2024-11-05", "mobile", "GBP", [("Sandwich", 4.75), ("Latte", 3.45)]),
    (
        "Corner Hardware",
        "2024-12-17",
        "cash",
        "USD",
        [("Light bulbs", 7.25), ("Tape", 3.0), ("Batteries", 6.5)],
    ),
    (
        "Trattoria Nonna",
        "2024-02-14",
        "card",
        "EUR",
        [("Lasagne", 14.0), ("Tiramisu", 6.5), ("Wine glass", 5.0)],
    ),
    ("Tesco Express", "2024-03-30", "card", "GBP", [("Orange juice", 2.1)]),
    ("Blue Bottle Coffee", "2024-04-27", "mobile", "USD", [("Cold brew", 5.25), ("Muffin", 3.95)]),
    ("Apotheke am Markt", "2024-05-29", "cash", "EUR", [("Cough syrup", 8.45)]),
]

_PAY_WORDS = {
    "card": ["Paid by Visa card", "Card payment", "VISA ****4821", "Mastercard"],
    "cash": ["Paid in cash", "CASH", "Cash tendered", "Payment: cash"],
    "mobile": ["Paid with Apple Pay", "Google Pay", "Mobile payment (TWINT)", "Paid via phone"],
}


def _receipt_text(i: int, rec: tuple[Any, ...]) -> str:
    merchant, date, pay, cur, items = rec
    s = i % 4
    lines = "\n".join(f"{n}  {_money(p, cur, s)}" for n, p in items)
    total = _money(round(sum(p for _, p in items), 2), cur, s)
    how = _PAY_WORDS[pay][s]
    if s == 0:
        return f"{merchant}\n{_date(date, 0)}\n{lines}\nTOTAL {total}\n{how}"
    if s == 1:
        return f"Receipt - {merchant} - {_date(date, 1)}\n{lines}\nTotal: {total} ({how})"
    if s == 2:
        return f"Thank you for shopping at {merchant}!\n{_date(date, 2)}\n{lines}\nSum {total}\n{how}"
    return f"{merchant} / {_date(date, 3)}\n{lines}\n---\nTotal {total}\n{how}"


def _receipt_gold(rec: tuple[Any, ...]) -> dict[str, Any]:
    merchant, date, pay, cur, items = rec
    return {
        "merchant": merchant,
        "date": date,
        "payment_method": pay,
        "currency": cur,
        "items": [{"name": n, "price": p} for n, p in items],
        "total": round(sum(p for _, p in items), 2),
    }


# --- contacts: (name, company, email, phone, role)
_CONTACTS = [
    ("Maria Santos", "Atlas Freight", "maria.santos@atlasfreight.com", "+351 21 555 0142", "supplier"),
    ("Tom Becker", None, "tom.becker@example.de", None, "customer"),
    ("Aiko Yamada", "Nikkei Weekly", "a.yamada@nikkeiweekly.jp", "+81 3 5550 1234", "press"),
    ("Peter Novak", "Brightline Partners", None, "+420 555 010 203", "partner"),
    ("Sofia Rossi", "Rossi Tessuti", "sofia@rossitessuti.it", None, "supplier"),
    ("James Carter", None, None, "+1 415 555 0199", "customer"),
    ("Lena Fischer", "TechCrunch", "lena.fischer@techcrunch.com", None, "press"),
    ("Omar Haddad", "Desert Solar", "omar@desertsolar.ae", "+971 4 555 7788", "partner"),
    ("Chloé Dubois", "Maison Dubois", "chloe@maisondubois.fr", "+33 1 55 50 12 34", "customer"),
    ("Erik Johansson", "Nordic Steel AB", "erik.j@nordicsteel.se", None, "supplier"),
    ("Priya Sharma", None, "priya.sharma@example.in", "+91 22 5550 4411", "customer"),
    ("Daniel Kim", "Seoul Daily", None, None, "press"),
    ("Hannah Müller", "Müller & Partner", "h.mueller@mueller-partner.de", "+49 30 555 0101", "partner"),
    ("Lucas Oliveira", "Verde Agro", "lucas@verdeagro.com.br", None, "supplier"),
    ("Grace O'Neill", None, "grace.oneill@example.ie", None, "customer"),
    ("Victor Petrov", "Baltic Ventures", "v.petrov@balticventures.ee", "+372 555 0987", "partner"),
]

_ROLE_WORDS = {
    "customer": [
        "a customer of ours",
        "who bought from us last month",
        "one of our clients",
        "a regular buyer",
    ],
    "supplier": ["our supplier", "who supplies our raw materials", "from our vendor", "a supplier"],
    "partner": ["our business partner", "from a partner firm", "who co-sells with us", "a partner"],
    "press": ["a journalist", "from the press", "a reporter who wants an interview", "a press contact"],
}


_ROLE_LINE = {
    "customer": "I have a question about my last order.",
    "supplier": "this is about the delivery we ship to you next week.",
    "partner": "I'd like to plan our joint offer with you.",
    "press": "I'm writing an article and would like an interview.",
}


def _contact_text(i: int, rec: tuple[Any, ...]) -> str:
    name, company, email, phone, role = rec
    s = i % 4
    who = _ROLE_WORDS[role][s]
    at = f" at {company}" if company else ""
    bits = []
    if email:
        bits.append(f"e-mail {email}")
    if phone:
        bits.append(f"phone {phone}")
    reach = (" Reach them by " + " or ".join(bits) + ".") if bits else " No contact details were left."
    if s == 0:
        return f"Note from the front desk: {name}{at}, {who}, called today.{reach}"
    if s == 1:
        sig = "\n".join(x for x in (name, company, email, phone) if x)
        return f"Hi, {_ROLE_LINE[role]}\n\n--\n{sig}"
    if s == 2:
        return f"New contact card: {name}{at} ({who}).{reach}"
    return f"Please add {name}{at} to the CRM; they are {who}.{reach}"


def _contact_gold(rec: tuple[Any, ...]) -> dict[str, Any]:
    name, company, email, phone, role = rec
    return {"name": name, "company": company, "email": email, "phone": phone, "role": role}


# --- events: (title, date, start time, city, online, speakers)
_EVENTS = [
    ("PyData Berlin", "2025-04-11", "09:30", "Berlin", False, ["Anna Weber", "Tom Lee"]),
    ("Rust Nation", "2025-02-19", "10:00", "London", False, ["Ferris Crab"]),
    ("Cloud Native Day", "2025-06-03", "13:00", "Amsterdam", True, []),
    ("Open Source Summit", "2025-09-20", "08:45", "Vienna", False, ["Linus Hall", "Maya Patel", "Jo Kim"]),
    ("AI in Health", "2025-10-07", "18:30", "Boston", True, ["Dr. Sara Cohen"]),
    ("Design Week Talk", "2025-05-15", "17:00", "Milan", False, ["Luca Bianchi"]),
    ("Security Meetup", "2025-11-12", "19:00", "Tel Aviv", False, ["Noa Levi", "Adam Katz"]),
    ("Edge AI Webinar", "2025-03-27", "15:00", "Munich", True, ["Jonas Gruber"]),
    ("Data Viz Camp", "2025-08-02", "09:00", "Lisbon", False, []),
    ("Robotics Fair", "2025-07-18", "10:30", "Tokyo", False, ["Ken Sato", "Yui Mori"]),
    ("Web Perf Day", "2025-01-30", "14:00", "Paris", True, ["Claire Martin"]),
    ("Startup Night", "2025-12-04", "20:00", "Dublin", False, ["Sean Byrne", "Aoife Walsh"]),
    ("Quantum Basics", "2025-02-05", "16:00", "Zurich", True, ["Elena Rossi"]),
    ("Green Energy Forum", "2025-06-25", "09:15", "Copenhagen", False, ["Mads Jensen"]),
    ("Mobile Dev Con", "2025-09-09", "11:00", "Warsaw", False, ["Piotr Nowak", "Kasia Zielinska"]),
    ("Product Leaders", "2025-04-29", "12:30", "Toronto", True, []),
]


def _time(hhmm: str, style: int) -> str:
    h, m = (int(x) for x in hhmm.split(":"))
    if style in (0, 3):
        return hhmm
    suffix = "am" if h < 12 else "pm"
    h12 = h % 12 or 12
    return f"{h12}:{m:02d} {suffix}" if m else f"{h12} {suffix}"


def _event_text(i: int, rec: tuple[Any, ...]) -> str:
    title, date, start, city, online, speakers = rec
    s = i % 4
    where = f"online (organised from {city})" if online else f"in {city}"
    talks = (
        (f" Speakers: {', '.join(speakers)}." if s % 2 == 0 else f" With {' and '.join(speakers)}.")
        if speakers
        else " Speakers to be announced."
    )
    if s == 0:
        return f"{title} takes place {where} on {_date(date, 0)}, starting at {_time(start, 0)}.{talks}"
    if s == 1:
        return f"Save the date: {title}, {_date(date, 1)} at {_time(start, 1)}, {where}.{talks}"
    if s == 2:
        return f"Join us for {title}! Doors open {_time(start, 2)} on {_date(date, 2)}, {where}.{talks}"
    return f"EVENT: {title}\nWHEN: {_date(date, 3)}, {_time(start, 3)}\nWHERE: {where}\n{talks.strip()}"


def _event_gold(rec: tuple[Any, ...]) -> dict[str, Any]:
    title, date, start, city, online, speakers = rec
    return {
        "title": title,
        "date": date,
        "start_time": start,
        "city": city,
        "online": online,
        "speakers": speakers,
    }


def extraction_items() -> list[dict[str, Any]]:
    """64 items: ``{"id", "schema_name", "schema", "prompt", "document", "gold"}``, 16 per schema,
    fixed order (``prompt`` is the instructions, a blank line, then ``document``)."""
    out: list[dict[str, Any]] = []
    for name, records, text, gold in (
        ("invoice", _INVOICES, _invoice_text, _invoice_gold),
        ("receipt", _RECEIPTS, _receipt_text, _receipt_gold),
        ("contact", _CONTACTS, _contact_text, _contact_gold),
        ("event", _EVENTS, _event_text, _event_gold),
    ):
        for i, rec in enumerate(records):
            out.append(
                {
                    "id": f"{name}-{i:02d}",
                    "schema_name": name,
                    "schema": SCHEMAS[name],
                    "prompt": f"{INSTRUCTIONS[name]}\n\n{text(i, rec)}",
                    "document": text(i, rec),
                    "gold": gold(rec),
                }
            )
    return out


# --- routing: 90 tickets, 3 labels, 30 each; written for this set (not the bench/tickets.py texts)
LABELS = ["billing", "technical", "account"]

_TICKETS = {
    "billing": [
        "I was charged twice for my March subscription and need the duplicate refunded.",
        "My invoice says 49 euros but my plan costs 29.",
        "Can you send me a VAT invoice for last year's payments?",
        "The annual discount was not applied when I renewed.",
        "Why did my card get charged after I cancelled?",
        "I'd like to switch from monthly to yearly payment.",
        "There is a charge of $12.99 I don't recognise on my statement.",
        "Please refund the unused part of my subscription.",
        "My payment failed but my bank shows the money as taken.",
        "How do I update the credit card you bill?",
        "The price increased without any notice.",
        "I need a receipt for my expense report.",
        "You billed my company twice for the same seats.",
        "Can I pay by bank transfer instead of card?",
        "The coupon code SPRING24 gave no discount at checkout.",
        "I was billed for 10 seats but we only use 6.",
        "When will my refund arrive? It has been two weeks.",
        "Please remove the sales tax, we are tax exempt.",
        "My trial converted to a paid plan without warning.",
        "The invoice address on my bills is wrong.",
        "Do you offer a student price?",
        "I was charged in dollars instead of euros.",
        "Cancel my paid add-on and credit the difference.",
        "The last payment was taken from the wrong card.",
        "Why is there a late fee on my account statement?",
        "I need an itemised invoice for the last quarter.",
        "My subscription renewed at the old higher rate.",
        "Could you split the invoice between two cost centres?",
        "The checkout page shows a different total than my bill.",
        "Please stop the automatic renewal payment.",
    ],
    "technical": [
        "The app crashes when I open the settings page.",
        "I get error 500 whenever I upload a PDF.",
        "The dashboard loads forever and never shows my data.",
        "Sync between my phone and laptop stopped working.",
        "Push notifications no longer arrive on Android.",
        "Exported CSV files are empty.",
        "Search returns nothing even for exact titles.",
        "The API times out on requests over 1 MB.",
        "Videos freeze after a few seconds.",
        "Since the update the app drains my battery.",
        "Dark mode makes the table text invisible.",
        "The printer integration fails with error 42.",
        "Images in my posts show as broken links.",
        "The desktop app will not start on Windows 11.",
        "Webhooks are delivered twice for every event.",
        "The calendar shows all times one hour off.",
        "I cannot attach files larger than 2 MB.",
        "The page layout breaks on Safari.",
        "Our SSO login redirects in an endless loop.",
        "The mobile app freezes on the loading screen.",
        "Charts do not render in Firefox.",
        "Autosave lost my last hour of work.",
        "The import tool rejects a valid Excel file.",
        "API responses come back with garbled characters.",
        "Keyboard shortcuts stopped working after the update.",
        "The map view is blank on my tablet.",
        "Reports take ten minutes to generate.",
        "Email notifications contain broken links.",
        "The app says it is offline although my Wi-Fi works.",
        "Two-way sync with Google Drive duplicates files.",
    ],
    "account": [
        "How do I change the e-mail address on my account?",
        "The password reset link never arrives.",
        "Please delete my account and all my data.",
        "I want to add a colleague to my team account.",
        "My account is locked after too many login attempts.",
        "How can I change my username?",
        "Can you merge my two accounts into one?",
        "My two-factor codes are not accepted at login.",
        "Please update the phone number on my profile.",
        "I can no longer sign in with my Google account.",
        "How do I transfer ownership of the workspace to a colleague?",
        "I think someone else logged into my account.",
        "I want to remove a former employee from our team.",
        "How do I turn on two-factor authentication?",
        "I never received the account verification e-mail.",
        "Please change the name on my profile to my married name.",
        "Can I have two profiles under one login?",
        "How do I download a copy of all my personal data?",
        "My account was deactivated and I don't know why.",
        "I want to give a team member admin rights.",
        "How do I log out of all my devices at once?",
        "I lost access to the e-mail tied to my account.",
        "Can you reactivate my closed account?",
        "Where do I change my privacy settings?",
        "I signed up twice by mistake, please remove one account.",
        "How do I change my security questions?",
        "My recovery phone number is out of date.",
        "Invite links for new team members have expired.",
        "I want to rename our organisation in the account settings.",
        "How do I leave a team I was added to?",
    ],
}


def routing_tickets() -> list[tuple[str, str]]:
    """90 ``(text, gold label)`` pairs, the labels interleaved (billing, technical, account, ...)."""
    return [(_TICKETS[label][i], label) for i in range(30) for label in LABELS]


if __name__ == "__main__":
    items = extraction_items()
    assert len(items) == 64 and len(routing_tickets()) == 90
    import jsonschema

    for it in items:
        jsonschema.validate(it["gold"], it["schema"])  # every gold answer is itself valid
    print(f"{len(items)} extraction items, {len(routing_tickets())} tickets; all gold answers validate")
    for it in items[::16]:
        print(f"--- {it['id']}\n{it['prompt']}\n{it['gold']}")
