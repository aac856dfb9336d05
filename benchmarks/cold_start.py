"""Cold start: from ``python app.py`` to its "starting" page, to the first HTTP 200 (the app), and to the first
prediction, a few times.

    python benchmarks/cold_start.py [--repeat 3]

Each run starts the app on a free local port and polls its page every 50 ms; as soon as the app answers 200,
a gradio_client Client connects and sends one drawing to ``/classify`` (model ``mnist``). All times count from the
moment the process is started. Goals on a 2-core machine: the app and its first prediction within 10 s each; the
starting page within 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gradio_client import handle_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import client, example_drawings, serving  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    runs = []
    with tempfile.TemporaryDirectory() as folder:
        drawing = example_drawings(Path(folder))[7]
        for _ in range(args.repeat):
            with serving("app.py") as app:
                session = client(app.url)
                label = session.predict(handle_file(str(drawing)), "mnist", api_name="/classify")["label"]
                first_prediction = time.perf_counter() - app.started
                session.close()
            runs.append((app.seconds_to_answer, app.seconds_to_200, first_prediction, label))

    print(f"cold start of python app.py, {args.repeat} runs")
    print("| run | to the starting page s | to first HTTP 200 s | to first prediction s | label |")
    print("|---|---:|---:|---:|---|")
    for i, (to_answer, to_200, to_prediction, label) in enumerate(runs, 1):
        print(f"| {i} | {to_answer:.2f} | {to_200:.1f} | {to_prediction:.1f} | {label} |")
    medians = [statistics.median(run[i] for run in runs) for i in (0, 1, 2)]
    print(f"| median | **{medians[0]:.2f}** | **{medians[1]:.1f}** | **{medians[2]:.1f}** | |")


if __name__ == "__main__":
    main()
