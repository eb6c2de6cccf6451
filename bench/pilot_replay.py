"""Replay the start of protocol v2's pilot at other commits and thread counts: is a run the same run?

    python -m bench.pilot_replay --commits 19daea8 HEAD --threads 1 2 --steps 250

For each (commit, threads) it trains the pilot's config (lab.studies.running.spec.PILOT: ROADMAP, seed 0) for
``--steps`` steps from a clean export of that commit (``git archive``, so uncommitted changes play no
part), evaluates on the whole test split, and records mAP@R, R@1 and a sha1 of the weights beside the
value results/v2/pilot.json recorded at that step, in results/v2/pilot_replay.json (one record per
pair, rewritten after each). Same weights hash = the same run, bit for bit. A few minutes per pair on
one core.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import hashlib, json, sys, torch
torch.set_num_threads(int(sys.argv[2]))
from lab.studies.running.spec import PILOT
from lab.train import Trainer, TrainConfig
cfg = TrainConfig.from_dict({**PILOT, "steps": int(sys.argv[1])})
trainer = Trainer(cfg)
trainer.step(cfg.steps)
weights = hashlib.sha1(b"".join(p.detach().double().numpy().tobytes() for p in trainer.model.parameters()))
result = trainer.evaluate()
print(json.dumps({"mAP@R": float(result["mAP@R"]), "R@1": float(result["R@1"]),
                  "weights_sha1": weights.hexdigest()[:12]}))
"""


def export(commit: str, folder: Path) -> str:
    """The full hash of ``commit``, its tree written into ``folder``."""
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", commit], check=True, capture_output=True,
                          text=True).stdout.strip()
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "-C", str(ROOT), "archive", full], check=True, stdout=tar)
        tar.seek(0)
        tarfile.open(fileobj=tar).extractall(folder, filter="data")
    return full


def replay(commit: str, threads: int, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        full = export(commit, Path(tmp))
        env = {**os.environ, "PYTHONPATH": tmp, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, str(steps), str(threads)], env=env, cwd=tmp,
                              check=True, capture_output=True, text=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"commit": full[:7], "threads": threads, "step": steps, **out,
            "seconds": round(time.perf_counter() - start, 1), "measured": time.strftime("%Y-%m-%d %H:%M")}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--commits", nargs="+", default=["HEAD"])
    p.add_argument("--threads", nargs="+", type=int, default=[1])
    p.add_argument("--steps", type=int, default=250)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "v2" / "pilot_replay.json")
    args = p.parse_args(argv)
    pilot = json.loads((ROOT / "results" / "v2" / "pilot.json").read_text())
    recorded = {q["step"]: q for q in pilot["curve"]}.get(args.steps)
    data = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
    data["pilot"] = {"step": args.steps, **({k: recorded[k] for k in ("mAP@R", "R@1")} if recorded else {})}
    for commit in args.commits:
        for threads in args.threads:
            rec = replay(commit, threads, args.steps)
            data["runs"] = [r for r in data["runs"] if (r["commit"], r["threads"], r["step"]) !=
                            (rec["commit"], rec["threads"], rec["step"])] + [rec]
            tmp = args.out.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, args.out)
            print(f"{rec['commit']} threads {threads}: step {args.steps} mAP@R {100 * rec['mAP@R']:.2f} "
                  f"R@1 {100 * rec['R@1']:.2f} weights {rec['weights_sha1']} ({rec['seconds']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
