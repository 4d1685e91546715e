"""Tables and verdicts rendered from cell folders (synthetic results.json files)."""
import json
import math

from pyroinv.reproduce.claims import claims_rows, claims_section, dominant_generator
from pyroinv.reproduce.grids import tables
from pyroinv.reproduce.results import mean_sd
from pyroinv.reproduce.tables import page_path, replace_section, write_report


def _write(root, cell, seed, **res):
    out = root / "cpu" / cell.name(seed)
    out.mkdir(parents=True)
    deg = res.pop("deg", 0.0)
    base = {"test_accuracy": 0.9, "elbo_per_datapoint": -0.5, "invariance": "rotation",
            "eta": [0, 0, math.radians(deg), 0, 0, 0], "eta_human": {"rotation_deg": deg},
            "learned_invariance": f"rotation ±{deg:.1f}°"}
    (out / "results.json").write_text(json.dumps({**base, **res}))
    (out / "metrics.jsonl").write_text(json.dumps({"step": 1, "eta_human": {"rotation_deg": deg}}) + "\n")


def test_mean_sd():
    assert mean_sd([]) == "–" and mean_sd([1.0]) == "1.00" and mean_sd([1.0, 3.0], unit="%") == "2.00% ± 1.41% (2)"


def test_claims_verdicts_follow_the_rules(tmp_path):
    g = tables()
    learned = g["headline"].rows["learned (5° init)"]
    for seed, deg in enumerate((170.0, 160.0, 175.0)):
        _write(tmp_path, learned["mnist-rot"], seed, deg=deg, test_accuracy=0.96, elbo_per_datapoint=-0.40)
    for seed, e in enumerate((-0.50, -0.53, -0.47)):  # sd 0.03 over seeds
        _write(tmp_path, learned["mnist-rot90"], seed, deg=30.0, elbo_per_datapoint=e)
    for a, e in {5: -0.50, 45: -0.56, 90: -0.52, 135: -0.6, 175: -0.7}.items():  # best 5°, 90° within noise
        _write(tmp_path, g["tableC2"].rows[f"fixed {a}°"]["mnist-rot90"], 0, deg=float(a), elbo_per_datapoint=e)
    _write(tmp_path, learned["mnist"], 0, deg=10.0)
    _write(tmp_path, g["figure6"].rows["ML"]["mnist-rot"], 0, deg=2.0)
    _write(tmp_path, g["figure6"].rows["RFF: VI"]["mnist-rot"], 0, deg=176.0)
    _write(tmp_path, g["figure6"].rows["RFF: ML"]["mnist-rot"], 0, deg=177.0)
    _write(tmp_path, g["headline"].rows["MLP (VI)"]["mnist-rot"], 0, test_accuracy=0.90)
    elbos = {5: -0.9, 45: -0.6, 90: -0.5, 135: -0.45, 175: -0.41}
    for a, e in elbos.items():
        _write(tmp_path, g["tableC2"].rows[f"fixed {a}°"]["mnist-rot"], 0, deg=float(a), elbo_per_datapoint=e)
    eta = [0.05, 0.02, 3.0, 0.1, 0.1, 0.0]  # rotation dominates after normalising by the ranges
    _write(tmp_path, g["table2"].rows["+ affine"]["mnist-trans"], 0, eta=eta)
    sim = [0.0, 0.0, 0.02, 0.4, 0.4, 0.0]  # the similarity model ties scale y to scale x
    _write(tmp_path, g["table2"].rows["+ similarity, Jacobian (beyond the paper)"]["mnist-scale"], 0, eta=sim)
    rows = {c: (m, v) for c, m, v in claims_rows("cpu", tmp_path)}
    sim_key = ("6. similarity model (isotropic scale, Jacobian; beyond the paper) on mnist-scale: dominant generator "
               "is scale")
    assert rows[sim_key][1] == "holds" and rows[sim_key][0].startswith("scale (")
    assert rows["1. ReLU learned η_rot on mnist-rot: ≥ 150°"] == ("±168.3° ± 7.6° (3)", "holds")
    assert rows["1. ReLU learned η_rot on mnist-rot90: in [60°, 120°]"][1] == "does not hold"
    assert rows["1. ReLU learned η_rot on mnist: ≤ 45°"][1] == "holds"
    assert rows["2. ReLU, fully rotated: ML keeps η_rot ≤ 20°, VI reaches ≥ 150°"][1] == "holds"
    assert rows["2. RFF, fully rotated: ML keeps η_rot ≤ 20°, VI reaches ≥ 150°"] == ("ML ±177.0°, VI ±176.0°",
                                                                                    "does not hold")
    key3 = "3. ReLU, mnist-rot: best fixed-rotation ELBO at a matching level (135°, 175°)"
    assert rows[key3][1] == "holds" and rows[key3][0].startswith("best 175°")
    assert rows["4. ReLU, mnist-rot: learned ELBO ≥ best fixed ELBO"][1] == "holds"
    assert rows["3. ReLU, mnist: best fixed-rotation ELBO at a matching level (5°, 45°)"][1] == "not run"
    key3b = "3. ReLU, mnist-rot90: best fixed-rotation ELBO at a matching level (45°, 90°, 135°)"
    assert rows[key3b][1].startswith("undecided: the best matching level is 0.020 lower")
    assert rows["5. ReLU + learned rotation, fully rotated: accuracy ≥ 95% and ≥ 5 points above the MLP"][1] == "holds"
    assert rows["6. affine model on mnist-trans: dominant generator is translation"][1] == "does not hold"
    assert rows["6. affine model on mnist-rot: dominant generator is rotation"][1] == "not run"


def test_a_matching_level_ahead_within_seed_noise_is_undecided(tmp_path):
    """Claim 3 is judged both ways: a matching level ahead of a level that does not match by less than the seed
    noise decides nothing either."""
    t = tables()["tableC2"]
    for seed, e in enumerate((-0.15, -0.16, -0.17)):  # sd 0.01 over seeds
        _write(tmp_path, t.rows["learned (5° init)"]["mnist-rot"], seed, deg=176.0, elbo_per_datapoint=e)
    for a, e in {5: -0.3, 45: -0.2, 90: -0.171, 135: -0.170, 175: -0.18}.items():  # 135° ahead of 90° by 0.001
        _write(tmp_path, t.rows[f"fixed {a}°"]["mnist-rot"], 0, deg=float(a), elbo_per_datapoint=e)
    rows = {c: (m, v) for c, m, v in claims_rows("cpu", tmp_path)}
    measured, verdict = rows["3. ReLU, mnist-rot: best fixed-rotation ELBO at a matching level (135°, 175°)"]
    assert measured.startswith("best 135°")
    assert verdict.startswith("undecided: the best level that does not match is 0.001 lower")


def test_dominant_generator_normalises_by_range():
    assert dominant_generator([0.5, 0.1, 0.3, 0.0, 0.0, 0.0])[0] == "translation"  # 0.5 of the half-image > 0.3/π
    assert dominant_generator([0.0, 0.0, 0.1, 0.6, 0.2, 0.0])[0] == "scale"
    assert dominant_generator([0.001, 0.0, 0.01, 0.002, 0.0, 0.003])[0] == "none"


def test_report_rewrites_only_its_sections(tmp_path):
    g = tables()
    _write(tmp_path, g["figure6"].rows["VI"]["mnist-rot"], 0, deg=70.0, test_accuracy=0.9123)
    out = tmp_path / "tables"
    md = page_path(out, "figure6")
    assert md == out / "figure6.md"
    out.mkdir()
    other = "# Figure 6\n\n<!-- reproduce:figure6:paper begin -->\nkept section\n<!-- reproduce:figure6:paper end -->\n"
    md.write_text(other + "\nkept text\n")
    (out / "notes.md").write_text("kept page\n")
    write_report(["figure6"], "cpu", tmp_path, out)
    first = md.read_text()
    assert first.startswith(other) and "kept text" in first and "<!-- reproduce:figure6:cpu begin -->" in first
    assert "## cpu protocol\n\n<!-- reproduce:figure6:cpu begin -->\n### Figure 6" in first  # a new section: a heading
    assert "| VI | 91.23 |" in first and "| VI | ±70.0° |" in first  # no paper numbers: the measurement alone
    assert "python scripts/reproduce.py figure6 --protocol cpu --jobs 2" in first
    assert (out / "img" / "reproduce-figure6-cpu.png").exists()
    # its own page and the claims' (figure6 decides claim 2), nothing else
    assert sorted(p.name for p in out.iterdir()) == ["claims.md", "figure6.md", "img", "notes.md"]
    assert (out / "notes.md").read_text() == "kept page\n"
    write_report(["figure6"], "cpu", tmp_path, out)
    assert md.read_text() == first  # idempotent: the section is replaced, not appended
    assert replace_section("a <!-- m begin -->x<!-- m end --> b", "m", "y") == "a <!-- m begin -->\ny\n<!-- m end --> b"
    assert replace_section("a\n", "m", "y", heading="## h") == "a\n\n## h\n\n<!-- m begin -->\ny\n<!-- m end -->\n"


def test_a_report_into_a_new_folder_writes_each_grid_its_own_page(tmp_path):
    _write(tmp_path, tables()["headline"].rows["learned (5° init)"]["mnist-rot"], 0, deg=170.0)
    out = tmp_path / "tables"
    assert write_report(["headline", "table1"], "cpu", tmp_path, out) == ["headline", "table1", "claims"]
    assert sorted(p.name for p in out.glob("*.md")) == ["claims.md", "headline.md", "table1.md"]
    for key, title in (("headline", tables()["headline"].title), ("claims", "The paper's claims, measured")):
        text = page_path(out, key).read_text()
        assert text.startswith(f"# {title}\n") and text.count("\n# ") == 0  # one title
        assert f"<!-- reproduce:{key}:cpu begin -->" in text and f"<!-- reproduce:{key}:cpu end -->" in text
    assert "<!-- reproduce:glance" not in page_path(out, "claims").read_text()  # no summary unless the page has one


def test_a_grid_beyond_the_paper_leaves_the_claims_alone_and_plots_its_curves(tmp_path, monkeypatch):
    monkeypatch.setenv("PYROINV_KEPT_RESULTS", str(tmp_path / "kept"))
    g = tables()
    for size, acc in ((312, 0.5), (1250, 0.8)):
        _write(tmp_path, g["efficiency"].rows[f"cnn · Laplace · {size:,}"]["mnist-rot"], 0, deg=170.0,
               test_accuracy=acc, laplace_per_datapoint=-0.3)
    out = tmp_path / "tables"
    out.mkdir()
    claims = "<!-- reproduce:claims:cpu begin -->\npublished claims\n<!-- reproduce:claims:cpu end -->\n"
    page_path(out, "claims").write_text(claims)
    assert write_report(["efficiency"], "cpu", tmp_path, out) == ["efficiency"]
    text = page_path(out, "efficiency").read_text()
    assert page_path(out, "claims").read_text() == claims and "| cnn · Laplace · 312 | 50.00 |" in text
    assert "Laplace log evidence / N" in text and "| cnn · Laplace · 1,250 | -0.300 |" in text
    assert (out / "img" / "reproduce-efficiency-cpu-accuracy.png").exists()
    assert "claims" in write_report(["headline"], "cpu", tmp_path, out)  # a grid the claims read rewrites them
    assert "published claims" not in page_path(out, "claims").read_text()


def test_claims_show_a_dash_for_rotations_not_run(tmp_path):
    learned = tables()["headline"].rows["learned (5° init)"]
    _write(tmp_path, learned["mnist-rot"], 0, deg=170.0)
    rows = {c: (m, v) for c, m, v in claims_rows("cpu", tmp_path)}
    assert rows["1. ReLU learned η_rot on mnist: ≤ 45°"] == ("–", "not run")
    assert rows["2. ReLU, fully rotated: ML keeps η_rot ≤ 20°, VI reaches ≥ 150°"] == ("ML –, VI ±170.0°", "not run")


def test_claims_section_lists_rows_not_run_in_one_line(tmp_path):
    learned = tables()["headline"].rows["learned (5° init)"]
    _write(tmp_path, learned["mnist-rot"], 0, deg=170.0)
    text = claims_section("cpu", tmp_path)
    table = [line for line in text.splitlines() if line.startswith("| 1.") or line.startswith("| 2.")]
    assert table == ["| 1. ReLU learned η_rot on mnist-rot: ≥ 150° | ±170.0° | holds |"]
    last = text.splitlines()[-1]
    assert last.startswith("Not run under this protocol: 23 rows of claims 1, 2, 3, 4, 5 and 6 (")


def test_sections_name_the_machines_and_the_glance_table_summarises_headline_and_claims(tmp_path):
    from pyroinv.reproduce.glance import GLANCE

    learned = tables()["headline"].rows["learned (5° init)"]
    _write(tmp_path, learned["mnist-rot"], 0, deg=170.0, test_accuracy=0.9612, device_name="NVIDIA H200")
    _write(tmp_path, learned["mnist-rot"], 1, deg=172.0, test_accuracy=0.9588, device="cpu")  # an older result
    out = tmp_path / "tables"
    out.mkdir()
    md = page_path(out, "claims")
    md.write_text(f"# Claims\n\n<!-- {GLANCE} begin -->\n<!-- {GLANCE} end -->\n\nkept text\n")
    write_report(["headline"], "cpu", tmp_path, out)
    assert "Ran on: NVIDIA H200 (1 cell), cpu (card or processor not recorded) (1 cell)." in page_path(
        out, "headline").read_text()
    text = md.read_text()
    glance = text[text.index("## Reproduction at a glance"):text.index(f"<!-- {GLANCE} end -->")]
    assert text.index("## Reproduction at a glance") < text.index("kept text")  # at the top, where it was put
    assert text.index("kept text") < text.index("<!-- reproduce:claims:cpu begin -->")  # the claims appended below
    assert "| learned rotation, fully rotated | 97.34% | not run | not run | not run | 96.00 ± 0.17% (2), ±171.0° ± 1.4° (2) |" in glance
    assert ("| claim 1. ReLU learned η_rot on mnist-rot: ≥ 150° | as claimed | not run | not run | not run | "
            "holds: ±171.0° ± 1.4° (2) |") in glance
    assert "|---|---|---|---|---|---|" in glance  # a column per protocol
    assert "| claim 1. ReLU learned η_rot on mnist: ≤ 45° |" not in glance  # a claim run under neither protocol


def test_the_glance_table_summarises_table2s_learned_translation_and_scale(tmp_path):
    from pyroinv.reproduce.glance import GLANCE

    trans = tables()["table2"].rows["+ translation"]["mnist-trans"]
    _write(tmp_path, trans, 0, test_accuracy=0.9551, invariance="translation",
           learned_invariance="translation ±4.00 px x, ±3.00 px y")
    out = tmp_path / "tables"
    out.mkdir()
    page_path(out, "claims").write_text(f"# Claims\n\n<!-- {GLANCE} begin -->\n<!-- {GLANCE} end -->\n")
    write_report(["table2"], "cpu", tmp_path, out)
    glance = page_path(out, "claims").read_text()
    assert ("| learned translation, translated (Table 2) | 97.87% | not run | not run | not run | "
            "95.51%, translation ±4.00 px x, ±3.00 px y |") in glance  # the paper's Table 2 beside ours
    assert "| learned scale, scaled (Table 2) | 98.06% | not run | not run | not run | not run |" in glance


def test_the_published_tables_of_every_protocol_are_pages_in_docs_results_tables(tmp_path):
    from pyroinv.frontends.reproduce import PUBLISHED_RUNS, ROOT, report_dir

    published = ROOT / "docs" / "results" / "tables"
    assert report_dir(PUBLISHED_RUNS) == published and report_dir(tmp_path, write_docs=True) == published
    assert report_dir(tmp_path) == tmp_path / "tables" and report_dir(tmp_path, tmp_path / "x") == tmp_path / "x"
    text = page_path(published, "claims").read_text()
    for protocol in ("paper", "cpu", "cpu-q0.05"):  # the earlier protocol's tables beside the others'
        assert f"## {protocol} protocol\n\n<!-- reproduce:claims:{protocol} begin -->" in text
    assert "<!-- reproduce:glance begin -->" in text
    for page in published.glob("*.md"):  # each page: one title, then its sections
        assert page.read_text().startswith("# ") and page.read_text().count("\n# ") == 0, page


def test_a_cell_at_chance_is_marked_whether_its_results_kept_the_warning_or_not(tmp_path, monkeypatch):
    monkeypatch.setenv("PYROINV_KEPT_RESULTS", str(tmp_path / "kept"))
    rows = tables()["efficiency"].rows
    _write(tmp_path, rows["cnn · ELBO · 312"]["mnist-rot"], 0, test_accuracy=0.1, dataset="mnist-rot",
           train_loglik_per_datapoint=-2.6)                                   # written before runs kept the warning
    _write(tmp_path, rows["cnn · ELBO · 1,250"]["mnist-rot"], 0, test_accuracy=0.1, dataset="mnist-rot",
           train_loglik_per_datapoint=-2.6, warnings=["the network fits its training data no better than chance"])
    _write(tmp_path, rows["cnn · ELBO · 5,000"]["mnist-rot"], 0, test_accuracy=0.9, dataset="mnist-rot",
           train_loglik_per_datapoint=-2.0)                                   # 2.0 < 0.9 log 10 = 2.07: it learned
    write_report(["efficiency"], "cpu", tmp_path, tmp_path / "tables")
    text = page_path(tmp_path / "tables", "efficiency").read_text()
    assert "| cnn · ELBO · 312 | 10.00† |" in text and "| cnn · ELBO · 1,250 | 10.00† |" in text
    assert "| cnn · ELBO · 5,000 | 90.00 |" in text
    assert text.count("† a seed of this cell fitted its training data no better than chance") == 1
