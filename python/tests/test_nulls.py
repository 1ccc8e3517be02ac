"""A missing value is NULL, never a made-up one (issue 36, item 3).

Rows appended to a dataset directory without a field it has (an ImageFolder appended after a
curator added a ``score`` column, a ``.beton`` file lacking ``label``) read as NULL everywhere:
``ds[i]`` (None), ``ds.table()`` and ``to_polars()`` (validity bitmaps), SQL (``IS NULL``,
``count(col)``, aggregates skip them, comparisons are unknown), the gallery and ``diff``. The
Loader refuses a NULL in a field it decodes unless told how to fill it; an export to a
``.beton`` file (which holds a value in every row) says which rows it filled and with what.
"""

import os
import warnings

import numpy as np
import pytest

import beton
from beton.fields import FloatField, IntField, RGBImageField, TextField
from beton.loader import Loader, OrderOption
from beton.writer import DatasetWriter

IMAGEFOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")


@pytest.fixture()
def grown(tmp_path):
    """155 photos with an added score (i / 10) and note, then the same ImageFolder appended:
    155 rows with values, 155 whose score and note are NULL."""
    out = tmp_path / "a.beton"
    DatasetWriter(out, {"image": RGBImageField(max_resolution=24), "label": IntField()},
                  progress=False).from_imagefolder(IMAGEFOLDER)
    ds = beton.import_file(tmp_path / "ds", out)
    ds.add_column("score", np.arange(155) / 10)
    ds.add_column("note", [f"n{i}" for i in range(155)])
    ds.append(IMAGEFOLDER, max_resolution=24, progress=False)
    assert len(ds) == 310
    return ds


def test_values_and_tables_show_null(grown):
    assert grown[3]["score"] == 0.3 and grown[3]["note"] == "n3"
    assert grown[200]["score"] is None and grown[200]["note"] is None
    assert grown[200]["label"] == grown[45]["label"]  # the appended rows' own values are there
    table = grown.table(["score", "note"])
    assert table["score"].null_count == 155 and table["note"].null_count == 155
    assert table["score"].to_pylist()[155:] == [None] * 155
    df = grown.to_polars(["score"])
    assert df["score"].null_count() == 155
    taken = grown.take([3, 200], ["score", "note"])
    assert taken["score"].to_pylist() == [0.3, None] and taken["note"].to_pylist() == ["n3", None]


def test_sql_has_three_valued_logic_over_nulls(grown):
    assert grown.where("score IS NULL").tolist() == list(range(155, 310))
    assert len(grown.where("score >= 0")) == 155
    assert len(grown.where("NOT (score >= 0)")) == 0
    assert len(grown.where("score <> 1.5")) == 154
    row = grown.query("SELECT count(*) AS n, count(score) AS c, avg(score) AS a, min(note) AS m "
                      "FROM samples").table.to_pylist()[0]
    assert row["n"] == 310 and row["c"] == 155 and row["a"] == pytest.approx(np.arange(155).mean() / 10)
    assert row["m"] == "n0"


def test_the_loader_refuses_nulls_it_would_decode_or_fills_them(grown):
    base = dict(batch_size=64, order=OrderOption.SEQUENTIAL, drop_last=False,
                pipelines={"image": None, "note": None})
    with pytest.raises(ValueError, match=r"field 'score'.*NULL in 155 of the samples.*sample 155, 156"):
        Loader(grown, **base)
    got = [np.asarray(s).reshape(-1) for _, s in
           (b[:2] for b in Loader(grown, fill_nulls={"score": -1.0}, fields=["label", "score"], **base))]
    score = np.concatenate(got)
    assert np.allclose(score[:155], np.arange(155) / 10) and (score[155:] == -1.0).all()
    with pytest.raises(TypeError, match="not an int, float or bool"):
        Loader(grown, fill_nulls={"score": "x"}, **base)
    # Rows that have the field, or a loader without it: nothing to fill.
    assert len(list(Loader(grown, indices=grown.where("score IS NOT NULL"), **base))) == 3
    assert len(list(Loader(grown, fields=["label"], **base))) == 5


def test_export_says_which_rows_it_filled(grown, tmp_path):
    with pytest.warns(beton.NullsFilledWarning, match=r"'score' is NULL in 155 row\(s\), written as NaN.*rows 155, 156"):
        assert grown.export(tmp_path / "out.beton", columns=["image", "label", "score"], progress=False) == 310
    out = beton.open(tmp_path / "out.beton")
    assert np.isnan(out[200]["score"]) and out[3]["score"] == 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rows without NULLs: no warning
        grown.export(tmp_path / "some.beton", where="score IS NOT NULL", columns=["label", "score"], progress=False)


def test_compact_and_diff_keep_nulls(grown):
    before = grown.version
    grown.compact(progress=False)
    assert grown[200]["score"] is None and grown.where("note IS NULL").tolist() == list(range(155, 310))
    assert grown.diff(before, grown.version)["changed"] == {}


def test_a_beton_file_lacking_a_field_appends_as_null(tmp_path):
    DatasetWriter(tmp_path / "a.beton", {"label": IntField(), "pred": IntField()}, progress=False).from_iterable(
        [(i % 3, i % 2) for i in range(10)])
    DatasetWriter(tmp_path / "b.beton", {"pred": IntField()}, progress=False).from_iterable([(1,)] * 4)
    ds = beton.import_file(tmp_path / "ds", tmp_path / "a.beton").append(str(tmp_path / "b.beton"))
    # The curator's query: the appended rows are not counted as mistakes (label is unknown).
    mistakes = ds.where("pred <> label")
    assert all(i < 10 for i in mistakes.tolist())
    assert ds.where("label IS NULL").tolist() == [10, 11, 12, 13]
    assert ds[12]["label"] is None


def test_gallery_captions_show_null(grown):
    html = grown.gallery(where="score IS NULL", columns=["score", "note"], n=2)._repr_html_()
    assert "NULL" in html


def test_writer_refuses_none_rather_than_storing_a_made_up_value(tmp_path):
    for field, value in ((IntField(), None), (FloatField(), None), (TextField(), None)):
        with pytest.raises((TypeError, ValueError)):
            DatasetWriter(tmp_path / "x.beton", {"v": field}, progress=False).from_iterable([(value,)])
