"""Command line: ``python -m lab {demo,train,eval,datasets,study,export-tensorboard}``.

``train`` takes every :class:`lab.train.TrainConfig` field as a flag (``--batch-size 64``,
``--loss-kwargs lam=0.3 tau=0.05``, ``--no-pretrained``) on top of an optional
``--config recipes/X.yaml`` (``--loss-kwargs`` merges into the recipe's); ``--out DIR`` receives
config.yaml, metrics.jsonl, checkpoint.pt (and the previous checkpoint), and a folder holding another
run is refused without ``--resume`` or ``--overwrite``. A bad flag, recipe or file is one line on stderr and exit
status 2.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

from .core.convert import to_type
from .core.extras import MissingExtraError, install_hint

DEMO_SECONDS = 90  # of training; plus ~20 s of set-up and evaluation on 2 CPU cores
DEMO_STEPS = 2000
DEMO_EVAL_ITEMS = 3000  # held-out images (whole classes) evaluated before and after
NOT_GIVEN = object()  # a flag's default that no value given on the command line can equal


# Extra spellings of a flag: torchrun itself reads --m; --chunk-size is stage_size's old name.
ALIASES = {"m": ["--per-class"], "stage_size": ["--chunk-size"]}


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, like every other refusal of the CLI: by default a bad flag printed
    the whole usage first (37 lines for ``train``) and the error last."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _typed(name: str, hint: Any):
    """A flag's text as field ``name``'s type, through the config's own converter ('none' where None is allowed)."""
    def parse(text: str):
        return to_type(f"--{name.replace('_', '-')}", text, hint)
    parse.__name__ = getattr(hint, "__name__", name)  # argparse names the type in its error messages
    return parse


def _key_values(items: list[str], flag: str) -> dict[str, Any]:
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} expects KEY=VALUE pairs (e.g. {flag} tau=0.01), got {item!r}")
        try:
            # 0.5 -> float, true -> bool, [1, 2] -> list; '1e-2' stays text (YAML 1.1): the config converts it
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ValueError(f"{flag} {item}: {value!r} is not a value (a number, true/false, a word or "
                             "[a, list])") from None
    return out


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig field, default None (= not given, keep the recipe's value)."""
    from .models import POOLINGS
    from .train import TrainConfig, config
    from .train.config import FIELD_HELP, field_default, field_type, hints

    choices = {"optimizer": config.OPTIMIZERS, "scheduler": config.SCHEDULERS, "sampler": config.SAMPLERS,
               "amp": config.AMP, "transform": config.TRANSFORMS, "eval_backend": config.EVAL_BACKENDS,
               "matmul_precision": config.MATMUL_PRECISIONS,
               "pooling": POOLINGS, "eval_split": ("train", "test")}
    group = parser.add_argument_group("config (each overrides --config)")
    for f in dataclasses.fields(TrainConfig):
        flags = [f"--{f.name.replace('_', '-')}"] + ALIASES.get(f.name, [])
        kind, default = field_type(f.name), field_default(f)
        # One source with TrainConfig's docstring; "%" doubled: argparse %-formats help strings ("70%").
        help_text = f"{FIELD_HELP[f.name]} (default: {default!r})".replace("%", "%%")
        kw: dict[str, Any] = dict(dest=f.name, default=None, help=help_text)
        if kind is bool:
            group.add_argument(*flags, action=argparse.BooleanOptionalAction, **kw)
        elif kind is list:
            group.add_argument(*flags, nargs="*", type=float, metavar="N", **kw)
        elif kind is Mapping:  # loss_kwargs, dataset_kwargs
            group.add_argument(*flags, nargs="*", metavar="KEY=VALUE", **kw)
        elif "none" in choices.get(f.name, ()):  # --amp none, --scheduler none: a value, not "not given"
            group.add_argument(*flags, type=kind, choices=choices[f.name], **kw)
        else:
            group.add_argument(*flags, type=_typed(f.name, hints(TrainConfig)[f.name]), choices=choices.get(f.name),
                               **kw)


def resume_path(args: argparse.Namespace) -> Optional[Path]:
    """The checkpoint ``--resume`` names: a path, or OUT/checkpoint.pt for a bare ``--resume``."""
    if not args.resume:
        return None
    if args.resume != "auto":
        return Path(args.resume)
    if not args.out:
        raise ValueError("--resume without a path needs --out DIR (it resumes DIR/checkpoint.pt)")
    return Path(args.out) / "checkpoint.pt"


def config_from_args(args: argparse.Namespace):
    """The run's TrainConfig (:func:`run_config`)."""
    return run_config(args)[0]


def run_config(args: argparse.Namespace):
    """(config, where its amp comes from: "--amp", "the recipe's", "the checkpoint's", or None for the
    default "auto"): --config (or, when resuming without one, the checkpoint's own config) and the flags
    given, built into one TrainConfig (checked once). The library's policies fill what none of them gives:

    - ``eval_max_items``: ``--eval-images``; without it, a run from flags alone (no recipe, no checkpoint,
      no --eval-max-items) evaluates :func:`lab.train.runtime.interactive_eval_items` images, not the split;
    - ``amp``: ``--amp``, the recipe's, the checkpoint's being resumed (its run keeps its precision), else
      "auto", which the Trainer resolves for its device and model (:func:`lab.train.runtime.resolve_amp`)
      and writes, resolved, into config.yaml: ``Trainer(load_config(OUT/config.yaml))`` is the same run.
    """
    from .train import TrainConfig, field_names
    from .train.checkpoint import load_with_fallback
    from .train.config import check_out_dir, merge_overrides, read_recipe
    from .train.runtime import interactive_eval_items

    overrides = {name: getattr(args, name) for name in field_names()}
    for name in ("loss_kwargs", "dataset_kwargs"):
        if overrides[name] is not None:
            overrides[name] = _key_values(overrides[name], f"--{name.replace('_', '-')}")
    checkpoint = resume_path(args)
    saved = load_with_fallback(checkpoint)[0]["config"] if checkpoint is not None else None
    recipe = read_recipe(args.config) if args.config is not None else {}
    values = merge_overrides(saved if args.config is None and saved is not None else recipe, overrides)
    chosen = args.config is not None or checkpoint is not None
    values["eval_max_items"] = args.eval_images if args.eval_images is not NOT_GIVEN else \
        interactive_eval_items(values.get("eval_max_items"), chosen=chosen)
    amp_from = "--amp" if args.amp is not None else "the recipe's" if "amp" in recipe else \
        "the checkpoint's" if saved is not None else None
    if amp_from == "the checkpoint's":  # the recipe is the base config: the checkpoint says how it was trained
        values["amp"] = saved.get("amp", "none")  # (a config saved before amp existed trained in float32)
    cfg = TrainConfig.from_dict(values)
    # Checked here, in well under a second, rather than after the datasets and the model are built.
    check_out_dir(cfg.out)
    return cfg, amp_from


def eval_images(text: str):
    """--eval-images: a number of images >= 1, or 'all' (the whole split, returned as None)."""
    if text.lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expects a number of images >= 1 or 'all', got {text!r}")
    return value


def train(args: argparse.Namespace) -> None:
    from .train import Trainer
    from .train.distributed import cleanup
    from .train.evaluation import describe_subset
    from .train.run_folder import RunFolder

    if args.resume and args.overwrite:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it: give one of them")
    cfg, amp_from = run_config(args)
    if cfg.out is not None:  # refused now, not after the datasets are built; the Trainer checks again, locked
        checkpoint = resume_path(args)
        own = checkpoint is not None and checkpoint.resolve().parent == Path(cfg.out).resolve()
        # Resuming the folder's own checkpoint: the Trainer compares the configs, naming the checkpoint.
        RunFolder(cfg.out).check("resume" if args.resume else "overwrite" if args.overwrite else "new",
                                 None if own else cfg.to_dict())
    trainer = Trainer(cfg, overwrite=args.overwrite)
    if trainer.dist.is_main:
        amp_note = trainer.amp_note if cfg.amp == "auto" else f"amp {cfg.amp} ({amp_from})"
        print(f"{trainer.device}: {trainer.plan.describe()}; {amp_note}", file=sys.stderr)
    checkpoint = resume_path(args)
    if checkpoint is not None:
        trainer.resume(checkpoint)
        print(f"resumed {checkpoint} at step {trainer.step_count}", file=sys.stderr)
    if cfg.out is None:
        print("no --out given: nothing will be saved", file=sys.stderr)
    try:
        result = trainer.fit()
    finally:
        cleanup()
    if trainer.dist.is_main:
        if "num_queries" in result:
            dataset = trainer.test_set if cfg.eval_split == "test" else trainer.train_set
            print(describe_subset(dataset.labels, cfg.eval_max_items, cfg.seed, cfg.eval_split)
                  + ("" if cfg.eval_max_items is None else "; the whole split: --eval-images all"), file=sys.stderr)
        print(json.dumps({k: v for k, v in result.items() if k != "kind"}, indent=2))


def evaluate(args: argparse.Namespace) -> None:
    from .train import TrainConfig, export_embeddings, load_checkpoint
    from .train.checkpoint import check_format, load_weights
    from .train.evaluation import describe_subset, evaluate_split
    from .train.footprint import check_fits
    from .train.loading import build_split, model_for
    from .train.optim import select_device

    state = check_format(load_checkpoint(args.checkpoint), args.checkpoint)
    cfg = TrainConfig.from_dict(state["config"])
    dataset = build_split(cfg, args.split, data_root=args.data_root)
    device = select_device(args.device)
    in_chans = check_fits(cfg, device, dataset, training=False)
    model = model_for(cfg, in_chans, pretrained=False)  # the checkpoint's weights replace any
    load_weights(model, state["model"], args.checkpoint)
    model.to(device)
    result, emb, labels = evaluate_split(model, dataset, device, cfg, max_items=args.max_items, ks=args.ks,
                                         backend=args.backend, progress=True)
    print(describe_subset(dataset.labels, args.max_items, cfg.seed, args.split)
          + ("" if args.max_items is None else "; the whole split: --eval-images all"), file=sys.stderr)
    metrics = {"checkpoint": str(args.checkpoint), "step": state["step"], "split": args.split, **result}
    if args.export:
        metrics["exported"] = str(export_embeddings(args.export, emb, labels, getattr(dataset, "level_names", None)))
    print(json.dumps(metrics, indent=2))


def datasets(args: argparse.Namespace) -> None:
    from .data import describe_datasets

    print(describe_datasets())


def demo_total(done: int, elapsed: float, seconds: float, max_steps: int) -> int:
    """The demo bar's total: the steps that fit in its time budget at the rate measured so far (capped at
    ``max_steps``), so that the bar's ETA is the time left. A total of ``max_steps`` promised 19-31 minutes for
    a run that stops after ``seconds``."""
    if done <= 0 or elapsed <= 0:
        return max_steps
    return max(done, min(max_steps, done + int(done / elapsed * max(seconds - elapsed, 0.0))))


def demo(args: argparse.Namespace) -> None:
    """Train the default small CNN on glyphs for ~1.5 minutes (2 CPU cores); held-out metrics before -> after."""
    from tqdm.auto import tqdm

    from .train import TrainConfig, Trainer

    cfg = TrainConfig(loss=args.loss, steps=args.steps, seed=args.seed, eval_every=0,
                      eval_max_items=args.eval_items or None)
    trainer = Trainer(cfg)
    print(f"{cfg.loss} on {cfg.dataset} ({len(trainer.train_set)} training images), {cfg.model}, batch "
          f"{cfg.batch_size} = {cfg.batch_size // cfg.m} classes x {cfg.m}; training for {args.seconds:.0f} s "
          f"(at most {cfg.steps} steps)", flush=True)
    before = trainer.evaluate(progress=True)
    start = time.time()
    with tqdm(total=cfg.steps, desc="train", unit="step") as bar:
        while trainer.step_count < cfg.steps and time.time() - start < args.seconds:
            metrics = trainer.step()
            bar.total = demo_total(trainer.step_count, time.time() - start, args.seconds, cfg.steps)
            bar.update(1)
            bar.set_postfix(loss=f"{metrics['loss']:.3f}", batch_ap=f"{metrics['batch_ap']:.3f}", refresh=False)
    seconds = time.time() - start
    after = trainer.evaluate(progress=True)
    print(f"{trainer.step_count} steps in {seconds:.0f} s ({trainer.step_count / seconds:.1f} steps/s). "
          f"{after['num_queries']} test images of classes never trained on, each querying all the others:")
    for key in ("R@1", "mAP@R", "decomposability_gap"):
        print(f"  {key}: {before[key]:.3f} -> {after[key]:.3f}")


def _demo_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--loss", default="roadmap")
    p.add_argument("--seconds", type=float, default=DEMO_SECONDS, help="training time")
    p.add_argument("--steps", type=int, default=DEMO_STEPS, help="at most this many steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-items", type=int, default=DEMO_EVAL_ITEMS,
                   help="held-out images evaluated (whole classes); all of them: 0")
    p.set_defaults(func=demo)


def _train_flags(p: argparse.ArgumentParser) -> None:
    from .train.runtime import INTERACTIVE_EVAL_IMAGES as EVAL_IMAGES  # the interactive commands' default

    p.add_argument("--config", type=Path, help="YAML recipe (recipes/*.yaml); flags override it")
    p.add_argument("--resume", nargs="?", const="auto", metavar="CHECKPOINT",
                   help="continue a run from CHECKPOINT (default: OUT/checkpoint.pt); without --config, "
                        "its own config is used")
    p.add_argument("--overwrite", action="store_true",
                   help="--out holds another run: remove its files and start this one there (without --overwrite "
                        "or --resume, a folder that holds a run is refused)")
    p.add_argument("--eval-images", type=eval_images, default=NOT_GIVEN, metavar="N|all",
                   help=f"images evaluated (a fixed random subset of whole classes), 'all': the whole split "
                        f"(default: {EVAL_IMAGES} without --config, else the recipe's eval_max_items)")
    add_config_flags(p)
    p.set_defaults(func=train)


def _eval_flags(p: argparse.ArgumentParser) -> None:
    from .train.runtime import INTERACTIVE_EVAL_IMAGES as EVAL_IMAGES  # the interactive commands' default

    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--split", default="test", choices=("train", "test"))
    p.add_argument("--data-root", default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--backend", default=None, choices=("faiss", "torch"))
    p.add_argument("--eval-images", "--max-items", dest="max_items", type=eval_images, default=EVAL_IMAGES,
                   metavar="N|all", help="evaluate on a fixed random subset of whole classes with about this many "
                                         f"images (default {EVAL_IMAGES}); 'all': the whole split")
    p.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8], metavar="K",
                   help="the R@k reported (default 1 2 4 8; the papers use 1 10 100 on SOP, 1 4 16 32 on iNaturalist)")
    p.add_argument("--export", type=Path, help="also save embeddings and labels (.npz or .pt) for t-SNE")
    p.set_defaults(func=evaluate)


def _datasets_flags(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=datasets)


def _study_flags(p: argparse.ArgumentParser) -> None:
    from .studies import cli as study_cli  # imports torch (lab.studies' runner): only for `study`

    study_cli.add_arguments(p)
    p.set_defaults(func=study_cli.main)


def _export_tensorboard_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, metavar="RUN", help="a run folder (python -m lab train --out RUN)")
    p.add_argument("--out", type=Path, default=None, help="the events folder (default RUN/tensorboard)")
    p.set_defaults(func=export_tensorboard)


def export_tensorboard(args: argparse.Namespace) -> None:
    from .train.tensorboard_export import export_tensorboard as export

    out, count = export(args.run, args.out)
    print(f"{count} scalars from {args.run / 'metrics.jsonl'} written to {out} (tensorboard --logdir {out})")


# Each command: its one-line help (all the top-level --help shows) and the function adding its flags. The
# flags are built for the command being run only: train's read TrainConfig and study's the studies, which
# import torch (seconds), and `python -m lab --help` needs none of them.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "demo": ("train the default small CNN on glyphs (~1.5 min on CPU), print R@1 / mAP@R", _demo_flags),
    "train": ("train from a recipe and/or flags", _train_flags),
    "eval": ("evaluate a checkpoint: R@k, mAP@R as JSON", _eval_flags),
    "datasets": ("list the datasets and where their files are expected", _datasets_flags),
    "study": ("reproduce the papers' claims on glyphs: train, write results/, docs/results.md", _study_flags),
    "export-tensorboard": ("a run's metrics.jsonl as TensorBoard scalars (needs tensorboard)",
                           _export_tensorboard_flags),
}


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser of ``python -m lab``, with the flags of ``command`` only ("" none; None every command's)."""
    parser = OneLineParser(prog="python -m lab", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_line, add_flags) in COMMANDS.items():
        p = sub.add_parser(name, help=help_line)
        if command is None or command == name:
            add_flags(p)
    return parser


def missing_module_line(error: ModuleNotFoundError) -> str:
    """One line for a module this Python lacks: most often the project's venv is not active (a bare python3)."""
    if isinstance(error, MissingExtraError):
        return str(error)
    where = f"{error.name or 'a module'} is not installed in this Python ({sys.executable})"
    return (f"{where}: activate the environment RankLab was installed in (after make setup: source "
            f".venv/bin/activate, or run .venv/bin/python -m lab), or install it: {install_hint('train')}")


def main(argv: Optional[list[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), "")  # the first word; flags are built for it only
    try:
        parser = build_parser(command)
        if not argv:  # argparse's usage and "required: command" in two lines; one says what to do
            parser.exit(2, f"python -m lab: error: name a command: {', '.join(COMMANDS)} (python -m lab --help "
                           "says what each does)\n")
        args = parser.parse_args(argv)
        run(parser, args)
    except ModuleNotFoundError as e:  # before any work: torch, yaml or an extra is missing here
        if (e.name or "").split(".")[0] == "lab":
            raise
        sys.exit(f"python -m lab{' ' + command if command else ''}: error: {missing_module_line(e)}")


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The command ``args`` names; a bad input, file or flag is one line on stderr and exit status 2."""
    from .train import NonFiniteLossError  # first: without the [train] extra, the line names it

    import yaml

    try:
        args.func(args)
    except NonFiniteLossError as e:
        sys.exit(f"python -m lab {args.command}: {e}")
    except KeyboardInterrupt:
        sys.exit(130)
    except (ValueError, OSError, yaml.YAMLError) as e:  # bad input, a missing or unwritable file: one line
        message = " ".join(str(e).split()) or type(e).__name__
        parser.exit(2, f"python -m lab {args.command}: error: {message}\n")
