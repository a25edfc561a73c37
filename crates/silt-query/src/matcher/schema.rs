//! `$jsonSchema`: the JSON Schema draft 4 subset MongoDB supports, with its `bsonType`
//! extension, as a query predicate and as a collection validator.
//!
//! A schema is parsed once ([`JsonSchema::parse`], with MongoDB's errors for unknown or
//! unsupported keywords) and checked against a document ([`JsonSchema::failures`]), which
//! explains each failed rule in the shape of MongoDB's `errInfo.details.schemaRulesNotSatisfied`
//! (`operatorName`, `specifiedAs`, `reason`, `consideredValue`, ...). Keywords that constrain
//! one type (`minimum`, `minLength`, `properties`, `items`, ...) ignore values of other types,
//! as the standard says. Field names under `properties` are names, not dotted paths.

use bson::{doc, Bson, Document};
use silt_bson::compare::{as_num, cmp_values, values_equal, Num};

use super::{type_code, RegexMatch, TypeSet};
use crate::error::{QResult, QueryError};

/// A parsed schema (one object of the schema document).
#[derive(Clone, Debug, Default)]
pub struct JsonSchema {
    rules: Vec<(String, Bson, Rule)>,
}

#[derive(Clone, Debug)]
enum Rule {
    BsonType(TypeSet),
    /// JSON types: names among object, array, number, boolean, string, null.
    Type(Vec<String>),
    Enum(Vec<Bson>),
    Minimum {
        bound: Bson,
        exclusive: bool,
    },
    Maximum {
        bound: Bson,
        exclusive: bool,
    },
    MultipleOf(f64),
    MinLength(usize),
    MaxLength(usize),
    Pattern(Box<RegexMatch>),
    Required(Vec<String>),
    Properties(Vec<(String, JsonSchema)>),
    /// With the names of `properties` and the regexes of `patternProperties`, which it skips.
    AdditionalProperties {
        allowed: Option<Box<JsonSchema>>,
        known: Vec<String>,
        patterns: Vec<RegexMatch>,
    },
    PatternProperties(Vec<(RegexMatch, JsonSchema)>),
    MinProperties(usize),
    MaxProperties(usize),
    Dependencies(Vec<(String, Dependency)>),
    Items(Box<JsonSchema>),
    /// `items` as an array (one schema per position) and `additionalItems`.
    TupleItems {
        items: Vec<JsonSchema>,
        additional: Option<Box<JsonSchema>>,
    },
    MinItems(usize),
    MaxItems(usize),
    UniqueItems,
    AllOf(Vec<JsonSchema>),
    AnyOf(Vec<JsonSchema>),
    OneOf(Vec<JsonSchema>),
    Not(Box<JsonSchema>),
}

#[derive(Clone, Debug)]
enum Dependency {
    Names(Vec<String>),
    Schema(JsonSchema),
}

const IGNORED: &[&str] = &["title", "description"];
const UNSUPPORTED: &[&str] = &["$ref", "$schema", "default", "definitions", "format", "id"];

fn parse_err(msg: impl Into<String>) -> QueryError {
    QueryError::failed_to_parse(msg)
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "an integral double count past usize::MAX saturates: no practical limit"
)]
fn count(k: &str, v: &Bson) -> QResult<usize> {
    match as_num(v) {
        Some(Num::Int(i)) if i >= 0 => Ok(usize::try_from(i).unwrap_or(usize::MAX)),
        Some(Num::Float(f)) if f >= 0.0 && f.fract() == 0.0 => Ok(f as usize),
        _ => Err(parse_err(format!(
            "${k} must be a representable as a non-negative integer"
        ))),
    }
}

fn names(k: &str, v: &Bson) -> QResult<Vec<String>> {
    let Bson::Array(a) = v else {
        return Err(QueryError::type_mismatch(format!("${k} must be an array")));
    };
    a.iter()
        .map(|x| match x {
            Bson::String(s) => Ok(s.clone()),
            _ => Err(QueryError::type_mismatch(format!(
                "${k} must contain only strings"
            ))),
        })
        .collect()
}

fn sub_schema(k: &str, v: &Bson) -> QResult<JsonSchema> {
    match v {
        Bson::Document(d) => JsonSchema::parse(d),
        _ => Err(QueryError::type_mismatch(format!("${k} must be an object"))),
    }
}

fn schema_list(k: &str, v: &Bson) -> QResult<Vec<JsonSchema>> {
    match v {
        Bson::Array(a) if !a.is_empty() => a.iter().map(|x| sub_schema(k, x)).collect(),
        _ => Err(QueryError::bad_value(format!(
            "${k} must be a non-empty array"
        ))),
    }
}

fn regex(k: &str, pattern: &str) -> QResult<RegexMatch> {
    RegexMatch::new(pattern, "").map_err(|e| parse_err(format!("${k}: {}", e.msg)))
}

/// `additionalProperties`/`additionalItems`: `true` allows anything (`None`), `false`
/// nothing (a schema no value satisfies), an object is a schema the extra values must meet.
fn bool_or_schema(v: &Bson, err: &str) -> QResult<Option<Box<JsonSchema>>> {
    Ok(match v {
        Bson::Boolean(true) => None,
        Bson::Boolean(false) => Some(Box::new(JsonSchema {
            rules: vec![(
                "not".into(),
                Bson::Document(doc! {}),
                Rule::Not(Box::default()),
            )],
        })),
        Bson::Document(s) => Some(Box::new(JsonSchema::parse(s)?)),
        _ => return Err(QueryError::type_mismatch(err)),
    })
}

impl JsonSchema {
    /// Parse a schema object.
    pub fn parse(d: &Document) -> QResult<JsonSchema> {
        let mut rules = Vec::new();
        let mut known = Vec::new();
        let mut patterns = Vec::new();
        let mut additional = None;
        let mut tuple: Option<Vec<JsonSchema>> = None;
        let mut additional_items = None;
        let num = |k: &str, v: &Bson| -> QResult<Bson> {
            as_num(v)
                .map(|_| v.clone())
                .ok_or_else(|| QueryError::type_mismatch(format!("${k} must be a number")))
        };
        let flag = |k: &str| -> QResult<bool> {
            match d.get(k) {
                None => Ok(false),
                Some(Bson::Boolean(b)) => Ok(*b),
                Some(_) => Err(QueryError::type_mismatch(format!("${k} must be a boolean"))),
            }
        };
        for (k, v) in d {
            let rule = match k.as_str() {
                _ if IGNORED.contains(&k.as_str()) => continue,
                _ if UNSUPPORTED.contains(&k.as_str()) => {
                    return Err(parse_err(format!(
                        "$jsonSchema keyword '{k}' is not currently supported"
                    )))
                }
                "exclusiveMinimum" | "exclusiveMaximum" => {
                    flag(k)?;
                    let base = if k == "exclusiveMinimum" {
                        "minimum"
                    } else {
                        "maximum"
                    };
                    if !d.contains_key(base) {
                        return Err(parse_err(format!(
                            "$jsonSchema keyword '{base}' must be a present if {k} is present"
                        )));
                    }
                    continue;
                }
                "bsonType" => Rule::BsonType(TypeSet::parse(v).map_err(|e| {
                    QueryError::bad_value(format!("$jsonSchema bsonType: {}", e.msg))
                })?),
                "type" => {
                    let list = match v {
                        Bson::String(s) => vec![s.clone()],
                        Bson::Array(_) => names("type", v)?,
                        _ => {
                            return Err(QueryError::type_mismatch(
                                "$type must be a string or array",
                            ))
                        }
                    };
                    for t in &list {
                        if t == "integer" {
                            return Err(parse_err(
                                "$jsonSchema type 'integer' is not currently supported.",
                            ));
                        }
                        if !matches!(
                            t.as_str(),
                            "object" | "array" | "number" | "boolean" | "string" | "null"
                        ) {
                            return Err(QueryError::bad_value(format!(
                                "Unknown type name alias: {t}"
                            )));
                        }
                    }
                    Rule::Type(list)
                }
                "enum" => match v {
                    Bson::Array(a) if !a.is_empty() => Rule::Enum(a.clone()),
                    _ => {
                        return Err(parse_err(
                            "$jsonSchema keyword 'enum' must be a non-empty array",
                        ))
                    }
                },
                "minimum" => Rule::Minimum {
                    bound: num(k, v)?,
                    exclusive: flag("exclusiveMinimum")?,
                },
                "maximum" => Rule::Maximum {
                    bound: num(k, v)?,
                    exclusive: flag("exclusiveMaximum")?,
                },
                "multipleOf" => match as_num(v) {
                    Some(n) if num_f64(n) > 0.0 => Rule::MultipleOf(num_f64(n)),
                    _ => {
                        return Err(parse_err(
                            "$jsonSchema keyword 'multipleOf' must be a positive number",
                        ))
                    }
                },
                "minLength" => Rule::MinLength(count(k, v)?),
                "maxLength" => Rule::MaxLength(count(k, v)?),
                "pattern" => match v {
                    Bson::String(p) => Rule::Pattern(Box::new(regex(k, p)?)),
                    _ => return Err(QueryError::type_mismatch("$pattern must be a string")),
                },
                "required" => {
                    let r = names(k, v)?;
                    if r.is_empty() {
                        return Err(parse_err(
                            "$jsonSchema keyword 'required' cannot be an empty array",
                        ));
                    }
                    Rule::Required(r)
                }
                "properties" => {
                    let Bson::Document(p) = v else {
                        return Err(QueryError::type_mismatch("$properties must be an object"));
                    };
                    let mut props = Vec::new();
                    for (name, s) in p {
                        known.push(name.clone());
                        props.push((name.clone(), sub_schema(k, s)?));
                    }
                    Rule::Properties(props)
                }
                "patternProperties" => {
                    let Bson::Document(p) = v else {
                        return Err(QueryError::type_mismatch(
                            "$patternProperties must be an object",
                        ));
                    };
                    let mut out = Vec::new();
                    for (pat, s) in p {
                        patterns.push(regex(k, pat)?);
                        out.push((regex(k, pat)?, sub_schema(k, s)?));
                    }
                    Rule::PatternProperties(out)
                }
                "additionalProperties" => {
                    additional = Some(bool_or_schema(
                        v,
                        "$additionalProperties must be either an object or a boolean",
                    )?);
                    continue;
                }
                "minProperties" => Rule::MinProperties(count(k, v)?),
                "maxProperties" => Rule::MaxProperties(count(k, v)?),
                "dependencies" => {
                    let Bson::Document(deps) = v else {
                        return Err(QueryError::type_mismatch("$dependencies must be an object"));
                    };
                    let mut out = Vec::new();
                    for (name, dep) in deps {
                        let dep = match dep {
                            Bson::Document(s) => Dependency::Schema(JsonSchema::parse(s)?),
                            Bson::Array(_) => Dependency::Names(names(k, dep)?),
                            _ => {
                                return Err(QueryError::type_mismatch(
                                    "$dependencies values must be objects or arrays",
                                ))
                            }
                        };
                        out.push((name.clone(), dep));
                    }
                    Rule::Dependencies(out)
                }
                "items" => match v {
                    Bson::Document(s) => Rule::Items(Box::new(JsonSchema::parse(s)?)),
                    Bson::Array(list) => {
                        tuple = Some(
                            list.iter()
                                .map(|x| sub_schema(k, x))
                                .collect::<QResult<_>>()?,
                        );
                        continue;
                    }
                    _ => {
                        return Err(QueryError::type_mismatch(
                            "$items must be an object or an array",
                        ))
                    }
                },
                "additionalItems" => {
                    additional_items = Some(bool_or_schema(
                        v,
                        "$additionalItems must be either an object or a boolean",
                    )?);
                    continue;
                }
                "minItems" => Rule::MinItems(count(k, v)?),
                "maxItems" => Rule::MaxItems(count(k, v)?),
                "uniqueItems" => match v {
                    Bson::Boolean(true) => Rule::UniqueItems,
                    Bson::Boolean(false) => continue,
                    _ => return Err(QueryError::type_mismatch("$uniqueItems must be a boolean")),
                },
                "allOf" => Rule::AllOf(schema_list(k, v)?),
                "anyOf" => Rule::AnyOf(schema_list(k, v)?),
                "oneOf" => Rule::OneOf(schema_list(k, v)?),
                "not" => Rule::Not(Box::new(sub_schema(k, v)?)),
                other => return Err(parse_err(format!("Unknown $jsonSchema keyword: {other}"))),
            };
            rules.push((k.clone(), v.clone(), rule));
        }
        if d.contains_key("bsonType") && d.contains_key("type") {
            return Err(parse_err(
                "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
            ));
        }
        if let Some(allowed) = additional {
            rules.push((
                "additionalProperties".into(),
                d.get("additionalProperties").cloned().unwrap_or(Bson::Null),
                Rule::AdditionalProperties {
                    allowed,
                    known,
                    patterns,
                },
            ));
        }
        if let Some(items) = tuple {
            rules.push((
                "items".into(),
                d.get("items").cloned().unwrap_or(Bson::Null),
                Rule::TupleItems {
                    items,
                    additional: additional_items.flatten(),
                },
            ));
        }
        Ok(JsonSchema { rules })
    }

    /// Whether `doc` satisfies the schema.
    pub fn matches(&self, doc: &Document) -> bool {
        self.failures(&Bson::Document(doc.clone())).is_empty()
    }

    /// The rules `v` does not satisfy, explained as MongoDB explains them (empty: valid).
    pub fn failures(&self, v: &Bson) -> Vec<Document> {
        let mut out = Vec::new();
        for (name, spec, rule) in &self.rules {
            if let Some(d) = check(name, spec, rule, v) {
                out.push(d);
            }
        }
        out
    }
}

fn num_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

fn json_type(v: &Bson) -> &'static str {
    match v {
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => "number",
        Bson::Boolean(_) => "boolean",
        Bson::String(_) => "string",
        Bson::Null => "null",
        _ => "other",
    }
}

fn failed(name: &str, spec: &Bson, reason: &str, v: &Bson) -> Document {
    let mut specified = Document::new();
    specified.insert(name, spec.clone());
    doc! {
        "operatorName": name,
        "specifiedAs": specified,
        "reason": reason,
        "consideredValue": v.clone(),
    }
}

/// The names of `req` that `d` lacks.
fn missing_names(d: &Document, req: &[String]) -> Vec<Bson> {
    req.iter()
        .filter(|r| !d.contains_key(r.as_str()))
        .map(|r| Bson::String(r.clone()))
        .collect()
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "an index reported is a position in an array of one document or in a list of the \
              schema: a BSON document is at most 16 MiB, so far below 2^31"
)]
fn check(name: &str, spec: &Bson, rule: &Rule, v: &Bson) -> Option<Document> {
    let num = as_num(v);
    let string = match v {
        Bson::String(s) => Some(s.as_str()),
        _ => None,
    };
    match rule {
        Rule::BsonType(t) => (!t.matches(v)).then(|| {
            let mut d = failed(name, spec, "type did not match", v);
            d.insert("consideredType", silt_bson::compare::type_name(v));
            let _ = type_code(v);
            d
        }),
        Rule::Type(list) => (!list.iter().any(|t| t == json_type(v))).then(|| {
            let mut d = failed(name, spec, "type did not match", v);
            d.insert("consideredType", silt_bson::compare::type_name(v));
            d
        }),
        Rule::Enum(items) => (!items.iter().any(|x| values_equal(x, v) && silt_bson::type_rank(x) == silt_bson::type_rank(v)))
            .then(|| failed(name, spec, "value was not found in enum", v)),
        Rule::Minimum { bound, exclusive } => {
            num?;
            let o = cmp_values(v, bound);
            let bad = if *exclusive { o.is_le() } else { o.is_lt() };
            bad.then(|| failed(name, spec, "comparison failed", v))
        }
        Rule::Maximum { bound, exclusive } => {
            num?;
            let o = cmp_values(v, bound);
            let bad = if *exclusive { o.is_ge() } else { o.is_gt() };
            bad.then(|| failed(name, spec, "comparison failed", v))
        }
        Rule::MultipleOf(m) => {
            let x = num_f64(num?);
            let q = x / m;
            (q.fract() != 0.0 || !q.is_finite()).then(|| failed(name, spec, "considered value is not a multiple of the specified value", v))
        }
        Rule::MinLength(n) => (string?.chars().count() < *n)
            .then(|| failed(name, spec, "specified string length was not satisfied", v)),
        Rule::MaxLength(n) => (string?.chars().count() > *n)
            .then(|| failed(name, spec, "specified string length was not satisfied", v)),
        Rule::Pattern(re) => (!re.matches(&Bson::String(string?.to_string())))
            .then(|| failed(name, spec, "regular expression did not match", v)),
        Rule::Required(req) => {
            let Bson::Document(d) = v else { return None };
            let missing = missing_names(d, req);
            (!missing.is_empty()).then(|| doc! {
                "operatorName": "required",
                "specifiedAs": { "required": spec.clone() },
                "missingProperties": missing,
            })
        }
        Rule::Properties(props) => {
            let Bson::Document(d) = v else { return None };
            let mut bad = Vec::new();
            for (p, s) in props {
                if let Some(x) = d.get(p) {
                    let f = s.failures(x);
                    if !f.is_empty() {
                        bad.push(Bson::Document(doc! { "propertyName": p, "details": f }));
                    }
                }
            }
            (!bad.is_empty()).then(|| doc! { "operatorName": "properties", "propertiesNotSatisfied": bad })
        }
        Rule::AdditionalProperties { allowed, known, patterns } => {
            let Bson::Document(d) = v else { return None };
            let extra: Vec<&String> = d
                .keys()
                .filter(|k| !known.contains(k))
                .filter(|k| !patterns.iter().any(|p| p.matches(&Bson::String((*k).clone()))))
                .collect();
            let schema = allowed.as_ref()?;
            let bad: Vec<Bson> = extra
                .into_iter()
                .filter(|k| d.get(k.as_str()).is_some_and(|x| !schema.failures(x).is_empty()))
                .map(|k| Bson::String(k.clone()))
                .collect();
            (!bad.is_empty()).then(|| doc! {
                "operatorName": "additionalProperties",
                "specifiedAs": { "additionalProperties": spec.clone() },
                "additionalProperties": bad,
            })
        }
        Rule::PatternProperties(pats) => {
            let Bson::Document(d) = v else { return None };
            let mut bad = Vec::new();
            for (k, x) in d {
                for (re, s) in pats {
                    if re.matches(&Bson::String(k.clone())) {
                        let f = s.failures(x);
                        if !f.is_empty() {
                            bad.push(Bson::Document(doc! { "propertyName": k, "details": f }));
                        }
                    }
                }
            }
            (!bad.is_empty()).then(|| doc! { "operatorName": "patternProperties", "details": bad })
        }
        Rule::MinProperties(n) => match v {
            Bson::Document(d) if d.len() < *n => Some(failed(name, spec, "specified number of properties was not satisfied", &Bson::Int64(d.len() as i64))),
            _ => None,
        },
        Rule::MaxProperties(n) => match v {
            Bson::Document(d) if d.len() > *n => Some(failed(name, spec, "specified number of properties was not satisfied", &Bson::Int64(d.len() as i64))),
            _ => None,
        },
        Rule::Dependencies(deps) => {
            let Bson::Document(d) = v else { return None };
            let mut bad = Vec::new();
            for (p, dep) in deps {
                if !d.contains_key(p) {
                    continue;
                }
                match dep {
                    Dependency::Names(req) => {
                        let missing = missing_names(d, req);
                        if !missing.is_empty() {
                            bad.push(Bson::Document(doc! { "conditionalProperty": p, "missingProperties": missing }));
                        }
                    }
                    Dependency::Schema(s) => {
                        let f = s.failures(v);
                        if !f.is_empty() {
                            bad.push(Bson::Document(doc! { "conditionalProperty": p, "details": f }));
                        }
                    }
                }
            }
            (!bad.is_empty()).then(|| doc! { "operatorName": "dependencies", "failingDependencies": bad })
        }
        Rule::Items(s) => {
            let Bson::Array(a) = v else { return None };
            a.iter().enumerate().find_map(|(i, x)| {
                let f = s.failures(x);
                (!f.is_empty()).then(|| doc! {
                    "operatorName": "items",
                    "reason": "At least one item did not match the sub-schema",
                    "itemIndex": i as i32,
                    "details": f,
                })
            })
        }
        Rule::TupleItems { items, additional } => {
            let Bson::Array(a) = v else { return None };
            for (i, x) in a.iter().enumerate() {
                let f = match items.get(i) {
                    Some(s) => s.failures(x),
                    None => match additional {
                        Some(s) => s.failures(x),
                        None => Vec::new(),
                    },
                };
                if !f.is_empty() {
                    let op = if i < items.len() { "items" } else { "additionalItems" };
                    return Some(doc! {
                        "operatorName": op,
                        "reason": "At least one item did not match the sub-schema",
                        "itemIndex": i as i32,
                        "details": f,
                    });
                }
            }
            None
        }
        Rule::MinItems(n) => match v {
            Bson::Array(a) if a.len() < *n => Some(failed(name, spec, "array did not match specified length", v)),
            _ => None,
        },
        Rule::MaxItems(n) => match v {
            Bson::Array(a) if a.len() > *n => Some(failed(name, spec, "array did not match specified length", v)),
            _ => None,
        },
        Rule::UniqueItems => {
            let Bson::Array(a) = v else { return None };
            let dup = a.iter().enumerate().any(|(i, x)| {
                a[..i].iter().any(|y| values_equal(x, y) && silt_bson::type_rank(x) == silt_bson::type_rank(y))
            });
            dup.then(|| failed(name, spec, "found a duplicate item", v))
        }
        Rule::AllOf(list) => {
            let bad: Vec<Bson> = list
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let f = s.failures(v);
                    (!f.is_empty()).then(|| Bson::Document(doc! { "index": i as i32, "details": f }))
                })
                .collect();
            (!bad.is_empty()).then(|| doc! { "operatorName": "allOf", "schemasNotSatisfied": bad })
        }
        Rule::AnyOf(list) => (!list.iter().any(|s| s.failures(v).is_empty())).then(|| doc! {
            "operatorName": "anyOf",
            "schemasNotSatisfied": list.iter().enumerate().map(|(i, s)| Bson::Document(doc! { "index": i as i32, "details": s.failures(v) })).collect::<Vec<_>>(),
        }),
        Rule::OneOf(list) => {
            let ok: Vec<i32> = list
                .iter()
                .enumerate()
                .filter(|(_, s)| s.failures(v).is_empty())
                .map(|(i, _)| i as i32)
                .collect();
            match ok.len() {
                1 => None,
                0 => Some(doc! {
                    "operatorName": "oneOf",
                    "schemasNotSatisfied": list.iter().enumerate().map(|(i, s)| Bson::Document(doc! { "index": i as i32, "details": s.failures(v) })).collect::<Vec<_>>(),
                }),
                _ => Some(doc! { "operatorName": "oneOf", "reason": "more than one subschema matched", "matchingSchemaIndexes": ok }),
            }
        }
        Rule::Not(s) => s.failures(v).is_empty().then(|| doc! {
            "operatorName": "not",
            "reason": "child expression matched",
        }),
    }
}
