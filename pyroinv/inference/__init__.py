"""How the model is fitted: the methods (``methods``: VI, MAP, ML, Augerino) and the model each builds
(``build``), SVI with Adam (``train``), the posterior predictive and the bound (``evaluate``), and two
measurements of the machinery (``estimator_check``, ``benchmark``)."""
