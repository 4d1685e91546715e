"""Data sets by name: their classes known without loading them, unknown names refused in one line."""
import pytest

from pyroinv.data.registry import DATASET_NAMES, num_classes
from pyroinv.errors import DataError


def test_every_named_data_set_has_ten_classes_known_without_loading_it():
    assert {num_classes(name) for name in DATASET_NAMES} == {10}


def test_an_unknown_name_is_refused_with_the_choices():
    with pytest.raises(DataError, match="unknown data set 'mnist-spin'; choose one of mnist, "):
        num_classes("mnist-spin")
