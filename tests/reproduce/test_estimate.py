"""The time a cell is expected to take, from the kept cells (pyroinv.reproduce.estimate), and --dry-run's use of it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyroinv.config import Config
from pyroinv.frontends import reproduce as cli
from pyroinv.reproduce import grids
from pyroinv.reproduce.estimate import (backtest, backtest_summary, cost_key, duration, estimate_seconds, measured,
                                        planned_steps, precision_note, summary, training_examples)
from pyroinv.reproduce.kept import kept_root

ROOT = Path(__file__).resolve().parents[2]


def _keep(root: Path, name: str, cfg: dict, num_data: int, steps: int, train_s: float, eval_s: float,
          device: str = "cpu", protocol: str = "cpu") -> None:
    folder = root / protocol / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "meta.json").write_text(json.dumps({"num_data": num_data}))
    (folder / "results.json").write_text(json.dumps({"steps": steps, "train_wall_time_s": train_s,
                                                     "eval_wall_time_s": eval_s, "device": device}))


def test_planned_steps_are_the_steps_every_kept_cell_ran():
    checked = 0
    for results in sorted((ROOT / "results").glob("*/*/results.json")):
        saved = json.loads(results.read_text())
        cfg = json.loads(results.with_name("config.json").read_text())
        num_data = json.loads(results.with_name("meta.json").read_text())["num_data"]
        assert planned_steps(cfg, num_data) == saved["steps"], results.parent.name
        checked += 1
    assert checked >= 100


def test_training_examples_are_the_subset_or_the_whole_split_less_the_validation_set():
    assert training_examples(Config(dataset="mnist-rot", train_size=312).to_dict()) == 312
    assert training_examples(Config(dataset="mnist-rot").to_dict()) == 60000
    assert training_examples(Config(dataset="mnist", valid_size=1000).to_dict()) == 59000
    assert training_examples(Config(dataset="cifar10-rot", train_size=10 ** 6).to_dict()) == 50000


def test_a_cell_is_priced_by_the_kept_cell_of_the_same_cost_nearest_in_size(tmp_path):
    base = Config(dataset="mnist-rot", invariance="rotation", hidden=64, samples=4, epochs=2, batch_size=100)
    small = {**base.to_dict(), "train_size": 1000}
    large = {**base.to_dict(), "dataset": "mnist", "train_size": 20000}  # another data set: the same cost
    _keep(tmp_path, "a", small, 1000, 20, train_s=10.0, eval_s=3.0)        # 0.5 s a step
    _keep(tmp_path, "b", large, 20000, 400, train_s=400.0, eval_s=30.0)    # 1.0 s a step
    _keep(tmp_path, "c", small, 1000, 20, train_s=1.0, eval_s=1.0, device="cuda")
    costs = measured(["cpu"], root=tmp_path)
    cell = {**base.to_dict(), "train_size": 2000}                          # 40 steps, nearest to 1,000
    assert estimate_seconds(cell, "cpu", costs) == pytest.approx(0.5 * 40 + 3.0)
    cell = {**base.to_dict(), "train_size": 10000}                         # 200 steps, nearer to 20,000
    assert estimate_seconds(cell, "cpu", costs) == pytest.approx(1.0 * 200 + 30.0)
    assert estimate_seconds(cell, "cuda", costs) == pytest.approx(1.0 / 20 * 200 + 1.0)
    # what changes a step's cost changes the key: no estimate
    for other in ({"hidden": 128}, {"inference": "laplace"}, {"invariance": "none"}, {"network": "mlp"}):
        assert estimate_seconds({**cell, **other}, "cpu", costs) is None
    # a folder written before a setting existed counts as that setting's default
    older = {k: v for k, v in small.items() if k not in ("laplace_layers", "channels", "activation")}
    assert cost_key(older, "cpu") == cost_key(small, "cpu")


def test_folders_without_timings_are_left_out(tmp_path):
    (tmp_path / "cpu" / "sgpr-cell").mkdir(parents=True)
    (tmp_path / "cpu" / "sgpr-cell" / "results.json").write_text(json.dumps({"test_accuracy": 0.9}))
    assert measured(["cpu", "paper"], root=tmp_path) == {}


def test_the_summary_says_how_long_and_for_how_many():
    assert duration(40) == "40 s" and duration(720) == "12 min" and duration(3 * 3600) == "3.0 h"
    assert summary([], "cpu") == "every cell has finished"
    line = summary([600.0, 1200.0, None], "cpu")
    assert line.startswith("3 cell(s) to run: about 30 min for one worker on the CPU (the 2 with a kept cell")
    assert line.endswith("; 1 with no kept cell to go by")


def test_dry_run_prints_each_cells_estimate_and_the_total(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PYROINV_KEPT_RESULTS", str(tmp_path / "kept"))
    done = grids.efficiency_cell("relu", "mnist-rot", "ELBO", 1250)
    cfg = done.config("cpu", 0).to_dict()
    steps = planned_steps(cfg, 1250)
    _keep(kept_root(), done.name(0), cfg, 1250, steps, train_s=0.2 * steps, eval_s=30.0)
    assert cli.main(["efficiency", "deep", "--rows", "relu · ELBO · 312", "relu · ELBO · 1,250", "--datasets",
                     "mnist-rot", "--seeds", "0", "--dry-run", "--runs-dir", str(tmp_path / "runs")]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = duration(0.2 * planned_steps(cfg, 312) + 30.0)
    assert lines[0].startswith(f"[todo, about {expected}] python scripts/svi_train.py --network relu --train-size 312")
    assert lines[1].startswith("[done] python scripts/svi_train.py --network relu --train-size 1250")
    # a line for each table asked for (the deep grid has no row of these names), then one for all
    assert lines[2] == f"efficiency: 1 of 2 cells finished; 1 cell(s) to run: about {expected} for one worker on the CPU"
    assert lines[3] == "deep: 0 of 0 cells finished; every cell has finished"
    assert lines[4].startswith(f"1 cell(s) to run: about {expected} for one worker on the CPU, at the speed")
    assert lines[5].startswith("too few kept cells on the CPU")  # one kept cell: nothing to check the estimate on


def test_cells_of_one_size_are_priced_by_their_median_and_the_backtest_prices_each_kept_cell_from_the_others(tmp_path):
    cfg = {**Config(dataset="mnist-rot", invariance="rotation", hidden=64, samples=4, epochs=2,
                    batch_size=100).to_dict(), "train_size": 1000}
    for name, train_s in (("a", 10.0), ("b", 20.0), ("c", 60.0)):  # 0.5, 1 and 3 s a step, beside different loads
        _keep(tmp_path, name, cfg, 1000, 20, train_s=train_s, eval_s=0.0)
    costs = measured(["cpu"], root=tmp_path)
    assert estimate_seconds(cfg, "cpu", costs) == pytest.approx(1.0 * 20)  # the median, not the fastest
    # a: priced at the median of b and c (2 s a step) against 0.5; b: of a and c (1.75) against 1; c: 0.75 against 3
    assert sorted(backtest(costs, "cpu")) == pytest.approx(sorted([4.0, 1.75, 0.25]))
    assert backtest(costs, "cuda") == []
    line = backtest_summary(backtest(costs, "cpu"), "cpu")
    assert line.startswith("checked on the 3 kept cells on the CPU with a peer of their cost") and "×1.75 at the median" in line
    assert backtest_summary([], "cuda").startswith("too few kept cells on a GPU")


def test_bfloat16_cells_on_a_processor_without_it_are_said_to_run_slower(monkeypatch):
    from pyroinv.model import precision

    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset({"avx2"}))
    note = precision_note(["fp32", "bf16"], "cpu")
    assert note is not None and "no native bfloat16 products" in note and "slower" in note
    assert precision_note(["fp32"], "cpu") is None  # float32 cells run at the estimates' speed
    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert precision_note(["bf16"], "cpu") is None
    jobs = cli.jobs_of(["headline"], "paper-e30-ws", [0], Path("unused"), ["learned (5° init)"], ["mnist-rot"])
    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset())
    assert jobs and cli.job_precision_note(jobs, "cpu") == note  # the protocol's cells compute in bfloat16
    assert cli.job_precision_note(cli.jobs_of(["headline"], "cpu", [0], Path("unused")), "cpu") is None
    with_sgpr = cli.jobs_of(["table2"], "paper-e30-ws", [0], Path("unused"))
    assert any(job.cell.kind == "sgpr" for job in with_sgpr) and cli.job_precision_note(with_sgpr, "cpu") == note
