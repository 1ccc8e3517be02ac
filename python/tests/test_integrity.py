"""A committed version stays readable whatever runs beside it, and damaged metadata is refused:
a cleanup in another process never removes what a version names; a flipped byte of a manifest,
a manifest naming a data file twice or a file leading outside the directory raise
CorruptFileError, never read as different data."""

import json
import multiprocessing
import os

import pytest

import beton
from beton.fields import BytesField, IntField
from beton.writer import DatasetWriter

ROUNDS = 20


def write(path, first, n):
    rows = [(first + i, bytes([i % 256]) * (1 + i % 7)) for i in range(n)]
    DatasetWriter(path, {"label": IntField(), "blob": BytesField()}, num_workers=1,
                  progress=False).from_indexed_dataset(rows)


def everything(ds):
    """Every value of every row, read through ds[i], and the table's labels."""
    rows = [(ds[i]["label"], bytes(ds[i]["blob"])) for i in range(len(ds))]
    return rows, ds.table(["row_id", "label"]).to_pylist()


def clean_until_stopped(path, stop):
    """The other process: cleanup keeping one version, no grace period, until `stop` exists."""
    rounds = 0
    while not os.path.exists(stop):
        beton.open(path).cleanup(keep_versions=1, older_than_seconds=0)
        rounds += 1
    with open(stop + ".cleanups", "w") as f:
        f.write(str(rounds))


def test_cleanup_in_another_process_keeps_every_committed_version(tmp_path):
    src = str(tmp_path / "a.beton")
    write(src, 0, 16)
    path = str(tmp_path / "ds")
    beton.import_file(path, src)
    stop = str(tmp_path / "stop")
    other = multiprocessing.get_context("spawn").Process(target=clean_until_stopped, args=(path, stop))
    other.start()
    committed = {}
    gone = 0
    stale_commits = 0
    try:
        for round_ in range(ROUNDS):
            # A handle left on a tagged version while others commit and the other process
            # cleans (the versions after its own go, it stays): its append must go after the
            # latest, never into a removed version's place (_cleanup.json, FORMAT.md §13).
            stale = beton.open(path)
            stale.tag(f"stale{round_}")
            ds = beton.open(path)
            ds.append(src, progress=False)
            appended = ds.version
            committed[appended] = everything(ds)
            ds.update({"label": 1000 + round_}, where=f"index = {round_ % len(ds)}")
            updated = ds.version
            committed[updated] = everything(ds)
            # The version before the update, then the update again: its column file, which the
            # latest no longer names, is what the other process removes unless it sees this.
            for back in (appended, updated):
                try:
                    ds.restore(back)
                except beton.InvalidArgumentError as e:
                    assert f"no version {back}" in str(e)
                    gone += 1
                    continue
                committed[ds.version] = everything(ds)
            if round_ % 3 == 0:
                beton.open(path).tag(f"t{round_}")
            latest = beton.open(path)
            stale.append(src, progress=False)
            assert stale.version == beton.open(path).version > latest.version, f"round {round_}"
            assert len(stale) == len(latest) + 16, "rebased on the latest, not on its own version"
            committed[stale.version] = everything(stale)
            stale_commits += 1
    finally:
        open(stop, "w").close()
        other.join(60)
    assert other.exitcode == 0
    assert int(open(stop + ".cleanups").read()) >= 2
    # Every version still listed opens and reads whole, as it was committed.
    listed = [v["version"] for v in beton.open(path).versions()]
    for v in listed:
        got = everything(beton.open(path, version=v))
        if v in committed:
            assert got == committed[v], f"version {v}"
    assert len(listed) < max(listed), f"the cleanup removed versions ({gone} restores found theirs gone)"


@pytest.fixture()
def dataset(tmp_path):
    src = str(tmp_path / "a.beton")
    write(src, 0, 10)
    ds = beton.import_file(tmp_path / "ds", src)
    ds.delete("label = 3")
    ds.update({"label": 7}, where="label = 1")
    return tmp_path / "ds", ds


def manifest_path(path, version):
    return os.path.join(path, "_versions", f"{version:020}.json")


def test_a_flipped_byte_of_a_manifest_raises_corrupt_file_error(dataset):
    path, ds = dataset
    m = manifest_path(path, ds.version)
    original = open(m, "rb").read()
    expected = everything(ds)
    opened = 0
    for pos in range(0, len(original), 7):
        damaged = bytearray(original)
        damaged[pos] ^= 0x01
        open(m, "wb").write(bytes(damaged))
        try:
            got = everything(beton.open(path, version=ds.version))
        except (beton.CorruptFileError, beton.InvalidArgumentError):
            continue
        assert got == expected, f"byte {pos} opened as different data"
        opened += 1
    assert opened == 0
    text = original.decode().replace('"label"', '"lab3l"', 1)
    open(m, "w").write(text)
    with pytest.raises(beton.CorruptFileError, match="checksum") as e:
        beton.open(path, version=ds.version)
    assert e.value.path == m
    open(m, "wb").write(original)
    assert everything(beton.open(path)) == expected


def test_a_manifest_naming_a_data_file_twice_is_refused(dataset):
    path, ds = dataset
    m = json.load(open(manifest_path(path, ds.version)))
    m.pop("checksum")
    m["format_version"] = 1  # as an earlier beton wrote it: no checksum to catch the edit
    twice = dict(m["fragments"][0], id=m["next_fragment_id"])
    m["fragments"].append(twice)
    m["next_fragment_id"] += 1
    json.dump(m, open(manifest_path(path, ds.version), "w"))
    with pytest.raises(beton.CorruptFileError, match=f"version {ds.version}: .* is both the data file of fragment 0"):
        beton.open(path, version=ds.version)


def test_a_data_file_leading_outside_the_directory_is_refused(dataset, tmp_path):
    path, ds = dataset
    [name] = [n for n in os.listdir(os.path.join(path, "data")) if n.endswith(".beton")]
    data = os.path.join(path, "data", name)
    outside = tmp_path / "outside.beton"
    os.rename(data, outside)
    os.symlink(outside, data)
    with pytest.raises(beton.CorruptFileError, match="leads outside the dataset directory"):
        everything(beton.open(path))
