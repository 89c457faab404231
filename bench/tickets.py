"""Support tickets for the classification benchmark: 36 base texts written for this repository,
varied with greetings, sign-offs and details into as many tickets as asked (deterministic)."""

from __future__ import annotations

import random

LABELS = ["billing", "technical", "account"]

BASE = {
    "billing": [
        "I was charged twice for my subscription this month.",
        "Please refund the duplicate payment on my credit card.",
        "My invoice shows a higher amount than my plan.",
        "Why was I billed after cancelling my plan?",
        "The discount code was not applied to my last payment.",
        "I need a copy of my receipt for March for my expense report.",
        "Can I switch from monthly to yearly billing?",
        "My card was declined but the money left my bank account.",
        "You charged VAT although I entered a company tax number.",
        "The price went up without any notice on my bill.",
        "I want a refund for the unused months of my subscription.",
        "There is an unknown charge from your company on my statement.",
    ],
    "technical": [
        "The app crashes every time I open the settings page.",
        "I get error 500 when uploading a file.",
        "The website does not load in Firefox, only a blank page.",
        "Sync between my phone and laptop stopped working yesterday.",
        "Notifications are not delivered on Android anymore.",
        "The export to PDF produces an empty document.",
        "Search returns no results even for words I can see on screen.",
        "The API times out for requests larger than 1 MB.",
        "Videos freeze after a few seconds of playback.",
        "After the last update the app uses all my battery.",
        "The dark mode makes the text invisible in tables.",
        "I cannot connect the printer integration, it shows error 42.",
    ],
    "account": [
        "How do I change the e-mail address on my account?",
        "I forgot my password and the reset link never arrives.",
        "Please delete my account and all my personal data.",
        "I want to add a second user to my team account.",
        "My account was locked after too many login attempts.",
        "How can I change my username?",
        "I would like to merge my two accounts into one.",
        "Two-factor authentication codes are not accepted at login.",
        "Please update the phone number on my profile.",
        "I cannot log in with my Google account anymore.",
        "How do I transfer account ownership to a colleague?",
        "Someone else may have access to my account, please help.",
    ],
}

_OPEN = ["", "Hi, ", "Hello team, ", "Good morning. ", "Hey there! ", "Dear support, "]
_CLOSE = ["", " Thanks.", " Thank you in advance.", " Regards, Sam", " Please help asap.", " Cheers!"]
_DETAIL = [
    "",
    " This is urgent.",
    " It happened again today.",
    " My customer number is 48213.",
    " I use the Pro plan.",
]


def tickets(n: int = 600, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (text, gold label) pairs, the labels balanced."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = LABELS[i % len(LABELS)]
        base = rng.choice(BASE[label])
        out.append((rng.choice(_OPEN) + base + rng.choice(_DETAIL) + rng.choice(_CLOSE), label))
    return out
