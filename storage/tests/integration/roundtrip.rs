//! proptest: arbitrary schemas (every field type, extensions included) and samples survive a
//! write and a read unchanged, and the result passes `verify`.

use beton_storage::{
    ArraySpec, CustomField, DType, Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, Pixels,
    SampleValue, Slot, Value, WriteMode, Writer, WriterOptions,
};
use proptest::prelude::*;

fn field_type() -> impl Strategy<Value = FieldType> {
    prop_oneof![
        Just(FieldType::Int),
        Just(FieldType::Float),
        Just(FieldType::Bytes),
        Just(FieldType::Json),
        Just(FieldType::Text),
        Just(FieldType::Bool),
        Just(FieldType::RgbImage),
        Just(FieldType::GreyImage),
        (
            prop_oneof![Just("|u1"), Just("<i2"), Just("<f4"), Just("<f8")],
            prop::collection::vec(1u64..4, 0..3)
        )
            .prop_map(|(t, shape)| FieldType::NDArray(
                ArraySpec::new(DType::parse(t).unwrap(), shape).unwrap()
            )),
        Just(FieldType::TorchTensor(ArraySpec::new(DType::parse("<f4").unwrap(), vec![3, 2]).unwrap())),
        prop_oneof![Just("|u1"), Just("<i4"), Just("<f8")]
            .prop_map(|t| FieldType::Array(DType::parse(t).unwrap())),
        (1usize..12, prop_oneof![Just(1usize), Just(2), Just(4), Just(8)]).prop_map(|(size, align)| {
            let mut arguments = Box::new([0u8; 1024]);
            arguments[..4].copy_from_slice(b"mine");
            FieldType::Custom(CustomField { slot: Slot { size, align }, arguments })
        }),
    ]
}

/// A value for `ty`, deterministic from `seed` (proptest shrinks the seed).
fn value(ty: &FieldType, seed: u64) -> SampleValue {
    let bytes =
        |n: usize| (0..n).map(|k| (seed.wrapping_mul(31).wrapping_add(k as u64 * 7) % 251) as u8).collect();
    let len = (seed % 40) as usize;
    match ty {
        FieldType::Int => SampleValue::Int(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64),
        FieldType::Float => SampleValue::Float(f64::from_bits(seed.wrapping_mul(0x2545_F491_4F6C_DD1D))),
        FieldType::Bytes => SampleValue::Bytes(bytes(len)),
        FieldType::Json => {
            SampleValue::Json(format!("{{\"k\": {seed}, \"s\": \"é{len}\", \"l\": [1, null]}}"))
        }
        FieldType::Text => SampleValue::Text("ünï😀".repeat(len % 5)),
        FieldType::Bool => SampleValue::Bool(seed % 2 == 1),
        FieldType::RgbImage | FieldType::GreyImage => {
            let c = if *ty == FieldType::RgbImage { 3 } else { 1 };
            let (w, h) = (1 + (seed % 9) as u32, 1 + (seed % 5) as u32);
            SampleValue::Image(ImageSource::Pixels(Pixels {
                width: w,
                height: h,
                channels: c,
                data: bytes((w * h) as usize * c as usize),
            }))
        }
        FieldType::NDArray(s) | FieldType::TorchTensor(s) => SampleValue::NDArray(bytes(s.nbytes() as usize)),
        FieldType::Array(d) => SampleValue::Array(bytes(d.itemsize() * (len % 7))),
        FieldType::Custom(CustomField { slot, .. }) => SampleValue::Custom(bytes(slot.size)),
    }
}

fn check(read: Value<'_>, written: &SampleValue) {
    match (read, written) {
        (Value::Int(a), SampleValue::Int(b)) => assert_eq!(a, *b),
        (Value::Float(a), SampleValue::Float(b)) => assert_eq!(a.to_bits(), b.to_bits()),
        (Value::Bool(a), SampleValue::Bool(b)) => assert_eq!(a, *b),
        (Value::Bytes(a), SampleValue::Bytes(b))
        | (Value::NDArray(a), SampleValue::NDArray(b))
        | (Value::Array(a), SampleValue::Array(b))
        | (Value::Custom(a), SampleValue::Custom(b)) => assert_eq!(a, &b[..]),
        (Value::Json(a), SampleValue::Json(b)) | (Value::Text(a), SampleValue::Text(b)) => assert_eq!(a, b),
        (Value::Image(img), SampleValue::Image(ImageSource::Pixels(p))) => {
            assert_eq!((img.width as u32, img.height as u32), (p.width, p.height));
            assert_eq!(img.data, &p.data[..]);
            assert_eq!(img.decode().unwrap().data, p.data);
        }
        (r, w) => panic!("read {r:?} for written {w:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_fields_and_samples_round_trip(
        types in prop::collection::vec(field_type(), 1..7),
        seeds in prop::collection::vec(any::<u64>(), 0..24),
        threads in 1usize..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rt.beton");
        let raw = ImageOptions::with_mode(WriteMode::Raw);
        let fields: Vec<FieldSpec> = types
            .iter()
            .enumerate()
            .map(|(k, ty)| FieldSpec { name: format!("f{k}"), ty: ty.clone(), image: raw.clone() })
            .collect();
        let samples: Vec<Vec<SampleValue>> = seeds
            .iter()
            .map(|&s| types.iter().enumerate().map(|(k, ty)| value(ty, s.wrapping_add(k as u64))).collect())
            .collect();
        let opts = WriterOptions { page_size: 1 << 21, num_threads: threads, chunk_size: 5, ..WriterOptions::default() };
        Writer::new(&path, fields, opts)
            .unwrap()
            .write_indexed(samples.len() as u64, |i| Ok(samples[i as usize].clone()))
            .unwrap();
        let mut open = beton_storage::OpenOptions::new();
        for (k, ty) in types.iter().enumerate() {
            if let FieldType::Custom(CustomField { slot, .. }) = ty {
                open = open.custom_layout(&format!("f{k}"), slot.size, slot.align);
            }
        }
        let ds: Dataset = open.open(&path).unwrap();
        prop_assert_eq!(ds.num_samples(), samples.len() as u64);
        for (k, ty) in types.iter().enumerate() {
            prop_assert_eq!(ds.fields()[k].field_type(), ty);
        }
        for (i, sample) in samples.iter().enumerate() {
            for (k, written) in sample.iter().enumerate() {
                check(ds.get(i as u64, k).unwrap(), written);
            }
        }
        beton_storage::verify(&ds, true).unwrap();
    }
}
