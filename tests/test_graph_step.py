"""train.py --graph-step: the whole step captured in one CUDA graph (run eagerly off CUDA), its learning-rate
schedule on the device, and batches made many at once. Checked against the plain step, the host schedule and
batches made one by one."""

import dataclasses
import math

import pytest
import torch
from torch.overrides import TorchFunctionMode

from vit_demo.data.datasets import dataset_spec
from vit_demo.model import VisionTransformer
from vit_demo.training.recipes import RECIPES
from vit_demo.training.step import (GRAPH_WARMUP_STEPS, DeviceSchedule, TrainStep, host_schedule, make_optimizer,
                                    make_schedule, train_steps, training_batches)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]
SMALL = dict(patch_size=8, dim=32, depth=2, heads=2, mlp_dim=64)


def reference_factor(step: int, warmup: int, total: int) -> float:
    """Linear warmup, then cosine decay, in plain Python: what both schedules must give."""
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


def test_the_device_schedule_gives_the_host_schedules_learning_rates():
    model = torch.nn.Linear(4, 3)
    recipe = RECIPES["cifar10"]
    host_opt, device_opt = (make_optimizer(model, recipe, torch.device("cpu"), graph=g) for g in (False, True))
    host, device = host_schedule(host_opt, 3, 10), DeviceSchedule(device_opt, 3, 10, torch.device("cpu"))
    for step in range(13):
        expected = recipe.lr * reference_factor(step, 3, 10)
        assert host.get_last_lr() == pytest.approx([expected] * 2, rel=1e-12)
        assert device.get_last_lr() == pytest.approx([expected] * 2, rel=1e-6)  # float32 on the device
        assert [float(group["lr"]) for group in device_opt.param_groups] == device.get_last_lr()  # what AdamW reads
        host_opt.step()
        host.step()
        device.step()
    # A checkpoint's schedule carries on where it stopped, in groups that a loaded optimizer state replaced.
    fresh_opt = make_optimizer(model, recipe, torch.device("cpu"), graph=True)
    fresh = DeviceSchedule(fresh_opt, 3, 10, torch.device("cpu"))
    fresh_opt.load_state_dict(device_opt.state_dict())
    fresh.load_state_dict(device.state_dict())
    assert fresh.get_last_lr() == device.get_last_lr() and fresh_opt.param_groups[0]["lr"] is fresh.lrs[0]


def trainer(device: torch.device, graph: bool, drop_path: float) -> tuple[TrainStep, torch.nn.Module]:
    """The photo recipe's step on a small model (seeded, so that every trainer starts from the same weights)."""
    recipe = RECIPES["cifar10"]
    torch.manual_seed(0)
    model = VisionTransformer(dataclasses.replace(recipe.vit, **SMALL, drop_path=drop_path)).to(device).train()
    optimizer = make_optimizer(model, recipe, device, graph=graph)
    scheduler = make_schedule(optimizer, 2, 8, device, graph=graph)
    return TrainStep(model, optimizer, scheduler, recipe.label_smoothing, device, graph=graph), model


def photo_batches(device: torch.device, batches: int, batch_size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """``batches`` training batches of random photos, made as training makes them: (n * B, 3, 32, 32), (n * B, 10)."""
    images = torch.randint(0, 256, (batches * batch_size, 3, 32, 32), dtype=torch.uint8,
                           generator=torch.Generator().manual_seed(1)).to(device)
    labels = torch.arange(len(images), device=device) % 10
    return training_batches(images, labels, RECIPES["cifar10"], dataset_spec("cifar10"),
                            torch.Generator(device).manual_seed(2), batch_size)


@pytest.mark.parametrize("device", DEVICES)
def test_the_graph_step_gives_the_plain_steps_losses_and_weights(device):
    """Six steps (two of warmup, then cosine; on CUDA, three eager, the capture and replays) on the same batches:
    the same loss at every step, the same weights and learning rate at the end."""
    device = torch.device(device)
    x, target = photo_batches(device, 6)
    drop_path = 0.1 if device.type == "cpu" else 0.0  # the CPU draws stochastic depth in the same order either way
    losses, weights, lrs = {}, {}, {}
    for graph in (False, True):
        step, model = trainer(device, graph, drop_path)
        torch.manual_seed(3)
        losses[graph] = []
        for start in range(0, len(x), 16):
            before = step.sums[0].item()
            step(x[start:start + 16], target[start:start + 16])
            losses[graph].append((step.sums[0].item() - before) / 16)
        lrs[graph] = step.scheduler.get_last_lr()
        weights[graph] = {name: p.detach().clone() for name, p in model.named_parameters()}
        for name, p in weights[graph].items():  # the keys' bias: no gradient but rounding noise, which Adam
            if name.endswith("qkv.bias"):  # scales up to the learning rate; nothing the loss depends on
                p[SMALL["dim"]:2 * SMALL["dim"]] = 0
        assert (step.cuda_graph is not None) == (graph and device.type == "cuda")
    cpu = device.type == "cpu"
    assert losses[False][0] != losses[False][-1]  # the model learnt between the batches
    assert losses[True] == pytest.approx(losses[False], abs=1e-6 if cpu else 1e-3)
    for name, plain in weights[False].items():
        if cpu:
            torch.testing.assert_close(weights[True][name], plain, rtol=0, atol=1e-6, msg=name)
        else:  # bf16 and cuDNN's own reductions: weights within 1% (one missed AdamW step moves them some 5%)
            assert (weights[True][name] - plain).norm() <= 1e-2 * plain.norm(), name
    assert lrs[True] == pytest.approx(lrs[False], rel=1e-6)


class Draws(TorchFunctionMode):
    """Every random draw made under it (torch.rand, torch.randint, Tensor.uniform_, torch._standard_gamma), recorded;
    or, given the record of a chunk of ``batches`` batches of ``batch_size`` images, each draw replaced by the part
    that batch ``batch`` got in the chunk: the per-image part (the dimension of all the chunk's images) or the
    per-batch part (the dimension of its batches)."""

    RANDOM = (torch.rand, torch.randint, torch.Tensor.uniform_, torch._standard_gamma)

    def __init__(self, record: list | None = None, batch: int = 0, batches: int = 0, batch_size: int = 0) -> None:
        super().__init__()
        self.replaying, self.record = record is not None, list(record or [])
        self.batch, self.batches, self.images = batch, batches, batches * batch_size

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func not in self.RANDOM:
            return out
        if not self.replaying:
            self.record.append(out.clone())
            return out
        drawn = self.record.pop(0)
        dim = drawn.shape.index(self.images if self.images in drawn.shape else self.batches)
        share = drawn.shape[dim] // self.batches
        return out.copy_(drawn.narrow(dim, self.batch * share, share))  # fails unless the shapes agree


@pytest.mark.parametrize(("dataset", "options"), [
    ("cifar10", {"mix_prob": 1.0}),  # crop and flip, TrivialAugment, random erasing, MixUp or CutMix
    ("cifar10", {"auto_augment": True, "trivial_augment": False, "mix_prob": 1.0, "mixup_alpha": 0.0}),
    ("mnist", {}),  # stroke width and affine
])
def test_a_chunk_of_batches_equals_its_batches_made_one_by_one_with_the_same_draws(dataset, options):
    """The augmentation of a chunk (many batches at once) is the per-batch augmentation, draw for draw: every
    image's own draws change only its own pixels, and every batch's mix stays within that batch."""
    spec, recipe = dataset_spec(dataset), dataclasses.replace(RECIPES[dataset], **options)
    N, B = 3, 4
    images = torch.randint(0, 256, (N * B, spec.channels, spec.image_size, spec.image_size), dtype=torch.uint8,
                           generator=torch.Generator().manual_seed(0))
    labels = torch.arange(N * B) % len(spec.classes)
    with Draws() as recorded:
        chunk_x, chunk_target = training_batches(images, labels, recipe, spec, torch.Generator().manual_seed(1), B)
    assert len(recorded.record) >= 4
    for n in range(N):
        part = slice(n * B, (n + 1) * B)
        with Draws(recorded.record, n, N, B) as replayed:
            x, target = training_batches(images[part], labels[part], recipe, spec, torch.Generator(), B)
        assert replayed.record == []  # every draw replayed, in the same order
        torch.testing.assert_close(x, chunk_x[part], rtol=0, atol=1e-6)
        torch.testing.assert_close(target, chunk_target[part], rtol=0, atol=1e-6)
    if "mix_prob" in options:
        assert (chunk_target.max(1).values < 1).any()  # the batches were mixed


class HostData(TorchFunctionMode):
    """The tensors made under it from Python data (torch.tensor, Tensor.new_tensor, torch.as_tensor): on a GPU each is
    a copy from host memory that makes the host wait for the GPU."""

    MAKERS = (torch.tensor, torch.Tensor.new_tensor, torch.as_tensor)

    def __init__(self) -> None:
        super().__init__()
        self.made: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.MAKERS:
            self.made.append(func.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dataset", ["cifar10", "mnist"])
@pytest.mark.parametrize("policy", ["trivial_augment", "auto_augment"])
def test_making_batches_copies_nothing_from_the_host(dataset, policy):
    """The CPU's stand-in for torch.cuda's sync debug mode: making a chunk of batches, every augmentation on, makes no
    tensor from Python data (AutoAugment's policy tables are made once per device, at the first batch)."""
    spec = dataset_spec(dataset)
    recipe = dataclasses.replace(RECIPES["cifar10"], vit=RECIPES[dataset].vit, mix_prob=1.0,
                                 trivial_augment=policy == "trivial_augment", auto_augment=policy == "auto_augment")
    images = torch.randint(0, 256, (32, spec.channels, spec.image_size, spec.image_size), dtype=torch.uint8)
    labels = torch.arange(32) % 10
    training_batches(images, labels, recipe, spec, torch.Generator().manual_seed(0), 8)
    with HostData() as host:
        training_batches(images, labels, recipe, spec, torch.Generator().manual_seed(1), 8)
    assert host.made == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_the_graph_step_never_waits_for_the_gpu():
    """Batches made a chunk at a time and replayed steps, under torch.cuda's sync debug mode 'error': any host
    sync raises. (The warm-up and the capture come first: a capture synchronises by design.)"""
    device = torch.device("cuda")
    step, _ = trainer(device, True, 0.1)
    images = torch.randint(0, 256, (256, 3, 32, 32), dtype=torch.uint8, device=device)
    labels = torch.randint(0, 10, (256,), device=device)
    recipe, spec, generator = RECIPES["cifar10"], dataset_spec("cifar10"), torch.Generator(device).manual_seed(0)
    order = torch.randperm(256, device=device)
    for _ in train_steps(step, images, labels, order[:16 * (GRAPH_WARMUP_STEPS + 1)], recipe, spec, generator, 16, 4):
        pass
    assert step.cuda_graph is not None
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in train_steps(step, images, labels, order, recipe, spec, generator, 16, 4):
            pass
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(step.sums).all()
