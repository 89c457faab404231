"""Checks after decoding and the ``on_invalid`` policies (report / backtrack / retry) on the real
SmolLM2-135M (transformers, greedy), plus the JSON-pointer span locator they rely on."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

import corral
from corral.generation.validation import CheckFailure, value_span

COLOUR = {
    "type": "object",
    "properties": {
        "colour": {"enum": ["red", "green", "blue", "yellow"]},
        "size": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["colour", "size"],
    "additionalProperties": False,
}
PROMPT = "Describe a ball as JSON with its colour and size in cm."


# ---------------------------------------------------------------------- value_span (no model)


@pytest.mark.parametrize(
    ("text", "pointer", "want"),
    [
        ('{"a": 1, "b": [10, {"c": "x}"}]}', "/b/1/c", '"x}"'),
        ('{"a": 1, "b": [10, {"c": "x}"}]}', "/b/0", "10"),
        ('{"a": 1, "b": [10, {"c": "x}"}]}', "/b", '[10, {"c": "x}"}]'),
        ('{\n  "a/b": {"~k": null}\n}', "/a~1b/~0k", "null"),
        ('{"a": "é", "z": -2.5e3}', "/z", "-2.5e3"),
        ("[true, false]", "/1", "false"),
        ('{"a": 1}', "", '{"a": 1}'),
        ('{"a": 1}', None, '{"a": 1}'),
    ],
)
def test_value_span(text: str, pointer: str | None, want: str) -> None:
    span = value_span(text, pointer)
    assert span is not None and text[span[0] : span[1]] == want


@pytest.mark.parametrize("pointer", ["/missing", "/a/0", "/b/5", "/b/x"])
def test_value_span_missing(pointer: str) -> None:
    assert value_span('{"a": 1, "b": [1, 2]}', pointer) is None
    assert value_span("not json", "/a") is None


# ---------------------------------------------------------------------- the policies


def _first(model: Any) -> Any:
    return corral.generate(model, PROMPT, schema=COLOUR, max_new_tokens=40)


def test_passing_checks_change_nothing(smol_model: Any) -> None:
    plain = _first(smol_model)
    seen: list[Any] = []
    r = corral.generate(smol_model, PROMPT, schema=COLOUR, max_new_tokens=40, checks=[seen.append])
    assert r.text == plain.text and r.valid and r.value == plain.value
    assert seen == [plain.value]
    assert r.validation.checks == ["schema", "append"] and r.validation.ok
    assert r.validation.retried == 0 and r.validation.extra_tokens == 0


def test_report_says_what_failed(smol_model: Any) -> None:
    def never(v: Any) -> CheckFailure:
        return CheckFailure("no ball is acceptable", "/colour")

    def raises(v: Any) -> None:
        raise ValueError("broken rule")

    r = corral.generate(
        smol_model, PROMPT, schema=COLOUR, max_new_tokens=40, checks=[never, raises, lambda v: "too big"]
    )
    assert not r.valid and r.value is None
    assert r.validation.value == _first(smol_model).value  # the parsed output is still reported
    fails = r.validation.failures
    assert [(f.check, f.path) for f in fails] == [("never", "/colour"), ("raises", None), ("<lambda>", None)]
    assert "ValueError: broken rule" in fails[1].message and fails[2].message == "too big"
    assert "check never failed at /colour: no ball is acceptable" in r.error
    assert len(r.validation.attempts) == 1


def test_bad_check_results_and_arguments(smol_model: Any) -> None:
    with pytest.raises(TypeError, match="returned int"):
        corral.generate(smol_model, PROMPT, schema=COLOUR, max_new_tokens=40, checks=[lambda v: 3])
    with pytest.raises(ValueError, match="on_invalid"):
        corral.generate(smol_model, PROMPT, schema=COLOUR, on_invalid="fix")
    with pytest.raises(ValueError, match="max_tries"):
        corral.generate(smol_model, PROMPT, schema=COLOUR, on_invalid="retry", max_tries=-1)
    with pytest.raises(TypeError, match="callables"):
        corral.generate(smol_model, PROMPT, schema=COLOUR, checks=["not callable"])
    with pytest.raises(ValueError, match="JSON constraint"):
        corral.generate(smol_model, "An id:", regex="[a-z]{3}", on_invalid="backtrack", checks=[bool])


def test_backtrack_resamples_only_the_failing_value(smol_model: Any) -> None:
    first = _first(smol_model)
    banned = first.value["colour"]

    def not_that_colour(v: dict[str, Any]) -> CheckFailure | None:
        return CheckFailure(f"{v['colour']} is sold out", "/colour") if v["colour"] == banned else None

    r = corral.generate(
        smol_model, PROMPT, schema=COLOUR, max_new_tokens=40, checks=[not_that_colour], on_invalid="backtrack"
    )
    assert r.valid, r.error
    assert r.value["colour"] != banned
    jsonschema.validate(json.loads(r.text), COLOUR)
    start = value_span(first.text, "/colour")
    assert start is not None
    assert r.text[: start[0]] == first.text[: start[0]]  # everything before the value kept
    attempts = r.validation.attempts
    assert [a.how for a in attempts] == ["initial", "backtrack"]
    assert attempts[1].path == "/colour" and attempts[1].tokens > 0
    assert r.validation.extra_tokens == attempts[1].tokens
    assert r.forward_passes > first.forward_passes


def test_backtrack_excludes_every_rejected_value(smol_model: Any) -> None:
    """A rule nothing satisfies: each try writes a colour not tried before, then it gives up."""
    colours: list[str] = []

    def sold_out(v: dict[str, Any]) -> CheckFailure:
        colours.append(v["colour"])
        return CheckFailure("sold out", "/colour")

    r = corral.generate(
        smol_model,
        PROMPT,
        schema=COLOUR,
        max_new_tokens=40,
        checks=[sold_out],
        on_invalid="backtrack",
        max_tries=3,
    )
    assert len(colours) == 4 and len(set(colours)) == 4  # the enum has exactly four values
    assert not r.valid and "sold out" in r.error
    for a in r.validation.attempts:
        jsonschema.validate(json.loads(a.text), COLOUR)  # every attempt stays schema-valid
    # A fifth try has nothing left to write: the policy stops instead of repeating one.
    colours.clear()
    r = corral.generate(
        smol_model,
        PROMPT,
        schema=COLOUR,
        max_new_tokens=40,
        checks=[sold_out],
        on_invalid="backtrack",
        max_tries=6,
    )
    assert len(colours) == 4 and len(r.validation.attempts) == 4


def test_backtrack_on_a_number(smol_model: Any) -> None:
    """A rejected number is not written again, nor one that extends its digits (10 -> 100)."""
    first = _first(smol_model)
    size = first.value["size"]

    def other_size(v: dict[str, Any]) -> CheckFailure | None:
        return CheckFailure("wrong size", "/size") if v["size"] == size else None

    r = corral.generate(
        smol_model, PROMPT, schema=COLOUR, max_new_tokens=40, checks=[other_size], on_invalid="backtrack"
    )
    assert r.valid and r.value["colour"] == first.value["colour"]
    assert not str(r.value["size"]).startswith(str(size))


def test_retry_with_feedback(smol_model: Any) -> None:
    first = _first(smol_model)
    calls: list[dict[str, Any]] = []

    def must_differ(v: dict[str, Any]) -> str | None:
        calls.append(v)
        return "choose a different ball" if v == first.value else None

    r = corral.generate(
        smol_model,
        PROMPT,
        schema=COLOUR,
        max_new_tokens=40,
        checks=[must_differ],
        on_invalid="retry",
        max_tries=3,
    )
    how = [a.how for a in r.validation.attempts]
    assert how[0] == "initial" and set(how[1:]) == {"retry"} and 1 <= len(how) - 1 <= 3
    assert r.validation.extra_tokens == sum(a.tokens for a in r.validation.attempts[1:]) > 0
    assert len(calls) == len(how)
    if r.valid:
        assert r.value != first.value
    else:
        assert len(how) == 4  # gave up only after every try


def test_retry_without_feedback_stops_when_greedy_repeats(smol_model: Any) -> None:
    r = corral.generate(
        smol_model,
        PROMPT,
        schema=COLOUR,
        max_new_tokens=40,
        checks=[lambda v: False],
        on_invalid="retry",
        retry_feedback=False,
        max_tries=5,
    )
    assert len(r.validation.attempts) == 1 and not r.valid


def test_schema_failure_counts_as_a_check(smol_model: Any) -> None:
    """Pydantic validators run in parse; their failure is the 'schema' check, located by loc."""
    pydantic = pytest.importorskip("pydantic")

    class Ball(pydantic.BaseModel):
        colour: str
        size: int

        @pydantic.field_validator("size")
        @classmethod
        def odd(cls, v: int) -> int:
            if v % 2 == 0:
                raise ValueError("size must be odd")
            return v

    r = corral.generate(
        smol_model, PROMPT, schema=Ball, max_new_tokens=40, checks=[], on_invalid="backtrack", max_tries=4
    )
    first = r.validation.attempts[0]
    assert json.loads(first.text)["size"] % 2 == 0  # greedy SmolLM2 answers size 10 here
    assert first.failures[0].check == "schema" and first.failures[0].path == "/size"
    assert "size must be odd" in first.failures[0].message
    assert [a.how for a in r.validation.attempts[1:]] == ["backtrack"] * (len(r.validation.attempts) - 1)
    assert r.valid, r.error
    assert isinstance(r.value, Ball) and r.value.size % 2 == 1
    assert r.text.startswith(first.text[: first.text.index('"size"')])  # colour kept


def test_batch_prompts(smol_model: Any) -> None:
    prompts = [PROMPT, "A red ball, 12 cm. JSON:"]
    rs = corral.generate(
        smol_model, prompts, schema=COLOUR, max_new_tokens=40, checks=[lambda v: v["size"] < 1000]
    )
    assert len(rs) == 2 and all(r.validation is not None and r.validation.ok for r in rs)


def test_backtrack_without_a_path_redoes_the_whole_output(smol_model: Any) -> None:
    first = _first(smol_model)
    r = corral.generate(
        smol_model,
        PROMPT,
        schema=COLOUR,
        max_new_tokens=40,
        checks=[lambda v: v != first.value],
        on_invalid="backtrack",
        max_tries=1,
    )
    second = r.validation.attempts[1]
    assert second.how == "backtrack" and second.path is None
    assert second.text != first.text
    jsonschema.validate(json.loads(second.text), COLOUR)
    assert r.valid == (json.loads(second.text) != first.value)


def test_backtrack_on_llama_cpp_without_torch() -> None:
    """The backtrack loop runs on numpy logits too (a llama.cpp-only install has no torch)."""
    import subprocess
    import sys

    pytest.importorskip("llama_cpp")
    code = (
        "import sys\nfor m in ('torch', 'transformers'):\n    sys.modules[m] = None\n"
        "import json, corral\n"
        "m = corral.load_model(backend='llama.cpp', threads=1)\n"
        f"schema = {COLOUR!r}\n"
        f"first = corral.generate(m, {PROMPT!r}, schema=schema, max_new_tokens=40)\n"
        "bad = first.value['colour']\n"
        "r = corral.generate(m, " + repr(PROMPT) + ", schema=schema, max_new_tokens=40,"
        " checks=[lambda v: corral.CheckFailure('no', '/colour') if v['colour'] == bad else None],"
        " on_invalid='backtrack')\n"
        "print(json.dumps([first.value, r.value, [a.how for a in r.validation.attempts]]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    first, second, how = json.loads(out.stdout.strip().splitlines()[-1])
    assert second is not None and second["colour"] != first["colour"]
    jsonschema.validate(second, COLOUR)
    assert how[0] == "initial" and set(how[1:]) == {"backtrack"}
