//! `beton gallery` and `beton show --grid` on the bundled ImageFolder (155 real photos).

use std::path::PathBuf;

use super::{beton, beton_ok, text};

/// A temporary folder holding `if.beton`, the bundled ImageFolder (with its paths).
fn imagefolder() -> (tempfile::TempDir, PathBuf) {
    let src = beton_testkit::example_data().join("imagefolder");
    let (dir, out) = beton_testkit::temp_path("if.beton");
    beton_ok(&["write-imagefolder", src.to_str().unwrap(), out.to_str().unwrap(), "--with-path"]);
    (dir, out)
}

/// `(key, count)` of every group section of a gallery page.
fn groups(html: &str) -> Vec<(String, u64)> {
    html.split("<section class=\"group\" data-count=\"")
        .skip(1)
        .map(|s| {
            let (count, rest) = s.split_once('"').unwrap();
            let key = rest.strip_prefix(" data-key=\"").unwrap().split_once('"').unwrap().0;
            (key.to_string(), count.parse().unwrap())
        })
        .collect()
}

#[test]
fn a_gallery_page_counts_what_the_query_counts() {
    let (dir, f) = imagefolder();
    let page = dir.path().join("page.html");
    let sheet = dir.path().join("sheet.png");
    let sql = "label IN (1, 3, 4)";
    let out = beton_ok(&[
        "gallery",
        f.to_str().unwrap(),
        sql,
        "--by",
        "label",
        "--n",
        "5",
        "--out",
        page.to_str().unwrap(),
        "--png",
        sheet.to_str().unwrap(),
        "--size",
        "96",
    ]);
    assert!(out.contains("wrote") && out.contains("15 thumbnails of 96 rows in 3 groups of label"), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    // The counts SQL gives, group by group, and the total.
    let counted = beton_ok(&[
        "query",
        f.to_str().unwrap(),
        "--json",
        &format!("SELECT label, count(*) AS n FROM samples WHERE {sql} GROUP BY label ORDER BY label"),
    ]);
    let expected: Vec<(String, u64)> = counted
        .lines()
        .map(|l| {
            let row: serde_json::Value = serde_json::from_str(l).unwrap();
            (row["label"].to_string(), row["n"].as_u64().unwrap())
        })
        .collect();
    let shown: Vec<(String, u64)> =
        groups(&html).into_iter().map(|(k, n)| (k.split(' ').next().unwrap().to_string(), n)).collect();
    assert_eq!(shown, expected);
    let total: u64 = expected.iter().map(|e| e.1).sum();
    assert!(html.contains(&format!("data-matched=\"{total}\" data-rows=\"155\"")));
    assert_eq!(html.matches("<img src=\"data:image/jpeg;base64,").count(), 15);
    // Class names on the group headings; captions (the path) under the thumbnails.
    assert!(
        html.contains("data-key=\"1 (fish)\"") && html.contains("path: fish/"),
        "class names and captions"
    );
    assert!(!html.contains("http://") && !html.contains("https://"), "self-contained: no network");
    // The contact sheet is a PNG.
    let png = std::fs::read(&sheet).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
}

#[test]
fn a_select_shows_its_rows_in_its_order() {
    let (dir, f) = imagefolder();
    let page = dir.path().join("small.html");
    let sql =
        "SELECT index, image.width AS w FROM samples ORDER BY image.width * image.height, index LIMIT 4";
    beton_ok(&["gallery", f.to_str().unwrap(), sql, "--out", page.to_str().unwrap(), "--no-summaries"]);
    let html = std::fs::read_to_string(&page).unwrap();
    let ids = beton_ok(&["query", f.to_str().unwrap(), "--json", sql]);
    let expected: Vec<String> = ids
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["index"].to_string())
        .collect();
    let shown: Vec<String> =
        html.split("data-index=\"").skip(1).map(|s| s.split_once('"').unwrap().0.to_string()).collect();
    assert_eq!(shown, expected);
    assert!(html.contains("w: ") && !html.contains("class=\"summaries\""));
}

#[test]
fn gallery_mistakes_are_named_and_leave_no_file() {
    let (dir, f) = imagefolder();
    let page = dir.path().join("p.html");
    let (p, fs) = (page.to_str().unwrap(), f.to_str().unwrap());
    for (args, says) in [
        (vec!["gallery", fs], "--out page.html"),
        (
            vec!["gallery", fs, "--by", "lable", "--out", p],
            "no column named 'lable'; the columns are: index,",
        ),
        (vec!["gallery", fs, "label = = 2", "--out", p], "SQL error at line 1, column 9"),
        (vec!["gallery", fs, "SELECT label FROM samples", "--out", p], "`index` column"),
        (vec!["gallery", fs, "--image", "label", "--out", p], "'label' is not an image field"),
        (vec!["gallery", fs, "--n", "0", "--out", p], "rows per group"),
    ] {
        let o = beton(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = text(&o).1;
        assert!(err.starts_with("beton gallery: ") && err.contains(says), "{args:?}: {err}");
        assert!(!page.exists());
    }
    // A destination that cannot be written: an error, and no temporary file left beside it.
    let missing = dir.path().join("no/such/dir/p.html");
    let o = beton(&["gallery", fs, "--out", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("writing"), "{}", text(&o).1);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("if.beton")], "only the dataset remains");
}

#[test]
fn show_grid_draws_a_contact_sheet_of_several_samples() {
    let (dir, f) = imagefolder();
    let sheet = dir.path().join("grid.png");
    let out = beton_ok(&["show", f.to_str().unwrap(), "0..3", "20", "--grid", sheet.to_str().unwrap()]);
    assert!(out.contains("sample 0:\n  image: ") && out.contains("sample 20:\n"), "{out}");
    assert!(out.contains("wrote") && out.contains("4 thumbnails"), "{out}");
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&sheet).unwrap()));
    let info = decoder.read_info().unwrap().info().clone();
    // Four cells of 160 pixels (+ 8 of padding) in a row.
    assert_eq!(info.width, 8 + 4 * (160 + 8));
    // One index still prints as before; mistakes are named.
    assert!(beton_ok(&["show", f.to_str().unwrap(), "7"]).starts_with("image: "));
    for (args, says) in [
        (vec!["show", f.to_str().unwrap(), "3..3"], "is empty"),
        (vec!["show", f.to_str().unwrap(), "x"], "'x' is not a sample index"),
        (vec!["show", f.to_str().unwrap(), "1", "2", "--out", "a.png"], "--grid"),
        (vec!["show", f.to_str().unwrap(), "1", "999", "--grid", "b.png"], "sample 999 is out of range"),
    ] {
        let o = beton(&args);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert!(text(&o).1.contains(says), "{args:?}: {}", text(&o).1);
    }
}
