import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HAS_SHARED_MNIST, REPO, draw_on_canvas, mnist_test_digits, run_cli

from vit_demo.cli import build_parser
from vit_demo.cli.commands import model_and_split
from vit_demo.training import run as training


@pytest.fixture(scope="module")
def digit_files(mnist_root, tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits")
    images, labels = mnist_test_digits(mnist_root, 12)
    paths = []
    for i, (digit, label) in enumerate(zip(images, labels)):
        path = folder / f"digit{i}_{label}.png"
        draw_on_canvas(digit, canvas=400, size=250, at=(40 + 5 * i, 60)).save(path)
        paths.append(path)
    return paths, [str(int(y)) for y in labels]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    (folder / "notes.png").write_text("not an image")
    (folder / "cut.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x20")
    blank = folder / "blank.png"
    from PIL import Image

    Image.new("RGB", (300, 300), "white").save(blank)
    (folder / "drawings").mkdir()
    return {"notes.png": "not an image", "cut.png": "damaged", "blank.png": "Nothing to classify",
            "missing.png": "no such file", "drawings": "a folder, not an image file"}, folder


def test_predict_prints_one_json_line_per_file_in_order(digit_files, bad_files):
    paths, labels = digit_files
    expected_errors, folder = bad_files
    bad_paths = [str(folder / name) for name in expected_errors]
    files = [str(paths[0]), *bad_paths, *map(str, paths[1:])]
    result = run_cli("predict", "--model", "mnist", *files)
    assert result.returncode == 1, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["file"] for line in lines] == files
    for line in lines:
        name = line["file"].rsplit("/", 1)[-1]
        if name in expected_errors:
            assert set(line) == {"file", "error"} and expected_errors[name] in line["error"]
            continue
        # Whether a drawing looks like a digit at all: tests/test_unfamiliar.py checks the rule (MNIST's test digit 8,
        # a 5 written like an S, is one of the 1.5% of real digits it flags).
        assert set(line) == {"file", "label", "confidence", "top", "unfamiliar"} and isinstance(line["unfamiliar"], bool)
        assert len(line["top"]) == 3 and line["top"][0] == [line["label"], line["confidence"]]
        probs = [p for _, p in line["top"]]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1.0001
    predicted = [line["label"] for line in lines if "label" in line]
    assert sum(p == y for p, y in zip(predicted, labels)) >= len(labels) - 1


def test_predict_exits_zero_when_every_file_is_classified_and_batches_agree(digit_files):
    paths = [str(p) for p in digit_files[0]]
    whole = run_cli("predict", "--model", "mnist", "--top", "2", *paths)
    assert whole.returncode == 0, whole.stderr
    batched = run_cli("predict", "--model", "mnist", "--top", "2", "--batch-size", "5", *paths)
    assert batched.returncode == 0
    for a, b in zip(whole.stdout.splitlines(), batched.stdout.splitlines()):
        a, b = json.loads(a), json.loads(b)
        assert a["label"] == b["label"] and len(a["top"]) == 2
        assert a["confidence"] == pytest.approx(b["confidence"], abs=1e-5)


def test_predict_with_missing_weights_names_the_file_and_the_command(tmp_path, digit_files):
    result = run_cli("predict", "--model", str(tmp_path / "nowhere"), str(digit_files[0][0]))
    assert result.returncode == 2
    assert "nowhere/config.json not found" in result.stderr and "python train.py" in result.stderr
    assert "Traceback" not in result.stderr


def test_evaluate_mnist(mnist_root):
    result = run_cli("evaluate", "--model", "mnist", "--data-dir", str(mnist_root), "--limit", "1000")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"model", "dataset", "split", "n", "accuracy"} <= set(report)
    assert report["dataset"] == "mnist" and report["split"] == "test" and report["n"] == 1000
    assert report["accuracy"] > (0.98 if HAS_SHARED_MNIST else 0.5)
    refused = run_cli("evaluate", "--model", "mnist", "--data-dir", str(mnist_root), "--limit", "0")
    assert refused.returncode == 2 and "--limit: must be at least 1" in refused.stderr  # was a ZeroDivisionError
    assert "Traceback" not in refused.stderr


def test_evaluate_limit_spreads_over_a_split_kept_in_class_order(cifar_root):
    # The image folder keeps each class's photos together, as CIFAR-10's do: the first 10 would all be airplanes.
    args = build_parser().parse_args(["evaluate", "--model", "cifar10", "--data-dir", str(cifar_root), "--limit", "10",
                                      "--device", "cpu"])
    _, images, labels = model_and_split(args, args.limit)
    assert len(images) == 10 and sorted(labels.tolist()) == list(range(10))


@pytest.mark.slow
def test_train_and_evaluate_cifar10_on_an_image_folder(cifar_root, tmp_path):
    weights = tmp_path / "cifar-tiny"
    training.main(["--dataset", "cifar10", "--data-dir", str(cifar_root), "--out", str(weights),
                   "--checkpoint-dir", str(tmp_path / "ckpt"), "--epochs", "8", "--patch-size", "8", "--dim", "32",
                   "--depth", "1", "--heads", "2", "--mlp-dim", "64", "--batch-size", "32", "--lr", "3e-3",
                   "--warmup-epochs", "1", "--no-progress",
                   # 600 images and 8 epochs: learnable without the recipe's heavy augmentation, which is not what
                   # this test is about (real photos, or generated shapes where ../shared/data is missing)
                   "--no-trivial-augment", "--random-erasing", "0", "--mix-prob", "0"])
    result = run_cli("evaluate", "--model", str(weights), "--data-dir", str(cifar_root))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["dataset"] == "cifar10" and report["n"] == 200
    assert report["accuracy"] > 0.2  # chance is 0.1
    photo = next((cifar_root / "cifar10" / "test" / "ship").glob("*.png"))
    line = json.loads(run_cli("predict", "--model", str(weights), str(photo)).stdout)
    assert line["label"] in {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}


def test_evaluate_on_damaged_data_is_a_clear_error(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / name).write_bytes(b"\0\0\x08\x01\0\0\0\x09abc")
    result = run_cli("evaluate", "--model", "mnist", "--data-dir", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error:") and "truncated" in result.stderr and "Traceback" not in result.stderr


def test_data_that_is_missing_and_cannot_be_downloaded_is_a_clear_error(tmp_path, monkeypatch, capsys):
    # Offline, or the server down: the download is pointed at a closed local port, so it fails the same everywhere.
    import torchvision

    from vit_demo import cli

    monkeypatch.setattr(torchvision.datasets.MNIST, "mirrors", ["http://127.0.0.1:9/"])
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "url", "http://127.0.0.1:9/cifar-10-python.tar.gz")
    assert cli.main(["evaluate", "--model", "mnist", "--data-dir", str(tmp_path)]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"error: MNIST is not in {tmp_path} and could not be downloaded (") and "connect" in said
    with pytest.raises(SystemExit, match="train.py: error: CIFAR-10 is not in .* could not be downloaded"):
        training.main(["--dataset", "cifar10", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out"),
                       "--epochs", "1", "--no-progress"])


def test_plain_pytest_finds_the_package_too():
    """``pytest`` (the console script, which does not put the checkout on sys.path) works as ``python -m pytest``."""
    pytest_script = Path(sys.executable).parent / "pytest"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([str(pytest_script), "--collect-only", "-q", "tests/test_model.py"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "test_model.py::" in result.stdout, result.stdout[-2000:]


def test_export_writes_a_slide_or_a_gif_and_refuses_bad_choices_clearly(tmp_path, capsys):
    # In this process (``cli.main``, what ``python -m vit_demo`` runs): ten runs of the command, no ten starts.
    from PIL import Image

    from vit_demo import cli

    def export(*args: str) -> tuple[int, str, str]:
        code = cli.main(["export", *args])
        said = capsys.readouterr()
        return code, said.out, said.err

    seven = str(REPO / "examples" / "digits" / "7.png")
    for args, width, frames in ((["--view", "layer", "--layer", "3", "--head", "2"], 1600, 1),
                                (["--view", "relevance", "--label", "1", "--width", "2000"], 2000, 1),
                                (["--view", "query", "--patch", "24"], 1600, 1),
                                (["--view", "gif"], 720, 6)):
        out = tmp_path / f"slide-{args[1]}"
        code, said, err = export(seven, *args, "--out", str(out))
        assert code == 0, err
        record = json.loads(said)
        assert record["label"] == "7" and record["out"] == str(out) and record["bytes"] == out.stat().st_size
        with Image.open(out) as picture:
            assert width <= picture.width < width + 10 and getattr(picture, "n_frames", 1) == frames
    not_an_image = str(REPO / "README.md")
    for file, args, message in ((seven, ["--view", "layer", "--head", "9"], "the head must be 1 to 4"),
                                (seven, ["--view", "layer", "--layer", "0"], "the layer must be 1 to 6"),
                                (seven, ["--view", "query", "--patch", "49"], "the patch must be 0 to 48"),
                                (seven, ["--view", "relevance", "--label", "dog"], "there is no class 'dog'"),
                                (not_an_image, ["--view", "grid"], "not an image")):
        code, said, err = export(file, *args, "--out", str(tmp_path / "refused.png"))
        assert code == 2 and said == "" and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "refused.png").exists()
    code, _, err = export(seven, "--out", str(tmp_path / "nowhere" / "x.png"))  # said its temporary file's name
    assert code == 2 and f"its folder {tmp_path / 'nowhere'} does not exist" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["vit_demo", "predict", "--top", "-2", "x.png"], "--top: must be at least 1, not -2"),  # listed 8 classes
    (["vit_demo", "predict", "--batch-size", "0", "x.png"], "--batch-size: must be at least 1, not 0"),
    (["vit_demo", "export", "x.png", "--width", "100000"], "--width: must be 1 to 3840, not 100000"),  # 37 GiB
    (["train", "--dataset", "mnist", "--epochs", "0"], "--epochs: must be at least 1, not 0"),  # an IndexError
    (["train", "--dataset", "mnist", "--train-limit", "0"], "--train-limit: must be at least 1"),  # ZeroDivisionError
    (["train", "--dataset", "mnist", "--calibration-images", "-3"], "--calibration-images: must be at least 0"),
    (["train", "--dataset", "mnist", "--lr", "nan"], "--lr: must be a number at least 0, not nan"),
    (["train", "--dataset", "mnist", "--mix-prob", "2"], "--mix-prob: must be a number 0 to 1, not 2"),
    (["train", "--dataset", "cifar10", "--pretrain", "mae", "--mask-ratio", "1"], "--mask-ratio: must be a number 0 to 0.99"),
])
def test_numbers_out_of_range_are_refused_before_anything_runs(argv, message, capsys):
    from vit_demo.cli import main as vit_demo_main

    with pytest.raises(SystemExit) as stopped:
        (vit_demo_main if argv[0] == "vit_demo" else training.main)(argv[1:])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_a_model_that_cannot_be_built_is_said_in_a_line():
    with pytest.raises(SystemExit, match="train.py: error: dim 64 must be divisible by heads 5"):  # an AssertionError
        training.main(["--dataset", "mnist", "--heads", "5"])


@pytest.mark.slow
def test_onnx_writes_the_model_and_snapshot_graphs_in_sync_and_refuses_a_missing_folder(mnist_root, tmp_path):
    # A one-layer model trained for two epochs, with one snapshot (each graph takes seconds to export, more the deeper
    # the model); a graph of a snapshot no longer listed is removed.
    from vit_demo.onnx.export import read_metadata, stale_graphs

    folder = tmp_path / "mnist"
    training.main(["--dataset", "mnist", "--data-dir", str(mnist_root), "--out", str(folder), "--checkpoint-dir",
                   str(tmp_path / "ckpt"), "--train-limit", "500", "--test-limit", "100", "--epochs", "2",
                   "--snapshots", "1", "--calibration-images", "200", "--patch-size", "7", "--dim", "32",
                   "--depth", "1", "--heads", "2", "--mlp-dim", "64", "--no-progress"])
    entries = json.loads((folder / "snapshots.json").read_text())
    assert len(entries) == 1
    (folder / "snapshots" / "epoch-0002.onnx").write_bytes(b"an old export")
    result = run_cli("onnx", "--model", str(folder))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]  # stdout: the JSON lines alone
    # stderr: each step as it begins (exporting a graph takes seconds here, minutes for a large model), then the time
    begun = [line.split("] ", 1)[1] for line in result.stderr.splitlines() if line.startswith(f"onnx {folder} [")]
    assert begun == ["reading its head means and training snapshots", "exporting model.onnx",
                     "exporting relevance.onnx", "exporting patching_heads.onnx", "exporting patching_residual.onnx",
                     "writing graphs.data, the weights model.onnx, relevance.onnx, patching_heads.onnx, "
                     "patching_residual.onnx share", "exporting snapshots/epoch-0001.onnx"]
    assert f"onnx {folder}: done, 7 steps in " in result.stderr
    written = [r for r in records if "bytes" in r]
    assert [Path(r["file"]).relative_to(folder).as_posix() for r in written] == [
        "graphs.data", "model.onnx", "relevance.onnx", "patching_heads.onnx", "patching_residual.onnx",
        "snapshots/epoch-0001.onnx"]
    assert written[0]["shared_by"] == ["model.onnx", "relevance.onnx", "patching_heads.onnx", "patching_residual.onnx"]
    assert all(r["bytes"] == Path(r["file"]).stat().st_size for r in written)
    calibrated = [r for r in written if "temperature" in r]  # the patching graphs' logits are raw, nothing ablated
    assert [r["ablation"] for r in calibrated] == ["mean", "mean", "zeros"]
    trained = json.loads((folder / "config.json").read_text())["temperature"]
    assert [r["temperature"] for r in calibrated] == [trained, trained, entries[0]["temperature"]]
    assert 1.0 != trained != entries[0]["temperature"] != 1.0  # the run calibrated the model and its snapshot
    assert not (folder / "snapshots" / "epoch-0002.onnx").exists() and len(records) == 7
    assert stale_graphs(folder) == []
    assert read_metadata(folder / "snapshots" / "epoch-0001.onnx")["weights_sha256"] == entries[0]["sha256"]

    result = run_cli("onnx", "--model", str(tmp_path / "nothing"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ") and "config.json not found" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
