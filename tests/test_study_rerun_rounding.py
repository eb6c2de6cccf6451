"""The bounds a re-run's curve may differ by (lab/studies/reporting/curves.py ROUNDING) are the evaluation's own
change, measured: the same embeddings evaluated by the code that trained the first v2 runs (eb7e669, before
44a7127 changed two float reductions) and by today's give the rank numbers bit for bit and mAP@R and the
decomposability gap within ROUNDING's bounds. Needs git history (.ci/run fetches it), as the replay test."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lab.studies.running import replay

from tests._history import require_history
from lab.studies.running.rerun_curves import EXACT, ROUNDING

BEFORE = "eb7e669"  # the code of the first v2 runs (tests/test_study_replay.py's TRAINED_AT)
ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, torch
torch.set_num_threads(1)
from lab.metrics import decomposability_gap, retrieval_metrics
out = []
for seed, spread in ((0, 1.1), (1, 1.2), (2, 1.3)):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(3000) % 500
    centres = torch.randn(500, 32, generator=g)
    emb = torch.nn.functional.normalize(torch.randn(3000, 32, generator=g) + spread * centres[labels], dim=1)
    batches = torch.randperm(3000, generator=g) // 128
    m = {k: float(v) for k, v in retrieval_metrics(emb, labels).items()}
    m["gap"] = float(decomposability_gap(emb, labels, batches))
    out.append(m)
print(json.dumps(out))
"""


def _evaluate(checkout: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("RANKLAB_MEMORY_BUDGET", None)
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_same_embeddings_evaluated_then_and_now_differ_within_the_rounding_bounds():
    require_history(BEFORE)
    with tempfile.TemporaryDirectory() as tmp:
        then = _evaluate(replay.export_lab(BEFORE, Path(tmp)))
    now = _evaluate(ROOT)
    for a, b in zip(then, now):
        assert 0.05 < b["mAP@R"] < 0.98 and b["gap"] > 0  # data neither trivial nor hopeless
        for k in EXACT:
            if k in b:
                assert a[k] == b[k], k
        assert abs(a["mAP@R"] - b["mAP@R"]) <= ROUNDING["mAP@R"]
        for k in ("gap_heldout", "gap_train_probe"):  # both gaps are decomposability_gap's
            assert abs(a["gap"] - b["gap"]) <= ROUNDING[k]
