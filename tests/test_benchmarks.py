"""The benchmark scripts still run and print their tables (their numbers go to README, not to asserts)."""

import subprocess
import sys

import pytest
from conftest import REPO


def test_predict_latency_prints_a_table():
    result = subprocess.run([sys.executable, "benchmarks/predict_latency.py", "--repeat", "3"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) >= 4 and "median ms" in rows[0]


@pytest.mark.parametrize(("script", "args", "header", "rows"), [
    ("views_latency.py", ["--repeat", "2", "--photo-recipe"], "median ms", 5),
    ("train_throughput.py", ["--batch-size", "8", "--steps", "2", "--warmup", "1", "--modes", "eager", "graph"],
     "training images/s", 2),
    ("serve_latency.py", ["--repeat", "2", "--warmup", "1"], "app / do-nothing p50", 4),
    ("serve_load.py", ["--users", "2", "--drawings", "2"], "throughput req/s", 2),
    ("serve_load.py", ["--users", "2", "--requests", "2", "--endpoint", "/export", "--model", "cifar10", "--apps",
                       "app"], "throughput req/s", 1),
    ("cold_start.py", ["--repeat", "1"], "to first prediction s", 2),
    ("crowd.py", ["--users", "3", "--strokes", "2"], "strokes_per_s", 2),
    ("interaction_cost.py", ["--repeat", "1", "--events", "2"], "interaction", 9),
    ("zerogpu_cost.py", ["--repeat", "3"], "median ms", 4),
])
def test_benchmark_prints_its_rows(script, args, header, rows):
    result = subprocess.run([sys.executable, f"benchmarks/{script}", *args], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert header in table[0] and len(table) == 1 + rows, result.stdout  # the header, then the rows
