"""How far a rule on the shipped photo model's features can flag photos it cannot know, and where no such rule can:

    python benchmarks/photo_rule_limits.py --data-dir DIR

1. Visitors' photos of the ten classes: CIFAR-10 test photos as a phone sends them (enlarged to 256-800 pixels, a
   third framed wider, a third cropped tighter, saved as JPEG at quality 60-95, read back as the app reads an
   upload), flagged by the shipped rule, against the same photos as CIFAR-10 keeps them.
2. Each whole outside photo's rank among the test photos on the shipped rule's score: the share of test photos that
   look less familiar. A photo of rank r is flagged by no threshold on this score that flags fewer than r of the
   test photos (per-class thresholds move that by a class' share, not past it).
3. The two read-outs (``unfamiliar.probe``, linear, and ``unfamiliar.mlp``, with a hidden layer, shipped) fitted
   again, their thresholds set as ``calibrate`` sets them (``by_class``, 4% of the fit photos): on what calibrate's
   learn from (for the shipped one it asserts that it finds the shipped thresholds again); without the training
   photos as a phone sends them that they learn to keep; without the crops of the outside pictures of the third
   they learn from (outlier exposure with real photos); without either; and against virtual outliers too, drawn
   from the tails of class Gaussians over the features (VOS, Du, Wang, Cai and Li, 2022, "VOS: Learning What You
   Don't Know by Virtual Outlier Synthesis", ICLR; there during a fine-tune, here for the read-out alone). The rates
   on the thirds they are chosen and reported on; the photos the page offers are always reported on.

Outside photos: ``outside_photos()`` and ``wallpapers()`` (``apt-get install gnome-backgrounds lomiri-wallpapers
mate-backgrounds ukui-wallpapers``), whole and as quarters. It writes nothing; 10 to 15 minutes on two cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vit_demo.data import outside_photos  # noqa: E402
from vit_demo.data.datasets import load_split  # noqa: E402
from vit_demo.interpret import unfamiliar  # noqa: E402
from vit_demo.interpret.unfamiliar import Outputs  # noqa: E402
from vit_demo.training.calibrate import data_for  # noqa: E402
from vit_demo.unfamiliar_rule import READ_OUTS  # noqa: E402
from vit_demo.weights import load_weights  # noqa: E402

PHONE_PHOTOS = 1500  # test photos sent as a phone sends them: every k-th, so every class
SEED = 7


def virtual_outliers(keep: Outputs, labels: torch.Tensor, layers: tuple[int, ...], generator: torch.Generator,
                     per_class: int = 500) -> Outputs:
    """VOS's virtual outliers: of 10 x ``per_class`` draws from each class' Gaussian over the [CLS] features of
    ``layers`` (class means, one shared covariance, of ``keep`` (N, ...) with ``labels`` (N,)), the least likely.
    Only the features of ``layers`` are set: the probe reads no other."""
    x = keep.features[:, list(layers)].flatten(1).double()  # (N, P * D)
    means = torch.stack([x[labels == k].mean(0) for k in range(int(labels.max()) + 1)])  # (K, P * D)
    centred = x - means[labels]
    root = torch.linalg.cholesky(centred.T @ centred / len(x) + 1e-4 * torch.eye(x.shape[1], dtype=torch.float64))
    drawn = []
    for mean in means:
        z = torch.randn(10 * per_class, x.shape[1], generator=generator, dtype=torch.float64)
        drawn.append(mean + z[z.square().sum(1).argsort()[-per_class:]] @ root.T)  # the farthest: least likely
    found = torch.zeros(len(means) * per_class, keep.features.shape[1], keep.features.shape[2])
    found[:, list(layers)] = torch.cat(drawn).float().reshape(len(found), len(layers), -1)
    return Outputs(torch.zeros(len(found), keep.logits.shape[1]), found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="dataset root (cifar10/<split>/<class>/)")
    args = parser.parse_args()
    start, rng, generator = time.perf_counter(), np.random.default_rng(SEED), torch.Generator().manual_seed(SEED)
    info, model = load_weights("cifar10", "cpu")
    temperature, share, shipped = info.temperature, unfamiliar.FLAGGED_SHARE["cifar10"], info.unfamiliar
    data = data_for(info.folder, info.dataset, args.data_dir)
    run = lambda images: unfamiliar.outputs(model, images)  # noqa: E731
    fit, test = run(data.fit[0]), run(data.measure[0])
    fit_y, test_y = data.fit[1], data.measure[1]
    sent = torch.linspace(0, len(test_y) - 1, PHONE_PHOTOS).long()  # (PHONE_PHOTOS,): spread over the classes
    phone = run(unfamiliar.as_a_phone_sends(data.measure[0][sent], rng))
    pictures = unfamiliar.outside_pictures()
    names, role, outside = pictures.names, pictures.roles, run(pictures.images)
    flags = lambda rule, found: rule.flags(found.logits, temperature, found.features)  # noqa: E731
    rate = lambda rule, found: 100 * float(flags(rule, found).double().mean())  # noqa: E731

    print(f"{len(names)} outside pictures of {len({outside_photos.source_of(n) for n in names})} sources; shipped "
          f"rule: {shipped.score}")
    print(f"\n1. {PHONE_PHOTOS:,} test photos, {PHONE_PHOTOS // 10} of each class, flagged: as CIFAR-10 keeps them "
          f"{rate(shipped, Outputs(test.logits[sent], test.features[sent])):.2f}%, "
          f"as a phone sends them {rate(shipped, phone):.2f}%")
    scores = shipped.scores(test.logits, temperature, test.features)
    print("\n2. whole photos not flagged, and the share of test photos that look less familiar (their rank):")
    missed = ~flags(shipped, outside)
    for name, found, miss in zip(names, shipped.scores(outside.logits, temperature, outside.features), missed):
        if "#" not in name and miss:
            print(f"   {name}: {100 * float((scores < found).double().mean()):.1f}%")

    # What calibrate's probe learns from (unfamiliar.image_sets), then the same without some of it.
    train_x, _ = load_split("cifar10", args.data_dir, "train")
    _, crops = unfamiliar.photos_of(pictures.crops(np.random.default_rng(unfamiliar.SEEDS["crops"])))
    sets = unfamiliar.probe_sets(model, unfamiliar.probe_photos(train_x, data.fit[0]), crops)
    kept = unfamiliar.TRAIN_IMAGES + unfamiliar.GREY_TRAIN_IMAGES  # where the phone-style photos begin
    without_phone = Outputs(sets.keep.logits[:kept], sets.keep.features[:kept])
    colour = Outputs(sets.keep.logits[: unfamiliar.TRAIN_IMAGES], sets.keep.features[: unfamiliar.TRAIN_IMAGES])
    no_crops = Outputs(sets.crops.logits[:0], sets.crops.features[:0])
    virtual = virtual_outliers(colour, colour.logits.argmax(1), shipped.layers, generator)  # by the class read
    variants = {"as calibrate's": sets,
                "without the phone-style photos": dataclasses.replace(sets, keep=without_phone),
                f"without the {len(crops):,} crops": dataclasses.replace(sets, crops=no_crops),
                "without either": dataclasses.replace(sets, keep=without_phone, crops=no_crops),
                "+ VOS's virtual outliers": dataclasses.replace(sets, crops=Outputs.joined(sets.crops, virtual))}
    read_outs = [c for c in unfamiliar.CANDIDATES if c.score in READ_OUTS]  # every layer's [CLS], each
    print(f"\n3. the read-outs fitted again ({int((role == outside_photos.CHOOSE).sum())} pictures to choose on, "
          f"{int((role == outside_photos.REPORT).sum())} to report on):\n")
    print("| read-out | learnt from | test photos | most of a class | as a phone sends them | choose | report | "
          "the page's photos |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for candidate in read_outs:
        for label, learnt in variants.items():
            rule = unfamiliar.fit(candidate, fit, fit_y, fit, temperature, share, learnt)  # it learns from these alone
            rule = unfamiliar.by_class(rule, fit, temperature, share)
            if label == "as calibrate's" and candidate.score == shipped.score:  # calibrate's photos, outliers and fit
                assert np.allclose(rule.class_thresholds, shipped.class_thresholds, atol=1e-6), "not the shipped rule"
            test_flags = flags(rule, test)
            worst = max(float(test_flags[test_y == k].double().mean()) for k in range(10))
            outside_flags = flags(rule, outside)
            page = [n for n in outside_photos.PAGE_PHOTOS if outside_flags[names.index(n)]]
            choose, report = (100 * float(outside_flags[role == r].double().mean())
                              for r in (outside_photos.CHOOSE, outside_photos.REPORT))
            print(f"| {candidate.score} | {label} | {100 * float(test_flags.double().mean()):.2f}% | "
                  f"{100 * worst:.1f}% | {rate(rule, phone):.2f}% | {choose:.1f}% | {report:.1f}% | "
                  f"{', '.join(page) or 'none'} flagged |")
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
