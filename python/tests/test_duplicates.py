"""Near-duplicates (issue 40, item 3): groups by a vector column against a numpy brute-force
reference with planted duplicates (every metric, several dtypes, filters), by perceptual hash on
the bundled photos re-encoded and resized (stability: the same photo stays within a few bits,
different photos do not), exact duplicates by pixels, across two datasets, the keep rules of
``extras`` and the dedup commit with its undo, and the gallery of the groups."""

import os

import numpy as np
import pytest

import beton
from beton.fields import FloatField, IntField, NDArrayField, RGBImageField
from beton.writer import DatasetWriter

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")


def reference_pairs(m, threshold, metric, rows=None, other=None):
    """Every pair within threshold by numpy in float64: (a, b, distance), a < b within one matrix."""
    a = m.astype(np.float64)
    b = a if other is None else other.astype(np.float64)
    if metric == "l2":
        d = np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1), 0))
    else:
        na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = 1 - (a @ b.T) / (na[:, None] * nb[None, :])
    out = []
    for i in range(len(a)):
        for j in range(i + 1 if other is None else 0, len(b)):
            if rows is not None and (i not in rows or j not in rows):
                continue
            if np.isfinite(d[i, j]) and d[i, j] <= threshold + 1e-12:
                out.append((i, j, d[i, j]))
    return out


def reference_groups(pairs):
    parent = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for a, b, _ in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups = {}
    for x in sorted(parent):
        groups.setdefault(root(x), []).append(x)
    return [groups[k] for k in sorted(groups)]


def planted(n=400, d=24, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, d))
    for src, dst, noise in [(3, 50, 1e-3), (3, 51, 2e-3), (51, 300, 1e-3), (7, 8, 0.0), (100, 399, 5e-3)]:
        m[dst] = m[src] + rng.standard_normal(d) * noise  # a chain 3-50-51-300, an exact pair 7-8
    m[20] = 0  # a zero vector: no cosine distance
    return m


@pytest.mark.parametrize("metric, threshold", [("l2", 0.05), ("cosine", 1e-5)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int8"])
def test_vector_groups_are_numpys_brute_force(tmp_path, metric, threshold, dtype):
    m = planted()
    if dtype == "int8":
        m = np.clip(np.round(m * 20), -127, 127)
        threshold = threshold * 20 if metric == "l2" else threshold
    m = m.astype(dtype)
    path = tmp_path / "v.beton"
    DatasetWriter(path, {"label": IntField(), "emb": NDArrayField(np.dtype(dtype), (m.shape[1],))},
                  progress=False).from_indexed_dataset([(i % 3, m[i]) for i in range(len(m))])
    ds = beton.open(path)
    got = ds.near_duplicates(by="emb", threshold=threshold, metric=metric)
    want = reference_pairs(m, threshold, metric)
    assert len(want) >= 3, "the planted duplicates are found"
    t = got.table.to_pydict()
    assert set(t) == {"group", "index", "row_id", "distance"}
    groups = {}
    for g, i in zip(t["group"], t["index"]):
        groups.setdefault(g, []).append(i)
    assert [groups[g] for g in sorted(groups)] == reference_groups(want)
    # Each row's distance is to its nearest other member.
    nearest = {}
    for a, b, x in want:
        nearest[a] = min(nearest.get(a, np.inf), x)
        nearest[b] = min(nearest.get(b, np.inf), x)
    np.testing.assert_allclose(t["distance"], [nearest[i] for i in t["index"]], rtol=1e-9, atol=1e-12)
    # A filter searches its rows only.
    got = ds.near_duplicates(by="emb", threshold=threshold, metric=metric, where="index <> 51")
    keep = set(range(len(m))) - {51}
    want = reference_groups(reference_pairs(m, threshold, metric, rows=keep))
    t = got.table.to_pydict()
    groups = {}
    for g, i in zip(t["group"], t["index"]):
        groups.setdefault(g, []).append(i)
    assert [groups[g] for g in sorted(groups)] == want


def test_float32_search_is_exact_at_the_threshold(tmp_path):
    # Pairs whose distances straddle the threshold by less than float32 can resolve: the
    # float32 GEMM only picks candidates; the float64 distance decides.
    rng = np.random.default_rng(3)
    base = rng.standard_normal(32).astype(np.float32) * 50
    m = np.stack([base + rng.standard_normal(32).astype(np.float32) * 1e-3 for _ in range(300)]).astype(np.float32)
    path = tmp_path / "c.beton"
    DatasetWriter(path, {"emb": NDArrayField(np.dtype("float32"), (32,))}, progress=False) \
        .from_indexed_dataset([(row,) for row in m])
    ds = beton.open(path)
    d = np.sqrt(((m[:, None, :].astype(np.float64) - m[None, :, :]) ** 2).sum(-1))
    threshold = float(np.median(d[np.triu_indices(300, 1)]))
    got = ds.near_duplicates(by="emb", threshold=threshold).table.to_pydict()
    members = sorted(got["index"])
    want = sorted({i for i, j in zip(*np.nonzero(np.triu(d <= threshold, 1))) for i in (i, j)})
    assert members == want


def write_photos(path, **image):
    DatasetWriter(path, {"image": RGBImageField(**image), "label": IntField()},
                  progress=False).from_imagefolder(ROOT)
    return beton.open(path)


def test_phash_is_stable_under_reencoding_and_resizing_and_tells_photos_apart(tmp_path):
    a = write_photos(tmp_path / "a.beton", jpeg_quality=95)
    b = write_photos(tmp_path / "b.beton", jpeg_quality=75, max_resolution=200)
    pairs = beton.near_duplicates(a, b, by="image", threshold=64).table.to_pydict()
    same = [x for i, j, x in zip(pairs["index"], pairs["other_index"], pairs["distance"]) if i == j]
    other = [x for i, j, x in zip(pairs["index"], pairs["other_index"], pairs["distance"]) if i != j]
    assert len(same) == len(a) == 155
    # Measured: the same photo at q75 and 200 px stays within 4 bits; different photos are 14
    # or more apart. The default threshold, 8, sits between.
    assert max(same) <= 6, sorted(same)[-5:]
    assert min(other) >= 10, sorted(other)[:5]
    leaks = beton.near_duplicates(a, b, by="image")
    assert leaks.table.column("index").to_pylist() == leaks.table.column("other_index").to_pylist() == list(range(155))
    assert len(leaks.extras()) == len(leaks.other_rows()) == 155
    assert a.near_duplicates(by="image").num_groups == 0


def test_dedup_by_image_is_a_commit_with_an_undo(tmp_path):
    photos = write_photos(tmp_path / "p.beton")
    rows = [photos[i] for i in range(12)]
    # Planted: row 12 is row 2's pixels again (an exact duplicate), row 13 row 5's at quality 70
    # and half size (a near one), row 14 row 5's again.
    small = rows[5]["image"][::2, ::2].copy()
    samples = [(r["image"], r["label"], float(i)) for i, r in enumerate(rows)]
    samples += [(rows[2]["image"], 9, 12.0), (small, 9, 13.0), (rows[5]["image"], 9, 14.0)]
    path = tmp_path / "d.beton"
    DatasetWriter(path, {"image": RGBImageField(jpeg_quality=90), "label": IntField(), "score": FloatField()},
                  progress=False).from_indexed_dataset(samples)
    ds = beton.import_file(tmp_path / "dir", path)
    groups = ds.near_duplicates(by="image")
    t = groups.table.to_pydict()
    assert sorted(zip(t["group"], t["index"])) == [(0, 2), (0, 12), (1, 5), (1, 13), (1, 14)]
    assert "NearDuplicates: 2 groups, 5 rows (by 'image', within 8 pHash bits)" in repr(groups)
    exact = ds.near_duplicates(by="image", threshold=0).table.to_pydict()
    assert sorted(zip(exact["group"], exact["index"])) == [(0, 2), (0, 12), (1, 5), (1, 14)]
    assert groups.extras().tolist() == [12, 13, 14]
    assert groups.extras(keep="last").tolist() == [2, 5, 13]
    assert groups.extras(keep="max:score").tolist() == [2, 5, 13]
    assert groups.extras(keep="min:score").tolist() == [12, 13, 14]
    assert groups.extras(keep="largest").tolist() == [12, 13, 14]  # ties to the first; 13 is smaller
    with pytest.raises(ValueError, match="keep='best' is not one of"):
        groups.extras(keep="best")
    page = ds.gallery(groups)
    html = page.to_html() if hasattr(page, "to_html") else str(page)
    assert html.count('data-key="0"') >= 1 and html.count('data-key="1"') >= 1
    version = ds.version
    ds.delete(groups.extras(), message="dedup")
    assert len(ds) == 12 and ds.near_duplicates(by="image").num_groups == 0
    ds.restore(version)
    assert len(ds) == 15 and ds.near_duplicates(by="image").num_groups == 2


def test_cross_dataset_vectors_and_errors(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((120, 8)).astype(np.float32)
    b = rng.standard_normal((90, 8)).astype(np.float32)
    b[10], b[11], a[5] = a[3] + 1e-4, a[3], b[60]
    paths = []
    for name, m in [("a", a), ("b", b)]:
        paths.append(tmp_path / f"{name}.beton")
        DatasetWriter(paths[-1], {"emb": NDArrayField(np.dtype("float32"), (8,)), "label": IntField()},
                      progress=False).from_indexed_dataset([(row, 0) for row in m])
    da, db = beton.open(paths[0]), beton.open(paths[1])
    got = beton.near_duplicates(da, db, by="emb", threshold=0.01).table.to_pydict()
    want = reference_pairs(a, 0.01, "l2", other=b)
    assert list(zip(got["index"], got["other_index"])) == [(i, j) for i, j, _ in want] == [(3, 10), (3, 11), (5, 60)]
    with pytest.raises(ValueError, match="needs threshold="):
        da.near_duplicates(by="emb")
    with pytest.raises(ValueError, match="metric 'dot' is not one of"):
        da.near_duplicates(by="emb", threshold=1, metric="dot")
    with pytest.raises(beton.InvalidArgumentError, match="not a vector column"):
        da.near_duplicates(by="label", threshold=1)
    photos = write_photos(tmp_path / "p.beton")
    with pytest.raises(beton.InvalidArgumentError, match="number of pHash bits from 0 to 64, not 65"):
        photos.near_duplicates(by="image", threshold=65)


def test_phash_and_hamming_in_sql(tmp_path):
    a = write_photos(tmp_path / "a.beton", jpeg_quality=95)
    b = write_photos(tmp_path / "b.beton", jpeg_quality=75, max_resolution=200)
    ha = a.query("SELECT index, phash(image) AS h FROM samples ORDER BY index").table
    hb = b.query("SELECT index, phash(image) AS h FROM samples ORDER BY index").table
    assert str(ha.schema.field("h").type) == "uint64"
    x, y = ha.column("h").to_pylist(), hb.column("h").to_pylist()
    # The SQL hashes are the ones near_duplicates compares: the same distances.
    pairs = beton.near_duplicates(a, b, by="image", threshold=64).table.to_pydict()
    for i, j, d in list(zip(pairs["index"], pairs["other_index"], pairs["distance"]))[:500]:
        assert bin(x[i] ^ y[j]).count("1") == d
    # A filter by distance to one photo's hash (a parameter holds a signed 64-bit int).
    h = int(np.array([x[7]], np.uint64).view(np.int64)[0])
    near = a.where("hamming(phash(image), $h) <= 8", params={"h": h}).tolist()
    assert near == [7]
    got = a.query("SELECT index, hamming(phash(image), $h) AS d FROM samples WHERE index < 3", params={"h": h})
    assert got.table.column("d").to_pylist() == [bin(x[i] ^ x[7]).count("1") for i in range(3)]
    # `image.phash` is the same hash as a column name.
    both = a.query("SELECT image.phash AS c, phash(image) AS f FROM samples ORDER BY index").table.to_pydict()
    assert both["c"] == both["f"] == x
    assert a.where("hamming(image.phash, $h) <= 8", params={"h": h}).tolist() == [7]
    with pytest.raises(beton.QueryError, match="'label' is not an image field"):
        a.where("phash(label) = 0")
    with pytest.raises(beton.QueryError, match="no column named .label.phash."):
        a.where("label.phash = 0")
    with pytest.raises(beton.QueryError, match=r"hamming\(\) takes integers"):
        a.where("hamming(label, 1.5) = 0")
