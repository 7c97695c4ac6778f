//! String keys as the differential tests model them (RL.MULTI, RL.SLIDING): each
//! logical key's value and absolute expiry, copied into the core's keys in memory for a
//! call, changed by the writes the call returns, and compared with what the server
//! shows.

use ratelimit_core::call::memory::Key;
use ratelimit_core::call::state::Encode;
use ratelimit_core::{Effect, UnixMillis};

/// One logical key as the model sees it: value and absolute expiry (`None`: no TTL).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyModel {
    pub value: Vec<u8>,
    pub expires: Option<u64>,
}

/// What [`super::state`] reads from the server for a key of the model (`None`:
/// missing): the value and `PEXPIRETIME` (-2 missing, -1 no TTL).
pub fn observed(m: &Option<KeyModel>) -> (Option<String>, i64) {
    match m {
        None => (None, -2),
        Some(k) => (
            Some(String::from_utf8_lossy(&k.value).into_owned()),
            k.expires.map_or(-1, |e| e as i64),
        ),
    }
}

/// A copy of the key as the core's keys in memory hold it (`None`: missing).
pub fn key(m: &Option<KeyModel>) -> Option<Key> {
    m.as_ref().map(|m| Key::String {
        value: m.value.clone(),
        expires_at: m.expires.map(UnixMillis),
    })
}

/// Apply a call's writes, each `(logical key, effect)`, to the models.
pub fn apply<S: Encode>(models: &mut [Option<KeyModel>], effects: Vec<(usize, Effect<S>)>) {
    for (k, e) in effects {
        match e {
            Effect::None => {}
            Effect::Delete => models[k] = None,
            Effect::Set { state, expires_at } => {
                let mut value = Vec::new();
                state.encode(&mut value);
                models[k] = Some(KeyModel {
                    value,
                    expires: Some(expires_at.0),
                })
            }
            Effect::ExpireAt(t) => {
                if let Some(m) = models[k].as_mut() {
                    m.expires = Some(t.0);
                }
            }
        }
    }
}
