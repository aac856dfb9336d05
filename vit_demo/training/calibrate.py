"""Fit and record a weights folder's calibration (the maths is in ``calibration.py``).

What is fitted: the model's temperature, each training snapshot's own, and the rule that flags an image unlike
anything the model knows (chosen by measurement, ``unfamiliar.py``). What is recorded: the temperature and the rule
in ``config.json`` (read with the weights), each snapshot's temperature in ``snapshots.json``, and in
``calibration.json`` what it was fitted on and the expected calibration error, negative log-likelihood and
reliability bins before and after, on images it was not fitted on, drawn as reliability diagrams in
``reliability.png``, and every candidate rule's rates. ``train.py`` calls it at the
end of a run, on training images it held out; ``python -m vit_demo calibrate`` calls it for existing weights.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from vit_demo.atomic import atomic_write, atomic_write_text
from vit_demo.data.datasets import DatasetSpec, load_split
from vit_demo.data.outside_photos import OutsidePhotosMissing
from vit_demo.interpret import calibration, unfamiliar
from vit_demo.pictures.figures import reliability_diagram
from vit_demo.progress import Steps
from vit_demo.weights import (CALIBRATION_FILE, RELIABILITY_FILE, load_snapshots, load_weights, read_metrics,
                              set_snapshot_temperatures, update_config)

HOLDOUT_IMAGES = 5000  # training images train.py holds out for calibration by default (Guo et al. hold out 5,000)
HOLDOUT_SHARE = 0.1  # and never more than this share of the split
HALVES_SEED = 0  # the random halves of the test split, for weights trained on the whole training split


def holdout_indices(n: int, images: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A training split of ``n`` images -> (indices trained on, indices held out for calibration), seeded; at most
    ``HOLDOUT_SHARE`` of the split is held out."""
    held = min(images, int(n * HOLDOUT_SHARE))
    if held <= 0:
        return torch.arange(n), torch.arange(0)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 2))
    return order[held:], order[:held]


@dataclasses.dataclass(frozen=True)
class CalibrationData:
    """uint8 images and labels to fit on and to measure on, and what they are, in words."""

    fit: tuple[torch.Tensor, torch.Tensor]
    measure: tuple[torch.Tensor, torch.Tensor]
    fitted_on: str
    measured_on: str


def held_out(fit: tuple[torch.Tensor, torch.Tensor], test: tuple[torch.Tensor, torch.Tensor],
             seed: int) -> CalibrationData:
    """Fit on training images a run held out (``holdout_indices`` with ``seed``), measure on the test images."""
    return CalibrationData(fit, test, f"{len(fit[0]):,} training images held out from training (seed {seed})",
                           f"the {len(test[0]):,} test images")


def held_out_data(dataset: DatasetSpec, data_dir: str | Path, images: int, seed: int) -> CalibrationData:
    """The training images a run held out to fit on, found again from its seed; the whole test split to measure on."""
    train_x, train_y = load_split(dataset, data_dir, "train")
    _, held = holdout_indices(len(train_x), images, seed)
    return held_out((train_x[held], train_y[held]), load_split(dataset, data_dir, "test"), seed)


def data_for(folder: Path, dataset: DatasetSpec, data_dir: str | Path) -> CalibrationData:
    """What to fit a weights folder on: the training images its run held out, as its metrics.json records; for
    weights trained on the whole training split, a random half of the test split (measured on the other half)."""
    held = (read_metrics(folder) or {}).get("calibration_holdout")
    if held:
        return held_out_data(dataset, data_dir, held["images"], held["seed"])
    test_x, test_y = load_split(dataset, data_dir, "test")
    fit, measure = calibration.random_halves(len(test_x), HALVES_SEED)
    return CalibrationData((test_x[fit], test_y[fit]), (test_x[measure], test_y[measure]),
                           f"{len(fit):,} test images, a random half of the test split (seed {HALVES_SEED}): these "
                           "weights were trained on the whole training split",
                           f"the other {len(measure):,} test images")


def calibrate(folder: str | Path, data_dir: str | Path, device: torch.device | str = "cpu",
              data: CalibrationData | None = None, progress: Steps | None = None) -> dict:
    """Fit and record ``folder``'s calibration (see the module's docstring); return the report, as written to
    ``calibration.json``. ``data``: what to fit and measure on (default: ``data_for`` the folder). Each step (an
    image pass, a fit) is said to ``progress``, if given, as it begins."""
    folder = Path(folder)
    info, model = load_weights(folder, device)  # (before any step is said: what is no weights folder, in one line)
    progress = progress or Steps()
    progress.expect(1)
    progress.step("loading the images to fit and measure on")
    data = data or data_for(folder, info.trained_dataset(), data_dir)
    snapshots = load_snapshots(folder, device)
    rule_too = info.dataset.root is None  # outside photos are what its rule is chosen on: they may show its classes
    progress.expect(4 + len(snapshots) + 2 * rule_too)
    progress.step(f"reading the {len(data.fit[0]):,} images to fit on")
    fit_logits = calibration.all_logits(model, data.fit[0])
    progress.step(f"reading the {len(data.measure[0]):,} images to measure on")
    measure_logits = calibration.all_logits(model, data.measure[0])
    fit_y, measure_y = data.fit[1], data.measure[1]
    progress.step("fitting the temperature")
    temperature = calibration.fit_temperature(fit_logits, fit_y)
    report = {
        "fitted_on": data.fitted_on,
        "measured_on": data.measured_on,
        "temperature": round(temperature, 6),
        "before": calibration.reliability(measure_logits, measure_y).to_dict(),
        "after": calibration.reliability(measure_logits, measure_y, temperature).to_dict(),
    }
    if snapshots:
        temperatures = {}
        for s in snapshots:
            progress.step(f"the snapshot of epoch {s.epoch}: reading the images to fit on, fitting its temperature")
            temperatures[s.epoch] = round(calibration.fit_temperature(calibration.all_logits(s.model, data.fit[0]),
                                                                      fit_y), 6)
        set_snapshot_temperatures(folder, temperatures)
        report["snapshot_temperatures"] = {str(epoch): t for epoch, t in temperatures.items()}
    rule = None
    if not rule_too:
        progress.say("no rule for unfamiliar photos: a folder of your own pictures has no photos known to lie outside "
                     "it")
    else:
        try:
            progress.step("reading the image sets the rule for unfamiliar images is chosen and measured on")
            sets = unfamiliar.image_sets(model, info.dataset.name, data_dir, data.fit[0], data.measure)
            name = info.dataset.name
            progress.step(f"fitting the {len(unfamiliar.CANDIDATES)} candidate rules for unfamiliar images and "
                          "measuring each")
            rule, report["unfamiliar"] = unfamiliar.measure(sets, temperature, unfamiliar.FLAGGED_SHARE[name],
                                                            unfamiliar.BY_CLASS[name])
        except OutsidePhotosMissing as exc:
            progress.say(f"no rule for unfamiliar photos: {exc}")
    progress.step(f"writing {CALIBRATION_FILE} and {RELIABILITY_FILE}")
    update_config(folder, temperature=report["temperature"], unfamiliar=rule and rule.to_dict())
    atomic_write_text(folder / CALIBRATION_FILE, json.dumps(report, indent=2) + "\n")
    diagram = reliability_diagram(report["before"], report["after"], temperature)
    atomic_write(folder / RELIABILITY_FILE, lambda f: diagram.save(f, format="png"))
    return report
