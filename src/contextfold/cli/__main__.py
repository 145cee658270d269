"""``python -m contextfold.cli``: the same as the ``contextfold`` command."""

import sys

from contextfold.cli import main

sys.exit(main())
