"""The model as ONNX graphs, for the page that runs it itself: the model and its relevance (``export``), and
two-image activation patching (``patching``)."""
