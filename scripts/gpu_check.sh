#!/usr/bin/env bash
# The vLLM checks that need a GPU, in one go: vLLM's GPU model runner (the v2 runner, its default)
# with corral as the structured-output backend and as the logits processor, then the serving
# benchmark against vLLM's default backend and guidance. Run from the repository root on a
# machine with an NVIDIA GPU and a Python that imports vllm (the GPU wheel) and has corral
# installed (`pip install -e '.[vllm]' pytest openai`); it installs nothing itself, since such
# machines are often offline. Output goes to ${OUT:-gpu-check}/.
#
#   bash scripts/gpu_check.sh                 # tests + benchmark
#   GPU_CHECK_BENCH=0 bash scripts/gpu_check.sh   # tests only
#   JSONSCHEMABENCH=/path/to/jsonschemabench bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-check}"
mkdir -p "$out"
step() { echo "== [${SECONDS}s] $*" | tee -a "$out/summary.txt"; }

step "machine: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
if ! python -c "import vllm, corral" 2> "$out/import.txt"; then
    step "vllm or corral does not import here (see $out/import.txt): install the GPU wheel and corral first"
    exit 2
fi
step "vllm $(python -c 'import vllm; print(vllm.__version__)'), torch $(python -c 'import torch; print(torch.__version__, torch.cuda.is_available())')"

step "vLLM tests (backend, processor, server) on the GPU runner"
# float32 on the GPU too: the tests compare greedy outputs with corral's own loop.
python -m pytest -q --durations=15 tests/test_vllm_backend.py tests/test_vllm.py tests/test_vllm_tools.py \
    tests/test_metrics_vllm.py > "$out/tests.txt" 2>&1
step "tests exit $? ($(tail -n 1 "$out/tests.txt"))"

if [ "${GPU_CHECK_BENCH:-1}" != 0 ]; then
    data="${JSONSCHEMABENCH:-jsonschemabench}"
    step "serving benchmark (corral, xgrammar, guidance; data: $data)"
    python bench/bench_vllm_serve.py --data "$data" --clients 32 --per-client 8 --dtype bfloat16 \
        > "$out/bench_vllm_serve.txt" 2>&1
    step "benchmark exit $?"
    tail -n 12 "$out/bench_vllm_serve.txt" | tee -a "$out/summary.txt"
fi
step "done"
