"""The lean core and its extras (lab.core.extras, pyproject.toml's optional-dependencies) agree with the code:
what the core imports, what each part needs, and the one-line error naming the missing extra."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.install_size import project_requirements
from lab.core import extras

ROOT = Path(__file__).resolve().parents[1]
CORE_DISTS = {"torch", "numpy", "tqdm"}
# Module name -> the distribution that installs it, where the two differ.
DIST_OF = {"PIL": "pillow", "yaml": "pyyaml", "fontTools": "fonttools", "sklearn": "scikit-learn",
           "faiss": "faiss-cpu", "pytorch_metric_learning": "pytorch-metric-learning"}
HEAVY = ("matplotlib", "timm", "faiss", "sklearn", "scipy", "torchvision", "PIL", "plotly", "yaml", "pandas")


def module_level_imports(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports when it is imported (not inside functions or classes)."""
    names: set[str] = set()

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text()).body)
    return names


@pytest.mark.parametrize("package", ["core", "losses", "metrics"])
def test_the_core_imports_only_torch_numpy_tqdm_at_import_time(package):
    # triton: the fused kernels, imported in a try (torch's CUDA builds bring it; without it, the PyTorch path).
    allowed = CORE_DISTS | {"triton", "lab", "__future__"} | set(sys.stdlib_module_names)
    opt_in = {"lab/losses/pml.py"}  # PML's wrappers: imported by name only, guarded by the [pml] extra
    found = {str(p.relative_to(ROOT)): sorted(module_level_imports(p) - allowed)
             for p in (ROOT / "lab" / package).rglob("*.py") if str(p.relative_to(ROOT)) not in opt_in}
    assert {k: v for k, v in found.items() if v} == {}


@pytest.mark.slow
def test_importing_the_losses_and_metrics_loads_nothing_heavy():
    code = f"import sys, json, lab.losses, lab.metrics, lab.ranking; print(json.dumps([m for m in {HEAVY!r} " \
           "if m in sys.modules]))"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == []


def test_the_core_dependencies_are_torch_numpy_tqdm():
    assert {r.name for r in project_requirements()} == CORE_DISTS


@pytest.mark.parametrize("part", sorted(extras.NEEDS))
def test_each_parts_extra_installs_what_the_part_needs(part):
    extra, modules = extras.NEEDS[part]
    provided = {r.name.lower() for r in project_requirements([extra])}
    assert {DIST_OF.get(m, m).lower() for m in modules} <= provided


def test_a_missing_extra_is_one_line_naming_it(monkeypatch):
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None if name == "timm" else object())
    with pytest.raises(extras.MissingExtraError) as info:
        extras.require("lab.train")
    assert str(info.value) == "lab.train needs timm, not installed here: pip install 'ranklab-retrieval[train]'"
    assert isinstance(info.value, ModuleNotFoundError) and info.value.name == "timm"
    extras.require("lab.viz")  # nothing missing: no error


def test_the_faiss_backend_without_faiss_is_one_line(monkeypatch):
    import torch

    from lab.metrics import retrieval_metrics

    real = extras.importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None if name == "faiss" else real(name))
    with pytest.raises(extras.MissingExtraError, match=r"^lab.metrics \(backend='faiss'\) needs faiss, not "
                       r"installed here: pip install 'ranklab-retrieval\[train\]'$"):
        retrieval_metrics(torch.randn(12, 4), torch.arange(4).repeat(3), backend="faiss")


def test_make_setup_installs_every_extra():
    makefile = (ROOT / "Makefile").read_text()
    assert 'pip install --quiet -e ".[all,dev]"' in makefile
    everything = {r.name.lower() for r in project_requirements(["all"])}
    for extra in ("train", "studies", "notebooks", "app", "grading", "pml", "gpu"):
        assert {r.name.lower() for r in project_requirements([extra])} <= everything, extra
