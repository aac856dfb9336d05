"""What a long command is doing, said on stderr while stdout keeps its JSON lines clean: ``import``, ``onnx``,
``static`` and ``calibrate`` take from seconds to many minutes, and a command that says nothing looks hung.

Where stderr is a terminal, a tqdm bar over the command's steps names the step under way (as train.py's bars do);
where it is not (a log, a pipe), one plain line a step as it begins, with the seconds so far, and one when all are
done. The functions the commands call take a ``Steps`` and say nothing without one (the app, train.py and the tests
call them too).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm


class Steps:
    """The steps of one command, ``what`` (its name, in front of every line), said on ``stream`` (stderr) as each
    begins: ``step(name)``. ``total`` steps are expected; ``expect(n)`` adds n more where a step finds how many
    follow (the graphs of a model once it is loaded). ``Steps()``, with no ``what``, says nothing."""

    def __init__(self, what: str | None = None, total: int = 0, stream: TextIO | None = None) -> None:
        self.what, self.total, self.begun = what, total, 0
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()
        self.bar = None
        if what is not None and self.stream.isatty():
            self.bar = tqdm(total=total, desc=what, file=self.stream, unit="step", leave=True, dynamic_ncols=True,
                            bar_format="{desc}: {bar:16} {n_fmt}/{total_fmt} [{elapsed}{postfix}]")

    def expect(self, more: int) -> None:
        """``more`` steps to come beside those expected so far."""
        self.total += more
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def step(self, name: str) -> None:
        """The step ``name`` begins (the one before it, if any, is done)."""
        if self.what is None:
            return
        if self.bar is not None:
            if self.begun:
                self.bar.update()
            self.bar.set_postfix_str(name)
        else:
            print(f"{self.what} [{self.begun + 1}/{max(self.total, self.begun + 1)}, "
                  f"{time.perf_counter() - self.started:.0f} s] {name}", file=self.stream, flush=True)
        self.begun += 1

    def say(self, message: str) -> None:
        """A line on the stream, said whatever ``what`` is (above the bar, where there is one)."""
        if self.bar is not None:
            self.bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def close(self) -> None:
        """Every step is done: the bar is filled and left on screen, or a line says how long it all took."""
        if self.what is None:
            return
        if self.bar is not None:
            self.bar.update(self.begun - self.bar.n)
            self.bar.set_postfix_str("done")
            self.bar.close()
        else:
            print(f"{self.what}: done, {self.begun} steps in {time.perf_counter() - self.started:.1f} s",
                  file=self.stream, flush=True)
        self.what = None

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is None:
            self.close()
            return
        if self.bar is not None:  # a failure: the bar stays where it stopped, the error's line below it
            self.bar.close()
        self.what = None
