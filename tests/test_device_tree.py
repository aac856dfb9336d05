"""scripts/device_tree.sh: what travels to a lent GPU machine (at most 64 MiB a call, with what it carries) once the
shipped weights stay here, and that restore puts git's index back as it was. Run on a clone of this repository."""

from __future__ import annotations

import re
import shutil
import subprocess
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
    left = script(clone, "leave")
    assert left.returncode == 0, left.stderr
    assert mib(left) + LARGEST_CHUNK_MIB < 64  # room for every chunk of CIFAR-10
    assert not any(name.startswith("weights/") for name in git("ls-files", cwd=clone).split("\n"))
    assert (clone / "weights" / "cifar10" / "model.safetensors").is_file()  # the files stay where they are
    committed = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "oops"],
                               cwd=clone, capture_output=True, text=True)
    assert committed.returncode != 0 and "device_tree.sh restore" in committed.stderr
    restored = script(clone, "restore")
    assert restored.returncode == 0, restored.stderr
    assert git("status", "--porcelain", cwd=clone) == ""
    assert mib(script(clone, "size")) > 64
    assert not (clone / ".git" / "hooks" / "pre-commit").exists()
