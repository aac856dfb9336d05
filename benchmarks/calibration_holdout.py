"""How small can the calibration hold-out be? (issue 31: train on more of the split where the app loses nothing.)

    python benchmarks/calibration_holdout.py --model cifar10 --data-dir DIR [--draws 20]

The shipped weights were trained with 5,000 training images held out: the temperature (Guo et al., 2017) and the
unfamiliar rule's threshold are fitted on them (vit_demo/training/calibrate.py, vit_demo/interpret/unfamiliar.py).
For hold-outs of 250 to 5,000 of those images (``--draws`` random draws each), this prints what would have been
fitted: the temperature and the threshold (the score under which the rule's share of the hold-out falls), their
spread over the draws, and, on the test split, the expected calibration error with each draw's temperature and the
share of test photos each draw's threshold flags. The model and the rule's fitted means are the shipped ones: only
the hold-out's share changes. Needs the dataset (``--data-dir``, as ``python -m vit_demo calibrate`` does).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vit_demo.interpret import calibration  # noqa: E402  (benchmarks/ run from anywhere)
from vit_demo.interpret.unfamiliar import FLAGGED_SHARE, outputs  # noqa: E402
from vit_demo.training.calibrate import data_for  # noqa: E402
from vit_demo.weights import load_weights, resolve_weights_folder  # noqa: E402

SIZES = (250, 500, 1000, 2000, 5000)


def spread(values: list[float]) -> float:
    """The standard deviation over the draws (0 for one draw: the whole hold-out)."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="cifar10")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--draws", type=int, default=20)
    args = parser.parse_args()
    folder = resolve_weights_folder(args.model)
    info, model = load_weights(folder, "cpu")
    data = data_for(folder, info.dataset.name, args.data_dir)
    print(f"{args.model}: fitted on {data.fitted_on}; measured on {data.measured_on}", file=sys.stderr)
    fit, test = outputs(model, data.fit[0]), outputs(model, data.measure[0])  # logits (N, K), features (N, L, D)
    fit_y, test_y = data.fit[1], data.measure[1]
    rule, share = info.unfamiliar, FLAGGED_SHARE[info.dataset.name]

    def fitted(pick: torch.Tensor) -> tuple[float, float, float, float]:
        """A hold-out of the images ``pick``: its temperature, its threshold, and on the test split the ECE with that
        temperature and the share of photos that threshold flags."""
        temperature = calibration.fit_temperature(fit.logits[pick], fit_y[pick])
        scores = rule.scores(fit.logits[pick], temperature, fit.features[pick])
        threshold = calibration.flag_threshold(scores, share)
        ece = calibration.reliability(test.logits, test_y, temperature).ece
        flagged = float((rule.scores(test.logits, temperature, test.features) < threshold).float().mean())
        return temperature, threshold, ece, flagged

    print("| hold-out images | temperature, mean ± sd | unfamiliar threshold, mean ± sd | test ECE, mean (worst) "
          "| test photos flagged, mean (range; goal at most 5%) |")
    print("|---:|---:|---:|---:|---:|")
    for size in (s for s in SIZES if s <= len(fit_y)):
        draws = [fitted(torch.randperm(len(fit_y), generator=torch.Generator().manual_seed(d))[:size])
                 for d in range(args.draws if size < len(fit_y) else 1)]
        temperatures, thresholds, eces, flagged = (list(column) for column in zip(*draws))
        print(f"| {size:,} | {statistics.mean(temperatures):.3f} ± {spread(temperatures):.3f} "
              f"| {statistics.mean(thresholds):.2f} ± {spread(thresholds):.2f} "
              f"| {100 * statistics.mean(eces):.2f}% ({100 * max(eces):.2f}%) "
              f"| {100 * statistics.mean(flagged):.2f}% ({100 * min(flagged):.2f} to {100 * max(flagged):.2f}%) |")


if __name__ == "__main__":
    main()
