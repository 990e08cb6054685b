"""What every hard-positive number means: the score, the versions of the definitions behind a result."""

from __future__ import annotations

from .. import __version__

SCORE_DEFINITION = "cosine similarity of L2-normalised image and text embeddings (no logit scale)"


# Bumped whenever a metric, a tie rule or the score definition changes, so results saved under the
# old definitions are recomputed instead of reused; part of every result key with the package version.
METRIC_DEFINITIONS_VERSION = 1


RESULT_VERSIONS = {"hf_hardpos": __version__, "metric_definitions": METRIC_DEFINITIONS_VERSION}
