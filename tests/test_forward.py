"""The server's forward pass (vit_demo/app/forward.py), for a page that can't run the model: the same raw outputs as
the graphs the page runs (onnxruntime on the same inputs), for every graph of a weights folder; and a reason, never a
traceback, for a request it can't answer."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from vit_demo.app import forward, service
from vit_demo.weights import GRAPH_FILE, PATCHING_GRAPH_FILES, RELEVANCE_GRAPH_FILE

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
EXAMPLES = service.WEIGHTS_ROOT.parent / "examples"


def tensor(array) -> dict:
    """A float32 array as the page sends it (model.js: onServer)."""
    array = np.ascontiguousarray(array, dtype="<f4")
    return {"shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


def read(reply: dict) -> dict[str, np.ndarray]:
    assert "error" not in reply, reply.get("error")
    return {name: np.frombuffer(base64.b64decode(value["data"]), "<f4").reshape(value["shape"])
            for name, value in reply["outputs"].items()}


def feeds(model: str, name: str) -> dict[str, np.ndarray]:
    """Real inputs for graph ``name`` of ``model``: two example images, a head or two off."""
    clf = service.classifier(model)
    c = clf.info.config
    paths = sorted((EXAMPLES / ("digits" if model == "mnist" else "photos")).glob("*.png"))[:2]
    images = np.stack([clf.batch([clf.preprocess(p)])[0].numpy() for p in paths])  # (2, C, H, W)
    heads_off = np.zeros((c.depth, c.heads), np.float32)
    heads_off[1, 0] = heads_off[c.depth - 1, c.heads - 1] = 1
    one_hot = np.eye(c.num_classes, dtype=np.float32)
    if name in PATCHING_GRAPH_FILES.values():
        return {"clean": images[:1], "corrupt": images[1:], "classes": one_hot[[3, 5]]}
    knockout = {"heads_off": heads_off, "mean_ablation": np.ones(1, np.float32)}
    if name == RELEVANCE_GRAPH_FILE:
        return {"image": images[:1], **knockout, "target": one_hot[[4]]}
    return {"image": images, **knockout, "query": -np.ones(1, np.float32)}  # (the query patch: where rollout peaks)


@pytest.mark.parametrize("model", ["mnist", "cifar10"])
def test_every_graph_gives_what_the_pages_graph_gives(model):
    folder = service.weights_folder(model)
    names = list(forward.graphs(model))
    assert {GRAPH_FILE, RELEVANCE_GRAPH_FILE, *PATCHING_GRAPH_FILES.values()} < set(names)  # and the snapshots'
    for name in names:
        if model == "cifar10" and name.startswith("snapshots/") and name != names[-1]:
            continue  # (one of the photo model's snapshots is enough)
        given = feeds(model, name)
        session = ort.InferenceSession(str(folder / name), providers=["CPUExecutionProvider"])
        expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, given)))
        found = read(forward.forward({"model": model, "graph": name, "inputs": {k: tensor(v) for k, v in given.items()}}))
        assert found.keys() == expected.keys(), name
        for output, value in expected.items():
            scale = max(1.0, float(np.abs(value).max()))  # float32 noise, on the output's own scale
            np.testing.assert_allclose(found[output], value, atol=2e-5 * scale, rtol=0, err_msg=f"{model} {name} {output}")


def test_it_sends_only_the_outputs_asked_for():
    given = feeds("mnist", GRAPH_FILE)
    reply = forward.forward({"model": "mnist", "graph": GRAPH_FILE, "inputs": {k: tensor(v) for k, v in given.items()},
                             "outputs": ["logits"]})
    assert list(read(reply)) == ["logits"] and read(reply)["logits"].shape == (2, 10)


def with_image(image: dict) -> dict:
    """The model graph's inputs for the digits' model, every head on, around ``image`` (a tensor on the wire)."""
    return {"image": image, "heads_off": tensor(np.zeros((6, 4))), "mean_ablation": tensor(np.ones(1)),
            "query": tensor(-np.ones(1))}


@pytest.mark.parametrize("request_, why", [
    ("a graph", "JSON object"),
    ({"model": "imagenet", "graph": GRAPH_FILE, "inputs": {}}, "there is no model 'imagenet'"),
    ({"graph": "../config.json", "inputs": {}}, "there is no graph '../config.json'"),
    ({"graph": GRAPH_FILE, "inputs": {}}, "takes the inputs image, heads_off, mean_ablation, query"),
    ({"graph": GRAPH_FILE, "inputs": "x"}, "takes the inputs"),
    ({"graph": GRAPH_FILE, "inputs": with_image(tensor(np.zeros((1, 1, 28, 27))))},
     "where this graph takes (B, 1, 28, 28)"),
    ({"graph": GRAPH_FILE, "inputs": with_image(tensor(np.zeros((513, 1, 28, 28))))}, "B at most 512"),
    ({"graph": GRAPH_FILE, "inputs": with_image({"shape": [1, 1, 28, 28], "data": "@@"})}, "not base64"),
    ({"graph": GRAPH_FILE, "inputs": with_image({"shape": [1, 1, 28, 28], "data": "AAAA"})}, "has 3 bytes"),
    ({"graph": GRAPH_FILE, "inputs": with_image(tensor(np.zeros((1, 1, 28, 28)))), "outputs": ["everything"]},
     "gives the outputs logits, cls_attention, rollout, query_attention, lens, features"),
])
def test_a_request_it_cannot_answer_gets_a_reason(request_, why):
    if isinstance(request_, dict) and "model" not in request_:
        request_ = {"model": "mnist", **request_}
    reply = forward.forward(request_)
    assert list(reply) == ["error"] and why in reply["error"], reply


def test_the_page_is_offered_it():
    """The app's one component, the page, carries the server function that runs the model."""
    import gradio as gr

    from vit_demo.app.demo import build_demo

    demo = build_demo()
    functions = {component.elem_id: [fn.__name__ for fn in component.server_fns]
                 for component in demo.blocks.values() if isinstance(component, gr.HTML) and component.server_fns}
    assert functions == {"vd-page": ["forward"]}
