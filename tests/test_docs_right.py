"""What the docs and files tell a user is right: environment.yml holds pyproject.toml's requirements, the
README says to activate the venv, `make app` listens on this machine unless told to serve a room, teaching.md
leads with the sandboxed autograde, and an installed `python -m lab study` writes to the current folder."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CONDA_NAME = {"torch": "pytorch", "playwright": "playwright-python"}  # conda-forge's names where they differ


def pip_requirements() -> dict[str, set[str]]:
    """{conda name: specifiers} of the core, every extra and dev (the extras' references to the project dropped)."""
    texts = [*PROJECT["dependencies"], *(t for extra in PROJECT["optional-dependencies"].values() for t in extra)]
    reqs = [Requirement(t) for t in texts if not t.startswith("ranklab-retrieval")]
    out: dict[str, set[str]] = {}
    for r in reqs:
        out.setdefault(CONDA_NAME.get(r.name, r.name), set()).update(str(s) for s in r.specifier)
    return out


def conda_requirements() -> dict[str, set[str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    out = {}
    for item in env["dependencies"]:
        if isinstance(item, dict) or item in ("pip",) or item.startswith("python="):
            continue
        name, spec = re.match(r"^([A-Za-z0-9_.-]+)(.*)$", item).groups()
        out[name] = {s for s in spec.split(",") if s}
    return out


def test_environment_yml_holds_pyprojects_requirements():
    assert conda_requirements() == pip_requirements()


def test_the_readme_says_to_activate_the_venv():
    text = (ROOT / "README.md").read_text()
    first_screen = text.split("\n## ")[0]
    assert "source .venv/bin/activate" in first_screen
    assert re.search(r"^\.venv/bin/python -m lab demo", text, re.M) or "python -m lab demo" in first_screen


def test_make_app_listens_on_this_machine_unless_told_to_serve_a_room():
    if shutil.which("make") is None:
        return
    plain = subprocess.run(["make", "-n", "app"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    room = subprocess.run(["make", "-n", "app", "APP_ADDRESS=0.0.0.0"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60).stdout
    assert "--server.address 127.0.0.1" in plain and "--server.address 0.0.0.0" in room
    assert "make app APP_ADDRESS=0.0.0.0" in (ROOT / "README.md").read_text()


def test_teaching_leads_with_the_sandboxed_autograde():
    text = (ROOT / "docs" / "teaching.md").read_text()
    code = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.S))
    commands = [line.split("#")[0].strip() for line in code.splitlines()]
    assert not [c for c in commands if c.startswith("nbgrader autograde")], "a plain nbgrader autograde to run"
    assert any(c.startswith(("python -m lab.grading.autograde", "python -I -m lab.grading.autograde"))
               for c in commands)


@pytest.mark.slow
def test_an_installed_lab_study_writes_to_the_current_folder(tmp_path):
    site, work = tmp_path / "site-packages", tmp_path / "work"
    shutil.copytree(ROOT / "lab", site / "lab", ignore=shutil.ignore_patterns("__pycache__", "checkpoints"))
    work.mkdir()
    code = ("import json; from lab.studies import cli; from lab.experiments import cached; "
            "p = cli.argparse.ArgumentParser(); cli.add_arguments(p); a = p.parse_args([]); "
            "print(json.dumps([str(a.out), str(a.docs), str(cached.RESULTS_DIR)]))")
    run = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() and eval(run.stdout) == [str(work / "results"), str(work / "docs"), str(work / "results")]
    # From the checkout (or an editable install), the checkout's folders, as before.
    from lab.studies.running import paths
    assert paths.ROOT == ROOT


def _bench_table(text: str, section: str) -> dict[int, dict[str, str]]:
    """{N: {column: cell}} of the table a bench wrote between ``<!-- BEGIN section -->`` and its END."""
    body = text.split(f"<!-- BEGIN {section} -->", 1)[1].split(f"<!-- END {section} -->", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in body.splitlines()
            if line.startswith("|") and not line.startswith("|-")]  # not the |---:| row
    head, *rows = rows
    return {int(r[0]): dict(zip(head, r)) for r in rows}


def median(cell: str) -> str:
    return cell.split(" / ")[0]  # "7.3 s / 9.9 s" -> "7.3 s"


def worst(cell: str) -> str:
    return cell.split(" / ")[1]


def rate(cell: str) -> str:
    return cell.split(" ")[0]  # "1.47 (1.35-1.60)" -> "1.47"


def test_teachings_class_numbers_are_the_bench_tables():
    """Every number docs/teaching.md states about a class on one server is a cell of the table it cites (or, for
    the by-hand runs, a number of docs/benchmarks.md's reading): a new bench run that changes a table fails here
    until the teaching page says the same (issue 46: its paragraph had grown into a history of runs)."""
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    teaching = " ".join((ROOT / "docs" / "teaching.md").read_text().split())
    c = _bench_table(bench, "class")
    fs, s1, steps, pause = "first screen", "Start → step 1", "steps/s per student", "Pause"
    expected = [
        f"one page shows its first screen in {median(c[1][fs])} and trains {rate(c[1][steps])} steps/s",
        f"3 pages in {median(c[3][fs])}, {rate(c[3][steps])} steps/s each",
        f"6 pages in {median(c[6][fs])} ({worst(c[6][fs])} at worst), their first step {median(c[6][s1])} after "
        f"Start ({worst(c[6][s1])} at worst), {rate(c[6][steps])} steps/s each, every Pause within "
        f"{worst(c[6][pause])}",
        f"12 pages in {median(c[12][fs])}, {12 - int(c[12]['queued'])} of them training {rate(c[12][steps])} steps/s "
        f"each and {c[12]['queued']} waiting in the queue",
        f"single page does ({rate(c[1][steps])} steps/s on 2 cores)",
    ]
    k = _bench_table(bench, "class-capacity")
    together = [float(k[n]["steps/s, all"]) for n in k if n >= 6]
    expected += [f"about {round(min(together) / 2)} steps/s per core in all ({min(together):.2f}-{max(together):.2f} "
                 f"steps/s on 2 cores)",
                 f"{rate(k[3][steps])} steps/s each with 3 students on 2 cores, {rate(k[6][steps])} with 6",
                 f"from the {max(n for n in k if k[n]['queued'] == '0') + 1}th student on, a page waits in the queue"]
    assert all(float(median(k[n][pause]).split()[0]) < 0.1 for n in k)  # "Pause answers at once"
    L = _bench_table(bench, "class-load")
    expected.append(f"every Pause answers within {worst(L[6][pause])}, but the trainings get almost nothing (first "
                    f"step {median(L[6][s1])} after Start, {rate(L[6][steps])} steps/s each; first screen "
                    f"{median(L[6][fs])})")
    P, PL = _bench_table(bench, "class-page"), _bench_table(bench, "class-page-load")
    expected += [
        f"Six pages show their first screen in {median(P[6][fs])} ({worst(P[6][fs])} at worst), their first step "
        f"{median(P[6][s1])} after Start ({worst(P[6][s1])} at worst), {rate(P[6][steps])} steps/s each, every "
        f"Pause within {worst(P[6][pause])}",
        f"12 pages in {median(P[12][fs])} ({worst(P[12][fs])} at worst), {12 - int(P[12]['queued'])} of them training "
        f"{rate(P[12][steps])} steps/s each and {P[12]['queued']} waiting in the queue",
        f"one page alone trains {rate(P[1][steps])} steps/s",
        f"every Pause answers within {worst(PL[6][pause])} and the trainings get nothing for a minute (first step "
        f"{median(PL[6][s1])} after Start)"]
    assert PL[6]["steps/s per student"] == "–"  # "nothing"
    for phrase in expected:
        assert phrase in teaching, phrase
    reading = " ".join(bench.split())
    for by_hand in ("0.28-0.47 steps/s each", "every Pause takes 3.85 s (5.23 s at worst)",
                    "six first visits of a bare Streamlit page took 6.0 and 6.2 s the same morning"):
        assert by_hand in reading, by_hand
    for stated in ("0.28-0.47 steps/s each", "a Pause takes 3.85 s (5.23 s at worst)", "took 6.0 and 6.2 s"):
        assert stated in teaching, stated
