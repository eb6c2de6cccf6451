"""RankLab: rank losses for image retrieval, to learn, teach and research them.

Packages, bottom up (a package imports only lower layers; ``tests/test_layers.py`` checks it):
``core`` (input checks, step surrogates, graded relevance; ``lab.ranking`` is its public face) ->
``losses``, ``metrics`` -> ``data``, ``models`` -> ``train`` -> ``experiments``, ``viz`` ->
``dashboard``, ``grading``, ``studies`` -> ``cli``; then ``app.py`` and the notebooks.
"""
# Equal to pyproject.toml's version and CHANGELOG.md's latest entry (tests/test_release_files.py).
__version__ = "0.2.0"
