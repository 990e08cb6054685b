"""Whether this machine really has CUDA, read once when the tests start (before any test hides it)."""

import torch

HAS_CUDA = torch.cuda.is_available()
