"""The benchmark scripts still run and print their tables (their numbers go to README, not to asserts)."""

import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.parametrize("script", ["predict_latency.py", "views_latency.py"])
def test_benchmark_prints_a_table(script):
    result = subprocess.run([sys.executable, f"benchmarks/{script}", "--repeat", "3"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) >= 4 and "median ms" in rows[0]
