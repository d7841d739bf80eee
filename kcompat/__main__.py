"""``python -m kcompat serve ...``: see kcompat.cli."""

import sys

from kcompat.cli import main

sys.exit(main())
