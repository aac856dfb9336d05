"""What the model's numbers mean: explanation maps over the patch grid (``explain``), how far to trust a map
(``faithfulness``) and a probability (``calibration``), which images look unlike any it knows (``unfamiliar``), what
it learnt inside (``inside``), and what each attention head does (``heads``)."""
