"""Bad input on the command line: one line naming the problem and the fix, exit status 2, no traceback."""
import pytest

from pyroinv.frontends.train import train_main

CASES = [
    (["--invariance", "spin"], "argument --invariance: invalid choice: 'spin'"),
    (["--network", "resnet"], "argument --network: invalid choice"),
    (["--inference", "mcmc"], "argument --inference: invalid choice"),
    (["--dataset", "mnist-upsidedown"], "unknown data set 'mnist-upsidedown'"),
    (["--batch-size", "0"], "argument --batch-size: '0' must be positive"),
    (["--samples", "-3"], "argument --samples: '-3' must be positive"),
    (["--hidden", "many"], "argument --hidden: 'many' is not a positive integer"),
    (["--epochs", "1.5"], "argument --epochs: '1.5' is not a positive integer"),
    (["--lr", "0"], "argument --lr: '0' must be positive"),
    (["--lr", "nan"], "argument --lr: 'nan' is not a finite number"),
    (["--alpha", "-1"], "argument --alpha: '-1' must be positive"),
    (["--device", "tpu"], "argument --device: invalid choice"),
    (["--inference", "augerino", "--width-weight", "-0.1"], "--width-weight must be a non-negative number, got -0.1"),
    (["--invariance", "translation", "--init-eta", "1", "2", "3"],
     "--init-eta has 3 values but --invariance translation has 2 generators"),
    (["--width-weight", "0.1"], "--width-weight applies to --inference augerino only, not vi"),
    (["--depth", "4"], "--depth applies to --network mlp only, not relu"),
    (["--network", "mlp", "--depth", "1"], "--depth 1: --network mlp has at least 2 hidden layers"),
    (["--channels", "32", "64"], "--channels applies to --network cnn only, not relu"),
    (["--network", "cnn", "--channels", "32"], "argument --channels: expected 2 arguments"),
    (["--network", "cnn", "--channels", "32", "0"], "argument --channels: '0' must be positive"),
    (["--activation", "tanh"], "--activation applies to --network cnn only, not relu"),
    (["--network", "cnn", "--activation", "gelu"], "argument --activation: invalid choice: 'gelu'"),
    (["--inference", "laplace", "--average", "probs"], "--inference laplace needs --average logits"),
    (["--min-steps", "-5"], "--min-steps must be a non-negative whole number of steps"),
    (["--network", "cnn", "--w1-standardize"], "--w1-standardize applies to the first layer of --network relu or mlp"),
    (["--inference", "laplace", "--laplace-layers", "all", "--w1-standardize"],
     "--laplace-layers all puts its Gaussian on W1 itself"),
    (["--w1-warmup", "-1"], "--w1-warmup must be a non-negative whole number of steps"),
]


@pytest.mark.parametrize("argv,message", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_arguments_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PYROINV_CACHE", str(tmp_path))
    try:  # argparse errors exit; errors found later are returned
        code = train_main([*argv, "--out", str(tmp_path / "run")])
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert message in lines[0] and "Traceback" not in err


def test_cuda_without_cuda(capsys, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = train_main(["--device", "cuda", "--out", str(tmp_path / "r"), "--cache-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "CUDA is not available" in err and "--device cpu" in err and err.count("\n") == 1


def test_one_initial_eta_per_generator():
    import math

    from pyroinv.inference.build import initial_eta
    from pyroinv.frontends.train import config_from_args, train_parser

    cfg = config_from_args(train_parser().parse_args(["--invariance", "affine", "--init-eta", "0.5", "1", "5", "0.05",
                                                      "0.1", "0.02"]))
    raw = initial_eta(cfg, image_size=28)
    assert raw[:2] == [0.5 * 2 / 28, 1 * 2 / 28] and math.isclose(raw[2], math.radians(5)) and raw[3:] == [0.05, 0.1, 0.02]
    one = config_from_args(train_parser().parse_args(["--invariance", "translation", "--init-eta", "2"]))
    assert one.init_eta == 2.0 and initial_eta(one, image_size=28) == [2 * 2 / 28] * 2


def test_the_cnn_on_coordinates_is_one_line_and_writes_nothing(capsys, tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setenv("PYROINV_CACHE", str(tmp_path))
    rng = np.random.default_rng(0)
    path = tmp_path / "points.npz"
    np.savez(path, x_train=rng.normal(size=(20, 2)), y_train=np.arange(20) % 2, x_test=rng.normal(size=(6, 2)),
             y_test=np.arange(6) % 2)
    code = train_main(["--dataset", str(path), "--network", "cnn", "--hidden", "4", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "--network cnn needs images (C, H, W)" in errors[0]
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()
