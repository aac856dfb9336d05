"""Many users at once: N gradio_client users each send M drawings (or photos) to ``/classify`` (or ``/export``) as
fast as answers come.

    python benchmarks/serve_load.py [--users 50] [--drawings 10] [--apps do-nothing,app]
    python benchmarks/serve_load.py --apps app,app-glibc-arenas --users 50 --drawings 100   # 5,000 requests: RSS growth
    python benchmarks/serve_load.py --model cifar10                     # photos instead of drawings
    python benchmarks/serve_load.py --endpoint /export                  # a slide's PNG of each instead of its label

For each app (the do-nothing baseline, benchmarks/noop_app.py, then the app, python app.py), in the
same run, it starts the server on a free local port, connects every user (one gradio_client Client,
that is one session, each) and sends one untimed request per user, so that sessions, connections and
caches exist; then it reads the server's RSS ("before"), releases all users at once, and reads the
RSS again when the last one is done ("after"). Each request is timed from submit to its answer (for
``/export``, the slide's file downloaded); a request that fails or gets no answer within
--timeout is an error, counted by kind ("busy" is Gradio's queue-full answer).

The client side: gradio_client is pure Python (an HTTP upload, a queue join, an event stream, and for
``/export`` a file download per request) and costs a few ms of CPU per request. All users as threads of one
process would share one GIL, so the load generator could become the bottleneck and flatten the
difference between the apps; so the users are spread over --processes processes (default 2, one per
core: more processes only add context switches on a 2-core machine), each running its users as
threads. The client shares the machine's cores with the server either way; the table prints the
clients' CPU time per request, so it shows how much of the machine the load generator itself took.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import REPO, api_arguments, client, example_drawings, example_photos, p50_p95, serving  # noqa: E402

# name: the server's script and environment. "app-glibc-arenas" is the app with glibc's own limit on its heaps (8 a
# core), not the app's one a worker (vit_demo.app.serving.limit_malloc_arenas): what that limit saves.
APPS = {"do-nothing": (REPO / "benchmarks" / "noop_app.py", {}), "app": (REPO / "app.py", {}),
        "app-glibc-arenas": (REPO / "app.py", {"MALLOC_ARENA_MAX": str(8 * (os.cpu_count() or 1))})}
ENDPOINTS = ("/classify", "/export")
MODELS = {"mnist": "drawings", "cifar10": "photos"}  # the model -> what it is sent


def error_kind(exc: BaseException) -> str:
    from gradio_client.exceptions import AppError
    from gradio_client.utils import QueueError

    if isinstance(exc, QueueError):
        return "busy"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, AppError):
        return f"app error: {exc}"[:80]
    return type(exc).__name__


def user_process(url: str, endpoint: str, model: str, images: list[Path], users: int, requests: int, timeout: float,
                 ready: multiprocessing.Queue, go: multiprocessing.Event, results: multiprocessing.Queue) -> None:
    """Connect ``users`` clients, warm each up with one request, wait for ``go``, then send ``requests`` each."""
    try:
        clients = [client(url) for _ in range(users)]
    except Exception as exc:  # noqa: BLE001  (sent to the parent, which stops the run with it)
        ready.put(exc)
        return
    for i, session in enumerate(clients):
        try:
            session.predict(*api_arguments(endpoint, model, images[i % len(images)]), api_name=endpoint)
        except Exception:  # noqa: BLE001  (untimed warm-up: a failure here is not part of the measurement)
            pass
    ready.put(users)
    go.wait()
    records: list[tuple[float, float, str | None]] = []  # (start, end, error kind)
    cpu_started = resource.getrusage(resource.RUSAGE_SELF)

    def user(index: int, session) -> None:
        for j in range(requests):
            start, error = time.perf_counter(), None
            try:
                image = images[(index + j) % len(images)]
                session.submit(*api_arguments(endpoint, model, image), api_name=endpoint).result(timeout=timeout)
            except Exception as exc:  # noqa: BLE001  (every failure is counted, by kind)
                error = error_kind(exc)
            records.append((start, time.perf_counter(), error))

    threads = [threading.Thread(target=user, args=(i, c)) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    results.put((records, cpu.ru_utime + cpu.ru_stime - cpu_started.ru_utime - cpu_started.ru_stime))
    for session in clients:
        session.close()


def collect(queue: multiprocessing.Queue, workers: list, timeout: float) -> list:
    """One item from each worker, failing fast (with its error) when a worker dies instead."""
    items, deadline = [], time.monotonic() + timeout
    while len(items) < len(workers):
        try:
            item = queue.get(timeout=1)
        except Exception:  # noqa: BLE001  (queue.Empty: check the workers, then wait on)
            dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"client processes failed (exit codes {dead}) or timed out") from None
            continue
        if isinstance(item, BaseException):
            raise RuntimeError("a client process failed") from item
        items.append(item)
    return items


def load(script: Path, env: dict[str, str], images: list[Path], args: argparse.Namespace) -> dict:
    """Run the load against one server (``script``, with the environment variables ``env``); its figures."""
    context = multiprocessing.get_context("spawn")  # no fork of a process with threads
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    processes = min(args.processes, args.users)
    shares = [args.users // processes + (i < args.users % processes) for i in range(processes)]
    with serving(script, **env) as server:
        workers = [context.Process(target=user_process, args=(server.url, args.endpoint, args.model, images, share,
                                                              args.requests, args.timeout, ready, go, results))
                   for share in shares]
        for worker in workers:
            worker.start()
        try:
            collect(ready, workers, timeout=600)
            rss_before = server.rss_mb()
            go.set()
            outcomes = collect(results, workers, timeout=args.timeout * args.requests + 600)
            rss_after = server.rss_mb()
        finally:
            for worker in workers:
                worker.join(timeout=60)
                if worker.is_alive():
                    worker.kill()
    records = [record for process_records, _ in outcomes for record in process_records]
    ok = [(end - start) * 1000 for start, end, error in records if error is None]
    wall = max(end for _, end, _ in records) - min(start for start, _, _ in records)
    p50, p95 = p50_p95(ok) if ok else (float("nan"), float("nan"))
    return {"requests": args.users * args.requests, "completed": len(ok),
            "errors": collections.Counter(error for _, _, error in records if error is not None),
            "throughput": len(ok) / wall, "p50": p50, "p95": p95, "rss_before": rss_before, "rss_after": rss_after,
            "client_cpu_ms": 1000 * sum(cpu for _, cpu in outcomes) / len(records), "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--requests", "--drawings", type=int, default=10, help="requests per user, one after another")
    parser.add_argument("--endpoint", choices=ENDPOINTS, default=ENDPOINTS[0],
                        help="each image's label and probabilities, or a slide's PNG of it (where [CLS] looks)")
    parser.add_argument("--model", choices=MODELS, default="mnist",
                        help="the example digits as drawings, or the example photos")
    parser.add_argument("--apps", default="do-nothing,app", help=f"comma-separated, from {', '.join(APPS)}")
    parser.add_argument("--processes", type=int, default=2, help="client processes the users are spread over")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a request may wait for its answer")
    args = parser.parse_args()
    if unknown := set(args.apps.split(",")) - APPS.keys():
        parser.error(f"--apps: no app {', '.join(sorted(unknown))} (choose from {', '.join(APPS)})")

    results = {}
    with tempfile.TemporaryDirectory() as folder:
        images = example_drawings(Path(folder)) if args.model == "mnist" else example_photos()
        for name in args.apps.split(","):
            results[name] = load(*APPS[name], images, args)

    print(f"{args.users} concurrent gradio_client users x {args.requests} {MODELS[args.model]} each to {args.endpoint} "
          f"({args.model}), users spread over {min(args.processes, args.users)} client processes")
    print("| app | requests | completed | errors | throughput req/s | p50 ms | p95 ms | RSS before MiB | "
          "RSS after MiB | RSS growth | client CPU ms/request |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        errors = ", ".join(f"{kind}: {n}" for kind, n in r["errors"].most_common()) or "0"
        growth = (r["rss_after"] - r["rss_before"]) / r["rss_before"]
        print(f"| {name} | {r['requests']} | {r['completed']} | {errors} | {r['throughput']:.1f} | {r['p50']:.0f} | "
              f"{r['p95']:.0f} | {r['rss_before']:.0f} | {r['rss_after']:.0f} | {growth:+.1%} | "
              f"{r['client_cpu_ms']:.1f} |")
    if {"app", "do-nothing"} <= results.keys():
        app, base = results["app"], results["do-nothing"]
        print(f"app / do-nothing: throughput {app['throughput'] / base['throughput']:.2f}x, "
              f"p95 {app['p95'] / base['p95']:.2f}x")


if __name__ == "__main__":
    main()
