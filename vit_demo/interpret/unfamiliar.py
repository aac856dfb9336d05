"""Which images look unlike anything the model knows: every candidate score measured, and the rule chosen.

Each candidate flags an image whose score lies under a threshold, set to flag ``FLAGGED_SHARE`` of the dataset's own
images it is fitted on (the calibration's fit images, ``calibrate.data_for``):

- ``max_probability``: the top calibrated probability (Hendrycks and Gimpel, 2017);
- ``energy``: logsumexp of the logits (Liu, Wang, Owens and Li, 2020);
- ``mahalanobis``: the Mahalanobis distance of the [CLS] features to the nearest class, of the last layer or of every
  layer, standardised and summed (Lee, Lee, Lee and Shin, 2018), and either with the energy as one more part;
  class means and a shared covariance per layer, fitted on ``TRAIN_IMAGES`` training images. Also of the mean of the
  patch tokens after each layer, as Lee et al. mean-pool a convolutional network's feature maps over space
  (their code: pokaxpoka/deep_Mahalanobis_detector, ``sample_estimator``): of every layer, alone or with the [CLS]
  parts, or of the first layer, where low-level statistics (colour, texture) live. Measured only: the graph's
  ``features`` (vit_demo/onnx/export.py) carry the [CLS] token alone;
- ``probe``: a linear read-out of the [CLS] features of every layer, trained (L2-penalised logistic regression) to
  tell the dataset's own training images, in colour, in grey and as a phone sends them, from outliers made in code
  (``data/outliers.py``) and crops of the outside pictures of the third learnt from (``outside_photos.roles``):
  outlier exposure (Hendrycks, Mazeika and Dietterich, 2019) with the model's weights left as they are, as Lee et
  al. train a logistic regression on their layers' scores. Photos only: for drawings there are no outliers made;
- ``mlp``: the same read-out with one hidden layer of ``MLP_HIDDEN`` ReLU units, trained on the same images (AdamW,
  seeded): it can fence the familiar photos in where one plane cannot;
- ``knn``: the cosine similarity of the last layer's [CLS] features to the ``KNN``-th nearest of those training
  images (Sun, Ming, Zhu and Li, 2022, "Out-of-Distribution Detection with Deep Nearest Neighbors", ICML).
  Measured only: the page would have to download every training image's features to apply it.

What they are measured on. Digits: the model only ever sees a drawing through the app's preprocessing, so the
dataset's own images are MNIST's handwritten digits written on the canvas (``sketches.on_canvas``): the training
digits the Gaussians are fitted on, the fit images the threshold is set on, and the measure images, real pen digits
the rule never saw. Also measured: the measure images as MNIST keeps them, and stroke digits (``sketches``). Outside:
non-digit drawings (``sketches``), one set to choose on and one, drawn with another seed, to report. Photos: the
training, fit and measure photos as they are, and the measure photos in grey (a rule should not flag a photo for
its colour alone); outside, the sample photos that packages install and Debian's wallpapers (``outside_photos``),
split by source into thirds (a photo and its quarters stay together; ``outside_photos.roles``): one whose crops the
probes learn from, one to choose on, one to report. Nothing chosen or reported on is fitted on. The rule chosen: of
those the page can apply, the one that flags the most outside images of the choosing set.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from vit_demo.data import outliers, outside_photos, preprocess
from vit_demo.data.datasets import load_split
from vit_demo.data.sketches import canvas_digits, drawing_set
from vit_demo.interpret import calibration
from vit_demo.unfamiliar_rule import FEATURE_SCORES, READ_OUTS, UnfamiliarRule, unfamiliarity_score

FLAGGED_SHARE = {"mnist": 0.015, "cifar10": 0.04}  # goals: at most 2% of pen digits, 5% of CIFAR-10 test photos
# Whether the rule chosen gets a threshold per class read (``by_class``): photos, whose one threshold flagged 11% of
# CIFAR-10's test airplanes and 1% of its cars (goal: no class over 6%).
BY_CLASS = {"mnist": False, "cifar10": True}
TRAIN_IMAGES = 10_000  # training images the class means and covariances are fitted on
KNN = 10
DRAWINGS = 1160  # non-digit drawings in each of the two sets: 20 of each of the 58 kinds
STROKE_DIGITS = 1000
SEEDS = {"train": 11, "fit": 12, "measure": 13, "choose": 21, "report": 22, "strokes": 31, "outliers": 41,
         "phone": 51, "crops": 61, "mlp": 71}
OUTLIERS_PER_KIND = 2000  # the probe's outliers: this many of each kind outliers.KINDS
GREY_TRAIN_IMAGES = 2500  # training photos in grey the probe learns to keep, besides the TRAIN_IMAGES in colour
PHONE_TRAIN_IMAGES = 2500  # and training photos as a phone sends them (``as_a_phone_sends``)
PROBE_PENALTY = 1.0  # the L2 penalty on the probe's weights (features standardised, each side weighing one half)
MLP_HIDDEN, MLP_EPOCHS, MLP_WEIGHT_DECAY, MLP_BATCH, MLP_LEARNING_RATE = 64, 30, 1e-3, 512, 1e-3
EIGEN_FLOOR = 1e-6  # directions of a covariance with less than this share of its largest variance are left out


@dataclasses.dataclass(frozen=True)
class Candidate:
    name: str
    score: str
    layers: str = ""  # mahalanobis: "first", "last" or "every"
    energy: bool = False
    page: bool = True  # whether the page can apply it
    tokens: tuple[str, ...] = ("cls",)  # mahalanobis: of the [CLS] token ("cls"), of the mean patch token ("patches")


CANDIDATES = (Candidate("max_probability", "max_probability"), Candidate("energy", "energy"),
              Candidate("mahalanobis, last layer", "mahalanobis", "last"),
              Candidate("mahalanobis, every layer", "mahalanobis", "every"),
              Candidate("mahalanobis, last layer + energy", "mahalanobis", "last", True),
              Candidate("mahalanobis, every layer + energy", "mahalanobis", "every", True),
              Candidate("mahalanobis, mean patch tokens, every layer", "mahalanobis", "every", page=False,
                        tokens=("patches",)),
              Candidate("mahalanobis, mean patch tokens, every layer + energy", "mahalanobis", "every", True, False,
                        ("patches",)),
              Candidate("mahalanobis, [CLS] and mean patch tokens, every layer + energy", "mahalanobis", "every", True,
                        False, ("cls", "patches")),
              Candidate("mahalanobis, mean patch tokens, first layer + energy", "mahalanobis", "first", True, False,
                        ("patches",)),
              Candidate("probe against outliers, [CLS] of every layer", "probe", "every"),
              Candidate(f"read-out with a hidden layer of {MLP_HIDDEN} against outliers, [CLS] of every layer", "mlp",
                        "every"),
              Candidate(f"knn, last layer (k={KNN})", "knn", page=False))


@dataclasses.dataclass(frozen=True)
class Outputs:
    """What the model makes of a set of images: logits (N, K) and features after every layer, (N, 2L, D): [CLS]
    after each of the L layers, then the mean patch token, each through the final norm (Lee et al.'s feature maps
    mean-pooled over space)."""

    logits: torch.Tensor
    features: torch.Tensor

    @property
    def depth(self) -> int:
        return self.features.shape[1] // 2

    @staticmethod
    def joined(*found: Outputs) -> Outputs:
        """Several sets' outputs as one, in order."""
        return Outputs(torch.cat([f.logits for f in found]), torch.cat([f.features for f in found]))


@torch.no_grad()
def outputs(model: torch.nn.Module, images: torch.Tensor, batch_size: int = 500) -> Outputs:
    """The model's outputs for images (N, C, H, W), uint8 or float in [0, 1], on the CPU."""
    if images.is_floating_point() and len(images) and float(images.max()) > 1:
        raise ValueError("float images must lie in [0, 1]: uint8 ones, as they are")
    device = next(model.parameters()).device
    logits, features = [], []
    for i in range(0, len(images), batch_size):
        batch = images[i : i + batch_size].to(device)
        batch = batch.float().div_(255) if batch.dtype == torch.uint8 else batch.float()
        found = model.forward_activations(batch, stream=True)
        normed = model.norm(found.stream)  # (B, L, T, D)
        patches = normed[:, :, model.config.prefix_tokens :]  # (B, L, N, D)
        f = torch.cat([normed[:, :, 0], patches.mean(2)], dim=1)  # (B, 2L, D)
        logits.append(found.logits.float().cpu())  # (B, K)
        features.append(f.float().cpu())
    return Outputs(torch.cat(logits), torch.cat(features))


def whitening(features: torch.Tensor, labels: torch.Tensor, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Class means (K, D) and a whitening W (D, D) of the covariance the classes share (Lee et al.'s tied Gaussian),
    both rounded to float16: the squared Mahalanobis distance of x to mean m is |(x - m) W|^2. Directions of almost
    no variance (LayerNorm leaves one: the features sum to a constant) are left out, as a pseudo-inverse does."""
    f = features.double()
    means = torch.stack([f[labels == c].mean(0) for c in range(classes)])  # (K, D)
    centred = f - means[labels]
    variance, vectors = torch.linalg.eigh(centred.T @ centred / len(f))  # ascending
    kept = variance > EIGEN_FLOOR * variance[-1]
    w = torch.zeros_like(vectors)
    w[:, kept] = vectors[:, kept] / variance[kept].sqrt()
    return means.numpy().astype(np.float16), w.numpy().astype(np.float16)


def fit(candidate: Candidate, train: Outputs, labels: torch.Tensor, familiar: Outputs, temperature: float,
        share: float, probe_sets: ProbeSets | None = None):
    """The candidate fitted: an ``UnfamiliarRule`` (or for knn a function of ``Outputs``, with its threshold), with
    the threshold that flags ``share`` of ``familiar``. The probe learns from ``probe_sets`` alone."""
    if candidate.score == "knn":
        last = train.depth - 1  # the last layer's [CLS]
        bank = torch.nn.functional.normalize(train.features[:, last], dim=-1)  # (N, D)

        def knn(found: Outputs) -> torch.Tensor:
            query = torch.nn.functional.normalize(found.features[:, last], dim=-1)  # (M, D)
            return torch.cat([(q @ bank.T).topk(KNN, dim=1).values[:, -1] for q in query.split(1000)]).double()
        return knn, calibration.flag_threshold(knn(familiar), share)
    if candidate.score not in FEATURE_SCORES:
        threshold = calibration.flag_threshold(unfamiliarity_score(familiar.logits, candidate.score, temperature),
                                               share)
        return UnfamiliarRule(candidate.score, threshold)
    depth = train.depth
    within = {"first": (0,), "last": (depth - 1,), "every": tuple(range(depth))}[candidate.layers]
    rows = {"cls": 0, "patches": depth}  # where each token's rows start in the features (N, 2L, D)
    layers = tuple(rows[token] + layer for token in candidate.tokens for layer in within)
    if candidate.score in READ_OUTS:
        keep, flag = probe_sets.keep.features[:, layers], probe_sets.outliers.features[:, layers]
        rule = probe(keep, flag, layers, probe_sets.penalty) if candidate.score == "probe" else mlp(keep, flag, layers)
        return dataclasses.replace(rule, threshold=calibration.flag_threshold(rule.scores(
            familiar.logits, temperature, familiar.features), share))
    fitted = [whitening(train.features[:, layer], labels, train.logits.shape[1]) for layer in layers]
    means, whitenings = np.stack([m for m, _ in fitted]), np.stack([w for _, w in fitted])
    unit = (1.0,) * (len(layers) + candidate.energy)
    raw = UnfamiliarRule("mahalanobis", 0.0, layers, candidate.energy, means, whitenings, (0.0,) * len(unit), unit)
    parts = raw.parts(familiar.logits, familiar.features)  # (N, parts)
    centre, spread = tuple(parts.mean(0).tolist()), tuple(parts.std(0).tolist())
    scored = dataclasses.replace(raw, centre=centre, spread=spread)
    threshold = calibration.flag_threshold(scored.scores(familiar.logits, temperature, familiar.features), share)
    return dataclasses.replace(scored, threshold=threshold)


@dataclasses.dataclass(frozen=True)
class ProbeSets:
    """What the probe learns from: training photos in colour, in grey and as a phone sends them to keep, and
    outliers made in code and crops of outside pictures to flag."""

    keep: Outputs
    made: Outputs  # the outliers made in code (``probe_outliers``)
    crops: Outputs  # and the crops
    photos: torch.Tensor  # the training photos both are made of, (N, 3, H, W) uint8: to draw other outliers of
    penalty: float = PROBE_PENALTY

    @property
    def outliers(self) -> Outputs:
        return Outputs.joined(self.made, self.crops)


def probe(keep: torch.Tensor, flag: torch.Tensor, layers: tuple[int, ...], penalty: float = PROBE_PENALTY
          ) -> UnfamiliarRule:
    """An L2-penalised logistic regression of features (N, P, D) to keep against features (M, P, D) to flag, each
    side weighing one half, on features standardised by those to keep; solved to convergence (L-BFGS), so the same
    inputs give the same rule. The standardisation is folded into the weights, which are rounded to float16 as
    config.json keeps them, and the bias is computed from the rounded weights. The threshold is left to the caller."""
    x = torch.cat([keep, flag]).flatten(1).double()  # (N + M, P * D)
    centre, scale = x[: len(keep)].mean(0), x[: len(keep)].std(0) + 1e-4
    x = (x - centre) / scale
    y = torch.cat([torch.ones(len(keep)), torch.zeros(len(flag))]).double()
    weight = torch.cat([torch.full((len(keep),), 0.5 / len(keep)), torch.full((len(flag),), 0.5 / len(flag))]).double()
    params = torch.zeros(x.shape[1] + 1, dtype=torch.float64, requires_grad=True)  # the weights, then the bias
    solver = torch.optim.LBFGS([params], max_iter=500, tolerance_grad=1e-9, tolerance_change=1e-12, history_size=20,
                               line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        solver.zero_grad()
        fitted = torch.nn.functional.binary_cross_entropy_with_logits(x @ params[:-1] + params[-1], y, weight=weight,
                                                                     reduction="sum")
        fitted = fitted + penalty * params[:-1].square().sum() / 2
        fitted.backward()
        return fitted

    solver.step(loss)
    found = params.detach()
    weights = (found[:-1] / scale).numpy().astype(np.float16)  # (P * D,), applied to the features as they are
    bias = float(found[-1]) - float(centre @ torch.from_numpy(weights.astype(np.float64)))
    return UnfamiliarRule("probe", 0.0, layers, weights=weights.reshape(len(layers), -1), bias=bias)


def mlp(keep: torch.Tensor, flag: torch.Tensor, layers: tuple[int, ...]) -> UnfamiliarRule:
    """A read-out with one hidden layer of ``MLP_HIDDEN`` ReLU units, of features (N, P, D) to keep against features
    (M, P, D) to flag, each side weighing one half, on features standardised by those to keep: ``MLP_EPOCHS`` of
    AdamW over shuffled batches, seeded, so the same inputs give the same rule on the same machine. The
    standardisation is folded into the first layer, whose weights are rounded to float16 as config.json keeps them,
    its biases computed from the rounded weights. The threshold is left to the caller."""
    x = torch.cat([keep, flag]).flatten(1).float()  # (N + M, P * D)
    centre, scale = x[: len(keep)].mean(0), x[: len(keep)].std(0) + 1e-4
    x = (x - centre) / scale
    y = torch.cat([torch.ones(len(keep)), torch.zeros(len(flag))])
    weight = torch.cat([torch.full((len(keep),), 0.5 / len(keep)), torch.full((len(flag),), 0.5 / len(flag))])
    generator = torch.Generator().manual_seed(SEEDS["mlp"])
    first, second = torch.nn.Linear(x.shape[1], MLP_HIDDEN), torch.nn.Linear(MLP_HIDDEN, 1)
    with torch.no_grad():  # PyTorch's default initialisation, drawn from the seeded generator
        for layer in (first, second):
            bound = 1 / layer.in_features ** 0.5
            layer.weight.uniform_(-bound, bound, generator=generator)
            layer.bias.uniform_(-bound, bound, generator=generator)
    net = torch.nn.Sequential(first, torch.nn.ReLU(), second)
    solver = torch.optim.AdamW(net.parameters(), MLP_LEARNING_RATE, weight_decay=MLP_WEIGHT_DECAY)
    for _ in range(MLP_EPOCHS):
        for batch in torch.randperm(len(x), generator=generator).split(MLP_BATCH):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(x[batch])[:, 0], y[batch],
                                                                        weight=weight[batch], reduction="sum")
            solver.zero_grad()
            (loss * len(x) / len(batch)).backward()
            solver.step()
    weights = (first.weight.detach().double().T / scale.double()[:, None]).numpy().astype(np.float16)  # (P * D, H)
    hidden_bias = (first.bias.detach().double() - centre.double() @ torch.from_numpy(weights.astype(np.float64)))
    return UnfamiliarRule("mlp", 0.0, layers, weights=weights.reshape(len(layers), -1, MLP_HIDDEN),
                          bias=float(second.bias.detach()), hidden_bias=tuple(hidden_bias.tolist()),
                          output=tuple(second.weight.detach()[0].double().tolist()))


def scorer(fitted, temperature: float):
    """A fitted candidate as (score of ``Outputs``, threshold)."""
    if isinstance(fitted, UnfamiliarRule):
        return (lambda found: fitted.scores(found.logits, temperature, found.features)), fitted.threshold
    return fitted


# ---- The images -------------------------------------------------------------------------------------------------


def as_a_phone_sends(photos: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """uint8 photos (N, 3, 32, 32) as a visitor's phone would send a photo of the same: enlarged to 256-800 pixels,
    a third framed wider (on the colour of a corner), a third cropped tighter, saved as JPEG at quality 60-95, and
    read back as the app reads an upload: (N, 3, 32, 32) float32 in [0, 1]."""
    sent = []
    for i, photo in enumerate(photos):
        side = int(rng.integers(256, 801))
        image = Image.fromarray(photo.permute(1, 2, 0).numpy()).resize((side, side), Image.BICUBIC)
        if i % 3 == 1:
            w, h = (int(side * rng.uniform(1.0, 1.25)) for _ in range(2))
            framed = Image.new("RGB", (w, h), image.getpixel((0, 0)))
            framed.paste(image, (int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))))
            image = framed
        elif i % 3 == 2:
            s = int(side * rng.uniform(0.8, 0.95))
            x, y = (int(v) for v in rng.integers(0, side - s + 1, 2))
            image = image.crop((x, y, x + s, y + s))
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=int(rng.integers(60, 96)))
        sent.append(preprocess.preprocess_photo(preprocess.open_image(buffer.getvalue())))
    return torch.from_numpy(np.stack(sent)).permute(0, 3, 1, 2)


def photos_of(pictures: list[tuple[str, np.ndarray]]) -> tuple[list[str], torch.Tensor]:
    """Pictures [(name, (H, W, 3) uint8)] as the app reads them, leaving out any of one flat colour (the app reads
    none): (their names, (N, 3, 32, 32) float32 in [0, 1])."""
    names, images = [], []
    for name, picture in pictures:
        try:
            images.append(preprocess.preprocess_photo(np.ascontiguousarray(picture)))
        except preprocess.NothingDrawn:
            continue
        names.append(name)
    return names, torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)


@dataclasses.dataclass(frozen=True)
class OutsidePictures:
    """The outside pictures as the photo rule's sets take them: every picture read (``outside_photos.outside_photos``
    and ``wallpapers``), the names of those the app reads and their images (N, 3, 32, 32) in [0, 1] (``photos_of``),
    and each one's role (``outside_photos.roles``)."""

    pictures: list[tuple[str, np.ndarray]]
    names: list[str]
    images: torch.Tensor
    roles: np.ndarray

    def crops(self, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
        """``outside_photos.crops`` of the pictures of the third the rule learns from."""
        learnt_from = {n for n, r in zip(self.names, self.roles) if r == outside_photos.LEARN}
        return outside_photos.crops([(n, p) for n, p in self.pictures if n in learnt_from], rng)


def outside_pictures() -> OutsidePictures:
    """Raises ``outside_photos.OutsidePhotosMissing`` where the packages that hold them are not installed."""
    pictures = outside_photos.outside_photos() + outside_photos.wallpapers()
    names, images = photos_of(pictures)
    return OutsidePictures(pictures, names, images, outside_photos.roles(names))


def not_among(images: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """Which of ``images`` (N, ...) are none of ``others`` (M, ...), pixel for pixel: (N,) bool."""
    seen = {row.tobytes() for row in others.flatten(1).numpy()}
    return torch.tensor([row.tobytes() not in seen for row in images.flatten(1).numpy()], dtype=torch.bool)


def _photos_from(photos: torch.Tensor, start: int, count: int) -> torch.Tensor:
    """photos[start : start + count], going on from the first photo past the last: a training split too small for
    the probe's parts (a test's image folder) gives each part its photos again."""
    return photos[torch.arange(start, start + count) % len(photos)]


def probe_outliers(model: torch.nn.Module, photos: torch.Tensor, seed: int) -> Outputs:
    """The outliers the probe learns to flag, drawn with ``seed`` (``outliers.outliers``): made in code and of the
    ``photos`` after the ones it keeps (``probe_sets``)."""
    made = outliers.outliers(_photos_from(photos, TRAIN_IMAGES + GREY_TRAIN_IMAGES, 3 * OUTLIERS_PER_KIND),
                             OUTLIERS_PER_KIND, seed)
    return outputs(model, made)


def probe_sets(model: torch.nn.Module, photos: torch.Tensor, crops: torch.Tensor) -> ProbeSets:
    """What the probe learns from, out of training photos (N, 3, H, W) uint8 the calibration does not fit on:
    ``TRAIN_IMAGES`` of them in colour, ``GREY_TRAIN_IMAGES`` more in grey and ``PHONE_TRAIN_IMAGES`` more as a
    phone sends them to keep (as many as there are, of a smaller split); ``probe_outliers`` and ``crops`` of
    outside pictures (M, 3, H, W), float in [0, 1] (``photos_of``), to flag."""
    colour = _photos_from(photos, 0, min(TRAIN_IMAGES, len(photos)))
    grey = outliers.grey(_photos_from(photos, TRAIN_IMAGES, min(GREY_TRAIN_IMAGES, len(photos))))
    sent = as_a_phone_sends(_photos_from(photos, TRAIN_IMAGES + GREY_TRAIN_IMAGES + 3 * OUTLIERS_PER_KIND,
                                         min(PHONE_TRAIN_IMAGES, len(photos))), np.random.default_rng(SEEDS["phone"]))
    keep = Outputs.joined(outputs(model, torch.cat([colour, grey])), outputs(model, sent))  # uint8, then float
    return ProbeSets(keep, probe_outliers(model, photos, SEEDS["outliers"]), outputs(model, crops), photos)


@dataclasses.dataclass(frozen=True)
class ImageSets:
    """What a model makes of every set the candidates are fitted and measured on."""

    train: Outputs  # the class means and covariances are fitted on these
    train_labels: torch.Tensor
    fit: Outputs  # the threshold is set on these
    familiar: dict[str, Outputs]  # the dataset's own, measured (the first: the goal's, with ``familiar_labels``)
    familiar_labels: torch.Tensor
    choose: Outputs  # outside images the rule is chosen on
    report: Outputs  # outside images it is reported on
    report_names: list[str]
    outside: str  # what the outside images are, in words
    probe: ProbeSets | None = None  # photos: what the probe learns from


def training_order(n: int) -> torch.Tensor:
    """The order the rule's sets take a training split of n images in (the Gaussians' ``TRAIN_IMAGES`` first)."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(SEEDS["train"]))


def probe_photos(train_images: torch.Tensor, fit_images: torch.Tensor) -> torch.Tensor:
    """The training photos (N, 3, H, W) the probe learns from (``probe_sets``): those the calibration does not fit
    on, in ``training_order`` but with the Gaussians' photos last, as only a small split needs them."""
    order = training_order(len(train_images))
    photos = train_images[torch.cat([order[TRAIN_IMAGES:], order[:TRAIN_IMAGES]])]
    return photos[not_among(photos, fit_images)]


def image_sets(model: torch.nn.Module, dataset: str, data_dir: str | Path, fit_images: torch.Tensor,
               measure: tuple[torch.Tensor, torch.Tensor]) -> ImageSets:
    """Every set, for ``model`` of ``dataset`` with the calibration's fit images and measure images and labels."""
    every_x, every_y = load_split(dataset, data_dir, "train")
    order = training_order(len(every_x))
    train_x, train_y = every_x[order[:TRAIN_IMAGES]], every_y[order[:TRAIN_IMAGES]]
    run = lambda images: outputs(model, images)  # noqa: E731
    if dataset == "mnist":
        familiar = {"test digits written on the canvas": run(canvas_digits(measure[0], SEEDS["measure"])),
                    "test digits as MNIST keeps them": run(measure[0]),
                    "stroke digits": run(drawing_set("digits", STROKE_DIGITS, SEEDS["strokes"])[0])}
        report, names = drawing_set("non-digits", DRAWINGS, SEEDS["report"])
        train, fit_on = (run(canvas_digits(x, SEEDS[seed])) for x, seed in ((train_x, "train"), (fit_images, "fit")))
        return ImageSets(train, train_y, fit_on, familiar, measure[1],
                         run(drawing_set("non-digits", DRAWINGS, SEEDS["choose"])[0]), run(report), names,
                         "non-digit drawings")
    outside = outside_pictures()
    _, crops = photos_of(outside.crops(np.random.default_rng(SEEDS["crops"])))
    familiar = {"test photos": run(measure[0]), "test photos in grey": run(outliers.grey(measure[0]))}
    role = torch.from_numpy(outside.roles)
    reported = role == outside_photos.REPORT
    return ImageSets(run(train_x), train_y, run(fit_images), familiar, measure[1],
                     run(outside.images[role == outside_photos.CHOOSE]), run(outside.images[reported]),
                     [n for n, r in zip(outside.names, reported) if r], "outside photos",
                     probe_sets(model, probe_photos(every_x, fit_images), crops))


def _rate(flags: torch.Tensor) -> float:
    return round(float(flags.double().mean()), 4) if len(flags) else 0.0


def by_class(rule: UnfamiliarRule, fit_on: Outputs, temperature: float, share: float) -> UnfamiliarRule:
    """``rule`` with a threshold for each class, each flagging ``share`` of the fit images the model reads as that
    class (class-conditional thresholds, as Mondrian conformal prediction sets one per class: Vovk, Gammerman and
    Shafer, 2005; Sadinle, Lei and Wasserman, 2019); a class it reads none of them as keeps the one threshold."""
    scores, read = rule.scores(fit_on.logits, temperature, fit_on.features), fit_on.logits.argmax(dim=1)
    return dataclasses.replace(rule, class_thresholds=tuple(
        calibration.flag_threshold(scores[read == k], share) if (read == k).any() else rule.threshold
        for k in range(fit_on.logits.shape[1])))


def measure(sets: ImageSets, temperature: float, share: float, per_class: bool = False) -> tuple[UnfamiliarRule, dict]:
    """Fit every candidate (one threshold each), measure what each flags, and choose: (the rule, the report
    calibration.json keeps). With ``per_class`` the rule chosen then gets a threshold per class (``by_class``); the
    report's own rates (``flagged``, ``flagged_by_class``, ``outside_flagged_*``) are the rule's as chosen."""
    rows, rules = [], {}
    for candidate in CANDIDATES:
        if candidate.score in READ_OUTS and sets.probe is None:
            continue
        fitted = fit(candidate, sets.train, sets.train_labels, sets.fit, temperature, share, sets.probe)
        score, threshold = scorer(fitted, temperature)
        familiar = {name: score(found) for name, found in sets.familiar.items()}
        first, report = next(iter(familiar.values())), score(sets.report)
        rows.append({"name": candidate.name, "page": candidate.page, "threshold": round(threshold, 6),
                     "flagged": {name: _rate(s < threshold) for name, s in familiar.items()},
                     "outside_flagged_choose": _rate(score(sets.choose) < threshold),
                     "outside_flagged_report": _rate(report < threshold),
                     "separation_auc": round(calibration.separation(first, report), 4)})
        rules[candidate.name] = fitted
    best = max((row for row in rows if row["page"]), key=lambda row: row["outside_flagged_choose"])
    rule = rules[best["name"]]
    if per_class:
        rule = by_class(rule, sets.fit, temperature, share)
    flags = lambda found: rule.flags(found.logits, temperature, found.features)  # noqa: E731
    first = next(iter(sets.familiar.values()))
    flagged, caught, labels = flags(first), flags(sets.report), sets.familiar_labels
    right = first.logits.argmax(1) == labels
    kinds: dict[str, list[bool]] = {}
    for name, hit in zip(sets.report_names, caught.tolist()):
        kinds.setdefault("faces" if "#face" in name else name.split("#quarter")[0], []).append(hit)
    report = {"chosen": best["name"], "score": rule.score, "threshold": round(rule.threshold, 6),
              **({"class_thresholds": [round(t, 6) for t in rule.class_thresholds]} if per_class else {}),
              "flagged_share_fitted": share, "train_images": len(sets.train_labels), "outside": sets.outside,
              "familiar_images": {name: len(found.logits) for name, found in sets.familiar.items()},
              "outside_images": {"choose": len(sets.choose.logits), "report": len(sets.report.logits)},
              "flagged": {name: _rate(flags(found)) for name, found in sets.familiar.items()},
              "flagged_by_class": [_rate(flagged[labels == k]) for k in range(first.logits.shape[1])],
              "outside_flagged_choose": _rate(flags(sets.choose)), "outside_flagged_report": _rate(caught),
              "accuracy": _rate(right), "accuracy_on_flagged": _rate(right[flagged]),
              "accuracy_on_the_rest": _rate(right[~flagged]),
              "candidates": rows,
              "report_by_kind": {kind: round(float(np.mean(hits)), 4) for kind, hits in kinds.items()}}
    return rule, report
