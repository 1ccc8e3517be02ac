"""Galleries and notebook views: ``Dataset.gallery``, ``_repr_html_`` of datasets, index sets,
query results and galleries (valid HTML, small at any size), and a gallery page rendered in a
real headless browser (Debian's chromium, which scripts/test.sh installs)."""

import json
import os
import shutil
import subprocess
import time

import html5lib
import numpy as np
import pyarrow as pa
import pytest

import beton
from beton import IndexSet
from beton.fields import IntField, RGBImageField, FloatField
from beton.writer import DatasetWriter

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "imagefolder")
REPO = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """The bundled ImageFolder (155 real photos in 6 classes) with paths."""
    path = tmp_path_factory.mktemp("gallery") / "photos.beton"
    DatasetWriter(path, {"image": RGBImageField(write_mode="jpg"), "label": IntField()},
                  progress=False).from_imagefolder(ROOT, with_path=True)
    return beton.open(path)


@pytest.fixture(scope="module")
def million(tmp_path_factory):
    """A million rows of numbers (no images)."""
    path = tmp_path_factory.mktemp("gallery") / "million.beton"
    n = 1_000_000
    table = pa.table({"label": np.arange(n) % 10, "x": np.arange(n, dtype=np.float64)})
    DatasetWriter(path, {"label": IntField(), "x": FloatField()}, progress=False).from_arrow(table)
    return beton.open(path)


def valid(html: str, page: bool = False) -> str:
    """``html`` parsed strictly (html5lib raises on any parse error): returns it."""
    parser = html5lib.HTMLParser(strict=True)
    parser.parse(html) if page else parser.parseFragment(html)
    return html


def test_the_validator_refuses_broken_html():
    with pytest.raises(html5lib.html5parser.ParseError):
        valid("<div><p>x</div></span>")


def test_a_gallery_groups_and_counts_what_sql_counts(photos):
    g = photos.gallery("label IN (0, 2, 5)", by="label", n=3, size=64)
    counted = photos.query("SELECT label, count(*) AS n FROM samples WHERE label IN (0, 2, 5) "
                           "GROUP BY label ORDER BY label").to_pydict()
    assert [int(gr.key.split()[0]) for gr in g.groups] == counted["label"]
    assert [gr.rows for gr in g.groups] == counted["n"]
    assert g.matched == sum(counted["n"]) and g.num_rows == 155
    assert g.groups[0].key == "0 (everyday_object)"
    for gr in g.groups:
        assert len(gr.indices) == 3
        labels = {photos[i]["label"] for i in gr.indices}
        assert labels == {int(gr.key.split()[0])}
    summaries = {s["column"]: s for s in g.summaries}
    assert summaries["label"]["kind"] == "counts" and summaries["label"]["distinct"] == 3
    assert summaries["image.width"]["kind"] == "histogram"
    assert sum(summaries["image.width"]["bins"]) == g.matched
    assert summaries["image.size"]["kind"] == "counts"
    page = valid(g.to_html(page=True), page=True)
    assert page.count("<img src=\"data:image/jpeg;base64,") == 9
    assert "Gallery('photos.beton': 59 of 155 rows by label, 3 groups, 9 thumbnails)" == repr(g)


def test_ordered_queries_keep_their_order_and_captions(photos):
    sql = "SELECT index, image.width AS w FROM samples ORDER BY image.width DESC, index LIMIT 5"
    expected = photos.query(sql).column("index").to_pylist()
    assert photos.gallery(sql).groups[0].indices == expected
    # A query result and row numbers work the same; an IndexSet is spread over.
    assert photos.gallery(photos.query(sql), n=3).groups[0].indices == expected[:3]
    assert photos.gallery([7, 3, 150]).groups[0].indices == [7, 3, 150]
    assert photos.gallery(IndexSet([1, 2, 3, 4, 5]), n=2).groups[0].indices == [1, 5]
    assert "w: " in photos.gallery(sql).to_html()


def test_save_writes_a_page_or_a_sheet_and_refuses_other_names(photos, tmp_path):
    g = photos.gallery(by="label", n=2)
    g.save(tmp_path / "p.html")
    g.save(tmp_path / "p.png")
    assert (tmp_path / "p.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(ValueError, match=r"\.html .* or \.png"):
        g.save(tmp_path / "p.gif")
    assert sorted(os.listdir(tmp_path)) == ["p.html", "p.png"], "no temporary files left"


def test_gallery_mistakes_are_named(photos):
    with pytest.raises(beton.NotFoundError, match="lable"):
        photos.gallery(by="lable")
    with pytest.raises(beton.QueryError, match="line 1, column"):
        photos.gallery("label = = 1")
    with pytest.raises(beton.InvalidArgumentError, match="not an image field"):
        photos.gallery(image="label")
    with pytest.raises(beton.InvalidArgumentError, match="index"):
        photos.gallery("SELECT label FROM samples")
    with pytest.raises(TypeError, match="where"):
        photos.gallery(3.5)


def test_progress_draws_a_bar_only_when_asked(photos, capfd, monkeypatch):
    monkeypatch.setenv("BETON_PROGRESS", "1")  # pytest's stderr is no terminal: force the bar on
    photos.gallery(by="label", n=2, progress=True)
    err = capfd.readouterr().err
    assert "12/12" in err and "thumbnails" in err
    photos.gallery(by="label", n=2)
    assert capfd.readouterr().err == ""


def test_progress_from_many_threads_draws_one_bar(monkeypatch):
    """The thumbnail threads report at once, and making the bar lets another thread in (here a
    sleep, as tqdm's import and its first write do): one bar, counting forward to the total."""
    import threading

    from beton.dataset import _display

    class Bar:
        def __init__(self):
            self.n = 0

        def update(self, k):
            assert k > 0, "the count went back"
            self.n += k

        def close(self):
            pass

    made = []

    def slow_bar(total, enabled, unit):
        time.sleep(0.05)  # releases the GIL, as making a tqdm bar can
        made.append(Bar())
        return made[-1]

    monkeypatch.setattr(_display, "_progress_bar", slow_bar)

    def build(report):
        threads = [threading.Thread(target=report, args=(done, 12)) for done in (3, 1, 12, 7, 5, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return None

    monkeypatch.setattr(_display, "Gallery", lambda native: native)
    _display._with_progress(build, True)
    assert len(made) == 1 and made[0].n == 12


def test_notebook_views_are_valid_html(photos):
    card = valid(photos._repr_html_())
    assert 'data-rows="155"' in card and card.count("<img ") == 8
    assert "label int" in card and "everyday_object" in card
    where = valid(photos.where("label = 3")._repr_html_())
    assert "29 ids" in where and where.count("<img ") == 16
    # Sets made from a dataset's sets keep their dataset; a set made by hand shows its ids only.
    assert valid((photos.where("label = 3") | photos.where("label = 4"))._repr_html_()).count("<img ") == 16
    bare = valid(IndexSet([1, 2, 3, 10])._repr_html_())
    assert "<img" not in bare and "4 ids" in bare and "1–3, 10" in bare
    result = valid(photos.query("SELECT index, label FROM samples WHERE label = 1 LIMIT 12")._repr_html_())
    assert "12 rows" in result and result.count("<img ") == 12
    counts = valid(photos.query("SELECT label, count(*) AS n FROM samples GROUP BY label")._repr_html_())
    assert "<img" not in counts and "<table" in counts
    assert valid(photos.gallery(by="label")._repr_html_()).count("<img ") == 48


def test_a_million_rows_render_small(million):
    every = IndexSet.all(1_000_000)
    assert len(valid(every._repr_html_())) < 2_000_000
    selected = million.where("x >= 0")
    assert len(selected) == 1_000_000
    start = time.perf_counter()
    html = selected._repr_html_()
    took = time.perf_counter() - start
    assert len(valid(html)) < 2_000_000, len(html)
    g = million.gallery(selected, by="label", n=4)
    assert [gr.rows for gr in g.groups] == [100_000] * 10
    page = valid(g.to_html(page=True), page=True)
    assert len(page) < 2_000_000
    print(f"repr of a 1,000,000-row IndexSet: {took * 1000:.0f} ms, {len(html):,} bytes")


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    if os.environ.get("BETON_REQUIRE_BROWSER") == "1":
        pytest.fail("BETON_REQUIRE_BROWSER=1 and no chromium on PATH (scripts/test.sh installs it)")
    pytest.skip("no chromium on PATH (scripts/test.sh installs Debian's chromium)")


# Run in the page once it has loaded: what the browser itself decoded and counted.
_PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.querySelectorAll('img')];
  const groups = [...document.querySelectorAll('section.group')].map(s => [s.dataset.key, +s.dataset.count]);
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({
    images: imgs.length,
    loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
    matched: +document.querySelector('.beton-gallery').dataset.matched,
    groups: groups,
  });
  document.body.appendChild(out);
});
</script>"""


def test_a_gallery_renders_in_a_real_browser(photos, tmp_path):
    chromium = _chromium()
    sql = "label != 2"
    g = photos.gallery(sql, by="label", n=6)
    page = g.to_html(page=True)
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", _PROBE + "</body>"))
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--allow-file-access-from-files", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(common + ["--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    probe = json.loads(dom.stdout.split('<pre id="probe">')[1].split("</pre>")[0])
    counted = photos.query(f"SELECT label, count(*) AS n FROM samples WHERE {sql} GROUP BY label ORDER BY label")
    expected = counted.to_pydict()
    assert probe["images"] == 6 * 5 and probe["loaded"] == probe["images"], probe
    assert probe["matched"] == sum(expected["n"]) == len(photos.where(sql))
    assert [int(k.split()[0]) for k, _ in probe["groups"]] == expected["label"]
    assert [n for _, n in probe["groups"]] == expected["n"]
    # A screenshot to look at, under target/.
    shot = os.path.abspath(os.path.join(REPO, "target", "gallery-screenshot.png"))
    os.makedirs(os.path.dirname(shot), exist_ok=True)
    page_file = tmp_path / "page.html"
    page_file.write_text(page)
    r = subprocess.run(common + [f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars",
                                 page_file.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(shot) > 50_000, "a screenshot of thumbnails, not a blank page"


def test_a_version_of_a_dataset_directory_shows_its_own_rows(photos, tmp_path):
    ds = beton.import_file(tmp_path / "photos.dataset", photos.path)
    ds.delete("label = 0")
    ds.update({"label": "label + 10"}, where="label = 5")
    g = ds.gallery(by="label", n=2)
    counted = ds.query("SELECT label, count(*) AS n FROM samples GROUP BY label ORDER BY label").to_pydict()
    assert [gr.rows for gr in g.groups] == counted["n"] and g.num_rows == len(ds) == 155 - 17
    assert g.groups[-1].key.startswith("15")
    card = valid(ds._repr_html_())
    assert "dataset directory, version 3" in card and card.count("<img ") == 8
    assert valid(ds.where("label = 15")._repr_html_()).count("<img ") == 15
    # An older version still shows its own rows.
    first = beton.open(tmp_path / "photos.dataset", version=1)
    assert first.gallery(by="label").groups[0].key == "0 (everyday_object)"
