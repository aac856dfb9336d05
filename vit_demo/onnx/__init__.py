"""The model as ONNX graphs, for the page that runs it itself: the model and its relevance (``export``), two-image
activation patching (``patching``), and what every graph shares (``graph``: the opset, the metadata, ``finish``)."""
