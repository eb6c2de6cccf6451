"""Benchmarks of the lab: each module writes one section of docs/benchmarks.md.

Run them from the repository root as modules, e.g. ``python -m bench.losses`` or ``python -m bench.gpu``
(``make bench`` runs the CPU ones); tests import them as ``bench.<name>``. ``bench`` may import ``lab``
and the test helpers of ``tests`` (the frozen engine, the browser helpers); ``lab`` never imports it.
"""
