"""The maths of vit_demo/interpret/heads/ pinned on the shipped MNIST model and real test digits: knockout, the logit
lens, activation patching, head importance and the pruning curves."""

import json
import shutil
import threading

import pytest
import torch
from conftest import HAS_SHARED_MNIST, run_cli

from vit_demo import cli, load_model
from vit_demo.data.datasets import load_split
from vit_demo.interpret import heads
from vit_demo.training.evaluation import evaluate
from vit_demo.weights import CONFIG_FILE, HEAD_MEANS_FILE, WEIGHTS_FILE, WEIGHTS_ROOT


@pytest.fixture(scope="module")
def model():
    return load_model("mnist", device="cpu").model


@pytest.fixture(scope="module")
def digits(mnist_root):
    """The first 64 test digits, uint8 (64, 1, 28, 28), and their labels."""
    images, labels = load_split("mnist", mnist_root, "test", download=False)
    return images[:64], labels[:64]


@pytest.fixture(scope="module")
def three_and_eight(digits):
    """A 3 and an 8 from the test set, floats (1, 1, 28, 28)."""
    images, labels = digits
    return tuple(images[(labels == digit).nonzero()[0]].float() / 255 for digit in (3, 8))


@pytest.fixture(scope="module")
def means(model):
    means = heads.read_head_means(WEIGHTS_ROOT / "mnist", model)
    assert means is not None, "the shipped MNIST weights keep their head means"
    return means  # (L, H, T, Dh)


def plain(model, images):
    with torch.no_grad():
        return model(images.float() / 255 if images.dtype == torch.uint8 else images)


def every_head(model):
    return [(layer, None) for layer in range(model.config.depth)]


def test_ablating_nothing_gives_the_models_own_logits(model, digits, means):
    images, _ = digits
    assert torch.equal(heads.ablated_logits(model, images, [], means), plain(model, images))
    result = heads.knockout(model, images, [], means)
    assert torch.equal(result.ablated, result.logits) and torch.equal(result.logit_diff, result.ablated_logit_diff)
    assert (result.logit_diff > 0).all()  # the predicted class against the runner-up


def test_knockout_is_one_batched_pass_that_agrees_with_ablated_logits(model, digits, means):
    images, _ = digits
    off = [(2, 0), (5, None)]  # head 1 of layer 3, and the whole of layer 6
    result = heads.knockout(model, images[:8], off, means)
    torch.testing.assert_close(result.ablated, heads.ablated_logits(model, images[:8], off, means))
    torch.testing.assert_close(result.logits, plain(model, images[:8]))
    expected = result.ablated.gather(1, result.predicted[:, None]) - result.ablated.gather(1, result.runner_up[:, None])
    torch.testing.assert_close(result.ablated_logit_diff, expected[:, 0])
    # Per-image masks: each image its own heads off, in one pass.
    masks = torch.zeros(2, *heads.head_mask(model, off).shape, dtype=torch.bool)
    masks[1] = heads.head_mask(model, off)
    per_image = heads.ablated_logits(model, images[:2], masks, means)
    torch.testing.assert_close(per_image[0], plain(model, images[:1])[0])
    torch.testing.assert_close(per_image[1], heads.ablated_logits(model, images[1:2], off, means)[0])


@pytest.mark.parametrize("ablation", ["mean", "zero"])
def test_ablating_every_head_makes_the_output_independent_of_the_image(model, digits, means, ablation):
    images, _ = digits
    logits = heads.ablated_logits(model, images, every_head(model), means if ablation == "mean" else None)
    torch.testing.assert_close(logits, logits[:1].expand_as(logits), atol=1e-5, rtol=0)
    assert not torch.allclose(plain(model, images), plain(model, images)[:1].expand(len(images), -1))


def test_patching_a_run_into_itself_changes_nothing(model, digits):
    images, _ = digits
    everything = torch.ones(model.config.depth, model.config.num_tokens, dtype=torch.bool)
    patched = heads.patch(model, images, images, heads=every_head(model), residual=everything)
    torch.testing.assert_close(patched, plain(model, images), atol=1e-5, rtol=0)


def test_patching_every_head_and_the_last_layer_restores_the_clean_logit_difference(model, three_and_eight):
    three, eight = three_and_eight
    last = model.config.depth - 1
    patched = heads.patch(model, eight, three, heads=every_head(model), residual=[last])
    torch.testing.assert_close(patched, plain(model, three), atol=1e-5, rtol=0)
    grid = heads.patching_grid(model, three, eight)
    assert grid.classes == (3, 8) and grid.logit_diff["clean"] > 0 > grid.logit_diff["corrupt"]
    forward, backward = grid.clean_into_corrupt, grid.corrupt_into_clean
    L, H, T = model.config.depth, model.config.heads, model.config.num_tokens
    assert forward["heads"].shape == backward["heads"].shape == (L, H)
    assert forward["residual"].shape == backward["residual"].shape == (L, T)
    # After the last block only [CLS] is read: its residual is the whole answer, the other tokens' nothing.
    assert forward["residual"][last, 0] == pytest.approx(1, abs=1e-5)
    assert backward["residual"][last, 0] == pytest.approx(0, abs=1e-5)
    assert forward["residual"][last, 1:].abs().max() < 1e-5 and (backward["residual"][last, 1:] - 1).abs().max() < 1e-5


def test_the_patching_grid_agrees_with_one_patch_at_a_time(model, three_and_eight):
    """The grid runs only the blocks each patch can change, batched by layer; one patch at a time, in a whole forward
    pass, must read the same."""
    three, eight = three_and_eight
    grid = heads.patching_grid(model, three, eight)
    clean, corrupt = grid.logit_diff["clean"], grid.logit_diff["corrupt"]

    def restored(logits):
        return float((logits[0, 3] - logits[0, 8] - corrupt) / (clean - corrupt))

    for layer, head in ((0, 1), (4, 2), (5, 2)):
        assert grid.clean_into_corrupt["heads"][layer, head] == pytest.approx(
            restored(heads.patch(model, eight, three, heads=[(layer, head)])), abs=1e-4)
        assert grid.corrupt_into_clean["heads"][layer, head] == pytest.approx(
            restored(heads.patch(model, three, eight, heads=[(layer, head)])), abs=1e-4)
    for layer, token in ((0, 0), (2, 17), (4, 30)):
        mask = torch.zeros(model.config.depth, model.config.num_tokens, dtype=torch.bool)
        mask[layer, token] = True
        assert grid.clean_into_corrupt["residual"][layer, token] == pytest.approx(
            restored(heads.patch(model, eight, three, residual=mask)), abs=1e-4)
    only_heads = heads.patching_grid(model, three, eight, residual=False)
    assert "residual" not in only_heads.clean_into_corrupt
    torch.testing.assert_close(only_heads.corrupt_into_clean["heads"], grid.corrupt_into_clean["heads"])
    with pytest.raises(ValueError, match="tells apart"):
        heads.patching_grid(model, three, three)


def test_the_lens_at_the_last_layer_equals_the_model(model, digits):
    images, labels = digits
    lens = heads.logit_lens(model, images)  # (B, L, classes)
    assert lens.shape == (len(images), model.config.depth, 10)
    assert torch.equal(lens[:, -1], plain(model, images))
    accuracy = heads.lens_accuracy(model, images, labels, batch_size=20)
    assert accuracy[-1] == float((plain(model, images).argmax(1) == labels).double().mean())
    maps = heads.lens_maps(model, images[:4])  # (B, L, g, g): the predicted class's probability per patch
    assert maps.shape == (4, model.config.depth, 7, 7) and 0 <= maps.min() and maps.max() <= 1


def test_switching_heads_off_leaves_a_plain_forward_pass_on_another_thread_alone(model, digits):
    images, _ = digits
    x = images.float() / 255
    expected = plain(model, x)
    seen = []
    with torch.no_grad(), heads.switched_off(model, every_head(model)):
        worker = threading.Thread(target=lambda: seen.append(model(x)))
        worker.start()
        worker.join()
        here = model(x)
    assert torch.equal(seen[0], expected) and not torch.allclose(here, expected)
    assert not any(block._forward_pre_hooks for block in model.blocks)


def test_importance_is_the_mean_of_each_images_own_gradient(model, digits):
    images, labels = digits
    batched = heads.head_importance(model, images[:6], labels[:6], batch_size=6)  # (L, H)
    one_by_one = sum(heads.head_importance(model, images[i : i + 1], labels[i : i + 1]) for i in range(6)) / 6
    assert batched.shape == (model.config.depth, model.config.heads) and (batched >= 0).all()
    torch.testing.assert_close(batched, one_by_one, rtol=1e-4, atol=1e-8)


@pytest.mark.slow
def test_pruning_curves_start_at_the_model_and_end_with_every_head_off(model, digits, means):
    images, labels = digits
    importance = heads.head_importance(model, images, labels)
    curves = heads.pruning_curves(model, images, labels, importance, means, seeds=2)
    baseline = heads.accuracy(model, images, labels)
    nothing_left = heads.accuracy(model, images, labels, every_head(model), means)
    for curve in curves.values():
        assert len(curve) == model.config.depth * model.config.heads + 1
        assert curve[0] == baseline and curve[-1] == pytest.approx(nothing_left)
    assert nothing_left <= 0.3


def test_head_means_are_kept_for_their_own_weights_only(model, digits, tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        shutil.copy(WEIGHTS_ROOT / "mnist" / name, folder / name)
    assert heads.read_head_means(folder) is None
    images, _ = digits
    written = heads.write_head_means(folder, model, images)
    assert written.shape == (6, 4, 50, 16)
    torch.testing.assert_close(heads.read_head_means(folder, model), written)
    torch.testing.assert_close(written, heads.head_means(model, images), atol=1e-3, rtol=1e-3)  # fp16 on disk
    config = json.loads((folder / CONFIG_FILE).read_text())
    config["weights_sha256"] = "0" * 64  # as if the weights had been trained again
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    assert heads.read_head_means(folder) is None
    assert (WEIGHTS_ROOT / "mnist" / HEAD_MEANS_FILE).stat().st_size < 100_000


def test_head_mask_names_what_it_refuses(model):
    mask = heads.head_mask(model, [(0, 1), (5, None)])
    assert mask.sum() == 1 + model.config.heads and mask[0, 1] and mask[5].all()
    with pytest.raises(ValueError, match="layers are 0 to 5"):
        heads.head_mask(model, [(6, 0)])


# ---- The command line ----------------------------------------------------------------------------------------------


def command(capsys, *args: str) -> tuple[list[dict], str]:
    """``python -m vit_demo ARGS`` in this process (quicker than a new one): its JSON lines and its stderr."""
    assert cli.main(list(args)) == 0
    out, err = capsys.readouterr()
    return [json.loads(line) for line in out.splitlines()], err


@pytest.mark.slow
def test_heads_and_lens_commands(mnist_root, tmp_path, capsys):
    data = ("--data-dir", str(mnist_root))
    lines, _ = command(capsys, "heads", "--model", "mnist", *data, "--n", "40")
    assert lines[0].keys() == {"baseline", "n"} and lines[0]["n"] == 40
    per_head = lines[1:-2]
    assert [(line["layer"], line["head"]) for line in per_head] == [(l, h) for l in range(1, 7) for h in range(1, 5)]
    assert all(line.keys() == {"layer", "head", "accuracy", "importance"} for line in per_head)
    curves = {line["order"]: line["curve"] for line in lines[-2:]}
    assert curves.keys() == {"importance", "random"}
    for curve in curves.values():
        assert len(curve) == 25 and curve[0] == lines[0]["baseline"] and curve[-1] <= 0.3

    result = run_cli("lens", "--model", "mnist", *data, "--n", "40")  # once through python -m, as users run it
    assert result.returncode == 0, result.stderr
    lens = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["layer"] for line in lens] == list(range(1, 7))
    images, labels = load_split("mnist", mnist_root, "test")
    _, correct, n = evaluate(load_model("mnist", device="cpu").model, images[:40], labels[:40])
    assert lens[-1]["accuracy"] == correct / n == lines[0]["baseline"] and lens[0]["accuracy"] < correct / n

    # Weights without head means: computed for the run, as head-means would keep them, and said so.
    folder = tmp_path / "copy"
    folder.mkdir()
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        shutil.copy(WEIGHTS_ROOT / "mnist" / name, folder / name)
    again, note = command(capsys, "heads", "--model", str(folder), *data, "--n", "40")
    assert "python -m vit_demo head-means" in note and again[0] == lines[0]
    assert [(a["layer"], a["head"]) for a in again[1:-2]] == [(b["layer"], b["head"]) for b in per_head]
    written, _ = command(capsys, "head-means", "--model", str(folder), *data)
    assert written[0]["images"] == heads.MEAN_IMAGES and written[0]["file"].endswith(HEAD_MEANS_FILE)
    kept, note = command(capsys, "heads", "--model", str(folder), *data, "--n", "40")
    assert kept == again and "head-means" not in note  # the means it wrote are the ones the run computed
    if HAS_SHARED_MNIST:
        # The shipped means were computed over MNIST's test digits: over the same digits, these match them to about
        # 1e-3, not to the last bit (a head's accuracy over 40 images may move by one image, its importance by a
        # little). Generated digits give other means.
        for a, b in zip(again[1:-2], per_head):
            assert abs(a["accuracy"] - b["accuracy"]) <= 1 / 40 + 1e-9
            assert a["importance"] == pytest.approx(b["importance"], rel=0.05, abs=1e-4)
        torch.testing.assert_close(heads.read_head_means(folder), heads.read_head_means(WEIGHTS_ROOT / "mnist"),
                                   atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize(("args", "message"), [
    (["heads", "--n", "0"], "--n: must be at least 1"),
    (["lens", "--n", "-5"], "--n: must be at least 1"),
    (["heads", "--n", "5", "--ablation", "half"], "invalid choice"),
    (["lens", "--n", "5", "--model", "no/such/folder"], "config.json not found"),
    (["heads", "--n", "5", "--data-dir", "no/such/data"], "--data-dir no/such/data: no such folder"),
])
def test_heads_and_lens_refuse_bad_arguments_clearly(mnist_root, capsys, args, message):
    if "--data-dir" not in args:
        args = [*args, "--data-dir", str(mnist_root)]
    try:
        code = cli.main(args)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err


def test_heads_command_from_a_shell_exits_2_without_a_traceback(tmp_path):
    result = run_cli("heads", "--model", "mnist", "--data-dir", str(tmp_path / "nowhere"), "--n", "5")
    assert result.returncode == 2 and "no such folder" in result.stderr and "Traceback" not in result.stderr
