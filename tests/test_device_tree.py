"""The scripts of a GPU loan (docs/training.md, "On a lent GPU"), here on the CPU: scripts/device_tree.sh, what
travels to the GPU machine (at most 64 MiB a call, with what it carries) once the shipped weights stay here, and that
restore puts git's index back as it was (on a clone of this repository); scripts/gpu_loan.sh, each call's verb, with
a small run from a chunk of images made as ../shared/tools/cifar_chunks.sh makes them."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LARGEST_CHUNK_MIB = 50.2  # ../shared/tools/cifar_chunks.sh: the largest of the three CIFAR-10 chunks a call carries


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def clone(tmp_path) -> Path:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and this repository's history")
    target = tmp_path / "clone"
    git("clone", "-q", str(REPO), str(target), cwd=tmp_path)
    shutil.copy2(REPO / "scripts" / "device_tree.sh", target / "scripts" / "device_tree.sh")  # as in the tree now
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-a", "--allow-empty", "-m", "tree", cwd=target)
    return target


def script(clone: Path, verb: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/device_tree.sh", verb], cwd=clone, capture_output=True, text=True)


def mib(answer: subprocess.CompletedProcess) -> float:
    return float(re.search(r"([0-9.]+) MiB travel", answer.stdout).group(1))


def test_leave_restore_and_what_travels(clone):
    assert mib(script(clone, "size")) > 64  # the whole checkout would be refused
    chunk = clone / ".device-data" / "c1" / "data.tar.gz"
    chunk.parent.mkdir(parents=True)
    chunk.write_bytes(b"")
    left = script(clone, "leave")
    assert left.returncode == 0, left.stderr
    assert mib(left) + LARGEST_CHUNK_MIB < 64  # room for every chunk of CIFAR-10
    assert not any(name.startswith("weights/") for name in git("ls-files", cwd=clone).split("\n"))
    assert (clone / "weights" / "cifar10" / "model.safetensors").is_file()  # the files stay where they are
    assert git("status", "--porcelain", "--untracked-files=all", "--", ".device-data", cwd=clone) == ""  # ignored
    committed = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "oops"],
                               cwd=clone, capture_output=True, text=True)
    assert committed.returncode != 0 and "device_tree.sh restore" in committed.stderr
    restored = script(clone, "restore")
    assert restored.returncode == 0, restored.stderr
    assert git("status", "--porcelain", cwd=clone) == "?? .device-data/\n"  # only what was made meanwhile
    assert mib(script(clone, "size")) > 64
    assert not (clone / ".git" / "hooks" / "pre-commit").exists()


SMALL = ["--dataset", "cifar10", "--epochs", "2", "--warmup-epochs", "1", "--dim", "32", "--depth", "1", "--heads", "2",
         "--mlp-dim", "64", "--calibration-images", "0", "--snapshots", "0", "--batch-size", "64"]
SMALL_MAE = ["--pretrain", "mae", "--decoder-dim", "16", "--decoder-depth", "1", "--decoder-heads", "2"]


@pytest.fixture
def loan(cifar_root, tmp_path):
    """Runs a verb of scripts/gpu_loan.sh as a call on the GPU machine would, in a repository root holding train.py and
    a CIFAR-10 chunk made as ../shared/tools/cifar_chunks.sh makes them; OUT, the folder whose files come back, is
    emptied before each call, as on that machine."""
    work = tmp_path / "repo"
    (work / ".device-data" / "c1").mkdir(parents=True)
    with tarfile.open(work / ".device-data" / "c1" / "data.tar.gz", "w:gz") as chunk:
        chunk.add(cifar_root / "cifar10", arcname="cifar10")
    os.symlink(REPO / "train.py", work / "train.py")
    out = tmp_path / "out"
    env = {**os.environ, "DATA": str(tmp_path / "data"), "OUT": str(out), "PYTHON": sys.executable,
           "PYTHONPATH": str(REPO), "FIRST_LOOK_S": "1"}

    def call(*args: str) -> str:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        done = subprocess.run(["bash", str(REPO / "scripts" / "gpu_loan.sh"), *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    call.work, call.out = work, out
    return call


def test_a_loans_calls_on_the_cpu(loan, tmp_path):
    """unpack a chunk; pretrain, and fine-tune from it as soon as it ends, each in its own session; a call that waits
    on a run brings it back, in parts that join back together here."""
    assert "600 training and 200 test images" in loan("unpack", "1")
    loan("start", "small-mae", *SMALL, *SMALL_MAE)
    assert "after small-mae" in loan("then", "small-mae", "small", *SMALL, "--init-from", "runs/small-mae")
    waited = loan("wait", "small", "300")
    assert "small has ended" in waited and "collected small.log small" in waited
    assert sorted(p.name for p in loan.out.iterdir()) == ["small.tar.part-00"]
    shutil.copytree(loan.out, tmp_path / "came-back")  # (the next call empties OUT)
    loan("join", str(tmp_path / "came-back"), "small", str(tmp_path / "back"))
    metrics = json.loads((tmp_path / "back" / "small" / "metrics.json").read_text())
    assert metrics["epochs"] == 2 and "--init-from runs/small-mae" in metrics["command"]
    log = (tmp_path / "back" / "small.log").read_text()
    assert log.startswith("small-mae has ended: starting small") and "epoch 2/2" in log
    assert (loan.work / "runs" / "small-mae" / "model.safetensors").is_file()


def test_a_run_collected_midway_brings_its_checkpoint(loan, tmp_path):
    """What a call brings back of a run that is still going can be resumed on a later loan; a run that follows one
    that failed is not started."""
    loan("unpack", "1")
    loan("start", "long", *SMALL, "--epochs", "500")
    checkpoint = loan.work / "runs" / "long-checkpoint"
    try:
        for _ in range(240):
            if any(checkpoint.glob("*.pt")):
                break
            time.sleep(0.5)
        assert "collected long.log long-checkpoint" in loan("collect", "long")
    finally:
        os.kill(int((loan.work / "runs" / "long.pid").read_text()), signal.SIGTERM)
    shutil.copytree(loan.out, tmp_path / "came-back")
    loan("join", str(tmp_path / "came-back"), "long", str(tmp_path / "back"))
    assert any((tmp_path / "back" / "long-checkpoint").glob("*.pt"))

    loan("start", "broken", *SMALL, "--init-from", "runs/nothing-here")
    loan("then", "broken", "after-broken", *SMALL)
    assert "did not end well: after-broken not started" in loan("wait", "after-broken", "120")
