"""The random generators a training run owns: same seed, same run, whatever else the process runs.

A :class:`RunRandom` holds a run's generators: torch (one per device, created on first use), numpy
(a ``RandomState``) and Python (a ``random.Random``), seeded from the run's seed exactly as
``torch.manual_seed`` / ``np.random.seed`` / ``random.seed`` seeded the process-wide ones before
(:func:`lab.train.checkpoint.seed_everything`), and drawn in the same order: a run alone draws the
same numbers as when it drew from the process-wide generators, bit for bit, and a checkpoint's
``rng`` entry has the same layout and values (:meth:`RunRandom.state`).

Inside :meth:`RunRandom.owned` every torch draw of the calling thread comes from the run's
generators, whoever makes it (a model's initialisation, timm's, a torchvision augmentation,
dropout): a torch function mode (thread-local, so two runs in two threads of one process never
see each other's) gives a draw that takes a ``generator=`` and was not given one the run's
generator of that device. The few draws that take no generator (the dropout family, rrelu,
gumbel_softmax, fractional max pooling) run with the process-wide generator of their device
loaded with the run's state under a lock, and the state drawn from goes back to the run.
Nothing of the run is left in, or read from, the process-wide generators.
"""
from __future__ import annotations

import contextlib
import random
import threading
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

# Tensor methods and torch functions that draw and take ``generator=``.
DRAWS = frozenset(("uniform_", "normal_", "random_", "bernoulli_", "bernoulli", "exponential_", "geometric_",
                   "log_normal_", "cauchy_", "multinomial", "rand", "randn", "randint", "randperm", "normal",
                   "poisson", "rand_like", "randn_like", "randint_like"))


def _functions(module: Any, names: str) -> set[Callable]:
    return {getattr(module, n) for n in names.split() if hasattr(module, n)}


# Draws without a ``generator=``: they run on the process-wide generator, loaded with the run's state.
BORROWING = (_functions(F, "dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout rrelu rrelu_ "
                           "gumbel_softmax fractional_max_pool2d fractional_max_pool3d")
             | _functions(torch, "dropout dropout_ alpha_dropout alpha_dropout_ feature_dropout feature_dropout_ "
                                 "feature_alpha_dropout feature_alpha_dropout_ native_dropout rrelu rrelu_ "
                                 "_fused_dropout"))
_PROCESS_GENERATORS = threading.Lock()  # held while a process-wide generator holds a run's state


class RunRandom:
    """A run's torch, numpy and Python generators, seeded from ``seed`` (see the module's doc)."""

    def __init__(self, seed: int) -> None:
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        """Every generator back to ``seed``, as ``seed_everything(seed)`` set the process-wide ones."""
        self.seed = int(seed)
        self.python = random.Random(self.seed)
        self.numpy = np.random.RandomState(self.seed % 2**32)
        self._torch: dict[torch.device, torch.Generator] = {}
        self.generator(torch.device("cpu"))

    def generator(self, device: Any = "cpu") -> torch.Generator:
        """The run's torch generator of ``device`` (made, seeded, on first use: ``torch.manual_seed``
        seeded every CUDA device with the seed too)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        found = self._torch.get(device)
        if found is None:
            found = self._torch[device] = torch.Generator(device=device).manual_seed(self.seed)
        return found

    @property
    def torch(self) -> torch.Generator:
        return self.generator("cpu")

    # ------------------------------------------------------------------ state (checkpoints)
    def state(self) -> dict[str, Any]:
        """The generators' states, laid out as :func:`lab.train.checkpoint.rng_state` lays out the
        process-wide ones (a checkpoint's ``rng``)."""
        name, keys, pos, has_gauss, gauss = self.numpy.get_state()
        state = {"python": self.python.getstate(),
                 "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
                 "torch": self.torch.get_state()}
        if torch.cuda.is_available():
            state["cuda"] = [self.generator(torch.device("cuda", i)).get_state()
                             for i in range(torch.cuda.device_count())]
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        version, internal, gauss_next = state["python"]
        self.python.setstate((version, tuple(internal), gauss_next))
        name, keys, pos, has_gauss, gauss = state["numpy"]
        self.numpy.set_state((name, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, gauss))
        self.torch.set_state(state["torch"].cpu())  # .cpu(): a checkpoint may be loaded onto a GPU
        if "cuda" in state and torch.cuda.is_available():
            for i, s in enumerate(state["cuda"][:torch.cuda.device_count()]):
                self.generator(torch.device("cuda", i)).set_state(s.cpu())

    @contextlib.contextmanager
    def preserved(self) -> Iterator[None]:
        """Run a block without moving the run's streams (what it draws is drawn again after it)."""
        saved = self.state()
        try:
            yield
        finally:
            self.set_state(saved)

    @contextlib.contextmanager
    def owned(self) -> Iterator[None]:
        """Every torch draw of this thread inside the block comes from the run's generators."""
        with _Redirect(self):
            yield


class _Redirect(TorchFunctionMode):
    """Gives the run's generator to every draw of this thread that has none (see the module's doc)."""

    def __init__(self, owner: RunRandom) -> None:
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        borrows = func in BORROWING
        if borrows or kwargs.get("generator", False) is None or (
                "generator" not in kwargs and getattr(func, "__name__", None) in DRAWS):
            device = _device(args, kwargs)
            if device.type in ("cpu", "cuda"):  # a meta tensor draws nothing
                if borrows:
                    return _borrowing(self.owner.generator(device), func, args, kwargs)
                kwargs = {**kwargs, "generator": self.owner.generator(device)}
        return func(*args, **kwargs)


def _device(args: tuple, kwargs: dict) -> torch.device:
    """Where a draw happens: its first tensor's device, else its ``device=``, else the default device."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    device = kwargs.get("device")
    return torch.device(device) if device is not None else torch.get_default_device()


def _borrowing(own: torch.Generator, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``func`` drawn from the process-wide generator of ``own``'s device holding ``own``'s state."""
    device = own.device
    with _PROCESS_GENERATORS:
        shared = torch.cuda.default_generators[device.index] if device.type == "cuda" else torch.default_generator
        saved = shared.get_state()
        shared.set_state(own.get_state())
        try:
            return func(*args, **kwargs)
        finally:
            own.set_state(shared.get_state())
            shared.set_state(saved)

