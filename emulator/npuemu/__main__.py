"""`python -m npuemu` is `npu-emu`."""

import sys

from npuemu.cli import main

sys.exit(main())
