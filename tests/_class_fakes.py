"""A class page's session that records what was pressed (tests/test_class_pages.py, test_class_server.py)."""
from __future__ import annotations

from lab.dashboard import class_pages
from lab.dashboard.view import RunView, View
from lab.train import config_diff


class FakeSession:
    def __init__(self, configs, labels, steps, tick, every, ask):
        self.configs, self.labels, self.ask = configs, labels, ask
        self.schedule = (steps, tick, every)
        self.pressed, self.closed, self.touched = [], False, 0

    def matches(self, configs, labels):
        return labels == self.labels and not any(config_diff(a.to_dict(), b.to_dict())
                                                 for a, b in zip(configs, self.configs))

    def set_schedule(self, *schedule):
        self.schedule = schedule

    def __getattr__(self, name):
        if name in class_pages.ACTIONS:
            return lambda: self.pressed.append(name)
        raise AttributeError(name)

    def touch(self):
        self.touched += 1

    def close(self):
        self.closed = True

    current = View("paused", False, True, 3, 40, None, None, (RunView("A · roadmap", 3, [], {}),))

    @property
    def view(self):
        return self.current
