"""``python -m app.cli``: the same as the ``gpucast`` console script."""

import sys

from app.cli import main

sys.exit(main())
