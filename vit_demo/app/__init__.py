"""The Gradio app: the page (vit_demo/page, the same the static Space is) served in one ``gr.HTML``, and what only a
server can do. One module per part:

- ``demo``: the Blocks (the page, its server function, the API), the warm-up, and launch.
- ``forward``: the model's forward pass on the server, for a page that can't run it (raw outputs: the page computes
  every number itself).
- ``api``: the HTTP API for scripts, ``/classify`` and ``/export``.
- ``service``: the models, loaded once, and one image's analysis; no Gradio.
- ``serving``: tuning for a room on 2 vCPUs; ``zerogpu``: where the models run on a ZeroGPU Space.
- ``starting``: the page that answers during a cold start, before anything heavy is imported.

Importing this package is light (app.py opens its starting page first); ``demo`` imports the rest.
"""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: a talk works offline
