"""The filter-bank figure shows the weights the network uses."""
import torch

from pyroinv.model.invariance import Invariance
from pyroinv.model.networks import InvariantFeatures
from pyroinv.run import plots


def test_filter_banks_show_the_det_weighted_weights_of_tied_scale(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(plots, "warp_weight_bank", lambda W, T: (shown.append(T) or torch.ones(T.shape[0], *W.shape)))
    for jac in (False, True):
        feats = InvariantFeatures((1, 12, 12), Invariance("isotropic-scale", init=0.5, image_size=12), hidden=4,
                                  jacobian=jac)
        plots.plot_filter_banks(feats, tmp_path / f"filters-{jac}.png", rows=2, columns=3)
        assert (tmp_path / f"filters-{jac}.png").stat().st_size > 0
    T = shown[-1]
    torch.testing.assert_close(T[:, 0, 0], T[:, 1, 1])  # one scale for x and y, in the plot too
