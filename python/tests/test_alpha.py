"""Transparency through the Python writer (issue 36, item 7): by default alpha is dropped as FFCV
does (the colour channels kept, as Pillow's ``convert("RGB")`` gives FFCV's writer), and the
write reports and warns; ``alpha_background=(r, g, b)`` composites with straight alpha. PNGs
are made here byte by byte (RGBA, grey+alpha, a palette with ``tRNS``)."""

import struct
import warnings
import zlib

import numpy as np
import pytest

import beton
from beton import DatasetWriter
from beton.fields import IntField, RGBImageField

DROPPED = "alpha dropped (FFCV's behaviour)"


def png(pixels, color_type: int, palette=None, trns=None) -> bytes:
    """An 8-bit PNG of ``pixels`` (H x W x samples uint8): colour type 0 grey, 2 RGB, 3 palette,
    4 grey+alpha, 6 RGBA."""
    pixels = np.asarray(pixels, dtype=np.uint8)
    h, w = pixels.shape[:2]
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0))
    if palette is not None:
        out += chunk(b"PLTE", bytes(palette))
    if trns is not None:
        out += chunk(b"tRNS", bytes(trns))
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def over(alpha, colour, background):
    """The composite, straight alpha rounded to nearest, per channel."""
    a = np.asarray(alpha, dtype=np.float64)[..., None]
    c = np.asarray(colour, dtype=np.float64)
    return np.round((a * c + (255 - a) * np.asarray(background, dtype=np.float64)) / 255).astype(np.uint8)


def clip_art():
    """6x8 RGBA clip art: red hidden under fully transparent pixels, every kind of alpha."""
    y, x = np.mgrid[0:6, 0:8]
    alpha = np.array([0, 1, 64, 128, 254, 255], dtype=np.uint8)[(x + y) % 6]
    rgb = np.stack([x * 30, y * 40, np.full_like(x, 200)], axis=-1).astype(np.uint8)
    rgb[alpha == 0] = [255, 0, 0]
    return np.concatenate([rgb, alpha[..., None]], axis=-1)


GA = np.array([[[10, 0], [90, 128], [250, 255]]], dtype=np.uint8)
PALETTE = [255, 0, 0, 0, 255, 0, 0, 0, 255]


def sources():
    """(image, what FFCV stores, alpha per pixel, colour per pixel): RGBA, grey+alpha, a palette
    with tRNS (entry 0 transparent, 1 half, 2 opaque), and an opaque RGB image."""
    rgba = clip_art()
    pal = np.array([[0, 1, 2]], dtype=np.uint8)
    pal_rgb = np.array(PALETTE, dtype=np.uint8).reshape(3, 3)[pal]
    opaque = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    return [
        (png(rgba, 6), rgba[..., :3], rgba[..., 3], rgba[..., :3]),
        (png(GA, 4), np.repeat(GA[..., :1], 3, axis=-1), GA[..., 1], np.repeat(GA[..., :1], 3, axis=-1)),
        (png(pal, 3, PALETTE, [0, 128]), pal_rgb, np.array([[0, 128, 255]]), pal_rgb),
        (png(opaque, 2), opaque, np.full((2, 2), 255), opaque),
    ]


def write(path, images, **kw):
    w = DatasetWriter(path, {"image": RGBImageField(write_mode=kw.pop("write_mode", "raw")), "label": IntField()},
                      progress=False, **kw)
    return w.from_indexed_dataset([(img, i) for i, img in enumerate(images)])


def test_alpha_is_dropped_as_in_ffcv_and_the_write_reports_and_warns(tmp_path):
    src = sources()
    with pytest.warns(UserWarning, match=r"3 images had transparency, flattened with alpha dropped .*alpha_background"):
        report = write(tmp_path / "a.beton", [s[0] for s in src])
    assert report["alpha_flattened"] == 3 and report["alpha_flattening"] == DROPPED
    ds = beton.open(tmp_path / "a.beton")
    for i, (_, ffcv, _, _) in enumerate(src):
        # FFCV's rule: the colour channels as they are, red under the transparent pixels included.
        np.testing.assert_array_equal(ds[i]["image"], ffcv)


def test_alpha_background_composites_each_pixel(tmp_path):
    src = sources()
    for bg in [(255, 255, 255), (10, 200, 30)]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning: the user chose
            report = write(tmp_path / "b.beton", [s[0] for s in src], alpha_background=bg)
        assert report["alpha_flattened"] == 3
        assert report["alpha_flattening"] == f"composited onto ({bg[0]}, {bg[1]}, {bg[2]})"
        ds = beton.open(tmp_path / "b.beton")
        for i, (_, _, alpha, colour) in enumerate(src):
            np.testing.assert_array_equal(ds[i]["image"], over(alpha, colour, bg), err_msg=f"image {i}, {bg}")
        # Fully transparent pixels are the background.
        assert (ds[0]["image"][clip_art()[..., 3] == 0] == bg).all()


def test_rgba_arrays_and_arrow_tables_are_flattened_the_same(tmp_path):
    import pyarrow as pa

    rgba = clip_art()
    bg = (0, 0, 255)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = write(tmp_path / "arr.beton", [rgba], alpha_background=bg)
    assert report["alpha_flattened"] == 1
    np.testing.assert_array_equal(beton.open(tmp_path / "arr.beton")[0]["image"], over(rgba[..., 3], rgba[..., :3], bg))
    w = DatasetWriter(tmp_path / "t.beton", {"image": RGBImageField(), "label": IntField()}, progress=False,
                      alpha_background=bg)
    report = w.from_arrow(pa.table({"image": pa.array([png(rgba, 6)], pa.binary()), "label": [0]}))
    assert report["alpha_flattened"] == 1 and report["alpha_flattening"] == "composited onto (0, 0, 255)"
    np.testing.assert_array_equal(beton.open(tmp_path / "t.beton")[0]["image"], over(rgba[..., 3], rgba[..., :3], bg))


def test_jpeg_mode_composites_before_encoding(tmp_path):
    # Left half opaque blue, right half fully transparent over hidden red.
    img = np.zeros((32, 32, 4), dtype=np.uint8)
    img[:, :16] = [0, 0, 255, 255]
    img[:, 16:] = [255, 0, 0, 0]
    for bg, shown in [(None, (255, 0, 0)), ((255, 255, 255), (255, 255, 255))]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = write(tmp_path / "j.beton", [png(img, 6)], write_mode="jpg", alpha_background=bg)
        assert report["alpha_flattened"] == 1
        right = beton.open(tmp_path / "j.beton")[0]["image"][:, 16:].astype(int)
        assert np.abs(right - shown).mean() < 8, (bg, np.abs(right - shown).mean())


def test_imagefolder_writes_and_appends_take_alpha_background(tmp_path):
    for name in ("cat", "dog"):
        (tmp_path / "f" / name).mkdir(parents=True)
        (tmp_path / "f" / name / "a.png").write_bytes(png(clip_art(), 6))
    bg = (255, 255, 255)
    w = DatasetWriter(tmp_path / "f.beton", {"image": RGBImageField(), "label": IntField()}, progress=False,
                      alpha_background=bg)
    report = w.from_imagefolder(tmp_path / "f")
    assert report["alpha_flattened"] == 2 and report["alpha_flattening"] == "composited onto (255, 255, 255)"
    want = over(clip_art()[..., 3], clip_art()[..., :3], bg)
    np.testing.assert_array_equal(beton.open(tmp_path / "f.beton")[0]["image"], want)
    ds = beton.import_file(tmp_path / "ds", tmp_path / "f.beton")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.append(tmp_path / "f", alpha_background=bg, progress=False)
    assert len(ds) == 4
    for i in range(4):
        np.testing.assert_array_equal(ds[i]["image"], want)
    # Without it, the append drops alpha as FFCV does, and says so.
    with pytest.warns(UserWarning, match="2 images had transparency"):
        ds.append(tmp_path / "f", progress=False)
    np.testing.assert_array_equal(ds[5]["image"], clip_art()[..., :3])


@pytest.mark.parametrize("bad", [(256, 0, 0), (1, 2), (-1, 0, 0), "white", 7])
def test_a_bad_alpha_background_is_refused_naming_it(tmp_path, bad):
    with pytest.raises(ValueError, match=r"alpha_background is .*three ints 0 to 255"):
        DatasetWriter(tmp_path / "x.beton", {"image": RGBImageField()}, alpha_background=bad)


class FakePIL:
    """What the writer uses of a PIL image: ``mode``, ``info`` and ``convert`` (Pillow is not a
    test requirement). ``convert("RGB")`` drops alpha, ``convert("RGBA")`` keeps it."""

    def __init__(self, rgba, mode="RGBA", info=None):
        self.rgba, self.mode, self.info = rgba, mode, dict(info or {})

    def convert(self, mode):
        return self.rgba[..., :3] if mode == "RGB" else self.rgba


def test_pil_images_with_transparency_are_counted_and_composited(tmp_path):
    rgba = clip_art()
    bg = (10, 20, 30)
    report = write(tmp_path / "pil.beton", [FakePIL(rgba)], alpha_background=bg)
    assert report["alpha_flattened"] == 1
    np.testing.assert_array_equal(beton.open(tmp_path / "pil.beton")[0]["image"], over(rgba[..., 3], rgba[..., :3], bg))
    # A palette image with a transparency entry counts too; an opaque RGB one does not.
    with pytest.warns(UserWarning, match="1 images had transparency"):
        report = write(tmp_path / "p.beton", [FakePIL(rgba, mode="P", info={"transparency": 0}),
                                              FakePIL(np.concatenate([rgba[..., :3], np.full(rgba.shape[:2] + (1,), 255, np.uint8)], -1), mode="RGB")])
    assert report["alpha_flattened"] == 1
