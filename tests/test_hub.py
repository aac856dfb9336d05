"""The way back (python -m vit_demo hub, vit_demo/hub.py): a weights folder as a timm checkpoint and Hub model
folder. Offline: timm builds each shipped model from the folder (``local-dir:``, and ``hf-hub:`` from a Hub cache made
by hand) and gives our logits on the example images through our preprocessing; importing it back gives the same
weights; the extensions imported ViTs carry are written too, and what timm cannot build is refused in one line."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from vit_demo.classifier import load_model
from vit_demo.cli import main
from vit_demo.data.preprocess import Preprocessing
from vit_demo.hub import HubError, timm_model_args, write_hub
from vit_demo.importing import ours_state_to_timm, write_import
from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.weights import CONFIG_FILE, WEIGHTS_FILE, load_weights, save_imported

timm = pytest.importorskip("timm")
from timm.data import resolve_data_config  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# Measured: 0.0 for both shipped models (timm's LayerNorm eps is ours, 1e-5; with timm's ViT default, 1e-6, the
# logits would differ by up to 3.3e-4).
LOGITS_TOLERANCE = 1e-4
EXAMPLES = {"mnist": "examples/digits", "cifar10": "examples/photos"}


def example_batch(name: str):
    """A shipped model and its example images through our preprocessing, (10, C, H, W) in [0, 1]."""
    classifier = load_model(name, "cpu")
    files = sorted((REPO / EXAMPLES[name]).glob("*.png"))
    return classifier, classifier.batch([classifier.preprocess(str(f)) for f in files])


def timm_logits(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """timm's logits for images in [0, 1], normalised with the mean and std its pretrained_cfg gives."""
    data = resolve_data_config({}, model=model)
    mean, std = (torch.tensor(data[key]).view(1, -1, 1, 1) for key in ("mean", "std"))
    with torch.no_grad():
        return model((images - mean) / std)


@pytest.fixture(scope="module")
def hub_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    return {name: (root / name, write_hub(name, root / name)) for name in EXAMPLES}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_timm_builds_the_shipped_model_from_the_folder_and_gives_our_logits(name, hub_folders):
    out, written = hub_folders[name]
    assert sorted(written["files"]) == ["README.md", CONFIG_FILE, WEIGHTS_FILE]
    classifier, images = example_batch(name)
    model = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    c = classifier.model.config
    assert model.pretrained_cfg["input_size"] == (c.in_channels, c.image_size, c.image_size)
    assert tuple(model.pretrained_cfg["mean"]) == c.mean and tuple(model.pretrained_cfg["std"]) == c.std
    assert model.pretrained_cfg["crop_pct"] == 1.0
    assert tuple(model.pretrained_cfg["label_names"]) == classifier.info.classes
    assert model.norm.eps == c.norm_eps == 1e-5
    with torch.no_grad():
        ours = classifier.model(images)  # (10, 10)
    theirs = timm_logits(model, images)
    assert (ours - theirs).abs().max() <= LOGITS_TOLERANCE
    assert torch.equal(ours.argmax(1), theirs.argmax(1))


def test_the_tensors_are_ours_under_timms_names(hub_folders):
    out, _ = hub_folders["mnist"]
    _, model = load_weights("mnist")
    written = load_file(out / WEIGHTS_FILE)
    expected = ours_state_to_timm(model.state_dict())
    assert sorted(written) == sorted(expected) and "patch_embed.proj.weight" in written
    assert all(torch.equal(written[key], expected[key]) for key in written)


def test_timms_hf_hub_loader_reads_the_folder(hub_folders, tmp_path):
    """``hf-hub:USER/NAME`` as timm reads it after ``hf upload``: the folder placed in a Hub cache (offline)."""
    out, _ = hub_folders["mnist"]
    repo = tmp_path / "cache" / "models--someone--vit-mnist"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        shutil.copy(out / name, snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    script = ("import json, timm, torch; from vit_demo.classifier import load_model\n"
              "m = timm.create_model('hf-hub:someone/vit-mnist', pretrained=True).eval()\n"
              "x = torch.rand(4, 1, 28, 28, generator=torch.Generator().manual_seed(0))\n"
              "ours = load_model('mnist', 'cpu').model\n"
              "with torch.no_grad(): d = (ours(x) - m((x - 0.1307) / 0.3081)).abs().max().item()\n"
              "print(json.dumps({'source': m.pretrained_cfg['source'], 'difference': d}))")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["source"] == "hf-hub" and found["difference"] <= LOGITS_TOLERANCE


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_importing_the_folder_back_gives_the_original_weights(name, hub_folders, tmp_path):
    out, _ = hub_folders[name]
    write_import(f"timm:local-dir:{out}", tmp_path / "back", None, None, "test")
    classifier, images = example_batch(name)
    info, back = load_weights(tmp_path / "back")
    assert info.classes == classifier.info.classes and info.preprocessing == classifier.info.preprocessing
    original = classifier.model.state_dict()
    assert all(torch.equal(tensor, original[key]) for key, tensor in back.state_dict().items())
    with torch.no_grad():
        assert torch.equal(back(images), classifier.model(images))


def test_the_card_carries_the_measured_results(hub_folders):
    out, _ = hub_folders["mnist"]
    card = (out / "README.md").read_text(encoding="utf-8")
    front = card.split("---")[1]
    assert "library_name: timm" in front and "ylecun/mnist" in front and "license" not in front
    metrics = json.loads((REPO / "weights/mnist/metrics.json").read_text())
    assert f"{100 * metrics['test_accuracy']:.2f}%" in card and f"{metrics['epochs']} epochs" in card
    assert 'timm.create_model("hf-hub:USER/NAME", pretrained=True)' in card and f"local-dir:{out}" in card


def random_imported(folder: Path, **extensions) -> VisionTransformer:
    """A small random ViT with ``extensions``, saved as an imported weights folder."""
    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, in_channels=3, num_classes=5, dim=48, depth=2, heads=3,
                       mlp_dim=96, mean=(0.5,) * 3, std=(0.5,) * 3, **extensions)
    model = VisionTransformer(config).eval()
    with torch.no_grad():  # layer scale's gammas away from their initial value, so that the weights carry them
        for name, tensor in model.named_parameters():
            if name.endswith("gamma"):
                tensor.uniform_(0.5, 1.5)
    save_imported(folder, model, tuple("abcde"), Preprocessing("resize_crop", 36, "bicubic", "pil"),
                  {"source": "timm:test", "command": "test"})
    return model


@pytest.mark.parametrize("extensions", [
    {"norm_eps": 1e-6, "distillation_token": True},
    {"norm_eps": 1e-6, "register_tokens": 4, "layer_scale": 1e-5, "prefix_pos_embed": False},
    {"norm_eps": 1e-6, "distillation_token": True, "layer_scale": 0.1},
    {"register_tokens": 1},
], ids=["deit-distilled", "dinov2-like", "distilled-layer-scale", "ours-with-a-register"])
def test_what_imported_models_carry_is_written_for_timm(extensions, tmp_path):
    ours = random_imported(tmp_path / "w", **extensions)
    write_hub(tmp_path / "w", tmp_path / "hub")
    model = timm.create_model(f"local-dir:{tmp_path / 'hub'}", pretrained=True).eval()
    assert model.pretrained_cfg["crop_pct"] == 0.8888 and model.pretrained_cfg["interpolation"] == "bicubic"
    images = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (ours(images) - timm_logits(model, images)).abs().max() <= LOGITS_TOLERANCE
    write_import(f"timm:local-dir:{tmp_path / 'hub'}", tmp_path / "back", None, None, "test")
    info, back = load_weights(tmp_path / "back")
    assert info.config.to_dict() == ours.config.to_dict() and info.classes == tuple("abcde")
    with torch.no_grad():
        assert torch.equal(back(images), ours(images))


@pytest.mark.parametrize("extensions, says", [
    ({"norm_eps": 1e-12}, "LayerNorm eps 1e-12"),
    ({"norm_eps": 1e-5, "distillation_token": True}, "distillation token"),
    ({"norm_eps": 1e-6, "distillation_token": True, "register_tokens": 4}, "no registers"),
    ({"norm_eps": 1e-6, "distillation_token": True, "prefix_pos_embed": False}, "no_embed_class"),
])
def test_what_timm_cannot_build_is_refused_in_one_line(extensions, says, tmp_path):
    with pytest.raises(HubError, match=says) as refused:
        timm_model_args(ViTConfig(**extensions))
    assert "\n" not in str(refused.value)


def test_the_command_writes_one_json_line_and_refuses_bad_folders_with_exit_2(tmp_path, capsys):
    assert main(["hub", "mnist", str(tmp_path / "out")]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["files"][WEIGHTS_FILE] == (tmp_path / "out" / WEIGHTS_FILE).stat().st_size
    assert "python -m vit_demo hub mnist" in json.loads((tmp_path / "out" / CONFIG_FILE).read_text())["vit_demo"][
        "command"]
    (tmp_path / "file").write_text("x")
    for args, says in ((["nothing-here", str(tmp_path / "new")], "no such weights folder"),
                       (["mnist", str(tmp_path / "out")], "not empty"),
                       (["mnist", str(tmp_path / "file")], "a file, not a folder")):
        assert main(["hub", *args]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "new").exists()
    assert main(["hub", "mnist", str(tmp_path / "out"), "--force"]) == 0
