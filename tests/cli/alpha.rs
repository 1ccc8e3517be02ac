//! `beton write-imagefolder --alpha-background R,G,B`: transparent PNGs composited onto a colour;
//! without it alpha is dropped as FFCV does, and the output says how many images it touched.

use std::path::Path;

use super::{beton, beton_ok, text};

/// A 2×1 RGBA PNG: opaque green, then red hidden under alpha 0.
fn transparent_png(path: &Path) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut enc = png::Encoder::new(file, 2, 1);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header().unwrap().write_image_data(&[0, 255, 0, 255, 255, 0, 0, 0]).unwrap();
}

fn first_image(path: &Path) -> Vec<u8> {
    let ds = beton_storage::Dataset::open(path).unwrap();
    let image = ds.get_by_name(0, "image").unwrap().as_image().unwrap().data.to_vec();
    image
}

#[test]
fn alpha_is_dropped_and_counted_or_composited_onto_the_colour_given() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("folder");
    std::fs::create_dir_all(root.join("c")).unwrap();
    transparent_png(&root.join("c/a.png"));
    let out = dir.path().join("out.beton");
    let (r, o) = (root.to_str().unwrap(), out.to_str().unwrap());

    let stdout = beton_ok(&["write-imagefolder", r, o, "--mode", "raw"]);
    assert!(
        stdout.contains(
            "1 images had transparency: alpha dropped (FFCV's behaviour); --alpha-background R,G,B"
        ),
        "{stdout}"
    );
    assert_eq!(first_image(&out), [0, 255, 0, 255, 0, 0]);

    let stdout =
        beton_ok(&["write-imagefolder", r, o, "--mode", "raw", "--alpha-background", "255, 255,255"]);
    assert!(stdout.contains("1 images had transparency: composited onto (255, 255, 255)\n"), "{stdout}");
    assert_eq!(first_image(&out), [0, 255, 0, 255, 255, 255]);

    for bad in ["255,255", "256,0,0", "white", "1,2,3,4"] {
        let run = beton(&["write-imagefolder", r, o, "--alpha-background", bad]);
        assert_eq!(run.status.code(), Some(2), "{bad}");
        assert!(text(&run).1.contains("--alpha-background"), "{bad}: {}", text(&run).1);
    }
}
