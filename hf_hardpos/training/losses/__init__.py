"""Loss terms of hf_hardpos training (docs/reference.md, Losses), one module per file, each declaring its `TERM`,
and the combined objective."""

from hf_hardpos.training.losses.batch import EmbeddingBatch, Slots
from hf_hardpos.training.losses.cmr import CMRLoss
from hf_hardpos.training.losses.contrastive import ContrastiveLoss
from hf_hardpos.training.losses.hard_negative import HardNegativeLoss
from hf_hardpos.training.losses.hard_positive import HARD_POSITIVE_MODES, HardPositiveLoss
from hf_hardpos.training.losses.imc import IMC_FORMS, IMCLoss
from hf_hardpos.training.losses.objective import HardPosObjective
from hf_hardpos.training.losses.registry import TERMS, LossArguments, LossTerm, describe

__all__ = [
    "CMRLoss",
    "ContrastiveLoss",
    "EmbeddingBatch",
    "HARD_POSITIVE_MODES",
    "HardNegativeLoss",
    "HardPosObjective",
    "HardPositiveLoss",
    "IMC_FORMS",
    "IMCLoss",
    "LossArguments",
    "LossTerm",
    "Slots",
    "TERMS",
    "describe",
]
