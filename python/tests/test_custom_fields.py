"""FFCV's custom-field protocol through beton: a ``Field`` subclass written in Python
(``metadata_type``, ``to_binary``, ``encode(destination, field, malloc)``) writes through
beton's writer and reads back through ``ds[i]``, the data table, and the Loader with its own
decoder; bad uses are named errors. (That FFCV 1.0.2 reads such a file, and gives the same
batches, is ``test_ffcv_programs.py``'s ``custom_field`` program.)"""

from dataclasses import replace

import numpy as np
import pytest

import beton
from beton.fields import Field, IntField
from beton.loader import Loader
from beton.pipeline import AllocationQuery, Operation
from beton.writer import DatasetWriter

ROW = np.dtype([("tag", "<i4"), ("ptr", "<u8"), ("size", "<u4")])


class BlobDecoder(Operation):
    def declare_state_and_memory(self, previous_state):
        return replace(previous_state, shape=(8,), dtype=np.dtype("<u1")), AllocationQuery((8,), np.dtype("<u1"))

    def generate_code(self):
        mem_read = self.memory_read

        def decode(indices, destination, metadata, storage_state):
            for ix in range(indices.shape[0]):
                data = mem_read(metadata[indices[ix]]["ptr"], storage_state)
                destination[ix, :] = 0
                destination[ix, :data.shape[0]] = data
            return destination

        return decode


class BlobField(Field):
    @property
    def metadata_type(self):
        return ROW

    @staticmethod
    def from_binary(binary):
        return BlobField()

    def to_binary(self):
        blob = np.zeros(1, dtype=np.dtype([("", "<u1", 1024)]))[0]
        blob[0][:4] = np.frombuffer(b"blob", np.uint8)
        return blob

    def encode(self, destination, field, malloc):
        destination["tag"], destination["size"] = 10 * len(field), len(field)
        destination["ptr"], buffer = malloc(len(field))
        buffer[:] = np.frombuffer(field, np.uint8)

    def get_decoder_class(self):
        return BlobDecoder


def blob(i):
    return bytes([i % 256]) * (1 + i % 7)


@pytest.fixture
def written(tmp_path):
    path = tmp_path / "c.beton"
    DatasetWriter(path, {"label": IntField(), "blob": BlobField()}, num_workers=3, progress=False) \
        .from_indexed_dataset([(i, blob(i)) for i in range(300)])
    return path


def test_written_rows_and_payloads_read_back(written):
    ds = beton.open(written, custom={"blob": BlobField})
    for i in (0, 1, 150, 299):
        row = ds[i]["blob"]
        assert row.dtype == ROW and row["tag"] == 10 * len(blob(i)) and row["size"] == len(blob(i))
        # The pointer the writer filled in is the payload's place in the file.
        with open(written, "rb") as f:
            f.seek(int(row["ptr"]))
            assert f.read(int(row["size"])) == blob(i)
    # The data table's column is the field's metadata: a struct of metadata_type's fields.
    column = ds.table(["blob"])["blob"].to_pylist()
    assert column[5]["tag"] == 10 * len(blob(5)) and column[5]["size"] == len(blob(5))
    # Opened with the row layout alone, it is the slot's bytes.
    raw = beton.open(written, custom={"blob": (ROW.itemsize, ROW.alignment)}).table(["blob"])["blob"].to_pylist()
    assert np.frombuffer(raw[5], dtype=ROW)[0]["tag"] == 10 * len(blob(5))


def test_the_loader_runs_the_fields_own_decoder(written):
    loader = Loader(written, batch_size=32, num_workers=2, drop_last=False, custom_fields={"blob": BlobField},
                    pipelines={"blob": [BlobDecoder()]})
    seen = 0
    for labels, blobs in loader:
        for label, row in zip(np.asarray(labels).ravel(), np.asarray(blobs)):
            want = blob(int(label))
            assert bytes(row[:len(want)]) == want and not row[len(want):].any()
            seen += 1
    assert seen == 300


def test_same_bytes_whatever_the_workers(tmp_path):
    data = [(i, blob(i)) for i in range(200)]
    files = []
    for workers in (1, 4):
        path = tmp_path / f"w{workers}.beton"
        DatasetWriter(path, {"label": IntField(), "blob": BlobField()}, num_workers=workers,
                      progress=False).from_indexed_dataset(data)
        files.append(path.read_bytes())
    assert files[0] == files[1]


def test_a_copy_of_custom_payloads_is_refused(written, tmp_path):
    """Copies of stored values (the writer's copy path, export, compaction) would keep the
    rows' pointers into the old file's heap: refused, naming the field, nothing written."""
    ds = beton.open(written, custom={"blob": BlobField})
    with pytest.raises(ValueError, match="blob.*custom type.*heap"):
        ds._native.copy_to(str(tmp_path / "copy.beton"), fields=["label", "blob"], rows=[0, 1, 2],
                           page_size=8 << 20, num_workers=1)
    assert not (tmp_path / "copy.beton").exists()
    # Without the custom field, the copy goes on.
    ds._native.copy_to(str(tmp_path / "labels.beton"), fields=["label"], rows=[0, 1, 2], page_size=8 << 20,
                       num_workers=1)
    assert [beton.open(tmp_path / "labels.beton")[k]["label"] for k in range(3)] == [0, 1, 2]


class Unstored(BlobField):
    def encode(self, destination, field, malloc):
        ptr, buffer = malloc(len(field))  # the pointer is not written into the row
        buffer[:] = np.frombuffer(field, np.uint8)


class Narrow(Field):
    metadata_type = np.dtype([("ptr", "<u4")])

    def to_binary(self):
        return np.zeros(1, dtype=np.dtype([("", "<u1", 1024)]))[0]

    def encode(self, destination, field, malloc):
        ptr, _ = malloc(4)
        destination["ptr"] = ptr & 0xFFFF_FFFF  # kept in 4 bytes: the writer cannot find it


class Twice(BlobField):
    metadata_type = np.dtype([("ptr", "<u8"), ("copy", "<u8")])

    def encode(self, destination, field, malloc):
        destination["ptr"], buffer = malloc(len(field))
        destination["copy"] = destination["ptr"]
        buffer[:] = np.frombuffer(field, np.uint8)


@pytest.mark.parametrize("field,where", [(Unstored(), "is not in"), (Narrow(), "is not in"),
                                         (Twice(), "is more than once in")])
def test_a_pointer_not_stored_as_one_8_byte_word_is_named(tmp_path, field, where):
    with pytest.raises(ValueError, match=f"sample 0.*field 'x'.*pointer malloc returned {where}"):
        DatasetWriter(tmp_path / "bad.beton", {"x": field}, progress=False).from_indexed_dataset([(b"ab",)])
    assert not (tmp_path / "bad.beton").exists()


def test_a_to_binary_of_the_wrong_size_is_named(tmp_path):
    class Short(BlobField):
        def to_binary(self):
            return np.zeros(10, dtype=np.uint8)

    with pytest.raises(TypeError, match="to_binary.*10 bytes"):
        DatasetWriter(tmp_path / "bad.beton", {"x": Short()}, progress=False).from_indexed_dataset([(b"ab",)])


def test_ffcv_style_encode_on_a_builtin_subclass_is_named(tmp_path):
    class Doubled(IntField):
        def encode(self, destination, field, malloc):
            destination[0] = 2 * field

    with pytest.raises(TypeError, match="subclass beton.fields.Field"):
        DatasetWriter(tmp_path / "bad.beton", {"x": Doubled()}, progress=False).from_indexed_dataset([(1,)])


def test_builtin_fields_answer_ffcvs_protocol():
    from beton.fields import (ArrayField, BoolField, BytesField, FloatField, GreyImageField, JSONField,
                              NDArrayField, RGBImageField, TextField, TorchTensorField)

    for field in (IntField(), FloatField(), BoolField(), BytesField(), TextField(), JSONField(),
                  NDArrayField(np.float32, (2, 3)), ArrayField(np.int16), RGBImageField(), GreyImageField()):
        size, _ = field.native().slot()
        assert np.dtype(field.metadata_type).itemsize == size, field
        blob = field.to_binary()
        assert blob.dtype == np.dtype([("", "<u1", 1024)])
        again = type(field).from_binary(np.frombuffer(blob.tobytes(), np.uint8))
        assert np.dtype(again.metadata_type) == np.dtype(field.metadata_type)
        assert field.get_decoder_class().__name__.endswith("Decoder")
    array = NDArrayField.from_binary(NDArrayField(np.float32, (2, 3)).to_binary())
    assert array.dtype == np.float32 and array.shape == (2, 3)
    assert ArrayField.from_binary(ArrayField(np.int16).to_binary()).dtype == np.int16
    assert type(TorchTensorField.from_binary(NDArrayField(np.int8, (4,)).to_binary())).__name__ == "NDArrayField"
