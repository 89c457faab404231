"""vLLM benchmark: the same batch through vLLM's default structured-output backend and through
corral's logits processor (offline ``LLM``, SmolLM2-135M, CPU build).

The batch is the JSON-extraction set (bench/extraction_set.py) plus the example tasks with a
schema, greedy, all requests submitted together. Printed per mode: outputs that parse and
validate, output tokens, wall time, tokens/s and ms per output token, and the ratio of corral's
throughput to the default backend's (target: >= 1 with 100% validity).

    python bench/bench_vllm.py          # needs vLLM (see README "vLLM"); ~2-3 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_generate import workload  # noqa: E402


def valid(text: str, schema: Any) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", default=None, help="HF model dir (default: converted bundled SmolLM2)")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--repeat", type=int, default=2, help="copies of the batch (more rows per step)")
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from corral.backends.loading import _converted_gguf
    from corral.models import smollm2_gguf_path
    from corral.vllm import CorralLogitsProcessor

    model_dir = args.model_dir or str(_converted_gguf(smollm2_gguf_path(), True))
    llm = LLM(
        model=model_dir,
        enforce_eager=True,
        max_model_len=2048,
        dtype=args.dtype,
        logits_processors=[CorralLogitsProcessor],
        seed=0,
    )
    work = workload(None) * args.repeat
    msgs = [[{"role": "user", "content": p}] for _, p, _ in work]
    schemas = [s for _, _, s in work]
    import vllm

    print(
        f"vllm {vllm.__version__}; {len(work)} requests in one batch; max_tokens={args.max_tokens}",
        flush=True,
    )

    def params(mode: str, schema: Any) -> Any:
        common: dict[str, Any] = {"max_tokens": args.max_tokens, "temperature": 0.0}
        if mode == "vllm default backend":
            return SamplingParams(**common, structured_outputs=StructuredOutputsParams(json=schema))
        if mode == "corral":
            return SamplingParams(**common, extra_args={"corral": {"json_schema": schema}})
        return SamplingParams(**common)

    modes = ["unconstrained", "vllm default backend", "corral"]
    # Warm-up: compile every schema in both engines once (their caches), and the model's kernels.
    for mode in modes[1:]:
        llm.chat(
            msgs[: len(work) // args.repeat],
            [params(mode, s) for s in schemas[: len(work) // args.repeat]],
            use_tqdm=False,
        )
    rows = []
    for mode in modes:
        t0 = time.perf_counter()
        outs = llm.chat(msgs, [params(mode, s) for s in schemas], use_tqdm=False)
        wall = time.perf_counter() - t0
        texts = [o.outputs[0].text for o in outs]
        tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        ok = sum(valid(t, s) for t, s in zip(texts, schemas, strict=True))
        rows.append((mode, ok, len(work), tokens, wall))
        print(f"  done: {mode}", flush=True)
    print(f"{'mode':<22} {'valid':>7} {'out tok':>8} {'wall s':>7} {'tok/s':>7} {'ms/tok':>7}")
    for mode, ok, n, tokens, wall in rows:
        rate, per = tokens / wall, 1000 * wall / tokens
        print(f"{mode:<22} {ok:>3}/{n:<3} {tokens:>8} {wall:>7.1f} {rate:>7.1f} {per:>7.2f}")
    d, c = rows[1], rows[2]
    print(f"\ncorral / default backend throughput: {(c[3] / c[4]) / (d[3] / d[4]):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
