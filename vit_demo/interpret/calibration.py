"""How far to trust the model's probabilities: the temperature that calibrates them, and how well they are calibrated.

Temperature scaling (Guo, Pleiss, Sun and Weinberger, 2017, "On Calibration of Modern Neural Networks", ICML):
one number T, fitted on images the model did not train on, divides the logits before the softmax. T > 1 softens
over-confident probabilities, T < 1 sharpens timid ones (a model trained with label smoothing learns to say
0.91 for everything it is sure of). Dividing by one positive number keeps every image's ranking of the classes,
so the accuracy does not change. As ``ModelWithTemperature`` and ``_ECELoss`` in the paper's reference code
(gpleiss/temperature_scaling): the fit minimises the negative log-likelihood, and the expected calibration
error (ECE) bins the top probability into 15 equal bins. Here the fit searches 1/T, in which the
negative log-likelihood is convex, by golden-section search instead of LBFGS: no step size to tune.

Unfamiliar images are flagged by the rule in ``vit_demo/unfamiliar_rule.py``; which score and threshold each model
gets is measured in ``vit_demo/interpret/unfamiliar.py``, with the thresholds and separations below.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from vit_demo.unfamiliar_rule import probabilities

BINS = 15  # the expected calibration error's bins, as in Guo et al.


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


def flag_threshold(familiar_scores: torch.Tensor, share: float) -> float:
    """The score under which ``share`` of the dataset's own images (their scores, (N,)) fall."""
    return float(torch.quantile(familiar_scores.double(), share))


def separation(familiar: torch.Tensor, outside: torch.Tensor) -> float:
    """The area under the ROC curve of telling ``outside`` images from ``familiar`` ones by score (ties count
    half): the chance that a random familiar image scores higher than a random outside one."""
    f, o = familiar.double()[:, None], outside.double()[None, :]
    return float((f > o).double().mean() + 0.5 * (f == o).double().mean())


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
