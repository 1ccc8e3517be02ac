"""Vector columns (issue 40, item 1): a 1-D NDArrayField of numbers is a FixedSizeList column in
the table, SQL and polars; ``ds.vectors`` gives the (n, d) matrix; ``add_column`` takes 2-D
arrays, FixedSizeList and polars Array columns and lists of 1-D arrays; edits patch it; the
gallery summarises norms. Every value is checked against the numpy matrix it was written from."""

import os

import numpy as np
import pyarrow as pa
import pytest

import beton
from beton.fields import IntField, NDArrayField
from beton.writer import DatasetWriter

N = 60


@pytest.fixture()
def written(tmp_path):
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((N, 16)).astype(np.float32)
    grid = rng.standard_normal((N, 2, 3)).astype(np.float32)
    path = tmp_path / "v.beton"
    fields = {"label": IntField(), "emb": NDArrayField(np.dtype("float32"), (16,)),
              "grid": NDArrayField(np.dtype("float32"), (2, 3))}
    DatasetWriter(path, fields, progress=False).from_indexed_dataset([(i % 4, emb[i], grid[i]) for i in range(N)])
    return path, emb, grid


def test_a_vector_field_reads_as_a_matrix_everywhere(written):
    path, emb, grid = written
    ds = beton.open(path)
    t = ds.table()
    assert t.schema.field("emb").type == pa.list_(pa.field("item", pa.float32(), nullable=False), 16)
    assert t.schema.field("grid").type == pa.uint64(), "higher-dimensional arrays keep their byte size"
    np.testing.assert_array_equal(np.stack(t.column("emb").to_numpy(zero_copy_only=False)), emb)
    m = ds.vectors("emb")
    assert m.shape == (N, 16) and m.dtype == np.float32
    np.testing.assert_array_equal(m, emb)
    np.testing.assert_array_equal(ds.vectors("emb", rows=[5, 2, 5]), emb[[5, 2, 5]])
    np.testing.assert_array_equal(ds.vectors("emb", rows=ds.where("label = 3")), emb[3::4])
    np.testing.assert_array_equal(ds[7]["emb"], emb[7])
    np.testing.assert_array_equal(ds[7]["grid"], grid[7])
    polars = pytest.importorskip("polars")
    frame = ds.to_polars(["emb"])
    assert frame.schema["emb"] == polars.Array(polars.Float32, 16)
    got = ds.query("SELECT index, emb FROM samples WHERE label = 1 ORDER BY index LIMIT 3").table
    np.testing.assert_array_equal(np.stack(got.column("emb").to_numpy(zero_copy_only=False)), emb[[1, 5, 9]])
    with pytest.raises(beton.QueryError, match="VECTOR"):
        ds.where("emb > 1")
    with pytest.raises(TypeError, match="'grid' is a uint64 column, not a vector column"):
        ds.vectors("grid")
    with pytest.raises(IndexError, match="row 60 is out of range"):
        ds.vectors("emb", rows=[60])


@pytest.mark.parametrize("how", ["numpy", "fixed_size_list", "polars", "list"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint8"])
def test_add_column_takes_vectors_without_a_field(written, tmp_path, how, dtype):
    path, emb, _ = written
    ds = beton.import_file(tmp_path / "ds", path)
    rng = np.random.default_rng(1)
    m = (rng.standard_normal((N, 8)) * (1 if dtype.startswith("float") else 40)).astype(dtype)
    if how == "numpy":
        values = m
    elif how == "fixed_size_list":
        values = pa.FixedSizeListArray.from_arrays(pa.array(m.ravel()), 8)
    elif how == "polars":
        polars = pytest.importorskip("polars")
        values = polars.Series("v", m)
    else:
        values = list(m)
    ds.add_column("v", values)
    got = ds.vectors("v")
    assert got.dtype == np.dtype(dtype) and got.shape == (N, 8)
    np.testing.assert_array_equal(got, m)
    np.testing.assert_array_equal(beton.open(tmp_path / "ds")[9]["v"], m[9])


def test_edits_of_a_vector_column_and_what_is_refused(written, tmp_path):
    path, emb, _ = written
    ds = beton.import_file(tmp_path / "ds", path)
    ds.update_rows([4, 9], {"emb": [np.ones(16, np.float32), np.zeros(16, np.float32)]})
    want = emb.copy()
    want[4], want[9] = 1, 0
    np.testing.assert_array_equal(ds.vectors("emb"), want)
    assert list(ds.diff(1, ds.version)["changed"]["emb"]) == [4, 9]
    ds.delete("index < 3")
    np.testing.assert_array_equal(ds.vectors("emb"), want[3:])
    ds.restore(1)
    np.testing.assert_array_equal(ds.vectors("emb"), emb)
    # A file without the field: NULL vectors, named when a matrix is asked for.
    other = tmp_path / "other.beton"
    DatasetWriter(other, {"label": IntField(), "grid": NDArrayField(np.dtype("float32"), (2, 3))},
                  progress=False).from_indexed_dataset([(7, np.zeros((2, 3), np.float32))] * 2)
    ds.append(other)
    with pytest.raises(ValueError, match=r"row 60 is NULL \(2 rows in all\)"):
        ds.vectors("emb")
    np.testing.assert_array_equal(ds.vectors("emb", rows=ds.where("emb IS NOT NULL")), emb)
    assert ds.where("l2_distance(emb, $q) IS NULL", params={"q": np.zeros(16)}).tolist() == [60, 61]
    assert ds.where("l2_norm(emb) IS NULL").tolist() == [60, 61]
    with pytest.raises(ValueError, match="3-D array.*NDArrayField"):
        ds.add_column("cube", np.zeros((N + 2, 2, 2)))
    with pytest.raises(ValueError, match="one length and dtype"):
        ds.add_column("ragged", [np.zeros(3, np.float32)] * (N + 1) + [np.zeros(4, np.float32)])
    with pytest.raises(ValueError, match="1 NULL elements"):
        ds.add_column("holes", pa.FixedSizeListArray.from_arrays(pa.array([1.0, None] + [0.0] * (2 * N + 2)), 2))
    with pytest.raises(ValueError, match="holds ints or floats"):
        ds.add_column("flags", np.zeros((N + 2, 3), bool))


def test_the_gallery_summarises_vector_norms(written, tmp_path):
    path, emb, _ = written
    g = beton.open(path).gallery(n=2)
    summary = next(s for s in g.summaries if s["column"] == "emb")
    assert summary["data_type"] == "vector of 16 float32, L2 norm"
    norms = np.linalg.norm(emb, axis=1)
    assert summary["min"] == pytest.approx(norms.min(), rel=1e-6)
    assert summary["max"] == pytest.approx(norms.max(), rel=1e-6)


def numpy_nearest(matrix, q, k, metric, keep=None):
    """The reference: numpy distances over float64, best first, ties by index."""
    m = matrix.astype(np.float64)
    q = np.asarray(q, np.float64)
    if metric == "l2":
        score = np.sqrt(((m - q) ** 2).sum(axis=1))
    elif metric == "cosine":
        with np.errstate(invalid="ignore", divide="ignore"):
            score = 1 - (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    else:
        score = -(m @ q)
    rows = np.arange(len(m))
    ok = np.isfinite(score) if keep is None else np.isfinite(score) & keep
    order = sorted(rows[ok], key=lambda i: (score[i], i))[:k]
    return order, [abs(score[i]) if metric == "dot" else score[i] for i in order]


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint8"])
def test_nearest_is_numpys_exact_search(tmp_path, metric, dtype):
    rng = np.random.default_rng(2)
    n, d = 300, 12
    base = rng.standard_normal((n, d)) * (1 if dtype.startswith("float") else 20)
    base[10] = base[3]  # a tie: the lower index first
    base[20] = 0  # a zero vector: no cosine distance
    if dtype == "uint8":
        base = np.abs(base)
    m = base.astype(dtype)
    path = tmp_path / "v.beton"
    DatasetWriter(path, {"label": IntField(), "emb": NDArrayField(np.dtype(dtype), (d,))},
                  progress=False).from_indexed_dataset([(i % 3, m[i]) for i in range(n)])
    ds = beton.open(path)
    queries = np.stack([m[3].astype(np.float64), rng.standard_normal(d) * 5])
    got = ds.nearest("emb", queries, k=7, metric=metric).to_pydict()
    assert set(got) == {"query", "index", "row_id", "distance"}
    for j, q in enumerate(queries):
        rows = [i for i, qq in zip(got["index"], got["query"]) if qq == j]
        dist = [x for x, qq in zip(got["distance"], got["query"]) if qq == j]
        want, want_dist = numpy_nearest(m, q, 7, metric)
        assert rows == want, f"query {j}"
        np.testing.assert_allclose(np.abs(dist), want_dist, rtol=1e-9, atol=1e-9)
    # With a filter: only its rows.
    got = ds.nearest("emb", queries[1], k=5, metric=metric, where="label = 1").to_pydict()
    want, _ = numpy_nearest(m, queries[1], 5, metric, keep=np.arange(n) % 3 == 1)
    assert got["index"] == want


def test_vector_functions_in_sql(written):
    path, emb, _ = written
    ds = beton.open(path)
    q = np.linspace(-1, 1, 16)
    got = ds.query("SELECT index, l2_distance(emb, $q) AS d, inner_product(emb, $q) AS p, l2_norm(emb) AS n "
                   "FROM samples ORDER BY index", params={"q": q}).table.to_pydict()
    e = emb.astype(np.float64)
    np.testing.assert_allclose(got["d"], np.linalg.norm(e - q, axis=1), rtol=1e-12)
    np.testing.assert_allclose(got["p"], e @ q, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["n"], np.linalg.norm(e, axis=1), rtol=1e-12)
    norms = np.linalg.norm(e, axis=1)
    assert ds.where("l2_norm(emb) < 3.5").tolist() == np.flatnonzero(norms < 3.5).tolist()
    # Literals, lists as parameters, and two columns.
    assert ds.where("l2_distance(emb, emb) = 0").tolist() == list(range(N))
    lit = "[" + ", ".join(map(repr, q.tolist())) + "]"
    assert ds.where(f"cosine_distance(emb, {lit}) < 0.8").tolist() == ds.where(
        "cosine_distance(emb, $q) < 0.8", params={"q": list(q)}).tolist()
    with pytest.raises(beton.QueryError, match=r"l2_distance\(\) of vectors of 16 and 3 elements"):
        ds.where("l2_distance(emb, $q) < 1", params={"q": [1, 2, 3]})
    with pytest.raises(beton.QueryError, match=r"l2_norm\(\) takes vectors, got INTEGER"):
        ds.where("l2_norm(label) > 1")
    with pytest.raises(TypeError, match="a vector is a non-empty 1-D array"):
        ds.where("l2_norm(emb) > $q", params={"q": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="metric 'hamming'"):
        ds.nearest("emb", q, metric="hamming")
    with pytest.raises(beton.InvalidArgumentError, match="'label': the column is Int64, not a vector column"):
        ds.nearest("label", q)
    with pytest.raises(beton.InvalidArgumentError, match="query vector 0 has 3 elements, the column's vectors 16"):
        ds.nearest("emb", [1.0, 2.0, 3.0])


def test_nearest_gives_what_sql_orders_on_a_version_with_edits(written, tmp_path):
    path, emb, _ = written
    ds = beton.import_file(tmp_path / "ds", path)
    ds.delete("index % 7 = 0")
    ds.update_rows([3], {"emb": [emb[10]]})  # a tie with row 10's vector (index 8 after the delete)
    queries = np.stack([emb[10], np.linspace(-1, 1, 16)])
    for metric, fn, order in [("l2", "l2_distance", "ASC"), ("cosine", "cosine_distance", "ASC"),
                              ("dot", "inner_product", "DESC")]:
        got = ds.nearest("emb", queries, k=6, metric=metric, where="label <> 2").to_pydict()
        for j, q in enumerate(queries):
            want = ds.query(f"SELECT index, row_id, {fn}(emb, $q) AS d FROM samples WHERE label <> 2 "
                            f"ORDER BY d {order}, index LIMIT 6", params={"q": q}).table.to_pydict()
            rows = [(i, r, d) for qq, i, r, d in zip(got["query"], got["index"], got["row_id"], got["distance"])
                    if qq == j]
            assert rows == list(zip(want["index"], want["row_id"], want["d"])), (metric, j)


@pytest.mark.parametrize("metric, fn, order", [("l2", "l2_distance", "ASC"), ("cosine", "cosine_distance", "ASC"),
                                               ("dot", "inner_product", "DESC")])
def test_nearest_over_float32_is_exact_on_near_ties_and_extreme_values(tmp_path, metric, fn, order):
    # float32 columns are scored in float32 first, then the candidates exactly: rows whose
    # distances differ below float32's precision, overflowing squares and NaN must still come
    # out in the float64 kernel's order, as SQL ranks them.
    rng = np.random.default_rng(5)
    n, d = 2000, 40
    centers = rng.standard_normal((5, d)) * 10
    m = (centers[rng.integers(0, 5, n)] + rng.standard_normal((n, d)) * 1e-5).astype(np.float32)
    m[100] = m[7]  # exact ties
    m[200] = 3e30  # its squared norm overflows float32
    m[201, 0] = np.nan
    path = tmp_path / "t.beton"
    DatasetWriter(path, {"emb": NDArrayField(np.dtype("float32"), (d,))}, progress=False) \
        .from_indexed_dataset([(row,) for row in m])
    ds = beton.open(path)
    queries = np.stack([m[7].astype(np.float64), centers[2], np.full(d, 1e29)])
    got = ds.nearest("emb", queries, k=25, metric=metric).to_pydict()
    for j, q in enumerate(queries):
        want = ds.query(f"SELECT index, {fn}(emb, $q) AS d FROM samples WHERE {fn}(emb, $q) IS NOT NULL "
                        f"ORDER BY d {order}, index LIMIT 25", params={"q": q}).table.to_pydict()
        rows = [(i, x) for qq, i, x in zip(got["query"], got["index"], got["distance"]) if qq == j]
        finite = [(i, x) for i, x in rows if x == x]
        want_rows = [(i, x) for i, x in zip(want["index"], want["d"]) if x == x]
        assert finite == want_rows[:len(finite)] and len(finite) >= min(len(want_rows), 20), (metric, j)


def clustered(n, d, seed=0, clusters=12):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, d)) * 4
    return (centers[rng.integers(0, clusters, n)] + rng.standard_normal((n, d))).astype(np.float32)


def indexes(result):
    return result.column("index").to_pylist()


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_an_ivf_index_reading_every_list_is_exact_and_fewer_lists_keep_recall(tmp_path, metric):
    m = clustered(3000, 16)
    path = tmp_path / "c.beton"
    DatasetWriter(path, {"label": IntField(), "emb": NDArrayField(np.dtype("float32"), (16,))},
                  progress=False).from_indexed_dataset([(i % 3, m[i]) for i in range(len(m))])
    ds = beton.open(path)
    info = ds.create_index("emb", metric=metric, lists=30)
    assert info["lists"] == 30 and info["rows"] == 3000 and not info["extended"]
    assert info["recall"] >= 0.95 and 1 <= info["nprobe"] <= 30, info
    assert os.path.exists(str(path) + ".emb.ivf") and ds.index_info("emb")["serves"]
    queries = clustered(20, 16, seed=1)
    exact = ds.nearest("emb", queries, k=10, metric=metric, exact=True)
    assert exact.schema.metadata[b"beton.search"] == b"exact"
    full = ds.nearest("emb", queries, k=10, metric=metric, nprobe=30)
    assert full.schema.metadata[b"beton.search"] == b"ivf"
    assert full.to_pydict() == exact.to_pydict()  # every list read: the same rows and distances
    # The tuned nprobe, on queries the index has not seen: its recall is measured on a sample
    # of its own rows, so new queries get about as much (here 20 of them: a noisy estimate).
    got = ds.nearest("emb", queries, k=10, metric=metric)
    recall = np.mean([len(set(g) & set(e)) / 10 for g, e in
                      zip(np.array(indexes(got)).reshape(20, 10), np.array(indexes(exact)).reshape(20, 10))])
    assert recall >= 0.85, (recall, info)
    # A filter: its rows only (a selective one falls back to exact search for its queries).
    for where in ("label = 1", "index < 40"):
        got = ds.nearest("emb", queries[:3], k=10, metric=metric, where=where, nprobe=30)
        assert got.to_pydict() == ds.nearest("emb", queries[:3], k=10, metric=metric, where=where,
                                             exact=True).to_pydict()
    # Another metric than the index's: exact.
    other = "l2" if metric != "l2" else "cosine"
    assert ds.nearest("emb", queries[0], metric=other).schema.metadata[b"beton.search"] == b"exact"
    assert ds.drop_index("emb") and not ds.drop_index("emb") and ds.index_info("emb") is None


def test_an_index_follows_appends_and_goes_unused_after_other_edits(tmp_path):
    m = clustered(2000, 8, seed=3)
    path = tmp_path / "c.beton"
    DatasetWriter(path, {"emb": NDArrayField(np.dtype("float32"), (8,))}, progress=False) \
        .from_indexed_dataset([(row,) for row in m])
    ds = beton.import_file(tmp_path / "dir", path)
    info = ds.create_index("emb", lists=20)
    assert info["path"].endswith(os.path.join("_indexes", "emb.ivf"))
    new = clustered(50, 8, seed=4) + 100  # far from every old row
    DatasetWriter(str(tmp_path / "dir") + os.sep, {"emb": NDArrayField(np.dtype("float32"), (8,))},
                  progress=False).from_indexed_dataset([(row,) for row in new])
    ds = beton.open(tmp_path / "dir")
    assert ds.index_info("emb")["serves"] and ds.index_info("emb")["covered"] == 2000
    got = ds.nearest("emb", new[7], k=3, nprobe=1)
    assert got.schema.metadata[b"beton.search"] == b"ivf" and indexes(got)[0] == 2007  # appended rows are read
    assert got.column("distance").to_pylist()[0] == 0.0
    info = ds.create_index("emb")
    assert info["extended"] and info["covered"] == 2050 and info["rows"] == 2050 and info["lists"] == 20
    assert indexes(ds.nearest("emb", new[7], k=3, nprobe=20)) == indexes(ds.nearest("emb", new[7], k=3, exact=True))
    # An update of the vectors makes the index stale: searches go exact until it is built again.
    ds.update_rows([5], {"emb": [new[0]]})
    assert not ds.index_info("emb")["serves"]
    got = ds.nearest("emb", new[0], k=2)
    assert got.schema.metadata[b"beton.search"] == b"exact" and sorted(indexes(got)) == [5, 2000]
    info = ds.create_index("emb")
    assert not info["extended"] and ds.index_info("emb")["serves"]
    ds.delete("index < 10")
    assert not ds.index_info("emb")["serves"]
    # A damaged index file is named, not read as an index.
    ds.create_index("emb", rebuild=True)
    index_file = ds.index_info("emb")["path"]
    with open(index_file, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(beton.InvalidArgumentError, match="CRC does not match"):
        ds.nearest("emb", new[0], k=2)
    assert ds.nearest("emb", new[0], k=2, exact=True).num_rows == 2
    with pytest.raises(ValueError, match="kind 'hnsw' is not one of"):
        ds.create_index("emb", kind="hnsw")
    # An index file is named after its column: a name leading elsewhere is refused, nothing removed.
    (tmp_path / "dir" / "victim.ivf").write_bytes(b"x")
    with pytest.raises(beton.InvalidArgumentError, match="not a column name"):
        ds.drop_index("../victim")
    assert (tmp_path / "dir" / "victim.ivf").exists()
