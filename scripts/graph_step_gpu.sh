#!/usr/bin/env bash
# train.py --graph-step on a machine with one CUDA GPU, from the repository root (docs/training.md): the tests that
# need CUDA (the captured step against the plain one, no host sync), then images/s at batch 128 and 256 for the
# compiled step with CUDA graphs (today's fastest), the graph step, and the graph step with a compiled model.
# Prints everything, and keeps a copy in ${OUT:-.}/graph_step_gpu.txt. About 3 minutes on an H100
# (estimated: the tests and two of the six rows took under 90 s there).
set -u
PYTHON="${PYTHON:-python3}"
log="${OUT:-.}/graph_step_gpu.txt"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$PYTHON" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
    "$PYTHON" -m pytest tests/test_graph_step.py -q -p no:cacheprovider
    echo "tests: exit status $?"
    "$PYTHON" benchmarks/train_throughput.py --batch-size 128 256 --modes reduce-overhead graph graph-compiled \
        --steps 200 --warmup 10
    echo "benchmark: exit status $?"
} 2>&1 | tee "$log"
