"""Spies on ``Trainer.step`` for the dashboard's threading tests (tests/test_dashboard.py, test_app.py)."""
import threading

from lab.train import Trainer


def record_step_threads(monkeypatch) -> list[str]:
    """The name of the thread of every ``Trainer.step`` call from now on (the list fills up)."""
    threads: list[str] = []
    step = Trainer.step

    def recording(self, n=1):
        threads.append(threading.current_thread().name)
        return step(self, n)

    monkeypatch.setattr(Trainer, "step", recording)
    return threads


def hold_steps(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """(inside, release): every ``Trainer.step`` call sets ``inside``, then waits for ``release``."""
    inside, release = threading.Event(), threading.Event()
    step = Trainer.step

    def held_step(self, n=1):
        inside.set()
        release.wait(timeout=60)
        return step(self, n)

    monkeypatch.setattr(Trainer, "step", held_step)
    return inside, release
