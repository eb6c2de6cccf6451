"""``python -m lab.docs_figures``: see lab/docs_figures/page.py."""
from lab.docs_figures.page import main

main()
