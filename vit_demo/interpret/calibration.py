"""How far to trust the model's numbers: calibrated probabilities, and a warning for images unlike any it knows.

Temperature scaling (Guo, Pleiss, Sun and Weinberger, 2017, "On Calibration of Modern Neural Networks", ICML):
one number T, fitted on images the model did not train on, divides the logits before the softmax. T > 1 softens
over-confident probabilities, T < 1 sharpens timid ones (a model trained with label smoothing learns to say
0.91 for everything it is sure of). Dividing by one positive number keeps every image's ranking of the classes,
so the accuracy does not change. As ``ModelWithTemperature`` and ``_ECELoss`` in the paper's reference code
(gpleiss/temperature_scaling): the fit minimises the negative log-likelihood, and the expected calibration
error (ECE) bins the top probability into 15 equal bins. Here the fit searches 1/T, in which the
negative log-likelihood is convex, by golden-section search instead of LBFGS: no step size to tune.

Unfamiliar images: a score that is high for images like the training data and a threshold under which an image
is flagged (``UnfamiliarRule``): the top calibrated probability (Hendrycks and Gimpel, 2017, "A Baseline for
Detecting Misclassified and Out-of-Distribution Examples", ICLR), the negative energy logsumexp(logits) (Liu,
Wang, Owens and Li, 2020, "Energy-based Out-of-distribution Detection", NeurIPS), or the Mahalanobis distance of
the [CLS] features to the nearest class (Lee, Lee, Lee and Shin, 2018, "A Simple Unified Framework for Detecting
Out-of-Distribution Samples and Adversarial Attacks", NeurIPS): class means and one shared covariance per layer,
fitted on training images, the layers' scores standardised and summed (their "feature ensemble", unweighted).
Which score and threshold each model gets is measured in ``vit_demo/interpret/unfamiliar.py``.
"""

from __future__ import annotations

import base64
import dataclasses
import math

import numpy as np
import torch

BINS = 15  # the expected calibration error's bins, as in Guo et al.
UNFAMILIAR_SCORES = ("max_probability", "energy", "mahalanobis", "probe")
FEATURE_SCORES = ("mahalanobis", "probe")  # the scores that read the [CLS] features, not the logits alone


def probabilities(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Calibrated class probabilities: softmax(logits / T), (..., classes) -> (..., classes), in float32."""
    return (logits.float() / temperature).softmax(dim=-1)


def negative_log_likelihood(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> float:
    """Mean -log p(true class) under softmax(logits / T): logits (N, classes), labels (N,)."""
    return float(torch.nn.functional.cross_entropy(logits.double() / temperature, labels))


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, iterations: int = 80) -> float:
    """The temperature that minimises the negative log-likelihood of ``labels`` (N,) under ``logits`` (N, classes).

    NLL(b) = mean(logsumexp(b z) - b z_y) is convex in b = 1/T, so a golden-section search over log b in
    [log 0.01, log 100] (log keeps it unimodal) narrows the interval 0.618-fold a step: 80 steps leave it far
    below any digit shown.
    """
    z, y = logits.double(), labels

    def nll(log_b: float) -> float:
        return float(torch.nn.functional.cross_entropy(z * math.exp(log_b), y))

    ratio = (math.sqrt(5) - 1) / 2
    lo, hi = math.log(0.01), math.log(100.0)
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = nll(a), nll(b)
    for _ in range(iterations):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = nll(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = nll(b)
    return 1.0 / math.exp((lo + hi) / 2)


@dataclasses.dataclass(frozen=True)
class Reliability:
    """How well top probabilities match accuracy, over ``BINS`` equal bins of the top probability."""

    count: list[int]  # images whose top probability falls in each bin, (lower, upper]
    confidence: list[float]  # their mean top probability (0 for an empty bin)
    accuracy: list[float]  # the share of them classified right (0 for an empty bin)
    ece: float  # expected calibration error: sum over bins of |accuracy - confidence| x the bin's share
    nll: float  # negative log-likelihood of the true class
    accuracy_overall: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def reliability(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0, bins: int = BINS) -> Reliability:
    """The reliability diagram's bins, the ECE and the NLL of ``logits`` (N, classes) under temperature T."""
    probs = probabilities(logits, temperature).double()  # (N, classes)
    confidence, predicted = probs.max(dim=1)  # (N,), (N,)
    correct = (predicted == labels).double()  # (N,)
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)
    # Bin k holds (edges[k], edges[k+1]]: bucketize with right=False gives the index of the first edge >= value.
    which = (torch.bucketize(confidence, edges) - 1).clamp(0, bins - 1)  # (N,)
    count = torch.bincount(which, minlength=bins).double()  # (bins,)
    conf_sum = torch.bincount(which, weights=confidence, minlength=bins)
    right_sum = torch.bincount(which, weights=correct, minlength=bins)
    filled = count.clamp(min=1)
    mean_conf, mean_acc = conf_sum / filled, right_sum / filled  # (bins,)
    ece = float(((mean_acc - mean_conf).abs() * count).sum() / len(labels))
    return Reliability(count=[int(c) for c in count], confidence=[round(float(c), 6) for c in mean_conf],
                       accuracy=[round(float(a), 6) for a in mean_acc], ece=round(ece, 6),
                       nll=round(negative_log_likelihood(logits, labels, temperature), 6),
                       accuracy_overall=round(float(correct.mean()), 6))


def unfamiliarity_score(logits: torch.Tensor, kind: str, temperature: float = 1.0) -> torch.Tensor:
    """How like the training images an image looks by its logits alone, higher = more familiar: (N, classes) -> (N,).

    ``max_probability``: the top calibrated probability; ``energy``: logsumexp of the logits (minus the free
    energy at temperature 1, as Liu et al. score it).
    """
    if kind == "max_probability":
        return probabilities(logits, temperature).max(dim=-1).values
    if kind == "energy":
        return torch.logsumexp(logits.float(), dim=-1)
    raise ValueError(f"unknown score {kind!r}; choose one of {UNFAMILIAR_SCORES[:2]}")


def nearest_class_distance(features: torch.Tensor, means: torch.Tensor, whitening: torch.Tensor) -> torch.Tensor:
    """The squared Mahalanobis distance to the nearest class mean: features (N, D), means (K, D) and a whitening
    (D, D) of the covariance the classes share (the distance of x to m is |(x - m) W|^2) -> (N,), in float64."""
    centred = features.double()[:, None, :] - means.double()[None]  # (N, K, D)
    return (centred @ whitening.double()).square().sum(-1).min(dim=1).values


def flag_threshold(familiar_scores: torch.Tensor, share: float) -> float:
    """The score under which ``share`` of the dataset's own images (their scores, (N,)) fall."""
    return float(torch.quantile(familiar_scores.double(), share))


def separation(familiar: torch.Tensor, outside: torch.Tensor) -> float:
    """The area under the ROC curve of telling ``outside`` images from ``familiar`` ones by score (ties count
    half): the chance that a random familiar image scores higher than a random outside one."""
    f, o = familiar.double()[:, None], outside.double()[None, :]
    return float((f > o).double().mean() + 0.5 * (f == o).double().mean())


def _text(values: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(values, dtype="<f2").tobytes()).decode()


def _halves(text: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f2").reshape(shape).astype(np.float64)


@dataclasses.dataclass(frozen=True, eq=False)
class UnfamiliarRule:
    """Flag an image whose ``score`` lies under ``threshold``.

    For ``mahalanobis``, the score is a sum of standardised parts, one per layer in ``layers`` (minus the squared
    distance of that layer's features to the nearest of ``means`` (P, K, D) under ``whitenings`` (P, D, D),
    ``nearest_class_distance``; a layer is a row of the features, (N, L, D) of [CLS], or (N, 2L, D) with the mean
    patch tokens after them, ``VisionTransformer.forward_features``), and with ``energy`` one more (logsumexp of the
    logits): each part minus ``centre`` over ``spread``, as measured on the images it was fitted on. ``means`` and
    ``whitenings`` are held in float16 (exactly what config.json and the page keep), and every number is computed
    from them in float64.

    For ``probe``, the score is a weighted sum of the features of the layers in ``layers`` plus ``bias``: a linear
    read-out trained to tell the dataset's own images from outliers (``weights`` (P, D), float16 as kept).
    """

    score: str
    threshold: float
    layers: tuple[int, ...] = ()
    energy: bool = False
    means: np.ndarray | None = None  # (P, K, D)
    whitenings: np.ndarray | None = None  # (P, D, D)
    centre: tuple[float, ...] = ()  # one per part: the layers, then the energy
    spread: tuple[float, ...] = ()
    weights: np.ndarray | None = None  # probe: (P, D)
    bias: float = 0.0

    def parts(self, logits: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """The mahalanobis score's parts before they are standardised, (N, parts), in float64."""
        found = [-nearest_class_distance(features[:, layer], torch.from_numpy(np.asarray(self.means[i])),
                                         torch.from_numpy(np.asarray(self.whitenings[i])))
                 for i, layer in enumerate(self.layers)]
        if self.energy:
            found.append(torch.logsumexp(logits.double(), dim=-1))
        return torch.stack(found, dim=1)

    def scores(self, logits: torch.Tensor, temperature: float, features: torch.Tensor | None = None) -> torch.Tensor:
        """How familiar each image looks, (N,): from its logits (N, classes) and, for ``mahalanobis`` and ``probe``,
        its features after every layer (N, L, D), or (N, 2L, D) with the mean patch tokens."""
        if self.score not in FEATURE_SCORES:
            return unfamiliarity_score(logits, self.score, temperature)
        if features is None:
            raise ValueError(f"the {self.score} rule needs the [CLS] features (VisionTransformer.forward_features)")
        if self.score == "probe":
            read = features[:, list(self.layers)].double()  # (N, P, D)
            return (read * torch.from_numpy(np.asarray(self.weights, dtype=np.float64))).sum(dim=(1, 2)) + self.bias
        standard = (self.parts(logits, features) - torch.tensor(self.centre, dtype=torch.float64)) / torch.tensor(
            self.spread, dtype=torch.float64)
        return standard.sum(dim=1)

    def flags(self, logits: torch.Tensor, temperature: float, features: torch.Tensor | None = None) -> torch.Tensor:
        """(N, classes) logits, (N, L, D) features -> (N,) bool: which images look unlike anything the model knows."""
        return self.scores(logits, temperature, features) < self.threshold

    def to_dict(self) -> dict:
        """The rule as config.json keeps it and the page reads it (vit_demo/app/assets/page/numbers.js): the arrays as
        base64 of little-endian float16."""
        found = {"score": self.score, "threshold": self.threshold}
        if self.score == "mahalanobis":
            found.update(layers=list(self.layers), energy=self.energy, shape=list(self.means.shape),
                         centre=list(self.centre), spread=list(self.spread), means=_text(self.means),
                         whitenings=_text(self.whitenings))
        if self.score == "probe":
            found.update(layers=list(self.layers), shape=list(self.weights.shape), weights=_text(self.weights),
                         bias=self.bias)
        return found

    @classmethod
    def from_dict(cls, values: dict) -> UnfamiliarRule:
        score = str(values["score"])
        if score not in UNFAMILIAR_SCORES:
            raise ValueError(f"unknown score {score!r}")
        if score not in FEATURE_SCORES:
            return cls(score=score, threshold=float(values["threshold"]))
        if score == "probe":
            layers, shape = tuple(int(n) for n in values["layers"]), tuple(int(n) for n in values["shape"])
            if len(shape) != 2 or len(layers) != shape[0]:
                raise ValueError("the probe rule's layers do not match its shape")
            return cls(score, float(values["threshold"]), layers, weights=_halves(values["weights"], shape),
                       bias=float(values["bias"]))
        parts, classes, dim = (int(n) for n in values["shape"])
        layers, energy = tuple(int(n) for n in values["layers"]), bool(values["energy"])
        centre, spread = tuple(map(float, values["centre"])), tuple(map(float, values["spread"]))
        if len(layers) != parts or not len(centre) == len(spread) == parts + energy or min(spread) <= 0:
            raise ValueError("the mahalanobis rule's layers, centres and spreads do not match its shape")
        return cls(score, float(values["threshold"]), layers, energy, _halves(values["means"], (parts, classes, dim)),
                   _halves(values["whitenings"], (parts, dim, dim)), centre, spread)


def random_halves(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded random split of range(n) into two halves: (fit, measure) index tensors."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return order[: n // 2], order[n // 2 :]


@torch.no_grad()
def all_logits(model: torch.nn.Module, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """The model's logits for uint8 images (N, C, H, W): (N, classes), float32, on the CPU."""
    device = next(model.parameters()).device
    out = [model(images[i : i + batch_size].to(device).float().div_(255)).float().cpu()
           for i in range(0, len(images), batch_size)]
    return torch.cat(out) if out else torch.empty(0)
