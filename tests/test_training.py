import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from conftest import REPO, stopped_after_first_checkpoint
from safetensors.torch import load_file

from vit_demo import load_model
from vit_demo.atomic import atomic_write
from vit_demo.data.datasets import dataset_spec, load_split
from vit_demo.interpret.heads import read_head_means
from vit_demo.interpret.inside import ATTENTION_DISTANCE_FILE, read_attention_distance
from vit_demo.model import VisionTransformer
from vit_demo.training import loop as training
from vit_demo.training.run import graph_step_by_default, main as train_main
from vit_demo.training.step import TrainStep, training_batches
from vit_demo.training.recipes import RECIPES
from vit_demo.weights import (CALIBRATION_FILE, CONFIG_FILE, CURVES_FILE, HEAD_MEANS_FILE, METRICS_FILE,
                              RELIABILITY_FILE, SNAPSHOTS_DIR, SNAPSHOTS_INDEX, WEIGHTS_FILE, WeightsError,
                              load_snapshots, read_calibration, snapshot_epochs)

TINY = ["--patch-size", "7", "--dim", "32", "--depth", "1", "--heads", "2", "--mlp-dim", "64", "--no-progress"]


def run_train(data_dir, tmp_path, *extra: str, name: str = "run", dataset: str = "mnist") -> dict:
    return train_main(["--dataset", dataset, "--data-dir", str(data_dir), "--out", str(tmp_path / name),
                          "--checkpoint-dir", str(tmp_path / f"{name}-ckpt"), *extra])


@pytest.mark.slow
def test_short_training_run_beats_chance_by_far(mnist_root, tmp_path):
    metrics = run_train(mnist_root, tmp_path, "--train-limit", "5000", "--test-limit", "1000", "--epochs", "4",
                        "--patch-size", "7", "--dim", "64", "--depth", "2", "--heads", "4", "--mlp-dim", "128",
                        "--lr", "2e-3", "--warmup-epochs", "0.3", "--batch-size", "64", "--no-progress")
    assert metrics["test_accuracy"] > 0.5  # chance is 0.1
    out = tmp_path / "run"
    assert {p.name for p in out.iterdir()} == {CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE, CURVES_FILE, SNAPSHOTS_DIR,
                                               SNAPSHOTS_INDEX, ATTENTION_DISTANCE_FILE, CALIBRATION_FILE,
                                               RELIABILITY_FILE, HEAD_MEANS_FILE}
    assert read_head_means(out).shape == (2, 4, 17, 16)  # (layers, heads, tokens, head width): for mean-ablation
    # Calibrated at the end of the run, on the training images it held out (never trained on).
    calibrated = read_calibration(out)
    assert "training images held out from training" in calibrated["fitted_on"]
    assert load_model(out, device="cpu").temperature == calibrated["temperature"]
    assert all("temperature" in entry for entry in json.loads((out / SNAPSHOTS_INDEX).read_text()))
    distance = read_attention_distance(out)  # (layers, heads) in pixels, within the 28x28 image
    assert distance.shape == (2, 4) and (distance > 0).all() and (distance < 28 * 2**0.5).all()
    saved = json.loads((out / METRICS_FILE).read_text())
    for key in ("test_accuracy", "epochs", "wall_time_s", "device", "parameters", "command", "history"):
        assert key in saved
    assert saved["epochs"] == 4 and len(saved["history"]) == 4
    assert saved["command"].startswith("python train.py --dataset mnist")
    assert (out / CURVES_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The written weights load through the public API and agree with the training run.
    images, labels = load_split("mnist", mnist_root, "test", download=False)
    clf = load_model(out, device="cpu")
    predictions = clf.predict_preprocessed([img[0].numpy() / 255.0 for img in images[:300]], attention=False)
    accuracy = sum(p.label == str(int(y)) for p, y in zip(predictions, labels[:300])) / 300
    assert accuracy > 0.5


def assert_resume_is_exact(data_dir, tmp_path, monkeypatch, dataset: str, *args: str) -> None:
    """A run stopped after its first epoch and resumed ends with the same weights as an unbroken run."""
    run_train(data_dir, tmp_path, *args, name="straight", dataset=dataset)
    with stopped_after_first_checkpoint(monkeypatch):
        run_train(data_dir, tmp_path, *args, name="broken", dataset=dataset)
    assert not (tmp_path / "broken" / WEIGHTS_FILE).exists()
    metrics = run_train(data_dir, tmp_path, *args, "--resume", name="broken", dataset=dataset)

    assert [h["epoch"] for h in metrics["history"]] == [1, 2]
    straight = load_file(tmp_path / "straight" / WEIGHTS_FILE)
    resumed = load_file(tmp_path / "broken" / WEIGHTS_FILE)
    for key in straight:
        torch.testing.assert_close(resumed[key], straight[key], rtol=1e-5, atol=1e-6)
    # The snapshot kept after the first epoch, before the break, is the unbroken run's too.
    assert [(s.epoch, s.test_accuracy) for s in load_snapshots(tmp_path / "broken")] == \
        [(s.epoch, s.test_accuracy) for s in load_snapshots(tmp_path / "straight")] == [(1, metrics["history"][0]["test_accuracy"])]


def test_resume_continues_exactly_where_it_stopped(mnist_root, tmp_path, monkeypatch):
    # No calibration at the end (--calibration-images 0): what resumes is the training; calibrating measures the
    # model on drawing sets that take half a minute to make, once a session (tests/test_calibration.py has it).
    assert_resume_is_exact(mnist_root, tmp_path, monkeypatch, "mnist", "--train-limit", "600", "--test-limit", "200",
                           "--epochs", "2", "--calibration-images", "0", *TINY)


def test_resume_is_exact_with_the_photo_recipe(cifar_root, tmp_path, monkeypatch):
    # Per-image TrivialAugment, random erasing, MixUp/CutMix and stochastic depth all draw random numbers.
    recipe = RECIPES["cifar10"]
    assert recipe.trivial_augment and recipe.random_erasing and recipe.mix_prob and recipe.vit.drop_path
    assert_resume_is_exact(cifar_root, tmp_path, monkeypatch, "cifar10",
                           "--train-limit", "200", "--test-limit", "50", "--epochs", "2", "--batch-size", "32",
                           "--patch-size", "8", "--dim", "32", "--depth", "2", "--heads", "2", "--mlp-dim", "64",
                           "--no-progress")


def test_resume_is_exact_with_the_graph_step(mnist_root, tmp_path, monkeypatch):
    # The device schedule's step counter and learning rate go into the checkpoint and come back.
    args = ("--train-limit", "600", "--test-limit", "200", "--epochs", "2", "--graph-step", "--calibration-images", "0",
            *TINY)
    assert_resume_is_exact(mnist_root, tmp_path, monkeypatch, "mnist", *args)
    with pytest.raises(SystemExit, match="made with --graph-step; resume it with --graph-step"):
        run_train(mnist_root, tmp_path, *[a for a in args if a != "--graph-step"], "--resume", name="broken")


def test_the_graph_step_is_the_default_on_one_cuda_process_alone():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert graph_step_by_default(cuda, 1, None) and graph_step_by_default(cuda, 1, "default")
    assert not graph_step_by_default(cuda, 1, "reduce-overhead")  # a compile mode with CUDA graphs of its own
    assert not graph_step_by_default(cuda, 2, None)  # DDP
    assert not graph_step_by_default(cpu, 1, None)
    assert not graph_step_by_default(torch.device("mps"), 1, None)


@pytest.mark.slow
def test_compiled_step_gives_the_plain_steps_losses(cifar_root):
    """The fast loop (torch.compile) and the plain one train alike: same losses on the same batches."""
    spec = dataset_spec("cifar10")
    recipe = RECIPES["cifar10"]
    vit = dataclasses.replace(recipe.vit, patch_size=8, dim=32, depth=2, heads=2, mlp_dim=64, drop_path=0.0)
    images, labels = load_split("cifar10", cifar_root, "train", download=False)
    batches = [training_batches(images[i::4][:64], labels[i::4][:64], recipe, spec, torch.Generator().manual_seed(i),
                                64) for i in range(3)]
    losses = {}
    for compile_mode in (None, "default"):
        torch.manual_seed(0)
        model = VisionTransformer(vit)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        step = TrainStep(model, optimizer, scheduler, recipe.label_smoothing, torch.device("cpu"), compile_mode)
        losses[compile_mode] = []
        for x, target in batches:
            before = step.sums[0].item()
            step(x, target)
            losses[compile_mode].append((step.sums[0].item() - before) / len(x))
    assert losses[None][0] != losses[None][2]  # the model learnt between the batches
    # The later losses come from weights each loop updated itself. (The weights themselves differ by up to
    # a few 1e-4 after three AdamW steps: Adam scales tiny rounding differences in tiny gradients up to lr.)
    assert losses["default"] == pytest.approx(losses[None], abs=1e-4)


def test_snapshot_epochs_are_spread_on_a_log_scale():
    assert snapshot_epochs(100, 6) == [1, 2, 5, 10, 22, 46]
    assert snapshot_epochs(300, 6) == [1, 3, 7, 17, 45, 116]
    assert snapshot_epochs(4, 6) == [1, 2, 3] and snapshot_epochs(1, 6) == [] and snapshot_epochs(100, 0) == []


def test_snapshots_are_small_checked_and_show_the_model_learning(mnist_root, tmp_path):
    metrics = run_train(mnist_root, tmp_path, "--train-limit", "2000", "--test-limit", "300", "--epochs", "4",
                        "--snapshots", "3", "--lr", "2e-3", "--warmup-epochs", "0.3", "--batch-size", "64",
                        "--calibration-images", "0", *TINY)  # (calibrated snapshots: test_cli.py's onnx test)
    out = tmp_path / "run"
    snapshots = load_snapshots(out)
    assert [s.epoch for s in snapshots] == [1, 2, 3]
    assert [s.test_accuracy for s in snapshots] == [h["test_accuracy"] for h in metrics["history"][:3]]
    weights_bytes = (out / WEIGHTS_FILE).stat().st_size
    for path in (out / SNAPSHOTS_DIR).iterdir():
        assert path.stat().st_size < 0.6 * weights_bytes  # fp16: about half the fp32 weights
    # A snapshot is the model as it was: its accuracy on the test images is the one recorded for its epoch.
    images, labels = load_split("mnist", mnist_root, "test", download=False)
    images, labels = training.subset(images, labels, 300, 1)
    from vit_demo.training.evaluation import evaluate
    _, correct, n = evaluate(snapshots[0].model, images, labels)
    assert correct / n == pytest.approx(snapshots[0].test_accuracy, abs=2 / 300)  # fp16 may flip an image or two
    blob = bytearray((out / SNAPSHOTS_DIR / "epoch-0002.safetensors").read_bytes())
    blob[-1] ^= 0xFF
    (out / SNAPSHOTS_DIR / "epoch-0002.safetensors").write_bytes(bytes(blob))
    with pytest.raises(WeightsError, match="epoch-0002.safetensors is missing or corrupt"):
        load_snapshots(out)


def test_resume_without_checkpoint_says_so(mnist_root, tmp_path):
    with pytest.raises(SystemExit, match="no checkpoint"):
        run_train(mnist_root, tmp_path, "--resume", "--epochs", "1", *TINY)


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "model.safetensors"
    target.write_bytes(b"old weights")

    def fail_halfway(f):
        f.write(b"half of the new")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail_halfway)
    assert target.read_bytes() == b"old weights"
    assert list(tmp_path.iterdir()) == [target]


def test_atomic_write_survives_a_killed_process(tmp_path):
    target = tmp_path / "weights.bin"
    target.write_bytes(b"old weights")
    code = (
        "import sys, time\n"
        "from vit_demo.atomic import atomic_write\n"
        "def slow(f):\n"
        "    f.write(b'partial'); f.flush(); print('writing', flush=True); time.sleep(60)\n"
        f"atomic_write({str(target)!r}, slow)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert target.read_bytes() == b"old weights"


@pytest.mark.slow
def test_two_process_ddp_on_cpu(mnist_root, tmp_path):
    # train.py, as it runs, with a look at the moment the process group is destroyed: no DDP wrapper may still hold
    # it then (one left to the garbage collector once killed a process at exit).
    launcher = tmp_path / "train_watched.py"
    launcher.write_text(textwrap.dedent(f"""
        import gc, os, sys
        sys.path.insert(0, {str(REPO)!r})
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        from vit_demo.training.run import main
        destroy = dist.destroy_process_group
        def watched():
            alive = sum(isinstance(o, DistributedDataParallel) for o in gc.get_objects())
            rank = os.environ["RANK"]
            print(f"rank {{rank}}: DDP wrappers alive as the group is destroyed: {{alive}}", file=sys.stderr)
            destroy()
        dist.destroy_process_group = watched
        main()
    """))
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(launcher),
         "--dataset", "mnist", "--data-dir", str(mnist_root), "--out", str(out),
         "--checkpoint-dir", str(tmp_path / "ddp-ckpt"), "--train-limit", "512", "--test-limit", "256",
         "--epochs", "2", "--device", "cpu", *TINY],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / METRICS_FILE).read_text())
    assert metrics["processes"] == 2 and metrics["epochs"] == 2
    assert metrics["test_images"] == 256 and 0 <= metrics["test_accuracy"] <= 1
    assert "2 process(es)" in result.stderr
    for rank in (0, 1):
        assert f"rank {rank}: DDP wrappers alive as the group is destroyed: 0" in result.stderr
    assert time.perf_counter() - started < 300
