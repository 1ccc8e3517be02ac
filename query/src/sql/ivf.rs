//! An IVF index over a vector column (approximate nearest neighbours): k-means centroids split
//! the rows into lists; a search scores the query against the centroids, reads only the rows of
//! the `nprobe` nearest lists and ranks them with the exact kernel (`nearest`), so the rows it
//! returns carry their exact distances and only recall is approximate.
//!
//! The index is a file of its own (`DIR/_indexes/COLUMN.ivf` in a dataset directory,
//! `FILE.COLUMN.ivf` beside a `.beton` file), written once and renamed into place, with a CRC.
//! It records what its rows were: per data file of the version it was built on, the data file,
//! its deletions and the column file holding the vectors ([`IvfIndex::key`]). It serves any
//! later version whose data files *begin* with those unchanged (appends only): the rows it
//! covers have the same positions and vectors, and the rows appended since are searched
//! exactly. Any other edit of those rows makes it stale, and searches go exact until it is
//! built again; [`IvfIndex::extend`] adds appended rows to their nearest lists without a new
//! k-means.

use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::Array;
use sqlparser::tokenizer::Span;

use super::functions::Elements;
use super::nearest::{nearest, nearest_among, Neighbour};
use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use crate::table::Table;

const MAGIC: &[u8; 8] = b"BETONIVF";
const FORMAT: u32 = 1;
/// k-means rounds over the training sample.
const ROUNDS: usize = 12;
/// Training rows per list (the sample is `lists × this`, at most every row).
const SAMPLE_PER_LIST: usize = 64;

/// An IVF index of one vector column.
#[derive(Debug, Clone, PartialEq)]
pub struct IvfIndex {
    /// The vector column.
    pub column: String,
    /// `"l2"`, `"cosine"` or `"dot"`: what the lists were made for (cosine clusters directions).
    pub metric: String,
    /// The vectors' length.
    pub dim: usize,
    /// `lists × dim` centroids (unit length for cosine).
    pub centroids: Vec<f32>,
    /// List `l`'s rows are `rows[offsets[l]..offsets[l + 1]]`.
    pub offsets: Vec<u64>,
    /// Table positions, grouped by list, ascending within each.
    pub rows: Vec<u64>,
    /// The rows' vectors as float32, in `rows`' order (`rows.len() × dim`): a search reads a
    /// list's vectors in one sequential sweep, not scattered over the column.
    pub vectors: Vec<f32>,
    /// Rows covered: positions `0..covered` (rows with a NULL vector are in no list).
    pub covered: u64,
    /// The lists a search reads by default ([`IvfIndex::tune`]; 0 before tuning).
    pub nprobe: usize,
    /// The recall@10 measured at `nprobe` on a sample of the index's own rows.
    pub recall: f64,
    /// What the covered rows were (see the module's note).
    pub key: Vec<String>,
}

/// splitmix64: the sample's and the seeding's random numbers (deterministic for a seed).
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The vectors of `rows` of a vector column as float32 (zero vectors left out for cosine, NULL
/// ones always), with their positions.
fn vectors_of(
    table: &Table,
    column: &str,
    metric: &str,
    rows: std::ops::Range<u64>,
) -> Result<(Vec<u64>, Vec<f32>, usize)> {
    let (list, d) = super::duplicates::vector_column(table, column, "an index")?;
    let elements = Elements::of(list.values(), Span::empty())?;
    let mut ids = Vec::new();
    let mut out = Vec::new();
    let mut buf = vec![0.0f64; d];
    for i in rows {
        if list.is_null(i as usize) {
            continue;
        }
        elements.fill(i as usize * d, &mut buf);
        if metric == "cosine" && buf.iter().all(|&x| x == 0.0) {
            continue;
        }
        ids.push(i);
        out.extend(buf.iter().map(|&x| x as f32));
    }
    Ok((ids, out, d))
}

/// `x`'s rows at unit length (for clustering directions: cosine).
fn unit_rows(x: &[f32], d: usize) -> Vec<f32> {
    let mut out = x.to_vec();
    for row in out.chunks_exact_mut(d) {
        let n = row.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>().sqrt();
        if n > 0.0 && n.is_finite() {
            row.iter_mut().for_each(|v| *v = (f64::from(*v) / n) as f32);
        }
    }
    out
}

/// For each of `x`'s rows (`n × d`), its nearest of `centroids` (`k × d`) by L2 (the argmin of
/// `‖c‖² - 2 x·c`), in parallel blocks through a float32 GEMM.
fn assign(x: &[f32], centroids: &[f32], d: usize) -> Vec<u32> {
    use rayon::prelude::*;
    let k = centroids.len() / d;
    let cnorm: Vec<f32> = centroids.chunks_exact(d).map(|c| c.iter().map(|v| v * v).sum()).collect();
    const BLOCK: usize = 512;
    x.par_chunks(BLOCK * d)
        .flat_map_iter(|block| {
            let m = block.len() / d;
            let mut dots = vec![0.0f32; m * k];
            super::duplicates::gemm(block, centroids, m, k, d, &mut dots);
            (0..m)
                .map(|i| {
                    let row = &dots[i * k..(i + 1) * k];
                    let mut best = (f32::INFINITY, 0u32);
                    for (c, (&dot, &cn)) in row.iter().zip(&cnorm).enumerate() {
                        let s = cn - 2.0 * dot;
                        if s < best.0 {
                            best = (s, c as u32);
                        }
                    }
                    best.1
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

impl IvfIndex {
    /// Builds an index of `column` over every row of `table` with `lists` lists (none: `√n`,
    /// between 1 and 65,536) for `metric`, seeded by `seed`.
    ///
    /// # Errors
    /// A column that is not a vector column, an unknown metric, no vectors to index.
    pub fn build(
        table: &Table,
        column: &str,
        metric: &str,
        lists: Option<usize>,
        seed: u64,
        key: Vec<String>,
    ) -> Result<IvfIndex> {
        if !matches!(metric, "l2" | "cosine" | "dot") {
            return Err(Error::InvalidArgument {
                what: format!("an index of '{column}'"),
                why: format!("metric '{metric}' is not one of cosine, dot, l2"),
            });
        }
        let n = table.num_rows();
        let (ids, raw, d) = vectors_of(table, column, metric, 0..n)?;
        let x = if metric == "cosine" {
            std::borrow::Cow::Owned(unit_rows(&raw, d))
        } else {
            std::borrow::Cow::Borrowed(&raw[..])
        };
        let count = ids.len();
        if count == 0 {
            return Err(Error::InvalidArgument {
                what: format!("an index of '{column}'"),
                why: "no row has a vector to index".into(),
            });
        }
        let k = lists.unwrap_or((count as f64).sqrt() as usize).clamp(1, 65_536).min(count);
        // The training sample: distinct rows, chosen by a seeded shuffle of positions.
        let mut state = seed ^ 0x5EED;
        let sample_n = (k * SAMPLE_PER_LIST).min(count);
        let mut order: Vec<usize> = (0..count).collect();
        for i in 0..sample_n {
            let j = i + (next(&mut state) % (count - i) as u64) as usize;
            order.swap(i, j);
        }
        let sample: Vec<f32> =
            order[..sample_n].iter().flat_map(|&r| x[r * d..(r + 1) * d].iter().copied()).collect();
        // Lloyd's k-means from k distinct sample rows.
        let mut centroids: Vec<f32> = sample[..k * d].to_vec();
        for _ in 0..ROUNDS {
            let owner = assign(&sample, &centroids, d);
            let mut sums = vec![0.0f64; k * d];
            let mut counts = vec![0usize; k];
            for (r, &c) in owner.iter().enumerate() {
                counts[c as usize] += 1;
                for (s, v) in
                    sums[c as usize * d..(c as usize + 1) * d].iter_mut().zip(&sample[r * d..(r + 1) * d])
                {
                    *s += f64::from(*v);
                }
            }
            for c in 0..k {
                let centroid = &mut centroids[c * d..(c + 1) * d];
                if counts[c] == 0 {
                    // An empty list takes a random sample row.
                    let r = (next(&mut state) % sample_n as u64) as usize;
                    centroid.copy_from_slice(&sample[r * d..(r + 1) * d]);
                    continue;
                }
                for (v, s) in centroid.iter_mut().zip(&sums[c * d..(c + 1) * d]) {
                    *v = (*s / counts[c] as f64) as f32;
                }
                if metric == "cosine" {
                    let norm = centroid.iter().map(|v| v * v).sum::<f32>().sqrt();
                    if norm > 0.0 {
                        centroid.iter_mut().for_each(|v| *v /= norm);
                    }
                }
            }
        }
        let owner = assign(&x, &centroids, d);
        drop(x);
        let mut index = IvfIndex {
            column: column.to_string(),
            metric: metric.to_string(),
            dim: d,
            centroids,
            offsets: Vec::new(),
            rows: Vec::new(),
            vectors: Vec::new(),
            covered: n,
            nprobe: 0,
            recall: 0.0,
            key,
        };
        index.set_lists(&ids, &owner, &raw, k);
        Ok(index)
    }

    /// Lists from the rows `ids` (ascending within each list as given), their lists `owner`
    /// and vectors `x` (`ids.len() × dim`).
    fn set_lists(&mut self, ids: &[u64], owner: &[u32], x: &[f32], k: usize) {
        let d = self.dim;
        let mut counts = vec![0u64; k + 1];
        for &l in owner {
            counts[l as usize + 1] += 1;
        }
        for l in 0..k {
            counts[l + 1] += counts[l];
        }
        self.offsets = counts.clone();
        let mut rows = vec![0u64; ids.len()];
        let mut vectors = vec![0.0f32; ids.len() * d];
        let mut at = counts;
        for (p, (&row, &l)) in ids.iter().zip(owner).enumerate() {
            let slot = at[l as usize] as usize;
            at[l as usize] += 1;
            rows[slot] = row;
            vectors[slot * d..(slot + 1) * d].copy_from_slice(&x[p * d..(p + 1) * d]);
        }
        self.rows = rows;
        self.vectors = vectors;
    }

    /// Number of lists.
    pub fn num_lists(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Adds the rows `covered..` of `table` (appended since it was built) to their nearest
    /// lists, and takes `key` as the rows' identity.
    ///
    /// # Errors
    /// As [`IvfIndex::build`].
    pub fn extend(&mut self, table: &Table, key: Vec<String>) -> Result<u64> {
        let n = table.num_rows();
        let (ids, x, d) = vectors_of(table, &self.column, &self.metric, self.covered..n)?;
        if d != self.dim {
            return Err(Error::InvalidArgument {
                what: format!("the index of '{}'", self.column),
                why: format!("it holds vectors of {} elements, the column now {d}", self.dim),
            });
        }
        let unit;
        let assigned = if self.metric == "cosine" {
            unit = unit_rows(&x, d);
            &unit[..]
        } else {
            &x[..]
        };
        let owner = assign(assigned, &self.centroids, d);
        let k = self.num_lists();
        // The old rows list by list (ascending within each), then the new ones (all past them).
        let old_owner: Vec<u32> = (0..k)
            .flat_map(|l| std::iter::repeat_n(l as u32, (self.offsets[l + 1] - self.offsets[l]) as usize))
            .collect();
        let all_ids: Vec<u64> = self.rows.iter().copied().chain(ids.iter().copied()).collect();
        let all_owner: Vec<u32> = old_owner.into_iter().chain(owner).collect();
        let mut all_x = std::mem::take(&mut self.vectors);
        all_x.extend_from_slice(&x);
        self.set_lists(&all_ids, &all_owner, &all_x, k);
        let added = n - self.covered;
        self.covered = n;
        self.key = key;
        Ok(added)
    }

    /// Sets [`IvfIndex::nprobe`] to twice the fewest lists (1, 2, 4, ... all) at which
    /// searches for a sample of the index's own rows (seeded by `seed`) find at least `target`
    /// of each one's 10 nearest other rows on average, and [`IvfIndex::recall`] to what they
    /// find there.
    ///
    /// # Errors
    /// As [`IvfIndex::search`].
    pub fn tune(&mut self, table: &Table, target: f64, seed: u64) -> Result<()> {
        const SAMPLES: usize = 100;
        const K: usize = 10;
        let count = self.rows.len();
        let d = self.dim;
        let mut state = seed ^ 0x7E57;
        let picks: Vec<usize> =
            (0..SAMPLES.min(count)).map(|_| (next(&mut state) % count.max(1) as u64) as usize).collect();
        let queries: Vec<Vec<f64>> = picks
            .iter()
            .map(|&p| self.vectors[p * d..(p + 1) * d].iter().map(|&v| f64::from(v)).collect())
            .collect();
        let own: Vec<u64> = picks.iter().map(|&p| self.rows[p]).collect();
        // The nearest other rows: K + 1 found, the query's own row left out.
        let others = |found: Vec<Neighbour>| -> Vec<Vec<u64>> {
            let mut per = vec![Vec::new(); queries.len()];
            for nb in found {
                if nb.index != own[nb.query] && per[nb.query].len() < K {
                    per[nb.query].push(nb.index);
                }
            }
            per
        };
        let truth = others(nearest(table, &self.column, &queries, K + 1, None, &self.metric)?);
        let lists = self.num_lists();
        let recall_at = |nprobe: usize| -> Result<f64> {
            let found = others(self.search(table, &queries, K + 1, nprobe, None, &self.metric)?);
            Ok(truth
                .iter()
                .zip(&found)
                .map(|(t, f)| match t.is_empty() {
                    true => 1.0,
                    false => f.iter().filter(|r| t.contains(r)).count() as f64 / t.len() as f64,
                })
                .sum::<f64>()
                / truth.len().max(1) as f64)
        };
        let mut nprobe = 1;
        while nprobe < lists && recall_at(nprobe)? < target {
            nprobe = (nprobe * 2).min(lists);
        }
        // One doubling more: the index's own rows are easier queries than new ones (at 1 M
        // rows of overlapping clusters, 0.957 on its rows was 0.924 on new queries).
        let nprobe = (nprobe * 2).min(lists);
        let recall = recall_at(nprobe)?;
        (self.nprobe, self.recall) = (nprobe, recall);
        Ok(())
    }

    /// Whether the index serves a version whose rows are identified by `key`: its own rows
    /// are the first ones there, unchanged.
    pub fn serves(&self, key: &[String]) -> bool {
        key.len() >= self.key.len() && key[..self.key.len()] == self.key[..]
    }

    /// The `k` nearest rows of `table` to each of `queries` by `metric`, reading the rows of
    /// the `nprobe` lists nearest each query (and every row past those it covers), among
    /// `rows` when given; a query that finds fewer than `k` that way (a selective filter) is
    /// answered by exact search.
    ///
    /// # Errors
    /// As [`nearest`]; a metric other than the index's (lists made for one distance do not
    /// serve another).
    pub fn search(
        &self,
        table: &Table,
        queries: &[Vec<f64>],
        k: usize,
        nprobe: usize,
        rows: Option<&IndexSet>,
        metric: &str,
    ) -> Result<Vec<Neighbour>> {
        if metric != self.metric {
            return Err(Error::InvalidArgument {
                what: format!("nearest in '{}'", self.column),
                why: format!(
                    "the index was built for metric '{}', not '{metric}' (build one for it, or search exactly)",
                    self.metric
                ),
            });
        }
        use rayon::prelude::*;
        let n = table.num_rows();
        let lists = self.num_lists();
        let nprobe = nprobe.clamp(1, lists.max(1));
        if let Some(q) = queries.iter().find(|q| q.len() != self.dim) {
            // nearest's own error names both lengths.
            return nearest(table, &self.column, std::slice::from_ref(q), k, rows, metric);
        }
        let one = |(j, q): (usize, &Vec<f64>)| -> Result<Vec<Neighbour>> {
            // The lists nearest the query (for cosine and dot, by direction: the largest dot).
            let q32: Vec<f32> = q.iter().map(|&v| v as f32).collect();
            let mut scored: Vec<(f32, usize)> = self
                .centroids
                .chunks_exact(self.dim)
                .enumerate()
                .map(|(l, c)| {
                    let s = match self.metric.as_str() {
                        "l2" => c.iter().zip(&q32).map(|(a, b)| (a - b) * (a - b)).sum::<f32>(),
                        _ => -c.iter().zip(&q32).map(|(a, b)| a * b).sum::<f32>(),
                    };
                    (s, l)
                })
                .collect();
            scored.select_nth_unstable_by(nprobe - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let keep = |r: u64| r < n && rows.is_none_or(|rows| rows.contains(r));
            let d = self.dim;
            // The lists in parallel (a query's rows are a few megabytes read from memory once),
            // their selections merged.
            let probed = &scored[..nprobe];
            let per_task = nprobe.div_ceil(rayon::current_num_threads().max(1) * 2).max(1);
            let searches: Vec<super::nearest::CopySearch<'_>> = probed
                .par_chunks(per_task)
                .map(|lists| {
                    let mut search = super::nearest::CopySearch::new(q, k, metric)?;
                    for &(_, l) in lists {
                        let (a, b) = (self.offsets[l] as usize, self.offsets[l + 1] as usize);
                        search.offer(&self.rows[a..b], &self.vectors[a * d..b * d], keep);
                    }
                    Ok(search)
                })
                .collect::<Result<_>>()?;
            let mut searches = searches.into_iter();
            let mut search = match searches.next() {
                Some(s) => s,
                None => super::nearest::CopySearch::new(q, k, metric)?,
            };
            searches.for_each(|s| search.merge(s));
            // Rows appended since the index was built: searched exactly, from the table.
            let appended: Vec<u64> = (self.covered.min(n)..n).filter(|&r| keep(r)).collect();
            let extra = match appended.is_empty() {
                true => Vec::new(),
                false => {
                    nearest_among(table, &self.column, std::slice::from_ref(q), k, Some(&appended), metric)?
                }
            };
            let values = table.column(&self.column)?;
            let mut found = search.finish(values.as_fixed_size_list(), j, &extra)?;
            if found.len() < k {
                // Too few rows in the lists read (a selective filter): exact search.
                found = nearest(table, &self.column, std::slice::from_ref(q), k, rows, metric)?;
                found.iter_mut().for_each(|nb| nb.query = j);
            }
            Ok(found)
        };
        let per_query: Vec<Vec<Neighbour>> =
            queries.par_iter().enumerate().map(one).collect::<Result<_>>()?;
        Ok(per_query.into_iter().flatten().collect())
    }

    /// The index file of `column` for a dataset directory `dir` or a `.beton` file.
    pub fn path_for(dataset: &Path, is_dir: bool, column: &str) -> PathBuf {
        if is_dir {
            return dataset.join("_indexes").join(format!("{column}.ivf"));
        }
        let mut name = dataset.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(format!(".{column}.ivf"));
        dataset.with_file_name(name)
    }

    /// The index as bytes: magic, format, then a JSON header, the centroids, offsets, rows and
    /// the rows' vectors (little-endian), and a CRC32 of everything before it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = serde_json::json!({
            "column": self.column, "metric": self.metric, "dim": self.dim, "lists": self.num_lists(),
            "rows": self.rows.len(), "covered": self.covered, "key": self.key,
            "nprobe": self.nprobe, "recall": self.recall,
        })
        .to_string();
        let mut out = Vec::with_capacity(
            64 + header.len() + self.centroids.len() * 4 + (self.offsets.len() + self.rows.len()) * 8,
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend(self.centroids.iter().flat_map(|v| v.to_le_bytes()));
        out.extend(self.offsets.iter().flat_map(|v| v.to_le_bytes()));
        out.extend(self.rows.iter().flat_map(|v| v.to_le_bytes()));
        out.extend(self.vectors.iter().flat_map(|v| v.to_le_bytes()));
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// The index read back from [`IvfIndex::to_bytes`]'s form.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what is wrong (not an index, another format, a CRC
    /// mismatch, a truncated or inconsistent file) and where.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<IvfIndex> {
        let bad =
            |why: String| Error::InvalidArgument { what: format!("vector index {}", path.display()), why };
        if bytes.len() < 24 || &bytes[..8] != MAGIC {
            return Err(bad("not a beton vector index (no BETONIVF magic)".into()));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body).to_le_bytes() != crc {
            return Err(bad("its CRC does not match: the file is damaged; build it again".into()));
        }
        let format = u32::from_le_bytes(body[8..12].try_into().unwrap_or_default());
        if format != FORMAT {
            return Err(bad(format!("format {format}, this beton reads {FORMAT}")));
        }
        let hlen = u64::from_le_bytes(body[12..20].try_into().unwrap_or_default()) as usize;
        let header: serde_json::Value = body
            .get(20..20 + hlen)
            .and_then(|h| serde_json::from_slice(h).ok())
            .ok_or_else(|| bad("its header is not JSON (at byte offset 20)".into()))?;
        let num = |k: &str| header[k].as_u64().ok_or_else(|| bad(format!("its header has no '{k}'")));
        let (dim, lists, nrows, covered) =
            (num("dim")? as usize, num("lists")? as usize, num("rows")? as usize, num("covered")?);
        let mut at = 20 + hlen;
        let need = dim * lists * 4 + (lists + 1) * 8 + nrows * 8 + nrows * dim * 4;
        if body.len() != at + need {
            return Err(bad(format!(
                "{} bytes after its header, not the {need} its header says",
                body.len() - at
            )));
        }
        let centroids: Vec<f32> = body[at..at + dim * lists * 4]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        at += dim * lists * 4;
        let words = |b: &[u8]| -> Vec<u64> {
            b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect()
        };
        let offsets = words(&body[at..at + (lists + 1) * 8]);
        at += (lists + 1) * 8;
        let rows = words(&body[at..at + nrows * 8]);
        at += nrows * 8;
        let vectors: Vec<f32> = body[at..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        if offsets.windows(2).any(|w| w[0] > w[1])
            || offsets.last().copied() != Some(nrows as u64)
            || rows.iter().any(|&r| r >= covered)
        {
            return Err(bad(
                "its lists are inconsistent (offsets out of order or rows past those it covers)".into(),
            ));
        }
        let key = header["key"]
            .as_array()
            .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
            .unwrap_or_default();
        Ok(IvfIndex {
            column: header["column"].as_str().unwrap_or_default().to_string(),
            metric: header["metric"].as_str().unwrap_or("l2").to_string(),
            dim,
            centroids,
            offsets,
            rows,
            vectors,
            covered,
            nprobe: header["nprobe"].as_u64().unwrap_or(0) as usize,
            recall: header["recall"].as_f64().unwrap_or(0.0),
            key,
        })
    }
}

/// An I/O error naming `path`.
fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Storage(beton_storage::Error::Io { path: path.to_path_buf(), source: e })
}

impl IvfIndex {
    /// Where the index of `column` for `view` lives, and the identity of `view`'s rows (see the
    /// module's note).
    ///
    /// # Errors
    /// The `.beton` file's metadata cannot be read.
    pub fn location(view: &crate::versioned::VersionView, column: &str) -> Result<(PathBuf, Vec<String>)> {
        Ok((IvfIndex::path(view, column)?, IvfIndex::key(view, column)?))
    }

    /// Where the index of `column` for `view` lives (a column name with a path separator in it
    /// is refused: it would name a file elsewhere).
    ///
    /// # Errors
    /// Such a name; a view that is neither a file nor a directory's version.
    pub fn path(view: &crate::versioned::VersionView, column: &str) -> Result<PathBuf> {
        if column.is_empty() || column.contains(['/', '\\']) || column.starts_with('.') {
            return Err(Error::InvalidArgument {
                what: format!("an index of '{column}'"),
                why: "not a column name (an index file is named after its column)".into(),
            });
        }
        if let Some(v) = view.version() {
            return Ok(IvfIndex::path_for(v.dir(), true, column));
        }
        Ok(IvfIndex::path_for(IvfIndex::file_of(view, column)?.path(), false, column))
    }

    fn file_of<'v>(
        view: &'v crate::versioned::VersionView,
        column: &str,
    ) -> Result<&'v beton_storage::Dataset> {
        view.file().map(|ds| ds.as_ref()).ok_or_else(|| Error::InvalidArgument {
            what: format!("an index of '{column}'"),
            why: "the dataset is neither a .beton file nor a version of a directory".into(),
        })
    }

    /// The identity of `view`'s rows of `column` (see the module's note): per data file, its
    /// deletions and the column file holding `column`; for a `.beton` file, its path, length,
    /// modification time and inode.
    ///
    /// # Errors
    /// The `.beton` file's metadata cannot be read.
    pub fn key(view: &crate::versioned::VersionView, column: &str) -> Result<Vec<String>> {
        if let Some(v) = view.version() {
            return Ok(v
                .manifest()
                .fragments
                .iter()
                .map(|f| {
                    format!(
                        "{}|{}|{}|{}",
                        f.data_file,
                        f.deletions.as_ref().map_or("-", |d| d.file.as_str()),
                        f.column_file(column).map_or("-", |c| c.file.as_str()),
                        f.num_live_rows()
                    )
                })
                .collect());
        }
        let path = IvfIndex::file_of(view, column)?.path();
        let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(vec![format!("{}|{}|{mtime}|{inode}", path.display(), meta.len())])
    }

    /// The index at `path`, if there is one.
    ///
    /// # Errors
    /// One that cannot be read or is damaged ([`IvfIndex::from_bytes`]).
    pub fn load(path: &Path) -> Result<Option<IvfIndex>> {
        match std::fs::read(path) {
            Ok(bytes) => IvfIndex::from_bytes(&bytes, path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(path, e)),
        }
    }

    /// [`IvfIndex::load`], kept in memory for the process: read again only when the file's
    /// length, modification time or inode changed (a search must not re-read megabytes of
    /// lists each call).
    ///
    /// # Errors
    /// As [`IvfIndex::load`].
    pub fn load_shared(path: &Path) -> Result<Option<std::sync::Arc<IvfIndex>>> {
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex, OnceLock};
        type Stamp = (u64, Option<std::time::SystemTime>, u64);
        type Loaded = HashMap<PathBuf, (Stamp, Arc<IvfIndex>)>;
        static CACHE: OnceLock<Mutex<Loaded>> = OnceLock::new();
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(path, e)),
        };
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        let stamp: Stamp = (meta.len(), meta.modified().ok(), inode);
        let cache = CACHE.get_or_init(Default::default);
        if let Some((s, index)) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(path) {
            if *s == stamp {
                return Ok(Some(Arc::clone(index)));
            }
        }
        let Some(index) = IvfIndex::load(path)? else { return Ok(None) };
        let index = Arc::new(index);
        cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_path_buf(), (stamp, Arc::clone(&index)));
        Ok(Some(index))
    }

    /// Writes the index to `path` through a temporary file beside it, synced and renamed into
    /// place: a reader sees the old index or the new one, never half of one.
    ///
    /// # Errors
    /// I/O errors, naming the path.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        let io = |e: std::io::Error| io_error(path, e);
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(io)?;
        temp.write_all(&self.to_bytes()).map_err(io)?;
        temp.as_file().sync_all().map_err(io)?;
        temp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_damage_is_named() {
        let index = IvfIndex {
            column: "emb".into(),
            metric: "cosine".into(),
            dim: 2,
            centroids: vec![1.0, 0.0, 0.0, 1.0],
            offsets: vec![0, 2, 3],
            rows: vec![0, 4, 2],
            vectors: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            covered: 5,
            nprobe: 1,
            recall: 1.0,
            key: vec!["a|-|-|5".into()],
        };
        let path = Path::new("x.ivf");
        let bytes = index.to_bytes();
        assert_eq!(IvfIndex::from_bytes(&bytes, path).unwrap(), index);
        let mut bad = bytes.clone();
        bad[30] ^= 1;
        assert!(IvfIndex::from_bytes(&bad, path).unwrap_err().to_string().contains("CRC does not match"));
        assert!(IvfIndex::from_bytes(b"not an index at all.....", path)
            .unwrap_err()
            .to_string()
            .contains("no BETONIVF"));
        assert!(index.serves(&["a|-|-|5".into(), "b|-|-|3".into()]));
        assert!(!index.serves(&["a|d1|-|4".into()]));
    }
}
