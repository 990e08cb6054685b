"""What every hard-positive number means: the score, the versions of the definitions behind a result."""

from __future__ import annotations

from .. import __version__

SCORE_DEFINITION = "cosine similarity of L2-normalised image and text embeddings (no logit scale)"


# Bumped whenever a metric, a tie rule or the score definition changes, so results saved under the
# old definitions are recomputed instead of reused; part of every result key with the package version.
METRIC_DEFINITIONS_VERSION = 1

# Bumped whenever what a saved result holds changes. 2: every task saved by one runner as one `Section`
# per dataset, each unit with its rows (`evaluation.runner`); folders of layout 1 still read
# (`reporting.runs`) and are rescored when resumed.
RESULT_LAYOUT_VERSION = 2

# What an embedding depends on (part of the embedding cache's namespace): the result layout is not.
EMBEDDING_VERSIONS = {"hf_hardpos": __version__, "metric_definitions": METRIC_DEFINITIONS_VERSION}

RESULT_VERSIONS = {**EMBEDDING_VERSIONS, "result_layout": RESULT_LAYOUT_VERSION}
