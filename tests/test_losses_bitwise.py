"""Speed work on the engine keeps every loss's arithmetic: values and gradients bit for bit as at REFERENCE.

The stored study runs replay bit for bit only while the losses do (tests/test_study_replay.py checks two
of them over 20 training steps); this guard checks every registered loss, on batches that take the
engine's other paths: uniform and uneven positives, ties, rectangular scores with a mask, and a memory
budget small enough for many chunks, tiles and recomputed sigmoids. Each side runs in its own process
(one torch thread, the CPU) with its own ``lab``: REFERENCE's exported by git (``lab.studies.running.replay``),
and this tree's. A difference names the loss, the batch and what moved. Without the history (a shallow
clone) it fails with one line, as the replay test does: it never skips.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


from lab.losses.base import HierarchicalRankLoss
from lab.losses.loss_registry import LOSSES
from lab.studies.running import replay

from tests._history import require_history

ROOT = Path(__file__).resolve().parents[1]
# main before the engine's CPU fix (docs/benchmarks.md, "Two checkouts side by side"): the code whose
# arithmetic the stored runs replay. A change meant to move the bits moves this commit, and says why.
REFERENCE = "bd45dab"
# Hyper-parameters beside the defaults, for the losses whose other settings take other engine paths.
VARIANTS = {"smooth_ap": [{"exact_rank_pos": True}], "sup_ap": [{"rho": 3.0, "delta": 0.0}],
            "fast_ap": [{"num_bins": 3}]}

# Runs in the child with its checkout's lab: only build_loss and a loss's forward, which both sides have.
CHILD = r"""
import hashlib, json, os, sys
import torch
import torch.nn.functional as F
import lab.losses as L
torch.set_num_threads(1)
job = json.loads(sys.argv[1])

def batch(case, g):
    if case == "four_per_class":
        return F.normalize(torch.randn(48, 16, generator=g), dim=1), torch.arange(48) // 4, None
    if case == "uneven":
        return F.normalize(torch.randn(37, 16, generator=g), dim=1), torch.randint(0, 5, (37,), generator=g), None
    if case == "ties":  # few directions: many equal scores
        emb = torch.randint(-1, 2, (40, 4), generator=g).float()
        emb[emb.abs().sum(1) == 0, 0] = 1.0
        return F.normalize(emb, dim=1), torch.randint(0, 6, (40,), generator=g), None
    if case == "refs_masked":
        emb = F.normalize(torch.randn(80, 16, generator=g), dim=1)
        labels = torch.randint(0, 7, (80,), generator=g)
        return emb[:24], labels[:24], (emb[24:], labels[24:], torch.rand(24, 56, generator=g) > 0.15)
    if case == "tiny_budget":  # class 0's rows exceed the budget's block: one anchor per tile, recomputed
        ids = torch.arange(144)
        return F.normalize(torch.randn(144, 16, generator=g), dim=1), torch.where(ids < 72, 0, ids % 9 + 1), None
    raise ValueError(case)

out = {}
for case in job["cases"]:
    budget = "64KB" if case == "tiny_budget" else None
    if budget:
        os.environ["RANKLAB_MEMORY_BUDGET"] = budget
    else:
        os.environ.pop("RANKLAB_MEMORY_BUDGET", None)
    for name, hparams, graded in job["losses"]:
        g = torch.Generator().manual_seed(len(out))
        emb, labels, refs = batch(case, g)
        if graded:  # two levels: (fine, coarse)
            labels = torch.stack([labels, labels // 2], 1)
        torch.manual_seed(0)  # the proxies' initial values; every batch has fewer than 16 classes
        loss = L.build_loss(name, num_classes=16, embed_dim=emb.shape[1], **hparams)
        inputs = [emb.clone().requires_grad_()]
        if refs is None:
            value = loss(inputs[0], labels)
        else:
            inputs.append(refs[0].clone().requires_grad_())
            ref_labels = torch.stack([refs[1], refs[1] // 2], 1) if graded else refs[1]
            value = loss(inputs[0], labels, inputs[1], ref_labels, mask=refs[2])
        value.backward()
        digest = hashlib.sha256()
        for t in inputs + [p for p in loss.parameters()]:
            digest.update(b"none" if t.grad is None else t.grad.contiguous().numpy().tobytes())
        out[f"{case} {name} {json.dumps(hparams, sort_keys=True)}"] = {"value": float(value.detach()).hex(),
                                                                      "grads": digest.hexdigest()}
print(json.dumps(out))
"""
CASES = ["four_per_class", "uneven", "ties", "refs_masked", "tiny_budget"]


def _job() -> str:
    losses = [(name, hparams, issubclass(getattr(cls, "rank_class", cls), HierarchicalRankLoss))
              for name, cls in sorted(LOSSES.items()) for hparams in [{}, *VARIANTS.get(name, [])]]
    return json.dumps({"cases": CASES, "losses": losses})


def _start(checkout: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("RANKLAB_MEMORY_BUDGET", None)
    # cwd is the checkout: the child's sys.path[0] ('') must hold no other lab than PYTHONPATH's.
    return subprocess.Popen([sys.executable, "-c", CHILD, _job()], cwd=checkout, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_every_loss_has_the_reference_values_and_gradients_bit_for_bit():
    require_history(REFERENCE)
    with tempfile.TemporaryDirectory() as tmp:
        then_process = _start(replay.export_lab(REFERENCE, Path(tmp)))
        now_process = _start(ROOT)
        then, now = replay.collect(then_process), replay.collect(now_process)
    assert then.keys() == now.keys()
    moved = [f"{key}: " + ", ".join(f"{part} {then[key][part]} -> {now[key][part]}" for part in ("value", "grads")
                                    if then[key][part] != now[key][part])
             for key in then if then[key] != now[key]]
    assert not moved, f"{len(moved)} of {len(then)} (batch, loss) pairs differ from {REFERENCE}:\n" + "\n".join(moved)
