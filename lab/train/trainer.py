"""The Trainer: stepwise (``step(n)``, for a dashboard) or whole-run (``fit``) training.

One step: fetch a batch (gathered on the device for glyphs and digits, from a DataLoader for
disk datasets; runtime.py says what each device gets) -> embed (plain, or staged for batches
larger than memory) -> all-gather across ranks -> rank loss in float32 (+ the cross-batch
memory loss) -> backward -> clip -> commit (optimizer, scheduler, memory, counters, RNG
snapshot). Ctrl-C is held back during the commit, and a step that fails before it (NaN,
Ctrl-C, an error) is rolled back (BN statistics, RNG, batch position), so the state is always
that of the last finished step: it can be checkpointed, resumed, or stepped again on the same
trajectory.

Host reads: one protocol object (``self.reads``, step_reads.py), chosen here from the runtime plan. On the
CPU a step reads its numbers at once and raises at its first non-finite value; on an accelerator its
numbers wait on the device until a step logs, and a non-finite step found then is reported as on the
CPU. The step code below is the same for both: it hands its checks and its record to ``self.reads``.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from ..core import env
from ..core.files import DiskFullError, full_disk
from ..core.precision import matmul_precision
from .backprop import plain_backward, staged_backward
from .checkpoint import (FORMAT, NonFiniteLossError, all_finite, deferred_interrupt, load_weights, load_with_fallback,
                         save_checkpoint)
from .config import RESUME_FREE, TrainConfig, config_diff
from .distributed import average_gradients, init_distributed
from .evaluation import embed_dataset, embed_split, evaluate_split, export_embeddings, probe_gap
from .host_reads import EMBEDDINGS_NOT_FINITE
from .loading import transform_of
from .memory import exclude_self
from .optim import select_device
from .parts import build_parts
from .randomness import RunRandom
from .run_folder import RunFolder, repair_log
from .runtime import apply_determinism
from .step_reads import StepReads, step_reads

HISTORY_MAX = 20_000  # records kept in Trainer.history (the dashboard's curves); metrics.jsonl keeps all


class StepCancelled(Exception):
    """A step that ``Trainer.may_commit`` refused just before its commit: rolled back, as if never begun."""


class Trainer:
    """Builds data, model, loss, optimizer from a :class:`TrainConfig` (parts.py) and trains.

    Datasets, model and loss may be passed in (tests, notebooks); otherwise they are built
    from the config with :mod:`lab.data`, :func:`lab.models.build_model` and :func:`lab.losses.build_loss`.

    ``config.out`` is a run folder (lab.train.run_folder): the trainer locks it from its first write
    until ``fit`` ends or ``close()``, and refuses one that holds another run unless it
    resumes that run (:meth:`resume`) or ``overwrite`` is True (which removes the old run's files).
    """

    def __init__(self, config: TrainConfig, *, train_set=None, test_set=None, model: Optional[nn.Module] = None,
                 loss: Optional[nn.Module] = None, eval_transform=None, overwrite: bool = False) -> None:
        self.device = select_device(config.device, env.local_rank())
        self.dist = init_distributed(self.device.type)
        apply_determinism(config.deterministic)
        # The run's own generators (lab.train.randomness): what it draws is its seed's, whatever else
        # the process runs (a dashboard trains several runs in one process).
        self.random = RunRandom(config.seed)
        parts = build_parts(config, self.device, self.dist, self.random, train_set=train_set, test_set=test_set,
                            model=model, loss=loss, eval_transform=eval_transform)
        # The parts under the names the trainer's users read (notebooks, the dashboard, benchmarks, tests).
        self.config, self.amp_note, self.plan = parts.config, parts.amp_note, parts.plan
        self.train_set, self.test_set, self.eval_transform = parts.train_set, parts.test_set, parts.eval_transform
        self.model, self.net, self.amp_dtype = parts.model, parts.net, parts.amp_dtype
        self.loss_fn, self.memory, self.probe = parts.loss_fn, parts.memory, parts.probe
        self.optimizer, self.scheduler, self.scaler = parts.optimizer, parts.scheduler, parts.scaler
        self.stream, self.steps_per_epoch, self.total_steps = parts.stream, parts.steps_per_epoch, parts.total_steps
        cfg = self.config
        self.step_count, self.epoch, self.position = 0, 0, 0  # committed progress
        self.history: list[dict[str, Any]] = []
        self.last_checkpoint: Optional[Path] = None
        self.out = Path(cfg.out) if cfg.out else None
        self.folder = RunFolder(self.out) if self.out is not None and self.dist.is_main else None
        self.overwrite = overwrite
        self._out_ready = False  # config.yaml is written with the first log line or checkpoint
        self._keep_previous = True  # False after falling back from a damaged checkpoint: never keep that one
        self._saved_step: Optional[tuple[Path, int]] = None  # (path, step) of this trainer's last save
        self._logged_eval: Optional[dict[str, Any]] = None  # the log's evaluation at the resumed step, if any
        self.random.reseed(cfg.seed + self.dist.rank)  # ranks draw different augmentations
        self._committed_rng = self.random.state()  # RNG as of the last finished step: what checkpoints store
        # The one place the two read protocols are told apart (step_reads.py): immediate on the CPU, deferred
        # on an accelerator. The step code never asks which.
        self.reads: StepReads = step_reads(self, self.plan.deferred_reads, cfg.log_every)
        # Asked just before each step's commit; False cancels the step (StepCancelled): a dashboard's Pause
        # that came while the step was computed, so that the step a page showed when paused stays the last.
        self.may_commit: Optional[Callable[[], bool]] = None

    # ------------------------------------------------------------------ one step
    def _loss(self, reads: StepReads, emb: Tensor, labels: Tensor, index: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Batch loss (+ weighted memory loss), float32, autocast off. emb (B, D) global batch.
        The parts are 0-dim tensors (read with the step's other numbers)."""
        # Checked before the loss: the lab's losses refuse a non-finite input with an error of their own.
        reads.check(~torch.isfinite(emb).all(), EMBEDDINGS_NOT_FINITE)
        with torch.autocast(self.device.type, enabled=False):
            total = self.loss_fn(emb, labels)
            parts = {"loss_batch": total.detach()}
            if self.memory is not None and self.step_count >= self.config.xbm_start:
                ref_e, ref_y, ref_i = self.memory.contents_after(emb, labels, index)
                mem = self.loss_fn(emb, labels, ref_embeddings=ref_e, ref_labels=ref_y,
                                   mask=exclude_self(index, ref_i))
                parts["loss_memory"] = mem.detach()
                total = total + self.config.xbm_weight * mem
        reads.check(~torch.isfinite(total.detach()), lambda: f"the loss ({float(total.detach())})")
        return total, parts

    def _train_step(self, reads: Optional[StepReads] = None) -> Optional[dict[str, Any]]:
        """One step under ``reads`` (default the trainer's; the deferred protocol trains steps again under the
        immediate one): its metrics record, all floats, if its numbers were read as it ended, else None."""
        start = time.perf_counter()
        cfg, reads = self.config, self.reads if reads is None else reads
        reads.begin_step()
        buffers = {name: b.clone() for name, b in self.model.named_buffers()}  # BN running statistics
        try:
            with self.random.owned():  # augmentations, dropout: the run's draws
                total, parts, emb, labels, index, grad_norm = self._forward_backward(reads)
            # fp16: the scaler skips such steps itself
            grad_bad = ~torch.isfinite(grad_norm) if cfg.amp != "fp16" else torch.zeros((), dtype=torch.bool,
                                                                                         device=grad_norm.device)
            reads.check(grad_bad, "the gradient norm")
            if self.may_commit is not None and not self.may_commit():
                raise StepCancelled(self.step_count + 1)
        except BaseException as error:  # NaN, Ctrl-C, anything: leave no trace of the unfinished step
            self._rollback(buffers)
            if not isinstance(error, StepCancelled):
                reads.after_failure(error)
            raise
        with deferred_interrupt():
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.scheduler.step()
            if self.memory is not None:
                self.memory.enqueue(emb, labels, index)
            self.step_count, self.epoch, self.position = self.step_count + 1, self.stream.epoch, self.stream.position
            self._committed_rng = self.random.state()
        seconds = time.perf_counter() - start
        metrics = {"kind": "train", "step": self.step_count, "epoch": round(self.step_count / self.steps_per_epoch, 4),
                   "loss": total.detach(), **parts, "batch_ap": None,  # filled in when read
                   "lr": self.optimizer.param_groups[0]["lr"], "grad_norm": grad_norm.detach(),
                   "seconds_per_step": seconds, "images_per_second": len(emb) / seconds}
        return reads.after_step(metrics, emb, labels, start)

    def _forward_backward(self, reads: StepReads) -> tuple:
        """Fetch a batch, embed it, the loss, backward, clip: (loss, parts, embeddings, labels, indices,
        gradient norm), the gradients left in ``.grad``."""
        cfg = self.config
        images, labels, index = self.stream.next()
        copy = dict(device=self.device, non_blocking=self.plan.non_blocking)  # pinned batches: asynchronous
        images = images.to(**copy)
        if self.plan.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = labels.view(len(labels), -1).to(**copy)
        index = torch.as_tensor(index).to(**copy)
        self.net.train()
        self.optimizer.zero_grad(set_to_none=True)
        autocast = dict(device_type=self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None)
        loss = functools.partial(self._loss, reads)
        with matmul_precision(cfg.matmul_precision):  # process-wide: set for the step's products, restored
            if cfg.stage_size is not None and cfg.stage_size < len(images):
                total, parts, emb, labels, index = staged_backward(
                    self.model, self.net, images, labels, index, loss, self.scaler, autocast,
                    cfg.stage_size, self.dist, self.random)
            else:
                total, parts, emb, labels, index = plain_backward(
                    self.net, images, labels, index, loss, self.scaler, autocast)
        average_gradients(list(self.loss_fn.parameters()))
        self.scaler.unscale_(self.optimizer)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if cfg.grad_clip is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        else:
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
        return total, parts, emb, labels, index, grad_norm

    def step(self, n: int = 1) -> dict[str, Any]:
        """Run ``n`` training steps; the metrics of the last one: step, epoch, loss, loss_batch,
        [loss_memory], batch_ap, lr (backbone), grad_norm, seconds_per_step, images_per_second."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        for _ in range(n):
            self._train_step()
        return self.reads.read()

    def _rollback(self, buffers: dict[str, Tensor]) -> None:
        """Undo an unfinished step: BN statistics, RNG and stream back to the last commit."""
        with torch.no_grad():
            for name, b in self.model.named_buffers():
                b.copy_(buffers[name])
        self.random.set_state(self._committed_rng)
        self.stream.seek(self.epoch, self.position)  # the same batch comes again
        self.optimizer.zero_grad(set_to_none=True)

    # ------------------------------------------------------------------ evaluation
    def _dataset(self, split: str):
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        dataset = self.test_set if split == "test" else self.train_set
        if dataset is None:
            raise ValueError(f"this trainer has no {split} set to evaluate on")
        return dataset

    def embed(self, split: str = "test", max_items: Optional[int] = None,
              progress: bool = False) -> tuple[Tensor, Tensor]:
        """(embeddings (N, D) float32, labels (N, L)) of a split, in eval mode, on the CPU.

        The train split is embedded with the evaluation transform. ``max_items``: a fixed
        random subset of whole classes with about that many images (fast dashboards).
        """
        return embed_split(self.model, self._dataset(split), self.device, self.config, max_items, progress,
                           self.eval_transform if split == "train" else None)

    def decomposability_gap(self, model: Optional[nn.Module] = None) -> float:
        """ROADMAP Eq. 6 on the fixed probe (``probe_batches`` sampler batches of the train split), of the
        trainer's model or of ``model`` (a copy of it: see :meth:`evaluate`)."""
        indices, batch_ids = self.probe
        with transform_of(self.train_set, self.eval_transform):
            emb, labels = embed_dataset(self.model if model is None else model, self.train_set, self.device,
                                        self.config.eval_batch_size, self.amp_dtype, indices.tolist())
        return probe_gap(emb, labels, batch_ids)

    def evaluate(self, split: Optional[str] = None, max_items: Optional[int] = None,
                 progress: bool = False, *, model: Optional[nn.Module] = None,
                 step: Optional[int] = None) -> dict[str, Any]:
        """Full-gallery R@k, mAP@R, mAP on ``split`` (default: config.eval_split) and the probe's
        decomposability gap; logged to metrics.jsonl. Only rank 0 evaluates (others get {}).

        ``model`` and ``step`` (together): evaluate ``model``, a copy of this trainer's model as it was at
        ``step``, instead of the model as it is now; the record says ``step``. The dashboard keeps the
        untrained model and evaluates it after the first step (``lab.dashboard.session``)."""
        if (model is None) != (step is None):
            raise ValueError(f"evaluate: model and step go together (got model={type(model).__name__}, "
                             f"step={step!r})")
        self.reads.read()  # a non-finite unread step is reported before evaluating
        split = split or self.config.eval_split
        max_items = self.config.eval_max_items if max_items is None else max_items
        model = self.model if model is None else model
        result: dict[str, Any] = {}
        if self.dist.is_main:
            metrics, _, _ = evaluate_split(model, self._dataset(split), self.device, self.config,
                                           max_items=max_items, progress=progress,
                                           transform=self.eval_transform if split == "train" else None)
            result = {"kind": "eval", "step": self.step_count if step is None else step, "split": split, **metrics,
                      "decomposability_gap": self.decomposability_gap(model)}
            self._remember(result)
            self._log(result)
        if self.dist.enabled:
            torch.distributed.barrier()
        return result

    def export_embeddings(self, path: Union[str, Path], split: str = "test") -> Path:
        """Embeddings and labels of a split to ``.npz`` / ``.pt`` (for t-SNE)."""
        emb, labels = self.embed(split)
        return export_embeddings(path, emb, labels, getattr(self._dataset(split), "level_names", None))

    # ------------------------------------------------------------------ logging and checkpoints
    def _remember(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        if len(self.history) > HISTORY_MAX:  # a long GPU run must not grow without bound
            del self.history[: HISTORY_MAX // 2]

    def _prepare_out(self) -> None:
        # Not in __init__: a resume refused for a different config must not overwrite config.yaml,
        # and a trainer that never writes (a dashboard's, a resumed one being inspected) never locks.
        if self.folder is not None:
            self.folder.claim("overwrite" if self.overwrite else "new")
        if not self._out_ready:
            self.out.mkdir(parents=True, exist_ok=True)
            self.config.save_yaml(self.out / "config.yaml")
            self._out_ready = True

    def close(self) -> None:
        """Unlock the run folder (``fit`` does it when it ends); a later write locks it again."""
        if self.folder is not None:
            self.folder.release()

    def _log(self, record: dict[str, Any]) -> None:
        if self.out is not None and self.dist.is_main:
            self._prepare_out()
            path = self.out / "metrics.jsonl"
            try:
                with open(path, "a") as f:
                    f.write(json.dumps(record) + "\n")
            except OSError as error:  # errno 28 alone does not say which file
                if full_disk(error) is None:
                    raise
                raise DiskFullError(path, full_disk(error), "its last line may be cut short (a resume removes "
                                    "it)") from None

    def _last_good(self) -> Optional[str]:
        return str(self.last_checkpoint) if self.last_checkpoint else None

    def state_dict(self) -> dict[str, Any]:
        self.reads.read()  # the state of a run whose every step was found finite
        return self._state()

    def _state(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "config": self.config.to_dict(), "step": self.step_count,
            "epoch": self.epoch, "position": self.position, "world_size": self.dist.world_size,
            "model": self.model.state_dict(), "loss": self.loss_fn.state_dict(),
            "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(), "memory": self.memory.state_dict() if self.memory else None,
            "rng": self._committed_rng,
        }

    def save(self, path: Union[str, Path, None] = None) -> Optional[Path]:
        """Write the whole state atomically (default ``out/checkpoint.pt``; rank 0 only).

        A state holding NaN/inf is never written, so the last good checkpoint survives.
        """
        self.reads.read()
        path = Path(path) if path is not None else (self.out / "checkpoint.pt" if self.out else None)
        if path is None or not self.dist.is_main:
            return None
        if not (all_finite(self.model) and all_finite(self.loss_fn)):
            raise NonFiniteLossError(self.step_count, "the model state", self._last_good(), "it was not saved")
        if self.out is not None:
            self._prepare_out()
        # The file it replaces is kept (the last 2 checkpoints), unless it is damaged or of this same step
        # (fit's final save after a checkpoint_every one): two copies of one state are not two checkpoints.
        same_step = self._saved_step == (path, self.step_count)
        self.last_checkpoint = save_checkpoint(self.state_dict(), path,
                                               keep_previous=self._keep_previous and not same_step)
        self._keep_previous, self._saved_step = True, (path, self.step_count)
        return self.last_checkpoint

    def resume(self, path: Union[str, Path]) -> "Trainer":
        """Continue a saved run on the same trajectory (bit-identical on CPU with num_workers=0).

        A damaged or missing ``path`` falls back to the previous checkpoint kept beside it, with a
        warning; the next save then replaces the damaged file instead of keeping it."""
        state, used = load_with_fallback(path, map_location=self.device)
        diff = config_diff(state["config"], self.config.to_dict())
        if diff:
            lines = ", ".join(f"{k}: {a!r} in the checkpoint vs {b!r} now" for k, (a, b) in diff.items())
            raise ValueError(f"cannot resume {path}: it was trained with a different config ({lines}). "
                             f"Use the run's config.yaml (flags may only change {', '.join(sorted(RESUME_FREE))}).")
        if self.folder is not None:  # before any state changes: refused, this trainer stays as it was
            self.folder.claim("resume", self.config.to_dict())
        self.reads.clear()
        self._load_state(state, used)
        self.last_checkpoint = used
        self._keep_previous = used == Path(path)
        self._saved_step = (used, self.step_count)  # saving this same state again keeps the previous checkpoint
        if self.folder is not None:
            # Records written after the checkpoint go (they will be written again); a last line cut short too.
            self._logged_eval = repair_log(self.out / "metrics.jsonl", self.step_count)
        return self

    def _load_state(self, state: dict[str, Any], source: Union[str, Path] = "the snapshot") -> None:
        load_weights(self.model, state["model"], source)  # a model passed in that is not the run's: one line
        self.loss_fn.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        if self.memory is not None:
            self.memory.load_state_dict(state["memory"])
        self.step_count, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self.stream.seek(self.epoch, self.position)
        self.random.set_state(state["rng"])
        self._committed_rng = state["rng"]

    @classmethod
    def from_checkpoint(cls, path: Union[str, Path], **overrides: Any) -> "Trainer":
        """A trainer rebuilt from the config stored in a checkpoint (plus overrides), resumed."""
        saved = load_with_fallback(path)[0]["config"]
        return cls(TrainConfig.from_dict({**saved, **overrides})).resume(path)

    # ------------------------------------------------------------------ whole run
    def fit(self, steps: Optional[int] = None) -> dict[str, Any]:
        """Train until step ``steps`` (default: the run's total), evaluating every ``eval_every``
        and checkpointing every ``checkpoint_every`` steps, at the end and on Ctrl-C
        (``eval_every=0``: no evaluation at all).

        Returns the last train metrics merged with the final evaluation.
        """
        cfg, until = self.config, steps or self.total_steps
        bar = tqdm(total=until, initial=self.step_count, desc="train", unit="step", dynamic_ncols=True,
                   disable=not (cfg.progress and self.dist.is_main))
        try:
            metrics = self._train_until(until, bar)
            final = self._final_evaluation() if self.test_set is not None and cfg.eval_every else {}
            self.save()
        finally:
            bar.close()
            self.close()  # the run folder is free for another process once the run is done
        return {**metrics, **{k: v for k, v in final.items() if k not in ("kind", "step")}}

    def _final_evaluation(self) -> dict[str, Any]:
        """The evaluation at the end of ``fit``. A finished run resumed trains nothing: its final evaluation
        is in the log already, and evaluating again would append a second record of the same step."""
        logged = self._logged_eval
        if logged is not None and logged["step"] == self.step_count and logged.get("split") == self.config.eval_split:
            self._remember(logged)
            return logged
        return self.evaluate()

    def _train_until(self, until: int, bar: tqdm) -> dict[str, Any]:
        """fit's loop: the metrics of the last step; on Ctrl-C a checkpoint of the last finished step."""
        cfg, trains = self.config, self.step_count < until
        try:
            while self.step_count < until:
                read = self._train_step()
                bar.update(1)
                if read is not None:  # every step on the CPU, the logging steps on an accelerator
                    bar.set_postfix(loss=f"{read['loss']:.4f}", ap=f"{read['batch_ap']:.3f}", refresh=False)
                if cfg.eval_every and self.step_count % cfg.eval_every == 0 and self.step_count < until:
                    result = self.evaluate()
                    if result and not bar.disable:
                        bar.write(f"step {self.step_count}: R@1 {result['R@1']:.3f}, mAP@R {result['mAP@R']:.3f}")
                if cfg.checkpoint_every and self.step_count % cfg.checkpoint_every == 0:
                    self.save()
            newest = self.reads.read()  # the last step's record: read now, or by a save or evaluation before
        except KeyboardInterrupt:
            if self.out is not None and all_finite(self.model):
                path = self.save()
                if path is not None:
                    print(f"\ninterrupted at step {self.step_count}: checkpoint saved to {path} "
                          "(continue with --resume)", file=sys.stderr)
            raise
        return newest if trains else {}
