"""`python -m hf_hardpos COMMAND ...`: the `hardpos` command line, for launchers that start modules
(`torchrun --nproc_per_node N -m hf_hardpos eval ...`, `accelerate launch -m hf_hardpos eval ...`)."""

import sys

from .cli import console_main

if __name__ == "__main__":
    sys.exit(console_main())
