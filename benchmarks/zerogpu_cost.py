"""Where the app's models should run on a ZeroGPU Space: the CPU work of one image beside what a call through
``@spaces.GPU`` adds before any GPU is touched (docs/spaces.md).

    python benchmarks/zerogpu_cost.py [--repeat 50]

On ZeroGPU a decorated call asks ZeroGPU's scheduler for a GPU, runs in a worker forked from the app's process
(whose CUDA is started there), and sends its arguments and answer across by pickle. The scheduler and CUDA can't
be measured without ZeroGPU; the fork and the pickling can, here, on the app's own process with both models loaded.
The work of one image is what the server runs for a page that asks it to (``?model=server``): the page's request
for a new image (benchmarks/common.py: forward_request) read as the server function reads it, then its model graph
run (``forward.run_graph``, the decorated call: logits, attention, logit lens, features).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import REPO, forward_request, timed  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)
from vit_demo.app import forward, service  # noqa: E402

EXAMPLES = {"mnist": REPO / "examples" / "digits" / "7.png", "cifar10": REPO / "examples" / "photos" / "ship.png"}


def echo(inbox, outbox) -> None:
    """A forked worker: send back what it is given."""
    outbox.put(inbox.get())


def through_a_fork(answer) -> None:
    """Fork a worker of this process, send it ``answer`` and take it back, pickled (as bytes: torch's own reductions
    would pass its tensors as shared memory, which dies with the worker)."""
    fork = multiprocessing.get_context("fork")
    inbox, outbox = fork.SimpleQueue(), fork.SimpleQueue()
    worker = fork.Process(target=echo, args=(inbox, outbox))
    worker.start()
    inbox.put(pickle.dumps(answer))
    pickle.loads(outbox.get())
    worker.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the app's server runs
    os.environ.setdefault("VIT_DEMO_DEVICE", "cpu")  # the CPU's cost, even where there is a GPU

    rows, answers = {}, {}
    for name, example in EXAMPLES.items():
        clf = service.classifier(name)
        image = clf.preprocess(str(example))
        x = clf.batch([image])
        c = clf.info.config
        request = forward_request(name, image, c.depth, c.heads)
        graph = forward.graphs(name)[request["graph"]]
        inputs = {key: forward.read_tensor(key, request["inputs"][key], shape) for key, shape in graph.inputs.items()}
        answer = answers[name] = forward.run_graph(name, request["graph"], inputs)
        with torch.inference_mode():
            bare = timed(lambda: clf.model(x), args.repeat)
        work = timed(lambda: forward.run_graph(name, request["graph"], inputs), args.repeat)
        pickled = timed(lambda: pickle.loads(pickle.dumps(answer)), args.repeat)
        rows[name] = (bare, work, pickled, len(pickle.dumps(answer)) / 1024)
    forked = {name: timed(lambda: through_a_fork(answers[name]), max(3, args.repeat // 5), warmup=1) for name in rows}

    print(f"torch {torch.__version__}, 1 thread, {args.repeat} runs (the fork: {max(3, args.repeat // 5)})")
    print("| step | " + " | ".join(f"{name} median ms | p95 ms" for name in rows) + " |")
    print("|---|" + "---:|---:|" * len(rows))
    steps = [("forward pass (logits only)", lambda name: rows[name][0]),
             ("the server's work for one image (the page's model graph: logits, attention, lens, features)",
              lambda name: rows[name][1]),
             ("its answer pickled and unpickled (ZeroGPU sends it across)", lambda name: rows[name][2]),
             ("fork a worker of the app's process and take the answer back", lambda name: forked[name])]
    for step, cell in steps:
        print(f"| {step} | " + " | ".join(f"{cell(name)[0]:.2f} | {cell(name)[1]:.2f}" for name in rows) + " |")
    print("answer sizes: " + ", ".join(f"{name} {rows[name][3]:.0f} KiB" for name in rows))


if __name__ == "__main__":
    main()
