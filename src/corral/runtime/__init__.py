"""The runtime kernel every host calls at each decoding step.

``masks`` (apply packed bitmasks: numpy, torch CPU view, device unpack), ``budget`` (exact
``max_tokens`` steering), ``jump`` (the jump-ahead rule: forced tokens), ``sampling`` (masked
greedy / temperature / top-k / top-p), ``tokens`` (per-tokenizer tables), ``kernel`` (the
per-step loop the transformers, llama-cpp-python and vLLM processors share).
"""
