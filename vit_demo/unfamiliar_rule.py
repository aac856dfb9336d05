"""The rule a weights folder keeps (config.json's ``unfamiliar``) for flagging images unlike any the model knows, and
the calibrated probabilities it reads.

Unfamiliar images: a score that is high for images like the training data and a threshold under which an image
is flagged (``UnfamiliarRule``): the top calibrated probability (Hendrycks and Gimpel, 2017, "A Baseline for
Detecting Misclassified and Out-of-Distribution Examples", ICLR), the negative energy logsumexp(logits) (Liu,
Wang, Owens and Li, 2020, "Energy-based Out-of-distribution Detection", NeurIPS), or the Mahalanobis distance of
the [CLS] features to the nearest class (Lee, Lee, Lee and Shin, 2018, "A Simple Unified Framework for Detecting
Out-of-Distribution Samples and Adversarial Attacks", NeurIPS): class means and one shared covariance per layer,
fitted on training images, the layers' scores standardised and summed (their "feature ensemble", unweighted).
Which score and threshold each model gets is measured in ``vit_demo/interpret/unfamiliar.py``; the temperature
the probabilities are read at is fitted in ``vit_demo/interpret/calibration.py``. Nothing here imports the rest of
the package: ``vit_demo/weights.py`` reads the rule from config.json.
"""

from __future__ import annotations

import base64
import dataclasses

import numpy as np
import torch

UNFAMILIAR_SCORES = ("max_probability", "energy", "mahalanobis", "probe", "mlp")
FEATURE_SCORES = ("mahalanobis", "probe", "mlp")  # the scores that read the [CLS] features, not the logits alone
READ_OUTS = ("probe", "mlp")  # those that are read-outs trained against outliers: weights and a bias


def probabilities(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Calibrated class probabilities: softmax(logits / T), (..., classes) -> (..., classes), in float32."""
    return (logits.float() / temperature).softmax(dim=-1)


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
    patch tokens after them, through the final norm), and with ``energy`` one more (logsumexp of the
    logits): each part minus ``centre`` over ``spread``, as measured on the images it was fitted on. ``means`` and
    ``whitenings`` are held in float16 (exactly what config.json and the page keep), and every number is computed
    from them in float64.

    For ``probe``, the score is a weighted sum of the features of the layers in ``layers`` plus ``bias``: a linear
    read-out trained to tell the dataset's own images from outliers (``weights`` (P, D), float16 as kept). For
    ``mlp``, a read-out with one hidden layer of H units: relu(features . ``weights`` (P, D, H) + ``hidden_bias``
    (H,)) . ``output`` (H,) + ``bias``, the weights float16 as kept.

    With ``class_thresholds`` (one per class), an image is held to the threshold of the class the model reads it as
    instead: one threshold would flag some classes' images far more often than others' (CIFAR-10's airplanes 11%,
    its cars 1%). ``threshold`` stays the one that flags the same share of every class taken together.
    """

    score: str
    threshold: float
    layers: tuple[int, ...] = ()
    energy: bool = False
    means: np.ndarray | None = None  # (P, K, D)
    whitenings: np.ndarray | None = None  # (P, D, D)
    centre: tuple[float, ...] = ()  # one per part: the layers, then the energy
    spread: tuple[float, ...] = ()
    weights: np.ndarray | None = None  # probe: (P, D); mlp: (P, D, H)
    bias: float = 0.0
    hidden_bias: tuple[float, ...] = ()  # mlp: (H,)
    output: tuple[float, ...] = ()  # mlp: (H,)
    class_thresholds: tuple[float, ...] = ()  # (K,): by the class read, else ``threshold`` for every image

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
            raise ValueError(f"the {self.score} rule needs the [CLS] features after every layer")
        read = features[:, list(self.layers)].double().flatten(1)  # (N, P * D)
        as64 = lambda values: torch.from_numpy(np.asarray(values, dtype=np.float64))  # noqa: E731
        if self.score == "probe":
            return read @ as64(self.weights).flatten() + self.bias
        if self.score == "mlp":
            hidden = (read @ as64(self.weights).flatten(0, 1) + as64(self.hidden_bias)).relu()  # (N, H)
            return hidden @ as64(self.output) + self.bias
        standard = (self.parts(logits, features) - torch.tensor(self.centre, dtype=torch.float64)) / torch.tensor(
            self.spread, dtype=torch.float64)
        return standard.sum(dim=1)

    def thresholds(self, logits: torch.Tensor) -> torch.Tensor:
        """Each image's threshold, (N,), by the class it is read as (N, classes) where the rule has one a class."""
        if not self.class_thresholds:
            return torch.full(logits.shape[:1], self.threshold, dtype=torch.float64)
        return torch.tensor(self.class_thresholds, dtype=torch.float64)[logits.argmax(dim=-1)]

    def flags(self, logits: torch.Tensor, temperature: float, features: torch.Tensor | None = None) -> torch.Tensor:
        """(N, classes) logits, (N, L, D) features -> (N,) bool: which images look unlike anything the model knows."""
        return self.scores(logits, temperature, features) < self.thresholds(logits)

    def to_dict(self) -> dict:
        """The rule as config.json keeps it and the page reads it (vit_demo/page/assets/page/numbers.js): the arrays as
        base64 of little-endian float16."""
        found = {"score": self.score, "threshold": self.threshold}
        if self.class_thresholds:
            found["class_thresholds"] = list(self.class_thresholds)
        if self.score == "mahalanobis":
            found.update(layers=list(self.layers), energy=self.energy, shape=list(self.means.shape),
                         centre=list(self.centre), spread=list(self.spread), means=_text(self.means),
                         whitenings=_text(self.whitenings))
        if self.score in READ_OUTS:
            found.update(layers=list(self.layers), shape=list(self.weights.shape), weights=_text(self.weights),
                         bias=self.bias)
        if self.score == "mlp":
            found.update(hidden_bias=list(self.hidden_bias), output=list(self.output))
        return found

    @classmethod
    def from_dict(cls, values: dict) -> UnfamiliarRule:
        score = str(values["score"])
        if score not in UNFAMILIAR_SCORES:
            raise ValueError(f"unknown score {score!r}")
        kept = {"threshold": float(values["threshold"]),
                "class_thresholds": tuple(map(float, values.get("class_thresholds", ())))}
        if score not in FEATURE_SCORES:
            return cls(score, **kept)
        if score in READ_OUTS:
            layers, shape = tuple(int(n) for n in values["layers"]), tuple(int(n) for n in values["shape"])
            if len(shape) != (2 if score == "probe" else 3) or len(layers) != shape[0]:
                raise ValueError(f"the {score} rule's layers do not match its shape")
            if score == "mlp":
                kept.update(hidden_bias=tuple(map(float, values["hidden_bias"])),
                            output=tuple(map(float, values["output"])))
                if not len(kept["hidden_bias"]) == len(kept["output"]) == shape[2]:
                    raise ValueError("the mlp rule's hidden biases and output do not match its shape")
            return cls(score, layers=layers, weights=_halves(values["weights"], shape), bias=float(values["bias"]),
                       **kept)
        parts, classes, dim = (int(n) for n in values["shape"])
        layers, energy = tuple(int(n) for n in values["layers"]), bool(values["energy"])
        centre, spread = tuple(map(float, values["centre"])), tuple(map(float, values["spread"]))
        if len(layers) != parts or not len(centre) == len(spread) == parts + energy or min(spread) <= 0:
            raise ValueError("the mahalanobis rule's layers, centres and spreads do not match its shape")
        return cls(score, layers=layers, energy=energy, means=_halves(values["means"], (parts, classes, dim)),
                   whitenings=_halves(values["whitenings"], (parts, dim, dim)), centre=centre, spread=spread, **kept)
