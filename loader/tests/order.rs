//! The ordering layer end to end: every order, distributed, batched, resumed.

use std::collections::BTreeMap;
use std::time::Instant;

use beton_dataset::IndexSet;
use beton_loader::{plan_epoch, EpochContext, EpochPlan, Error, LoaderState, Order, OrderOption, PageMap};
use proptest::prelude::*;

/// Samples in the synthetic datasets.
const UNIVERSE: u64 = 2000;

fn ctx<'a>(indices: &'a IndexSet, pages: &'a PageMap, seed: u64, epoch: u64, bs: usize) -> EpochContext<'a> {
    EpochContext { indices, pages, seed, epoch, batch_size: bs }
}

fn plans(order: &dyn Order, c: &EpochContext<'_>, world: usize, drop_last: bool) -> Vec<EpochPlan> {
    (0..world).map(|r| plan_epoch(order, c, r, world, drop_last).unwrap()).collect()
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

/// Pages of the ids of a set under a map: how many distinct.
fn num_pages_of(indices: &IndexSet, pages: &PageMap) -> usize {
    let mut p: Vec<u64> = indices.iter().map(|id| pages.page(id).unwrap()).collect();
    p.sort_unstable();
    p.dedup();
    p.len()
}

/// QUASI_RANDOM's buffer bound: at every position, the pages first touched at or before it and
/// last touched at or after it number at most `buffer`.
fn max_open_pages(seq: &[u64], pages: &PageMap) -> usize {
    let mut span: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    for (i, &id) in seq.iter().enumerate() {
        span.entry(pages.page(id).unwrap()).and_modify(|s| s.1 = i).or_insert((i, i));
    }
    let mut delta = vec![0i64; seq.len() + 1];
    for &(first, last) in span.values() {
        delta[first] += 1;
        delta[last + 1] -= 1;
    }
    let mut open = 0;
    delta
        .iter()
        .map(|d| {
            open += d;
            open as usize
        })
        .max()
        .unwrap_or(0)
}

fn order_option() -> impl Strategy<Value = OrderOption> {
    prop_oneof![
        Just(OrderOption::Sequential),
        Just(OrderOption::Random),
        Just(OrderOption::QuasiRandom { buffer_pages: None }),
        (1usize..8).prop_map(|b| OrderOption::QuasiRandom { buffer_pages: Some(b) }),
    ]
}

/// A page map over the universe: contiguous pages of a random length (how writers lay samples
/// out), or a random page per sample (FFCV with several writer workers, and worst cases).
fn page_map() -> impl Strategy<Value = PageMap> {
    (1u64..120, any::<bool>(), proptest::collection::vec(0u64..80, UNIVERSE as usize)).prop_map(
        |(page_len, contiguous, random)| {
            if contiguous {
                PageMap::from_pages((0..UNIVERSE).map(|i| i / page_len).collect())
            } else {
                PageMap::from_pages(random)
            }
        },
    )
}

fn index_set() -> impl Strategy<Value = IndexSet> {
    prop_oneof![
        proptest::collection::btree_set(0..UNIVERSE, 0..60).prop_map(|s| s.into_iter().collect()),
        proptest::collection::btree_set(0..UNIVERSE, 0..1200).prop_map(|s| s.into_iter().collect()),
        (0..UNIVERSE, 0..UNIVERSE).prop_map(|(a, b)| IndexSet::from(a.min(b)..a.max(b))),
    ]
}

/// An epoch to plan: ids on pages, an order, a batch size, a world size and a seed.
#[derive(Debug)]
struct Setup {
    indices: IndexSet,
    pages: PageMap,
    order: OrderOption,
    bs: usize,
    world: usize,
    seed: u64,
}

prop_compose! {
    fn setup()(
        indices in index_set(),
        pages in page_map(),
        order in order_option(),
        bs in 1usize..=64,
        world in 1usize..=4,
        seed in any::<u64>(),
    ) -> Setup {
        Setup { indices, pages, order, bs, world, seed }
    }
}

fn buffer_of(order: OrderOption, bs: usize) -> usize {
    match order {
        OrderOption::QuasiRandom { buffer_pages: Some(b) } => b.max(1),
        _ => 2 * bs,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Without drop_last the ranks' parts are the epoch order plus exactly the documented
    /// padding, every rank has the same length and number of batches, and every id is read.
    #[test]
    fn ranks_read_the_epoch_plus_the_documented_padding(s in setup(), epoch in 0u64..4) {
        let Setup { indices, pages, order, bs, world, seed } = s;
        let c = ctx(&indices, &pages, seed, epoch, bs);
        let parts = plans(&order, &c, world, false);
        let n = indices.len();
        let len = parts[0].len();
        for p in &parts {
            prop_assert_eq!(p.len(), len);
            prop_assert_eq!(p.num_batches(), parts[0].num_batches());
            prop_assert_eq!(p.num_batches(), len.div_ceil(bs));
            let sizes: Vec<usize> = p.batches().map(<[u64]>::len).collect();
            prop_assert!(sizes.iter().rev().skip(1).all(|&s| s == bs), "only the last batch is partial");
        }
        let mut all: Vec<u64> = parts.iter().flat_map(|p| p.samples().to_vec()).collect();
        all.sort_unstable();
        all.dedup();
        prop_assert_eq!(all, indices.as_slice(), "every id is read, and nothing else");

        let single = order.epoch_order(&c);
        prop_assert_eq!(sorted(single.clone()), indices.as_slice(), "the epoch order is a permutation");
        if world == 1 {
            prop_assert_eq!(parts[0].samples(), &single[..]);
        }
        let disjoint_pages = matches!(order, OrderOption::QuasiRandom { .. })
            && num_pages_of(&indices, &pages) >= world;
        if !disjoint_pages {
            // DistributedSampler: padded[p] = order[p % n], rank r holds positions r + k·world.
            prop_assert_eq!(len, n.div_ceil(world));
            for (r, p) in parts.iter().enumerate() {
                for (k, &id) in p.samples().iter().enumerate() {
                    prop_assert_eq!(id, single[(r + k * world) % n]);
                }
            }
        } else {
            // Each rank: its own pages' ids once each, then its own start again.
            let mut own_all = Vec::new();
            let mut seen_pages = Vec::new();
            let mut owns = Vec::new();
            for p in &parts {
                let touched = p.pages_touched(&pages);
                let own = indices.iter().filter(|&id| touched.binary_search(&pages.page(id).unwrap()).is_ok()).count();
                prop_assert!(own > 0 && own <= len);
                owns.push(own);
                let seq = p.samples();
                for i in own..len {
                    prop_assert_eq!(seq[i], seq[i % own], "padding repeats the rank's own sequence");
                }
                own_all.extend_from_slice(&seq[..own]);
                seen_pages.extend(touched);
                prop_assert!(max_open_pages(&seq[..own], &pages) <= buffer_of(order, bs));
            }
            let pages_total = seen_pages.len();
            seen_pages.sort_unstable();
            seen_pages.dedup();
            prop_assert_eq!(seen_pages.len(), pages_total, "no page is read by two ranks");
            prop_assert_eq!(sorted(own_all), indices.as_slice(), "each id once before padding");
            // Greedy by ids: ranks differ by at most the largest page; padding to the longest.
            let mut per_page: BTreeMap<u64, usize> = BTreeMap::new();
            for id in indices.iter() {
                *per_page.entry(pages.page(id).unwrap()).or_default() += 1;
            }
            let largest = per_page.values().copied().max().unwrap_or(0);
            let (shortest, longest) = (owns.iter().min().unwrap(), owns.iter().max().unwrap());
            prop_assert_eq!(*longest, len);
            prop_assert!(longest - shortest <= largest, "{:?}, largest page {}", owns, largest);
        }
    }

    /// drop_last keeps the full batches of the same sequence, on every rank alike.
    #[test]
    fn drop_last_keeps_only_full_batches(s in setup()) {
        let Setup { indices, pages, order, bs, world, seed } = s;
        let c = ctx(&indices, &pages, seed, 1, bs);
        let kept = plans(&order, &c, world, false);
        let dropped = plans(&order, &c, world, true);
        for (k, d) in kept.iter().zip(&dropped) {
            prop_assert_eq!(d.num_batches(), k.len() / bs);
            prop_assert!(d.batches().all(|b| b.len() == bs));
            prop_assert_eq!(d.samples(), &k.samples()[..d.len()]);
            prop_assert_eq!(d.num_batches(), dropped[0].num_batches());
        }
    }

    /// QUASI_RANDOM never has more than `buffer_pages` pages open, on one rank or many.
    #[test]
    fn quasi_random_keeps_at_most_buffer_pages_open(
        indices in index_set(),
        pages in page_map(),
        buffer in 1usize..10,
        world in 1usize..=4,
        seed in any::<u64>(),
    ) {
        let order = OrderOption::QuasiRandom { buffer_pages: Some(buffer) };
        let c = ctx(&indices, &pages, seed, 0, 8);
        prop_assert!(max_open_pages(&order.epoch_order(&c), &pages) <= buffer);
        if num_pages_of(&indices, &pages) >= world {
            for p in plans(&order, &c, world, false) {
                let t = p.pages_touched(&pages);
                let own = indices.iter().filter(|&id| t.binary_search(&pages.page(id).unwrap()).is_ok()).count();
                prop_assert!(max_open_pages(&p.samples()[..own], &pages) <= buffer);
            }
        }
    }

    /// Orders are functions of (seed, epoch): equal for equal inputs; SEQUENTIAL never moves;
    /// RANDOM and QUASI_RANDOM move between epochs.
    #[test]
    fn orders_are_fixed_by_seed_and_epoch(
        indices in index_set(),
        pages in page_map(),
        order in order_option(),
        seed in any::<u64>(),
        epoch in 0u64..1000,
        world in 1usize..=4,
    ) {
        let c = ctx(&indices, &pages, seed, epoch, 16);
        let next = ctx(&indices, &pages, seed, epoch + 1, 16);
        prop_assert_eq!(plans(&order, &c, world, false), plans(&order, &c, world, false));
        let (a, b) = (order.epoch_order(&c), order.epoch_order(&next));
        if order == OrderOption::Sequential {
            prop_assert_eq!(a, b);
        } else if indices.len() >= 10 {
            prop_assert_ne!(a, b);
        }
    }

    /// Resuming after any number of batches gives back exactly the rest of the epoch.
    #[test]
    fn resume_gives_the_rest_of_the_plan(s in setup(), drop_last in any::<bool>(), cut in 0.0f64..=1.0) {
        let Setup { indices, pages, order, bs, world, seed } = s;
        let rank = world - 1;
        let c = ctx(&indices, &pages, seed, 3, bs);
        let plan = plan_epoch(&order, &c, rank, world, drop_last).unwrap();
        let consumed = (plan.num_batches() as f64 * cut).floor() as usize;
        let mut state = LoaderState::new(&order, &c, rank, world, drop_last);
        state.batches_consumed = consumed as u64;
        let saved = LoaderState::from_json(&state.to_json()).unwrap();
        prop_assert_eq!(&saved, &state);
        // The resuming process rebuilds its own state and plan, checks, and skips.
        let current = LoaderState::new(&order, &c, rank, world, drop_last);
        saved.validate_against(&current).unwrap();
        let replanned = plan_epoch(&order, &c, rank, world, drop_last).unwrap();
        let mut batches: Vec<&[u64]> = plan.batches().take(consumed).collect();
        batches.extend(saved.remaining_batches(&replanned).unwrap());
        prop_assert_eq!(batches, plan.batches().collect::<Vec<_>>());
    }
}

fn all_orders() -> [OrderOption; 4] {
    [
        OrderOption::Sequential,
        OrderOption::Random,
        OrderOption::QuasiRandom { buffer_pages: None },
        OrderOption::QuasiRandom { buffer_pages: Some(1) },
    ]
}

#[test]
fn ffcv_partial_batches() {
    // FFCV's Loader.__len__: len // bs with drop_last, ceil(len / bs) without.
    let indices = IndexSet::all(600);
    let pages = PageMap::from_pages((0..600).map(|i| i / 16).collect());
    for order in all_orders() {
        for (bs, with_drop, without) in [(7, 85, 86), (60, 10, 10)] {
            let c = ctx(&indices, &pages, 5, 0, bs);
            let dropped = plan_epoch(&order, &c, 0, 1, true).unwrap();
            let kept = plan_epoch(&order, &c, 0, 1, false).unwrap();
            assert_eq!(
                (dropped.num_batches(), kept.num_batches()),
                (with_drop, without),
                "{order:?} bs {bs}"
            );
            assert_eq!((dropped.len(), kept.len()), (with_drop * bs, 600));
            assert_eq!(kept.batch(kept.num_batches() - 1).len(), 600 - (without - 1) * bs);
        }
    }
}

#[test]
fn empty_index_set_plans_zero_batches() {
    let indices = IndexSet::empty();
    let pages = PageMap::from_pages(vec![0; 10]);
    for order in all_orders() {
        for world in 1..=4 {
            for rank in 0..world {
                for drop_last in [false, true] {
                    let plan =
                        plan_epoch(&order, &ctx(&indices, &pages, 0, 0, 8), rank, world, drop_last).unwrap();
                    assert!(plan.is_empty());
                    assert_eq!(plan.num_batches(), 0);
                    assert_eq!(plan.batches().count(), 0);
                }
            }
        }
    }
    // And with an empty dataset.
    let none = PageMap::from_pages(vec![]);
    assert_eq!(
        plan_epoch(&OrderOption::Random, &ctx(&indices, &none, 0, 0, 8), 0, 2, true).unwrap().len(),
        0
    );
}

#[test]
fn fewer_ids_than_ranks_repeat_them() {
    let indices: IndexSet = [3, 9].into_iter().collect();
    let pages = PageMap::from_pages((0..10).collect());
    for order in all_orders() {
        let parts = plans(&order, &ctx(&indices, &pages, 1, 0, 4), 3, false);
        assert!(parts.iter().all(|p| p.len() == 1), "{order:?}");
        let all: Vec<u64> = parts.iter().map(|p| p.samples()[0]).collect();
        assert!(all.contains(&3) && all.contains(&9), "{order:?}: {all:?}");
    }
}

#[test]
fn rejects_bad_arguments() {
    let indices = IndexSet::all(10);
    let pages = PageMap::from_pages(vec![0; 10]);
    let order = OrderOption::Random;
    let what = |r: Result<EpochPlan, Error>| match r {
        Err(Error::InvalidArgument { what, .. }) => what,
        other => panic!("{other:?}"),
    };
    assert_eq!(what(plan_epoch(&order, &ctx(&indices, &pages, 0, 0, 0), 0, 1, false)), "batch_size");
    assert_eq!(what(plan_epoch(&order, &ctx(&indices, &pages, 0, 0, 4), 0, 0, false)), "world_size");
    assert_eq!(what(plan_epoch(&order, &ctx(&indices, &pages, 0, 0, 4), 2, 2, false)), "rank");
    let short = PageMap::from_pages(vec![0; 9]);
    let err = plan_epoch(&order, &ctx(&indices, &short, 0, 0, 4), 0, 1, false).unwrap_err();
    assert!(err.to_string().contains("id 9 is past the page map of 9 samples"), "{err}");
}

#[test]
fn resuming_with_other_indices_or_world_size_is_refused() {
    let pages = PageMap::from_pages((0..1000).map(|i| i / 10).collect());
    let order = OrderOption::QuasiRandom { buffer_pages: None };
    let a = IndexSet::from(0..500);
    let b: IndexSet = (0..501).filter(|&i| i != 7).collect(); // same length, other ids
    let saved = LoaderState::new(&order, &ctx(&a, &pages, 1, 0, 32), 0, 2, true);
    let cases = [
        (LoaderState::new(&order, &ctx(&b, &pages, 1, 0, 32), 0, 2, true), "indices_fingerprint"),
        (LoaderState::new(&order, &ctx(&a, &pages, 1, 0, 32), 0, 4, true), "world_size"),
        (LoaderState::new(&OrderOption::Random, &ctx(&a, &pages, 1, 0, 32), 0, 2, true), "order"),
        (LoaderState::new(&order, &ctx(&a, &pages, 1, 0, 64), 0, 2, true), "batch_size"),
    ];
    for (current, field) in cases {
        let err = saved.validate_against(&current).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::StateMismatch { field: f, .. } if f == field), "{msg}");
        assert!(msg.contains(field), "{msg}");
    }
}

/// A custom order: the ids descending. Distributed by the default `rank_order`.
struct Descending;

impl Order for Descending {
    fn name(&self) -> String {
        "descending".into()
    }

    fn epoch_order(&self, ctx: &EpochContext<'_>) -> Vec<u64> {
        ctx.indices.iter().rev().collect()
    }
}

#[test]
fn custom_orders_split_like_distributed_sampler() {
    let indices = IndexSet::from(0..10);
    let pages = PageMap::from_pages(vec![0; 10]);
    let parts = plans(&Descending, &ctx(&indices, &pages, 0, 0, 2), 4, false);
    let got: Vec<&[u64]> = parts.iter().map(EpochPlan::samples).collect();
    assert_eq!(got, [&[9, 5, 1][..], &[8, 4, 0], &[7, 3, 9], &[6, 2, 8]]);
    let state = LoaderState::new(&Descending, &ctx(&indices, &pages, 0, 0, 2), 0, 4, false);
    assert_eq!(state.order, "descending");
}

/// `cargo test --release -p beton-loader --test order -- --ignored --nocapture`: the time to plan
/// an epoch of 10M ids (reported, not asserted).
#[test]
#[ignore]
fn time_quasi_random_plan_of_ten_million() {
    const N: u64 = 10_000_000;
    let t = Instant::now();
    let indices = IndexSet::all(N);
    // ~100 KiB samples on 8 MiB pages: 80 samples a page.
    let pages = PageMap::from_pages((0..N).map(|i| i / 80).collect());
    println!("setup: {:?}", t.elapsed());
    for (order, world) in [
        (OrderOption::QuasiRandom { buffer_pages: None }, 1),
        (OrderOption::QuasiRandom { buffer_pages: None }, 8),
        (OrderOption::Random, 1),
        (OrderOption::Sequential, 1),
    ] {
        let t = Instant::now();
        let plan = plan_epoch(&order, &ctx(&indices, &pages, 1, 0, 256), 0, world, true).unwrap();
        println!("{} world {world}: {} batches in {:?}", order.name(), plan.num_batches(), t.elapsed());
    }
    // Samples scattered over pages (the comparison-sort grouping would not trigger; this is the
    // counting sort over a random page map).
    let scattered = PageMap::from_pages(
        (0..N).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % 125_000).collect(),
    );
    let t = Instant::now();
    let order = OrderOption::QuasiRandom { buffer_pages: None };
    let plan = plan_epoch(&order, &ctx(&indices, &scattered, 1, 0, 256), 0, 1, true).unwrap();
    println!("QUASI_RANDOM scattered pages: {} batches in {:?}", plan.num_batches(), t.elapsed());
}
