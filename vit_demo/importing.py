"""Bring your own ViT: a pretrained Vision Transformer from timm or Hugging Face as a weights folder of ours
(``python -m vit_demo import SOURCE --out DIR``), which ``load_model`` and every command take as they take ours.

SOURCE is ``timm:NAME`` (the weights timm downloads for NAME, or with ``checkpoint`` a local state dict of it, read
without a network; NAME may be timm's ``local-dir:FOLDER`` or ``hf-hub:USER/NAME``, as the folder ``python -m vit_demo
hub`` writes, vit_demo/hub.py, whose classes and preprocessing come back with it), ``hf:REPO_ID`` (a Hub repository, downloaded by huggingface_hub) or ``hf:FOLDER`` (what
``save_pretrained`` wrote). The model keeps its source's classes in the head's order (timm: ImageNet's names for an
ImageNet head; Hugging Face: ``id2label``) and its preprocessing, exactly (timm: its data config, the shorter side
resized to floor(size / crop_pct) by PIL, the centre cropped; Hugging Face: ``preprocessor_config.json``, resized to
size x size as ``ViTImageProcessor`` does). Anything that is not a plain ViT as vit_demo/model.py builds it (Swin,
hybrids, pooled or convolutional models) is refused in one line.

Only the standard ViT family maps onto our model: ViT, DeiT (with its distillation token), DINO, DINOv2 (registers,
layer scale, position embeddings on the patches only). A timm model is checked after conversion: ours and timm's give
the same output on a random image, or the import is refused.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import pickle
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file as load_safetensors_file

from vit_demo.atomic import check_out_folder
from vit_demo.data.preprocess import Preprocessing
from vit_demo.model import ViTConfig, VisionTransformer
from vit_demo.progress import Steps
from vit_demo.weights import CONFIG_FILE, WEIGHTS_FILE, save_imported, shown_path

SOURCES = ("timm", "hf")
CHECKPOINT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin")
HF_WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")  # what a Hugging Face folder keeps its tensors in
HF_FILES = ("config.json", "preprocessor_config.json", *HF_WEIGHTS_FILES)
HF_ARCHITECTURES = ("ViTForImageClassification", "ViTModel")
PIL_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}  # Hugging Face's ``resample`` (PIL's numbering)
HUB_BLOCK = "vit_demo"  # what a folder python -m vit_demo hub wrote keeps of ours in its config.json (hub.py)
CHECK_TOLERANCE = 1e-3  # ours and timm's outputs on a random image must agree this closely (measured: ~1e-6)


class NotImportable(ValueError):
    """A source that cannot become one of our models; the message says why in one line."""


@dataclasses.dataclass(frozen=True)
class Imported:
    """A model brought in from elsewhere, with what its weights folder records."""

    model: VisionTransformer  # in eval mode, on the CPU
    classes: tuple[str, ...]  # in the head's order; none for a model without a head
    preprocessing: Preprocessing
    record: dict  # where it came from (config.json's ``import``)


def import_vit(source: str, checkpoint: str | Path | None = None, image_size: int | None = None,
               progress: Steps | None = None) -> Imported:
    """The ViT ``source`` names (see the module's docstring), with ``checkpoint`` (timm only) read instead of the
    download, and at ``image_size`` where given: its position embeddings resampled (``at_image_size``), its
    preprocessing made for that size as its source would make it. Each step is said to ``progress``, if given.

    Raises:
        NotImportable: a source that is unknown, unreachable, or no plain ViT.
    """
    kind, _, name = source.partition(":")
    if kind not in SOURCES or not name:
        raise NotImportable(f"{source!r}: the source is timm:NAME, hf:REPO_ID or hf:FOLDER")
    if checkpoint is not None and kind != "timm":
        raise NotImportable("--checkpoint is for timm:NAME; a Hugging Face folder holds its own weights (hf:FOLDER)")
    progress = progress or Steps()
    if kind == "timm":
        model, classes, data, record = _from_timm(name, None if checkpoint is None else Path(checkpoint), progress)
    else:
        model, classes, data, record = _from_hf(name, progress)
    if image_size is not None and image_size != model.config.image_size:
        progress.expect(1)
        progress.step(f"resampling its position embeddings to {image_size} x {image_size} pixels")
        model = model.at_image_size(image_size)
    return Imported(model, classes, data.preprocessing(model.config.image_size), {"source": source, **record})


@dataclasses.dataclass(frozen=True)
class SourcePreprocessing:
    """A source's preprocessing for any image size: resize by ``library`` with ``interpolation``, to the shorter side
    ``floor(size / crop_pct)`` (timm) or to ``size`` x ``size`` (``square``: Hugging Face), then crop the centre."""

    library: str
    interpolation: str
    crop_pct: float = 1.0
    square: bool = False

    def preprocessing(self, size: int) -> Preprocessing:
        resize = math.floor(size / self.crop_pct)
        return Preprocessing("resize_crop", (resize, resize) if self.square else resize, self.interpolation,
                             self.library)


def write_import(source: str, out: str | Path, checkpoint: str | Path | None, image_size: int | None,
                 command: str, force: bool = False, progress: Steps | None = None) -> dict:
    """Import ``source`` (``import_vit``) into the weights folder ``out``, recording ``command``; return what was
    written. ``out`` must be new or empty, unless ``force``. Each step is said to ``progress``, if given.

    Raises:
        NotImportable: as ``import_vit``, or ``out`` holds files.
    """
    out = Path(out)
    check_out_folder(out, force, NotImportable, "the weights folder")
    progress = progress or Steps()
    progress.expect(1)  # (saving, after import_vit's own)
    imported = import_vit(source, checkpoint, image_size, progress)
    progress.step(f"saving its weights in {shown_path(out / WEIGHTS_FILE)}")
    save_imported(out, imported.model, imported.classes, imported.preprocessing, {**imported.record, "command": command})
    c = imported.model.config
    written = {"source": source, "out": str(shown_path(out)), "image_size": c.image_size, "patch_size": c.patch_size,
               "dim": c.dim, "depth": c.depth, "heads": c.heads, "prefix_tokens": c.prefix_tokens,
               "classes": len(imported.classes), "preprocessing": imported.preprocessing.to_dict(),
               "bytes": (out / WEIGHTS_FILE).stat().st_size, "config": str(shown_path(out / CONFIG_FILE))}
    if "max_difference" in imported.record:  # (timm's models are checked against ours)
        written["max_difference"] = imported.record["max_difference"]
    return written


def distinct(names: Sequence[str]) -> tuple[str, ...]:
    """Class names, each once (a prediction's ``probs`` is keyed by them): a name the head gives several outputs is
    followed by each one's index, as ImageNet's two cranes, the bird and the machine: "crane (134)", "crane (517)"."""
    counts = Counter(names)
    return tuple(f"{name} ({index})" if counts[name] > 1 else name for index, name in enumerate(names))


# ---- timm ----------------------------------------------------------------------------------------

# Our tensor names -> timm's VisionTransformer's (docs/byo-vit.md), the one table both directions read (this import,
# and the way back: vit_demo/hub.py): only the patch embedding differs, timm's being a module (``proj``) inside
# ``PatchEmbed``. Every other name is the same, and no tensor is reshaped (qkv's layout, (3, heads, head_dim) along
# its output, is the same).
TIMM_RENAMES = {"patch_embed.weight": "patch_embed.proj.weight", "patch_embed.bias": "patch_embed.proj.bias"}


def ours_state_to_timm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our model's tensors under timm's names (``TIMM_RENAMES``)."""
    return {TIMM_RENAMES.get(name, name): tensor for name, tensor in state.items()}


def timm_state_to_ours(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """timm's ViT's tensors under our names (``TIMM_RENAMES``, read backwards)."""
    ours = {timm_name: name for name, timm_name in TIMM_RENAMES.items()}
    return {ours.get(name, name): tensor for name, tensor in state.items()}


def _require(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise NotImportable(f"importing from {module} needs it installed: pip install {module}") from None


def read_checkpoint(path: Path) -> dict[str, torch.Tensor]:
    """A local state dict (.safetensors, or a PyTorch file holding tensors only), unwrapped from a training
    checkpoint's ``model`` or ``state_dict`` entry."""
    if not path.is_file():
        raise NotImportable(f"--checkpoint {path}: no such file")
    if path.suffix not in CHECKPOINT_SUFFIXES:
        raise NotImportable(f"--checkpoint {path}: a state dict is {', '.join(CHECKPOINT_SUFFIXES)}")
    try:
        if path.suffix == ".safetensors":
            state = load_safetensors_file(path)
        else:  # tensors only: unpickling anything else could run code
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (SafetensorError, pickle.UnpicklingError, EOFError, RuntimeError, OSError, ValueError) as exc:
        raise NotImportable(f"--checkpoint {path} cannot be read as tensors ({str(exc).splitlines()[0]})") from None
    for key in ("model", "state_dict"):
        state = state.get(key, state) if isinstance(state, dict) else state
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise NotImportable(f"--checkpoint {path} is not a state dict (names -> tensors)")
    return state


def _timm_model(timm, name: str, checkpoint: Path | None) -> torch.nn.Module:
    """timm's ``name`` with its weights: downloaded, or from ``checkpoint`` at the checkpoint's own image size,
    through timm's own checkpoint filter (as its ``pretrained=True`` loads a file)."""
    from timm.models.vision_transformer import checkpoint_filter_fn

    try:
        probe = timm.create_model(name, pretrained=False)
    except RuntimeError as exc:  # timm: "Unknown model (...)"
        raise NotImportable(f"timm:{name}: {exc}") from None
    _check_timm_architecture(name, probe)
    if checkpoint is None:
        try:
            return timm.create_model(name, pretrained=True).eval()
        except (OSError, RuntimeError, ValueError) as exc:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise NotImportable(f"timm:{name}: its weights could not be downloaded ({reason}); offline, give them "
                                f"with --checkpoint FILE") from None
    state = read_checkpoint(checkpoint)
    head, positions = state.get("head.weight"), state.get("pos_embed")
    found = {"num_classes": 0 if head is None else head.shape[0], "img_size": probe.patch_embed.img_size[0]}
    if positions is not None:  # the model at the checkpoint's grid, so that nothing is resampled on the way
        grid = math.isqrt(positions.shape[1] - (0 if probe.no_embed_class else probe.num_prefix_tokens))
        found["img_size"] = grid * probe.patch_embed.patch_size[0]
    built = {"num_classes": probe.num_classes, "img_size": probe.patch_embed.img_size[0]}
    model = probe if found == built else timm.create_model(name, pretrained=False, **found)
    try:
        model.load_state_dict(checkpoint_filter_fn(state, model))
    except RuntimeError as exc:
        raise NotImportable(f"--checkpoint {checkpoint} does not fit timm:{name} "
                            f"({' '.join(str(exc).split())[:300]})") from None
    return model.eval()


def _check_timm_architecture(name: str, model: torch.nn.Module) -> None:
    """Refuse, in one line, a timm model that is not a plain ViT reading [CLS]."""
    from timm.layers import PatchEmbed
    from timm.models.deit import VisionTransformerDistilled
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    if type(model) not in (TimmViT, VisionTransformerDistilled):
        raise NotImportable(f"timm:{name} is a {type(model).__name__}, not a plain ViT: only timm's "
                            f"VisionTransformer (ViT, DeiT, DINO, DINOv2) can be imported")
    if type(model.patch_embed) is not PatchEmbed:
        raise NotImportable(f"timm:{name} embeds patches with a {type(model.patch_embed).__name__} (a hybrid ViT): "
                            f"only a linear patch embedding can be imported")
    if model.global_pool != "token" or model.cls_token is None:
        raise NotImportable(f"timm:{name} reads its answer by {model.global_pool or 'no'} pooling: only ViTs that "
                            f"read [CLS] can be imported")
    square = model.patch_embed.img_size[0] == model.patch_embed.img_size[1]
    if not square or model.patch_embed.patch_size[0] != model.patch_embed.patch_size[1]:
        raise NotImportable(f"timm:{name} takes {model.patch_embed.img_size} images in {model.patch_embed.patch_size}"
                            f" patches: only square ones can be imported")


def _from_timm(name: str, checkpoint: Path | None, progress: Steps
               ) -> tuple[VisionTransformer, tuple[str, ...], SourcePreprocessing | KeptPreprocessing, dict]:
    """timm's ``name`` as our model, its classes, its preprocessing and the import's record; its three steps said to
    ``progress``."""
    progress.expect(3)
    progress.step(f"loading timm:{name} from {checkpoint}" if checkpoint is not None else
                  f"loading timm:{name} (its weights are downloaded the first time)")
    timm = _require("timm")
    from timm.data import ImageNetInfo, infer_imagenet_subset, resolve_data_config
    from timm.models.deit import VisionTransformerDistilled

    source = _timm_model(timm, name, checkpoint)
    data = resolve_data_config({}, model=source)
    if data.get("crop_mode", "center") not in ("center", "squash") or data["crop_pct"] > 1:
        raise NotImportable(f"timm:{name}'s preprocessing ({data.get('crop_mode')} crop, crop_pct "
                            f"{data['crop_pct']}) pads its images: only centre and squash crops can be imported")
    if data["interpolation"] not in ("nearest", "bilinear", "bicubic"):
        raise NotImportable(f"timm:{name} resizes with {data['interpolation']!r} interpolation: only nearest, "
                            f"bilinear and bicubic can be imported")
    kept = _kept_preprocessing(source)
    channels = source.patch_embed.proj.in_channels
    if channels != 3 and kept is None:
        raise NotImportable(f"timm:{name} reads {channels}-channel images: only RGB ones can be imported (or a folder "
                            f"that python -m vit_demo hub wrote, which says how to preprocess them)")
    first = source.blocks[0]
    config = ViTConfig(
        image_size=source.patch_embed.img_size[0], patch_size=source.patch_embed.patch_size[0], in_channels=channels,
        num_classes=source.num_classes, dim=source.embed_dim, depth=len(source.blocks), heads=first.attn.num_heads,
        mlp_dim=first.mlp.fc1.out_features, mean=tuple(data["mean"]), std=tuple(data["std"]),
        norm_eps=source.norm.eps if isinstance(source.norm, torch.nn.LayerNorm) else first.norm1.eps,
        distillation_token=isinstance(source, VisionTransformerDistilled), register_tokens=source.num_reg_tokens,
        layer_scale=getattr(first.ls1, "init_values", None), prefix_pos_embed=not source.no_embed_class)
    progress.step("converting it to this project's ViT")
    model = _load(f"timm:{name}", config, timm_state_to_ours(source.state_dict()))
    progress.step("checking that it computes what timm's model computes")
    difference = _compare(source, model)
    if not difference <= CHECK_TOLERANCE:
        raise NotImportable(f"timm:{name} computes something our ViT does not (on a random image its output and ours "
                            f"differ by {difference:.3g}): it cannot be imported")
    subset = infer_imagenet_subset(source) if config.num_classes else None
    labels = source.pretrained_cfg.get("label_names")  # a Hub folder's own (timm's save_for_hf writes them)
    if subset:
        names = ImageNetInfo(subset)
        classes = distinct([names.index_to_description(i) for i in range(config.num_classes)])
        classes_from = subset
    elif isinstance(labels, (list, tuple)) and len(labels) == config.num_classes:
        classes, classes_from = distinct([str(label) for label in labels]), "label_names"
    else:  # a head timm names no classes for (a checkpoint fine-tuned elsewhere): its outputs, numbered
        classes = tuple(str(i) for i in range(config.num_classes))
        classes_from = "none: no head" if not config.num_classes else "none: numbered"
    square = data.get("crop_mode") == "squash"
    recipe = kept or SourcePreprocessing("pil", data["interpolation"], data["crop_pct"], square)
    record = {"timm": timm.__version__, "architecture": source.pretrained_cfg.get("architecture", name),
              "classes_from": classes_from,
              "max_difference": float(f"{difference:.3g}")}
    if checkpoint is not None:
        record["checkpoint"] = str(checkpoint)
    return model, classes, recipe, record


@dataclasses.dataclass(frozen=True)
class KeptPreprocessing:
    """The preprocessing a folder that ``python -m vit_demo hub`` wrote records (its config.json's ``vit_demo``
    block): our own (a drawing, a photo), kept as it was at any image size."""

    kept: Preprocessing

    def preprocessing(self, size: int) -> Preprocessing:
        return self.kept


def _kept_preprocessing(source: torch.nn.Module) -> KeptPreprocessing | None:
    """What a timm model loaded from a folder or the Hub (``local-dir:``, ``hf-hub:``) that vit_demo wrote records
    of our preprocessing (vit_demo/hub.py); None for any other."""
    found = source.pretrained_cfg
    if found.get("source") == "local-dir":
        path = Path(found["file"]) / CONFIG_FILE
    elif found.get("source") == "hf-hub":
        from timm.models._hub import download_from_hf  # cached when the model was built

        path = Path(download_from_hf(found["hf_hub_id"], CONFIG_FILE))
    else:
        return None
    ours = _read_json(path).get(HUB_BLOCK)
    if not isinstance(ours, dict) or "preprocessing" not in ours:
        return None
    try:
        return KeptPreprocessing(Preprocessing.from_dict(ours["preprocessing"]))
    except (TypeError, ValueError) as exc:
        raise NotImportable(f"{path}: its {HUB_BLOCK}.preprocessing is not one of ours ({exc})") from None


@torch.no_grad()
def _compare(source: torch.nn.Module, model: VisionTransformer) -> float:
    """The largest difference between timm's output and ours on one random image (ours normalises it itself)."""
    c = model.config
    image = torch.rand(1, c.in_channels, c.image_size, c.image_size, generator=torch.Generator().manual_seed(0))
    theirs = source((image - model.mean) / model.std)  # (1, K) or (1, D)
    return float((model(image) - theirs).abs().max())


def _load(source: str, config: ViTConfig, state: dict[str, torch.Tensor]) -> VisionTransformer:
    """Our model of ``config`` with ``state`` (our names), every tensor placed, in eval mode."""
    model = VisionTransformer(config)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # a tensor of another shape than the config says
        raise NotImportable(f"{source} does not fit its own config ({' '.join(str(exc).split())[:300]})") from None
    if missing or unexpected:
        said = "; ".join(f"{kind} {', '.join(names[:4])}{' ...' if len(names) > 4 else ''}"
                         for kind, names in (("lacks", missing), ("has", unexpected)) if names)
        raise NotImportable(f"{source} does not map onto a plain ViT: it {said}")
    return model.eval()


# ---- Hugging Face --------------------------------------------------------------------------------

# Hugging Face's ViT names (each checkpoint's, as transformers 4 wrote them and 5 still writes them; then those of
# transformers 5's modules), after the "vit." of a ViTForImageClassification, -> ours. Queries, keys and values are
# gathered under a name with the part at its end, then concatenated into qkv.
LAYER = r"(?:encoder\.layer|layers)\.(\d+)\."
HF_NAMES = [
    (r"embeddings\.cls_token", r"cls_token"),
    (r"embeddings\.position_embeddings", r"pos_embed"),
    (r"embeddings\.patch_embeddings\.projection\.(weight|bias)", r"patch_embed.\1"),
    (LAYER + r"layernorm_before\.(weight|bias)", r"blocks.\1.norm1.\2"),
    (LAYER + r"layernorm_after\.(weight|bias)", r"blocks.\1.norm2.\2"),
    (LAYER + r"attention\.attention\.(query|key|value)\.(weight|bias)", r"blocks.\1.attn.qkv.\3.\2"),
    (LAYER + r"attention\.(q|k|v)_proj\.(weight|bias)", r"blocks.\1.attn.qkv.\3.\2"),
    (LAYER + r"(?:attention\.output\.dense|attention\.o_proj)\.(weight|bias)", r"blocks.\1.attn.proj.\2"),
    (LAYER + r"(?:intermediate\.dense|mlp\.fc1)\.(weight|bias)", r"blocks.\1.mlp.fc1.\2"),
    (LAYER + r"(?:output\.dense|mlp\.fc2)\.(weight|bias)", r"blocks.\1.mlp.fc2.\2"),
    (r"layernorm\.(weight|bias)", r"norm.\1"),
    (r"classifier\.(weight|bias)", r"head.\1"),
]
HF_UNUSED = re.compile(r"(pooler\.dense|embeddings\.mask_token)\b.*")  # ViTModel's pooler, masked-image modelling's
QKV_PARTS = {"query": 0, "key": 1, "value": 2, "q": 0, "k": 1, "v": 2}


def hf_state_to_ours(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Hugging Face ViT's tensors under our names (``HF_NAMES``); its queries, keys and values concatenated into
    qkv (3 * D, D), in our (and timm's) order. Names it cannot place are kept, for ``_load`` to refuse."""
    ours, parts = {}, {}
    for name, tensor in state.items():
        bare = name.removeprefix("vit.")
        if HF_UNUSED.fullmatch(bare):
            continue
        for pattern, target in HF_NAMES:
            if re.fullmatch(pattern, bare):
                bare = re.sub(pattern, target, bare)
                break
        head, _, part = bare.rpartition(".")
        if head.endswith("attn.qkv.weight") or head.endswith("attn.qkv.bias"):
            parts.setdefault(head, {})[QKV_PARTS[part]] = tensor
        else:
            ours[bare] = tensor
    for name, found in parts.items():
        if sorted(found) != [0, 1, 2]:
            raise NotImportable(f"the Hugging Face checkpoint lacks part of {name}'s queries, keys and values")
        ours[name] = torch.cat([found[0], found[1], found[2]])  # (3 * D, ...)
    return ours


def _hf_folder(spec: str) -> Path:
    """A folder ``save_pretrained`` wrote, or the Hub repository ``spec`` downloaded by huggingface_hub."""
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return folder
    if folder.exists() or spec.count("/") != 1 or spec.startswith((".", "/", "~")):
        raise NotImportable(f"hf:{spec}: no such folder, and not a Hub repository id (owner/name)")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(spec, allow_patterns=list(HF_FILES)))
    except (OSError, ValueError, RuntimeError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise NotImportable(f"hf:{spec} could not be downloaded ({reason}); offline, give the folder that "
                            f"save_pretrained wrote: hf:FOLDER") from None


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotImportable(f"{path} cannot be read ({exc})") from None


def _from_hf(spec: str, progress: Steps) -> tuple[VisionTransformer, tuple[str, ...], SourcePreprocessing, dict]:
    """The Hugging Face ViT ``spec`` names as our model, its classes, its preprocessing and the import's record; its
    two steps said to ``progress``."""
    progress.expect(2)
    progress.step(f"reading hf:{spec}" + ("" if Path(spec).expanduser().is_dir() else
                                           " (its files are downloaded the first time)"))
    folder = _hf_folder(spec)
    if not (folder / "config.json").is_file():
        raise NotImportable(f"hf:{spec}: {folder} has no config.json (save_pretrained writes one)")
    hf = _read_json(folder / "config.json")
    architectures = hf.get("architectures") or ["ViTModel"]
    if hf.get("model_type") != "vit" or architectures[0] not in HF_ARCHITECTURES:
        raise NotImportable(f"hf:{spec} is a {hf.get('model_type')} model ({', '.join(architectures)}), not a plain "
                            f"ViT: only {' and '.join(HF_ARCHITECTURES)} (model_type vit) can be imported")
    if hf.get("hidden_act", "gelu") != "gelu" or hf.get("num_channels", 3) != 3:
        raise NotImportable(f"hf:{spec} uses the {hf.get('hidden_act')} activation on {hf.get('num_channels')} "
                            f"channels: only exact GELU on RGB images can be imported")
    weights = next((folder / name for name in HF_WEIGHTS_FILES if (folder / name).is_file()), None)
    if weights is None:
        raise NotImportable(f"hf:{spec}: {folder} holds none of {', '.join(HF_WEIGHTS_FILES)}")
    state = read_checkpoint(weights)
    labels = hf.get("id2label") if architectures[0] == "ViTForImageClassification" else None
    classes = distinct([str(labels[key]) for key in sorted(labels, key=int)]) if labels else ()
    image_size, patch_size = hf.get("image_size", 224), hf.get("patch_size", 16)
    if not (isinstance(image_size, int) and isinstance(patch_size, int)):
        raise NotImportable(f"hf:{spec} takes {image_size} images in {patch_size} patches: only square ones")
    recipe, mean, std, note = _hf_preprocessing(folder, image_size)
    config = ViTConfig(
        image_size=image_size, patch_size=patch_size, in_channels=3, num_classes=len(classes),
        dim=hf.get("hidden_size", 768), depth=hf.get("num_hidden_layers", 12), heads=hf.get("num_attention_heads", 12),
        mlp_dim=hf.get("intermediate_size", 3072), mean=mean, std=std, norm_eps=hf.get("layer_norm_eps", 1e-12))
    progress.step("converting it to this project's ViT")
    model = _load(f"hf:{spec}", config, hf_state_to_ours(state))
    transformers_version = hf.get("transformers_version")
    record = {"architecture": architectures[0], "saved_by_transformers": transformers_version,
              "preprocessing_from": note}
    return model, classes, recipe, record


def _hf_preprocessing(folder: Path, image_size: int) -> tuple[SourcePreprocessing, tuple, tuple, str]:
    """What ``ViTImageProcessor`` does with the folder's ``preprocessor_config.json`` (transformers 5 resizes a uint8
    tensor with torchvision; ``ViTImageProcessorPil``, and transformers 4's processor, with PIL): the recipe, the
    mean and std, and where they came from. Without that file, the processor's defaults at the model's size."""
    path = folder / "preprocessor_config.json"
    found = _read_json(path) if path.is_file() else {}
    kind = found.get("image_processor_type", "ViTImageProcessor")
    size = found.get("size", {"height": image_size, "width": image_size})
    sides = (size, size) if isinstance(size, int) else (size.get("height"), size.get("width"))
    resample = PIL_RESAMPLE.get(found.get("resample", 2))
    library = "pil" if kind.endswith("Pil") else "torchvision"
    rescale = found.get("rescale_factor", 1 / 255) if found.get("do_rescale", True) else 1.0
    if (not found.get("do_resize", True) or found.get("do_center_crop") or sides != (image_size, image_size)
            or abs(rescale - 1 / 255) > 1e-9 or resample not in ("bilinear", "bicubic")):
        raise NotImportable(f"{path}: only resizing to the model's {image_size} x {image_size} pixels, bilinear or "
                            f"bicubic, then rescaling by 1/255 can be imported (it says {json.dumps(found)[:200]})")
    if found.get("do_normalize", True):
        mean, std = tuple(found.get("image_mean", (0.5,) * 3)), tuple(found.get("image_std", (0.5,) * 3))
    else:
        mean, std = (0.0,) * 3, (1.0,) * 3
    note = f"{path.name} ({kind})" if found else f"{kind}'s defaults at the model's size: no {path.name}"
    return SourcePreprocessing(library, resample, square=True), mean, std, note
