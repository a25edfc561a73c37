//! BSON values and documents built from fuzzer bytes. Field names come mostly from a list
//! of the names and operators the query and update languages know, so that mutated inputs
//! reach deep into the matcher and the update applier instead of stopping at "unknown
//! operator".

use arbitrary::{Result, Unstructured};
use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document, Regex, Timestamp};

const NAMES: &[&str] = &[
    "a",
    "b",
    "c",
    "_id",
    "a.b",
    "a.0",
    "b.c.d",
    "x",
    "$eq",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$ne",
    "$in",
    "$nin",
    "$and",
    "$or",
    "$nor",
    "$not",
    "$exists",
    "$type",
    "$size",
    "$all",
    "$elemMatch",
    "$regex",
    "$options",
    "$mod",
    "$expr",
    "$comment",
    "$bitsAllSet",
    "$bitsAnyClear",
    "$jsonSchema",
    "bsonType",
    "properties",
    "required",
    "items",
    "minimum",
    "$set",
    "$unset",
    "$inc",
    "$mul",
    "$min",
    "$max",
    "$rename",
    "$push",
    "$pull",
    "$pullAll",
    "$addToSet",
    "$pop",
    "$each",
    "$position",
    "$slice",
    "$sort",
    "$currentDate",
    "$setOnInsert",
    "$bit",
    "and",
    "or",
    "xor",
    "a.$[]",
    "a.$[e]",
    "a.$",
    "e",
    "e.b",
    "$[]",
    "$add",
    "$concat",
    "$cond",
    "$ifNull",
    "$literal",
    "$getField",
    "$sum",
    "$size",
    "$map",
    "$filter",
    "$reduce",
    "$let",
    "$switch",
    "$toString",
    "$substrCP",
    "$dateToString",
];

/// Strings that are also field paths or variables in expressions.
const STRINGS: &[&str] = &[
    "$a",
    "$b.c",
    "$$ROOT",
    "$$CURRENT",
    "$$x",
    "abc",
    "",
    "é",
    "a.b",
    "int",
    "number",
    "string",
    "object",
    "array",
];

fn name(u: &mut Unstructured) -> Result<String> {
    if u.ratio(1, 8)? {
        let s: String = u.arbitrary()?;
        return Ok(s.chars().filter(|c| *c != '\0').take(12).collect());
    }
    Ok((*u.choose(NAMES)?).to_string())
}

/// A value, nested at most a few levels below `depth`.
pub(crate) fn value(u: &mut Unstructured, depth: usize) -> Result<Bson> {
    let kinds = if depth >= 4 { 14 } else { 17 };
    Ok(match u.int_in_range(0..=kinds)? {
        0 => Bson::Int32(u.arbitrary()?),
        1 => Bson::Int32(u.int_in_range(-3..=3)?),
        2 => Bson::Int64(u.arbitrary()?),
        3 => Bson::Double(*u.choose(&[
            0.0,
            -0.0,
            1.5,
            -2.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9.007_199_254_740_993e15,
            1e300,
        ])?),
        4 => Bson::Double(f64::from_bits(u.arbitrary()?)),
        5 => Bson::String((*u.choose(STRINGS)?).to_string()),
        6 => {
            let s: String = u.arbitrary()?;
            Bson::String(s.chars().take(16).collect())
        }
        7 => Bson::Boolean(u.arbitrary()?),
        8 => Bson::Null,
        9 => Bson::ObjectId(ObjectId::from_bytes(u.arbitrary()?)),
        10 => Bson::DateTime(bson::DateTime::from_millis(u.arbitrary()?)),
        11 => Bson::RegularExpression(Regex {
            pattern: (*u.choose(&["a", "^a", "a.*b", "(", "[", "\\d+", "é"])?).to_string(),
            options: (*u.choose(&["", "i", "m", "x", "s", "q"])?).to_string(),
        }),
        12 => Bson::Binary(Binary {
            subtype: *u.choose(&[BinarySubtype::Generic, BinarySubtype::Uuid])?,
            bytes: u.arbitrary::<Vec<u8>>()?.into_iter().take(16).collect(),
        }),
        13 => Bson::Decimal128(bson::Decimal128::from_bytes(u.arbitrary()?)),
        14 => u
            .choose(&[
                Bson::MinKey,
                Bson::MaxKey,
                Bson::Undefined,
                Bson::Timestamp(Timestamp {
                    time: 5,
                    increment: 1,
                }),
                Bson::Symbol("s".into()),
                Bson::JavaScriptCode("1".into()),
            ])?
            .clone(),
        15 | 16 => Bson::Document(document(u, depth + 1)?),
        _ => {
            let n = u.int_in_range(0..=4)?;
            let mut a = Vec::with_capacity(n);
            for _ in 0..n {
                a.push(value(u, depth + 1)?);
            }
            Bson::Array(a)
        }
    })
}

/// A document of up to four fields.
pub(crate) fn document(u: &mut Unstructured, depth: usize) -> Result<Document> {
    let n = u.int_in_range(0..=4)?;
    let mut d = Document::new();
    for _ in 0..n {
        let k = name(u)?;
        let v = value(u, depth)?;
        d.insert(k, v);
    }
    Ok(d)
}
