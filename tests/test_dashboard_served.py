"""The data a dashboard server offers are checked before `make app` starts it (issue 46, item 5): a malformed
RANKLAB_APP_DATA was reported only when a page drew its sidebar."""
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
