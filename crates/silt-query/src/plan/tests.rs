//! The planner's rules over index specs alone (no storage).

use bson::{doc, Bson, Document};

use super::*;
use crate::matcher::Matcher;

/// An index spec the tests own: key pattern, name and flags.
struct Spec {
    name: String,
    key: Document,
    fields: Vec<(String, bool)>,
    unique: bool,
    sparse: bool,
    partial: Option<Document>,
    multikey: bool,
}

fn spec(name: &str, key: Document) -> Spec {
    Spec {
        name: name.into(),
        fields: parse_key_pattern(&key).unwrap(),
        key,
        unique: false,
        sparse: false,
        partial: None,
        multikey: false,
    }
}

fn infos(specs: &[Spec]) -> Vec<IndexInfo<'_>> {
    specs
        .iter()
        .map(|s| IndexInfo {
            name: &s.name,
            key_pattern: &s.key,
            fields: &s.fields,
            unique: s.unique,
            sparse: s.sparse,
            partial: s.partial.as_ref(),
            clustering: false,
            multikey: s.multikey,
            coverable: true,
            collation: None,
        })
        .collect()
}

fn plan(specs: &[Spec], filter: Document, sort: Option<Document>, hint: Option<Bson>) -> Choice {
    let m = Matcher::new(&filter).unwrap();
    let sort = sort.map(|s| SortSpec::parse(&s).unwrap());
    choose(
        &infos(specs),
        &filter,
        &m,
        sort.as_ref(),
        hint.as_ref(),
        None,
    )
    .unwrap()
}

/// The name of the index a single-scan plan reads.
fn index_of(specs: &[Spec], c: &Choice) -> Option<String> {
    match &c.plan {
        Plan::Index(scans) if scans.len() == 1 => Some(specs[scans[0].index].name.clone()),
        _ => None,
    }
}

#[test]
fn id_equality_is_idhack_and_id_ranges_read_the_primary_tree() {
    let specs = [spec("a_1", doc! {"a": 1})];
    let c = plan(&specs, doc! {"_id": 5, "a": 1}, None, None);
    assert!(matches!(c.plan, Plan::Primary(Access::Points(ref p)) if p == &[Bson::Int32(5)]));
    let c = plan(&specs, doc! {"_id": {"$in": [3, 1, 3]}}, None, None);
    assert!(
        matches!(c.plan, Plan::Primary(Access::Points(ref p)) if p == &[Bson::Int32(1), Bson::Int32(3)])
    );
    // An _id range beats an index without an equality field, not one with.
    let c = plan(
        &specs,
        doc! {"_id": {"$gt": 1}, "a": {"$gt": 2}},
        None,
        None,
    );
    assert!(matches!(c.plan, Plan::Primary(Access::IdRange(..))));
    let c = plan(&specs, doc! {"_id": {"$gt": 1}, "a": 2}, None, None);
    assert_eq!(index_of(&specs, &c).as_deref(), Some("a_1"));
    let c = plan(&specs, doc! {"b": 1}, None, None);
    assert!(matches!(c.plan, Plan::Primary(Access::FullScan)));
}

#[test]
fn the_most_equality_fields_win_then_unique() {
    let mut u = spec("b_1", doc! {"b": 1});
    u.unique = true;
    let specs = [
        spec("a_1", doc! {"a": 1}),
        spec("a_1_b_1", doc! {"a": 1, "b": 1}),
        u,
    ];
    let c = plan(&specs, doc! {"a": 1, "b": 2}, None, None);
    assert_eq!(index_of(&specs, &c).as_deref(), Some("a_1_b_1"));
    let c = plan(&specs, doc! {"b": 2}, None, None);
    assert_eq!(index_of(&specs, &c).as_deref(), Some("b_1"));
    let Plan::Index(scans) = &c.plan else {
        unreachable!()
    };
    assert_eq!(scans[0].points, vec![vec![Bson::Int32(2)]]);
}

#[test]
fn hints_name_an_index_or_fail_with_bad_value() {
    let specs = [spec("a_1", doc! {"a": 1}), spec("b_-1", doc! {"b": -1})];
    let c = plan(
        &specs,
        doc! {"a": 1},
        None,
        Some(Bson::String("b_-1".into())),
    );
    assert_eq!(index_of(&specs, &c).as_deref(), Some("b_-1"));
    let c = plan(
        &specs,
        doc! {"a": 1},
        None,
        Some(Bson::Document(doc! {"b": -1})),
    );
    assert_eq!(index_of(&specs, &c).as_deref(), Some("b_-1"));
    let c = plan(
        &specs,
        doc! {"a": 1},
        None,
        Some(Bson::Document(doc! {"$natural": 1})),
    );
    assert!(matches!(c.plan, Plan::Primary(Access::FullScan)));
    let m = Matcher::new(&doc! {}).unwrap();
    let e = choose(
        &infos(&specs),
        &doc! {},
        &m,
        None,
        Some(&Bson::String("nope".into())),
        None,
    )
    .unwrap_err();
    assert_eq!(e.code, 2);
}

#[test]
fn sparse_and_partial_indexes_only_when_they_hold_every_match() {
    let mut sp = spec("s_1", doc! {"s": 1});
    sp.sparse = true;
    let mut pa = spec("p_1", doc! {"p": 1});
    pa.partial = Some(doc! {"x": {"$gt": 5}});
    let specs = [sp, pa];
    // Sorting by a sparse index's field with no bound on it: not the sparse index.
    let c = plan(&specs, doc! {}, Some(doc! {"s": 1}), None);
    assert!(matches!(c.plan, Plan::Primary(Access::FullScan)));
    let c = plan(&specs, doc! {"s": 1}, None, None);
    assert_eq!(index_of(&specs, &c).as_deref(), Some("s_1"));
    let c = plan(&specs, doc! {"p": 1}, None, None);
    assert!(matches!(c.plan, Plan::Primary(Access::FullScan)));
    let c = plan(&specs, doc! {"p": 1, "x": {"$gt": 5}}, None, None);
    assert_eq!(index_of(&specs, &c).as_deref(), Some("p_1"));
}

#[test]
fn a_top_level_or_with_an_index_per_branch_is_a_union() {
    let specs = [spec("a_1", doc! {"a": 1}), spec("b_1", doc! {"b": 1})];
    let c = plan(&specs, doc! {"$or": [{"a": 1}, {"b": 2}]}, None, None);
    let Plan::Index(scans) = &c.plan else {
        panic!("{c:?}")
    };
    assert_eq!(scans.len(), 2);
    let c = plan(&specs, doc! {"$or": [{"a": 1}, {"c": 2}]}, None, None);
    assert!(matches!(c.plan, Plan::Primary(Access::FullScan)));
}

#[test]
fn sorts_are_served_forwards_or_backwards_after_single_points() {
    let specs = [spec("a_1_b_-1", doc! {"a": 1, "b": -1})];
    let c = plan(&specs, doc! {"a": 1}, Some(doc! {"b": 1}), None);
    assert!(c.sorted);
    let Plan::Index(scans) = &c.plan else {
        unreachable!()
    };
    assert!(scans[0].reverse);
    // Two points for `a`: the index order is not `b` order.
    let c = plan(
        &specs,
        doc! {"a": {"$in": [1, 2]}},
        Some(doc! {"b": 1}),
        None,
    );
    assert!(!c.sorted);
    // No bound at all: scanned whole for the sort.
    let c = plan(&specs, doc! {}, Some(doc! {"a": -1, "b": 1}), None);
    assert!(c.sorted);
    // Not on a multikey index.
    let mut mk = spec("a_1", doc! {"a": 1});
    mk.multikey = true;
    let specs = [mk];
    let c = plan(&specs, doc! {"a": {"$gt": 1}}, Some(doc! {"a": 1}), None);
    assert!(!c.sorted);
}

#[test]
fn ranges_stay_in_their_type_bracket_and_print_like_mongodb() {
    let specs = [spec("a_1", doc! {"a": 1})];
    let c = plan(&specs, doc! {"a": {"$gt": 5, "$lt": "z"}}, None, None);
    let Plan::Index(scans) = &c.plan else {
        unreachable!()
    };
    let ix = infos(&specs);
    assert_eq!(
        scans[0].bounds_doc(&ix[0]),
        doc! {"a": ["(5, inf.0]"]},
        "the string bound is another bracket: left to the matcher"
    );
    // On a multikey index only one operator per field is used.
    let mut mk = spec("a_1", doc! {"a": 1});
    mk.multikey = true;
    let specs = [mk];
    let c = plan(&specs, doc! {"a": {"$gt": 5, "$lt": 10}}, None, None);
    let Plan::Index(scans) = &c.plan else {
        unreachable!()
    };
    assert_eq!(
        scans[0].range,
        Some(Interval {
            lo: ValueBound::Excl(Bson::Int32(5)),
            hi: ValueBound::Type(silt_bson::compare::type_rank(&Bson::Int32(0))),
        })
    );
}

#[test]
fn in_products_stop_at_max_ranges() {
    let specs = [spec("a_1_b_1", doc! {"a": 1, "b": 1})];
    let many: Vec<i32> = (0..100).collect();
    let c = plan(
        &specs,
        doc! {"a": {"$in": many.clone()}, "b": {"$in": many}},
        None,
        None,
    );
    let Plan::Index(scans) = &c.plan else {
        unreachable!()
    };
    assert_eq!(scans[0].n_eq(), 1, "100 x 100 > {MAX_RANGES}");
}

#[test]
fn covered_and_exact_choices() {
    let specs = [spec("a_1_b_1", doc! {"a": 1, "b": 1})];
    let ix = infos(&specs);
    let m = Matcher::new(&doc! {"a": 1}).unwrap();
    let needs = needed_paths(&m, None, Some(vec!["b".into()])).unwrap();
    assert!(covers(&ix[0], &needs));
    assert!(!covers(&ix[0], &["c".to_string()]));
    let c = choose(&ix, &doc! {"a": 1}, &m, None, None, Some(&needs)).unwrap();
    assert!(c.covered.is_some_and(|c| c.exact));
    let m = Matcher::new(&doc! {"a": 1, "b": {"$type": "int"}}).unwrap();
    let needs = needed_paths(&m, None, Some(vec![])).unwrap();
    let c = choose(&ix, &doc! {"a": 1}, &m, None, None, Some(&needs)).unwrap();
    assert!(c.covered.is_some_and(|c| !c.exact));
    assert!(exact_scan(&ix, &m).is_none());
    let m = Matcher::new(&doc! {"a": 1, "b": {"$gte": 2}}).unwrap();
    assert!(exact_scan(&ix, &m).is_some());
}
