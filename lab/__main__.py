"""``python -m lab``: see :mod:`lab.cli`."""
from .cli import main

if __name__ == "__main__":
    main()
