"""How far a rule on the shipped photo model's features can flag photos it cannot know, and where no such rule can:

    python benchmarks/photo_rule_limits.py --data-dir DIR

1. Visitors' photos of the ten classes: CIFAR-10 test photos as a phone sends them (enlarged to 256-800 pixels, a
   third framed wider, a third cropped tighter, saved as JPEG at quality 60-95, read back as the app reads an
   upload), flagged by the shipped rule, against the same photos as CIFAR-10 keeps them.
2. Each whole outside photo's rank among the test photos on the shipped rule's score: the share of test photos that
   look less familiar. A photo of rank r is flagged by no threshold on this score that flags fewer than r of the
   test photos (per-class thresholds move that by a class' share, not past it).
3. The probe (``unfamiliar.probe``) fitted again, its thresholds set as ``calibrate`` sets them (``by_class``, 4% of
   the fit photos): as shipped; keeping phone-style training photos too; against virtual outliers too, drawn from
   the tails of class Gaussians over its features (VOS, Du, Wang, Cai and Li, 2022, "VOS: Learning What You Don't
   Know by Virtual Outlier Synthesis", ICLR; there during a fine-tune, here for the probe alone); and against random
   crops of a third of the outside photos' sources (outlier exposure with real photos), the other thirds to choose
   and to report on, the photos the page offers always among those reported on.

Outside photos: ``outside_photos()`` and, where Debian's wallpaper packages are installed (``apt-get install
mate-backgrounds ukui-wallpapers gnome-backgrounds lomiri-wallpapers``), their pictures too, whole and as quarters.
It writes nothing; some 20 minutes on two cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vit_demo.data import preprocess  # noqa: E402
from vit_demo.data.datasets import load_split  # noqa: E402
from vit_demo.data.outside_photos import _pictures, outside_photos  # noqa: E402
from vit_demo.interpret import unfamiliar  # noqa: E402
from vit_demo.interpret.unfamiliar import Outputs  # noqa: E402
from vit_demo.training.calibrate import data_for  # noqa: E402
from vit_demo.weights import load_weights  # noqa: E402

WALLPAPERS = Path("/usr/share/backgrounds")
PAGE_PHOTOS = ("astronaut.png", "rocket.jpg", "coffee.png")  # the "Also try" photos and the large coffee cup
PHONE_PHOTOS = 1500  # test photos sent as a phone sends them: every k-th, so every class
CROPS = 150  # random crops of each training source
SEED = 7


def as_a_phone_sends(photos: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """uint8 photos (N, 3, 32, 32) enlarged, reframed and recompressed, read back as the app reads an upload."""
    sent = []
    for i, photo in enumerate(photos):
        side = int(rng.integers(256, 801))
        image = Image.fromarray(photo.permute(1, 2, 0).numpy()).resize((side, side), Image.BICUBIC)
        if i % 3 == 1:  # framed wider, on the colour of its corner
            w, h = (int(side * rng.uniform(1.0, 1.25)) for _ in range(2))
            framed = Image.new("RGB", (w, h), image.getpixel((0, 0)))
            framed.paste(image, (int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))))
            image = framed
        elif i % 3 == 2:  # cropped tighter
            s = int(side * rng.uniform(0.8, 0.95))
            x, y = (int(v) for v in rng.integers(0, side - s + 1, 2))
            image = image.crop((x, y, x + s, y + s))
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=int(rng.integers(60, 96)))
        sent.append(preprocess.preprocess_photo(preprocess.open_image(buffer.getvalue())))
    return torch.from_numpy(np.stack(sent)).permute(0, 3, 1, 2)


def outside_sources() -> list[tuple[str, np.ndarray]]:
    """Every outside picture, the package's and the installed wallpapers' (no drawings of one flat colour)."""
    found = outside_photos()
    for path in sorted(p for p in WALLPAPERS.rglob("*") if p.suffix.lower() in (".jpg", ".png", ".webp")):
        if re.search(r"_\d+x\d+$", path.stem):  # another size of a wallpaper already read (Elephants_3840x2160)
            continue
        with Image.open(path) as image:
            image = image.convert("RGB")
            image.thumbnail((1024, 1024), Image.LANCZOS)
            found += _pictures(path.name, image)
    return found


def readable(pictures: list[tuple[str, np.ndarray]]) -> tuple[list[str], torch.Tensor]:
    """The pictures the app reads (not one flat colour), as (names, (N, 3, 32, 32) uint8)."""
    names, images = [], []
    for name, picture in pictures:
        try:
            images.append(preprocess.preprocess_photo(np.ascontiguousarray(picture)))
        except preprocess.NothingDrawn:
            continue
        names.append(name)
    return names, torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)


def source_of(name: str) -> str:
    return name if "#face" in name else name.split("#quarter")[0]


def roles(names: list[str]) -> np.ndarray:
    """0: crops trained on, 1: chosen on, 2: reported on; by source, every third; faces by number; the page's
    photos always reported on."""
    sources = sorted({source_of(n) for n in names if "#face" not in n and source_of(n) not in PAGE_PHOTOS})
    role = {s: i % 3 for i, s in enumerate(sources)} | {s: 2 for s in PAGE_PHOTOS}
    return np.array([int(n.split("#face")[1]) % 3 if "#face" in n else role[source_of(n)] for n in names])


def crops(pictures: list[tuple[str, np.ndarray]], rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """``CROPS`` random square crops of each whole picture (a quarter to all of its shorter side), half mirrored."""
    found = []
    for name, picture in pictures:
        if "#quarter" in name:
            continue
        h, w = picture.shape[:2]
        for _ in range(CROPS if "#face" not in name else 5):
            s = int(min(h, w) * rng.uniform(0.25 if "#face" not in name else 0.8, 1.0))
            y, x = int(rng.integers(0, h - s + 1)), int(rng.integers(0, w - s + 1))
            crop = picture[y : y + s, x : x + s]
            found.append((name, crop[:, ::-1] if rng.random() < 0.5 else crop))
    return found


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


def joined(*found: Outputs) -> Outputs:
    return Outputs(torch.cat([f.logits for f in found]), torch.cat([f.features for f in found]))


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
    phone = run(as_a_phone_sends(data.measure[0][sent], rng))
    names, images = readable(pictures := outside_sources())
    outside, role = run(images), roles(names)
    flags = lambda rule, found: rule.flags(found.logits, temperature, found.features)  # noqa: E731
    rate = lambda rule, found: 100 * float(flags(rule, found).double().mean())  # noqa: E731

    print(f"{len(names)} outside pictures of {len({source_of(n) for n in names})} sources; shipped rule: "
          f"{shipped.score}")
    print(f"\n1. {PHONE_PHOTOS:,} test photos, {PHONE_PHOTOS // 10} of each class, flagged: as CIFAR-10 keeps them "
          f"{rate(shipped, Outputs(test.logits[sent], test.features[sent])):.2f}%, "
          f"as a phone sends them {rate(shipped, phone):.2f}%")
    scores = shipped.scores(test.logits, temperature, test.features)
    print("\n2. whole photos not flagged, and the share of test photos that look less familiar (their rank):")
    missed = ~flags(shipped, outside)
    for name, found, miss in zip(names, shipped.scores(outside.logits, temperature, outside.features), missed):
        if "#" not in name and miss:
            print(f"   {name}: {100 * float((scores < found).double().mean()):.1f}%")

    train_x, _ = load_split("cifar10", args.data_dir, "train")
    unfitted = unfamiliar.probe_photos(train_x, data.fit[0])
    sets = unfamiliar.probe_sets(model, unfitted)
    phone_keep = run(as_a_phone_sends(unfitted[-2500:], rng))
    trained_on = {n for n, r in zip(names, role) if r == 0}
    crop_names, crop_images = readable(crops([(n, p) for n, p in pictures if n in trained_on], rng))
    real = run(crop_images)
    colour = Outputs(sets.keep.logits[: unfamiliar.TRAIN_IMAGES], sets.keep.features[: unfamiliar.TRAIN_IMAGES])
    layers = shipped.layers
    virtual = virtual_outliers(colour, colour.logits.argmax(1), layers, generator)  # by the class read
    variants = {"as shipped": (sets.keep, sets.outliers),
                "+ phone-style photos kept": (joined(sets.keep, phone_keep), sets.outliers),
                "+ VOS's virtual outliers": (sets.keep, joined(sets.outliers, virtual)),
                f"+ {len(crop_names):,} crops of a third of the sources": (sets.keep, joined(sets.outliers, real)),
                "+ phone-style kept and the crops": (joined(sets.keep, phone_keep), joined(sets.outliers, real))}
    probe = next(c for c in unfamiliar.CANDIDATES if c.score == "probe")  # calibrate's: every layer's [CLS]
    print(f"\n3. the probe fitted again ({int((role == 1).sum())} pictures to choose on, {int((role == 2).sum())} "
          f"to report on):\n")
    print("| probe | test photos | most of a class | as a phone sends them | choose | report | the page's photos |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, (keep, flag) in variants.items():
        rule = unfamiliar.fit(probe, fit, fit_y, fit, temperature, share,
                              dataclasses.replace(sets, keep=keep, outliers=flag))  # the probe learns from these alone
        rule = unfamiliar.by_class(rule, fit, temperature, share)
        if label == "as shipped":  # the same photos, outliers and fit as calibrate's: the same rule
            assert np.allclose(rule.class_thresholds, shipped.class_thresholds, atol=1e-6), "not the shipped rule"
        test_flags = flags(rule, test)
        worst = max(float(test_flags[test_y == k].double().mean()) for k in range(10))
        outside_flags = flags(rule, outside)
        page = [n for n in PAGE_PHOTOS if outside_flags[names.index(n)]]
        choose, report = (100 * float(outside_flags[role == r].double().mean()) for r in (1, 2))
        print(f"| {label} | {100 * float(test_flags.double().mean()):.2f}% | {100 * worst:.1f}% | "
              f"{rate(rule, phone):.2f}% | {choose:.1f}% | {report:.1f}% | "
              f"{', '.join(page) or 'none'} flagged |")
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
