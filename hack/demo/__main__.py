"""``python -m hack.demo`` (what ``make run`` starts)."""

import sys

from hack.demo.main import main

if __name__ == "__main__":
    sys.exit(main())
