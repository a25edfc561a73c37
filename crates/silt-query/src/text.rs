//! Text search as MongoDB's text indexes (version 3) do it: which strings of a document a
//! text index reads and with what weight, how they are cut into terms (Unicode letters and
//! digits, case and diacritics folded, stop words dropped, Snowball stems from
//! `rust-stemmers`, stop words from `stop-words`' NLTK lists), each term's score in a
//! document (mongod's formula), and `$text` queries: terms, `"phrases"`, `-negations`.
//!
//! A [`TextIndexSpec`] is what a text index stores for its keys (`term`, `score`); a
//! [`TextQuery`] is a parsed `$text`, bound to the collection's text index by the planner
//! ([`TextQuery::bind`]) before a document can be tested or scored.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use bson::{doc, Bson, Document};
use rust_stemmers::{Algorithm, Stemmer};

use crate::error::{QResult, QueryError};

/// The field a `$text` query's score travels under from the scan to `{$meta: "textScore"}`.
/// A NUL cannot be in a BSON field name, so it never collides with a stored field, and it
/// is removed before a document is returned (a leak would fail to serialize, not mislead).
pub const SCORE_FIELD: &str = "\u{0}textScore";

/// `{$meta: "textScore"}` of a document whose score is `v` (40218 when the document came
/// from no `$text` match).
pub(crate) fn meta_score(v: Option<Bson>) -> QResult<Option<Bson>> {
    match v {
        Some(v) => Ok(Some(v)),
        None => Err(QueryError::located(
            40218,
            "query requires text score metadata, but it is not available",
        )),
    }
}

/// A language of text indexes: MongoDB's name, its Snowball stemmer, its stop words.
#[derive(Clone, Copy, Debug)]
pub struct Language {
    pub name: &'static str,
    stemmer: Option<Algorithm>,
    stop_code: Option<&'static str>,
}

/// MongoDB's text search languages (names and ISO 639-1 codes), and "none".
const LANGUAGES: &[(&str, &str, Option<Algorithm>, Option<&str>)] = &[
    ("danish", "da", Some(Algorithm::Danish), Some("da")),
    ("dutch", "nl", Some(Algorithm::Dutch), Some("nl")),
    ("english", "en", Some(Algorithm::English), Some("en")),
    ("finnish", "fi", Some(Algorithm::Finnish), Some("fi")),
    ("french", "fr", Some(Algorithm::French), Some("fr")),
    ("german", "de", Some(Algorithm::German), Some("de")),
    ("hungarian", "hu", Some(Algorithm::Hungarian), Some("hu")),
    ("italian", "it", Some(Algorithm::Italian), Some("it")),
    ("norwegian", "nb", Some(Algorithm::Norwegian), Some("no")),
    ("portuguese", "pt", Some(Algorithm::Portuguese), Some("pt")),
    ("romanian", "ro", Some(Algorithm::Romanian), Some("ro")),
    ("russian", "ru", Some(Algorithm::Russian), Some("ru")),
    ("spanish", "es", Some(Algorithm::Spanish), Some("es")),
    ("swedish", "sv", Some(Algorithm::Swedish), Some("sv")),
    ("turkish", "tr", Some(Algorithm::Turkish), Some("tr")),
    ("none", "none", None, None),
];

impl Language {
    /// The language named `s` (a MongoDB name or code, any case).
    pub fn find(s: &str) -> Option<Language> {
        let l = s.to_lowercase();
        LANGUAGES
            .iter()
            .find(|(name, code, _, _)| *name == l || *code == l)
            .map(|(name, _, stemmer, stop)| Language {
                name,
                stemmer: *stemmer,
                stop_code: *stop,
            })
    }

    fn is_stop_word(&self, w: &str) -> bool {
        self.stop_code
            .and_then(stop_words::lookup)
            .is_some_and(|list| list.contains(&w))
    }

    /// The terms of `text` in this language, in order, with repeats.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let stemmer = self.stemmer.map(Stemmer::create);
        tokens(text)
            .into_iter()
            .filter(|t| !self.is_stop_word(t))
            .map(|t| match &stemmer {
                Some(s) => s.stem(&t).into_owned(),
                None => t,
            })
            .collect()
    }
}

/// Case and diacritics folded: lowercase, decomposed, combining marks dropped.
pub fn fold(s: &str) -> String {
    let lower = s.to_lowercase();
    let nfd = icu_normalizer::DecomposingNormalizerBorrowed::new_nfd().normalize(&lower);
    nfd.chars().filter(|c| !is_combining_mark(*c)).collect()
}

fn is_combining_mark(c: char) -> bool {
    matches!(c as u32,
        0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

/// The words of `s`: maximal runs of letters and digits, folded.
fn tokens(s: &str) -> Vec<String> {
    fold(s)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn bad(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::located(code, msg)
}

/// What a text index reads: fields and weights, languages.
#[derive(Clone, Debug, PartialEq)]
pub struct TextIndexSpec {
    /// Dotted field paths and their weights, in name order (MongoDB's `weights`).
    pub weights: BTreeMap<String, i32>,
    /// `$**`: every string of the document, with this weight unless `weights` names it.
    pub wildcard: Option<i32>,
    pub default_language: String,
    pub language_override: String,
}

impl TextIndexSpec {
    /// Parse the text part of an index spec (`key` with `"text"` values or, as stored,
    /// `{_fts: "text", _ftsx: 1}` with `weights`). `Ok(None)` when the key has no text field.
    pub fn parse(spec: &Document) -> QResult<Option<TextIndexSpec>> {
        let Ok(key) = spec.get_document("key") else {
            return Ok(None);
        };
        let stored = key.get_str("_fts") == Ok("text");
        let text_fields: Vec<&String> = key
            .iter()
            .filter(|(_, v)| matches!(v, Bson::String(s) if s == "text"))
            .map(|(k, _)| k)
            .collect();
        if !stored && text_fields.is_empty() {
            return Ok(None);
        }
        if key
            .iter()
            .any(|(k, v)| !(matches!(v, Bson::String(s) if s == "text") || stored && k == "_ftsx"))
        {
            return Err(QueryError::not_implemented(
                "compound text indexes (a text index with other keys) are not supported by siltd",
            ));
        }
        let mut weights = BTreeMap::new();
        let mut wildcard = None;
        for f in &text_fields {
            if f.as_str() == "$**" {
                wildcard = Some(1);
            } else if f.as_str() != "_fts" {
                weights.insert((*f).clone(), 1);
            }
        }
        match spec.get("weights") {
            None => {}
            Some(Bson::String(s)) if s == "$**" => wildcard = Some(1),
            Some(Bson::Document(w)) => {
                for (k, v) in w {
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "a double weight drops its fraction and saturates past the i64 \
                                  range; the range check below refuses what is out of range"
                    )]
                    let n = match v {
                        Bson::Int32(i) => *i as i64,
                        Bson::Int64(i) => *i,
                        Bson::Double(d) => *d as i64,
                        _ => return Err(bad(17283, "weight for text index needs numeric type")),
                    };
                    if !(1..100_000).contains(&n) {
                        return Err(bad(16674, "score for word too high"));
                    }
                    let bad_path =
                        k.is_empty() || k.split('.').any(|p| p.is_empty() || p.starts_with('$'));
                    if bad_path && k != "$**" {
                        return Err(bad(17291, "weight cannot have empty path component"));
                    }
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "checked to be in 1..100000 above"
                    )]
                    let n = n as i32;
                    if k == "$**" {
                        wildcard = Some(n);
                    } else {
                        weights.insert(k.clone(), n);
                    }
                }
            }
            Some(_) => return Err(bad(17284, "text index option 'weights' must be an object")),
        }
        let default_language = match spec.get("default_language") {
            None => "english".to_string(),
            Some(Bson::String(s)) => match Language::find(s) {
                Some(l) => l.name.to_string(),
                None => return Err(bad(17264, "default_language is not valid")),
            },
            Some(_) => return Err(bad(17263, "default_language needs a string type")),
        };
        let language_override = match spec.get("language_override") {
            None => "language".to_string(),
            Some(Bson::String(s)) if !s.is_empty() && !s.starts_with('$') => s.clone(),
            Some(_) => return Err(bad(17136, "language_override is not valid")),
        };
        match spec.get("textIndexVersion") {
            None | Some(Bson::Int32(3)) | Some(Bson::Int64(3)) => {}
            Some(Bson::Double(d)) if *d == 3.0 => {}
            Some(v) => {
                return Err(QueryError::not_implemented(format!(
                    "textIndexVersion {v} (siltd builds version 3)"
                )))
            }
        }
        Ok(Some(TextIndexSpec {
            weights,
            wildcard,
            default_language,
            language_override,
        }))
    }

    /// The fields `listIndexes` shows for the index besides `key` and `name`.
    pub fn describe(&self, d: &mut Document) {
        let mut w = Document::new();
        if let Some(n) = self.wildcard {
            w.insert("$**", n);
        }
        for (k, v) in &self.weights {
            w.insert(k.clone(), *v);
        }
        d.insert("weights", w);
        d.insert("default_language", self.default_language.clone());
        d.insert("language_override", self.language_override.clone());
        d.insert("textIndexVersion", 3);
    }

    /// The key pattern MongoDB shows for a text index.
    pub fn key_pattern() -> Document {
        doc! { "_fts": "text", "_ftsx": 1 }
    }

    /// The language `doc` is written in (its override field, else the default).
    fn language_of(&self, doc: &Document) -> QResult<Language> {
        match doc.get(&self.language_override) {
            None => Ok(Language::find(&self.default_language).unwrap_or(ENGLISH)),
            Some(Bson::String(s)) => Language::find(s)
                .ok_or_else(|| bad(17262, format!("language override unsupported: {s}"))),
            Some(_) => Err(bad(
                17261,
                "found language override field in document with non-string type",
            )),
        }
    }

    /// The strings the index reads in `doc`, each with its weight.
    pub fn strings<'a>(&self, doc: &'a Document) -> Vec<(&'a str, f64)> {
        let mut out = Vec::new();
        if let Some(w) = self.wildcard {
            wildcard_strings(doc, "", &self.weights, w, &mut out);
        } else {
            for (path, w) in &self.weights {
                let parts: Vec<&str> = path.split('.').collect();
                for s in strings_at(doc, &parts) {
                    out.push((s, f64::from(*w)));
                }
            }
        }
        out
    }

    /// Each term of `doc` and its score (mongod's `_scoreStringV2`, summed over the strings).
    pub fn term_scores(&self, doc: &Document) -> QResult<BTreeMap<String, f64>> {
        let lang = self.language_of(doc)?;
        let mut scores: BTreeMap<String, f64> = BTreeMap::new();
        for (raw, weight) in self.strings(doc) {
            score_string(&lang, raw, weight, &mut scores);
        }
        Ok(scores)
    }
}

const ENGLISH: Language = Language {
    name: "english",
    stemmer: Some(Algorithm::English),
    stop_code: Some("en"),
};

/// The strings at `parts` (arrays traversed at every level).
fn strings_at<'a>(doc: &'a Document, parts: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    fn walk<'a>(v: &'a Bson, parts: &[&str], out: &mut Vec<&'a str>) {
        match (v, parts.first()) {
            (Bson::String(s), None) => out.push(s),
            (Bson::Array(a), _) => a.iter().for_each(|x| walk(x, parts, out)),
            (Bson::Document(d), Some(p)) => {
                if let Some(x) = d.get(*p) {
                    walk(x, &parts[1..], out)
                }
            }
            _ => {}
        }
    }
    if let Some((first, rest)) = parts.split_first() {
        if let Some(v) = doc.get(*first) {
            walk(v, rest, &mut out);
        }
    }
    out
}

fn wildcard_strings<'a>(
    doc: &'a Document,
    prefix: &str,
    weights: &BTreeMap<String, i32>,
    dflt: i32,
    out: &mut Vec<(&'a str, f64)>,
) {
    for (k, v) in doc {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let w = f64::from(weights.get(&path).copied().unwrap_or(dflt));
        let mut vals = vec![v];
        while let Some(v) = vals.pop() {
            match v {
                Bson::String(s) => out.push((s, w)),
                Bson::Array(a) => vals.extend(a.iter()),
                Bson::Document(d) => wildcard_strings(d, &path, weights, dflt, out),
                _ => {}
            }
        }
    }
}

/// mongod's per-string scoring: repeated terms count less each time (1, 1/2, 1/4, ...),
/// scaled by how much of the string the term is, a small boost when the term is the whole
/// string, times the field's weight.
fn score_string(lang: &Language, raw: &str, weight: f64, scores: &mut BTreeMap<String, f64>) {
    #[derive(Default)]
    struct Acc {
        exp: f64,
        count: f64,
        freq: f64,
    }
    let mut terms: BTreeMap<String, Acc> = BTreeMap::new();
    let mut n = 0u32;
    for t in lang.terms(raw) {
        let a = terms.entry(t).or_default();
        a.exp = if a.exp == 0.0 { 1.0 } else { a.exp * 2.0 };
        a.count += 1.0;
        a.freq += 1.0 / a.exp;
        n += 1;
    }
    for (term, a) in terms {
        let coeff = 0.5 * a.count / f64::from(n) + 0.5;
        let adjustment = if raw.len() == term.len() && raw.eq_ignore_ascii_case(&term) {
            1.1
        } else {
            1.0
        };
        *scores.entry(term).or_insert(0.0) += weight * a.freq * coeff * adjustment;
    }
}

/// A parsed `$text` filter.
#[derive(Debug)]
pub struct TextQuery {
    search: String,
    language: Option<String>,
    bound: OnceLock<Arc<BoundText>>,
}

/// A `$text` query in the terms of one text index.
#[derive(Debug)]
pub struct BoundText {
    pub spec: Arc<TextIndexSpec>,
    /// Stemmed terms to look up (positive words and the words of positive phrases).
    pub terms: BTreeSet<String>,
    negated: BTreeSet<String>,
    phrases: Vec<String>,
    negated_phrases: Vec<String>,
}

impl TextQuery {
    /// Parse `{$search, $language, $caseSensitive, $diacriticSensitive}`.
    pub fn parse(v: &Bson) -> QResult<TextQuery> {
        let Bson::Document(d) = v else {
            return Err(QueryError::bad_value("$text expects an object"));
        };
        let mut search = None;
        let mut language = None;
        for (k, v) in d {
            match (k.as_str(), v) {
                ("$search", Bson::String(s)) => search = Some(s.clone()),
                ("$search", _) => {
                    return Err(QueryError::type_mismatch("$search requires a string value"))
                }
                ("$language", Bson::String(s)) => {
                    if Language::find(s).is_none() {
                        return Err(QueryError::bad_value(format!(
                            "unsupported language: \"{s}\" for text index version 3"
                        )));
                    }
                    language = Some(s.clone());
                }
                ("$language", _) => {
                    return Err(QueryError::type_mismatch(
                        "$language requires a string value",
                    ))
                }
                ("$caseSensitive" | "$diacriticSensitive", Bson::Boolean(false)) => {}
                ("$caseSensitive" | "$diacriticSensitive", Bson::Boolean(true)) => {
                    return Err(QueryError::not_implemented(format!(
                        "$text with {k}: true is not supported by siltd"
                    )))
                }
                ("$caseSensitive" | "$diacriticSensitive", _) => {
                    return Err(QueryError::type_mismatch(format!(
                        "{k} requires a boolean value"
                    )))
                }
                _ => {
                    return Err(QueryError::bad_value(format!(
                        "Unexpected field {k} in $text"
                    )))
                }
            }
        }
        let search =
            search.ok_or_else(|| QueryError::failed_to_parse("$text requires a $search field"))?;
        Ok(TextQuery {
            search,
            language,
            bound: OnceLock::new(),
        })
    }

    /// The query in `spec`'s terms (its default language unless `$language` says otherwise);
    /// the matcher and scorer use it from then on.
    pub fn bind(&self, spec: Arc<TextIndexSpec>) -> Arc<BoundText> {
        self.bound
            .get_or_init(|| {
                let lang = self
                    .language
                    .as_deref()
                    .or(Some(spec.default_language.as_str()))
                    .and_then(Language::find)
                    .unwrap_or(ENGLISH);
                Arc::new(BoundText::new(&self.search, &lang, spec))
            })
            .clone()
    }

    /// The binding made by the planner, if any.
    pub fn bound(&self) -> Option<&Arc<BoundText>> {
        self.bound.get()
    }
}

impl Clone for TextQuery {
    fn clone(&self) -> Self {
        let bound = OnceLock::new();
        if let Some(b) = self.bound.get() {
            let _ = bound.set(b.clone());
        }
        TextQuery {
            search: self.search.clone(),
            language: self.language.clone(),
            bound,
        }
    }
}

impl BoundText {
    /// mongod's query grammar: `"..."` a phrase, `-word` and `-"..."` negations (a `-`
    /// right after a space or at the start), everything else words; the words of a positive
    /// phrase are searched too.
    fn new(search: &str, lang: &Language, spec: Arc<TextIndexSpec>) -> BoundText {
        let mut b = BoundText {
            spec,
            terms: BTreeSet::new(),
            negated: BTreeSet::new(),
            phrases: Vec::new(),
            negated_phrases: Vec::new(),
        };
        let chars: Vec<char> = search.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let after_space = i == 0 || chars[i - 1].is_whitespace();
            if c == '"' || (c == '-' && after_space && chars.get(i + 1) == Some(&'"')) {
                let negated = c == '-';
                let start = if negated { i + 2 } else { i + 1 };
                let end = (start..chars.len())
                    .find(|&j| chars[j] == '"')
                    .unwrap_or(chars.len());
                let phrase: String = chars[start..end].iter().collect();
                if negated {
                    b.negated_phrases.push(fold(&phrase));
                } else {
                    b.terms.extend(lang.terms(&phrase));
                    b.phrases.push(fold(&phrase));
                }
                i = end + 1;
                continue;
            }
            if c.is_whitespace() {
                i += 1;
                continue;
            }
            let negated = c == '-' && after_space;
            let start = if negated { i + 1 } else { i };
            let end = (start..chars.len())
                .find(|&j| chars[j].is_whitespace() || chars[j] == '"')
                .unwrap_or(chars.len());
            let word: String = chars[start..end].iter().collect();
            let terms = lang.terms(&word);
            if negated {
                b.negated.extend(terms);
            } else {
                b.terms.extend(terms);
            }
            i = end.max(i + 1);
        }
        b
    }

    /// Does `doc` satisfy the query: a searched term, every phrase, no negated term or
    /// phrase (all within the index's strings)?
    pub fn matches(&self, doc: &Document) -> bool {
        let Ok(scores) = self.spec.term_scores(doc) else {
            return false;
        };
        if !self.terms.iter().any(|t| scores.contains_key(t))
            || self.negated.iter().any(|t| scores.contains_key(t))
        {
            return false;
        }
        let folded: Vec<String> = self
            .spec
            .strings(doc)
            .iter()
            .map(|(s, _)| fold(s))
            .collect();
        self.phrases
            .iter()
            .all(|p| folded.iter().any(|s| s.contains(p.as_str())))
            && !self
                .negated_phrases
                .iter()
                .any(|p| folded.iter().any(|s| s.contains(p.as_str())))
    }

    /// `doc`'s `textScore`: the sum of its scores for the searched terms.
    pub fn score(&self, doc: &Document) -> f64 {
        let Ok(scores) = self.spec.term_scores(doc) else {
            return 0.0;
        };
        self.terms.iter().filter_map(|t| scores.get(t)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(d: Document) -> Arc<TextIndexSpec> {
        Arc::new(TextIndexSpec::parse(&d).unwrap().unwrap())
    }

    #[test]
    fn terms_are_folded_stemmed_and_without_stop_words() {
        let en = Language::find("english").unwrap();
        assert_eq!(
            en.terms("The Runners were RUNNING, café!"),
            ["runner", "run", "cafe"]
        );
        assert_eq!(
            Language::find("none").unwrap().terms("The runs"),
            ["the", "runs"]
        );
        assert!(Language::find("klingon").is_none());
    }

    #[test]
    fn query_grammar_and_matching() {
        let s =
            spec(doc! { "key": { "title": "text", "body": "text" }, "weights": { "title": 10 } });
        let q = TextQuery::parse(&Bson::Document(
            doc! { "$search": "coffee -decaf \"dark roast\"" },
        ))
        .unwrap();
        let b = q.bind(s.clone());
        assert!(b.terms.contains("coffe") && b.terms.contains("dark") && b.terms.contains("roast"));
        assert!(b.negated.contains("decaf"));
        assert!(b.matches(&doc! { "title": "Coffee", "body": "a Dark Roast blend" }));
        assert!(!b.matches(&doc! { "title": "Coffee", "body": "dark and roast" }));
        assert!(!b.matches(&doc! { "title": "Coffee decaf", "body": "dark roast" }));
        let strong = b.score(&doc! { "title": "dark roast coffee", "body": "x" });
        let weak = b.score(&doc! { "title": "x", "body": "dark roast coffee" });
        assert!(strong > weak && weak > 0.0);
    }

    #[test]
    fn mongod_scores() {
        // One field, weight 1: "dark" alone scores 1.1 (the term is the whole string), and
        // in "coffee shop coffee" the term has freq 1.5 and is 2 of 3 tokens.
        let s = spec(doc! { "key": { "a": "text" } });
        let dark = TextQuery::parse(&Bson::Document(doc! { "$search": "dark" })).unwrap();
        assert!((dark.bind(s.clone()).score(&doc! { "a": "dark" }) - 1.1).abs() < 1e-9);
        let q = TextQuery::parse(&Bson::Document(doc! { "$search": "coffee" })).unwrap();
        let b = q.bind(s);
        assert!((b.score(&doc! { "a": "coffee" }) - 1.0).abs() < 1e-9);
        let want = 1.5 * (0.5 * 2.0 / 3.0 + 0.5);
        assert!((b.score(&doc! { "a": "coffee shop coffee" }) - want).abs() < 1e-9);
    }
}
