"""What each attention head does, one tool a module:

- ``edits``: which heads to switch off, as the model's own edits (``VisionTransformer.forward_activations``), and
  ``switched_off``, which applies them to every forward pass for a while;
- ``knockout``: switch heads off (mean- or zero-ablation), read as a logit difference; the heads' mean outputs;
- ``lens``: the logit lens, what [CLS] and each patch would say after each layer;
- ``patching``: two-image activation patching, head by head and position by position;
- ``importance``: head importance (Michel et al., 2019) and the pruning curves that test it.

The names the app, the command line and the exporter use are handed on here: ``heads.knockout(...)``.
"""

from vit_demo.interpret.heads.edits import head_mask, switched_off  # noqa: F401
from vit_demo.interpret.heads.importance import (IMPORTANCE_IMAGES, RANDOM_ORDERS, accuracy,  # noqa: F401
                                                 head_importance, heads_report, pruning_curves,
                                                 read_head_importance, write_head_importance)
from vit_demo.interpret.heads.knockout import (MEAN_IMAGES, ablated_logits, head_means, knockout,  # noqa: F401
                                               mean_sample, read_head_means, write_head_means)
from vit_demo.interpret.heads.lens import layer_answers, lens_accuracy, lens_maps, logit_lens  # noqa: F401
from vit_demo.interpret.heads.patching import (PatchingGrid, patch, patching_base, patching_grid,  # noqa: F401
                                                restored_fractions)
