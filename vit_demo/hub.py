"""``python -m vit_demo hub DIR OUT``: the way back. A weights folder of ours as a timm checkpoint and a Hugging Face
Hub model folder: ``config.json`` and ``model.safetensors`` as timm reads them, and a model card (``README.md``).

    hf upload USER/NAME OUT                                        # then, anywhere:
    timm.create_model("hf-hub:USER/NAME", pretrained=True)         # or, offline: "local-dir:OUT"

``config.json`` follows what timm's ``save_config_for_hf`` (timm/models/_hub.py) writes and its
``load_model_config_from_path`` / ``_parse_model_cfg`` read: ``architecture`` (a registered model whose defaults
``model_args`` overrides: every size, the channels, the classes), ``num_classes``, ``num_features``, ``global_pool``,
``label_names`` (our classes, in the head's order), ``model_args`` and ``pretrained_cfg`` (the input size, our mean and
std, ``crop_pct`` 1.0, the interpolation). The tensors are ours under timm's names (``ours_state_to_timm``, the one
table in vit_demo/importing.py), none reshaped. Beside timm's keys, a ``vit_demo`` block records where the weights
came from and our preprocessing (a drawing, a photo), which ``python -m vit_demo import timm:local-dir:OUT`` takes back.

LayerNorm's epsilon cannot be written in ``model_args`` (a ``norm_layer`` name such as "layernorm" builds timm's
LayerNorm with its default 1e-6), so the architecture is chosen for it: ours is PyTorch's 1e-5, and the smallest
entry timm builds with LayerNorm(eps=1e-5) is TinyCLIP's ``vit_xsmall_patch16_clip_224``, its one other difference
(a norm before the first block, ``pre_norm``) turned off in ``model_args``. With a plain ViT entry (eps 1e-6) the
shipped models' logits would differ from ours by up to 3.3e-4 (measured on examples/digits and examples/photos).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from safetensors.torch import save as save_safetensors

from vit_demo.atomic import atomic_write, atomic_write_text, check_out_folder
from vit_demo.deploy.space import from_template
from vit_demo.importing import HUB_BLOCK, ours_state_to_timm
from vit_demo.model import ViTConfig
from vit_demo.weights import (CONFIG_FILE, WEIGHTS_FILE, WeightsInfo, load_weights, read_calibration, read_metrics,
                              resolve_weights_folder, shown_path, weights_sha256)

README = "README.md"
# timm's registered entry for each (distillation token, LayerNorm eps): its defaults are all overridden by
# model_args but the norm's eps (and, for DeiT's, the class with a distillation token and head).
TIMM_ENTRIES = {
    (False, 1e-5): "vit_xsmall_patch16_clip_224",  # TinyCLIP's: LayerNorm(eps=1e-5), pre_norm (turned off)
    (False, 1e-6): "vit_tiny_patch16_224",  # the plain ViT: timm's LayerNorm, eps 1e-6 (imported ViTs, DeiTs)
    (True, 1e-6): "deit_tiny_distilled_patch16_224",  # DeiT's VisionTransformerDistilled, eps 1e-6
}
HUB_DATASETS = {"mnist": "ylecun/mnist", "cifar10": "uoft-cs/cifar10"}  # our datasets' ids on the Hub
# How timm's transforms resize to our input (pretrained_cfg's interpolation) for each of our preprocessings: the
# drawing's steps are vit_demo's own (timm's would only resize), the photo is resized bilinear with antialiasing.
INTERPOLATION = {"drawing": "bilinear", "photo": "bilinear"}


class HubError(ValueError):
    """A weights folder or an OUT folder the Hub folder cannot be written from or into; the message says why."""


def timm_model_args(config: ViTConfig) -> tuple[str, dict]:
    """timm's architecture and ``model_args`` that build our model of ``config`` (eval-time: no dropout).

    Raises:
        HubError: what no timm entry builds (another LayerNorm eps; DeiT's distillation token with registers).
    """
    architecture = TIMM_ENTRIES.get((config.distillation_token, config.norm_eps))
    if architecture is None:
        raise HubError(f"a ViT with {'a distillation token and ' if config.distillation_token else ''}LayerNorm eps "
                       f"{config.norm_eps:g} has no timm entry that builds it: only eps 1e-5 (ours), or 1e-6 (timm's), "
                       f"and 1e-6 with a distillation token, can be written for timm")
    if config.distillation_token and (config.register_tokens or not config.prefix_pos_embed):
        raise HubError("timm's DeiT (VisionTransformerDistilled) has no registers and gives its two tokens position "
                       "embeddings: a distillation token with registers or no_embed_class cannot be written for timm")
    mlp_ratio = config.mlp_dim / config.dim
    if int(config.dim * mlp_ratio) != config.mlp_dim:  # timm's Mlp: hidden = int(dim * mlp_ratio)
        raise HubError(f"timm cannot build an MLP of {config.mlp_dim} from width {config.dim} (mlp_ratio {mlp_ratio})")
    args = {"img_size": config.image_size, "patch_size": config.patch_size, "in_chans": config.in_channels,
            "num_classes": config.num_classes, "embed_dim": config.dim, "depth": config.depth,
            "num_heads": config.heads, "mlp_ratio": mlp_ratio, "qkv_bias": True, "class_token": True,
            "global_pool": "token", "pre_norm": False}
    if config.register_tokens:
        args["reg_tokens"] = config.register_tokens
    if not config.prefix_pos_embed:
        args["no_embed_class"] = True
    if config.layer_scale is not None:  # its gammas are in the weights; the value only switches layer scale on
        args["init_values"] = config.layer_scale
    return architecture, args


def crop_pct(info: WeightsInfo) -> float:
    """timm's ``crop_pct`` for the preprocessing: timm resizes the shorter side to floor(size / crop_pct), then crops
    the centre (ours: 1.0, the image resized to the input size; an imported model's: its own, the fewest decimals
    that give back its resize, rounded down so that floor does)."""
    size, resize = info.config.image_size, info.preprocessing.resize
    if resize is None:
        return 1.0
    shorter = resize if isinstance(resize, int) else min(resize)
    for digits in (4, 6, 8):
        pct = math.floor(size / shorter * 10**digits) / 10**digits
        if math.floor(size / pct) == shorter:
            return pct
    return size / shorter


def hub_config(info: WeightsInfo, record: dict) -> dict:
    """config.json as timm's ``save_config_for_hf`` writes it, with ``record`` (where the weights came from) and our
    preprocessing in its ``vit_demo`` block."""
    config, preprocessing = info.config, info.preprocessing
    architecture, args = timm_model_args(config)
    if preprocessing.method == "resize_crop":
        interpolation, crop_mode = preprocessing.interpolation, "center" if isinstance(preprocessing.resize, int) \
            else "squash"
    else:
        interpolation, crop_mode = INTERPOLATION[preprocessing.method], "center"
    pretrained_cfg = {
        "custom_load": False, "input_size": [config.in_channels, config.image_size, config.image_size],
        "fixed_input_size": True, "interpolation": interpolation, "crop_pct": crop_pct(info), "crop_mode": crop_mode,
        "mean": list(config.mean), "std": list(config.std), "num_classes": config.num_classes,
        "first_conv": "patch_embed.proj",
        "classifier": ["head", "head_dist"] if config.distillation_token else "head"}
    found = {"architecture": architecture, "num_classes": config.num_classes, "num_features": config.dim,
             "global_pool": "token"}
    if info.classes:
        found["label_names"] = list(info.classes)
    return {**found, "model_args": args, "pretrained_cfg": pretrained_cfg,
            HUB_BLOCK: {**record, "preprocessing": preprocessing.to_dict(), "temperature": info.temperature}}


def write_hub(folder: str | Path, out: str | Path, force: bool = False, repo: str = "USER/NAME",
              project: str | None = None, command: str | None = None) -> dict:
    """Write the weights folder ``folder`` (or a shipped model's name) into ``out`` as a timm checkpoint and Hub model
    folder; return what was written. ``repo`` (the Hub repository it is uploaded to) and ``project`` (a link to this
    project) are named in the model card.

    Raises:
        WeightsError: ``folder`` is missing or its weights are corrupt.
        HubError: ``out`` is a file, or not empty without ``force``; a model timm cannot build; an untrained head.
    """
    source, out = resolve_weights_folder(folder), Path(out)
    if not source.is_dir():
        raise HubError(f"{folder}: no such weights folder (mnist, cifar10, or a path to one)")
    check_out_folder(out, force, HubError, f"{CONFIG_FILE}, {WEIGHTS_FILE} and {README}")
    info, model = load_weights(source)
    if info.pretrained:
        raise HubError(f"{shown_path(source)} holds an encoder from self-supervised pretraining: its head is "
                       f"untrained. Fine-tune it first (python train.py --init-from {shown_path(source)})")
    record = {"weights": str(shown_path(source)), "weights_sha256": weights_sha256(source),
              **({"command": command} if command else {})}
    config = hub_config(info, record)  # (refuses what timm cannot build before anything is written)
    out.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().cpu().contiguous()
             for name, tensor in ours_state_to_timm(model.state_dict()).items()}  # timm's names, the same shapes
    blob = save_safetensors(state, metadata={"format": "pt"})  # timm's save_for_hf writes safetensors' plain format
    atomic_write(out / WEIGHTS_FILE, lambda f: f.write(blob))
    atomic_write_text(out / CONFIG_FILE, json.dumps(config, indent=2) + "\n")
    atomic_write_text(out / README, model_card(info, config, repo, project, out))
    return {"weights": str(shown_path(source)), "out": str(shown_path(out)), "architecture": config["architecture"],
            "classes": len(info.classes),
            "files": {name: (out / name).stat().st_size for name in (CONFIG_FILE, WEIGHTS_FILE, README)}}


def measured(info: WeightsInfo) -> dict:
    """What the weights folder recorded of its training and calibration (metrics.json, calibration.json), for the
    card: test accuracy, epochs (those of the run it continues among them), the device, the calibration."""
    metrics, calibration = read_metrics(info.folder) or {}, read_calibration(info.folder) or {}
    continued = metrics.get("continues") or {}
    found = {"test_accuracy": metrics.get("test_accuracy"), "test_images": metrics.get("test_images"),
             "epochs": metrics.get("epochs"), "continued_epochs": continued.get("epochs"),
             "device": metrics.get("device_name") or metrics.get("device"), "parameters": metrics.get("parameters"),
             "init_from": metrics.get("init_from")}
    if calibration:
        found["calibration"] = {"temperature": calibration.get("temperature"),
                                "fitted_on": calibration.get("fitted_on"),
                                "measured_on": calibration.get("measured_on"),
                                "ece_before": calibration.get("before", {}).get("ece"),
                                "ece_after": calibration.get("after", {}).get("ece")}
    return found


def model_card(info: WeightsInfo, config: dict, repo: str, project: str | None, out: Path) -> str:
    """README.md: the Hub's model-card front matter (library_name timm, tags, datasets; no license: this project's
    repository has no LICENSE file), then the measured results, what the model is, how to load it with timm, the
    preprocessing and a link back to the project."""
    dataset = info.dataset.name if info.dataset is not None else None
    return from_template(
        "model_README.md", info=info, c=info.config, config=config, repo=repo, project=project,
        out=shown_path(out), dataset=dataset, hub_dataset=HUB_DATASETS.get(dataset), measured=measured(info),
        args=json.dumps(config["model_args"]), imported=info.imported)
