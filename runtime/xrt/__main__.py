"""`python -m xrt` is the `xrt` command."""

import sys

from xrt.cli import main

sys.exit(main())
