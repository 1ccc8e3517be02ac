//! The augmentations' tests: FFCV's arithmetic, pinned.

use super::color_jitter::blend;
use super::*;
use crate::decode::SampleContext;

fn rng() -> SampleRng {
    SampleRng::for_op(&SampleContext { index: 3, seed: 1, epoch: 0, position: 0 }, 0)
}

fn image(h: usize, w: usize) -> Vec<u8> {
    (0..h * w * 3).map(|i| (i % 251) as u8).collect()
}

#[test]
fn flips_mirror_and_twice_is_identity() {
    let (h, w) = (5, 7);
    let orig = image(h, w);
    let mut px = orig.clone();
    flip_horizontal(&mut px, w);
    assert_eq!(&px[0..3], &orig[(w - 1) * 3..w * 3]);
    flip_horizontal(&mut px, w);
    assert_eq!(px, orig);
    let mut img = ImageMut::new(&mut px, h, w).unwrap();
    RandomVerticalFlip { flip_prob: 1.0 }.apply(&mut img, &mut rng());
    assert_eq!(&px[0..w * 3], &orig[(h - 1) * w * 3..]);
}

#[test]
fn translate_and_cutout_keep_the_size_and_fill() {
    let (h, w) = (8, 9);
    let mut px = image(h, w);
    let mut img = ImageMut::new(&mut px, h, w).unwrap();
    Cutout { crop_size: 4, fill: [7, 7, 7] }.apply(&mut img, &mut rng());
    assert_eq!(px.chunks_exact(3).filter(|p| p == &[7, 7, 7]).count(), 16);
    let mut px = vec![200u8; h * w * 3];
    let mut img = ImageMut::new(&mut px, h, w).unwrap();
    RandomTranslate { padding: 3, fill: [1, 2, 3] }.apply(&mut img, &mut rng());
    let filled = px.chunks_exact(3).filter(|p| p == &[1, 2, 3]).count();
    let kept = px.chunks_exact(3).filter(|p| p == &[200, 200, 200]).count();
    assert_eq!(filled + kept, h * w);
}

#[test]
fn jitters_blend_as_ffcv() {
    assert_eq!(blend(100, 0.0, 1.5), 150);
    assert_eq!(blend(200, 0.0, 1.5), 255);
    let mut px = vec![10u8, 20, 30];
    let mut img = ImageMut::new(&mut px, 1, 1).unwrap();
    RandomSaturation { magnitude: 0.5, p: 1.0 }.apply(&mut img, &mut rng());
    // A grey pixel stays grey under any saturation change.
    let mut grey = vec![90u8; 3];
    let mut img = ImageMut::new(&mut grey, 1, 1).unwrap();
    RandomSaturation { magnitude: 0.5, p: 1.0 }.apply(&mut img, &mut rng());
    assert!(grey.iter().all(|&v| (89..=90).contains(&v)), "{grey:?}");
}
