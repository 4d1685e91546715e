"""Reproduction driver: the paper's experiment grids (:mod:`.grids`), run resumably (:mod:`.runner`) and
written next to the paper's numbers (:mod:`.tables`)."""
