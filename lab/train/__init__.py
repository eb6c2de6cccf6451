"""Training: ``Trainer(TrainConfig(...)).fit()``, or ``step(n)`` a few steps at a time.

Modules: ``config`` (the dataclass, YAML recipes), ``trainer`` (the loop), ``backprop`` (plain
and staged forward/backward), ``loading`` (datasets, samplers, resumable batch streams: a
DataLoader, or the images gathered on the device), ``runtime`` (what each device gets: data
path, loader workers, memory layout, amp), ``optim`` (device, parameter groups, schedule),
``memory`` (cross-batch memory), ``distributed`` (torchrun / DDP with all-gather),
``checkpoint`` (atomic saves, RNG states, NaN and Ctrl-C guards), ``step_reads`` (a step's numbers
read on the host: at once on the CPU, at the logging steps on an accelerator; over ``host_reads``),
``randomness`` (the generators a run owns), ``evaluation`` (embedding, R@k / mAP@R, export).
"""
from ..core.extras import require

require("lab.train")  # first: a missing extra is one line naming it, not a traceback from a submodule

from .checkpoint import NonFiniteLossError, load_checkpoint, save_checkpoint
from .config import RESUME_FREE, TrainConfig, config_diff, field_names, load_config
from .evaluation import class_subset, embed_dataset, evaluate_embeddings, export_embeddings
from .memory import CrossBatchMemory, exclude_self
from .trainer import Trainer

__all__ = ["Trainer", "TrainConfig", "load_config", "config_diff", "field_names", "RESUME_FREE",
           "NonFiniteLossError", "CrossBatchMemory", "exclude_self", "save_checkpoint", "load_checkpoint",
           "class_subset", "embed_dataset", "evaluate_embeddings", "export_embeddings"]
