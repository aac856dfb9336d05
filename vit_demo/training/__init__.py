"""Making a weights folder: the recipes (``recipes``, read by the app too, without the trainer), ``train.py``'s flags
(``options``) and what it runs (``run``: the processes, then a supervised or a pretraining run), the supervised
training loop (``loop``), its step and the batches, optimizer and schedule that the step needs (``step``), accuracy on
a labelled set and the linear probe (``evaluation``), the calibration fitted and recorded at the end of a run
(``calibrate``), and self-supervised pretraining (``mae``, the masked autoencoder, and ``pretrain``, its loop:
``train.py --pretrain``)."""
