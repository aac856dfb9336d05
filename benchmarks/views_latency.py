"""Server time for one drawing in the app, step by step, beside the bare model forward pass.

    python benchmarks/views_latency.py [--repeat 100] [--format jpeg]

It feeds the app's own handler the value the browser canvas sends (a 112x112 drawing) and then
encodes the pictures as Gradio does before sending them (gr.Image's postprocess).
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import timed  # noqa: E402  (benchmarks/ is on sys.path: scripts run from it)
import gradio as gr  # noqa: E402

from vit_demo import explain, render, ui  # noqa: E402


def canvas_value() -> str:
    """A 7 as the browser canvas sends it: 112x112 bytes, ink = 255, base64."""
    image = Image.new("L", (336, 336), 255)
    ImageDraw.Draw(image).line([(90, 70), (250, 70), (150, 280)], fill=0, width=18, joint="curve")
    small = 255 - np.asarray(image.resize((112, 112), Image.BILINEAR))
    return base64.b64encode(small.astype(np.uint8).tobytes()).decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--format", default=ui.VIEW_FORMAT, help="image format Gradio encodes the pictures in")
    args = parser.parse_args()

    value = canvas_value()
    clf = ui.classifier("mnist")
    drawing = ui.decode_drawing(value)
    x = torch.from_numpy(clf.preprocess(drawing))[None, None].to(clf.device)
    analysis = ui.analyse("mnist", drawing)
    depth = clf.info.config.depth
    views = ui.on_drawing(value, depth, ui.MEAN)
    pictures = [v for v in views if isinstance(v, Image.Image)]
    cache = tempfile.mkdtemp()

    def encode_all() -> None:
        for picture in pictures:
            gr.processing_utils.save_pil_to_cache(picture, cache, format=args.format)

    with torch.inference_mode():
        forward = timed(lambda: clf.model(x), args.repeat)
        forward_attention = timed(lambda: clf.model(x, return_attention=True), args.repeat)
    rows = [
        ("bare model forward (logits only)", forward),
        ("model forward with attention weights", forward_attention),
        ("decode + preprocess the canvas value", timed(lambda: clf.preprocess(ui.decode_drawing(value)), args.repeat)),
        ("analyse: preprocess + model + attention", timed(lambda: ui.analyse("mnist", drawing), args.repeat)),
        ("explanation maps ([CLS], patch, rollout)", timed(lambda: (explain.token_attention_maps(analysis.attention),
                                                                   explain.token_attention_maps(analysis.attention, 25),
                                                                   analysis.rollout), args.repeat)),
        ("render all pictures", timed(lambda: ui.all_views(analysis, depth, ui.MEAN), args.repeat)),
        (f"encode the {len(pictures)} pictures ({args.format}) as Gradio does", timed(encode_all, args.repeat)),
        ("whole handler (on_drawing)", timed(lambda: ui.on_drawing(value, depth, ui.MEAN), args.repeat)),
        ("whole handler + encoding = server time", timed(lambda: (ui.on_drawing(value, depth, ui.MEAN), encode_all()),
                                                         args.repeat)),
    ]
    print(f"device {clf.device}, torch threads {torch.get_num_threads()}, {args.repeat} runs each")
    print("| step | median ms | p95 ms |")
    print("|---|---:|---:|")
    for name, (median, p95) in rows:
        print(f"| {name} | {median:.2f} | {p95:.2f} |")
    print(f"server time / bare forward: {rows[-1][1][0] / forward[0]:.1f}x")


if __name__ == "__main__":
    main()
