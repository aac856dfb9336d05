"""One training step and what it needs: the batches (made many at once on the device), the optimizer, the
learning-rate schedule (on the host, or as tensors on the device), and the step itself, which ``--graph-step``
captures whole in one CUDA graph."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from vit_demo.data.augment import AUGMENTATIONS, auto_augment, mix_batches, random_erasing, trivial_augment
from vit_demo.data.datasets import DatasetSpec
from vit_demo.training.recipes import Recipe

GRAPH_WARMUP_STEPS = 3  # eager steps on a side stream before the capture, as in PyTorch's CUDA graphs notes
GRAPH_CHUNK_BATCHES = 64  # with --graph-step, batches augmented at once (8,192 CIFAR-10 images at batch 128)
NO_CLASS = -1  # the label of a training image of no class (Recipe.outlier_drawings, outlier_photos)


def training_batches(images: torch.Tensor, labels: torch.Tensor, recipe: Recipe, spec: DatasetSpec,
                     generator: torch.Generator, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Batches as the model trains on them, made on the images' device, as many at once as given: uint8
    (N * batch_size, C, H, W) and labels (N * batch_size,) -> augmented images (N * batch_size, C, H, W) in [0, 1]
    and target class probabilities (N * batch_size, classes). Each run of ``batch_size`` images is one batch,
    mixed (MixUp/CutMix) within itself. An image labelled NO_CLASS gets the uniform distribution weighted by the
    recipe's ``outlier_weight`` as its target: a row that sums to that weight, which the loss keeps.

    Every draw, each image's and each batch's, comes from ``generator``, on the images' device: nothing waits
    for the host, and one call makes N batches in the same few kernels as one.
    """
    x = images.float().div_(255)  # (N * B, C, H, W)
    if recipe.augment:
        x = AUGMENTATIONS[spec.recipe](x, generator)
    if recipe.auto_augment:
        x = auto_augment(x, generator)
    elif recipe.trivial_augment:
        x = trivial_augment(x, generator)
    if recipe.random_erasing > 0:
        x = random_erasing(x, generator, recipe.random_erasing, spec.mean)
    # (N * B, classes) one-hot; a comparison, not F.one_hot, whose range check waits for a GPU.
    target = (labels[:, None] == torch.arange(len(spec.classes), device=labels.device)).float()
    if recipe.outlier_drawings or recipe.outlier_photos:
        target = torch.where(labels[:, None] == NO_CLASS, recipe.outlier_weight / len(spec.classes), target)
    if recipe.mixup_alpha > 0 or recipe.cutmix_alpha > 0:
        x, target = mix_batches(x, target, batch_size, generator, recipe.mix_prob, recipe.mixup_alpha,
                                recipe.cutmix_alpha)
    return x, target


def train_steps(train_step: TrainStep, images: torch.Tensor, labels: torch.Tensor, order: torch.Tensor,
                recipe: Recipe, spec: DatasetSpec, generator: torch.Generator, batch_size: int,
                chunk_batches: int) -> Iterator[None]:
    """Train on ``images[order]`` (uint8 (N, C, H, W), ``order`` (steps * batch_size,) indices), one batch a
    step, the batches made ``chunk_batches`` at a time by ``training_batches``. Yields after each step."""
    steps = len(order) // batch_size
    for first in range(0, steps, chunk_batches):
        idx = order[first * batch_size : min(steps, first + chunk_batches) * batch_size]  # (n * B,)
        x, target = training_batches(images[idx], labels[idx], recipe, spec, generator, batch_size)
        for start in range(0, len(idx), batch_size):
            train_step(x[start : start + batch_size], target[start : start + batch_size])
            yield


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """No weight decay on biases, norms, the [CLS] token, position embeddings and the MAE's mask token (in a
    submodule too: the MAE's encoder.cls_token, decoder.pos_embed)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        no = param.ndim < 2 or name.rsplit(".", 1)[-1] in ("cls_token", "pos_embed", "mask_token")
        (no_decay if no else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: nn.Module, recipe: Recipe, device: torch.device, graph: bool = False) -> torch.optim.AdamW:
    """The recipe's AdamW; fused on CUDA (a few kernels per step instead of a loop of them). With ``graph``, on
    CUDA, ``capturable``: its step count stays on the device and its step can be captured in a CUDA graph
    (PyTorch's capturable AdamW has no CPU form: on the CPU it stays as it is, and runs eagerly)."""
    cuda = device.type == "cuda"
    return torch.optim.AdamW(param_groups(model, recipe.weight_decay), lr=recipe.lr, fused=cuda,
                             capturable=graph and cuda)


def warmup_cosine(step: torch.Tensor, warmup_steps: int, total_steps: int) -> torch.Tensor:
    """The learning rate's factor after ``step`` steps: linear warmup over ``warmup_steps`` to 1, then cosine decay
    to 0 at ``total_steps``. Tensor ops only, so it runs on the host (for LambdaLR) or in a CUDA graph alike."""
    warming = (step + 1) / max(1, warmup_steps)
    progress = ((step - warmup_steps) / max(1, total_steps - warmup_steps)).clamp(max=1.0)
    return torch.where(step < warmup_steps, warming, 0.5 * (1.0 + torch.cos(math.pi * progress)))


def host_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int,
                  total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """warmup_cosine as a LambdaLR: the learning rate is a Python float, set by the host after each step."""
    def factor(step: int) -> float:
        return float(warmup_cosine(torch.tensor(step, dtype=torch.float64), warmup_steps, total_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class DeviceSchedule:
    """warmup_cosine kept on the device, for a step captured in a CUDA graph: a step counter and each parameter
    group's learning rate are tensors there, which ``step()`` updates with device ops (so a graph replays it).
    The same learning rates as ``host_schedule``, step for step; the same ``step``, ``get_last_lr``,
    ``state_dict`` and ``load_state_dict`` as a LambdaLR."""

    def __init__(self, optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int,
                 device: torch.device) -> None:
        self.optimizer, self.warmup_steps, self.total_steps = optimizer, warmup_steps, total_steps
        self.base_lrs = [float(group["lr"]) for group in optimizer.param_groups]
        self.count = torch.zeros((), dtype=torch.int64, device=device)  # () steps taken
        self.lrs = [torch.zeros((), device=device) for _ in self.base_lrs]  # () float32 each, read by AdamW
        self._set_lrs()

    def _set_lrs(self) -> None:
        """Point the optimizer's groups at the learning-rate tensors (a loaded optimizer state replaces them)
        and set them from the counter."""
        factor = warmup_cosine(self.count, self.warmup_steps, self.total_steps)  # ()
        for group, lr, base in zip(self.optimizer.param_groups, self.lrs, self.base_lrs):
            group["lr"] = lr
            lr.copy_(base * factor)

    def step(self) -> None:
        self.count += 1
        self._set_lrs()

    def get_last_lr(self) -> list[float]:
        """The learning rates now (a host sync: once per epoch)."""
        return [float(lr) for lr in self.lrs]

    def state_dict(self) -> dict:
        return {"last_epoch": int(self.count), "base_lrs": self.base_lrs}

    def load_state_dict(self, state: dict) -> None:
        self.count.fill_(state["last_epoch"])
        self.base_lrs = list(state["base_lrs"])
        self._set_lrs()


def make_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int, device: torch.device,
                  graph: bool = False) -> DeviceSchedule | torch.optim.lr_scheduler.LambdaLR:
    """The warmup-cosine schedule: kept on the device for a step captured whole (``graph``), else on the host."""
    if graph:
        return DeviceSchedule(optimizer, warmup_steps, total_steps, device)
    return host_schedule(optimizer, warmup_steps, total_steps)


class TrainStep:
    """One optimisation step (forward, loss, backward, AdamW, learning-rate schedule) with no host sync.

    The loss and correct counts add up in ``sums`` on the device; read them once per epoch. With
    ``compile_mode`` the forward pass and loss go through ``torch.compile`` ('reduce-overhead' also
    replays them as CUDA graphs). bf16 autocast on CUDA.

    With ``graph`` the whole step is one CUDA graph on CUDA: the batch is copied into static buffers, and after
    GRAPH_WARMUP_STEPS eager steps on a side stream the step is captured and from then on replayed (the
    whole-network capture of PyTorch's CUDA graphs notes). It needs a capturable optimizer (``make_optimizer(...,
    graph=True)``) and a ``DeviceSchedule``. Off CUDA the very same step function runs eagerly, on the same buffers.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler, label_smoothing: float,
                 device: torch.device, compile_mode: str | None = None, graph: bool = False) -> None:
        if graph and not isinstance(scheduler, DeviceSchedule):
            raise ValueError("a step captured in a CUDA graph needs a DeviceSchedule: a graph never replays host code")
        if graph and compile_mode not in (None, "default"):  # reduce-overhead and max-autotune make CUDA graphs
            raise ValueError("the graph step is a CUDA graph already: compile it in the default mode only")
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.label_smoothing, self.device, self.compile_mode, self.graph = label_smoothing, device, compile_mode, graph
        self.loss = torch.compile(self._loss, mode=None if compile_mode == "default" else compile_mode) \
            if compile_mode else self._loss
        self.sums = torch.zeros(3, dtype=torch.float64, device=device)  # summed loss, correct, images with a class
        self.static: tuple[torch.Tensor, torch.Tensor] | None = None  # the graph's x (B, C, H, W), target (B, classes)
        self.cuda_graph: torch.cuda.CUDAGraph | None = None
        self.side_stream: torch.cuda.Stream | None = None  # the warm-up's and the capture's
        self.eager_steps = 0

    def _loss(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The loss on a batch, the count of correct answers and of images that have one (a subclass may train for
        another objective: vit_demo/training/pretrain.py's MAEStep).

        The loss is the cross-entropy to the target, label-smoothed as F.cross_entropy smooths it, except that each
        target keeps its mass: a class's target sums to 1, a drawing of no digit's (the uniform distribution) to its
        weight, which smoothing would otherwise change."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"):
            logits = self.model(x)  # (B, classes)
        mass = target.sum(1, keepdim=True)  # (B, 1)
        smoothed = target * (1 - self.label_smoothing) + mass * (self.label_smoothing / target.shape[1])  # (B, K)
        loss = -(smoothed * F.log_softmax(logits.float(), 1)).sum(1).mean()
        # Correct = the top logit is the image's dominant class (its own, or the larger part of a mix). A target
        # spread evenly (outlier_weight at most 1, so no share above 1 / classes) has no right answer.
        labelled = target.amax(1) > 1 / target.shape[1]  # (B,)
        correct = ((logits.detach().argmax(1) == target.argmax(1)) & labelled).sum()
        return loss, correct, labelled.sum()

    def _step(self, x: torch.Tensor, target: torch.Tensor) -> None:
        """The step itself: run as it is, or captured once in a CUDA graph. Inside a capture ``zero_grad`` finds no
        gradients (the warm-up's were set to None) and backward makes them in the graph's memory, as the notes do."""
        if self.compile_mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        loss, correct, labelled = self.loss(x, target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        self.sums += torch.stack([loss.detach().double() * len(x), correct.double(), labelled.double()])

    def __call__(self, x: torch.Tensor, target: torch.Tensor) -> None:
        """Train on one batch: x (B, C, H, W), target (B, classes) probabilities."""
        if not self.graph:
            self._step(x, target)
            return
        if self.static is None:
            self.static = (torch.empty_like(x), torch.empty_like(target))
        self.static[0].copy_(x)
        self.static[1].copy_(target)
        if self.device.type != "cuda":
            self._step(*self.static)
        elif self.cuda_graph is None and self.eager_steps < GRAPH_WARMUP_STEPS:
            self._warm_up()
        else:
            if self.cuda_graph is None:
                self.cuda_graph = torch.cuda.CUDAGraph()
                self.optimizer.zero_grad(set_to_none=True)
                # Records the step's kernels and runs none of them; on the warm-up's stream, whose cuBLAS
                # workspace is made already.
                with torch.cuda.graph(self.cuda_graph, stream=self.side_stream):
                    self._step(*self.static)
            self.cuda_graph.replay()

    def _warm_up(self) -> None:
        """One real step, eagerly on a side stream, before the capture (its lazy state, AdamW's moments and
        cuBLAS's workspaces among them, made outside the graph)."""
        self.side_stream = self.side_stream or torch.cuda.Stream(self.device)
        self.side_stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.side_stream):
            self._step(*self.static)
        torch.cuda.current_stream(self.device).wait_stream(self.side_stream)
        self.eager_steps += 1
