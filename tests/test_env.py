"""lab.core.env: every environment variable the project reads is read there, and torch's
process-wide thread count is changed through one guard that always restores it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from lab.core import env

ROOT = Path(__file__).resolve().parents[1]
ENV_MODULE = ROOT / "lab" / "core" / "env.py"


def _environ_reads(path: Path) -> list[tuple[int, str]]:
    """(line, source) of each read of os.environ in ``path``: ``os.environ.get(...)``, ``os.environ[...]``
    in a load, ``os.getenv(...)``. Writes (``os.environ[k] = v``, setdefault, pop) and passing the whole
    environment to a child (``{**os.environ, ...}``) are not reads of a switch."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def is_environ(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ" and \
            isinstance(node.value, ast.Name) and node.value.id == "os"

    out = []
    for node in ast.walk(tree):
        read = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
                ((node.func.attr == "get" and is_environ(node.func.value)) or
                 (node.func.attr == "getenv" and isinstance(node.func.value, ast.Name) and node.func.value.id == "os")))
        read |= isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, ast.Load)
        if read:
            out.append((node.lineno, ast.get_source_segment(path.read_text(encoding="utf-8"), node)))
    return out


# Reads that build a child process's PATH / PYTHONPATH from the parent's: not switches of the lab.
CHILD_ENVIRONMENT = ('"PATH"', '"PYTHONPATH"')


def test_the_lab_reads_environment_variables_only_in_core_env():
    files = sorted((ROOT / "lab").rglob("*.py")) + sorted((ROOT / "app_pages").glob("*.py")) + [ROOT / "app.py"]
    stray = [f"{path.relative_to(ROOT)}:{line}: {source}" for path in files if path != ENV_MODULE
             for line, source in _environ_reads(path) if not any(name in source for name in CHILD_ENVIRONMENT)]
    assert not stray, "read these through a named function of lab/core/env.py:\n" + "\n".join(stray)
    assert _environ_reads(ENV_MODULE)  # the check sees reads where they are


def test_each_reader_returns_its_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(env.DATA_ENV, str(tmp_path))
    monkeypatch.setenv(env.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(env.SUBMISSION_ENV, "sub.zip")
    monkeypatch.setenv(env.BUDGET_ENV, " 64MB ")
    monkeypatch.setenv(env.FUSED_ENV, "0")
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert (env.data_root(), env.cache_dir(), env.submission_path()) == (tmp_path, tmp_path / "cache", "sub.zip")
    assert (env.memory_budget_text(), env.fused_mode(), env.local_rank()) == ("64MB", "0", 3)
    for name in (env.DATA_ENV, env.SUBMISSION_ENV, env.BUDGET_ENV, env.FUSED_ENV, "LOCAL_RANK"):
        monkeypatch.delenv(name)
    assert (env.data_root(), env.submission_path(), env.memory_budget_text()) == (None, None, None)
    assert (env.fused_mode(), env.local_rank()) == ("auto", 0)
    monkeypatch.setenv(env.FUSED_ENV, "yes")
    with pytest.raises(ValueError, match="RANKLAB_FUSED must be 'auto', '0' or '1', got 'yes'"):
        env.fused_mode()


@pytest.mark.parametrize("name", ["RANKLAB_FAST", "LAB_FAST"])
@pytest.mark.parametrize("value, expected", [("1", True), ("yes", True), ("", False), ("0", False), ("false", False)])
def test_fast_mode_reads_the_new_name_and_its_old_alias(monkeypatch, name, value, expected):
    for other in (env.FAST_ENV, env.FAST_ENV_OLD):
        monkeypatch.delenv(other, raising=False)  # conftest sets RANKLAB_FAST
    assert env.fast_mode() is False
    monkeypatch.setenv(name, value)
    assert env.fast_mode() is expected


@pytest.mark.parametrize("new, old, expected",
                         [("0", "1", False), ("1", "0", True), ("", "1", True), (" ", "0", False)])
def test_ranklab_fast_wins_when_both_names_are_set(monkeypatch, new, old, expected):
    """RANKLAB_FAST decides whenever it is set and not empty; LAB_FAST, the old name, only without it."""
    monkeypatch.setenv("RANKLAB_FAST", new)
    monkeypatch.setenv("LAB_FAST", old)
    assert env.fast_mode() is expected


@pytest.mark.parametrize("before", [None, "0"])
def test_hub_offline_set_restores_the_variable_as_it_was(monkeypatch, before):
    if before is None:
        monkeypatch.delenv(env.HUB_OFFLINE_ENV, raising=False)
    else:
        monkeypatch.setenv(env.HUB_OFFLINE_ENV, before)
    assert not env.hub_offline()
    with pytest.raises(KeyboardInterrupt):
        with env.hub_offline_set():
            assert env.hub_offline()
            raise KeyboardInterrupt
    assert __import__("os").environ.get(env.HUB_OFFLINE_ENV) == before


@pytest.fixture
def set_calls(monkeypatch):
    calls = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.append(n) or real(n))
    return calls


def test_torch_threads_sets_the_count_inside_and_restores_it_after_an_error(set_calls):
    before = torch.get_num_threads()
    other = 2 if before != 2 else 1
    with pytest.raises(RuntimeError):
        with env.torch_threads(other):
            assert torch.get_num_threads() == other
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before
    assert set_calls == [other, before]


def test_torch_threads_leaves_the_pool_alone_for_none_or_the_current_count(set_calls):
    with env.torch_threads(None), env.torch_threads(torch.get_num_threads()):
        pass
    assert set_calls == []  # re-setting the count re-creates torch's pool (not free, not thread-safe)


# Sets of torch's thread count that are not a save-set-restore: a process (or its counting pool's
# building thread) choosing its own count for good.
SETS_FOR_GOOD = {"lab/core/env.py", "lab/metrics/counting.py", "lab/studies/running/execution.py",
                 "lab/studies/running/pilot.py", "lab/grading/student_server.py",
                 "lab/dashboard/host.py",  # a dashboard worker process: its one torch thread, for its whole life
                 "lab/dashboard/worker.py",  # a page's training thread: its count for its whole life
                 # child processes running an old commit's lab, which has no core.env.torch_threads
                 "lab/studies/running/replay.py", "lab/studies/running/evaluated_then.py"}


def test_torch_threads_is_the_one_save_and_restore_of_the_thread_count():
    bench = [p for p in [ROOT / "bench" / "measure.py"] if p.exists()]  # its timings used a copy of their own
    copies = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "lab").rglob("*.py")) + bench
              if "set_num_threads(" in path.read_text(encoding="utf-8") and
              str(path.relative_to(ROOT)) not in SETS_FOR_GOOD]
    assert not copies, f"use lab.core.env.torch_threads in {copies}"
