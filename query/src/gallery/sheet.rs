//! A gallery as a PNG contact sheet: a title line, then per group a heading and its thumbnails
//! in a grid, each labelled with its index and its first caption (8×8 bitmap glyphs from
//! `font8x8`, ASCII; other characters print as `?`).

use beton_storage::Pixels;

use super::model::{Gallery, Tile};
use crate::error::{Error, Result};

/// Space between and around cells, in pixels.
const PAD: u32 = 8;
/// Height of one line of 8-pixel text.
const LINE: u32 = 11;
/// Most cells across.
const MAX_COLUMNS: u32 = 10;
/// Most pixels in a sheet (about 190 MB of RGB).
const MAX_PIXELS: u64 = 64 << 20;

const BACKGROUND: [u8; 3] = [32, 32, 36];
const CELL: [u8; 3] = [48, 48, 54];
const TEXT: [u8; 3] = [230, 230, 230];
const DIM: [u8; 3] = [150, 150, 160];
const ERROR: [u8; 3] = [200, 60, 60];

/// An RGB canvas.
struct Canvas {
    width: u32,
    height: u32,
    data: Vec<u8>,
}

impl Canvas {
    fn fill(&mut self, x: u32, y: u32, w: u32, h: u32, color: [u8; 3]) {
        for yy in y..(y + h).min(self.height) {
            for xx in x..(x + w).min(self.width) {
                let at = (yy as usize * self.width as usize + xx as usize) * 3;
                self.data[at..at + 3].copy_from_slice(&color);
            }
        }
    }

    /// `text` at (x, y), `scale` pixels per glyph pixel, cut to `max_width` pixels.
    fn text(&mut self, x: u32, y: u32, text: &str, scale: u32, max_width: u32, color: [u8; 3]) {
        let advance = 8 * scale;
        let fits = (max_width / advance) as usize;
        // The font is ASCII: arrows and dashes of captions and titles as their ASCII look-alikes.
        let text = text.replace('→', "->").replace(['—', '–'], "-").replace('·', "|");
        let chars: Vec<char> = text.chars().collect();
        let shown: Vec<char> = match chars.len() > fits {
            true => chars.iter().take(fits.saturating_sub(1)).copied().chain(std::iter::once('~')).collect(),
            false => chars,
        };
        for (k, c) in shown.iter().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY[if c.is_ascii() { *c as usize } else { '?' as usize }];
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8u32 {
                    if bits >> col & 1 == 1 {
                        let gx = x + k as u32 * advance + col * scale;
                        self.fill(gx, y + row as u32 * scale, scale, scale, color);
                    }
                }
            }
        }
    }

    /// A thumbnail centred in the `size`-square cell at (x, y).
    fn image(&mut self, x: u32, y: u32, size: u32, image: &Option<std::result::Result<Pixels, String>>) {
        match image {
            Some(Ok(p)) => {
                let (ox, oy) =
                    (x + (size.saturating_sub(p.width)) / 2, y + (size.saturating_sub(p.height)) / 2);
                let c = usize::from(p.channels);
                for row in 0..p.height.min(size) {
                    for col in 0..p.width.min(size) {
                        let at = (row as usize * p.width as usize + col as usize) * c;
                        let rgb = if c >= 3 {
                            [p.data[at], p.data[at + 1], p.data[at + 2]]
                        } else {
                            [p.data[at]; 3]
                        };
                        self.fill(ox + col, oy + row, 1, 1, rgb);
                    }
                }
            }
            Some(Err(_)) => {
                self.fill(x, y, size, size, [70, 30, 30]);
                self.text(x + 4, y + size / 2 - 4, "broken", 1, size.saturating_sub(8), ERROR);
            }
            None => {}
        }
    }
}

/// Renders `g` as PNG bytes.
pub(crate) fn render(g: &Gallery) -> Result<Vec<u8>> {
    let size = g.size.max(1);
    let has_images = g.image_field.is_some();
    // A diff's changed rows show their older thumbnail beside the newer one.
    let pairs = g
        .groups
        .iter()
        .flat_map(|gr| &gr.tiles)
        .any(|t| t.change.as_ref().is_some_and(|c| c.before.is_some()));
    let cell_w = if pairs { 2 * size + 4 } else { size }.max(64);
    let image_h = if has_images { size } else { 0 };
    let cell_h = image_h + 2 * LINE + 4;
    let widest = g.groups.iter().map(|gr| gr.tiles.len() as u32).max().unwrap_or(1).max(1);
    let columns = widest.min(MAX_COLUMNS);
    let width = (PAD + columns * (cell_w + PAD)).max(320);
    let mut height = PAD + 2 * 8 + 4 + LINE + PAD;
    for group in &g.groups {
        let rows = (group.tiles.len() as u32).div_ceil(columns);
        height += if group.key.is_some() { LINE + 4 } else { 0 } + rows * (cell_h + PAD);
    }
    if g.hidden_groups.0 > 0 {
        height += LINE + PAD;
    }
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(Error::InvalidArgument {
            what: "contact sheet".into(),
            why: format!("{width}x{height} pixels is too large: show fewer rows or smaller thumbnails"),
        });
    }
    let mut canvas = Canvas { width, height, data: Vec::with_capacity((width * height * 3) as usize) };
    for _ in 0..width * height {
        canvas.data.extend_from_slice(&BACKGROUND);
    }
    let text_w = width - 2 * PAD;
    canvas.text(PAD, PAD, &g.title, 2, text_w, TEXT);
    let mut meta = format!("{} of {} rows", g.matched, g.num_rows);
    if !g.query.is_empty() {
        meta = format!("{}: {meta}", g.query);
    }
    if let Some(by) = &g.by {
        meta.push_str(&format!(", by {by}"));
    }
    canvas.text(PAD, PAD + 20, &meta, 1, text_w, DIM);
    let mut y = PAD + 2 * 8 + 4 + LINE + PAD;
    for group in &g.groups {
        if let (Some(key), Some(by)) = (&group.key, &g.by) {
            canvas.text(PAD, y, &format!("{by} = {key}: {} rows", group.count), 1, text_w, TEXT);
            y += LINE + 4;
        }
        for (k, tile) in group.tiles.iter().enumerate() {
            let (col, row) = (k as u32 % columns, k as u32 / columns);
            let (x, ty) = (PAD + col * (cell_w + PAD), y + row * (cell_h + PAD));
            canvas.fill(x, ty, cell_w, cell_h, CELL);
            match tile.change.as_ref().and_then(|c| c.before.as_ref()) {
                Some(before) => {
                    canvas.image(x, ty, size, &before.image);
                    canvas.image(x + size + 4, ty, size, &tile.image);
                }
                None => canvas.image(x + (cell_w - size.min(cell_w)) / 2, ty, size, &tile.image),
            }
            canvas.text(x + 2, ty + image_h + 3, &format!("#{}", tile.index), 1, cell_w - 4, TEXT);
            if let Some(line) = second_line(tile) {
                canvas.text(x + 2, ty + image_h + 3 + LINE, &line, 1, cell_w - 4, DIM);
            }
        }
        y += (group.tiles.len() as u32).div_ceil(columns) * (cell_h + PAD);
    }
    if g.hidden_groups.0 > 0 {
        let note = format!("{} more groups ({} rows) not drawn", g.hidden_groups.0, g.hidden_groups.1);
        canvas.text(PAD, y, &note, 1, text_w, DIM);
    }
    encode_png(&canvas)
}

/// A tile's second line: its first caption; in a diff, its first changed cell (`label: 3 -> 7`)
/// or `added` / `deleted`.
fn second_line(tile: &Tile) -> Option<String> {
    let Some(change) = &tile.change else {
        return tile.captions.first().map(|(_, v)| v.clone());
    };
    let Some(before) = &change.before else { return Some(change.kind.name().to_string()) };
    let cell = before.captions.iter().zip(&tile.captions).find(|((n, _), _)| change.changed.contains(n));
    Some(match cell {
        Some(((name, old), (_, new))) => format!("{name}: {old} -> {new}"),
        None => format!("changed: {}", change.changed.join(", ")),
    })
}

/// The canvas as an RGB PNG.
fn encode_png(c: &Canvas) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let fail = |e: png::EncodingError| Error::InvalidArgument {
        what: "contact sheet".into(),
        why: format!("PNG encoding failed: {e}"),
    };
    let mut encoder = png::Encoder::new(&mut out, c.width, c.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(fail)?;
    writer.write_image_data(&c.data).map_err(fail)?;
    writer.finish().map_err(fail)?;
    Ok(out)
}
