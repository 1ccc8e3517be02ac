//! What a checkpoint stores to resume a loader mid-epoch, and the check that it fits.
//!
//! An epoch's plan is a pure function of the order, the index set, the seed, the epoch, the
//! batch size, the rank, the world size and `drop_last` ([`plan_epoch`](crate::plan_epoch)), so
//! resuming needs only those and how many batches were consumed: recompute the plan, skip that
//! many batches ([`LoaderState::remaining_batches`]). The index set itself is not stored, only
//! its length and [`IndexSet::fingerprint`]; a state resumed in a loader whose set, world size,
//! order or batch size differ would silently read other samples, so
//! [`validate_against`](LoaderState::validate_against) refuses it, naming the field.
//!
//! The JSON form carries a `version` (currently 1), checked on read.
//!
//! [`IndexSet::fingerprint`]: beton_dataset::IndexSet::fingerprint

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::order::{EpochContext, EpochPlan, Order};

/// The version of the JSON form this build writes and reads.
const VERSION: u32 = 1;

/// A loader's position: where an epoch is, and everything that fixes its plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// The run's seed.
    pub seed: u64,
    /// The epoch in progress (or about to start, when `batches_consumed` is 0).
    pub epoch: u64,
    /// Batches of this epoch's plan already handed out.
    pub batches_consumed: u64,
    /// [`IndexSet::fingerprint`](beton_dataset::IndexSet::fingerprint) of the loader's ids.
    pub indices_fingerprint: u64,
    /// Number of the loader's ids.
    pub indices_len: u64,
    /// Ranks in the run.
    pub world_size: usize,
    /// This rank.
    pub rank: usize,
    /// [`Order::name`] of the order.
    pub order: String,
    /// Samples per batch.
    pub batch_size: usize,
    /// Whether the partial last batch is dropped.
    pub drop_last: bool,
}

/// The JSON form: the state and its version.
#[derive(Serialize)]
struct Saved<'a> {
    version: u32,
    #[serde(flatten)]
    state: &'a LoaderState,
}

#[derive(Deserialize)]
struct Version {
    version: Option<u32>,
}

#[derive(Deserialize)]
struct Loaded {
    #[serde(flatten)]
    state: LoaderState,
}

impl LoaderState {
    /// The state at the start of epoch `ctx.epoch` (no batch consumed) of a loader planning with
    /// `order` as rank `rank` of `world_size`.
    pub fn new(
        order: &dyn Order,
        ctx: &EpochContext<'_>,
        rank: usize,
        world_size: usize,
        drop_last: bool,
    ) -> Self {
        LoaderState {
            seed: ctx.seed,
            epoch: ctx.epoch,
            batches_consumed: 0,
            indices_fingerprint: ctx.indices.fingerprint(),
            indices_len: ctx.indices.len() as u64,
            world_size,
            rank,
            order: order.name(),
            batch_size: ctx.batch_size,
            drop_last,
        }
    }

    /// The state as JSON, with its version.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&Saved { version: VERSION, state: self })
            .expect("a struct of numbers, strings and bools always serialises")
    }

    /// Reads a state written by [`to_json`](Self::to_json).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] for text that is not JSON, lacks a field, or has another version.
    pub fn from_json(json: &str) -> Result<Self> {
        match serde_json::from_str::<Version>(json)?.version {
            Some(VERSION) => {}
            Some(v) => {
                return Err(Error::InvalidState(format!(
                    "version {v}; this build reads loader states of version {VERSION}"
                )))
            }
            None => return Err(Error::InvalidState("no version field".into())),
        }
        Ok(serde_json::from_str::<Loaded>(json)?.state)
    }

    /// Checks that this saved state can resume in a loader whose own state (from
    /// [`new`](Self::new)) is `current`: everything that fixes the plan must agree. The position
    /// (`epoch`, `batches_consumed`) is not compared.
    ///
    /// # Errors
    ///
    /// [`Error::StateMismatch`] naming the first field that differs, in the order
    /// `indices_len`, `indices_fingerprint`, `world_size`, `rank`, `order`, `batch_size`,
    /// `drop_last`, `seed`.
    pub fn validate_against(&self, current: &LoaderState) -> Result<()> {
        fn check<T: PartialEq + ToString>(field: &'static str, saved: &T, current: &T) -> Result<()> {
            if saved == current {
                return Ok(());
            }
            Err(Error::StateMismatch { field, saved: saved.to_string(), current: current.to_string() })
        }
        check("indices_len", &self.indices_len, &current.indices_len)?;
        check("indices_fingerprint", &self.indices_fingerprint, &current.indices_fingerprint)?;
        check("world_size", &self.world_size, &current.world_size)?;
        check("rank", &self.rank, &current.rank)?;
        check("order", &self.order, &current.order)?;
        check("batch_size", &self.batch_size, &current.batch_size)?;
        check("drop_last", &self.drop_last, &current.drop_last)?;
        check("seed", &self.seed, &current.seed)
    }

    /// The batches of `plan` (this state's epoch, recomputed) not yet consumed: all but the first
    /// `batches_consumed`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] if `batches_consumed` is more than the plan has (the plan is not
    /// this state's), or `plan`'s batch size is not the state's.
    pub fn remaining_batches<'p>(&self, plan: &'p EpochPlan) -> Result<std::slice::Chunks<'p, u64>> {
        if plan.batch_size() != self.batch_size {
            return Err(Error::InvalidState(format!(
                "the plan has batch size {}, the state {}",
                plan.batch_size(),
                self.batch_size
            )));
        }
        match usize::try_from(self.batches_consumed) {
            Ok(n) if n <= plan.num_batches() => Ok(plan.batches_from(n)),
            _ => Err(Error::InvalidState(format!(
                "batches_consumed {} is past the end of epoch {}'s plan of {} batches",
                self.batches_consumed,
                self.epoch,
                plan.num_batches()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use beton_dataset::IndexSet;

    use super::*;
    use crate::{plan_epoch, OrderOption, PageMap};

    fn state() -> LoaderState {
        let indices = IndexSet::all(100);
        let pages = PageMap::from_pages(vec![0; 100]);
        let ctx = EpochContext { indices: &indices, pages: &pages, seed: 3, epoch: 2, batch_size: 8 };
        LoaderState::new(&OrderOption::QuasiRandom { buffer_pages: None }, &ctx, 1, 4, true)
    }

    #[test]
    fn json_round_trips_with_its_version() {
        let mut s = state();
        s.batches_consumed = 5;
        s.indices_fingerprint = u64::MAX; // past f64's exact integers
        let json = s.to_json();
        assert!(json.contains(r#""version":1"#), "{json}");
        assert!(json.contains(r#""order":"QUASI_RANDOM""#), "{json}");
        assert_eq!(LoaderState::from_json(&json).unwrap(), s);
    }

    #[test]
    fn rejects_other_versions_and_bad_json() {
        let json = state().to_json().replace(r#""version":1"#, r#""version":2"#);
        let msg = LoaderState::from_json(&json).unwrap_err().to_string();
        assert!(msg.contains("version 2"), "{msg}");
        let json = state().to_json().replace(r#""version":1,"#, "");
        assert!(LoaderState::from_json(&json).unwrap_err().to_string().contains("no version"));
        let json = state().to_json().replace(r#","drop_last":true"#, "");
        let msg = LoaderState::from_json(&json).unwrap_err().to_string();
        assert!(msg.contains("drop_last"), "{msg}");
        assert!(matches!(LoaderState::from_json("{"), Err(Error::InvalidState(_))));
    }

    #[test]
    fn validation_names_the_field_that_differs() {
        let saved = state();
        assert!(saved.validate_against(&saved).is_ok());
        let mut moved = saved.clone();
        (moved.epoch, moved.batches_consumed) = (9, 3);
        assert!(saved.validate_against(&moved).is_ok());
        type Edit = fn(&mut LoaderState);
        let edits: [(&str, Edit); 8] = [
            ("indices_len", |s| s.indices_len += 1),
            ("indices_fingerprint", |s| s.indices_fingerprint ^= 1),
            ("world_size", |s| s.world_size = 8),
            ("rank", |s| s.rank = 0),
            ("order", |s| s.order = "RANDOM".into()),
            ("batch_size", |s| s.batch_size = 16),
            ("drop_last", |s| s.drop_last = false),
            ("seed", |s| s.seed = 4),
        ];
        for (field, edit) in edits {
            let mut current = saved.clone();
            edit(&mut current);
            let err = saved.validate_against(&current).unwrap_err();
            assert!(matches!(err, Error::StateMismatch { field: f, .. } if f == field), "{err}");
            assert!(err.to_string().contains(&format!("{field} = ")), "{err}");
        }
    }

    #[test]
    fn remaining_batches_skip_the_consumed_ones() {
        let indices = IndexSet::all(30);
        let pages = PageMap::from_pages(vec![0; 30]);
        let ctx = EpochContext { indices: &indices, pages: &pages, seed: 1, epoch: 0, batch_size: 4 };
        let plan = plan_epoch(&OrderOption::Random, &ctx, 0, 1, false).unwrap();
        let mut s = LoaderState::new(&OrderOption::Random, &ctx, 0, 1, false);
        s.batches_consumed = 3;
        let rest: Vec<&[u64]> = s.remaining_batches(&plan).unwrap().collect();
        assert_eq!(rest, plan.batches().skip(3).collect::<Vec<_>>());
        s.batches_consumed = 8;
        assert_eq!(s.remaining_batches(&plan).unwrap().count(), 0);
        s.batches_consumed = 9;
        let msg = s.remaining_batches(&plan).unwrap_err().to_string();
        assert!(msg.contains("past the end"), "{msg}");
    }
}
