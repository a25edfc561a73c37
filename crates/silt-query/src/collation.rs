//! Collations: MongoDB's `collation` document parsed, checked and resolved as mongod does,
//! with ICU4X's `icu_collator` (compiled data) doing the comparing.
//!
//! A [`Collation`] is installed for one command with [`Collation::scope`]; the comparison
//! sites that MongoDB makes collation-aware call `silt_bson::compare::cmp_collated`, which reads
//! it. `None` everywhere means the simple (binary) collation. A collated index stores
//! [`Collation::key`] of every string instead of the string itself (see `docs/keys.md`).

use std::cmp::Ordering;
use std::sync::Arc;

use bson::{doc, Bson, Document};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, MaxVariable, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering};
use icu_collator::{Collator, CollatorBorrowed, CollatorPreferences};
use silt_bson::compare::{CollationScope, StringOrder};

use crate::error::{QResult, QueryError};

/// The ICU version MongoDB 7.0 reports in a resolved collation's `version`.
const VERSION: &str = "57.1";

/// Locales MongoDB accepts (its documented list), as written in a collation's `locale`.
const LOCALES: &[&str] = &[
    "af",
    "sq",
    "am",
    "ar",
    "hy",
    "as",
    "az",
    "be",
    "bn",
    "bs",
    "bs_Cyrl",
    "bg",
    "my",
    "ca",
    "chr",
    "zh",
    "zh_Hant",
    "hr",
    "cs",
    "da",
    "nl",
    "dz",
    "en",
    "en_US",
    "en_US_POSIX",
    "eo",
    "et",
    "ee",
    "fo",
    "fil",
    "fi",
    "fi_FI",
    "fr",
    "fr_CA",
    "gl",
    "ka",
    "de",
    "de_AT",
    "el",
    "gu",
    "ha",
    "haw",
    "he",
    "hi",
    "hu",
    "is",
    "ig",
    "smn",
    "id",
    "ga",
    "it",
    "ja",
    "kl",
    "kn",
    "kk",
    "km",
    "kok",
    "ko",
    "ky",
    "lk",
    "lo",
    "lt",
    "dsb",
    "lb",
    "mk",
    "ms",
    "ml",
    "mt",
    "mr",
    "mn",
    "ne",
    "se",
    "nb",
    "nn",
    "or",
    "om",
    "ps",
    "fa",
    "fa_AF",
    "pl",
    "pt",
    "pa",
    "ro",
    "ru",
    "sr",
    "sr_Latn",
    "si",
    "sk",
    "sl",
    "es",
    "sw",
    "sv",
    "ta",
    "te",
    "th",
    "bo",
    "to",
    "tr",
    "uk",
    "hsb",
    "ur",
    "ug",
    "vi",
    "wae",
    "cy",
    "yi",
    "yo",
    "zu",
    "lv",
    "ln",
    "de@collation=phonebook",
    "es@collation=traditional",
    "zh@collation=pinyin",
    "zh@collation=stroke",
    "zh@collation=zhuyin",
    "zh@collation=unihan",
    "si@collation=dictionary",
    "ko@collation=search",
    "sv@collation=search",
];

/// A parsed, resolved, non-simple collation.
#[derive(Debug)]
pub struct Collation {
    /// The resolved spec, every field filled in, as replies show it.
    spec: Document,
    collator: CollatorBorrowed<'static>,
}

impl StringOrder for Collation {
    fn cmp_str(&self, a: &str, b: &str) -> Ordering {
        self.collator.compare(a, b)
    }

    fn spec(&self) -> &Document {
        &self.spec
    }
}

fn bad(msg: String) -> QueryError {
    QueryError::bad_value(msg)
}

fn parse_err(msg: String) -> QueryError {
    QueryError::failed_to_parse(msg)
}

fn get_bool(spec: &Document, field: &str) -> QResult<Option<bool>> {
    match spec.get(field) {
        None => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(_) => Err(QueryError::type_mismatch(format!(
            "\"{field}\" had the wrong type. Expected bool"
        ))),
    }
}

fn get_str<'a>(spec: &'a Document, field: &str) -> QResult<Option<&'a str>> {
    match spec.get(field) {
        None => Ok(None),
        Some(Bson::String(s)) => Ok(Some(s)),
        Some(_) => Err(QueryError::type_mismatch(format!(
            "\"{field}\" had the wrong type. Expected string"
        ))),
    }
}

impl Collation {
    /// Parse a `collation` argument. `Ok(None)` is the simple collation (`{locale: "simple"}`).
    pub fn parse(v: &Bson) -> QResult<Option<Arc<Collation>>> {
        let Bson::Document(spec) = v else {
            return Err(QueryError::type_mismatch(
                "collation must be an object".to_string(),
            ));
        };
        let shown = Bson::Document(spec.clone()).into_relaxed_extjson();
        let locale = match spec.get("locale") {
            None => {
                return Err(QueryError::coded(
                    40414,
                    "Location40414",
                    "BSON field 'locale' is missing but a required field",
                ))
            }
            Some(Bson::String(s)) => s.as_str(),
            Some(_) => {
                return Err(QueryError::type_mismatch(
                    "\"locale\" had the wrong type. Expected string",
                ))
            }
        };
        if locale.contains('\0') {
            return Err(bad(format!(
                "Field 'locale' cannot contain null byte. Collation spec: {shown}"
            )));
        }
        if locale == "simple" {
            if spec.len() > 1 {
                return Err(parse_err(format!(
                    "If locale=simple, no other fields should be present in: {shown}"
                )));
            }
            return Ok(None);
        }
        if locale.is_empty() {
            return Err(bad(format!(
                "Field 'locale' cannot be the empty string in: {shown}"
            )));
        }
        if !LOCALES.contains(&locale) {
            return Err(bad(format!("Field 'locale' is invalid in: {shown}")));
        }
        const KNOWN: &[&str] = &[
            "locale",
            "caseLevel",
            "caseFirst",
            "strength",
            "numericOrdering",
            "alternate",
            "maxVariable",
            "normalization",
            "backwards",
            "version",
        ];
        if spec.keys().any(|k| !KNOWN.contains(&k.as_str())) {
            return Err(parse_err(format!(
                "Collation spec contains unknown field. Collation spec: {shown}"
            )));
        }
        let bcp47 = match locale.split_once("@collation=") {
            Some((lang, kind)) => format!("{}-u-co-{kind}", lang.replace('_', "-")),
            None => locale.replace('_', "-"),
        };
        let loc = icu_locale_core::Locale::try_from_str(&bcp47)
            .map_err(|_| bad(format!("Field 'locale' is not valid in: {shown}")))?;
        let mut prefs = CollatorPreferences::from(&loc);
        let mut options = CollatorOptions::default();
        let case_level = get_bool(spec, "caseLevel")?;
        if let Some(c) = case_level {
            options.case_level = Some(if c { CaseLevel::On } else { CaseLevel::Off });
        }
        if let Some(c) = get_str(spec, "caseFirst")? {
            prefs.case_first = Some(match c {
                "upper" => CollationCaseFirst::Upper,
                "lower" => CollationCaseFirst::Lower,
                "off" => CollationCaseFirst::False,
                other => {
                    return Err(parse_err(format!(
                        "Field 'caseFirst' must be 'upper', 'lower', or 'off'. Got: {other}"
                    )))
                }
            });
        }
        if let Some(v) = spec.get("strength") {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "an integral double; past the i64 range it saturates, and the 1 to 5 \
                          check refuses it"
            )]
            let n = match v {
                Bson::Int32(i) => *i as i64,
                Bson::Int64(i) => *i,
                Bson::Double(d) if d.fract() == 0.0 => *d as i64,
                _ => {
                    return Err(QueryError::type_mismatch(
                        "\"strength\" had the wrong type. Expected number",
                    ))
                }
            };
            options.strength = Some(match n {
                1 => Strength::Primary,
                2 => Strength::Secondary,
                3 => Strength::Tertiary,
                4 => Strength::Quaternary,
                5 => Strength::Identical,
                _ => {
                    return Err(parse_err(format!(
                        "Field 'strength' must be an integer 1 through 5. Got: {n}"
                    )))
                }
            });
        }
        if let Some(n) = get_bool(spec, "numericOrdering")? {
            prefs.numeric_ordering = Some(if n {
                CollationNumericOrdering::True
            } else {
                CollationNumericOrdering::False
            });
        }
        if let Some(a) = get_str(spec, "alternate")? {
            options.alternate_handling = Some(match a {
                "non-ignorable" => AlternateHandling::NonIgnorable,
                "shifted" => AlternateHandling::Shifted,
                other => {
                    return Err(parse_err(format!(
                        "Field 'alternate' must be 'non-ignorable' or 'shifted'. Got: {other}"
                    )))
                }
            });
        }
        if let Some(m) = get_str(spec, "maxVariable")? {
            options.max_variable = Some(match m {
                "punct" => MaxVariable::Punctuation,
                "space" => MaxVariable::Space,
                other => {
                    return Err(parse_err(format!(
                        "Field 'maxVariable' must be 'punct' or 'space'. Got: {other}"
                    )))
                }
            });
        }
        // ICU4X always normalizes its input, which gives the answers of `normalization: true`
        // for every string and of `false` for every string already in FCD form (all that
        // ICU4C's fast path is correct for); both are accepted and reported as given.
        let normalization = get_bool(spec, "normalization")?.unwrap_or(false);
        // Backward secondary weights come only with the locale (Canadian French) in ICU4X.
        let locale_backwards = locale == "fr_CA";
        let backwards = get_bool(spec, "backwards")?.unwrap_or(locale_backwards);
        if backwards != locale_backwards {
            return Err(QueryError::not_implemented(format!(
                "collation option backwards: {backwards} is not supported for locale {locale}: \
                 siltd takes backward secondary weighting from the locale (on for fr_CA only)"
            )));
        }
        if let Some(v) = get_str(spec, "version")? {
            if v != VERSION {
                return Err(QueryError::coded(
                    109,
                    "IncompatibleCollationVersion",
                    format!(
                        "Requested collation version {v} but the only available collator \
                         version was {VERSION}. Requested collation spec: {shown}"
                    ),
                ));
            }
        }
        let collator = Collator::try_new(prefs, options)
            .map_err(|e| QueryError::operation_failed(format!("Failed to create collator: {e}")))?;
        let r = collator.resolved_options();
        let strength = match r.strength {
            Strength::Primary => 1,
            Strength::Secondary => 2,
            Strength::Tertiary => 3,
            Strength::Quaternary => 4,
            _ => 5,
        };
        let case_level = matches!(r.case_level, CaseLevel::On);
        let case_first = match r.case_first {
            CollationCaseFirst::Upper => "upper",
            CollationCaseFirst::Lower => "lower",
            _ => "off",
        };
        if case_first != "off" && !case_level && strength < 3 {
            return Err(bad(format!(
                "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is greater \
                 than 2 in: {shown}"
            )));
        }
        if backwards && strength == 1 {
            return Err(bad(format!(
                "'backwards' is invalid with 'strength' of 1 in: {shown}"
            )));
        }
        let resolved = doc! {
            "locale": locale,
            "caseLevel": case_level,
            "caseFirst": case_first,
            "strength": strength,
            "numericOrdering": matches!(r.numeric, CollationNumericOrdering::True),
            "alternate": match r.alternate_handling {
                AlternateHandling::Shifted => "shifted",
                _ => "non-ignorable",
            },
            "maxVariable": match r.max_variable {
                MaxVariable::Space => "space",
                _ => "punct",
            },
            "normalization": normalization,
            "backwards": backwards,
            "version": VERSION,
        };
        Ok(Some(Arc::new(Collation {
            spec: resolved,
            collator,
        })))
    }

    /// The resolved spec (every field, as `listIndexes` and `listCollections` show it).
    pub fn resolved(&self) -> &Document {
        &self.spec
    }

    /// Install `c` as the collation of the command running on this thread until the guard
    /// drops.
    pub fn scope(c: Option<&Arc<Collation>>) -> CollationScope {
        CollationScope::enter(c.map(|c| c.clone() as Arc<dyn StringOrder>))
    }

    /// The string a collated index stores for `s`: its ICU sort key in lowercase hex, so that
    /// bytewise order of keys is the collation's order of strings.
    pub fn key_of_str(&self, s: &str) -> String {
        let mut bytes: Vec<u8> = Vec::new();
        let Ok(()) = self.collator.write_sort_key_to(s, &mut bytes);
        let mut out = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            out.push(char::from_digit((b >> 4) as u32, 16).unwrap_or('0'));
            out.push(char::from_digit((b & 15) as u32, 16).unwrap_or('0'));
        }
        out
    }

    /// `v` with every string in it (nested ones too; not field names) replaced by its
    /// [`Collation::key_of_str`].
    pub fn key(&self, v: &Bson) -> Bson {
        match v {
            Bson::String(s) => Bson::String(self.key_of_str(s)),
            Bson::Symbol(s) => Bson::String(self.key_of_str(s)),
            Bson::Array(a) => Bson::Array(a.iter().map(|x| self.key(x)).collect()),
            Bson::Document(d) => {
                Bson::Document(d.iter().map(|(k, x)| (k.clone(), self.key(x))).collect())
            }
            other => other.clone(),
        }
    }
}

/// Two optional collations are the same (both simple, or the same resolved spec).
pub fn same(a: Option<&Arc<Collation>>, b: Option<&Arc<Collation>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x.spec == y.spec,
        _ => false,
    }
}

/// Does `v` hold a string anywhere (nested ones too)? Such a value compares differently
/// under a collation.
pub fn has_string(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Array(a) => a.iter().any(has_string),
        Bson::Document(d) => d.values().any(has_string),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use silt_bson::compare::{cmp_collated, cmp_values};

    fn coll(spec: Document) -> Arc<Collation> {
        Collation::parse(&Bson::Document(spec)).unwrap().unwrap()
    }

    #[test]
    fn resolves_defaults_and_refuses_bad_specs() {
        let c = coll(doc! { "locale": "en_US" });
        assert_eq!(c.resolved().get_i32("strength").unwrap(), 3);
        assert_eq!(c.resolved().get_str("caseFirst").unwrap(), "off");
        assert!(
            Collation::parse(&Bson::Document(doc! { "locale": "simple" }))
                .unwrap()
                .is_none()
        );
        for (spec, code) in [
            (doc! { "locale": "xx_YY" }, 2),
            (doc! { "locale": "en", "strength": 6 }, 9),
            (doc! { "locale": "en", "foo": 1 }, 9),
            (doc! { "strength": 1 }, 40414),
            (
                doc! { "locale": "en", "caseFirst": "upper", "strength": 1 },
                2,
            ),
            (doc! { "locale": "simple", "strength": 1 }, 9),
            (doc! { "locale": "en", "backwards": true }, 238),
        ] {
            let e = Collation::parse(&Bson::Document(spec.clone())).unwrap_err();
            assert_eq!(e.code, code, "{spec}: {e:?}");
        }
    }

    #[test]
    fn strength_case_and_numeric() {
        let s2 = coll(doc! { "locale": "en", "strength": 2 });
        let _g = Collation::scope(Some(&s2));
        let a = Bson::String("abc".into());
        let b = Bson::String("ABC".into());
        assert_eq!(cmp_collated(&a, &b), Ordering::Equal);
        assert_ne!(cmp_values(&a, &b), Ordering::Equal);
        drop(_g);
        assert_ne!(cmp_collated(&a, &b), Ordering::Equal);
        let num = coll(doc! { "locale": "en", "numericOrdering": true });
        let _g = Collation::scope(Some(&num));
        assert_eq!(
            cmp_collated(&Bson::String("10".into()), &Bson::String("9".into())),
            Ordering::Greater
        );
    }

    proptest::proptest! {
        /// Collation keys order and equate exactly as the collator compares, for every
        /// strength and the options that change weights.
        #[test]
        fn keys_agree_with_compare(
            a in "[aAäÄbB1-9 \\-.]{0,6}",
            b in "[aAäÄbB1-9 \\-.]{0,6}",
            strength in 1i32..=5,
            numeric: bool,
            shifted: bool,
        ) {
            let c = coll(doc! {
                "locale": "en",
                "strength": strength,
                "numericOrdering": numeric,
                "alternate": if shifted { "shifted" } else { "non-ignorable" },
            });
            proptest::prop_assert_eq!(c.cmp_str(&a, &b), c.key_of_str(&a).cmp(&c.key_of_str(&b)));
        }
    }

    #[test]
    fn keys_order_as_the_collation() {
        let c = coll(doc! { "locale": "de", "strength": 1 });
        let words = ["Äpfel", "apfel", "Zebra", "zahl", "über", "Ufer", "a", ""];
        for x in words {
            for y in words {
                assert_eq!(
                    c.cmp_str(x, y),
                    c.key_of_str(x).cmp(&c.key_of_str(y)),
                    "{x} vs {y}"
                );
            }
        }
    }
}
