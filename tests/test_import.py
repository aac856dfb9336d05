"""Bring your own ViT (python -m vit_demo import, vit_demo/importing.py): timm's and Hugging Face's ViTs, with random
weights saved where a user's would be, give in our model the logits and attention their own library gives, from the
same preprocessed pixels, on real photos; the imported folder holds the page's graphs; what is no plain ViT is
refused in one line."""

import argparse
import json
import re

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image

from vit_demo.cli import main
from vit_demo.classifier import load_model
from vit_demo.data.preprocess import NothingDrawn
from vit_demo.importing import NotImportable, distinct, import_vit, write_import
from vit_demo.interpret import explain
from vit_demo.onnx.export import read_metadata, shared_graphs, stale_graphs
from vit_demo.weights import CONFIG_FILE, GRAPH_FILE, GRAPH_WEIGHTS_FILE, WEIGHTS_FILE, WeightsError, load_weights

timm = pytest.importorskip("timm")
from timm.data import ImageNetInfo, create_transform, resolve_data_config  # noqa: E402
from timm.models.vision_transformer import checkpoint_filter_fn  # noqa: E402

LOGITS_TOLERANCE = 1e-4
ATTENTION_TOLERANCE = 1e-5
PHOTOS = {name: getattr(skimage.data, name)() for name in ("astronaut", "chelsea", "coffee")}  # 512x512, 451x300, 600x400
# Each timm variant: what it adds to the plain ViT, how timm builds it here (DINOv2 at 224 rather than its 518, to stay
# quick), the file its weights are saved as, and the photos it reads (two for ViT-S).
TIMM_VARIANTS = {
    "vit_tiny_patch16_224": ({}, "model.safetensors", ("astronaut", "chelsea", "coffee")),
    "deit_tiny_patch16_224": ({}, "model.pth", ("astronaut", "chelsea", "coffee")),
    "deit_tiny_distilled_patch16_224": ({}, "pytorch_model.bin", ("astronaut", "chelsea", "coffee")),
    "vit_small_patch16_224.dino": ({}, "model.safetensors", ("chelsea", "coffee")),
    "vit_small_patch14_reg4_dinov2": ({"img_size": 224}, "model.safetensors", ("chelsea", "coffee")),
}


def save_state(state: dict, path):
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, path)
    else:
        torch.save(state, path)


def timm_outputs(source: torch.nn.Module, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """timm's output for normalised ``images`` and every layer's attention, (B, L, H, T, T), computed from each
    block's qkv as timm's explicit path does (its fused path returns no weights)."""
    found = []

    def record(attn, inputs, _):
        x = inputs[0]  # (B, T, D)
        B, T, _ = x.shape
        q, k, _ = attn.qkv(x).reshape(B, T, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        found.append(((q * attn.scale) @ k.transpose(-2, -1)).softmax(dim=-1))  # (B, H, T, T)

    hooks = [block.attn.register_forward_hook(record) for block in source.blocks]
    try:
        with torch.no_grad():
            logits = source(images)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, torch.stack(found, dim=1)


def timm_pixels(source: torch.nn.Module, photos: list[np.ndarray], size: int) -> torch.Tensor:
    """timm's own eval transform of ``photos``, for a model of input ``size``: (B, 3, size, size), normalised."""
    asked = {} if source.pretrained_cfg["input_size"][-1] == size else {"input_size": (3, size, size)}
    transform = create_transform(**resolve_data_config(asked, model=source))
    return torch.stack([transform(Image.fromarray(photo)) for photo in photos])


@pytest.fixture(scope="module")
def timm_import(tmp_path_factory):
    """name -> (timm's model, its state dict, the folder of ours, our model): each imported once, from its file."""
    made = {}

    def make(name: str):
        if name not in made:
            kwargs, file, _ = TIMM_VARIANTS[name]
            torch.manual_seed(0)
            source = timm.create_model(name, pretrained=False, **kwargs).eval()
            root = tmp_path_factory.mktemp(name.replace(".", "-"))
            save_state(source.state_dict(), root / file)
            write_import(f"timm:{name}", root / "ours", root / file, None, "python -m vit_demo import ...")
            made[name] = (source, source.state_dict(), root / "ours", load_weights(root / "ours")[1])
        return made[name]

    return make


def compare(model, source, photos, preprocessing, size) -> dict[str, float]:
    """Our model against timm's on ``photos``: the preprocessed pixels (exactly), the logits (or features) and every
    layer's attention; the largest differences."""
    ours = torch.stack([torch.from_numpy(preprocessing.apply(p, size)).permute(2, 0, 1) for p in photos])  # (B, 3, S, S)
    theirs = timm_pixels(source, photos, size)
    assert torch.equal((ours - model.mean) / model.std, theirs), "our preprocessing is not timm's, pixel for pixel"
    expected_logits, expected_attention = timm_outputs(source, theirs)
    with torch.no_grad():
        found = model.forward_activations(ours, attention=True)
    assert expected_logits.std() > 1e-3  # the random weights give outputs worth comparing
    return {"logits": float((found.logits - expected_logits).abs().max()),
            "attention": float((found.attention - expected_attention).abs().max())}


@pytest.mark.parametrize("name", TIMM_VARIANTS)
def test_timm_vits_give_timms_logits_and_attention(name, timm_import):
    source, _, folder, model = timm_import(name)
    info, _ = load_weights(folder)
    photos = [PHOTOS[p] for p in TIMM_VARIANTS[name][2]]
    differences = compare(model, source, photos, info.preprocessing, info.config.image_size)
    print(name, differences)  # (pytest -s shows them)
    assert differences["logits"] <= LOGITS_TOLERANCE and differences["attention"] <= ATTENTION_TOLERANCE
    c = info.config
    assert c.prefix_tokens == 1 + c.distillation_token + c.register_tokens == source.num_prefix_tokens
    if source.num_classes:
        imagenet = ImageNetInfo()
        names = [imagenet.index_to_description(i) for i in range(1000)]  # two are "crane"
        assert info.classes == distinct(names) and info.classes[134] == "crane (134)" and len(set(info.classes)) == 1000
    else:
        assert info.classes == () and model(torch.rand(1, 3, c.image_size, c.image_size)).shape == (1, c.dim)


def test_what_each_timm_variant_adds(timm_import):
    configs = {name: load_weights(timm_import(name)[2])[0].config for name in TIMM_VARIANTS}
    assert {name: c.norm_eps for name, c in configs.items()} == dict.fromkeys(TIMM_VARIANTS, 1e-6)
    assert configs["deit_tiny_distilled_patch16_224"].distillation_token
    dinov2 = configs["vit_small_patch14_reg4_dinov2"]
    assert (dinov2.register_tokens, dinov2.layer_scale, dinov2.prefix_pos_embed, dinov2.num_classes) == (4, 1e-5, False, 0)
    assert configs["vit_small_patch16_224.dino"].num_classes == 0
    assert configs["vit_tiny_patch16_224"].mean == (0.5, 0.5, 0.5)  # augreg's, not ImageNet's


def test_probabilities_keep_the_heads_order_and_are_timms_softmax(timm_import):
    source, _, folder, _ = timm_import("deit_tiny_distilled_patch16_224")
    classifier = load_model(folder, device="cpu")
    photo = PHOTOS["astronaut"]
    prediction = classifier.predict(photo)
    expected = timm_outputs(source, timm_pixels(source, [photo], 224))[0].softmax(-1)[0]  # (1000,)
    assert list(prediction.probs) == list(classifier.classes)  # the head's order
    assert np.abs(np.array(list(prediction.probs.values())) - expected.numpy()).max() <= LOGITS_TOLERANCE
    assert prediction.label == classifier.classes[int(expected.argmax())]


def test_maps_start_from_cls_and_cover_the_patches_only(timm_import):
    # DeiT's distillation token and DINOv2's registers are prefix tokens: every map is over the patch grid.
    for name, grid in (("deit_tiny_distilled_patch16_224", 14), ("vit_small_patch14_reg4_dinov2", 16)):
        _, _, folder, model = timm_import(name)
        info, _ = load_weights(folder)
        image = torch.from_numpy(info.preprocessing.apply(PHOTOS["chelsea"], 224)).permute(2, 0, 1)[None]
        with torch.no_grad():
            attention = model.forward_activations(image, attention=True).attention[0].numpy()  # (L, H, T, T)
        assert attention.shape[-1] == model.config.prefix_tokens + grid**2
        rollout = explain.attention_rollout(attention, model.config.prefix_tokens)
        assert rollout.shape == (grid, grid) and rollout.sum() == pytest.approx(1)
        assert explain.token_attention_maps(attention, 0, model.config.prefix_tokens).shape[-2:] == (grid, grid)
        if model.config.num_classes:  # (relevance explains a class)
            for kind, maps in explain.MAPS.items():
                assert maps(model, image, torch.tensor([-1])).shape == (1, grid, grid), kind


def test_dinov2_at_another_image_size_resamples_as_timm(timm_import, tmp_path):
    # Imported at 224 (16 x 16 patches of 14 pixels) and run at 168 (12 x 12): the position embeddings resampled as
    # timm's resample_abs_pos_embed does (bicubic, antialiased), where timm loads the same weights into its 168 model.
    name = "vit_small_patch14_reg4_dinov2"
    _, state, _, _ = timm_import(name)
    save_state(state, tmp_path / "model.safetensors")
    imported = import_vit(f"timm:{name}", tmp_path / "model.safetensors", image_size=168)
    source = timm.create_model(name, pretrained=False, img_size=168).eval()
    source.load_state_dict(checkpoint_filter_fn(state, source))
    assert torch.equal(imported.model.pos_embed, source.pos_embed)
    assert imported.preprocessing.resize == 168  # timm's crop_pct 1 at 168 pixels
    differences = compare(imported.model, source, [PHOTOS["coffee"]], imported.preprocessing, 168)
    print(name, "at 168", differences)
    assert differences["logits"] <= LOGITS_TOLERANCE and differences["attention"] <= ATTENTION_TOLERANCE


def test_the_command_writes_a_weights_folder_that_predict_and_export_take(timm_import, tmp_path, capfd):
    _, state, _, _ = timm_import("deit_tiny_patch16_224")
    save_state(state, tmp_path / "deit.pth")
    photo = tmp_path / "coffee.png"
    Image.fromarray(PHOTOS["coffee"]).save(photo)
    out = tmp_path / "deit"
    assert main(["import", "timm:deit_tiny_patch16_224", "--checkpoint", str(tmp_path / "deit.pth"), "--no-graphs",
                 "--out", str(out)]) == 0
    said = capfd.readouterr()  # (what the process writes to its file descriptors too: no library's chatter)
    record = json.loads(said.out)  # one JSON line, nothing else; each step on stderr as it begins, then the time
    steps = [re.sub(r", \d+ s\]", "]", line) for line in said.err.splitlines()]
    assert steps[:-1] == [f"import [1/4] loading timm:deit_tiny_patch16_224 from {tmp_path / 'deit.pth'}",
                          "import [2/4] converting it to this project's ViT",
                          "import [3/4] checking that it computes what timm's model computes",
                          f"import [4/4] saving its weights in {out / WEIGHTS_FILE}"]
    assert re.fullmatch(r"import: done, 4 steps in \d+\.\d s", steps[-1])
    assert record["classes"] == 1000 and record["max_difference"] <= LOGITS_TOLERANCE
    assert record["graphs"] == {} and record["graphs_left_out"].startswith("--no-graphs")  # (minutes: docs/import.md)
    assert not list(out.glob("*.onnx"))
    config = json.loads((out / CONFIG_FILE).read_text())
    assert set(config) == {"import", "classes", "preprocessing", "vit", "weights_sha256"}
    assert config["import"]["command"].startswith("python -m vit_demo import timm:deit_tiny_patch16_224 --checkpoint")
    assert "--no-graphs --out" in config["import"]["command"]
    assert config["preprocessing"] == {"method": "resize_crop", "resize": 248, "interpolation": "bicubic",
                                       "library": "pil"}
    assert config["vit"]["norm_eps"] == 1e-6 and "register_tokens" not in config["vit"]  # defaults left out
    assert main(["predict", "--model", str(out), str(photo)]) == 0
    assert json.loads(capfd.readouterr().out)["label"] in config["classes"]
    assert main(["export", "--model", str(out), str(photo), "--view", "rollout", "--out", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").stat().st_size > 0
    # What needs one of our datasets, and writing over a folder, are refused in one line.
    assert main(["evaluate", "--model", str(out), "--data-dir", str(tmp_path)]) == 2
    assert "imported from timm:deit_tiny_patch16_224, not one trained here" in capfd.readouterr().err
    assert main(["import", "timm:deit_tiny_patch16_224", "--checkpoint", str(tmp_path / "deit.pth"),
                 "--out", str(out)]) == 2
    assert "not empty" in capfd.readouterr().err


@pytest.mark.slow  # four graphs exported: 17 to 33 s
def test_the_command_writes_the_pages_graphs(tmp_path, capsys):
    # A small Hugging Face ViT (32 pixels in patches of 8, two layers): the imported folder holds the page's graphs,
    # in sync with its weights, here rounded to float16 (--graph-weights float16); one without a head, the model's graph alone
    # ([CLS]'s attention rows, rollout, a patch's rows, features, queries and keys: no logits), in sync too.
    transformers = pytest.importorskip("transformers")
    labels = {0: "teapot", 1: "cat", 2: "rocket"}
    sizes = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
             "image_size": 32, "patch_size": 8, "attn_implementation": "eager"}
    torch.manual_seed(0)
    transformers.ViTForImageClassification(transformers.ViTConfig(
        id2label=labels, label2id={v: k for k, v in labels.items()}, **sizes)).save_pretrained(tmp_path / "hf")
    transformers.ViTModel(transformers.ViTConfig(**sizes)).save_pretrained(tmp_path / "hf-features")
    out = tmp_path / "ours"
    assert main(["import", f"hf:{tmp_path / 'hf'}", "--graph-weights", "float16", "--out", str(out)]) == 0
    said = capsys.readouterr()
    record = json.loads(said.out)
    begun = [line.split("] ", 1)[1] for line in said.err.splitlines() if line.startswith("import [")]
    assert begun[:3] == [f"reading hf:{tmp_path / 'hf'}", "converting it to this project's ViT",
                         f"saving its weights in {out / WEIGHTS_FILE}"]
    assert [step for step in begun if step.startswith("exporting ")] == [  # each graph on stderr as it begins
        f"exporting {name}" for name in shared_graphs(load_weights(out)[0].config)]
    info, _ = load_weights(out)
    assert set(record["graphs"]) == {*shared_graphs(info.config), GRAPH_WEIGHTS_FILE}
    assert all(record["graphs"][name] == (out / name).stat().st_size for name in record["graphs"])
    assert stale_graphs(out) == [] and info.graph_weights == "float16"
    assert "--graph-weights float16 --out" in info.imported["command"]
    assert record["graphs"][GRAPH_WEIGHTS_FILE] < 0.6 * (out / WEIGHTS_FILE).stat().st_size
    assert main(["import", f"hf:{tmp_path / 'hf-features'}", "--out", str(tmp_path / "features")]) == 0
    record = json.loads(capsys.readouterr().out)
    assert set(record["graphs"]) == {GRAPH_FILE, GRAPH_WEIGHTS_FILE} and stale_graphs(tmp_path / "features") == []
    assert read_metadata(tmp_path / "features" / GRAPH_FILE)["outputs"] == "cls_attention,rollout,query_attention,features,qkv"


def test_a_model_without_a_head_gives_features_not_predictions(timm_import):
    folder = timm_import("vit_small_patch16_224.dino")[2]
    with pytest.raises(WeightsError, match="without a classification head"):
        load_model(folder)


@pytest.mark.parametrize("name", ["swin_tiny_patch4_window7_224", "vit_tiny_r_s16_p8_224", "vit_base_patch16_gap_224",
                                  "no_such_model"])
def test_what_is_no_plain_vit_is_refused_in_one_line(name, tmp_path, capsys):
    assert main(["import", f"timm:{name}", "--checkpoint", str(tmp_path / "x.pth"), "--out", str(tmp_path / "o")]) == 2
    said = capsys.readouterr()
    *begun, refusal = said.err.splitlines()  # the steps begun (import [1/4, 0 s] loading timm:...), then why not
    assert said.out == "" and "Traceback" not in said.err and all(line.startswith("import [") for line in begun)
    assert refusal.startswith(f"error: timm:{name}")
    assert not (tmp_path / "o").exists()


def test_bad_sources_and_checkpoints_are_refused(tmp_path):
    for source in ("vit_tiny", "torchvision:vit_b_16", "timm:"):
        with pytest.raises(NotImportable, match="the source is timm:NAME"):
            import_vit(source)
    with pytest.raises(NotImportable, match="no such file"):
        import_vit("timm:vit_tiny_patch16_224", tmp_path / "missing.pth")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(NotImportable, match="a state dict is"):
        import_vit("timm:vit_tiny_patch16_224", tmp_path / "notes.txt")
    torch.save({"model": {"head.weight": torch.zeros(3)}, "args": argparse.Namespace(lr=1)}, tmp_path / "code.pth")
    with pytest.raises(NotImportable, match="cannot be read as tensors"):  # unpickling it could run code
        import_vit("timm:vit_tiny_patch16_224", tmp_path / "code.pth")
    torch.save({"head.weight": torch.zeros(3, 192)}, tmp_path / "other.pth")
    with pytest.raises(NotImportable, match="does not fit timm:vit_tiny_patch16_224"):
        import_vit("timm:vit_tiny_patch16_224", tmp_path / "other.pth")


def test_imported_preprocessing_refuses_a_flat_photo(timm_import):
    info, _ = load_weights(timm_import("vit_tiny_patch16_224")[2])
    with pytest.raises(NothingDrawn):
        info.preprocessing.apply(np.full((64, 64, 3), 200, np.uint8), 224)


# ---- Hugging Face ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_vit(tmp_path_factory):
    """A small ViTForImageClassification (ViT-Ti's width, 4 layers, 5 named classes) with random weights, saved by
    save_pretrained with its ViTImageProcessor: (the model, its folder)."""
    transformers = pytest.importorskip("transformers")
    labels = {0: "teapot", 1: "cat", 2: "rocket", 3: "coffee", 4: "astronaut"}
    config = transformers.ViTConfig(hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
                                    intermediate_size=768, id2label=labels, label2id={v: k for k, v in labels.items()},
                                    attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.ViTForImageClassification(config).eval()
    folder = tmp_path_factory.mktemp("hf-vit")
    model.save_pretrained(folder)
    transformers.ViTImageProcessor().save_pretrained(folder)
    return model, folder


def hf_outputs(model, folder, photos):
    """Hugging Face's preprocessing (the folder's ViTImageProcessor) of ``photos``, logits and attention."""
    from transformers import AutoImageProcessor

    pixels = AutoImageProcessor.from_pretrained(folder)(images=[Image.fromarray(p) for p in photos],
                                                        return_tensors="pt")["pixel_values"]  # (B, 3, 224, 224)
    with torch.no_grad():
        out = model(pixel_values=pixels, output_attentions=True)
    return pixels, out.logits, torch.stack(out.attentions, dim=1)  # (B, 3, S, S), (B, K), (B, L, H, T, T)


def hf_compare(hf_model, hf_folder, ours_folder) -> dict[str, float]:
    info, model = load_weights(ours_folder)
    photos = list(PHOTOS.values())
    pixels, logits, attention = hf_outputs(hf_model, hf_folder, photos)
    ours = torch.stack([torch.from_numpy(info.preprocessing.apply(p, 224)).permute(2, 0, 1) for p in photos])
    # The same pixels: the processor rescales and normalises in one step, (x - 255 mean) / (255 std), which differs
    # from ours, (x / 255 - mean) / std, in the last bit of a float32 at most.
    recovered = torch.round((pixels * model.std + model.mean) * 255)
    assert torch.equal(recovered, torch.round(ours * 255))
    normalised = float(((ours - model.mean) / model.std - pixels).abs().max())
    with torch.no_grad():
        found = model.forward_activations(ours, attention=True)
    return {"input": normalised, "logits": float((found.logits - logits).abs().max()),
            "attention": float((found.attention - attention).abs().max())}


def test_hugging_face_vit_gives_its_logits_and_attention(hf_vit, tmp_path):
    model, folder = hf_vit
    imported = write_import(f"hf:{folder}", tmp_path / "ours", None, None, "python -m vit_demo import ...")
    differences = hf_compare(model, folder, tmp_path / "ours")
    print("hf ViTForImageClassification", differences)
    assert differences["input"] <= 2e-7
    assert differences["logits"] <= LOGITS_TOLERANCE and differences["attention"] <= ATTENTION_TOLERANCE
    info, _ = load_weights(tmp_path / "ours")
    assert info.classes == ("teapot", "cat", "rocket", "coffee", "astronaut") and imported["classes"] == 5
    assert info.config.norm_eps == 1e-12
    assert info.preprocessing.to_dict() == {"method": "resize_crop", "resize": (224, 224), "interpolation": "bilinear",
                                            "library": "torchvision"}
    classifier = load_model(tmp_path / "ours")
    probs = classifier.predict(PHOTOS["coffee"]).probs
    expected = hf_outputs(model, folder, [PHOTOS["coffee"]])[1].softmax(-1)[0]
    assert list(probs) == list(info.classes)
    assert np.abs(np.array(list(probs.values())) - expected.numpy()).max() <= LOGITS_TOLERANCE


def test_hugging_face_checkpoints_under_transformers_5_names(hf_vit, tmp_path):
    # save_pretrained writes the 4.x names (vit.encoder.layer.N.attention.attention.query, intermediate.dense, ...)
    # that Hub checkpoints keep; a state dict saved from transformers 5's modules has its own names
    # (vit.layers.N.attention.q_proj, mlp.fc1, ...). Both import alike.
    from safetensors import safe_open
    from safetensors.torch import save_file

    model, folder = hf_vit
    with safe_open(folder / "model.safetensors", "pt") as saved:
        assert "vit.encoder.layer.0.attention.attention.query.weight" in saved.keys()
    renamed = tmp_path / "v5"
    renamed.mkdir()
    for file in ("config.json", "preprocessor_config.json"):
        (renamed / file).write_bytes((folder / file).read_bytes())
    state = model.state_dict()
    assert "vit.layers.0.attention.q_proj.weight" in state and "vit.layers.0.mlp.fc1.weight" in state
    save_file({k: v.contiguous() for k, v in state.items()}, renamed / "model.safetensors")
    write_import(f"hf:{folder}", tmp_path / "from-4", None, None, "python -m vit_demo import ...")
    write_import(f"hf:{renamed}", tmp_path / "from-5", None, None, "python -m vit_demo import ...")
    four, five = (load_weights(tmp_path / name)[1].state_dict() for name in ("from-4", "from-5"))
    assert four.keys() == five.keys() and all(torch.equal(four[k], five[k]) for k in four)


def test_hugging_face_vit_without_a_head_gives_cls_features(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                    image_size=32, patch_size=8, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.ViTModel(config).eval()  # with its pooler, which the import leaves out
    model.save_pretrained(tmp_path / "hf")
    imported = import_vit(f"hf:{tmp_path / 'hf'}")
    assert imported.classes == () and "no preprocessor_config.json" in imported.record["preprocessing_from"]
    pixels = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        expected = model(pixel_values=(pixels - 0.5) / 0.5).last_hidden_state[:, 0]  # (2, 64)
        assert (imported.model(pixels) - expected).abs().max() <= LOGITS_TOLERANCE


def test_hugging_face_models_that_are_no_plain_vit_are_refused(tmp_path, capsys):
    (tmp_path / "swin").mkdir()
    (tmp_path / "swin" / "config.json").write_text(json.dumps({"model_type": "swin",
                                                               "architectures": ["SwinForImageClassification"]}))
    assert main(["import", f"hf:{tmp_path / 'swin'}", "--out", str(tmp_path / "o")]) == 2
    *begun, refusal = capsys.readouterr().err.splitlines()  # the step begun (import [1/3, 0 s] reading hf:...)
    assert [re.sub(r", \d+ s\]", "]", line) for line in begun] == [f"import [1/3] reading hf:{tmp_path / 'swin'}"]
    assert refusal.startswith("error: ") and "is a swin model (SwinForImageClassification), not a plain ViT" in refusal
    with pytest.raises(NotImportable, match="no such folder"):
        import_vit(f"hf:{tmp_path / 'missing'}")
    with pytest.raises(NotImportable, match="--checkpoint is for timm"):
        import_vit(f"hf:{tmp_path / 'swin'}", tmp_path / "x.pth")
