"""The reproduction grids: every cell is a valid command, names are unique, protocols differ as stated."""
import pytest

from pyroinv.frontends.sgpr import config_from_args as sgpr_config_from_args
from pyroinv.frontends.sgpr import parser as sgpr_parser
from pyroinv.frontends.train import config_from_args, train_parser
from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.paths import project_root
from pyroinv.reproduce.grids import PROTOCOLS, Cell, tables
from pyroinv.reproduce.paper import TABLE_2, TABLE_C2

ROOT = project_root()


def _all_cells():
    return {cell for t in tables().values() for cell in t.cells()}


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_every_cell_is_a_valid_command(protocol):
    for cell in _all_cells():
        if cell.kind != "sgpr" and cell.kind not in PROTOCOLS[protocol]:  # e.g. the earlier protocols' cnn
            with pytest.raises(ConfigError, match=f"the {protocol} protocol has no settings for --network {cell.kind}"):
                cell.config(protocol, 0)
            continue
        if cell.setting("inference") == "laplace" and PROTOCOLS[protocol].get(cell.kind, {}).get("average") == "probs":
            with pytest.raises(ConfigError, match="--inference laplace needs --average logits"):
                cell.config(protocol, 0)  # a protocol that averages probabilities has no Laplace cells
            continue
        argv = cell.argv(protocol, 0, "runs/x")
        if cell.script == "svi_train.py":
            cfg = config_from_args(train_parser().parse_args(argv))
            assert cfg.network == cell.kind
            assert cfg == cell.config(protocol, 0)  # the command line is the cell's configuration
        else:
            assert sgpr_config_from_args(sgpr_parser().parse_args(argv)) == cell.config(protocol, 0)


def test_cell_names_are_unique_and_say_what_runs():
    cells = _all_cells()
    names = {c.name(0) for c in cells}
    assert len(names) == len(cells)
    grid = tables()
    assert grid["tableC2"].rows["fixed 90°"]["mnist-rot90"].name(2) == "relu-mnist-rot90-rotation-vi-fixed90-s2"
    assert grid["figure6"].rows["ML"]["mnist-rot"].name(0) == "relu-mnist-rot-rotation-ml-init5-s0"
    assert grid["figure6"].rows["RFF: VI"]["mnist-rot"] == grid["table1"].rows["learned (5° init)"]["mnist-rot"]
    assert grid["augerino"].rows["Augerino λ=0.1"]["mnist"].name(0) == "relu-mnist-rotation-augerino-init5-w0.1-s0"


def test_names_are_complete_for_every_network_and_setting():
    grid = tables()
    cell = grid["efficiency"].rows["cnn · Laplace · 312"]["mnist-rot"]
    assert cell.name(1) == "cnn-mnist-rot-affine-laplace-init0.5_0.5_5_0.05_0.05_0.05-n312-minsteps1500-s1"
    assert grid["deep"].rows["mlp: no invariance"]["mnist"].name(0) == "mlp-mnist-none-vi-s0"
    untagged = Cell("svi_train.py", (("dataset", "mnist"), ("invariance", "none"), ("depth", 4)), "mlp")
    assert untagged.name(0) == "mlp-mnist-none-vi-depth4-s0"  # a setting the name has no word for is still in it


def test_the_all_layer_laplace_method_is_a_row_only_for_the_networks_it_covers():
    rows = tables()["efficiency"].rows
    cell = rows["mlp · Laplace, all layers · 312"]["mnist-rot"]
    assert cell.config("cpu", 0).laplace_layers == "all"
    assert cell.name(0).endswith("-n312-minsteps1500-laplacelayersall-s0")
    assert "relu · Laplace, all layers · 20,000" in rows and "cnn · Laplace, all layers · 312" not in rows
    assert len(tables()["efficiency"].cells()) == 5 * 4 * (3 * 4 + 2)


def test_a_cells_own_settings_take_precedence_over_the_protocols():
    cell = tables()["efficiency"].rows["relu · ELBO · 1,250"]["mnist-trans"]
    cfg = cell.config("cpu", 0)
    assert (cfg.train_size, cfg.min_steps, cfg.hidden, cfg.invariance) == (1250, 1500, 512, "affine")
    assert cell.config("paper", 0).train_size == 1250


def test_protocols():
    paper = config_from_args(train_parser().parse_args(tables()["tableC2"].rows["fixed 5°"]["mnist"].argv("paper", 0, "x")))
    cpu = config_from_args(train_parser().parse_args(tables()["tableC2"].rows["fixed 5°"]["mnist"].argv("cpu", 0, "x")))
    assert (paper.hidden, paper.samples, paper.lr, paper.train_size, paper.guide_init_scale) == (1024, 32, 1e-3, None, 1.0)
    # the paper protocol is the defaults, but for its kept cells' recipe (pinned): 10 epochs (the default is 30), W1
    # neither standardised nor warmed up (the defaults standardise it and warm its rate up)
    assert paper == Config(dataset="mnist", fixed_eta=5.0, seed=0, epochs=10, w1_warmup=0, w1_standardize=False)
    assert {"--no-w1-standardize", "--w1-warmup"} <= set(tables()["tableC2"].rows["fixed 5°"]["mnist"].argv("paper", 0, "x"))
    assert "--epochs" in tables()["tableC2"].rows["fixed 5°"]["mnist"].argv("paper", 0, "x")
    assert (cpu.hidden, cpu.samples, cpu.lr, cpu.train_size, cpu.epochs, cpu.estimator) == (512, 16, 1e-3, 20000, 24,
                                                                                           "local")
    assert paper.fixed_eta == cpu.fixed_eta == 5.0
    earlier = config_from_args(train_parser().parse_args(
        tables()["tableC2"].rows["fixed 5°"]["mnist"].argv("cpu-q0.05", 0, "x")))
    assert (earlier.estimator, earlier.guide_init_scale, earlier.mean_lr, earlier.eta_lr, earlier.w1_init_scale,
            earlier.eta_constraint, earlier.epochs) == ("shared", 0.05, 5e-3, 5e-3, 1.0, "none", 8)
    all_images = tables()["tableC2"].rows["fixed 5°"]["mnist"].config("cpu-60k", 0)
    steps = lambda c: c.epochs * -(-c.train_size // c.batch_size)  # noqa: E731
    assert (all_images.train_size, all_images.hidden, all_images.samples) == (60000, 512, 16)
    assert abs(steps(all_images) - steps(cpu)) / steps(cpu) < 0.01  # the same training budget in steps


def test_the_paper_e30_protocol_is_the_paper_protocol_trained_three_times_as_long_in_bfloat16(tmp_path, monkeypatch):
    cell = tables()["headline"].rows["learned (5° init)"]["mnist-rot"]
    paper, longer = cell.config("paper", 0).to_dict(), cell.config("paper-e30", 0).to_dict()
    assert {k: (paper[k], longer[k]) for k in paper if paper[k] != longer[k]} == {
        "epochs": (10, 30), "precision": ("fp32", "bf16")}
    argv = cell.argv("paper-e30", 0, "x")
    assert config_from_args(train_parser().parse_args(argv)).to_dict() == longer
    from pyroinv.reproduce.runner import Job

    monkeypatch.setenv("PYROINV_KEPT_RESULTS", str(ROOT / "results"))
    kept = Job(cell, 0, "paper-e30", tmp_path).kept()  # the kept cell of results/paper-e30/, as the grid writes it
    assert kept is not None and kept.parent.name == "paper-e30"


def test_the_paper_e30_ws_protocol_is_paper_e30_with_todays_first_layer():
    """``paper-e30-ws`` unpins the first layer's recipe: W1 standardised and its rate warmed up, as today's defaults
    (unset), and nothing else changed; its command line writes no flag for them."""
    cell = tables()["headline"].rows["learned (5° init)"]["mnist-rot"]
    longer, ws = cell.config("paper-e30", 0).to_dict(), cell.config("paper-e30-ws", 0).to_dict()
    assert {k: (longer[k], ws[k]) for k in ws if longer[k] != ws[k]} == {
        "w1_warmup": (0, None), "w1_standardize": (False, None)}
    argv = cell.argv("paper-e30-ws", 0, "x")
    assert not any(a.startswith(("--w1-", "--no-w1-")) for a in argv)
    assert config_from_args(train_parser().parse_args(argv)).to_dict() == ws
    assert cell.name(0) == "relu-mnist-rot-rotation-vi-init5-s0"


def test_shared_cells_run_once_and_rows_filter():
    grid = tables()
    assert grid["headline"].rows["learned (5° init)"]["mnist-rot"] == grid["tableC2"].rows["learned (5° init)"]["mnist-rot"]
    fixed = grid["tableC2"].cells(["fixed"])
    assert len(fixed) == 15 and all(c.setting("fixed_eta") is not None for c in fixed)
    assert len(grid["tableC2"].cells()) == 30


def test_paper_numbers_are_the_papers():
    assert TABLE_C2[("fixed 175°", "mnist-rot")] == (97.53, -0.07)
    assert TABLE_2[("SGPR", "mnist-scale")] == (72.10, None)
    assert TABLE_2[("+ affine", "mnist")][0] == 98.93


def test_datasets_filter_picks_a_column(tmp_path, capsys):
    from pyroinv.frontends.reproduce import jobs_of, main

    jobs = jobs_of(["table1"], "cpu", [0], tmp_path, datasets=["mnist-rot90"])
    assert len(jobs) == 6 and {j.cell.setting("dataset") for j in jobs} == {"mnist-rot90"}
    assert main(["table1", "--datasets", "mnist-rot90", "--dry-run", "--runs-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("--dataset mnist-rot90") == 6
    with pytest.raises(SystemExit):
        main(["table1", "--datasets", "cifar10", "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert "not a column of table1" in err and "mnist-rot90" in err and err.count("\n") <= 1


def test_table2_has_the_rows_beyond_the_paper():
    """Scale drawn once for x and y, without and with |det A|, and the similarity group, on every data set."""
    t2 = tables()["table2"]
    for label, inv, jac in (("+ isotropic-scale (beyond the paper)", "isotropic-scale", False),
                            ("+ isotropic-scale, Jacobian (beyond the paper)", "isotropic-scale", True),
                            ("+ similarity, Jacobian (beyond the paper)", "similarity", True)):
        row = t2.rows[label]
        assert set(row) == set(t2.datasets)
        for cell in row.values():
            argv = cell.argv("cpu", 0, "x")
            assert f"--invariance {inv}" in " ".join(argv) and ("--jacobian" in argv) == jac
            assert cell.name(0).endswith("-jac-s0") == jac
            assert cell.config("cpu", 0).jacobian is jac


def test_a_row_named_in_full_is_chosen_alone_and_a_fragment_chooses_every_row_containing_it():
    deep = tables()["deep"]
    alone = deep.cells(["cnn: ELBO, learned rotation, 30 epochs"], ["mnist-rot"])
    assert [c.name(0) for c in alone] == ["cnn-mnist-rot-rotation-vi-init5-e30-s0"]
    every = {c.name(0) for c in deep.cells(["30 epochs"], ["mnist-rot"])}
    assert {"cnn-mnist-rot-rotation-vi-init5-e30-S31-s0", "cnn-mnist-rot-rotation-laplace-init5-e30-s0"} <= every


def test_a_longer_deep_run_trains_with_its_own_method():
    cell = tables()["deep"].rows["cnn: Laplace, learned rotation, 30 epochs"]["mnist-rot"]
    cfg = cell.config("cpu", 0)
    assert (cfg.inference, cfg.epochs, cfg.network) == ("laplace", 30, "cnn")
    assert cell.name(0) == "cnn-mnist-rot-rotation-laplace-init5-e30-s0"


def _change_a_default(monkeypatch, name: str, value):
    """What a change of ``Config``'s default of ``name`` does to a fresh ``Config()`` and to the grids' view of the
    defaults, without editing the class."""
    import inspect

    from pyroinv.reproduce import grids

    params = [p for p in inspect.signature(Config.__init__).parameters.values() if p.default is not p.empty]
    defaults = list(Config.__init__.__defaults__)
    defaults[[p.name for p in params].index(name)] = value
    monkeypatch.setattr(Config.__init__, "__defaults__", tuple(defaults))
    monkeypatch.setitem(grids._DEFAULTS, name, value)


def test_a_changed_default_leaves_the_kept_cells_settings_pinned(monkeypatch):
    """The protocols pin the recipe the kept cells were made with (KEPT_RECIPE): after a default changes, a cell's
    config and its command line still hold the old value, and today's unchanged defaults stay off the command."""
    from pyroinv.reproduce.grids import KEPT_RECIPE

    cell = tables()["tableC2"].rows["learned (5° init)"]["mnist-rot"]
    before_cfg, before_argv = cell.config("cpu", 0), cell.argv("cpu", 0, "x")
    assert "--w1-init-scale" not in before_argv and "--w1-lr" not in before_argv  # today's defaults: not written
    _change_a_default(monkeypatch, "w1_init_scale", 1.0)
    assert Config().w1_init_scale == 1.0 and KEPT_RECIPE["w1_init_scale"] == 0.15
    assert cell.config("cpu", 0) == before_cfg and cell.config("paper", 0).w1_init_scale == 0.15
    argv = cell.argv("cpu", 0, "x")
    assert argv[argv.index("--w1-init-scale") + 1] == "0.15"
    assert config_from_args(train_parser().parse_args(argv)) == before_cfg
