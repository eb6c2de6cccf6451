"""The class page's sessions (lab.dashboard.class_pages): a page's link is read as the dashboard reads it, a
reload with the same settings takes its run back, new settings close the old run, quiet or departed pages are
closed, and nothing opens beyond the server's room. Sessions here are fakes that record what was pressed; the
real pool is in tests/test_class_server.py and the browser test."""
from __future__ import annotations

import pytest

from lab.dashboard import class_pages
from lab.dashboard.class_pages import Gone, Pages, view_json
from lab.dashboard.pool import NoMemory
from lab.dashboard.view import RunView, View, status_text
from tests._class_fakes import FakeSession


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def pages(**kw):
    made = []

    def make(*args):
        made.append(FakeSession(*args))
        return made[-1]

    clock = Clock()
    return Pages(make=make, clock=clock, **kw), made, clock


def test_a_link_is_read_as_the_dashboard_reads_it(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    p, made, _ = pages()
    out = p.open({"dataset": "folder", "root": "/proc/self", "steps": "1e9", "bogus": "x"})
    assert out["errors"] == [] and len(made) == 1 and made[0].configs[0].dataset == "glyphs"
    # the operator did not offer the folder: a note naming it, and the page trains the embedded default
    assert any("'/proc/self'" in n for n in out["notes"]) and any("'bogus'" in n for n in out["notes"])
    assert out["query"]["dataset"] == "glyphs" and made[0].schedule[0] == 100_000  # steps clamped to its bound


def test_settings_that_cannot_train_open_nothing_and_say_why(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    monkeypatch.setenv("RANKLAB_APP_SESSION_MEMORY", "1MB")  # the operator's cap: below any run's ask
    p, made, _ = pages()
    out = p.open({"seed": "3"})
    assert "token" not in out and not made and not p.pages
    assert len(out["errors"]) == 1 and "this server gives a session 1MB" in out["errors"][0]


def test_a_reload_with_the_same_settings_takes_the_run_back_and_new_settings_close_it(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    p, made, _ = pages()
    first = p.open({"seed": "3"})
    assert first["errors"] == [] and len(made) == 1 and made[0].labels == ["A · roadmap"]
    again = p.open({"seed": "3", "steps": "77"}, first["token"])  # the schedule is not the run
    assert again["token"] == first["token"] and len(made) == 1 and made[0].schedule[0] == 77
    other = p.open({"seed": "4"}, first["token"])
    assert other["token"] != first["token"] and made[0].closed and len(made) == 2
    assert first["token"] not in p.pages and other["token"] in p.pages
    stranger = p.open({"seed": "4"}, "a token nobody was given")
    assert stranger["token"] not in (first["token"], other["token"]) and not made[1].closed


def test_buttons_reach_the_session_and_a_closed_or_unknown_token_is_gone(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    p, made, clock = pages()
    token = p.open({})["token"]
    for action in ("start", "pause", "step", "reset"):
        view = p.act(token, action)
    assert made[0].pressed == ["start", "pause", "step", "reset"] and view["text"] == "Step 3 / 40 · paused"
    with pytest.raises(ValueError, match="action='__init__': expected one of start, pause, step, reset"):
        p.act(token, "__init__")
    p.view(token)
    assert made[0].touched >= 1  # a page polling keeps its run watched
    with pytest.raises(Gone):
        p.view("unknown")
    clock.now = class_pages.IDLE_SECONDS + 1
    assert p.sweep() == [token] and made[0].closed
    with pytest.raises(Gone):
        p.act(token, "start")


def test_a_page_that_left_waits_for_its_reload_then_closes(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    p, made, clock = pages()
    a, b = p.open({"seed": "1"})["token"], p.open({"seed": "2"})["token"]
    p.leave(a)
    clock.now = class_pages.LEAVE_SECONDS / 2
    assert p.sweep() == []
    p.open({"seed": "2"}, b)  # b reloads: it is back; a is not
    p.leave(b)
    p.view(b)  # ... and polls again (a reload's page): no longer leaving
    clock.now = class_pages.LEAVE_SECONDS + 1
    assert p.sweep() == [a] and made[0].closed and not made[1].closed


def test_no_page_beyond_the_servers_room(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    monkeypatch.setattr(class_pages, "MAX_PAGES", 2)
    p, made, _ = pages()
    assert all("token" in p.open({"seed": str(i)}) for i in range(2))
    out = p.open({"seed": "9"})
    assert "token" not in out and out["errors"] == ["this server has 2 pages open, its most: try again later"]

    def refuse(*args):
        raise NoMemory("these settings ask for 4.04 GB; the server has 2 GB left")

    full = Pages(make=refuse)
    out = full.open({})
    assert "token" not in out and out["errors"] == ["these settings ask for 4.04 GB; the server has 2 GB left"]


def _view(history, status="running", error=None):
    run = RunView("A · roadmap", len([r for r in history if r["kind"] == "train"]), history,
                  next((r for r in reversed(history) if r["kind"] == "eval"), {}))
    return View(status, status == "running", True, run.step_count, 40, error, None, (run,))


def test_the_view_sends_the_curves_only_when_they_changed_and_the_texts_are_the_dashboards():
    history = [{"kind": "eval", "step": 0, "R@1": 0.25, "mAP@R": 0.1},
               {"kind": "train", "step": 1, "loss": 0.5, "batch_ap": 0.3}]
    v = _view(history)
    first = view_json(v)
    assert first["text"] == status_text(v) == "Step 1 / 40 · training"
    assert first["curves"].startswith("<svg") and first["version"] and first["message"] is None
    assert ">0.250<" in first["latest"]
    assert view_json(v, have=first["version"])["curves"] is None  # the page keeps what it drew
    later = _view(history + [{"kind": "train", "step": 2, "loss": 0.4, "batch_ap": 0.35}])
    assert view_json(later, have=first["version"])["curves"].startswith("<svg")
    assert first["enabled"] == {"start": False, "pause": True, "step": True, "reset": True}
    broken = view_json(_view(history, status="error", error="loss is NaN"))
    assert broken["enabled"] == {"start": False, "pause": False, "step": False, "reset": True}
    new = view_json(View("new", False, True, 0, 40, None, None, (RunView("A", 0, [], {}),)))
    assert new["curves"] is None and new["message"].startswith("Nothing trained yet") and "**" not in new["message"]


def test_while_a_run_trains_its_curves_are_sent_at_most_every_two_seconds(monkeypatch):
    monkeypatch.setenv("RANKLAB_FAST", "1")
    p, made, clock = pages()
    token = p.open({})["token"]
    history = [{"kind": "eval", "step": 0, "R@1": 0.25, "mAP@R": 0.1}]
    for step in range(1, 5):
        history.append({"kind": "train", "step": step, "loss": 1 / step, "batch_ap": 0.3})
    sent, have = [], ""
    for t, step in ((0.0, 1), (1.0, 2), (1.9, 3), (2.1, 4)):
        clock.now = t
        made[0].current = _view(history[:step + 1])
        out = p.view(token, have)
        sent.append(out["curves"] is not None)
        have = out["version"]
        assert out["text"] == f"Step {step} / 40 · training"  # the numbers every time
    assert sent == [True, False, False, True]
    made[0].current = _view(history[:5], status="paused")
    clock.now = 2.2
    assert p.view(token, have)["curves"] is None  # paused on the step it last drew: nothing new
    made[0].current = _view(history[:4], status="paused")
    assert p.view(token, have)["curves"] is not None  # paused, changed: at once


def test_a_run_label_is_escaped_in_the_curves():
    history = [{"kind": "train", "step": 1, "loss": 0.5, "batch_ap": 0.3}]
    run = RunView("<script>alert(1)</script>", 1, history, {})
    svg = view_json(View("running", True, True, 1, 40, None, None, (run,)))["curves"]
    assert "<script>" not in svg and "&lt;script&gt;" in svg
