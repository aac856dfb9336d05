"""The Gradio app: draw a digit or upload a photo, and see what every layer and head of the ViT looks at.

The UI only wires components to functions; the work is done by the classifier (model), ``explain`` and
``faithfulness`` (maps), ``inside`` (the model's insides) and ``render`` / ``figures`` (pictures): the same
functions the CLI and the tests use. One module per part:

- ``models``: the models, loaded once, and one image's analysis (prediction, attention, relevance); no Gradio.
- ``components``: Gradio components made for this app (undecoded inputs, picture outputs cached once).
- ``attention_view``, ``explanation_view``, ``training_view``: the views of an image, each with its controls.
- ``panel``: a tab's views put together; ``digit_tab``, ``photo_tab``, ``inside_tab``: the tabs.
- ``page_model``: what the page needs to run a model itself (the static Space uses it too).
- ``serving``: tuning for a room on 2 vCPUs; ``demo``: the whole app, its warm-up and launch.
"""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: a talk works offline

import vit_demo.zerogpu  # noqa: E402, F401  (first: on ZeroGPU, the spaces package patches torch before any CUDA call)

from vit_demo.ui.demo import build_demo, launch  # noqa: E402

__all__ = ["build_demo", "launch"]
