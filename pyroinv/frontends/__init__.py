"""The command-line front ends, each a parser and a ``main`` over the package, with one-line errors (exit status 2):
``train`` (``svi_train.py`` and ``evaluate.py``, with the parsing helpers the others share), ``reproduce``
(``reproduce.py``), ``benchmark`` (``benchmark.py``) and ``sgpr`` (``sgpr_train.py``). ``python -m pyroinv COMMAND``
(:mod:`pyroinv.__main__`) dispatches to them."""
