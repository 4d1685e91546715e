"""The library's entry point: :class:`InvariantClassifier`, for any PyTorch body and any data (tensors, arrays, a
``Dataset`` or a ``DataLoader``), with the training loop (:mod:`.loop`) every fit runs, the command line's
included."""

from .classifier import InvariantClassifier
from .loop import FitCallbacks, TrainingDiverged

__all__ = ["FitCallbacks", "InvariantClassifier", "TrainingDiverged"]
