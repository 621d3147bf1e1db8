"""``python -m hkern``: the main job (see hkern/_cli.py)."""
import sys

from hkern._cli import main

sys.exit(main())
