//! Small serde helpers shared by the JetStream JSON types: tolerate `null` where Go would
//! leave a zero value, skip-if-zero predicates matching Go's `omitempty`, and a macro for the
//! string enums (`"limits"`, `"explicit"`, …) that JetStream puts on the wire.
//!
//! Why: clients differ in what they send for "unset" (jsm.go omits, nats-py may send `null`,
//! others send `0`/`""`); Go's decoder turns all of these into the zero value, and so must we.

use serde::{Deserialize, Deserializer};

/// Deserialize a present-but-`null` field as its `Default`, like Go's `encoding/json` does.
/// (A missing field is handled by the container's `#[serde(default)]`.)
pub(crate) fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

pub(crate) fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

pub(crate) fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

pub(crate) fn is_zero_u64(value: &u64) -> bool {
    *value == 0
}

pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

/// Defines a fieldless enum that travels as a JSON string. Parsing is case-insensitive
/// (nats-server lower-cases some of these, and being lenient costs nothing); extra accepted
/// spellings go after `|`. An unknown spelling is a decode error, which the API layer reports
/// as `10025 invalid JSON`, as nats-server does.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $json:literal $(| $alias:literal)* ),+ $(,)?
        }
        default = $default:ident;
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl Default for $name {
            fn default() -> Self {
                Self::$default
            }
        }

        impl $name {
            /// The exact JSON spelling nats-server emits.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $json ),+
                }
            }

            /// Parses a JSON spelling (case-insensitive, aliases accepted).
            pub fn parse(text: &str) -> Option<Self> {
                $(
                    if text.eq_ignore_ascii_case($json) $(|| text.eq_ignore_ascii_case($alias))* {
                        return Some(Self::$variant);
                    }
                )+
                None
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                Self::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "unknown {} {:?}",
                        stringify!($name),
                        text
                    ))
                })
            }
        }
    };
}

pub(crate) use wire_enum;
