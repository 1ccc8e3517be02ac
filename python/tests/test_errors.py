"""Every error beton raises is a ``beton.BetonError`` and the built-in exception Python code
catches for it, with where it happened as attributes (``path``, ``sample``, ``field``,
``offset``, ``sql_position``)."""

import errno

import numpy as np
import pytest

import beton
from beton.fields import IntField, NDArrayField
from beton.loader import Loader
from beton.writer import DatasetWriter


def test_the_hierarchy():
    for cls, builtin in [(beton.CorruptFileError, ValueError), (beton.QueryError, ValueError),
                         (beton.SampleError, ValueError), (beton.InvalidArgumentError, ValueError),
                         (beton.NotFoundError, KeyError), (beton.BetonIOError, OSError),
                         (beton.MissingFileError, FileNotFoundError),
                         (beton.ConflictError, RuntimeError), (beton.GpuError, RuntimeError)]:
        assert issubclass(cls, beton.BetonError) and issubclass(cls, builtin), cls
        assert cls.__doc__ and cls.__module__ == "beton"
    assert beton.BetonError.path is None and beton.BetonError.sql_position is None


def test_a_missing_file_names_its_path_and_errno(tmp_path):
    with pytest.raises(beton.BetonIOError) as e:
        beton.open(tmp_path / "missing.beton")
    assert e.value.errno == errno.ENOENT and e.value.path == str(tmp_path / "missing.beton")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, beton.MissingFileError)


def test_a_corrupt_file_names_the_byte_offset(small, tmp_path):
    cut = tmp_path / "cut.beton"
    cut.write_bytes(small.read_bytes()[:5000])
    with pytest.raises(beton.CorruptFileError) as e:
        beton.open(cut)
    assert e.value.path == str(cut) and isinstance(e.value.offset, int) and str(e.value.offset) in str(e.value)


def test_sql_errors_carry_line_and_column(small):
    ds = beton.open(small)
    with pytest.raises(beton.QueryError) as e:
        ds.where("label >")
    line, column = e.value.sql_position
    assert line == 1 and column >= 1 and f"column {column}" in str(e.value)
    with pytest.raises(beton.QueryError, match="no_such_column") as e:
        ds.where("label = 1 AND no_such_column = 1")
    assert e.value.sql_position == (1, 15)
    with pytest.raises(beton.NotFoundError) as e:
        ds.split("no_such_split")
    assert isinstance(e.value, KeyError)


def test_a_bad_sample_names_its_index_and_field(tmp_path):
    fields = {"label": IntField(), "arr": NDArrayField(np.float32, (2,))}
    samples = [(0, np.zeros(2, np.float32)), (1, np.zeros(3, np.float32))]
    with pytest.raises(beton.BetonError) as e:
        DatasetWriter(tmp_path / "bad.beton", fields, progress=False).from_indexed_dataset(samples)
    assert isinstance(e.value, beton.SampleError) and e.value.sample == 1
    assert "sample 1" in str(e.value) and "field 'arr'" in str(e.value), str(e.value)
    assert not (tmp_path / "bad.beton").exists()


def test_bad_loader_arguments_are_value_errors(small):
    with pytest.raises(ValueError, match="batch_size"):
        Loader(small, batch_size=0)
    with pytest.raises(beton.BetonError) as e:
        Loader(small, batch_size=4, indices=[10**6])
    assert isinstance(e.value, ValueError) and "indices" in str(e.value)


def test_ffcv_file_internals_over_a_dataset_directory_say_why(tmp_path):
    directory = tmp_path / "ds"
    DatasetWriter(str(directory) + "/", {"x": IntField()}, progress=False).from_indexed_dataset([(i,) for i in range(4)])
    loader = Loader(directory, batch_size=2, pipelines={"x": []})
    with pytest.raises(NotImplementedError, match="dataset directory"):
        loader.memory_manager
    with pytest.raises(NotImplementedError, match="dataset directory"):
        Loader(directory, batch_size=2, custom_fields={"pair": type("Pair", (), {"metadata_type": np.dtype("<i8")})})
