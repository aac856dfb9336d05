"""Every candidate rule for unfamiliar images, measured on held-out sets (vit_demo/interpret/unfamiliar.py):

    python benchmarks/unfamiliar.py --model mnist --data-dir DIR
    python benchmarks/unfamiliar.py --model cifar10 --data-dir DIR [--probe-sensitivity]

For each candidate: the share of the dataset's own held-out images it flags (for digits: MNIST test digits written on
the canvas, the same as MNIST keeps them, and stroke digits), the share of outside images it flags on the set it
is chosen on and on the set it is reported on (non-digit drawings, or the outside pictures), and the
area under the ROC curve; then the rule chosen. The same fit and choice as ``python -m vit_demo calibrate``, with the
weights' own temperature; it writes nothing. With ``--probe-sensitivity`` (photos), the two read-outs are also
fitted again with two other draws of the outliers made in code, and the linear probe with each of three penalties.
The first run draws some 24,000 digits and drawings (a few minutes on two cores) and keeps them in the cache folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vit_demo.interpret import unfamiliar  # noqa: E402
from vit_demo.training.calibrate import data_for  # noqa: E402
from vit_demo.unfamiliar_rule import READ_OUTS  # noqa: E402
from vit_demo.weights import load_weights  # noqa: E402


PENALTIES = (0.3, 1.0, 3.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mnist", help="mnist, cifar10, or a path to a weights folder")
    parser.add_argument("--data-dir", required=True, help="dataset root (MNIST/raw/ or cifar10/<split>/<class>/)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--probe-sensitivity", action="store_true",
                        help="photos: fit the read-outs again with other outliers made, the probe with other penalties")
    args = parser.parse_args()
    start = time.perf_counter()
    info, model = load_weights(args.model, args.device)
    dataset = info.dataset.name
    data = data_for(info.folder, dataset, args.data_dir)
    sets = unfamiliar.image_sets(model, dataset, args.data_dir, data.fit[0], data.measure)
    share = unfamiliar.FLAGGED_SHARE[dataset]
    _, report = unfamiliar.measure(sets, info.temperature, share, unfamiliar.BY_CLASS[dataset])
    familiar = list(report["familiar_images"])
    print(f"{dataset}: thresholds flag {share:.1%} of the fit images ({data.fitted_on}); class means and covariances "
          f"from {report['train_images']:,} training images")
    print(f"held out: {', '.join(f'{name} ({n:,})' for name, n in report['familiar_images'].items())}; "
          f"{report['outside']}: {report['outside_images']['choose']:,} to choose on, "
          f"{report['outside_images']['report']:,} to report on")
    print()
    print("| candidate | " + " | ".join(familiar) + " | outside, choose | outside, report | AUC |")
    print("|---|" + "---:|" * (len(familiar) + 3))
    for row in report["candidates"]:
        name = row["name"] + ("" if row["page"] else " (not in the page)")
        cells = [f"{100 * row['flagged'][f]:.2f}%" for f in familiar]
        cells += [f"{100 * row['outside_flagged_choose']:.1f}%", f"{100 * row['outside_flagged_report']:.1f}%",
                  f"{row['separation_auc']:.3f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print(f"the model reads {100 * report['accuracy']:.2f}% of the {familiar[0]} right")
    print(f"chosen: {report['chosen']} (threshold {report['threshold']:.4f}); of the {familiar[0]} it flags, it reads "
          f"{100 * report['accuracy_on_flagged']:.1f}% right ({100 * report['accuracy_on_the_rest']:.1f}% of the rest)")
    if "class_thresholds" in report:
        print("with a threshold per class read: " + ", ".join(f"{name} {100 * rate:.2f}%" for name, rate in
                                                              report["flagged"].items()) +
              f", outside {100 * report['outside_flagged_choose']:.1f}% (choose), "
              f"{100 * report['outside_flagged_report']:.1f}% (report)")
    print(f"flagged of the {familiar[0]}, by class: " + ", ".join(
        f"{name} {100 * rate:.1f}%" for name, rate in zip(info.dataset.classes, report["flagged_by_class"])))
    print("flagged on the report set, by kind: " + ", ".join(f"{kind} {100 * rate:.0f}%"
                                                              for kind, rate in report["report_by_kind"].items()))
    if args.probe_sensitivity and sets.probe is not None:
        print()
        print("The read-outs fitted again with other outliers made (the probe also with other penalties):")
        print()
        print(f"| read-out | outliers made with | penalty | {' | '.join(familiar)} | outside, choose | "
              "outside, report |")
        print("|---|---|---:|" + "---:|" * (len(familiar) + 2))
        for candidate in (c for c in unfamiliar.CANDIDATES if c.score in READ_OUTS):
            for seed in range(unfamiliar.SEEDS["outliers"], unfamiliar.SEEDS["outliers"] + 3):
                drawn = sets.probe if seed == unfamiliar.SEEDS["outliers"] else dataclasses.replace(
                    sets.probe, made=unfamiliar.probe_outliers(model, sets.probe.photos, seed))
                for penalty in PENALTIES if candidate.score == "probe" else (None,):
                    learnt = drawn if penalty is None else dataclasses.replace(drawn, penalty=penalty)
                    rule = unfamiliar.fit(candidate, sets.train, sets.train_labels, sets.fit, info.temperature, share,
                                          learnt)
                    rate = lambda found: 100 * float(rule.flags(found.logits, info.temperature,  # noqa: E731
                                                                found.features).double().mean())
                    cells = [f"{rate(found):.2f}%" for found in sets.familiar.values()]
                    print(f"| {candidate.score} | seed {seed} | {'' if penalty is None else f'{penalty:g}'} | "
                          + " | ".join(cells) + f" | {rate(sets.choose):.1f}% | {rate(sets.report):.1f}% |")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
