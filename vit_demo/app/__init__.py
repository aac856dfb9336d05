"""The Gradio app: draw a digit or upload a photo, and see what every layer and head of the ViT looks at.

The app only wires components to functions; the work is done by the classifier (model), ``interpret`` (maps, heads,
the model's insides) and ``pictures``: the same functions the CLI and the tests use. One module per part:

- ``starting``: the page that answers during a cold start, before anything heavy is imported.
- ``service``: the models, loaded once, and one image's analysis (prediction, attention, relevance); no Gradio.
- ``zerogpu``: where the models run on a ZeroGPU Space; ``serving``: tuning for a room on 2 vCPUs.
- ``page_model``: what the page needs to run a model (the static Space uses it too); ``forward``: the model's forward
  pass on the server, for a page that can't run it (raw outputs: the page computes every view's numbers itself,
  ``assets/page/source.js``); ``captions``: what the page says, and the templates it fills in.
- ``components``: Gradio components made for this app (undecoded inputs, live views, the assets' address);
  ``canvas``: the drawing canvas.
- ``attention_view``, ``explanation_view``, ``heads_view``, ``training_view``, ``export_view``: the views of an
  image, each with its controls; ``panel``: a tab's views put together.
- ``digit_tab``, ``photo_tab``, ``inside_tab``: the tabs; ``classify_api``: ``/classify``; ``demo``: the whole app,
  its warm-up and launch.
- ``assets/``: the page's JS and CSS, and the vendored onnxruntime-web.

Importing this package is light (app.py opens its starting page first); ``demo`` imports the rest.
"""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: a talk works offline
