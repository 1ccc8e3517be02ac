//! `beton dups` and `beton nearest` on the bundled ImageFolder with a planted duplicate.

use super::{beton, beton_ok, text};

#[test]
fn dups_finds_a_copied_photo_and_shows_its_group() {
    let src = beton_testkit::example_data().join("imagefolder");
    let (dir, root) = beton_testkit::temp_path("folder");
    // Two classes, and the first fish photo copied into the other class too.
    let mut copied = None;
    for class in ["fish", "tool"] {
        std::fs::create_dir_all(root.join(class)).unwrap();
        let mut names: Vec<_> =
            std::fs::read_dir(src.join(class)).unwrap().map(|e| e.unwrap().path()).collect();
        names.sort();
        for p in &names {
            std::fs::copy(p, root.join(class).join(p.file_name().unwrap())).unwrap();
        }
        if class == "fish" {
            copied = Some(names[0].clone());
        }
    }
    let copied = copied.unwrap();
    std::fs::copy(&copied, root.join("tool").join("zz-copy.jpg")).unwrap();
    let f = dir.path().join("f.beton");
    beton_ok(&["write-imagefolder", root.to_str().unwrap(), f.to_str().unwrap()]);
    let page = dir.path().join("dups.html");
    let out = beton_ok(&["dups", f.to_str().unwrap(), "--out", page.to_str().unwrap()]);
    assert!(out.contains("1 groups of near-duplicates, 2 rows, by 'image' within 8 pHash bits"), "{out}");
    assert!(out.contains("  group 0: 0 (0), "), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<section class=\"group\"").count(), 1);
    assert!(html.contains("distance"));
    // Exact duplicates: the same pixels; JSON lines.
    let json = beton_ok(&["dups", f.to_str().unwrap(), "--threshold", "0", "--json"]);
    let rows: Vec<serde_json::Value> = json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["group"] == 0 && r["distance"] == 0.0));
    // Mistakes are named.
    let bad = beton(&["dups", f.to_str().unwrap(), "--threshold", "65"]);
    assert!(text(&bad).1.contains("from 0 to 64, not 65"), "{}", text(&bad).1);
    let bad = beton(&["dups", f.to_str().unwrap(), "--by", "label"]);
    assert!(text(&bad).1.contains("needs --threshold"), "{}", text(&bad).1);
    let bad = beton(&["nearest", f.to_str().unwrap(), "0"]);
    assert!(text(&bad).1.contains("no vector column"), "{}", text(&bad).1);
}
