use std::collections::HashMap;

use bson::{bson, doc, Bson, Document};
use silt_bson::compare::values_equal;

use super::*;

fn stages(p: Bson) -> Vec<Document> {
    match p {
        Bson::Array(a) => a
            .into_iter()
            .map(|s| match s {
                Bson::Document(d) => d,
                other => panic!("stage {other}"),
            })
            .collect(),
        other => panic!("pipeline {other}"),
    }
}

fn run_with(p: Bson, input: Vec<Document>, ctx: &dyn AggContext) -> QResult<Vec<Document>> {
    let pipeline = parse_pipeline(&stages(p))?;
    pipeline.run(Box::new(input.into_iter().map(Ok)), ctx)
}

fn run(p: Bson, input: Vec<Document>) -> QResult<Vec<Document>> {
    run_with(p, input, &NoCollections)
}

#[track_caller]
fn ok(p: Bson, input: Vec<Document>) -> Vec<Document> {
    run(p.clone(), input).unwrap_or_else(|e| panic!("{p}: {e}"))
}

#[track_caller]
fn err_code(p: Bson, input: Vec<Document>) -> i32 {
    match run(p.clone(), input) {
        Ok(out) => panic!("{p}: expected an error, got {out:?}"),
        Err(e) => e.code,
    }
}

fn docs(v: Bson) -> Vec<Document> {
    stages(v)
}

fn date(s: &str) -> Bson {
    Bson::DateTime(bson::DateTime::parse_rfc3339_str(s).unwrap())
}

/// MongoDB's `$group` documentation collection (prices as doubles).
fn sales() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "item": "abc", "price": 10.0, "quantity": 2, "date": date("2014-03-01T08:00:00Z")},
        doc! {"_id": 2, "item": "jkl", "price": 20.0, "quantity": 1, "date": date("2014-03-01T09:00:00Z")},
        doc! {"_id": 3, "item": "xyz", "price": 5.0, "quantity": 10, "date": date("2014-03-15T09:00:00Z")},
        doc! {"_id": 4, "item": "xyz", "price": 5.0, "quantity": 20, "date": date("2014-04-04T11:21:39.736Z")},
        doc! {"_id": 5, "item": "abc", "price": 10.0, "quantity": 10, "date": date("2014-04-04T21:23:13.331Z")},
        doc! {"_id": 6, "item": "def", "price": 7.5, "quantity": 5, "date": date("2015-06-04T05:08:13Z")},
        doc! {"_id": 7, "item": "def", "price": 7.5, "quantity": 10, "date": date("2015-09-10T08:43:00Z")},
        doc! {"_id": 8, "item": "abc", "price": 10.0, "quantity": 5, "date": date("2016-02-06T20:20:13Z")},
    ]
}

#[test]
fn group_docs_examples() {
    assert_eq!(
        ok(
            bson!([{"$group": {"_id": null, "count": {"$count": {}}}}]),
            sales()
        ),
        vec![doc! {"_id": null, "count": 8}]
    );
    assert_eq!(
        ok(bson!([{"$group": {"_id": "$item"}}]), sales()),
        docs(bson!([{"_id": "abc"}, {"_id": "jkl"}, {"_id": "xyz"}, {"_id": "def"}]))
    );
    assert_eq!(
        ok(
            bson!([
                {"$group": {"_id": "$item", "totalSaleAmount": {"$sum": {"$multiply": ["$price", "$quantity"]}}}},
                {"$match": {"totalSaleAmount": {"$gte": 100}}},
            ]),
            sales()
        ),
        docs(bson!([
            {"_id": "abc", "totalSaleAmount": 170.0},
            {"_id": "xyz", "totalSaleAmount": 150.0},
            {"_id": "def", "totalSaleAmount": 112.5},
        ]))
    );
    assert_eq!(
        ok(
            bson!([
                {"$match": {"date": {"$gte": date("2014-01-01T00:00:00Z"), "$lt": date("2015-01-01T00:00:00Z")}}},
                {"$group": {
                    "_id": {"$dateToString": {"format": "%Y-%m-%d", "date": "$date"}},
                    "totalSaleAmount": {"$sum": {"$multiply": ["$price", "$quantity"]}},
                    "averageQuantity": {"$avg": "$quantity"},
                    "count": {"$sum": 1},
                }},
                {"$sort": {"totalSaleAmount": -1}},
            ]),
            sales()
        ),
        docs(bson!([
            {"_id": "2014-04-04", "totalSaleAmount": 200.0, "averageQuantity": 15.0, "count": 2},
            {"_id": "2014-03-15", "totalSaleAmount": 50.0, "averageQuantity": 10.0, "count": 1},
            {"_id": "2014-03-01", "totalSaleAmount": 40.0, "averageQuantity": 1.5, "count": 2},
        ]))
    );
    assert_eq!(
        ok(
            bson!([{"$group": {
                "_id": null,
                "totalSaleAmount": {"$sum": {"$multiply": ["$price", "$quantity"]}},
                "averageQuantity": {"$avg": "$quantity"},
                "count": {"$sum": 1},
            }}]),
            sales()
        ),
        vec![doc! {"_id": null, "totalSaleAmount": 452.5, "averageQuantity": 7.875, "count": 8}]
    );
}

#[test]
fn group_pivot_docs_examples() {
    let books = docs(bson!([
        {"_id": 8751, "title": "The Banquet", "author": "Dante", "copies": 2},
        {"_id": 8752, "title": "Divine Comedy", "author": "Dante", "copies": 1},
        {"_id": 8645, "title": "Eclogues", "author": "Dante", "copies": 2},
        {"_id": 7000, "title": "The Odyssey", "author": "Homer", "copies": 10},
        {"_id": 7020, "title": "Iliad", "author": "Homer", "copies": 10},
    ]));
    assert_eq!(
        ok(
            bson!([{"$group": {"_id": "$author", "books": {"$push": "$title"}}}]),
            books.clone()
        ),
        docs(bson!([
            {"_id": "Dante", "books": ["The Banquet", "Divine Comedy", "Eclogues"]},
            {"_id": "Homer", "books": ["The Odyssey", "Iliad"]},
        ]))
    );
    let out = ok(
        bson!([
            {"$group": {"_id": "$author", "books": {"$push": "$$ROOT"}}},
            {"$addFields": {"totalCopies": {"$sum": "$books.copies"}}},
        ]),
        books,
    );
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].get("totalCopies"), Some(&bson!(5)));
    assert_eq!(out[1].get("totalCopies"), Some(&bson!(20)));
    assert_eq!(
        out[1].get_array("books").unwrap()[1],
        bson!({"_id": 7020, "title": "Iliad", "author": "Homer", "copies": 10})
    );
}

#[test]
fn group_keys_and_accumulators() {
    let input = docs(bson!([
        {"k": 1, "v": 3, "s": "b", "o": {"x": 1}},
        {"k": 1.0, "v": null, "s": "a", "o": {"y": 2}},
        {"k": 1_i64, "v": 7, "s": "c"},
        {"v": 1, "s": "a"},
        {"k": null, "v": 2, "s": "a"},
        {"k": {"a": 1, "b": 2}, "v": 5},
        {"k": {"b": 2, "a": 1}, "v": 6},
    ]));
    let out = ok(
        bson!([{"$group": {
            "_id": "$k",
            "sum": {"$sum": "$v"},
            "avg": {"$avg": "$v"},
            "min": {"$min": "$v"},
            "max": {"$max": "$v"},
            "first": {"$first": "$v"},
            "last": {"$last": "$s"},
            "push": {"$push": "$s"},
            "set": {"$addToSet": "$s"},
            "n": {"$count": {}},
            "merged": {"$mergeObjects": "$o"},
        }}]),
        input,
    );
    // 1, 1.0 and NumberLong(1) form one group keyed by the first value; missing and null too.
    assert_eq!(out.len(), 4);
    assert_eq!(
        out[0],
        doc! {
            "_id": 1, "sum": 10, "avg": 5.0, "min": 3, "max": 7, "first": 3, "last": "c",
            "push": ["b", "a", "c"], "set": ["b", "a", "c"], "n": 3, "merged": {"x": 1, "y": 2},
        }
    );
    assert_eq!(out[1].get("_id"), Some(&Bson::Null));
    assert_eq!(out[1].get("push"), Some(&bson!(["a", "a"])));
    assert_eq!(out[1].get("set"), Some(&bson!(["a"])));
    assert_eq!(out[1].get("sum"), Some(&bson!(3)));
    // Field order matters for documents as group keys.
    assert_eq!(out[2].get("_id"), Some(&bson!({"a": 1, "b": 2})));
    assert_eq!(out[3].get("_id"), Some(&bson!({"b": 2, "a": 1})));
    // Missing pushes nothing; $first keeps null; $min/$max ignore null.
    let out = ok(
        bson!([{"$group": {"_id": null, "p": {"$push": "$x"}, "f": {"$first": "$x"}, "m": {"$min": "$x"}, "a": {"$avg": "$x"}}}]),
        docs(bson!([{"a": 1}, {"x": 2}])),
    );
    assert_eq!(
        out,
        vec![doc! {"_id": null, "p": [2], "f": null, "m": 2, "a": 2.0}]
    );
    // _id as an object expression; missing fields are left out of it.
    let out = ok(
        bson!([{"$group": {"_id": {"a": "$a", "b": "$b"}, "n": {"$sum": 1}}}]),
        docs(bson!([{"a": 1, "b": 2}, {"a": 1}, {"a": 1, "b": 2}])),
    );
    assert_eq!(
        out,
        docs(bson!([{"_id": {"a": 1, "b": 2}, "n": 2}, {"_id": {"a": 1}, "n": 1}]))
    );
    let out = ok(
        bson!([{"$group": {"_id": null, "sp": {"$stdDevPop": "$v"}, "ss": {"$stdDevSamp": "$v"}}}]),
        docs(bson!([{"v": 1}, {"v": 2}, {"v": 3}, {"v": 4}])),
    );
    assert_eq!(out[0].get_f64("sp").unwrap(), 1.118_033_988_749_895);
    assert!((out[0].get_f64("ss").unwrap() - 1.290_994_448_735_805_6).abs() < 1e-12);
    // Empty input, no groups.
    assert!(ok(bson!([{"$group": {"_id": null, "n": {"$sum": 1}}}]), vec![]).is_empty());
    // Decimals accumulate as decimals.
    let d = |s: &str| Bson::Decimal128(s.parse().unwrap());
    let out = ok(
        bson!([{"$group": {"_id": null, "t": {"$sum": "$p"}}}]),
        vec![doc! {"p": d("1.5")}, doc! {"p": d("2")}],
    );
    assert!(values_equal(out[0].get("t").unwrap(), &bson!(3.5)));
    assert!(matches!(out[0].get("t"), Some(Bson::Decimal128(_))));
}

#[test]
fn group_errors() {
    assert_eq!(
        err_code(bson!([{"$group": {"n": {"$sum": 1}}}]), vec![]),
        15955
    );
    assert_eq!(err_code(bson!([{"$group": 1}]), vec![]), 15947);
    assert_eq!(
        err_code(bson!([{"$group": {"_id": null, "n": 1}}]), vec![]),
        40234
    );
    assert_eq!(
        err_code(
            bson!([{"$group": {"_id": null, "a.b": {"$sum": 1}}}]),
            vec![]
        ),
        40235
    );
    assert_eq!(
        err_code(bson!([{"$group": {"_id": null, "n": {"$foo": 1}}}]), vec![]),
        15952
    );
    assert_eq!(
        err_code(
            bson!([{"$group": {"_id": null, "n": {"$sum": 1, "$avg": 1}}}]),
            vec![]
        ),
        40238
    );
    assert_eq!(
        err_code(
            bson!([{"$group": {"_id": null, "n": {"$sum": [1, 2]}}}]),
            vec![]
        ),
        40237
    );
    assert_eq!(
        err_code(
            bson!([{"$group": {"_id": null, "n": {"$count": 1}}}]),
            vec![]
        ),
        14
    );
    assert_eq!(
        err_code(
            bson!([{"$group": {"_id": null, "n": {"$accumulator": {}}}}]),
            vec![]
        ),
        238
    );
    assert_eq!(
        err_code(
            bson!([{"$group": {"_id": null, "n": {"$topN": {}}}}]),
            vec![]
        ),
        5787907
    );
    let e = run(bson!([{"$group": {"n": {"$sum": 1}}}]), vec![]).unwrap_err();
    assert_eq!(e.msg, "a group specification must include an _id");
}

fn inventory() -> Vec<Document> {
    docs(bson!([
        {"_id": 1, "item": "ABC", "price": 80, "sizes": ["S", "M", "L"]},
        {"_id": 2, "item": "EFG", "price": 120, "sizes": []},
        {"_id": 3, "item": "IJK", "price": 160, "sizes": "M"},
        {"_id": 4, "item": "LMN", "price": 10},
        {"_id": 5, "item": "XYZ", "price": 5.75, "sizes": null},
    ]))
}

#[test]
fn unwind_docs_examples() {
    assert_eq!(
        ok(
            bson!([{"$unwind": "$sizes"}]),
            docs(bson!([{"_id": 1, "item": "ABC1", "sizes": ["S", "M", "L"]}]))
        ),
        docs(bson!([
            {"_id": 1, "item": "ABC1", "sizes": "S"},
            {"_id": 1, "item": "ABC1", "sizes": "M"},
            {"_id": 1, "item": "ABC1", "sizes": "L"},
        ]))
    );
    assert_eq!(
        ok(
            bson!([{"$unwind": {"path": "$sizes", "includeArrayIndex": "arrayIndex"}}]),
            inventory()
        ),
        docs(bson!([
            {"_id": 1, "item": "ABC", "price": 80, "sizes": "S", "arrayIndex": 0_i64},
            {"_id": 1, "item": "ABC", "price": 80, "sizes": "M", "arrayIndex": 1_i64},
            {"_id": 1, "item": "ABC", "price": 80, "sizes": "L", "arrayIndex": 2_i64},
            {"_id": 3, "item": "IJK", "price": 160, "sizes": "M", "arrayIndex": null},
        ]))
    );
    assert_eq!(
        ok(
            bson!([{"$unwind": {"path": "$sizes", "preserveNullAndEmptyArrays": true}}]),
            inventory()
        ),
        docs(bson!([
            {"_id": 1, "item": "ABC", "price": 80, "sizes": "S"},
            {"_id": 1, "item": "ABC", "price": 80, "sizes": "M"},
            {"_id": 1, "item": "ABC", "price": 80, "sizes": "L"},
            {"_id": 2, "item": "EFG", "price": 120},
            {"_id": 3, "item": "IJK", "price": 160, "sizes": "M"},
            {"_id": 4, "item": "LMN", "price": 10},
            {"_id": 5, "item": "XYZ", "price": 5.75, "sizes": null},
        ]))
    );
    // Group by unwound values.
    assert_eq!(
        ok(
            bson!([
                {"$unwind": {"path": "$sizes", "preserveNullAndEmptyArrays": true}},
                {"$group": {"_id": "$sizes", "averagePrice": {"$avg": "$price"}}},
                // Ties are in no particular order in MongoDB; break them here.
                {"$sort": {"averagePrice": -1, "_id": 1}},
            ]),
            inventory()
        ),
        docs(bson!([
            {"_id": "M", "averagePrice": 120.0},
            {"_id": "L", "averagePrice": 80.0},
            {"_id": "S", "averagePrice": 80.0},
            {"_id": null, "averagePrice": 45.25},
        ]))
    );
}

#[test]
fn unwind_nested_and_errors() {
    let out = ok(
        bson!([{"$unwind": {"path": "$a.b", "includeArrayIndex": "i.j"}}]),
        docs(bson!([{"a": {"b": [1, 2], "c": 0}, "z": 1}])),
    );
    assert_eq!(
        out,
        docs(bson!([
            {"a": {"b": 1, "c": 0}, "z": 1, "i": {"j": 0_i64}},
            {"a": {"b": 2, "c": 0}, "z": 1, "i": {"j": 1_i64}},
        ]))
    );
    // No implicit traversal of arrays on the way.
    assert!(ok(
        bson!([{"$unwind": "$a.b"}]),
        docs(bson!([{"a": [{"b": [1]}]}]))
    )
    .is_empty());
    assert_eq!(err_code(bson!([{"$unwind": "sizes"}]), vec![]), 28818);
    assert_eq!(err_code(bson!([{"$unwind": 1}]), vec![]), 15981);
    assert_eq!(
        err_code(bson!([{"$unwind": {"includeArrayIndex": "i"}}]), vec![]),
        28812
    );
    assert_eq!(
        err_code(bson!([{"$unwind": {"path": "$a", "x": 1}}]), vec![]),
        28811
    );
    assert_eq!(
        err_code(
            bson!([{"$unwind": {"path": "$a", "preserveNullAndEmptyArrays": 1}}]),
            vec![]
        ),
        28809
    );
    assert_eq!(
        err_code(
            bson!([{"$unwind": {"path": "$a", "includeArrayIndex": "$i"}}]),
            vec![]
        ),
        28822
    );
}

fn collections(named: Vec<(&str, Bson)>) -> HashMap<String, Vec<Document>> {
    named
        .into_iter()
        .map(|(n, v)| (n.to_string(), docs(v)))
        .collect()
}

#[test]
fn lookup_docs_examples() {
    let ctx = collections(vec![(
        "inventory",
        bson!([
            {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120},
            {"_id": 2, "sku": "bread", "description": "product 2", "instock": 80},
            {"_id": 3, "sku": "cashews", "description": "product 3", "instock": 60},
            {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70},
            {"_id": 5, "sku": null, "description": "Incomplete"},
            {"_id": 6},
        ]),
    )]);
    let orders = docs(bson!([
        {"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
        {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
        {"_id": 3},
    ]));
    let out = run_with(
        bson!([{"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inventory_docs"}}]),
        orders,
        &ctx,
    )
    .unwrap();
    assert_eq!(
        out,
        docs(bson!([
            {"_id": 1, "item": "almonds", "price": 12, "quantity": 2, "inventory_docs": [
                {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120}]},
            {"_id": 2, "item": "pecans", "price": 20, "quantity": 1, "inventory_docs": [
                {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70}]},
            {"_id": 3, "inventory_docs": [
                {"_id": 5, "sku": null, "description": "Incomplete"}, {"_id": 6}]},
        ]))
    );
}

#[test]
fn lookup_with_arrays_docs_example() {
    let ctx = collections(vec![(
        "members",
        bson!([
            {"_id": 1, "name": "artie", "status": "A"},
            {"_id": 2, "name": "giraffe", "status": "D"},
            {"_id": 3, "name": "giraffe1", "status": "A"},
            {"_id": 4, "name": "panda", "status": "A"},
            {"_id": 5, "name": "pandabear", "status": "A"},
            {"_id": 6, "name": "giraffe2", "status": "D"},
        ]),
    )]);
    let classes = docs(bson!([
        {"_id": 1, "title": "Reading is ...", "enrollmentlist": ["giraffe2", "pandabear", "artie"]},
        {"_id": 2, "title": "But Writing ...", "enrollmentlist": ["giraffe1", "artie"]},
    ]));
    let out = run_with(
        bson!([
            {"$lookup": {"from": "members", "localField": "enrollmentlist", "foreignField": "name", "as": "enrollee_info"}},
            {"$project": {"ids": "$enrollee_info._id"}},
        ]),
        classes,
        &ctx,
    )
    .unwrap();
    assert_eq!(
        out,
        docs(bson!([{"_id": 1, "ids": [1, 5, 6]}, {"_id": 2, "ids": [1, 3]}]))
    );
    // An array on the foreign side matches any of its elements.
    let ctx = collections(vec![(
        "tags",
        bson!([{"_id": "t", "names": ["x", "y"]}, {"_id": "u", "names": "z"}]),
    )]);
    let out = run_with(
        bson!([{"$lookup": {"from": "tags", "localField": "n", "foreignField": "names", "as": "t"}}]),
        docs(bson!([{"n": "y"}, {"n": ["z", "x"]}, {"n": "q"}])),
        &ctx,
    )
    .unwrap();
    let ids: Vec<Bson> = out
        .iter()
        .map(|d| {
            Bson::Array(
                d.get_array("t")
                    .unwrap()
                    .iter()
                    .map(|x| x.as_document().unwrap().get("_id").unwrap().clone())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(ids, vec![bson!(["t"]), bson!(["t", "u"]), bson!([])]);
}

#[test]
fn lookup_merge_objects_docs_example() {
    let ctx = collections(vec![(
        "items",
        bson!([
            {"_id": 1, "item": "almonds", "description": "almond clusters", "instock": 120},
            {"_id": 2, "item": "bread", "description": "raisin and nut bread", "instock": 80},
            {"_id": 3, "item": "pecans", "description": "candied pecans", "instock": 60},
        ]),
    )]);
    let orders = docs(bson!([
        {"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
        {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
    ]));
    let out = run_with(
        bson!([
            {"$lookup": {"from": "items", "localField": "item", "foreignField": "item", "as": "fromItems"}},
            {"$replaceRoot": {"newRoot": {"$mergeObjects": [{"$arrayElemAt": ["$fromItems", 0]}, "$$ROOT"]}}},
            {"$project": {"fromItems": 0}},
        ]),
        orders,
        &ctx,
    )
    .unwrap();
    assert_eq!(
        out,
        docs(bson!([
            {"_id": 1, "item": "almonds", "description": "almond clusters", "instock": 120, "price": 12, "quantity": 2},
            {"_id": 2, "item": "pecans", "description": "candied pecans", "instock": 60, "price": 20, "quantity": 1},
        ]))
    );
}

#[test]
fn lookup_pipeline_forms_and_errors() {
    let ctx = collections(vec![(
        "c",
        bson!([{"_id": 1, "k": "a", "v": 10}, {"_id": 2, "k": "a", "v": 20}, {"_id": 3, "k": "b", "v": 30}]),
    )]);
    // Uncorrelated sub-pipeline.
    let out = run_with(
        bson!([{"$lookup": {"from": "c", "pipeline": [{"$match": {"v": {"$gte": 20}}}, {"$project": {"_id": 1}}], "as": "big"}}]),
        docs(bson!([{"_id": "x"}])),
        &ctx,
    )
    .unwrap();
    assert_eq!(
        out,
        docs(bson!([{"_id": "x", "big": [{"_id": 2}, {"_id": 3}]}]))
    );
    // Equality join followed by a sub-pipeline on the matches.
    let out = run_with(
        bson!([{"$lookup": {"from": "c", "localField": "k", "foreignField": "k", "pipeline": [{"$group": {"_id": null, "t": {"$sum": "$v"}}}], "as": "sum"}}]),
        docs(bson!([{"k": "a"}, {"k": "zz"}])),
        &ctx,
    )
    .unwrap();
    assert_eq!(out[0].get("sum"), Some(&bson!([{"_id": null, "t": 30}])));
    assert_eq!(out[1].get("sum"), Some(&bson!([])));
    // Missing collection: nothing joined. Dotted "as".
    let out = run(
        bson!([{"$lookup": {"from": "nope", "localField": "a", "foreignField": "b", "as": "x.y"}}]),
        docs(bson!([{"a": 1}])),
    )
    .unwrap();
    assert_eq!(out, docs(bson!([{"a": 1, "x": {"y": []}}])));
    assert_eq!(
        err_code(
            bson!([{"$lookup": {"from": "c", "localField": "a", "foreignField": "b"}}]),
            vec![]
        ),
        9
    );
    assert_eq!(
        err_code(
            bson!([{"$lookup": {"from": "c", "localField": "a", "as": "x"}}]),
            vec![]
        ),
        9
    );
    assert_eq!(
        err_code(
            bson!([{"$lookup": {"from": "c", "localField": "a", "foreignField": "b", "as": "x", "bogus": 1}}]),
            vec![]
        ),
        9
    );
    assert_eq!(
        err_code(
            bson!([{"$lookup": {"from": "c", "let": {"X": "$a"}, "pipeline": [], "as": "x"}}]),
            vec![]
        ),
        9
    );
    assert_eq!(
        err_code(
            bson!([{"$lookup": {"from": "c", "pipeline": [{"$match": {"$expr": "$$nope"}}], "as": "x"}}]),
            vec![]
        ),
        17276
    );
    assert_eq!(
        err_code(
            bson!([{"$lookup": {"from": "c", "pipeline": [{"$out": "z"}], "as": "x"}}]),
            vec![]
        ),
        238
    );
}

#[test]
fn sort_by_count_docs_example() {
    let exhibits = docs(bson!([
        {"_id": 1, "title": "The Pillars of Society", "artist": "Grosz", "year": 1926, "tags": ["painting", "satire", "Expressionism", "caricature"]},
        {"_id": 2, "title": "Melancholy III", "artist": "Munch", "year": 1902, "tags": ["woodcut", "Expressionism"]},
        {"_id": 3, "title": "Dancer", "artist": "Miro", "year": 1925, "tags": ["oil", "Surrealism", "painting"]},
        {"_id": 4, "title": "The Great Wave off Kanagawa", "artist": "Hokusai", "tags": ["woodblock", "ukiyo-e"]},
        {"_id": 5, "title": "The Persistence of Memory", "artist": "Dali", "year": 1931, "tags": ["Surrealism", "painting", "oil"]},
        {"_id": 6, "title": "Composition VII", "artist": "Kandinsky", "year": 1913, "tags": ["oil", "painting", "abstract"]},
        {"_id": 7, "title": "The Scream", "artist": "Munch", "year": 1893, "tags": ["Expressionism", "painting", "oil"]},
        {"_id": 8, "title": "Blue Flower", "artist": "O'Keefe", "year": 1918, "tags": ["abstract", "painting"]},
    ]));
    let out = ok(
        bson!([{"$unwind": "$tags"}, {"$sortByCount": "$tags"}]),
        exhibits,
    );
    let pairs: Vec<(String, i32)> = out
        .iter()
        .map(|d| {
            (
                d.get_str("_id").unwrap().to_string(),
                d.get_i32("count").unwrap(),
            )
        })
        .collect();
    assert_eq!(pairs.len(), 10);
    assert_eq!(pairs[0], ("painting".to_string(), 6));
    assert_eq!(pairs[1], ("oil".to_string(), 4));
    assert_eq!(pairs[2], ("Expressionism".to_string(), 3));
    assert!(pairs.windows(2).all(|w| w[0].1 >= w[1].1));
    let mut twos: Vec<&str> = pairs
        .iter()
        .filter(|p| p.1 == 2)
        .map(|p| p.0.as_str())
        .collect();
    twos.sort();
    assert_eq!(twos, ["Surrealism", "abstract"]);
    assert_eq!(out[0].keys().collect::<Vec<_>>(), ["_id", "count"]);
    assert_eq!(err_code(bson!([{"$sortByCount": "tags"}]), vec![]), 40147);
    assert_eq!(err_code(bson!([{"$sortByCount": {"a": 1}}]), vec![]), 40147);
}

#[test]
fn sort_semantics() {
    let input = docs(bson!([
        {"_id": 1, "a": [3, 1]},
        {"_id": 2, "a": 2},
        {"_id": 3},
        {"_id": 4, "a": null},
        {"_id": 5, "a": "s"},
        {"_id": 6, "a": []},
        {"_id": 7, "a": [0, 5]},
        {"_id": 8, "a": {"x": 1}},
    ]));
    let ids = |out: Vec<Document>| -> Vec<i32> {
        out.iter().map(|d| d.get_i32("_id").unwrap()).collect()
    };
    // Ascending: [] < null = missing < numbers by their minimum < strings < objects.
    assert_eq!(
        ids(ok(bson!([{"$sort": {"a": 1}}]), input.clone())),
        vec![6, 3, 4, 7, 1, 2, 5, 8]
    );
    // Descending: by the maximum element.
    assert_eq!(
        ids(ok(bson!([{"$sort": {"a": -1}}]), input.clone())),
        vec![8, 5, 7, 1, 2, 3, 4, 6]
    );
    // Stable, multiple keys, nested paths through arrays.
    let input = docs(bson!([
        {"_id": 1, "g": 1, "p": [{"q": 5}, {"q": 2}]},
        {"_id": 2, "g": 0, "p": {"q": 3}},
        {"_id": 3, "g": 1, "p": [{"q": 4}]},
        {"_id": 4, "g": 0, "p": {"q": 3}},
        {"_id": 5, "g": 1, "p": [{"r": 1}]},
    ]));
    assert_eq!(
        ids(ok(bson!([{"$sort": {"g": 1, "p.q": 1}}]), input.clone())),
        vec![2, 4, 5, 1, 3]
    );
    assert_eq!(
        ids(ok(bson!([{"$sort": {"g": -1, "p.q": -1}}]), input.clone())),
        vec![1, 3, 5, 2, 4]
    );
    // $sort + $limit keeps the best documents.
    let many: Vec<Document> = (0..5000)
        .map(|i| doc! {"_id": i, "v": (i * 7919) % 5000})
        .collect();
    let out = ok(bson!([{"$sort": {"v": -1}}, {"$limit": 3}]), many);
    assert_eq!(
        out.iter()
            .map(|d| d.get_i32("v").unwrap())
            .collect::<Vec<_>>(),
        vec![4999, 4998, 4997]
    );
    // Ties keep input order even through the bounded sort.
    let ties: Vec<Document> = (0..3000).map(|i| doc! {"_id": i, "v": i % 2}).collect();
    let out = ok(bson!([{"$sort": {"v": 1}}, {"$limit": 4}]), ties);
    assert_eq!(ids(out), vec![0, 2, 4, 6]);
    assert_eq!(err_code(bson!([{"$sort": {}}]), vec![]), 15976);
    assert_eq!(err_code(bson!([{"$sort": {"a": 2}}]), vec![]), 15975);
    assert_eq!(err_code(bson!([{"$sort": {"a": "x"}}]), vec![]), 15974);
    assert_eq!(err_code(bson!([{"$sort": 1}]), vec![]), 15973);
}

#[test]
fn project_inclusion_exclusion() {
    let d = doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, 5, {"x": 1}, [{"c": 2}]], "f": "s"};
    let cases: Vec<(Bson, Document)> = vec![
        (bson!({"a": 1}), doc! {"_id": 1, "a": 1}),
        (bson!({"a": true, "_id": 0}), doc! {"a": 1}),
        (bson!({"f": 1, "a": 1}), doc! {"_id": 1, "a": 1, "f": "s"}),
        (bson!({"b.c": 1}), doc! {"_id": 1, "b": {"c": 2}}),
        (bson!({"b": {"d": 1}}), doc! {"_id": 1, "b": {"d": 3}}),
        (
            bson!({"e.c": 1}),
            doc! {"_id": 1, "e": [{"c": 1}, {}, [{"c": 2}]]},
        ),
        (bson!({"a.z": 1}), doc! {"_id": 1}),
        (bson!({"_id": 1}), doc! {"_id": 1}),
        (
            bson!({"a": 0}),
            doc! {"_id": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, 5, {"x": 1}, [{"c": 2}]], "f": "s"},
        ),
        (bson!({"_id": 0, "b": 0, "e": 0}), doc! {"a": 1, "f": "s"}),
        (
            bson!({"b.c": 0, "e.x": 0, "_id": false}),
            doc! {"a": 1, "b": {"d": 3}, "e": [{"c": 1}, 5, {}, [{"c": 2}]], "f": "s"},
        ),
        (
            bson!({"_id": 0}),
            doc! {"a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, 5, {"x": 1}, [{"c": 2}]], "f": "s"},
        ),
        (
            bson!({"_id": 1, "a": 0}),
            doc! {"_id": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, 5, {"x": 1}, [{"c": 2}]], "f": "s"},
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(
            ok(bson!([{"$project": spec.clone()}]), vec![d.clone()]),
            vec![want],
            "{spec}"
        );
    }
}

#[test]
fn project_computed_fields() {
    let d = doc! {"_id": 1, "a": 5, "b": {"c": 2}, "arr": [{"x": 1}, 7], "s": "hi"};
    let cases: Vec<(Bson, Document)> = vec![
        (bson!({"x": "$a"}), doc! {"_id": 1, "x": 5}),
        (
            bson!({"x": {"$add": ["$a", 1]}, "a": 1}),
            doc! {"_id": 1, "a": 5, "x": 6},
        ),
        (bson!({"_id": "$s"}), doc! {"_id": "hi"}),
        (
            bson!({"_id": 0, "lit": {"$literal": 1}, "str": "plain"}),
            doc! {"lit": 1, "str": "plain"},
        ),
        (bson!({"x": "$missing"}), doc! {"_id": 1}),
        (bson!({"x": "$$REMOVE", "a": 1}), doc! {"_id": 1, "a": 5}),
        (bson!({"b.z": "$a"}), doc! {"_id": 1, "b": {"z": 5}}),
        (
            bson!({"b": {"c": 1, "z": "$a"}}),
            doc! {"_id": 1, "b": {"c": 2, "z": 5}},
        ),
        (bson!({"n.m": "$a"}), doc! {"_id": 1, "n": {"m": 5}}),
        (bson!({"arr.y": "$a"}), doc! {"_id": 1, "arr": [{"y": 5}]}),
        (bson!({"s.y": "$a"}), doc! {"_id": 1, "s": {"y": 5}}),
        (
            bson!({"x": ["$a", "$missing"]}),
            doc! {"_id": 1, "x": [5, null]},
        ),
        (bson!({"x": null}), doc! {"_id": 1, "x": null}),
        (
            bson!({"x": {"$cond": [{"$gt": ["$a", 1]}, "$$REMOVE", "small"]}}),
            doc! {"_id": 1},
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(
            ok(bson!([{"$project": spec.clone()}]), vec![d.clone()]),
            vec![want],
            "{spec}"
        );
    }
}

#[test]
fn project_errors() {
    let cases: Vec<(Bson, i32)> = vec![
        (bson!({}), 51272),
        (bson!({"a": {}}), 51270),
        (bson!({"a": 1, "b": 0}), 31254),
        (bson!({"a": 0, "b": 1}), 31253),
        (bson!({"a": 0, "b": "$x"}), 31252),
        (bson!({"a": 1, "a.b": 1}), 31249),
        (bson!({"a.b": 1, "a": 1}), 31250),
        (bson!({"$a": 1}), 16410),
        (bson!({"a..b": 1}), 15998),
        (bson!({"a": {"$bogus": 1}}), 31325),
        (bson!({"a": {"$type": 1, "$op": 1}}), 16410),
        (bson!({"a.$": 1}), 31324),
        (bson!({"a..$": 1}), 31324),
        (bson!({"a.$.b": 1}), 31394),
        (bson!({"a.": 1}), 40353),
        (bson!({"a": {"$type": [1, 2]}}), 16020),
    ];
    for (spec, code) in cases {
        assert_eq!(
            err_code(bson!([{"$project": spec.clone()}]), vec![]),
            code,
            "{spec}"
        );
    }
    assert_eq!(err_code(bson!([{"$project": 1}]), vec![]), 15969);
    let e = run(bson!([{"$project": {"a": 1, "b": 0}}]), vec![]).unwrap_err();
    assert_eq!(
        e.msg,
        "Invalid $project :: caused by :: Cannot do exclusion on field b in inclusion projection"
    );
}

#[test]
fn add_fields_set_unset() {
    let d = doc! {"_id": 1, "a": 5, "specs": {"doors": 4}, "arr": [{"x": 1}, 7], "s": "hi"};
    let cases: Vec<(Bson, Document)> = vec![
        (
            bson!([{"$addFields": {"t": {"$add": ["$a", 1]}, "a": "x"}}]),
            doc! {"_id": 1, "a": "x", "specs": {"doors": 4}, "arr": [{"x": 1}, 7], "s": "hi", "t": 6},
        ),
        (
            bson!([{"$set": {"specs.fuel_type": "unleaded"}}]),
            doc! {"_id": 1, "a": 5, "specs": {"doors": 4, "fuel_type": "unleaded"}, "arr": [{"x": 1}, 7], "s": "hi"},
        ),
        (
            bson!([{"$addFields": {"specs": {"wheels": 4}}}]),
            doc! {"_id": 1, "a": 5, "specs": {"doors": 4, "wheels": 4}, "arr": [{"x": 1}, 7], "s": "hi"},
        ),
        (
            bson!([{"$addFields": {"arr.y": 0}}]),
            doc! {"_id": 1, "a": 5, "specs": {"doors": 4}, "arr": [{"x": 1, "y": 0}, {"y": 0}], "s": "hi"},
        ),
        (
            bson!([{"$addFields": {"a": "$$REMOVE", "e": {}, "n": 1}}]),
            doc! {"_id": 1, "specs": {"doors": 4}, "arr": [{"x": 1}, 7], "s": "hi", "e": {}, "n": 1},
        ),
        (
            bson!([{"$addFields": {"_id": "$s"}}]),
            doc! {"_id": "hi", "a": 5, "specs": {"doors": 4}, "arr": [{"x": 1}, 7], "s": "hi"},
        ),
        (
            bson!([{"$unset": "a"}, {"$unset": ["specs.doors", "arr", "s"]}]),
            doc! {"_id": 1, "specs": {}},
        ),
        (
            bson!([{"$unset": ["arr.x"]}]),
            doc! {"_id": 1, "a": 5, "specs": {"doors": 4}, "arr": [{}, 7], "s": "hi"},
        ),
    ];
    for (p, want) in cases {
        assert_eq!(ok(p.clone(), vec![d.clone()]), vec![want], "{p}");
    }
    assert_eq!(err_code(bson!([{"$addFields": 1}]), vec![]), 40272);
    assert_eq!(err_code(bson!([{"$set": {"$x": 1}}]), vec![]), 16410);
    assert_eq!(err_code(bson!([{"$unset": []}]), vec![]), 31119);
    assert_eq!(err_code(bson!([{"$unset": [1]}]), vec![]), 31120);
    assert_eq!(err_code(bson!([{"$unset": 1}]), vec![]), 31002);
}

#[test]
fn match_limit_skip_count() {
    let input: Vec<Document> = (1..=10).map(|i| doc! {"_id": i, "v": i % 3}).collect();
    let ids = |out: Vec<Document>| -> Vec<i32> {
        out.iter().map(|d| d.get_i32("_id").unwrap()).collect()
    };
    assert_eq!(
        ids(ok(bson!([{"$match": {"v": 1}}]), input.clone())),
        vec![1, 4, 7, 10]
    );
    assert_eq!(
        ids(ok(
            bson!([{"$match": {"$expr": {"$gt": ["$_id", {"$multiply": ["$v", 4]}]}}}]),
            input.clone()
        )),
        vec![3, 6, 7, 9, 10]
    );
    assert_eq!(
        ids(ok(bson!([{"$skip": 2}, {"$limit": 3}]), input.clone())),
        vec![3, 4, 5]
    );
    assert_eq!(
        ids(ok(bson!([{"$limit": 3}, {"$skip": 2}]), input.clone())),
        vec![3]
    );
    assert_eq!(
        ids(ok(bson!([{"$skip": 20}]), input.clone())),
        Vec::<i32>::new()
    );
    assert_eq!(
        ok(
            bson!([{"$match": {"v": 0}}, {"$count": "n"}]),
            input.clone()
        ),
        vec![doc! {"n": 3}]
    );
    assert!(ok(
        bson!([{"$match": {"v": 5}}, {"$count": "n"}]),
        input.clone()
    )
    .is_empty());
    assert_eq!(ok(bson!([]), input.clone()).len(), 10);
    assert_eq!(err_code(bson!([{"$limit": 0}]), vec![]), 15958);
    assert_eq!(err_code(bson!([{"$limit": "x"}]), vec![]), 15957);
    assert_eq!(err_code(bson!([{"$limit": 1.5}]), vec![]), 2);
    assert_eq!(err_code(bson!([{"$skip": -1}]), vec![]), 15956);
    assert_eq!(err_code(bson!([{"$skip": "x"}]), vec![]), 15972);
    assert_eq!(err_code(bson!([{"$count": ""}]), vec![]), 40156);
    assert_eq!(err_code(bson!([{"$count": "$n"}]), vec![]), 40158);
    assert_eq!(err_code(bson!([{"$count": "a.b"}]), vec![]), 40160);
    assert_eq!(err_code(bson!([{"$match": 1}]), vec![]), 15959);
    assert_eq!(
        err_code(bson!([{"$match": {"a": {"$bogus": 1}}}]), vec![]),
        2
    );
    // $expr errors surface.
    assert_eq!(
        err_code(
            bson!([{"$match": {"$expr": {"$divide": [1, 0]}}}]),
            vec![doc! {}]
        ),
        2
    );
}

#[test]
fn limit_stops_reading_input() {
    let mut pulled = 0;
    let input = (0..).map(|i| {
        pulled += 1;
        Ok(doc! {"i": i})
    });
    let p = parse_pipeline(&stages(
        bson!([{"$match": {"i": {"$gte": 5}}}, {"$limit": 2}]),
    ))
    .unwrap();
    let out = p.run(Box::new(input), &NoCollections).unwrap();
    assert_eq!(out, vec![doc! {"i": 5}, doc! {"i": 6}]);
    drop(out);
    assert!(pulled <= 8);
}

#[test]
fn input_errors_propagate() {
    let input: Vec<QResult<Document>> = vec![Ok(doc! {"a": 1}), Err(QueryError::internal("disk"))];
    let p = parse_pipeline(&stages(bson!([{"$sort": {"a": 1}}]))).unwrap();
    let e = p
        .run(Box::new(input.into_iter()), &NoCollections)
        .unwrap_err();
    assert_eq!(e.code, 1);
}

#[test]
fn replace_root_and_with() {
    let input = docs(bson!([{"_id": 1, "in": {"a": 1}}, {"_id": 2, "in": {"a": 2, "b": 3}}]));
    assert_eq!(
        ok(bson!([{"$replaceRoot": {"newRoot": "$in"}}]), input.clone()),
        docs(bson!([{"a": 1}, {"a": 2, "b": 3}]))
    );
    assert_eq!(
        ok(
            bson!([{"$replaceWith": {"$mergeObjects": [{"d": 0}, "$in"]}}]),
            input.clone()
        ),
        docs(bson!([{"d": 0, "a": 1}, {"d": 0, "a": 2, "b": 3}]))
    );
    assert_eq!(
        err_code(
            bson!([{"$replaceRoot": {"newRoot": "$missing"}}]),
            input.clone()
        ),
        40228
    );
    assert_eq!(
        err_code(bson!([{"$replaceWith": "$_id"}]), input.clone()),
        40228
    );
    assert_eq!(err_code(bson!([{"$replaceRoot": {}}]), vec![]), 40231);
    assert_eq!(
        err_code(bson!([{"$replaceRoot": {"newRoot": "$a", "x": 1}}]), vec![]),
        40415
    );
    let e = run(bson!([{"$replaceWith": "$_id"}]), input).unwrap_err();
    assert!(e.msg.starts_with("'replacement document'  must evaluate to an object, but resulting value was: 1. Type of resulting value: 'int'"), "{}", e.msg);
}

#[test]
fn facet_bucket_sample_union_redact() {
    let input: Vec<Document> = (1..=6)
        .map(|i| doc! {"_id": i, "price": i * 10, "cat": if i % 2 == 0 { "even" } else { "odd" }})
        .collect();
    let out = ok(
        bson!([{"$facet": {
            "byCat": [{"$sortByCount": "$cat"}, {"$sort": {"_id": 1}}],
            "top": [{"$sort": {"price": -1}}, {"$limit": 1}, {"$project": {"_id": 1}}],
            "n": [{"$count": "n"}],
        }}]),
        input.clone(),
    );
    assert_eq!(
        out,
        vec![doc! {
            "byCat": [{"_id": "even", "count": 3}, {"_id": "odd", "count": 3}],
            "top": [{"_id": 6}],
            "n": [{"n": 6}],
        }]
    );
    assert_eq!(err_code(bson!([{"$facet": {}}]), vec![]), 40169);
    assert_eq!(err_code(bson!([{"$facet": {"a": 1}}]), vec![]), 40170);
    assert_eq!(
        err_code(
            bson!([{"$facet": {"a": [{"$facet": {"b": [{"$limit": 1}]}}]}}]),
            vec![]
        ),
        40600
    );

    let out = ok(
        bson!([{"$bucket": {
            "groupBy": "$price",
            "boundaries": [0, 25, 45],
            "default": "Other",
            "output": {"count": {"$sum": 1}, "ids": {"$push": "$_id"}},
        }}]),
        input.clone(),
    );
    assert_eq!(
        out,
        docs(bson!([
            {"_id": 0, "count": 2, "ids": [1, 2]},
            {"_id": 25, "count": 2, "ids": [3, 4]},
            {"_id": "Other", "count": 2, "ids": [5, 6]},
        ]))
    );
    let out = ok(
        bson!([{"$bucket": {"groupBy": "$price", "boundaries": [0, 100]}}]),
        input.clone(),
    );
    assert_eq!(out, vec![doc! {"_id": 0, "count": 6}]);
    assert_eq!(
        err_code(
            bson!([{"$bucket": {"groupBy": "$price", "boundaries": [0, 25]}}]),
            input.clone()
        ),
        40066
    );
    assert_eq!(
        err_code(
            bson!([{"$bucket": {"groupBy": "$price", "boundaries": [5, 1]}}]),
            vec![]
        ),
        40194
    );
    assert_eq!(
        err_code(
            bson!([{"$bucket": {"groupBy": "$price", "boundaries": [1]}}]),
            vec![]
        ),
        40192
    );
    assert_eq!(
        err_code(
            bson!([{"$bucket": {"groupBy": "$price", "boundaries": [1, "a"]}}]),
            vec![]
        ),
        40193
    );
    assert_eq!(
        err_code(
            bson!([{"$bucket": {"groupBy": "$price", "boundaries": [0, 10], "default": 5}}]),
            vec![]
        ),
        40199
    );
    assert_eq!(
        err_code(bson!([{"$bucket": {"boundaries": [0, 10]}}]), vec![]),
        40198
    );

    let out = ok(bson!([{"$sample": {"size": 3}}]), input.clone());
    assert_eq!(out.len(), 3);
    let mut seen: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        ok(bson!([{"$sample": {"size": 100}}]), input.clone()).len(),
        6
    );
    assert_eq!(err_code(bson!([{"$sample": {"size": -1}}]), vec![]), 28747);
    assert_eq!(err_code(bson!([{"$sample": {}}]), vec![]), 28749);
    assert_eq!(
        err_code(bson!([{"$sample": {"size": 1, "x": 1}}]), vec![]),
        28748
    );

    let ctx = collections(vec![(
        "other",
        bson!([{"_id": "o1", "price": 1}, {"_id": "o2", "price": 99}]),
    )]);
    let out = run_with(
        bson!([{"$match": {"_id": 1}}, {"$unionWith": {"coll": "other", "pipeline": [{"$match": {"price": {"$gt": 50}}}]}}, {"$project": {"_id": 1}}]),
        input.clone(),
        &ctx,
    )
    .unwrap();
    assert_eq!(out, docs(bson!([{"_id": 1}, {"_id": "o2"}])));
    let out = run_with(
        bson!([{"$limit": 1}, {"$unionWith": "other"}, {"$count": "n"}]),
        input.clone(),
        &ctx,
    )
    .unwrap();
    assert_eq!(out, vec![doc! {"n": 3}]);

    // $redact, after MongoDB's documentation example.
    let forecast = doc! {
        "_id": 1, "title": "123 Department Report", "tags": ["G", "STLW"],
        "subsections": [
            {"subtitle": "Section 1: Overview", "tags": ["SI", "G"], "content": "Section 1"},
            {"subtitle": "Section 2: Analysis", "tags": ["STLW"], "content": "Section 2"},
            {"subtitle": "Section 3: Budgeting", "tags": ["TK"], "content": {"text": "Section 3", "tags": ["HCS"]}},
        ],
    };
    let out = ok(
        bson!([{"$redact": {"$cond": {
            "if": {"$gt": [{"$size": {"$setIntersection": ["$tags", ["STLW", "G"]]}}, 0]},
            "then": "$$DESCEND",
            "else": "$$PRUNE",
        }}}]),
        vec![forecast],
    );
    assert_eq!(
        out,
        vec![doc! {
            "_id": 1, "title": "123 Department Report", "tags": ["G", "STLW"],
            "subsections": [
                {"subtitle": "Section 1: Overview", "tags": ["SI", "G"], "content": "Section 1"},
                {"subtitle": "Section 2: Analysis", "tags": ["STLW"], "content": "Section 2"},
            ],
        }]
    );
    assert_eq!(err_code(bson!([{"$redact": "x"}]), vec![doc! {}]), 17053);
}

#[test]
fn pipeline_introspection_and_stage_errors() {
    let p = parse_pipeline(&stages(bson!([{"$match": {"a": 1}}, {"$limit": 1}]))).unwrap();
    assert_eq!(p.leading_match(), Some(&doc! {"a": 1}));
    assert_eq!(p.first_stage_name(), "$match");
    assert_eq!(p.stage_names().collect::<Vec<_>>(), ["$match", "$limit"]);
    assert_eq!(p.len(), 2);
    let p = parse_pipeline(&stages(bson!([{"$limit": 1}, {"$match": {"a": 1}}]))).unwrap();
    assert_eq!(p.leading_match(), None);
    let p = parse_pipeline(&[]).unwrap();
    assert_eq!(p.first_stage_name(), "");
    assert!(p.is_empty());

    // A leading $collStats is the server's: run passes the input (its output) through.
    let p = parse_pipeline(&stages(
        bson!([{"$collStats": {"count": {}}}, {"$project": {"count": 1, "_id": 0}}]),
    ))
    .unwrap();
    assert_eq!(p.first_stage_name(), "$collStats");
    assert_eq!(
        p.server_stage(),
        Some(("$collStats", &bson!({"count": {}})))
    );
    let out = p
        .run(
            Box::new(std::iter::once(Ok(doc! {"ns": "db.c", "count": 3}))),
            &NoCollections,
        )
        .unwrap();
    assert_eq!(out, vec![doc! {"count": 3}]);
    assert_eq!(
        err_code(bson!([{"$limit": 1}, {"$collStats": {}}]), vec![]),
        40602
    );

    let e = run(bson!([{"$foo": 1}]), vec![]).unwrap_err();
    assert_eq!(
        (e.code, e.msg.as_str()),
        (40324, "Unrecognized pipeline stage name: '$foo'")
    );
    assert_eq!(
        err_code(bson!([{"$match": {}, "$limit": 1}]), vec![]),
        40323
    );
    assert_eq!(err_code(bson!([{}]), vec![]), 40323);
    assert_eq!(err_code(bson!([{"$out": "x"}]), vec![]), 238);
    assert_eq!(
        err_code(bson!([{"$project": {"x": {"$foo": 1}}}]), vec![]),
        31325
    );
}

#[test]
fn now_is_fixed_for_a_run() {
    let input: Vec<Document> = (0..50).map(|i| doc! {"i": i}).collect();
    let out = ok(
        bson!([{"$project": {"t": "$$NOW"}}, {"$group": {"_id": "$t"}}]),
        input,
    );
    assert_eq!(out.len(), 1);
}

#[test]
fn lookup_let_docs_example() {
    let ctx = collections(vec![(
        "warehouses",
        bson!([
            {"_id": 1, "stock_item": "almonds", "warehouse": "A", "instock": 120},
            {"_id": 2, "stock_item": "pecans", "warehouse": "A", "instock": 80},
            {"_id": 3, "stock_item": "almonds", "warehouse": "B", "instock": 60},
            {"_id": 4, "stock_item": "cookies", "warehouse": "B", "instock": 40},
            {"_id": 5, "stock_item": "cookies", "warehouse": "A", "instock": 80},
        ]),
    )]);
    let orders = docs(bson!([
        {"_id": 1, "item": "almonds", "price": 12, "ordered": 2},
        {"_id": 2, "item": "pecans", "price": 20, "ordered": 1},
        {"_id": 3, "item": "cookies", "price": 10, "ordered": 60},
    ]));
    let out = run_with(
        bson!([{"$lookup": {
            "from": "warehouses",
            "let": {"order_item": "$item", "order_qty": "$ordered"},
            "pipeline": [
                {"$match": {"$expr": {"$and": [
                    {"$eq": ["$stock_item", "$$order_item"]},
                    {"$gte": ["$instock", "$$order_qty"]},
                ]}}},
                {"$project": {"stock_item": 0, "_id": 0}},
            ],
            "as": "stockdata",
        }}]),
        orders.clone(),
        &ctx,
    )
    .unwrap();
    let stock: Vec<Bson> = out
        .iter()
        .map(|d| d.get("stockdata").unwrap().clone())
        .collect();
    assert_eq!(
        stock,
        vec![
            bson!([{"warehouse": "A", "instock": 120}, {"warehouse": "B", "instock": 60}]),
            bson!([{"warehouse": "A", "instock": 80}]),
            bson!([{"warehouse": "A", "instock": 80}]),
        ]
    );
    // Concise form: equality fields plus a correlated sub-pipeline; variables with paths in
    // other stages' expressions; a plain $match value "$$o" is a string, not a variable.
    let out = run_with(
        bson!([
            {"$lookup": {
                "from": "warehouses",
                "localField": "item",
                "foreignField": "stock_item",
                "let": {"o": {"qty": "$ordered"}},
                "pipeline": [{"$match": {"warehouse": "$$o"}}],
                "as": "none",
            }},
            {"$lookup": {
                "from": "warehouses",
                "localField": "item",
                "foreignField": "stock_item",
                "let": {"o": {"qty": "$ordered"}},
                "pipeline": [
                    {"$addFields": {"spare": {"$subtract": ["$instock", "$$o.qty"]}}},
                    {"$project": {"_id": 0, "spare": 1}},
                ],
                "as": "spare",
            }},
            {"$project": {"none": 1, "spare": 1}},
        ]),
        orders,
        &ctx,
    )
    .unwrap();
    assert_eq!(
        out,
        docs(bson!([
            {"_id": 1, "none": [], "spare": [{"spare": 118}, {"spare": 58}]},
            {"_id": 2, "none": [], "spare": [{"spare": 79}]},
            {"_id": 3, "none": [], "spare": [{"spare": -20}, {"spare": 20}]},
        ]))
    );
}
