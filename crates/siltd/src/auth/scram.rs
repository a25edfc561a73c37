//! SCRAM (RFC 5802, RFC 7677) as MongoDB speaks it: the server's side of a SCRAM-SHA-1 or
//! SCRAM-SHA-256 conversation, and the credentials it checks proofs against.
//!
//! MongoDB's twists: SCRAM-SHA-1's password is first digested as
//! `hex(md5(user + ":mongo:" + password))`; SCRAM-SHA-256's is SASLprep'd. Only the salted
//! keys (`storedKey`, `serverKey`) are stored, never the password.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// A SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mech {
    Sha1,
    Sha256,
}

impl Mech {
    pub(crate) const ALL: [Mech; 2] = [Mech::Sha1, Mech::Sha256];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mech::Sha1 => "SCRAM-SHA-1",
            Mech::Sha256 => "SCRAM-SHA-256",
        }
    }

    pub(crate) fn from_name(n: &str) -> Option<Mech> {
        Mech::ALL.into_iter().find(|m| m.name() == n)
    }

    /// mongod's `scramIterationCount` and `scramSHA256IterationCount` defaults.
    fn iterations(self) -> u32 {
        match self {
            Mech::Sha1 => 10_000,
            Mech::Sha256 => 15_000,
        }
    }

    /// Salt length: the hash length minus 4, as mongod generates it.
    fn salt_len(self) -> usize {
        match self {
            Mech::Sha1 => 16,
            Mech::Sha256 => 28,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mech::Sha1 => Sha1::digest(data).to_vec(),
            Mech::Sha256 => Sha256::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mech::Sha1 => {
                let mut m = Hmac::<Sha1>::new_from_slice(key).expect("HMAC takes any key");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mech::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mech::Sha1 => {
                let mut out = [0u8; 20];
                pbkdf2::pbkdf2_hmac::<Sha1>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            Mech::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }

    /// The password as this mechanism feeds it to PBKDF2.
    fn prepared_password(self, user: &str, password: &str) -> Result<Vec<u8>, String> {
        match self {
            Mech::Sha1 => {
                use md5::Digest as _;
                let d = md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes());
                Ok(hex(&d).into_bytes())
            }
            Mech::Sha256 => stringprep::saslprep(password)
                .map(|p| p.into_owned().into_bytes())
                .map_err(|e| format!("password is not valid for SCRAM-SHA-256 (SASLprep): {e}")),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What is stored for one user and mechanism (`credentials.<mechanism>` in `system.users`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credential {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl Credential {
    /// Salt and hash `password` for `user` under `mech`.
    pub(crate) fn new(mech: Mech, user: &str, password: &str) -> Result<Credential, String> {
        Ok(Credential::from_prepared(
            mech,
            mech.prepared_password(user, password)?,
        ))
    }

    /// Salt and hash a password the client digested already (`digestPassword: false`):
    /// SCRAM-SHA-1's `HEX(MD5(user:mongo:password))`. SCRAM-SHA-256 hashes the password
    /// itself, so it cannot take one.
    pub(crate) fn from_client_digest(mech: Mech, digest: &str) -> Result<Credential, String> {
        match mech {
            Mech::Sha1 => Ok(Credential::from_prepared(mech, digest.as_bytes().to_vec())),
            Mech::Sha256 => Err("Use of SCRAM-SHA-256 requires undigested passwords".into()),
        }
    }

    fn from_prepared(mech: Mech, pw: Vec<u8>) -> Credential {
        let mut salt = vec![0u8; mech.salt_len()];
        rand::thread_rng().fill_bytes(&mut salt);
        let iterations = mech.iterations();
        let salted = mech.salted_password(&pw, &salt, iterations);
        let client_key = mech.hmac(&salted, b"Client Key");
        Credential {
            iterations,
            stored_key: mech.hash(&client_key),
            server_key: mech.hmac(&salted, b"Server Key"),
            salt,
        }
    }

    pub(crate) fn to_doc(&self) -> bson::Document {
        bson::doc! {
            "iterationCount": self.iterations as i32,
            "salt": B64.encode(&self.salt),
            "storedKey": B64.encode(&self.stored_key),
            "serverKey": B64.encode(&self.server_key),
        }
    }

    pub(crate) fn from_doc(d: &bson::Document) -> Option<Credential> {
        let b = |k: &str| d.get_str(k).ok().and_then(|s| B64.decode(s).ok());
        Some(Credential {
            iterations: u32::try_from(d.get_i32("iterationCount").ok()?).ok()?,
            salt: b("salt")?,
            stored_key: b("storedKey")?,
            server_key: b("serverKey")?,
        })
    }

    /// A credential for a user that does not exist: the conversation goes on as for a real
    /// one (same salt for the same name, same work) and fails at the proof, so that a client
    /// cannot tell a wrong name from a wrong password.
    pub(crate) fn decoy(mech: Mech, secret: &[u8], user: &str) -> Credential {
        let salt = mech.hmac(secret, user.as_bytes())[..mech.salt_len()].to_vec();
        let mut stored_key = vec![0u8; mech.hash(b"").len()];
        rand::thread_rng().fill_bytes(&mut stored_key);
        Credential {
            iterations: mech.iterations(),
            salt,
            server_key: stored_key.clone(),
            stored_key,
        }
    }
}

/// Why a conversation failed: a malformed message (`BadValue`-like, told to the client) or a
/// failed authentication (told only as AuthenticationFailed).
#[derive(Debug)]
pub(crate) enum ScramError {
    Protocol(String),
    Failed(String),
}

/// The parsed first client message.
#[derive(Debug)]
pub(crate) struct ClientFirst {
    /// The user name, unescaped (`=2C` is `,`, `=3D` is `=`).
    pub user: String,
    nonce: String,
    bare: String,
}

impl ClientFirst {
    pub(crate) fn parse(payload: &[u8]) -> Result<ClientFirst, ScramError> {
        let text = std::str::from_utf8(payload)
            .map_err(|_| ScramError::Protocol("SCRAM message is not UTF-8".into()))?;
        // gs2 header: no channel binding (`n`), no authzid.
        let bare = match text.strip_prefix("n,,") {
            Some(b) => b,
            None if text.starts_with("y,,") => &text[3..],
            None if text.starts_with("p=") => {
                return Err(ScramError::Protocol(
                    "SCRAM channel binding is not supported".into(),
                ))
            }
            None => return Err(ScramError::Protocol(
                "SCRAM authzid is not supported; the client's first message must begin with `n,,`"
                    .into(),
            )),
        };
        let mut user = None;
        let mut nonce = None;
        for attr in bare.split(',') {
            if let Some(v) = attr.strip_prefix("n=") {
                user = Some(unescape(v)?);
            } else if let Some(v) = attr.strip_prefix("r=") {
                nonce = Some(v.to_string());
            } else if attr.starts_with("m=") {
                return Err(ScramError::Protocol(
                    "SCRAM mandatory extensions are not supported".into(),
                ));
            }
        }
        match (user, nonce) {
            (Some(user), Some(nonce)) if !nonce.is_empty() => Ok(ClientFirst {
                user,
                nonce,
                bare: bare.to_string(),
            }),
            _ => Err(ScramError::Protocol(
                "SCRAM client-first message lacks the user name or nonce".into(),
            )),
        }
    }
}

fn unescape(v: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3);
        match code {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => {
                return Err(ScramError::Protocol(
                    "invalid escape in the SCRAM user name".into(),
                ))
            }
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A conversation waiting for the client's final message.
#[derive(Debug)]
pub(crate) struct Pending {
    pub mech: Mech,
    cred: Credential,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl Pending {
    /// Answer the client's first message: the server-first message to send.
    pub(crate) fn start(mech: Mech, first: &ClientFirst, cred: Credential) -> (Pending, Vec<u8>) {
        let mut raw = [0u8; 24];
        rand::thread_rng().fill_bytes(&mut raw);
        let nonce = format!("{}{}", first.nonce, B64.encode(raw));
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&cred.salt),
            cred.iterations
        );
        let bytes = server_first.clone().into_bytes();
        (
            Pending {
                mech,
                cred,
                client_first_bare: first.bare.clone(),
                server_first,
                nonce,
            },
            bytes,
        )
    }

    /// Check the client's final message: the server-final message (`v=` signature) if the
    /// proof is right.
    pub(crate) fn finish(self, payload: &[u8]) -> Result<Vec<u8>, ScramError> {
        let text = std::str::from_utf8(payload)
            .map_err(|_| ScramError::Protocol("SCRAM message is not UTF-8".into()))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| ScramError::Protocol("SCRAM client-final lacks the proof".into()))?;
        let mut nonce = None;
        let mut binding = None;
        for attr in without_proof.split(',') {
            if let Some(v) = attr.strip_prefix("c=") {
                binding = Some(v);
            } else if let Some(v) = attr.strip_prefix("r=") {
                nonce = Some(v);
            }
        }
        if binding.is_none() {
            return Err(ScramError::Protocol(
                "SCRAM client-final lacks the channel binding".into(),
            ));
        }
        if nonce != Some(self.nonce.as_str()) {
            return Err(ScramError::Failed("nonce mismatch".into()));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramError::Protocol("SCRAM proof is not base64".into()))?;
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let m = self.mech;
        let signature = m.hmac(&self.cred.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(ScramError::Failed("proof has the wrong length".into()));
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        // Compared in constant time: every byte is looked at whatever the first difference.
        let diff = m
            .hash(&client_key)
            .iter()
            .zip(&self.cred.stored_key)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err(ScramError::Failed("incorrect password".into()));
        }
        let server_sig = m.hmac(&self.cred.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_sig)).into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's side, written from RFC 5802, to check the server's.
    fn client_final(mech: Mech, user: &str, pw: &str, cnonce: &str, server_first: &str) -> String {
        let mut salt = None;
        let mut iters = 0;
        let mut nonce = "";
        for a in server_first.split(',') {
            if let Some(v) = a.strip_prefix("s=") {
                salt = Some(B64.decode(v).unwrap());
            } else if let Some(v) = a.strip_prefix("i=") {
                iters = v.parse().unwrap();
            } else if let Some(v) = a.strip_prefix("r=") {
                nonce = v;
            }
        }
        let pw = mech.prepared_password(user, pw).unwrap();
        let salted = mech.salted_password(&pw, &salt.unwrap(), iters);
        let ck = mech.hmac(&salted, b"Client Key");
        let sk = mech.hash(&ck);
        let without = format!("c=biws,r={nonce}");
        let am = format!("n={user},r={cnonce},{server_first},{without}");
        let sig = mech.hmac(&sk, am.as_bytes());
        let proof: Vec<u8> = ck.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        format!("{without},p={}", B64.encode(proof))
    }

    #[test]
    fn right_and_wrong_passwords() {
        for mech in Mech::ALL {
            let cred = Credential::new(mech, "alice", "s3cret").unwrap();
            for (pw, ok) in [("s3cret", true), ("wrong", false)] {
                let first = ClientFirst::parse(b"n,,n=alice,r=abcdef").unwrap();
                let (p, sf) = Pending::start(mech, &first, cred.clone());
                let sf = String::from_utf8(sf).unwrap();
                let fin = client_final(mech, "alice", pw, "abcdef", &sf);
                assert_eq!(p.finish(fin.as_bytes()).is_ok(), ok, "{mech:?} {pw}");
            }
        }
    }

    #[test]
    fn credential_round_trips_and_names_unescape() {
        let c = Credential::new(Mech::Sha256, "u", "p").unwrap();
        assert_eq!(Credential::from_doc(&c.to_doc()), Some(c));
        let f = ClientFirst::parse(b"n,,n=a=2Cb=3Dc,r=x").unwrap();
        assert_eq!(f.user, "a,b=c");
        assert!(ClientFirst::parse(b"n,,n=a=2,r=x").is_err());
        assert!(ClientFirst::parse(b"p=tls-unique,,n=a,r=x").is_err());
    }

    /// RFC 7677's test vector for SCRAM-SHA-256 (user `user`, password `pencil`).
    #[test]
    fn rfc7677_vector() {
        let m = Mech::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let ck = m.hmac(&salted, b"Client Key");
        let cred = Credential {
            iterations: 4096,
            salt,
            stored_key: m.hash(&ck),
            server_key: m.hmac(&salted, b"Server Key"),
        };
        let p = Pending {
            mech: m,
            cred,
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".into(),
            server_first:
                "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                    .into(),
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into(),
        };
        let v = p
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(v, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }
}
