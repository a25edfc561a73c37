//! How the members of a replica set authenticate one another: every `_siltRaft` request
//! carries an HMAC-SHA256, keyed by the `--keyFile` key, of the set's name, the sender and
//! receiver, the send time and the body (mongod authenticates members with the same shared
//! key, as SCRAM's `__system` user). A request without a valid seal, or sealed more than
//! [`SKEW`] away from the receiver's clock, is refused; a server without a key and without
//! `--auth` takes unsealed requests, as before.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bson::{Bson, Document};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use silt_query::{QResult, QueryError};

/// How far a request's send time may be from the receiver's clock.
pub(crate) const SKEW: Duration = Duration::from_secs(300);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The HMAC of a request's fields, ready to finish or verify.
fn hasher(key: &[u8], set: &str, from: i64, to: i64, at: i64, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).ok()?;
    for part in [
        set.as_bytes(),
        &from.to_be_bytes(),
        &to.to_be_bytes(),
        &at.to_be_bytes(),
    ] {
        m.update(&u64::try_from(part.len()).unwrap_or(0).to_be_bytes());
        m.update(part);
    }
    m.update(body);
    Some(m)
}

/// Seal a request: its `at` and `mac` fields.
pub(crate) fn seal(key: &[u8], set: &str, from: i64, to: i64, body: &[u8]) -> (i64, Vec<u8>) {
    let at = now_ms();
    let mac = hasher(key, set, from, to, at, body)
        .map(|m| m.finalize().into_bytes().to_vec())
        .unwrap_or_default();
    (at, mac)
}

fn refused(why: &str) -> QueryError {
    QueryError::coded(
        18,
        "AuthenticationFailed",
        format!("member authentication failed: {why}"),
    )
}

/// Check the seal of a `_siltRaft` request (`cmd`), when this server has a key (`key`) or
/// requires authentication (`auth`).
pub(crate) fn check(key: Option<&[u8]>, auth: bool, cmd: &Document) -> QResult<()> {
    let Some(key) = key else {
        return if auth {
            Err(refused("this server has no keyFile, and --auth is on"))
        } else {
            Ok(())
        };
    };
    let num = |k: &str| match cmd.get(k) {
        Some(Bson::Int64(n)) => Some(*n),
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        _ => None,
    };
    let (Some(from), Some(to), Some(at)) = (num("from"), num("to"), num("at")) else {
        return Err(refused("the request is not sealed"));
    };
    let (Ok(body), Ok(seal)) = (
        cmd.get_binary_generic("body"),
        cmd.get_binary_generic("mac"),
    ) else {
        return Err(refused("the request is not sealed"));
    };
    let skew = now_ms().saturating_sub(at).unsigned_abs();
    if Duration::from_millis(skew) > SKEW {
        return Err(refused(
            "the request's time is too far from this member's clock",
        ));
    }
    let set = cmd.get_str("setName").unwrap_or_default();
    let Some(m) = hasher(key, set, from, to, at, body) else {
        return Err(refused("a bad key"));
    };
    m.verify_slice(seal)
        .map_err(|_| refused("the keyFile differs from this member's"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn request(key: &[u8], body: &[u8]) -> Document {
        let (at, m) = seal(key, "rs0", 1, 2, body);
        doc! {
            "_siltRaft": 1, "setName": "rs0", "from": 1i64, "to": 2i64, "at": at,
            "body": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: body.to_vec() },
            "mac": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: m },
        }
    }

    #[test]
    fn a_sealed_request_passes_and_a_changed_one_does_not() {
        let key = b"abcdefghij";
        let r = request(key, b"payload");
        assert!(check(Some(key), true, &r).is_ok());
        assert!(check(Some(b"otherkey12"), true, &r).is_err());
        let mut changed = r.clone();
        changed.insert(
            "body",
            bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: b"payloae".to_vec(),
            },
        );
        assert!(check(Some(key), true, &changed).is_err());
        let mut moved = r.clone();
        moved.insert("to", 3i64);
        assert!(check(Some(key), true, &moved).is_err());
        let mut old = r;
        old.insert("at", 1i64);
        assert!(check(Some(key), true, &old).is_err());
        assert!(check(None, true, &doc! {}).is_err());
        assert!(check(None, false, &doc! {}).is_ok());
    }
}
