"""Making a weights folder: the recipes (``recipes``, read by the app too, without the trainer), the training loop
behind ``train.py`` (``loop``), its step and the batches, optimizer and schedule that the step needs (``step``),
accuracy on a labelled set (``evaluation``), and the calibration fitted and recorded at the end of a run
(``calibrate``)."""
