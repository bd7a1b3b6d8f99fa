//! What v1.37's `data`-carrying formats share (`cpu_manager_state` v4, `memory_manager_state`
//! v3): the content is `json.Marshal`ed into a `data` string whose kubelet checksum
//! (`checksum.New(data)`: FNV-32a of `(string)` and the string) is `dataChecksum`; reading
//! decodes the whole file, then `data` into the content, then verifies `dataChecksum` only.

use serde::de::DeserializeOwned;

use super::{ChecksumCheck, checksum_field, verify};
use crate::checksum::kubelet_checksum;
use crate::error::{CheckpointError, Result};
use crate::format::Format;
use crate::gojson::{self, value::GoValue};
use crate::gotype::{CHECKSUM, GoField, GoType, STRING};

/// `Checksum checksum.Checksum \`json:"checksum"\``, every kubelet checkpoint's.
pub(crate) const CHECKSUM_FIELD: GoField = GoField::tagged("Checksum", "checksum", &CHECKSUM);
/// `Data string \`json:"data"\``.
pub(crate) const DATA_FIELD: GoField = GoField::tagged("Data", "data", &STRING);
/// `DataChecksum checksum.Checksum \`json:"dataChecksum"\``.
pub(crate) const DATA_CHECKSUM_FIELD: GoField =
    GoField::tagged("DataChecksum", "dataChecksum", &CHECKSUM);

/// One `data`-carrying format: the file's Go type, where `data` sits in it (`dataChecksum`
/// follows), and the Go type of the content `data` holds.
pub(crate) struct DataFormat {
    pub(crate) format: Format,
    pub(crate) file: &'static GoType,
    pub(crate) data_index: usize,
    pub(crate) content: &'static GoType,
}

/// `dataChecksum` of `data`.
pub(crate) fn data_checksum(data: &str) -> Result<u64> {
    kubelet_checksum(data, &STRING)
}

/// The string `dataChecksum` hashes: `dump.ForHash(data)`.
pub(crate) fn data_hash_input(data: &str) -> Result<String> {
    crate::spew::dump_for_hash(data, &STRING)
}

impl DataFormat {
    /// The file's `data` and `dataChecksum`, if the whole file decodes.
    pub(crate) fn data_field(&self, bytes: &[u8]) -> Result<(String, u64)> {
        let file = self.file;
        let mut value = gojson::unmarshal(bytes, file, GoValue::zero(file), self.format)?;
        let recorded = checksum_field(&value, self.data_index + 1);
        let data = match value.take_field(self.data_index) {
            GoValue::Str(s) => s,
            _ => String::new(),
        };
        Ok((data, recorded))
    }

    /// Reads the file as the kubelet does: the whole file, then `data` into the content
    /// (starting from `initial`, the reader's constructor), then `dataChecksum`.
    pub(crate) fn decode<T: DeserializeOwned>(
        &self,
        bytes: &[u8],
        initial: GoValue,
    ) -> Result<(T, ChecksumCheck)> {
        let (data, recorded) = self.data_field(bytes)?;
        let value = gojson::unmarshal(data.as_bytes(), self.content, initial, self.format)
            .map_err(|e| in_data(e, self.format))?;
        let content = gojson::typed(value, self.content)?;
        let check = verify(self.format, recorded, data_checksum(&data)?)?;
        Ok((content, check))
    }
}

/// In the `impl` of a `data`-carrying checkpoint type that has `fn data(&self)`, its
/// `hash_input`, `checksum` (`dataChecksum`) and `data_field` for the [`DataFormat`]
/// `$format`.
macro_rules! data_checksum_methods {
    ($format:ident) => {
        /// The string `dataChecksum` hashes: `dump.ForHash(data)`.
        pub fn hash_input(&self) -> Result<String> {
            super::data_string::data_hash_input(&self.data()?)
        }

        /// `dataChecksum`.
        pub fn checksum(&self) -> Result<u64> {
            super::data_string::data_checksum(&self.data()?)
        }

        /// The file's `data` and `dataChecksum`, if the file decodes.
        pub(crate) fn data_field(bytes: &[u8]) -> Result<(String, u64)> {
            $format.data_field(bytes)
        }
    };
}
pub(crate) use data_checksum_methods;

/// An error met while reading a `data` string, said to be there.
fn in_data(err: CheckpointError, format: Format) -> CheckpointError {
    match err {
        CheckpointError::Syntax { message, .. } | CheckpointError::Decode { message, .. } => {
            CheckpointError::Decode {
                path: None,
                format,
                message: format!("its data string: {message}"),
            }
        }
        other => other,
    }
}
