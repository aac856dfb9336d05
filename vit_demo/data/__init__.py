"""The input side: the datasets (``datasets``), what a user gives made into what the model reads (``preprocess``),
training-time augmentation (``augment``), and the generated or borrowed images that test the model on what it was
not trained on (``sketches``: drawings made in code; ``outside_photos``: photos of none of CIFAR-10's classes)."""
