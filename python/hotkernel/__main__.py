"""`python -m hotkernel run -- COMMAND ...` and `python -m hotkernel doctor [--json]` (see _launcher.py)."""
import sys

from ._launcher import main

sys.exit(main())
