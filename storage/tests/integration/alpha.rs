//! Transparency through the writer: the report counts the images whose alpha was flattened and
//! says how; `alpha_background` composites; what is read back is what was reported.

use beton_storage::{
    Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode, Writer,
    WriterOptions,
};

/// A 2×1 RGBA PNG: an opaque green pixel and one of alpha `a` over hidden red.
fn rgba_png(a: u8) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, 2, 1);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[0, 255, 0, 255, 255, 0, 0, a]).unwrap();
    }
    out
}

fn image_field(name: &str, background: Option<[u8; 3]>) -> FieldSpec {
    let options = ImageOptions { alpha_background: background, ..ImageOptions::with_mode(WriteMode::Raw) };
    FieldSpec::rgb_image(name, options)
}

/// Writes one image field's samples (a corrupt one among them, left out with `skip_bad`) and
/// returns the report and the images read back.
fn write(background: Option<[u8; 3]>, threads: usize) -> (beton_storage::WriteReport, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("alpha.beton");
    let sources = [
        ImageSource::Encoded(rgba_png(0)),   // transparent: counted
        ImageSource::Encoded(rgba_png(255)), // alpha channel, all opaque: not counted
        ImageSource::Encoded(b"\x89PNG\r\n\x1a\n broken".to_vec()), // skipped: not counted
        ImageSource::Pixels(Pixels { width: 1, height: 1, channels: 4, data: vec![9, 9, 9, 100] }), // counted
        ImageSource::Pixels(Pixels { width: 1, height: 1, channels: 3, data: vec![7, 7, 7] }),
    ];
    let options =
        WriterOptions { num_threads: threads, chunk_size: 2, skip_bad: true, ..WriterOptions::default() };
    let writer = Writer::new(&path, vec![image_field("image", background)], options).unwrap();
    let report = writer
        .write_indexed(sources.len() as u64, |i| Ok(vec![SampleValue::Image(sources[i as usize].clone())]))
        .unwrap();
    let ds = Dataset::open(&path).unwrap();
    let images =
        (0..ds.num_samples()).map(|i| ds.get(i, 0).unwrap().as_image().unwrap().data.to_vec()).collect();
    (report, images)
}

#[test]
fn the_report_counts_flattened_images_and_says_how() {
    for threads in [1, 3] {
        let (report, images) = write(None, threads);
        assert_eq!(report.skipped.len(), 1);
        assert_eq!(report.alpha_flattened, 2, "threads {threads}");
        assert_eq!(report.alpha_flattening, "alpha dropped (FFCV's behaviour)");
        // FFCV's rule: the colour channels as they are, the hidden red included.
        assert_eq!(
            images,
            [vec![0, 255, 0, 255, 0, 0], vec![0, 255, 0, 255, 0, 0], vec![9, 9, 9], vec![7, 7, 7]]
        );

        let (report, images) = write(Some([255, 255, 255]), threads);
        assert_eq!(report.alpha_flattened, 2);
        assert_eq!(report.alpha_flattening, "composited onto (255, 255, 255)");
        // round((100·9 + 155·255) / 255) = round(158.53) = 159.
        assert_eq!(
            images,
            [vec![0, 255, 0, 255, 255, 255], vec![0, 255, 0, 255, 0, 0], vec![159; 3], vec![7, 7, 7]]
        );
    }
}

#[test]
fn fields_that_flatten_differently_are_each_named_and_no_images_say_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.beton");
    let fields = vec![image_field("a", None), image_field("b", Some([1, 2, 3]))];
    let report = Writer::new(&path, fields, WriterOptions::default())
        .unwrap()
        .write_indexed(1, |_| {
            Ok(vec![
                SampleValue::Image(ImageSource::Encoded(rgba_png(0))),
                SampleValue::Image(ImageSource::Encoded(rgba_png(3))),
            ])
        })
        .unwrap();
    assert_eq!(report.alpha_flattened, 2);
    assert_eq!(report.alpha_flattening, "a: alpha dropped (FFCV's behaviour); b: composited onto (1, 2, 3)");

    let report = Writer::new(
        dir.path().join("n.beton"),
        vec![FieldSpec::new("x", FieldType::Int)],
        WriterOptions::default(),
    )
    .unwrap()
    .write_indexed(2, |i| Ok(vec![SampleValue::Int(i as i64)]))
    .unwrap();
    assert_eq!((report.alpha_flattened, report.alpha_flattening.as_str()), (0, ""));
}
