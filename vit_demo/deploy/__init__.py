"""Folders to publish: a Gradio Space with the whole app (``space``), and a static Space, the page alone with its
models running in the browser (``static_space``)."""
