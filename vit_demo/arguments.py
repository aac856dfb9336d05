"""Argument types the two command lines share (``python -m vit_demo`` and ``train.py``): a number out of range is
refused by argparse in one line, before anything runs, instead of failing deep inside with a traceback (or, worse,
running with it: ``--limit -3`` once left out the last three images)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number_in(kind: type[int] | type[float], least: float, most: float | None = None) -> Callable[[str], float]:
    """An argparse type: a whole number (``kind`` int) or a finite number (float) from ``least`` to ``most`` (None: no
    upper bound)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None
        if not math.isfinite(value) or value < least or (most is not None and value > most):
            bounds = f"at least {least:g}" if most is None else f"{least:g} to {most:g}"
            raise argparse.ArgumentTypeError(f"must be {'' if kind is int else 'a number '}{bounds}, not {text}")
        return value
    return parse


def int_in(least: int, most: int | None = None) -> Callable[[str], int]:
    return number_in(int, least, most)


def float_in(least: float, most: float | None = None) -> Callable[[str], float]:
    return number_in(float, least, most)


positive_int = int_in(1)
