"""The lean core, installed as a user would: the wheel built from this tree, installed with --no-deps into a
fresh venv that sees only torch, numpy and tqdm (and what those require) from this environment, through a
.pth file to a folder of links to just those distributions. There `lab.losses` and `lab.metrics` import and
compute, nothing they import at import time is outside the core, and `lab.train` says which extra it needs.
Nothing is downloaded: the wheel builds without build isolation (setuptools from this environment)."""
import importlib.metadata
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.install_size import closure, project_requirements, top_level_entries

ROOT = Path(__file__).resolve().parents[1]
# The subprocesses see no PYTHONPATH (which may name this checkout) and no user site: only what is installed.
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "PYTHONNOUSERSITE": "1", "HF_HUB_OFFLINE": "1"}
SHIPPED = ["lab", "pyproject.toml", "README.md", "LICENSE"]  # what setuptools reads to build the wheel


def build_wheel(out: Path) -> Path:
    """The wheel of this tree (a copy of it, so the build leaves nothing in the checkout)."""
    setuptools = tuple(int(x) for x in importlib.metadata.version("setuptools").split(".")[:2])
    if setuptools < (77, 0):  # torch >= 2.8 requires >= 77 (make setup gets it); without isolation, ours builds
        pytest.skip(f"the build needs setuptools >= 77 (pyproject's build-system), this environment has {setuptools}")
    source = out / "source"
    source.mkdir()
    for name in SHIPPED:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                           if (ROOT / name).is_dir() else {}))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                          "--quiet", str(source), "-w", str(out / "dist")], capture_output=True, text=True, timeout=600,
                         env={**CLEAN_ENV, "HOME": str(out)})
    assert run.returncode == 0, run.stderr[-3000:]
    (wheel,) = (out / "dist").glob("ranklab_retrieval-*.whl")
    return wheel


def lean_venv(out: Path) -> Path:
    """A venv without pip whose site-packages reaches, through one .pth, links to the core's distributions."""
    venv = out / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120, env=CLEAN_ENV)
    links = out / "core-packages"
    links.mkdir()
    for dist in closure(project_requirements()).values():
        for entry in top_level_entries(dist):
            if entry.exists() and entry.name != "__pycache__" and not (links / entry.name).exists():
                (links / entry.name).symlink_to(entry)
    (site,) = (venv / "lib").glob("python*/site-packages")
    (site / "core-packages.pth").write_text(f"{links}\n")
    return venv


CHECK = textwrap.dedent("""
    import importlib.metadata, json, sys
    import torch
    import lab, lab.losses, lab.metrics
    from lab.losses import ROADMAP, build_loss
    from lab.metrics import retrieval_metrics
    heavy = sorted(m for m in ("matplotlib", "timm", "faiss", "sklearn", "scipy", "torchvision", "PIL", "plotly",
                               "yaml", "pandas") if m in sys.modules)
    emb, labels = torch.randn(32, 8, requires_grad=True), torch.arange(8).repeat_interleave(4)
    loss = ROADMAP()(emb, labels)
    loss.backward()
    metrics = retrieval_metrics(emb.detach(), labels, ks=(1, 2))
    try:
        import lab.train
        train_error = None
    except ModuleNotFoundError as e:
        train_error = [type(e).__name__, str(e)]
    from lab import cli
    try:
        cli.main(["datasets"])
    except SystemExit as e:  # sys.exit(message): the interpreter would print it as the one line on stderr
        cli_exit = e.code
    print(json.dumps({"cli_exit": cli_exit, "file": lab.__file__,
                      "version": importlib.metadata.version("ranklab-retrieval"),
                      "heavy": heavy, "loss": float(loss), "grad": float(emb.grad.norm()),
                      "r1": metrics["R@1"], "train_error": train_error, "pml_loss": float(build_loss("sup_ap")(
                          emb.detach(), labels, None)), "typed": (__import__("pathlib").Path(lab.__file__).parent
                                                                  / "py.typed").is_file()}))
""")


@pytest.mark.slow
def test_the_wheel_installs_lean_and_names_the_extra_a_part_needs(tmp_path):
    wheel = build_wheel(tmp_path)
    venv = lean_venv(tmp_path)
    python = venv / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", "--quiet", str(wheel)], capture_output=True, text=True, timeout=300,
                             env={**CLEAN_ENV, "HOME": str(tmp_path)})
    said = install.stdout + install.stderr
    assert install.returncode == 0 and "already installed" not in said, said[-3000:]
    # Outside the checkout and without PYTHONPATH: the installed lab, not this tree's.
    run = subprocess.run([str(python), "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**CLEAN_ENV, "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert Path(got["file"]).is_relative_to(venv), got["file"]
    assert got["version"] == __import__("lab").__version__ and got["typed"]
    assert got["heavy"] == [], f"lab.losses / lab.metrics imported {got['heavy']} at import time"
    assert 0 < got["loss"] < 2 and got["grad"] > 0 and 0 <= got["r1"] <= 1 and got["pml_loss"] > 0
    kind, message = got["train_error"]
    assert kind == "MissingExtraError" and "\n" not in message
    assert message.startswith("lab.train needs ") and message.endswith("pip install 'ranklab-retrieval[train]'")
    assert got["cli_exit"] == f"python -m lab datasets: error: {message}"
