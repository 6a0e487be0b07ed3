"""``python -m latte_lab.cli``: the ``latte-lab`` command without the console script."""

import sys

from latte_lab.cli import main

sys.exit(main())
