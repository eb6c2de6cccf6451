"""The data a dashboard server offers are checked before `make app` starts it (issue 46, item 5): a malformed
RANKLAB_APP_DATA was reported only when a page drew its sidebar. And the models it builds: a page, or a link,
could name any timm model, and the server built it (convnext_xxlarge: 843 M parameters, 13.5 GB with Adam's state;
eva02_enormous: 4.3 B), a class server's memory for one student. And the memory a session's runs ask for: six
compare sessions of convnext_base ask for the whole memory of a 24 GB machine, and each alone passed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def served(value: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RANKLAB_APP_DATA": value}
    return subprocess.run([sys.executable, "-I", "-m", "lab.dashboard"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("value, named", [("nope=/data", "'nope=/data'"), ("cub=", "'cub='"),
                                          (f"folder=/x{os.pathsep}=/y", "'=/y'")])
def test_a_malformed_entry_stops_make_app_in_one_line(value, named):
    done = served(value)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "RANKLAB_APP_DATA" in lines[0] and named in lines[0], done.stderr


def test_the_offered_data_are_listed(tmp_path):
    done = served(f"cub={tmp_path}{os.pathsep}{tmp_path / 'photos'}")
    assert done.returncode == 0, done.stderr
    assert re.search(r"glyphs.*digits.*cub \(" + re.escape(str(tmp_path)), done.stdout)
    assert f"folder ({tmp_path / 'photos'})" in done.stdout


def test_make_app_checks_the_data_before_the_server_starts():
    recipe = (ROOT / "Makefile").read_text().split("\napp:", 1)[1].split("\n\n", 1)[0]
    assert recipe.index("-m lab.dashboard\n") < recipe.index("streamlit run")


@pytest.mark.parametrize("value", ["20", "-1", "ten", "1.5", "\u0661\u0660"])
def test_a_malformed_worker_niceness_is_refused_naming_the_variable(monkeypatch, value):
    """RANKLAB_WORKER_NICE (make app WORKER_NICE=...) takes 0-19; anything else is one line naming the variable
    and the accepted values (Arabic-Indic digits included: not read as 10)."""
    from lab.core.env import worker_nice

    monkeypatch.setenv("RANKLAB_WORKER_NICE", value)
    with pytest.raises(ValueError, match=r"^RANKLAB_WORKER_NICE=" + re.escape(repr(value)) + r": .*0 to 19"):
        worker_nice()


def test_a_malformed_worker_niceness_stops_make_app_before_the_server():
    done = subprocess.run([sys.executable, "-I", "-m", "lab.dashboard"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "RANKLAB_APP_DATA": "", "RANKLAB_WORKER_NICE": "20"}, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "RANKLAB_WORKER_NICE='20'" in lines[0], done.stderr


@pytest.mark.parametrize("value, nice", [(None, 10), ("0", 0), ("19", 19), (" 3 ", 3)])
def test_the_server_pool_runs_its_workers_at_the_niceness_asked(monkeypatch, value, nice):
    """The pool a server starts takes its workers' nice levels from RANKLAB_WORKER_NICE (10 when unset): with
    8 busy processes at the page's priority, workers 10 levels below trained nothing in minutes."""
    from lab.dashboard import pool as pool_module

    made = {}

    class Recorded:
        closed = False

        def __init__(self, workers, runs, nice=None, **kw):
            made["nice"] = nice

        def shutdown(self):
            pass

    if value is None:
        monkeypatch.delenv("RANKLAB_WORKER_NICE", raising=False)
    else:
        monkeypatch.setenv("RANKLAB_WORKER_NICE", value)
    monkeypatch.setenv("RANKLAB_WORKERS", "1")
    monkeypatch.setattr(pool_module, "Pool", Recorded)
    monkeypatch.setattr(pool_module, "_POOL", None)
    monkeypatch.setattr(pool_module.atexit, "register", lambda f: None)
    pool_module.server_pool()
    assert made["nice"] == nice


def test_a_model_larger_than_the_operators_limit_is_refused_in_one_line(monkeypatch):
    """Before: validate passed convnext_xxlarge and eva02_enormous (no limit); a worker then built them."""
    from lab.dashboard.settings import Settings, validate

    monkeypatch.delenv("RANKLAB_APP_MAX_PARAMS", raising=False)
    assert validate(Settings(model="resnet50", batch_size=16)) == []  # the sidebar's examples train
    for giant in ("convnext_xxlarge", "eva02_enormous_patch14_clip_224"):
        errors = validate(Settings(model=giant, batch_size=16))
        assert len(errors) == 1 and errors[0].startswith(f"{giant} has about ") and "at most 100 M" in errors[0] \
            and errors[0].endswith("(its operator sets RANKLAB_APP_MAX_PARAMS)"), errors


def test_the_limit_is_the_operators_and_counts_exactly(monkeypatch):
    """At the limit a model trains, one parameter below it is refused, with its count (the real model's)."""
    from lab.dashboard.served import model_refusal
    from lab.models import build_model, num_parameters

    count = num_parameters(build_model("resnet18", 64, 3), False)
    monkeypatch.setenv("RANKLAB_APP_MAX_PARAMS", str(count))
    assert model_refusal("resnet18") is None
    monkeypatch.setenv("RANKLAB_APP_MAX_PARAMS", str(count - 1))
    assert f"has about {count / 1e6:.1f} M parameters" in model_refusal("resnet18")
    monkeypatch.setenv("RANKLAB_APP_MAX_PARAMS", "1M")
    assert model_refusal("small_cnn") is None and "at most 1 M" in model_refusal("resnet18")


def test_a_model_whose_size_cannot_be_counted_is_refused_not_a_traceback(monkeypatch):
    """All 1,371 models of timm 1.0.31 build on the meta device (by hand, 2026-11-30); one that does not is a
    one-line refusal on the page, not an exception in its script."""
    from lab.dashboard import served

    def fails(name: str, *args) -> int:
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    monkeypatch.setattr(served, "parameter_count", fails)
    why = served.model_refusal("resnet18")
    assert why.startswith("resnet18: its size cannot be counted before it is built (RuntimeError)") and "\n" not in why


@pytest.mark.parametrize("value", ["2.5M", "0", "-5", "ten", "1e8", "\u0661\u0660M", "M"])
def test_a_malformed_model_limit_is_refused_naming_the_variable(monkeypatch, value):
    from lab.core.env import app_max_params

    monkeypatch.setenv("RANKLAB_APP_MAX_PARAMS", value)
    with pytest.raises(ValueError, match=r"^RANKLAB_APP_MAX_PARAMS=" + re.escape(repr(value)) + r": .*whole number"):
        app_max_params()


def test_make_app_states_the_model_limit_or_refuses_a_malformed_one():
    run = [sys.executable, "-I", "-m", "lab.dashboard"]
    env = {**os.environ, "RANKLAB_APP_DATA": ""}
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**env, "RANKLAB_APP_MAX_PARAMS": "25M"})
    assert done.returncode == 0 and "; models of at most 25 M parameters;" in done.stdout, done
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**env, "RANKLAB_APP_MAX_PARAMS": "25 GB"})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "RANKLAB_APP_MAX_PARAMS='25 GB'" in lines[0], done.stderr


def test_the_docs_state_the_default_model_limit():
    """README and docs/teaching.md say what an operator who sets nothing gets: the code's default."""
    from lab.core.env import APP_MAX_PARAMS
    from lab.dashboard.served import millions

    said = f"no model above {millions(APP_MAX_PARAMS)} parameters"
    for doc in (ROOT / "README.md", ROOT / "docs" / "teaching.md"):
        assert said in " ".join(doc.read_text().split()), doc


# ------------------------------------------------------------------ a session's share of the server's memory
def ask(settings) -> int:
    """The trainer's own estimate for each run of ``settings``, from its config and the dataset's first image."""
    from lab.dashboard.settings import to_configs
    from lab.train.footprint import needs
    from lab.train.parts import build_datasets

    total = 0
    for cfg in to_configs(settings):
        image = build_datasets(cfg)[0][0][0]
        total += sum(n.nbytes for n in needs(cfg, image))
    return total


@pytest.fixture
def machine(monkeypatch):
    """A server of 2 workers x 3 runs whose memory at start is what the test sets."""
    from lab.dashboard import served

    monkeypatch.delenv("RANKLAB_APP_SESSION_MEMORY", raising=False)
    monkeypatch.setenv("RANKLAB_WORKERS", "2")
    monkeypatch.setenv("RANKLAB_RUNS_PER_WORKER", "3")
    memory = {"bytes": 0}
    monkeypatch.setattr(served, "memory_at_start", lambda: memory["bytes"])
    return memory


def test_a_session_asking_more_than_its_share_is_refused_in_one_line(machine, monkeypatch):
    """Before: validate passed a compare session of two convnext_base whatever a class server's operator wanted to
    give each student (and whatever the machine had)."""
    from lab.dashboard.settings import Settings, validate

    one, two = Settings(model="resnet18", batch_size=16), Settings(model="resnet18", batch_size=16, compare=True)
    need = ask(two)
    assert need == 2 * ask(one) > 0
    machine["bytes"] = 10**15  # the operator's cap, not the machine, decides
    monkeypatch.setenv("RANKLAB_APP_SESSION_MEMORY", str(need))  # exactly the pair's ask, in bytes
    assert validate(two) == [] and validate(one) == []
    monkeypatch.setenv("RANKLAB_APP_SESSION_MEMORY", str(need - 1))
    assert validate(one) == []
    errors = validate(two)
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert errors[0].startswith(f"these settings ask for at least {need / 1e9:.2f} GB of memory (each of the two "
                                f"runs {need / 2e9:.2f} GB; the largest part: the model's ")
    assert errors[0].endswith(f"but this server gives a session {need - 1} (its operator sets "
                              "RANKLAB_APP_SESSION_MEMORY): choose a smaller model or batch, or one run instead of two")


def test_without_a_cap_a_session_may_ask_for_all_the_memory_the_server_had(machine):
    """A student's own `make app` on a laptop trains what its memory holds: no share of places nobody else uses."""
    from lab.dashboard.settings import Settings, validate

    s = Settings(model="resnet18", batch_size=16, compare=True)
    machine["bytes"] = ask(s)
    assert validate(s) == []
    machine["bytes"] = ask(s) - 1
    errors = validate(s)
    assert len(errors) == 1 and f"gives a session {(ask(s) - 1) / 1e9:.2f} GB (all the memory it had when it " \
                                "started; its operator can set RANKLAB_APP_SESSION_MEMORY to share it)" in errors[0]


def test_the_ask_is_the_trainers_estimate_for_each_dataset_and_model(machine, tmp_path, monkeypatch):
    """The page sizes a run from its settings alone; the trainer sizes it from its config and the first image it
    reads. They agree (1-channel glyphs and digits at 32 px, RGB from a folder at 64 px, batch and model)."""
    from PIL import Image

    from lab.dashboard.settings import Settings, validate

    for c in range(4):
        (tmp_path / f"c{c}").mkdir()
        for i in range(4):
            Image.new("L", (40, 30), 60 * c + i).save(tmp_path / f"c{c}" / f"{i}.png")  # grey files: read as RGB
    monkeypatch.setenv("RANKLAB_APP_DATA", f"folder={tmp_path}")
    for settings in (Settings(), Settings(model="resnet18", batch_size=32), Settings(dataset="digits", batch_size=8),
                     Settings(dataset="folder", data_root=str(tmp_path), model="resnet18", batch_size=8, classes=4)):
        need = ask(settings)
        machine["bytes"] = need
        assert validate(settings) == [], settings
        machine["bytes"] = need - 1
        assert len(validate(settings)) == 1, settings


def test_the_pages_together_hold_the_memory_at_start_or_the_cap_times_the_places(machine, monkeypatch):
    from lab.dashboard.served import pool_memory, session_memory, training_places

    machine["bytes"] = 6_000_000_000
    assert training_places() == 6 and pool_memory() == 6_000_000_000
    assert session_memory()[:2] == (6_000_000_000, "6.00 GB")
    monkeypatch.setenv("RANKLAB_APP_SESSION_MEMORY", "500000000")  # 6 x 0.5 GB: less than the machine's
    assert pool_memory() == 3_000_000_000 and session_memory()[:2] == (500_000_000, "500000000")
    monkeypatch.setenv("RANKLAB_APP_SESSION_MEMORY", "2000000000")  # 6 x 2 GB: more than the machine has
    assert pool_memory() == 6_000_000_000
    monkeypatch.setenv("RANKLAB_WORKERS", "0")  # threads: no cap on places
    assert training_places() == 1 and pool_memory() == 2_000_000_000


@pytest.mark.parametrize("value", ["lots", "0", "-1GB", "2 PB", "\u0661GB", "inf"])
def test_a_malformed_session_memory_is_one_line_on_the_page_and_stops_make_app(monkeypatch, value):
    from lab.dashboard.settings import Settings, validate

    monkeypatch.setenv("RANKLAB_APP_SESSION_MEMORY", value)
    errors = validate(Settings())
    said = f"RANKLAB_APP_SESSION_MEMORY={value!r}: a session's memory must be "
    assert len(errors) == 1 and errors[0].startswith(said), errors
    done = subprocess.run([sys.executable, "-I", "-m", "lab.dashboard"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "RANKLAB_APP_DATA": ""}, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and f"RANKLAB_APP_SESSION_MEMORY={value!r}" in lines[0], done.stderr


def test_make_app_states_a_sessions_memory():
    run = [sys.executable, "-I", "-m", "lab.dashboard"]
    env = {**os.environ, "RANKLAB_APP_DATA": "", "RANKLAB_WORKERS": "2", "RANKLAB_RUNS_PER_WORKER": "3"}
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**env, "RANKLAB_APP_SESSION_MEMORY": "3GB"})
    said = r"the open pages' runs at most (\d+\.\d\d) GB of memory together, each page's at most 3GB \(its operator " \
           r"sets RANKLAB_APP_SESSION_MEMORY\)$"
    found = re.search(said, done.stdout.strip())
    assert done.returncode == 0 and found and float(found[1]) <= 6 * 3 * 2**30 / 1e9 + 0.005, done  # 6 places
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    said = r"the open pages' runs at most (\d+\.\d\d) GB of memory together, each page's at most (\d+\.\d\d) GB " \
           r"\(all the memory it had when it started; its operator can set RANKLAB_APP_SESSION_MEMORY to share it\)$"
    found = re.search(said, done.stdout.strip())
    assert done.returncode == 0 and found and found[1] == found[2], done


def test_the_changelog_states_the_ask_it_names():
    """CHANGELOG's example: a convnext_base run at batch 64 on glyphs, and six compare sessions of it."""
    from lab.dashboard.settings import Settings, _run_ask  # the page's own estimate

    one = _run_ask("convnext_base", 1, 32, 64, Settings().m).nbytes
    said = " ".join((ROOT / "CHANGELOG.md").read_text().split())
    assert f"six compare sessions of convnext_base ({one / 1e9:.2f} GB each run at batch 64" in said
    assert f"ask for about {12 * one / 1e9:.0f} GB" in said
    assert f"thirty students who trained convnext_base and paused held about {30 * one / 1e9:.0f} GB" in said

