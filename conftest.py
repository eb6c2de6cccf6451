"""Test session settings shared by tests/, notebooks/ and assignments/ (kernels inherit them)."""
import os

import torch

# Notebooks and the app shrink their training runs; nothing waits for the Hugging Face hub.
os.environ.setdefault("RANKLAB_FAST", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Without a GPU, the fused Triton kernels (lab.losses.engine.fused_sums) are built for Triton's CPU interpreter,
# so that tests/test_losses_fused.py runs them; it must be set before lab is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

collect_ignore_glob = ["**/.ipynb_checkpoints/*"]

# The files that take longest, heaviest first (seconds of test time in a 2-worker `make test` at 10c775d). `make
# test` hands whole files to its workers in collection order (--dist loadfile --no-loadscope-reorder), so these
# start first and the short files fill in around them; xdist's own order (by test count) sent the browser files
# last. Measured against that order: no gain beyond the noise (docs/benchmarks.md, "The test suite"). The order
# only schedules; a file missing from it runs after these, in pytest's order.
HEAVY_FIRST = ("test_grade_nbgrader.py", "test_app_browser.py", "test_app.py", "test_grading_hostile.py",
               "test_notebook_widgets.py", "test_study_slurm.py", "test_losses_fused.py", "test_grading_escape.py",
               "test_grade.py", "test_dashboard_pool.py", "test_app_class.py", "test_study_cluster.py",
               "test_bench_checkouts.py", "test_notebook_browser.py", "test_study_v2.py", "test_run_folders.py",
               "test_assignments.py", "test_study.py", "test_grading_sandbox.py", "test_study_results_file.py")


def pytest_collection_modifyitems(items: list) -> None:
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its own order
