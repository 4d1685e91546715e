"""The training loop's metric records: which of them count the inactive units."""
from pyroinv.classifier.loop import FitCallbacks, train_loop, units_due
from pyroinv.config import Config
from pyroinv.inference.benchmark import random_split
from pyroinv.inference.train import Trainer


def test_units_are_counted_at_doubling_records_each_epochs_first_record_and_the_last():
    records = range(10, 3768 + 1, 10)
    due = [s for s in records if units_due(s, 10, 157, s == 3760)]
    assert {10, 20, 40, 80, 160, 320, 640, 1280, 2560} <= set(due)
    assert all(any(k * 157 <= s < k * 157 + 10 for s in due) for k in range(1, 24))  # each epoch's first record
    assert 3760 in due and 30 not in due and 50 not in due
    assert units_due(15, 10, 157, done=True)  # the last step, wherever it falls
    assert all(units_due(s, 10, 7, False) for s in records)  # epochs shorter than the record interval: every one


def test_the_records_between_counts_leave_the_units_out():
    kept = []

    class Keep(FitCallbacks):
        def record(self, record):
            kept.append(record)

    cfg = Config(hidden=16, samples=2, batch_size=8, epochs=3, init_eta=10.0).validate()
    trainer = Trainer(cfg, random_split(40))
    train_loop(trainer, Keep(), log_every=1)
    counted = [r["step"] for r in kept if "inactive_units" in r]
    assert trainer.steps_per_epoch == 5 and counted == [1, 2, 4, 5, 8, 10, 15]
    assert 0 < len(counted) < len(kept) and counted[-1] == 15
    assert all(0.0 <= r["inactive_units"] <= 1.0 for r in kept if "inactive_units" in r)

