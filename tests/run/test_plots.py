"""The filter-bank figure shows the weights the network uses."""
import torch

from pyroinv.model.invariance import Invariance
from pyroinv.model.networks import InvariantFeatures
from pyroinv.model.warp import jacobian
from pyroinv.run import plots


def test_filter_banks_show_the_det_weighted_weights_of_tied_scale(tmp_path):
    shown = {}
    for jac in (False, True):
        torch.manual_seed(0)
        feats = InvariantFeatures((1, 12, 12), Invariance("isotropic-scale", init=0.5, image_size=12), hidden=4,
                                  jacobian=jac)
        bank = feats.weight_bank
        feats.weight_bank = lambda T, bank=bank, jac=jac: shown.setdefault(jac, (T, bank(T)))[1]
        plots.plot_filter_banks(feats, tmp_path / f"filters-{jac}.png", rows=2, columns=3)
        assert (tmp_path / f"filters-{jac}.png").stat().st_size > 0
    T, plain = shown[False]
    torch.testing.assert_close(T[:, 0, 0], T[:, 1, 1])  # one scale for x and y, in the plot too
    torch.testing.assert_close(shown[True][0], T)
    # with --jacobian the plot shows |det A| w∘T, the weights the network multiplies the inputs by
    torch.testing.assert_close(shown[True][1][0], plain[0] * jacobian(T).view(-1, 1, 1))
    assert not torch.allclose(shown[True][1][0], plain[0])


def test_a_curve_is_drawn_alike_in_every_panel_and_a_method_keeps_its_colour():
    styles = plots.curve_styles(["relu, ELBO", "cnn, ELBO", "relu, Laplace", "cnn, Laplace", "relu, ELBO"])
    assert len(styles) == 4
    assert styles["relu, ELBO"]["color"] == styles["cnn, ELBO"]["color"] != styles["relu, Laplace"]["color"]
    assert styles["relu, ELBO"]["ls"] == styles["relu, Laplace"]["ls"] != styles["cnn, ELBO"]["ls"]
    plain = plots.curve_styles([f"curve {i}" for i in range(12)])
    assert len({(s["color"], s["ls"]) for s in plain.values()}) == 12


def test_curve_panels_are_written(tmp_path):
    panels = {"fully rotated": {"relu, ELBO": [(312, 65.1), (1250, 85.1)], "cnn, ELBO": [(312, 10.0)]},
              "regular": {"relu, ELBO": [(312, 83.8), (1250, 90.6)]}}
    path = tmp_path / "curves.png"
    plots.plot_curves_panels(panels, path, xlabel="training images", ylabel="test accuracy (%)", title="t")
    assert path.stat().st_size > 0


def test_more_than_ten_runs_keep_distinct_colours():
    few = plots.distinct_colours(["a", "b", "a"])
    assert few == {"a": "C0", "b": "C1"}
    labels = [f"row {i}" for i in range(14)]
    many = plots.distinct_colours(labels)
    assert list(many) == labels
    assert len({tuple(c) for c in many.values()}) == 14


def test_eta_panels_of_many_rows_are_written(tmp_path):
    records = [{"step": s, "eta_human": {"rotation_deg": 10.0 * s}} for s in range(3)]
    panels = {"fully rotated": [(f"row {i}", 0, records) for i in range(14)],
              "regular": [(f"row {i}", 1, records) for i in range(14)]}
    plots.plot_eta_panels(panels, tmp_path / "eta.png", title="t")
    assert (tmp_path / "eta.png").stat().st_size > 0
