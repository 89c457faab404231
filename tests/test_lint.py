"""corral lint: the rule codes on a written corpus, positions, JSON output, exit codes, cost and
tightness measured on a real tokenizer."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from lint_corpus import CLEAN, FLAWED

import corral
from corral.cli import main
from corral.linter import LINT_REPORT_SCHEMA, RULES, SchemaThresholds, lint, lint_file

# The module (``corral.linter.measure`` the attribute is the function of that name).
measure_mod = importlib.import_module("corral.linter.measure")


def _codes(result: corral.LintResult) -> set[str]:
    return {f.code for f in result.findings}


def test_the_corpus_is_large_enough_and_covers_every_static_rule() -> None:
    assert len(CLEAN) + len(FLAWED) >= 40
    expected = set().union(*(codes for *_, codes in FLAWED))
    static = {c for c in RULES if c not in ("W207", "W208", "W301", "W302")}  # tested below
    assert static <= expected


@pytest.mark.parametrize(("name", "kind", "source"), CLEAN, ids=[c[0] for c in CLEAN])
def test_well_formed_constraints_get_no_findings(name: str, kind: str, source: object) -> None:
    result = lint(source, kind=kind)  # type: ignore[arg-type]
    assert result.findings == []
    assert result.cost is not None and result.cost.compile_ms > 0


@pytest.mark.parametrize(("name", "kind", "source", "codes"), FLAWED, ids=[c[0] for c in FLAWED])
def test_flawed_constraints_get_exactly_their_codes(
    name: str, kind: str, source: object, codes: set[str]
) -> None:
    assert _codes(lint(source, kind=kind)) == codes  # type: ignore[arg-type]


def test_the_unique_items_cap_follows_the_option() -> None:
    schema = {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}},
    }
    (f,) = [f for f in lint(schema, max_unique_items=8).findings if f.code == "W210"]
    assert f.pointer == "#/properties/ids/uniqueItems" and "up to 8 items" in f.message
    within = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 8}
    assert "W210" not in _codes(lint(within, max_unique_items=8))
    assert "W210" in _codes(lint(within, max_unique_items=7))
    # With the cap off the array is checked after decoding instead: W201, no W210.
    codes = _codes(lint(schema, max_unique_items=0))
    assert "W201" in codes and "W210" not in codes


def test_w210_reads_the_report_field_not_its_wording() -> None:
    """W210 follows ``ReportEntry.capped_at``: an entry with the field and other words is found,
    one whose words say "capped at" without the field is not."""
    from corral.grammar.json_schema import ReportEntry, SchemaReport

    report = SchemaReport(
        [
            ReportEntry("#/a/uniqueItems", "uniqueItems", "enforced", "free strings", capped_at=5),
            ReportEntry("#/b/uniqueItems", "uniqueItems", "enforced", "capped at 5 items (max_unique_items)"),
            ReportEntry("#/c/uniqueItems", "uniqueItems", "checked after decoding", "", capped_at=5),
        ]
    )
    (f,) = measure_mod._capped_unique_arrays(report)
    assert f.code == "W210" and f.pointer == "#/a/uniqueItems" and "up to 5 items" in f.message


def test_findings_name_where_the_problem_is() -> None:
    r = lint({"type": "object", "properties": {"age": {"type": "integer", "minimum": 9, "maximum": 3}}})
    (f,) = r.errors
    assert (f.code, f.pointer) == ("E101", "#/properties/age/minimum")
    assert "#/properties/age/maximum" in f.message
    (f,) = lint("ab(c", kind="regex").findings
    assert (f.code, f.line, f.column) == ("E100", 1, 3)
    (f,) = lint('root ::= "a"\nitem ::= "b" nope\n', kind="grammar").findings
    assert (f.code, f.line) == ("E100", 2)
    (f,) = lint({"type": "object", "required": ["x"], "additionalProperties": False}).findings
    assert (f.code, f.pointer) == ("E102", "#/required/0")


def test_ignore_drops_codes_and_thresholds_move() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "boolean"} for i in range(120)}}
    assert _codes(lint(schema, measure_cost=False)) == set()
    wide = lint(schema, measure_cost=False, thresholds=SchemaThresholds(wide_object=100))
    assert _codes(wide) == {"W208"}
    assert (
        lint(
            schema, measure_cost=False, thresholds=SchemaThresholds(wide_object=100), ignore=("W208",)
        ).findings
        == []
    )


def test_deep_schemas_are_walked_without_recursion() -> None:
    schema: dict = {"type": "integer"}
    for _ in range(5000):
        schema = {"type": "array", "maxItems": 2, "items": schema}
    r = lint(schema, measure_cost=False)
    assert _codes(r) == {"W207"}
    assert r.findings[0].pointer is not None and r.findings[0].pointer.count("/items") == 5000


def test_near_budget_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    real = measure_mod._compile

    def slow(*args: object, **kwargs: object) -> object:
        grammar, cost, findings = real(*args, **kwargs)  # type: ignore[arg-type]
        cost.compile_ms = 0.6 * cost.budgets["max_compile_ms"]
        return grammar, cost, findings

    monkeypatch.setattr(measure_mod, "_compile", slow)
    r = lint({"enum": ["a", "b"]})
    assert _codes(r) == {"W301"}
    assert "max_compile_ms" in r.findings[0].message


def test_cost_and_tightness_on_a_real_tokenizer(smollm2: corral.Tokenizer) -> None:
    tok = smollm2
    schema = {
        "type": "object",
        "properties": {
            "city": {"enum": ["Paris", "Oslo"]},
            "n": {"type": "integer", "minimum": 0, "maximum": 9},
        },
        "required": ["city", "n"],
    }
    tight = lint(schema, tokenizer=tok, whitespace="compact")
    assert tight.tokenizer == tok.name and tight.cost is not None and tight.tightness is not None
    assert tight.cost.convert_ms is not None and tight.cost.grammar_rules > 0 and tight.cost.terminals > 0
    assert tight.cost.budgets == {
        "max_compile_ms": corral.DEFAULT_LIMITS["max_compile_ms"],
        "max_convert_ms": 5000,
    }
    t = tight.tightness
    assert t.completed and 0 < t.min_share <= t.mean_share <= t.max_share < 0.01
    # The walk's output is what the constraint accepts.
    assert json.loads(t.sample)["city"] in ("Paris", "Oslo")
    loose = lint("(?s:.*)", kind="regex", tokenizer=tok)
    assert loose.tightness is not None and loose.tightness.mean_share > 0.9
    assert _codes(loose) == {"W302"}


def _run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["lint", "--no-progress", *args])
    return rc, capsys.readouterr().out


def test_cli_exit_codes_and_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ok.json").write_text(json.dumps({"enum": ["a", "b"]}))
    (tmp_path / "warn.json").write_text(json.dumps({"type": "array", "items": {"type": "integer"}}))
    sub = tmp_path / "more"
    sub.mkdir()
    (sub / "bad.regex").write_text("a(b\n")
    (sub / "g.gbnf").write_text('root ::= "x"\n')
    (sub / "notes.txt").write_text("ignored: not a constraint suffix")
    assert _run_cli(["--tokenizer", "bytes", str(tmp_path / "ok.json")], capsys)[0] == 0
    assert _run_cli(["--tokenizer", "bytes", str(tmp_path / "warn.json")], capsys)[0] == 0
    assert (
        _run_cli(["--tokenizer", "bytes", "--fail-on", "warning", str(tmp_path / "warn.json")], capsys)[0]
        == 1
    )
    rc, out = _run_cli(["--tokenizer", "bytes", "--format", "json", str(tmp_path)], capsys)
    assert rc == 1
    report = json.loads(out)
    jsonschema.validate(report, LINT_REPORT_SCHEMA)
    assert [Path(f["source"]).name for f in report["files"]] == [
        "bad.regex",
        "g.gbnf",
        "ok.json",
        "warn.json",
    ]
    assert report["summary"] == {"files": 4, "errors": 1, "warnings": 1}
    assert report["files"][0]["findings"][0]["code"] == "E100"
    assert _run_cli(["--tokenizer", "bytes", "--fail-on", "never", str(tmp_path)], capsys)[0] == 0
    rc, out = _run_cli(
        ["--tokenizer", "bytes", "--schema", '{"type": "integer", "minimum": 3, "maximum": 1}'], capsys
    )
    assert rc == 1 and "E101 contradictory-bounds at #/minimum" in out
    assert main(["lint", str(tmp_path / "missing.json")]) == 2


def test_lint_file_reads_suffixes(tmp_path: Path) -> None:
    p = tmp_path / "x.re"
    p.write_text("[0-9]+\n")
    r = lint_file(p, measure_cost=False)
    assert (r.kind, r.findings) == ("regex", [])
    with pytest.raises(ValueError, match="suffix"):
        lint_file(tmp_path / "x.yaml")


def test_the_module_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "corral", "lint", "--no-measure", "--schema", '{"enum": []}'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1 and "E103" in out.stdout
