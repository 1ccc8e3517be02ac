//! Galleries: grouping, the rows shown, captions, summaries, broken images, HTML and the PNG
//! contact sheet, over a small file of real-looking images and over a million-row table.

use std::path::{Path, PathBuf};

use beton_query::gallery::{Gallery, GalleryOptions, Selection, SummaryKind};
use beton_query::{Error, Table};
use beton_storage::{Dataset, EncodedImage, ImageMode, ImageSource, Pixels, SampleValue};

/// Pixels of a `w × h` gradient tinted by `seed`.
fn pixels(w: u32, h: u32, seed: u8) -> Pixels {
    let mut data = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            data.extend_from_slice(&[(x * 255 / w) as u8, (y * 255 / h) as u8, seed.wrapping_mul(37)]);
        }
    }
    Pixels { width: w, height: h, channels: 3, data }
}

/// `n` rows: image (sizes vary), label `i % 3`, score `i / 10`, name text; row `broken` (if any)
/// stores bytes that are not a JPEG.
fn write(path: &Path, n: u64, broken: Option<u64>) {
    let fields = beton_testkit::schema("image:rgb_image label:int score:float name:text");
    beton_testkit::write(path, fields, n, |i| {
        let image = match broken == Some(i) {
            true => ImageSource::Stored(EncodedImage {
                mode: ImageMode::Jpg,
                width: 40,
                height: 30,
                data: vec![0xFF, 0xD8, 1, 2, 3],
            }),
            false => ImageSource::Pixels(pixels(40 + 20 * (i % 4) as u32, 30 + 10 * (i % 3) as u32, i as u8)),
        };
        vec![
            SampleValue::Image(image),
            SampleValue::Int((i % 3) as i64),
            SampleValue::Float(i as f64 / 10.0),
            SampleValue::Text(format!("<row {i}> & \"co\"")),
        ]
    });
}

fn temp_file(n: u64, broken: Option<u64>) -> (tempfile::TempDir, PathBuf) {
    beton_testkit::temp_file("g.beton", |file| write(file, n, broken))
}

/// [`temp_file`], opened.
fn temp_dataset(n: u64, broken: Option<u64>) -> (tempfile::TempDir, Dataset) {
    let (tmp, file) = temp_file(n, broken);
    (tmp, Dataset::open(&file).unwrap())
}

fn build(table: &Table<'_>, selection: &Selection, options: &GalleryOptions) -> beton_query::Result<Gallery> {
    Gallery::build(table, selection, options, &|_, _| {})
}

#[test]
fn groups_count_every_row_and_show_rows_spread_over_each() {
    let (_tmp, ds) = temp_dataset(31, None);
    let table = Table::new(&ds);
    let classes = Some(vec!["cat".to_string(), "dog".to_string(), "<fish>".to_string()]);
    let options = GalleryOptions {
        by: Some("label".into()),
        per_group: 4,
        size: 32,
        classes,
        ..GalleryOptions::default()
    };
    let done = std::sync::atomic::AtomicU64::new(0);
    let g = Gallery::build(&table, &Selection::all(&table), &options, &|d, t| {
        assert!(d <= t && t == 12);
        done.fetch_max(d, std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(done.into_inner(), 12, "progress reaches the total");
    assert_eq!((g.matched, g.num_rows, g.groups.len()), (31, 31, 3));
    let keys: Vec<&str> = g.groups.iter().map(|gr| gr.key.as_deref().unwrap()).collect();
    assert_eq!(keys, ["0 (cat)", "1 (dog)", "2 (<fish>)"]);
    assert_eq!(g.groups.iter().map(|gr| gr.count).collect::<Vec<_>>(), [11, 10, 10]);
    for (k, gr) in g.groups.iter().enumerate() {
        let members: Vec<u64> = (0..31).filter(|i| i % 3 == k as u64).collect();
        let shown: Vec<u64> = gr.tiles.iter().map(|t| t.index).collect();
        assert_eq!(shown.len(), 4);
        assert_eq!(
            (shown[0], shown[3]),
            (members[0], *members.last().unwrap()),
            "first and last of the group"
        );
        assert!(shown.windows(2).all(|w| w[0] < w[1]));
        for t in &gr.tiles {
            let p = t.image.as_ref().unwrap().as_ref().unwrap();
            assert!(p.width.max(p.height) == 32 && p.channels == 3, "{}x{}", p.width, p.height);
            // Default captions: the scalar fields but the grouping one.
            let names: Vec<&str> = t.captions.iter().map(|c| c.0.as_str()).collect();
            assert_eq!(names, ["score", "name"]);
        }
    }
    // Summaries of every column over the selection, class names on labels, image sizes.
    let label = g.summaries.iter().find(|s| s.column == "label").unwrap();
    assert!(
        matches!(&label.kind, SummaryKind::Counts { top, distinct: 3, .. } if top[0] == ("0 (cat)".to_string(), 11))
    );
    let sizes = g.summaries.iter().find(|s| s.column == "image.size").unwrap();
    assert!(matches!(&sizes.kind, SummaryKind::Counts { distinct: 12, .. }), "{sizes:?}");
    let score = g.summaries.iter().find(|s| s.column == "score").unwrap();
    assert!(matches!(&score.kind, SummaryKind::Histogram { min, max, .. } if *min == 0.0 && *max == 3.0));
    assert!(g.summaries.iter().all(|s| s.column != "index"));

    // HTML: the numbers are attributes, text is escaped, every tile has its image.
    let html = g.to_html(true);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("data-matched=\"31\""));
    for (key, count) in [("0 (cat)", 11), ("1 (dog)", 10), ("2 (&lt;fish&gt;)", 10)] {
        assert!(html.contains(&format!("data-count=\"{count}\" data-key=\"{key}\"")), "{key}");
    }
    assert_eq!(html.matches("<img src=\"data:image/jpeg;base64,").count(), 12);
    assert!(html.contains("&lt;row 0&gt; &amp; &quot;co&quot;") && !html.contains("<row 0>"));
    let fragment = g.to_html(false);
    assert!(fragment.starts_with("<div class=\"beton-gallery\"") && !fragment.contains("<html"));
}

#[test]
fn a_select_keeps_its_order_and_its_columns_become_captions() {
    let (_tmp, ds) = temp_dataset(20, None);
    let table = Table::new(&ds);
    let sql =
        "SELECT index, image.width AS w, label FROM samples WHERE label = 1 ORDER BY score DESC LIMIT 3";
    let selection = Selection::of_sql(&table, sql).unwrap();
    assert_eq!(selection.rows(), [19, 16, 13]);
    let g = build(&table, &selection, &GalleryOptions { size: 16, ..GalleryOptions::default() }).unwrap();
    let tiles = &g.groups[0].tiles;
    assert_eq!(tiles.iter().map(|t| t.index).collect::<Vec<_>>(), [19, 16, 13]);
    assert_eq!(
        tiles[0].captions,
        [("w".to_string(), "100".to_string()), ("label".to_string(), "1".to_string())]
    );
    assert_eq!(g.query, sql);
    // A predicate selects rows in order; explicit caption columns may be any column.
    let selection = Selection::of_sql(&table, "label = 2 AND score > 1").unwrap();
    let options = GalleryOptions { columns: Some(vec!["image.height".into()]), ..GalleryOptions::default() };
    let g = build(&table, &selection, &options).unwrap();
    assert_eq!(g.groups[0].tiles.iter().map(|t| t.index).collect::<Vec<_>>(), [11, 14, 17]);
    assert_eq!(g.groups[0].tiles[0].captions, [("image.height".to_string(), "50".to_string())]);
}

#[test]
fn bad_arguments_say_what_is_wrong() {
    let (_tmp, ds) = temp_dataset(5, None);
    let table = Table::new(&ds);
    let all = Selection::all(&table);
    let by = GalleryOptions { by: Some("lable".into()), ..GalleryOptions::default() };
    let e = build(&table, &all, &by).unwrap_err();
    assert!(
        matches!(&e, Error::NoSuchColumn { name, available } if name == "lable" && available.contains("label")),
        "{e}"
    );
    let e = Selection::of_sql(&table, "SELECT label FROM samples").unwrap_err();
    assert!(e.to_string().contains("`index` column"), "{e}");
    let e = Selection::of_sql(&table, "label = = 1").unwrap_err();
    assert!(matches!(e, Error::Sql { line: 1, .. }), "{e}");
    let image = GalleryOptions { image: Some("label".into()), ..GalleryOptions::default() };
    assert!(build(&table, &all, &image)
        .unwrap_err()
        .to_string()
        .contains("'label' is not an image field; the image fields are: image"));
    let zero = GalleryOptions { per_group: 0, ..GalleryOptions::default() };
    let huge = GalleryOptions { per_group: usize::MAX, ..GalleryOptions::default() };
    assert!(build(&table, &all, &huge).is_ok(), "no more rows than there are");
    assert!(build(&table, &all, &zero).is_err());
    let past = Selection::of_set(&beton_query::IndexSet::from_sorted(vec![2, 9]).unwrap());
    assert!(build(&table, &past, &GalleryOptions::default())
        .unwrap_err()
        .to_string()
        .contains("row 9 is past the end"));
}

#[test]
fn a_broken_image_is_shown_as_broken_and_the_rest_as_usual() {
    let (_tmp, ds) = temp_dataset(6, Some(2));
    let table = Table::new(&ds);
    let g = build(&table, &Selection::all(&table), &GalleryOptions::default()).unwrap();
    let tiles = &g.groups[0].tiles;
    assert_eq!(tiles.len(), 6);
    assert!(tiles[2].image.as_ref().unwrap().as_ref().unwrap_err().contains("sample 2"));
    assert_eq!(tiles.iter().filter(|t| matches!(t.image, Some(Ok(_)))).count(), 5);
    let html = g.to_html(false);
    assert!(html.contains("class=\"tile broken\" data-index=\"2\""));
    assert_eq!(html.matches("<img ").count(), 5);
}

#[test]
fn the_contact_sheet_is_a_png_with_a_cell_per_tile() {
    let (_tmp, ds) = temp_dataset(10, None);
    let table = Table::new(&ds);
    let options =
        GalleryOptions { by: Some("label".into()), per_group: 3, size: 100, ..GalleryOptions::default() };
    let g = build(&table, &Selection::all(&table), &options).unwrap();
    let png = g.to_png().unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let reader = decoder.read_info().unwrap();
    let info = reader.info();
    // Three cells of 100 (+ 8 padding) across; three groups of one row of cells each.
    assert_eq!(info.width, 8 + 3 * (100 + 8));
    assert_eq!(info.height, 8 + 20 + 11 + 8 + 3 * (11 + 4 + 100 + 2 * 11 + 4 + 8));
    assert_eq!(info.color_type, png::ColorType::Rgb);
}

#[test]
fn a_million_rows_are_summarised_but_never_shown_whole() {
    let (_tmp, file) = beton_testkit::temp_path("m.beton");
    let n = 1_000_000u64;
    beton_testkit::write(&file, beton_testkit::schema("label:int x:float"), n, |i| {
        vec![SampleValue::Int((i % 1000) as i64), SampleValue::Float(i as f64)]
    });
    let ds = Dataset::open(&file).unwrap();
    let table = Table::new(&ds);
    let selection = Selection::of_sql(&table, "x >= 0").unwrap();
    let options = GalleryOptions { by: Some("label".into()), per_group: 4, ..GalleryOptions::default() };
    let g = build(&table, &selection, &options).unwrap();
    assert_eq!(g.matched, n);
    assert_eq!((g.groups.len(), g.hidden_groups), (50, (950, 950_000)));
    assert_eq!(g.num_tiles(), 200);
    let label = g.summaries.iter().find(|s| s.column == "label").unwrap();
    assert!(matches!(&label.kind, SummaryKind::Histogram { bins, .. } if bins.iter().sum::<u64>() == n));
    let html = g.to_html(true);
    assert!(html.len() < 2 << 20, "{} bytes", html.len());
    let too_many = GalleryOptions {
        by: Some("label".into()),
        per_group: 1000,
        max_groups: 100,
        ..GalleryOptions::default()
    };
    let e = build(&table, &selection, &too_many).unwrap_err();
    assert!(e.to_string().contains("would draw 100000 thumbnails; at most 20000"), "{e}");
    assert!(html.contains("950 more groups (950,000 rows) not drawn"));
}

#[test]
fn a_column_that_cannot_be_read_is_said_so_and_the_rest_still_shows() {
    let (_tmp, file) = temp_file(4, None);
    // Row 1's text becomes invalid UTF-8 (its payload found by its bytes).
    let mut bytes = std::fs::read(&file).unwrap();
    let needle = b"<row 1> & \"co\"";
    let at = bytes.windows(needle.len()).position(|w| w == needle).unwrap();
    bytes[at + 1] = 0xFF;
    std::fs::write(&file, bytes).unwrap();
    let ds = Dataset::open(&file).unwrap();
    let table = Table::new(&ds);
    let g = build(&table, &Selection::all(&table), &GalleryOptions::default()).unwrap();
    let name = g.summaries.iter().find(|s| s.column == "name").unwrap();
    assert!(matches!(&name.kind, SummaryKind::Unreadable(why) if why.contains("UTF-8")), "{name:?}");
    let tiles = &g.groups[0].tiles;
    assert!(
        tiles[1].captions.iter().any(|(c, v)| c == "name" && v.starts_with("unreadable: ")),
        "{:?}",
        tiles[1]
    );
    assert!(matches!(tiles[1].image, Some(Ok(_))));
    assert_eq!(tiles[0].captions[2].1, "<row 0> & \"co\"");
    assert!(g.to_html(true).contains("cannot read: "));
}

#[test]
fn a_diff_shows_changed_rows_before_beside_after_and_added_and_deleted_rows() {
    use beton_query::gallery::{diff_rows, ChangeKind};
    use beton_query::versioned::{diff, VersionedDataset};
    use beton_query::{IndexSet, SqlEdits};

    let (tmp, file) = temp_file(12, None);
    let dir = tmp.path().join("ds");
    let v1 = VersionedDataset::import(&dir, &file).unwrap();
    let v2 = v1.update(Some("index IN (2, 7)"), &[("label".into(), "label + 10".into())], "").unwrap();
    let v3 = v2.delete(&IndexSet::from_sorted(vec![4]).unwrap(), None, "").unwrap();
    let more = tmp.path().join("more.beton");
    write(&more, 2, None);
    let v4 = v3.append_file(&more, "").unwrap();

    let d = diff(&v1, &v4).unwrap();
    let (va, vb) = (v1.view().unwrap(), v4.view().unwrap());
    let (older, newer) = (va.table().unwrap(), vb.table().unwrap());
    let rows = diff_rows(&d, &older, &newer).unwrap();
    let kinds: Vec<(u64, ChangeKind, Option<u64>, Option<u64>)> =
        rows.iter().map(|r| (r.row_id, r.kind, r.before, r.after)).collect();
    // Row 7 moved up one place (row 4 went); the appended rows are at the end.
    assert_eq!(
        kinds,
        [
            (2, ChangeKind::Changed, Some(2), Some(2)),
            (7, ChangeKind::Changed, Some(7), Some(6)),
            (12, ChangeKind::Added, None, Some(11)),
            (13, ChangeKind::Added, None, Some(12)),
            (4, ChangeKind::Deleted, Some(4), None),
        ]
    );
    assert!(rows[0].changed == ["label"] && rows[2].changed.is_empty());

    let options = GalleryOptions { per_group: 8, size: 40, ..GalleryOptions::default() };
    let sides = ("v1".to_string(), "v4".to_string());
    let done = std::sync::atomic::AtomicU64::new(0);
    let g = Gallery::build_diff(&older, &newer, &rows, sides.clone(), &options, &|d, t| {
        assert!(d <= t && t == 7, "two thumbnails per changed row, one per other: {d}/{t}");
        done.fetch_max(d, std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(done.into_inner(), 7);
    let groups: Vec<(&str, u64, usize)> =
        g.groups.iter().map(|gr| (gr.key.as_deref().unwrap(), gr.count, gr.tiles.len())).collect();
    assert_eq!(groups, [("changed", 2, 2), ("added", 2, 2), ("deleted", 1, 1)]);
    // A changed row: both thumbnails, both versions' captions, the label highlighted.
    let t = &g.groups[0].tiles[1];
    let change = t.change.as_ref().unwrap();
    let before = change.before.as_ref().unwrap();
    assert_eq!((t.index, before.index, change.row_id), (6, 7, 7));
    assert!(matches!(t.image, Some(Ok(_))) && matches!(before.image, Some(Ok(_))));
    assert_eq!(change.changed, ["label"]);
    assert_eq!(before.captions[0], ("label".to_string(), "1".to_string()));
    assert_eq!(t.captions[0], ("label".to_string(), "11".to_string()));
    // Its captions: the changed column, then scalar fields (up to four).
    let names: Vec<&str> = t.captions.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["label", "score", "name"]);
    // The deleted row is shown as it was.
    let gone = &g.groups[2].tiles[0];
    assert_eq!((gone.index, gone.change.as_ref().unwrap().kind), (4, ChangeKind::Deleted));
    assert_eq!(gone.captions[1], ("score".to_string(), "0.4".to_string()));

    let html = g.to_html(true);
    let pair = &html[html[..html.find("data-row-id=\"7\"").unwrap()].rfind("<figure").unwrap()..];
    let pair = &pair[..pair.find("</figure>").unwrap()];
    assert_eq!(pair.matches("<img ").count(), 2, "{pair}");
    assert!(pair.contains("data-before-index=\"7\"") && pair.contains("v1 · #7") && pair.contains("v4 · #6"));
    assert!(
        pair.contains("<tr class=\"changed\" data-column=\"label\"><td>label</td><td>1</td><td>11</td></tr>")
    );
    assert!(pair.contains("<tr data-column=\"score\"><td>score</td><td>0.7</td><td>0.7</td></tr>"));
    assert!(!pair.contains("frame changed"), "the image did not change");
    assert!(html.contains("<span class=\"badge deleted\">deleted</span>"));
    assert_eq!(html.matches("class=\"badge added\"").count(), 2);

    // The contact sheet: changed rows' cells are two thumbnails wide.
    let larger = GalleryOptions { size: 120, ..options.clone() };
    let png =
        Gallery::build_diff(&older, &newer, &rows, sides.clone(), &larger, &|_, _| {}).unwrap().to_png();
    let reader = png::Decoder::new(std::io::Cursor::new(png.unwrap())).read_info().unwrap();
    assert_eq!(reader.info().width, 8 + 2 * (2 * 120 + 4 + 8));

    // Caption columns neither version has are refused, naming the columns there are.
    let bad = GalleryOptions { columns: Some(vec!["nope".into()]), ..options.clone() };
    let e = Gallery::build_diff(&older, &newer, &rows, sides.clone(), &bad, &|_, _| {}).unwrap_err();
    assert!(matches!(e, Error::NoSuchColumn { .. }) && e.to_string().contains("label"), "{e}");
    // A diff of other versions is refused, not shown wrong.
    let e = diff_rows(&d, &newer, &older).unwrap_err().to_string();
    assert!(e.contains("row id") && e.contains("other versions"), "{e}");
    // Rows past a table's end are refused.
    let mut past = rows.clone();
    past[0].after = Some(99);
    let e = Gallery::build_diff(&older, &newer, &past, sides, &options, &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("row 99 is past the end of the newer version"), "{e}");
}
