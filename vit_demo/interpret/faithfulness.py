"""How far to trust a map: deletion and insertion at patch level.

The protocol Chefer et al. (2021) use to compare explanations of ViTs (after Petsiuk et al., 2018, RISE),
here patch by patch: rank the patches by a map, then remove them most relevant first, 10% of the patches
at a time (a digit's patches become background, a photo's its mean colour), and record the model's
probability for the class it first predicted. The area under that curve, 0% removed included, is the
deletion AUC: lower means the map found what the prediction rests on. Insertion starts from the blank
image and adds the patches in the same order: higher is better. A random ranking is the floor.

Which map to trust for one image (``verdict``): a map wins only where it leads the others on both curves by
more than the noise, measured as the spread (standard deviation) of the AUC over several random rankings of
the same image: a smaller gap could come from the luck of one ranking. Where a curve can't move at all (a
blank image still reads the class as surely as the image itself: deletion has nowhere to fall, insertion
nowhere to rise), every ranking draws the same flat line and no map leads on it, whatever the noise says: its
AUCs differ by float noise, not by what the maps found. ``verdict_text`` says it in words.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from vit_demo.atomic import atomic_write_text
from vit_demo.interpret import explain
from vit_demo.interpret.calibration import probabilities
from vit_demo.weights import FAITHFULNESS_FILE

MAP_KINDS = (*explain.MAPS, "random")  # every kind of map, and the floor: random rankings
STEPS = 10  # patches removed or added 10% at a time
RANDOM_RANKINGS = 8  # random rankings per image in the app: their mean is the floor drawn, their spread the noise
FLAT = 0.05  # curves that all stay within this band of probability are flat: no ranking moved the prediction


@dataclasses.dataclass(frozen=True)
class Curves:
    """For each image: the predicted class's probability as patches are removed or added, (B, STEPS + 1)."""

    deletion: np.ndarray
    insertion: np.ndarray
    # For random rankings, the mean over several: the spread (standard deviation) of each image's deletion and
    # insertion AUC over them, (B,) each; None for a single ranking.
    deletion_noise: np.ndarray | None = None
    insertion_noise: np.ndarray | None = None

    @property
    def deletion_auc(self) -> np.ndarray:  # (B,)
        return area_under(self.deletion)

    @property
    def insertion_auc(self) -> np.ndarray:  # (B,)
        return area_under(self.insertion)


def area_under(curves: np.ndarray) -> np.ndarray:
    """Trapezoid area of curves sampled at 0, 1/STEPS, ..., 1 of the patches: (B, STEPS + 1) -> (B,)."""
    return (curves[:, 1:] + curves[:, :-1]).sum(axis=1) / (2 * (curves.shape[1] - 1))


@torch.no_grad()
def patch_maps(model: nn.Module, images: torch.Tensor) -> tuple[dict[str, np.ndarray], torch.Tensor]:
    """Every kind of map in ``explain.MAPS`` for a batch, for the class the model predicts: ({kind: (B, g, g)},
    predicted (B,))."""
    predicted = model(images).argmax(1)  # (B,)
    return {kind: explain_map(model, images, predicted) for kind, explain_map in explain.MAPS.items()}, predicted


@torch.no_grad()
def curves(model: nn.Module, images: torch.Tensor, maps: np.ndarray, classes: torch.Tensor, blank: torch.Tensor,
           steps: int = STEPS, temperature: float = 1.0) -> Curves:
    """Deletion and insertion curves of one kind of map.

    Args:
        model: the classifier, in eval mode.
        images: (B, C, H, W) in [0, 1].
        maps: (B, g, g) patch scores; higher = more relevant (ties keep row-major order).
        classes: (B,) the class whose probability is followed (the first prediction).
        blank: (B, C, 1, 1) or (B, C, H, W): what a removed patch becomes.
        temperature: the weights' calibration: the probabilities followed are softmax(logits / T).
    """
    B, C, H, W = images.shape
    g = maps.shape[-1]
    patch = H // g
    order = np.argsort(-maps.reshape(B, -1), axis=1, kind="stable")  # (B, g*g), most relevant first
    rank = torch.from_numpy(np.argsort(order, axis=1)).to(images.device)  # (B, g*g): each patch's place
    counts = torch.tensor([round(k * g * g / steps) for k in range(steps + 1)], device=images.device)  # (S,)
    chosen = rank[:, None, :] < counts[None, :, None]  # (B, S, g*g): the patches taken at each step
    mask = chosen.view(B, steps + 1, 1, g, 1, g, 1).expand(-1, -1, 1, -1, patch, -1, patch)
    mask = mask.reshape(B, steps + 1, 1, H, W)  # (B, S, 1, H, W)
    x, blank = images[:, None], blank.expand_as(images)[:, None]  # (B, 1, C, H, W)
    deleted = torch.where(mask, blank, x)  # (B, S, C, H, W)
    inserted = torch.where(mask, x, blank)
    both = torch.cat([deleted, inserted], 1).flatten(0, 1)  # (B * 2S, C, H, W)
    probs = torch.cat([probabilities(model(chunk), temperature) for chunk in both.split(512)])  # (B * 2S, classes)
    followed = probs.view(B, 2 * (steps + 1), -1).gather(2, classes.view(B, 1, 1).expand(-1, 2 * (steps + 1), 1))
    followed = followed.squeeze(2).cpu().numpy()  # (B, 2S)
    return Curves(deletion=followed[:, : steps + 1], insertion=followed[:, steps + 1 :])


def blank_for(images: torch.Tensor, dataset: str) -> torch.Tensor:
    """What a removed patch becomes: background (0) for digits, each image's mean colour for photos."""
    if dataset == "mnist":
        return torch.zeros_like(images[:, :, :1, :1])  # (B, 1, 1, 1)
    return images.mean(dim=(2, 3), keepdim=True)  # (B, C, 1, 1)


def faithfulness(model: nn.Module, images: torch.Tensor, dataset: str, seed: int = 0, temperature: float = 1.0,
                 random_rankings: int = 1) -> dict[str, Curves]:
    """Deletion and insertion curves of every kind of map for a batch of images: {kind: Curves}.

    random: the mean curves of ``random_rankings`` seeded random rankings, with the spread of their AUCs (two or
    more); ``temperature``: the weights' calibration.
    """
    maps, predicted = patch_maps(model, images)
    blank = blank_for(images, dataset)
    found = {kind: curves(model, images, kind_maps, predicted, blank, temperature=temperature)
             for kind, kind_maps in maps.items()}
    rng = np.random.default_rng(seed)
    shape = next(iter(maps.values())).shape  # (B, g, g)
    randoms = [curves(model, images, rng.random(shape), predicted, blank, temperature=temperature)
               for _ in range(random_rankings)]
    spread = random_rankings > 1
    found["random"] = Curves(
        deletion=np.mean([r.deletion for r in randoms], axis=0),
        insertion=np.mean([r.insertion for r in randoms], axis=0),
        deletion_noise=np.std([r.deletion_auc for r in randoms], axis=0, ddof=1) if spread else None,
        insertion_noise=np.std([r.insertion_auc for r in randoms], axis=0, ddof=1) if spread else None)
    return {kind: found[kind] for kind in MAP_KINDS}


def mean_aucs(model: nn.Module, images: torch.Tensor, dataset: str, temperature: float = 1.0,
              batch_size: int = 100) -> dict[str, dict[str, float]]:
    """Each kind of map's deletion and insertion AUC, averaged over ``images`` (uint8 (N, C, H, W)), batch by batch
    (each batch's random ranking seeded by its index): {kind: {"deletion_auc", "insertion_auc"}}, 4 decimals."""
    device = next(model.parameters()).device
    sums = {kind: np.zeros(2) for kind in MAP_KINDS}
    for index, start in enumerate(range(0, len(images), batch_size)):
        x = images[start : start + batch_size].to(device).float().div_(255)  # (B, C, H, W)
        for kind, result in faithfulness(model, x, dataset, seed=index, temperature=temperature).items():
            sums[kind] += [float(result.deletion_auc.sum()), float(result.insertion_auc.sum())]
    return {kind: {"deletion_auc": round(deletion / len(images), 4), "insertion_auc": round(insertion / len(images), 4)}
            for kind, (deletion, insertion) in sums.items()}


def most_faithful(aucs: dict[str, dict[str, float]]) -> str:
    """The kind of map (random aside) whose insertion AUC stands highest above its deletion AUC: the one that best
    finds what the prediction rests on, by both curves at once. The page shows it first."""
    maps = [kind for kind in aucs if kind != "random"]
    return max(maps, key=lambda kind: aucs[kind]["insertion_auc"] - aucs[kind]["deletion_auc"])


def write_record(folder: str | Path, aucs: dict[str, dict[str, float]], split: str, images: int) -> dict:
    """Keep ``mean_aucs`` over ``images`` of ``split`` in the weights folder (the page shows the most faithful kind
    first: ``first_map``); the record written."""
    record = {"split": split, "images": images, "maps": aucs,
              "note": "mean deletion AUC (lower is better) and insertion AUC (higher is better) of each kind of map, "
                      "for the class first predicted (calibrated)"}
    atomic_write_text(Path(folder) / FAITHFULNESS_FILE, json.dumps(record, indent=2) + "\n")
    return record


def read_record(folder: str | Path) -> dict | None:
    """The faithfulness record kept in a weights folder (``write_record``), or None where there is none."""
    path = Path(folder) / FAITHFULNESS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def first_map(folder: str | Path) -> str | None:
    """The kind of map the page shows first for the weights in ``folder``: the most faithful by their record; None
    where none was kept (an imported model's: the page then shows rollout, ahead of raw attention on both curves for
    both shipped models, and claims nothing of it)."""
    record = read_record(folder)
    return most_faithful(record["maps"]) if record else None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Which map to trust for one image: the map that leads on each curve by more than the noise (None: a tie, or
    a flat curve)."""

    deletion_leader: str | None
    insertion_leader: str | None
    deletion_auc: dict[str, float]  # per map, random included
    insertion_auc: dict[str, float]
    deletion_noise: float
    insertion_noise: float
    # The lowest and highest probability on every curve of a kind (random included): within FLAT, the curve is flat.
    deletion_band: tuple[float, float] = (0.0, 1.0)
    insertion_band: tuple[float, float] = (0.0, 1.0)
    whole: float = 1.0  # the predicted class's probability for the image itself
    blank: float = 0.0  # ... and for the blank image (every patch removed)

    @property
    def winner(self) -> str | None:
        """The map that leads on both curves, or None."""
        return self.deletion_leader if self.deletion_leader == self.insertion_leader else None

    @property
    def deletion_flat(self) -> bool:
        return self.deletion_band[1] - self.deletion_band[0] < FLAT

    @property
    def insertion_flat(self) -> bool:
        return self.insertion_band[1] - self.insertion_band[0] < FLAT


def leader(scores: dict[str, float], noise: float, lower_is_better: bool) -> str | None:
    """The map whose score beats every other's by more than ``noise``, or None where the best two are that close."""
    ranked = sorted(scores, key=scores.get, reverse=not lower_is_better)
    best, second = ranked[0], ranked[1]
    return best if abs(scores[best] - scores[second]) > noise else None


def band(curves_of: dict[str, Curves], field: str, image_index: int = 0) -> tuple[float, float]:
    """The lowest and highest point of every kind's ``field`` curve ("deletion" or "insertion") for one image."""
    points = np.concatenate([getattr(c, field)[image_index] for c in curves_of.values()])
    return float(points.min()), float(points.max())


def verdict(curves_of: dict[str, Curves], image_index: int = 0) -> Verdict:
    """Which map leads on each curve for one image, against the noise of its random rankings (the random curves
    must carry their spread: ``faithfulness(..., random_rankings >= 2)``); none on a curve that is flat."""
    random = curves_of["random"]
    if random.deletion_noise is None or random.insertion_noise is None:
        raise ValueError("a verdict needs the spread of several random rankings (random_rankings >= 2)")
    deletion = {kind: float(c.deletion_auc[image_index]) for kind, c in curves_of.items()}
    insertion = {kind: float(c.insertion_auc[image_index]) for kind, c in curves_of.items()}
    noise = float(random.deletion_noise[image_index]), float(random.insertion_noise[image_index])
    bands = band(curves_of, "deletion", image_index), band(curves_of, "insertion", image_index)
    flat = [high - low < FLAT for low, high in bands]
    maps = [kind for kind in curves_of if kind != "random"]
    return Verdict(None if flat[0] else leader({k: deletion[k] for k in maps}, noise[0], lower_is_better=True),
                   None if flat[1] else leader({k: insertion[k] for k in maps}, noise[1], lower_is_better=False),
                   deletion, insertion, *noise, *bands, whole=float(random.deletion[image_index, 0]),
                   blank=float(random.deletion[image_index, -1]))


# The verdict in words (markdown), which the page fills in too (assets/page/faithfulness.js, given them by
# vit_demo/page/description.py, following the rules of ``verdict_parts``): {fields} are numbers shown with two
# decimals, percentages with one, map names, or other entries of this table, filled in first.
VERDICT_TEXTS = {
    "spread": "the spread of the area under the curve over {rankings} random rankings of this image",
    "noise": "the noise (±{deletion} on deletion, ±{insertion} on insertion: {spread})",
    "scores": "deletion {deletion}, insertion {insertion}",
    "flat_why": "with every patch removed, the blank image still reads **{label}** at {blank}% ({whole}% for the "
                "whole image)",
    "winner": "For this image, **{winner}** is the map to trust: it leads on both curves by more than {noise} "
              "({scores}; lower deletion and higher insertion are better).",
    "split": "No map wins for this image: **{deletion_leader}** leads on deletion ({deletion_auc}, lower is better) "
             "and **{insertion_leader}** on insertion ({insertion_auc}, higher is better), each by more than "
             "{noise}.",
    "one": "No map wins for this image: **{lead}** leads on {curve} by more than the noise (±{curve_noise}, "
           "{spread}; {scores}), but on {other} the maps tie, within ±{other_noise}.",
    "one_flat": "No map wins for this image: **{lead}** leads on {curve} by more than the noise (±{curve_noise}, "
                "{spread}; {scores}), but on {other} no map can lead: {flat_why}, and every {other} curve stays "
                "between {low}% and {high}%.",
    "tie": "The maps tie for this image: on both curves they differ by less than {noise}.",
    "tie_flat": "The maps tie for this image: on {curve} they differ by less than the noise (±{curve_noise}, "
                "{spread}), and on {other} no map can lead: {flat_why}, and every {other} curve stays between "
                "{low}% and {high}%.",
    "flat": "The maps can't be told apart on this image: {flat_why}, so deletion has nowhere to fall and insertion "
            "nowhere to rise. Every ranking of the patches, random ones too, keeps the prediction between {low}% "
            "and {high}%: the areas under their curves differ by noise, not by anything the maps found.",
}


def verdict_parts(v: Verdict, label: str) -> tuple[str, dict[str, str]]:
    """Which of ``VERDICT_TEXTS`` says the verdict on an image the model reads as ``label``, and its fields: a
    winner only where one map leads on both curves by more than the noise; no leader on a flat curve (FLAT)."""
    def two(x: float) -> str:
        return f"{x:.2f}"

    def pc(x: float) -> str:
        return f"{100 * x:.1f}"

    spread = VERDICT_TEXTS["spread"].format(rankings=RANDOM_RANKINGS)
    noise = VERDICT_TEXTS["noise"].format(deletion=two(v.deletion_noise), insertion=two(v.insertion_noise),
                                          spread=spread)
    flat_why = VERDICT_TEXTS["flat_why"].format(label=label, blank=pc(v.blank), whole=pc(v.whole))
    curves = {"deletion": (v.deletion_leader, v.deletion_noise, v.deletion_flat, v.deletion_band),
              "insertion": (v.insertion_leader, v.insertion_noise, v.insertion_flat, v.insertion_band)}

    def scores(kind: str) -> str:
        return VERDICT_TEXTS["scores"].format(deletion=two(v.deletion_auc[kind]), insertion=two(v.insertion_auc[kind]))

    if v.deletion_flat and v.insertion_flat:
        low, high = min(v.deletion_band[0], v.insertion_band[0]), max(v.deletion_band[1], v.insertion_band[1])
        return "flat", {"flat_why": flat_why, "low": pc(low), "high": pc(high)}
    if v.winner:
        return "winner", {"winner": v.winner, "noise": noise, "scores": scores(v.winner)}
    if v.deletion_leader and v.insertion_leader:
        return "split", {"deletion_leader": v.deletion_leader, "insertion_leader": v.insertion_leader,
                         "deletion_auc": two(v.deletion_auc[v.deletion_leader]),
                         "insertion_auc": two(v.insertion_auc[v.insertion_leader]), "noise": noise}
    # At most one curve has a leader, or is judged at all: ``curve`` is that one (deletion first), ``other`` the rest.
    curve = next((c for c in curves if curves[c][0]), next((c for c in curves if not curves[c][2]), "deletion"))
    other = "insertion" if curve == "deletion" else "deletion"
    lead, curve_noise = curves[curve][:2]
    other_noise, other_flat, (low, high) = curves[other][1:]
    fields = {"curve": curve, "other": other, "curve_noise": two(curve_noise), "spread": spread}
    flat_fields = {"flat_why": flat_why, "low": pc(low), "high": pc(high)}
    if lead:
        fields = {**fields, "lead": lead, "scores": scores(lead)}
        if other_flat:
            return "one_flat", {**fields, **flat_fields}
        return "one", {**fields, "other_noise": two(other_noise)}
    if other_flat:
        return "tie_flat", {**fields, **flat_fields}
    return "tie", {"noise": noise}


def verdict_text(v: Verdict, label: str) -> str:
    """The verdict in words (markdown), for an image the model reads as ``label``."""
    key, fields = verdict_parts(v, label)
    return VERDICT_TEXTS[key].format(**fields)
