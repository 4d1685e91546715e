"""One run and its folder: the training loop with progress and checkpoints (``experiment``), the folder's
layout and results (``folder``, ``checkpoint``), its plots and ArviZ file (``plots``, ``arviz_export``),
analyses of saved runs (``analysis``), Markdown tables of runs (``report``) and process settings (``runtime``)."""
