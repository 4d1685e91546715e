"""End-to-end runs of the training script on a tiny real-MNIST subset."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pyroinv.files import load_checkpoint, read_jsonl
from pyroinv.config import Config
from pyroinv.inference.arviz_export import import_arviz
from pyroinv.run.experiment import run_experiment
from pyroinv.run.fit_check import chance_fit_warning

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--dataset", "mnist-rot", "--train-size", "120", "--test-size", "60", "--hidden", "16", "--samples", "4",
        "--epochs", "2", "--batch-size", "32", "--eval-draws", "4", "--log-every", "1", "--init-eta", "10"]


def tiny_config(**kw) -> Config:
    base = dict(dataset="mnist-rot", train_size=120, test_size=60, hidden=16, samples=4, epochs=2, batch_size=32,
                eval_draws=4, init_eta=10.0, device="cpu")
    base.update(kw)
    return Config(**base)


def run_script(args, cache_dir, **kw):
    env = {**os.environ, "PYROINV_CACHE": str(cache_dir), "PYROINV_OFFLINE": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "svi_train.py"), *args], capture_output=True,
                          text=True, env=env, timeout=600, **kw)


@pytest.fixture(scope="module")
def script_run(tmp_path_factory, cache_dir, mnist):
    out = tmp_path_factory.mktemp("run") / "vi"
    proc = run_script([*TINY, "--out", str(out)], cache_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, proc


@pytest.mark.slow
def test_script_writes_every_output(script_run):
    out, proc = script_run
    for name in ("config.json", "meta.json", "metrics.jsonl", "checkpoint.pt", "results.json", "eta.png", "curves.png",
                 "filters.png", "posterior.nc"):
        assert (out / name).stat().st_size > 0, name
    assert "learned invariance: rotation ±" in proc.stdout
    assert "w_norm[0]" in proc.stdout and "p_true[0]" in proc.stdout
    # the progress lines show the regime of q, so a collapsed q is visible while it trains
    assert "KL/N" in proc.stderr and " q " in proc.stderr and "|mu|" in proc.stderr


def test_a_run_at_chance_says_so(script_run):
    out, proc = script_run
    results = json.loads((out / "results.json").read_text())
    expected = chance_fit_warning(results["train_loglik_per_datapoint"], 10, results["learned_invariance"])
    assert results["warnings"] == ([expected] if expected else [])
    if expected:  # eight steps on 120 images: the tiny run is near chance, and the user is told
        assert f"warning: {expected}" in proc.stderr


@pytest.mark.slow
def test_a_network_that_learned_nothing_is_warned_about(tmp_path, cache_dir, mnist, caplog):
    still = dict(lr=1e-9, mean_lr=1e-9, eta_lr=1e-9)  # eight steps that move nothing: the fit stays at its start
    res = run_experiment(tiny_config(inference="ml", **still), tmp_path / "still", cache_dir=cache_dir, progress=False)
    assert -res["train_loglik_per_datapoint"] >= 0.9 * math.log(10)
    assert len(res["warnings"]) == 1 and "no better than chance" in res["warnings"][0]
    assert "rotation ±10.0°" in res["warnings"][0]
    assert any(r.getMessage() == "warning: " + res["warnings"][0] for r in caplog.records)


def test_outputs_parse_and_agree(script_run):
    out, _ = script_run
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["hidden"] == 16 and cfg["invariance"] == "rotation"
    results = json.loads((out / "results.json").read_text())
    records = read_jsonl(out / "metrics.jsonl")
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert results["steps"] == ckpt["step"] == records[-1]["step"] == 8  # 2 epochs x ceil(120 / 32)
    eta_ckpt = ckpt["model"]["features.invariance.eta_active_unconstrained"]
    bounded = torch.distributions.biject_to(torch.distributions.constraints.interval(-torch.pi, torch.pi))
    assert cfg["eta_constraint"] == "tanh"  # the default: rotation bounded to ±180°
    assert results["eta"][2] == pytest.approx(float(bounded(eta_ckpt)[0]), abs=1e-6)
    assert records[-1]["eta"] == pytest.approx(results["eta"])
    assert abs(results["eta_human"]["rotation_deg"] - abs(results["eta"][2]) * 180 / 3.141592653589793) < 1e-6
    for key in ("step", "epoch", "loss", "elbo_per_datapoint", "nll", "eta", "eta_human", "lr", "wall_time",
                "kl_per_datapoint", "q_scale", "mu_norm"):
        assert key in records[0]
    # the regime diagnostics: q starts at L = I (scale 1) and mu at 0, the KL is that of the current q
    assert 0.5 < records[0]["q_scale"] < 1.5 and records[0]["kl_per_datapoint"] >= 0
    assert records[-1]["mu_norm"] > 0
    for key in ("test_accuracy", "test_nll", "elbo_per_datapoint", "learned_invariance", "train_wall_time_s",
                "device", "versions"):
        assert results[key] is not None, key
    assert 0 <= results["test_accuracy"] <= 1


#: what arviz says of 4 draws of a 16-unit network on 60 test images (the test's tiny sizes, not a fault)
TINY_POSTERIOR = pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto:UserWarning:arviz.stats.stats")


@TINY_POSTERIOR
def test_arviz_file(script_run):
    az = import_arviz()

    out, _ = script_run
    idata = az.from_netcdf(str(out / "posterior.nc"))
    for group in ("posterior", "log_likelihood", "observed_data", "predictions", "predictions_constant_data",
                  "constant_data"):
        assert hasattr(idata, group), group
    assert idata.posterior["W2"].dims == ("chain", "draw", "class", "hidden")
    assert idata.posterior["W2"].shape == (1, 200, 10, 17)  # --export-draws, hundreds: loo's diagnostics mean something
    # the training set's pointwise log-likelihood, where az.loo expects it; the test set's under predictions
    assert idata.log_likelihood["y"].dims == ("chain", "draw", "train_point")
    assert idata.log_likelihood["y"].shape == (1, 200, 120) and idata.observed_data["y"].shape == (120,)
    assert idata.predictions["y"].shape == idata.predictions["y_log_likelihood"].shape == (1, 200, 60)
    assert idata.predictions_constant_data["y_test"].shape == (60,)
    loo = az.loo(idata, pointwise=True)
    assert loo.elpd_loo < 0 and bool((loo.pareto_k < 1).all())  # none "very bad" (on the test set: all were)


@pytest.mark.slow
def test_resume_after_interruption_matches_uninterrupted(tmp_path, cache_dir, mnist):
    full = run_experiment(tiny_config(), tmp_path / "full", cache_dir=cache_dir, progress=False)
    part = run_experiment(tiny_config(), tmp_path / "part", cache_dir=cache_dir, progress=False, max_steps=3,
                          log_every=1)
    assert part == {"step": 3, "finished": False}
    resumed = run_experiment(tiny_config(), tmp_path / "part", resume=True, cache_dir=cache_dir, progress=False,
                             log_every=1)
    assert resumed["steps"] == full["steps"] == 8
    a, b = load_checkpoint(tmp_path / "full" / "checkpoint.pt"), load_checkpoint(tmp_path / "part" / "checkpoint.pt")
    for group in ("model", "guide"):
        for k in a[group]:
            torch.testing.assert_close(a[group][k], b[group][k], rtol=0, atol=0)
    assert [r["step"] for r in read_jsonl(tmp_path / "part" / "metrics.jsonl")] == list(range(1, 9))


@pytest.mark.slow
def test_python_api_ml_run(tmp_path, cache_dir, mnist):
    res = run_experiment(tiny_config(inference="ml"), tmp_path / "ml", cache_dir=cache_dir, progress=False)
    assert res["elbo_per_datapoint"] is None and res["train_loglik_per_datapoint"] < 0


@pytest.mark.slow
def test_evaluate_script_on_another_variant(script_run, cache_dir):
    out, _ = script_run
    env = {**os.environ, "PYROINV_CACHE": str(cache_dir), "PYROINV_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(out), "--dataset", "mnist",
                           "--test-size", "50", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["trained_on"] == "mnist-rot" and res["evaluated_on"] == "mnist" and res["test_size"] == 50
    assert res["learned_invariance"].startswith("rotation ±") and 0 <= res["inactive_units"] < 1
    assert res["units_under_q"]["inactive_units"] == res["inactive_units"] and res["units_under_q"]["live_sd_rms"] > 0
    assert res["errors"] == round((1 - res["test_accuracy"]) * 50)
    assert sum(n for _, _, n in res["most_confused"]) <= res["errors"]
    assert all(t != p and 0 <= t < 10 and 0 <= p < 10 for t, p, _ in res["most_confused"])
    text = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(out), "--test-size", "50"],
                          capture_output=True, text=True, env=env, timeout=300).stdout
    assert "inactive units: " in text and "% of the last hidden layer's" in text
    assert "q of W2 against the prior's sd (rms over classes and units): live units' |mean| " in text
    assert "of the units carry 99% of the layer's mean squared activation" in text
    assert "most confused (true as predicted): " in text and "errors in all" in text
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(out / "nope")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a run folder" in bad.stderr


def test_evaluation_can_average_more_transforms_than_training(script_run, cache_dir):
    """``evaluate.py --samples``: the run's S by default (its own evaluation, reproduced), more on request."""
    from pyroinv.run.analysis import evaluate_run

    out, _ = script_run
    own = json.loads((out / "results.json").read_text())
    size = json.loads((out / "config.json").read_text())["test_size"]
    same = evaluate_run(out, cache_dir=str(cache_dir), test_size=size, device="cpu")
    more = evaluate_run(out, cache_dir=str(cache_dir), test_size=size, samples=16, device="cpu")
    assert same["samples"] == 4 and more["samples"] == 16
    assert same["test_accuracy"] == pytest.approx(own["test_accuracy"])
    assert more["test_nll"] != pytest.approx(same["test_nll"], abs=1e-6)


@pytest.mark.slow
def test_a_validation_set_is_held_out_reported_and_reevaluated(tmp_path, cache_dir, mnist):
    """``--valid-size``: results.json reports the predictive on the held-out images; ``evaluate.py --split valid``
    reproduces it and can then choose an evaluation setting (here S) without the test set."""
    from pyroinv.errors import ConfigError
    from pyroinv.run.analysis import evaluate_run

    res = run_experiment(tiny_config(valid_size=50, epochs=1), tmp_path / "v", cache_dir=cache_dir, progress=False,
                         quiet=True)
    assert res["valid_size"] == 50 and res["train_size"] == 120 and 0.0 <= res["valid_accuracy"] <= 1.0
    again = evaluate_run(tmp_path / "v", cache_dir=str(cache_dir), split="valid", device="cpu")
    assert again["valid_size"] == 50 and again["valid_accuracy"] == pytest.approx(res["valid_accuracy"])
    assert again["valid_nll"] == pytest.approx(res["valid_nll"], rel=1e-5)
    plain = run_experiment(tiny_config(epochs=1), tmp_path / "p", cache_dir=cache_dir, progress=False, quiet=True)
    assert plain["valid_accuracy"] is None
    with pytest.raises(ConfigError, match="without --valid-size"):
        evaluate_run(tmp_path / "p", cache_dir=str(cache_dir), split="valid", device="cpu")


def test_existing_run_is_never_overwritten(script_run, cache_dir):
    out, _ = script_run
    before = (out / "results.json").read_bytes()
    proc = run_script([*TINY, "--out", str(out)], cache_dir)
    assert proc.returncode == 2 and "already holds a run" in proc.stderr and "Traceback" not in proc.stderr
    assert (out / "results.json").read_bytes() == before


@TINY_POSTERIOR
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.sort_values:Warning:arviz.stats.stats")
def test_saved_posteriors_compare_with_arviz(script_run, tmp_path, cache_dir):
    az = import_arviz()

    out, _ = script_run
    run_experiment(tiny_config(fixed_eta=90.0), tmp_path / "fixed90", cache_dir=cache_dir, progress=False)
    models = {"learned": az.from_netcdf(str(out / "posterior.nc")),
              "fixed 90": az.from_netcdf(str(tmp_path / "fixed90" / "posterior.nc"))}
    table = az.compare(models)
    assert set(table.index) == {"learned", "fixed 90"} and table["elpd_loo"].notna().all()


COMBINATIONS = [
    dict(inference="ml", elbo="closed-form"),
    dict(inference="map"),
    dict(elbo="closed-form", network="rff"),
    dict(sampling="deterministic", samples=3),
    dict(invariance="affine", init_eta=0.5),
    dict(invariance="translation", dataset="mnist-trans", init_eta=1.0, eta_constraint="softplus"),
    dict(invariance="scale", dataset="mnist-scale", eta_constraint="tanh", init_eta=0.2),
    dict(invariance="none"),
    dict(fixed_eta=45.0, network="rff"),
    dict(inference="laplace", laplace_layers="all", invariance="affine", init_eta=0.5),
    dict(inference="laplace", laplace_layers="all", network="mlp", depth=2),
]


@pytest.mark.slow
@pytest.mark.parametrize("kw", COMBINATIONS, ids=[",".join(f"{k}={v}" for k, v in c.items()) for c in COMBINATIONS])
def test_flag_combinations_train(tmp_path, cache_dir, mnist, kw):
    kw = {"epochs": 1, **kw}
    res = run_experiment(tiny_config(**kw), tmp_path / "r", cache_dir=cache_dir, progress=False)
    assert res["steps"] == 4 and 0 <= res["test_accuracy"] <= 1 and res["test_nll"] > 0


def test_results_table(script_run):
    from pyroinv.run.report import markdown_table

    out, _ = script_run
    table = markdown_table([out]).splitlines()
    assert table[0].startswith("| run | data |") and len(table) == 3
    assert "| mnist-rot | relu | vi | rotation ±" in table[2]
    assert table[0].endswith("| inactive units % |") and "valid acc." not in table[0]  # only the columns it has
    assert table[1].count("---") == table[0].count("|") - 1


@pytest.mark.slow
def test_eta_profile_script(script_run, cache_dir):
    out, _ = script_run
    env = {**os.environ, "PYROINV_CACHE": str(cache_dir), "PYROINV_OFFLINE": "1"}
    figure = out.parent / "profile.png"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "eta_profile.py"), str(out), "--values", "0", "90",
                           "--train-size", "40", "--laplace", "--plot", str(figure)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 0 ") or line.startswith("| 90 ")]
    assert len(rows) == 2
    kl = {float(r.split("|")[4]) for r in rows}
    assert len(kl) == 1  # q is untouched: the same KL for every eta
    kron, exact, layers = (float(rows[0].split("|")[i]) for i in (5, 6, 7))  # both curvatures; every layer
    assert kron < 0 and exact < 0 and layers < 0 and figure.exists()


def test_evidence_script_gives_a_run_the_laplace_estimates_it_recorded(script_run, cache_dir, tmp_path):
    out, _ = script_run
    env = {**os.environ, "PYROINV_CACHE": str(cache_dir), "PYROINV_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "evidence.py"), str(out), "--json",
                           str(tmp_path / "ev.json"), "--importance", "200"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads((tmp_path / "ev.json").read_text())
    recorded = json.loads((out / "results.json").read_text())
    # the same estimates on other transform draws (S = 4 here), and a prior precision per layer
    assert row["laplace_per_datapoint"] == pytest.approx(recorded["laplace_per_datapoint"], abs=5e-3)
    assert row["laplace_layers_per_datapoint"] == pytest.approx(recorded["laplace_layers_per_datapoint"], rel=0.1)
    assert row["laplace_layers_per_datapoint"] < row["laplace_per_datapoint"] < 0  # the body's Occam factor costs
    assert len(row["prior_precisions"]) == 1 and f"| {out.name} |" in proc.stdout
    # the importance-sampling check lies near the exact Laplace estimate, with a usable effective sample size
    assert row["importance_per_datapoint"] == pytest.approx(row["laplace_full_per_datapoint"], abs=0.05)
    assert 1 < row["importance_ess"] <= 200 and "IS/N" in proc.stdout


@pytest.mark.slow
def test_plot_eta_runs_script(script_run, tmp_path):
    out, _ = script_run
    png = tmp_path / "eta.png"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_eta_runs.py"), str(out), str(out),
                           "--labels", "a", "b", "--out", str(png)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_eta_runs.py"), str(out), "--labels", "a", "b",
                          "--out", str(png)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "one label per run" in bad.stderr


@pytest.mark.slow
def test_run_or_load_trains_once_resumes_and_refuses_other_settings(tmp_path, cache_dir):
    from pyroinv.errors import ConfigError
    from pyroinv.run.experiment import run_or_load

    cfg = tiny_config()
    out = tmp_path / "r"
    run_experiment(cfg, out, cache_dir=cache_dir, progress=False, max_steps=2)  # interrupted
    first = run_or_load(cfg, out, cache_dir=cache_dir, progress=False, quiet=True)  # resumed
    assert first["steps"] == 8
    stamp = (out / "results.json").stat().st_mtime_ns
    assert run_or_load(cfg, out, cache_dir=cache_dir, progress=False) == first  # read back, not retrained
    assert (out / "results.json").stat().st_mtime_ns == stamp
    with pytest.raises(ConfigError, match="other settings .*hidden"):
        run_or_load(tiny_config(hidden=8), out, cache_dir=cache_dir)
    stale = tmp_path / "stale"  # an attempt that died before its first checkpoint
    stale.mkdir()
    (stale / "config.json").write_text(json.dumps(cfg.to_dict()))
    (stale / "metrics.jsonl").write_text("")
    assert run_or_load(cfg, stale, cache_dir=cache_dir, progress=False, quiet=True)["steps"] == 8


def test_evaluation_can_take_the_transforms_on_a_grid(script_run, cache_dir):
    """``evaluate.py --sampling deterministic``: the midpoint grid estimates the same predictive as many random
    transforms, and closer than as few random ones; an unknown name is refused with the choices."""
    from pyroinv.errors import ConfigError
    from pyroinv.run.analysis import evaluate_run

    out, _ = script_run
    size = json.loads((out / "config.json").read_text())["test_size"]
    few = evaluate_run(out, cache_dir=str(cache_dir), test_size=size, samples=8, device="cpu")
    grid = evaluate_run(out, cache_dir=str(cache_dir), test_size=size, samples=8, device="cpu", sampling="deterministic")
    many = evaluate_run(out, cache_dir=str(cache_dir), test_size=size, samples=512, device="cpu")
    assert few["sampling"] == "stochastic" and grid["sampling"] == "deterministic"
    assert abs(grid["test_nll"] - many["test_nll"]) < abs(few["test_nll"] - many["test_nll"])
    with pytest.raises(ConfigError, match="unknown sampling 'grid'"):
        evaluate_run(out, cache_dir=str(cache_dir), test_size=size, device="cpu", sampling="grid")


@pytest.mark.slow
def test_the_precision_is_recorded_in_the_config_and_the_results(tmp_path, cache_dir, mnist, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="pyroinv")
    res = run_experiment(tiny_config(precision="bf16"), tmp_path / "bf16", cache_dir=cache_dir, progress=False,
                         quiet=True)
    assert res["precision"] == "bf16"
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["precision"] == "bf16"
    assert "products in bf16" in caplog.text
    auto = run_experiment(tiny_config(precision="auto"), tmp_path / "auto", cache_dir=cache_dir, progress=False,
                          quiet=True)
    from pyroinv.model.precision import native_bf16

    assert auto["precision"] == ("bf16" if native_bf16("cpu") else "fp32")
    assert "(auto: native bfloat16 products" in caplog.text
