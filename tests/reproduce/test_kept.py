"""Cell outputs kept in the repository: a cell finished on one machine counts as finished on the next, whose
tables include it, and what is kept is small."""
import pytest
import json

from pyroinv.reproduce import kept
from pyroinv.reproduce.grids import network, tables
from pyroinv.reproduce.results import cell_results
from pyroinv.reproduce.runner import DaskRunner, Job
from pyroinv.reproduce.tables import write_report
from tests.reproduce.test_runner import tiny_protocol  # noqa: F401  (fixture)


def test_thinned_metrics_keep_the_first_and_last_records_and_the_plotted_fields():
    records = [{"step": i, "eta_human": {"rotation_deg": float(i)}, "loss": 1.0, "q_scale": 1.0} for i in range(1, 1001)]
    got = kept.thinned(records)
    assert len(got) == kept.MAX_RECORDS and got[0]["step"] == 1 and got[-1]["step"] == 1000
    assert all(set(r) == {"step", "eta_human"} for r in got)
    assert kept.thinned(records[:7]) == [{"step": r["step"], "eta_human": r["eta_human"]} for r in records[:7]]


@pytest.mark.slow
def test_a_cell_finished_on_one_machine_is_finished_on_the_next(tiny_protocol, tmp_path, monkeypatch, mnist):  # noqa: F811
    monkeypatch.setenv("PYROINV_KEPT_RESULTS", str(tmp_path / "kept"))
    monkeypatch.setattr(kept, "KEPT_PROTOCOLS", ("tiny",))
    cell = network("relu", "mnist-rot", init=5)
    first = Job(cell, 0, "tiny", tmp_path / "machine-a")
    with DaskRunner(workers=1) as runner:
        assert runner.run([first], report=lambda s: None)[first]["state"] == "trained"
        folder = tmp_path / "kept" / "tiny" / first.out.name
        assert sorted(p.name for p in folder.iterdir()) == ["config.json", "meta.json", "metrics.jsonl",
                                                            "results.json"]
        assert sum(p.stat().st_size for p in folder.iterdir()) < 20_000
        assert json.loads((folder / "results.json").read_text()) == json.loads((first.out / "results.json").read_text())

        second = Job(cell, 0, "tiny", tmp_path / "machine-b")  # a bare machine: no run folders
        lines = []
        assert second.state() == "done" and runner.run([second], report=lines.append) == {}
        assert lines[0].startswith("1 of 1 cells already finished")
    assert not second.out.exists()
    rs = cell_results(cell, "tiny", tmp_path / "machine-b")
    assert len(rs) == 1 and rs[0]["learned_invariance"].startswith("rotation")
    key = next(k for k, t in tables().items() if cell in t.cells())
    write_report([key], "tiny", tmp_path / "machine-b", tmp_path / "machine-b" / "tables")
    page = tmp_path / "machine-b" / "tables" / f"{key}.md"
    assert rs[0]["learned_invariance"].split("±")[1].split("°")[0] in page.read_text()


def test_a_kept_cell_with_other_settings_does_not_count(tmp_path, monkeypatch):
    monkeypatch.setenv("PYROINV_KEPT_RESULTS", str(tmp_path / "kept"))
    job = Job(network("relu", "mnist"), 0, "paper", tmp_path / "runs")
    folder = tmp_path / "kept" / "paper" / job.out.name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({**job.cell.config("paper", 0).to_dict(), "hidden": 3}))
    (folder / "results.json").write_text("{}")
    assert job.kept() is None and job.state() == "todo"
