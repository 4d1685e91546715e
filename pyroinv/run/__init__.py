"""One run and its folder: the run end to end on an :class:`~pyroinv.classifier.InvariantClassifier` (``experiment``),
the folder's layout and results (``folder``, ``checkpoint``), its plots (``plots``), analyses of saved runs
(``analysis``), Markdown tables of runs (``report``) and process settings (``runtime``)."""
