//! The protobuf wire format: the media types, the magic prefix, and reading fields and
//! scalar values of a message.

/// The media type to ask for.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a watch stream in protobuf.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The prefix of every protobuf-encoded object.
pub(super) const MAGIC: &[u8; 4] = b"k8s\0";

/// What went wrong decoding a protobuf message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("protobuf: {0}")]
pub struct DecodeError(String);

impl DecodeError {
    pub(super) fn new(what: impl Into<String>) -> Self {
        DecodeError(what.into())
    }
}

pub(super) type Result<T> = std::result::Result<T, DecodeError>;

/// A field's value as it appears on the wire.
pub(super) enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// Fixed 32- and 64-bit values: no field read here has one; skipped.
    Fixed,
}

/// Reads the fields of one message in order.
pub(super) struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Fields { buf }
    }

    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| DecodeError::new("truncated varint"))?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::new("varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(DecodeError::new(format!(
                "field of {n} bytes with {} left",
                self.buf.len()
            )));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next field: its number and value; `None` at the end of the message.
    pub(super) fn next(&mut self) -> Result<Option<(u64, Value<'a>)>> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| DecodeError::new("length does not fit in memory"))?;
                Value::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed
            }
            other => return Err(DecodeError::new(format!("unsupported wire type {other}"))),
        };
        Ok(Some((key >> 3, value)))
    }
}

pub(super) fn bytes<'a>(v: Value<'a>, field: &str) -> Result<&'a [u8]> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => Err(DecodeError::new(format!(
            "{field}: expected a length-delimited value"
        ))),
    }
}

pub(super) fn string(v: Value<'_>, field: &str) -> Result<String> {
    let b = bytes(v, field)?;
    String::from_utf8(b.to_vec()).map_err(|_| DecodeError::new(format!("{field}: not UTF-8")))
}

pub(super) fn varint(v: Value<'_>, field: &str) -> Result<u64> {
    match v {
        Value::Varint(n) => Ok(n),
        _ => Err(DecodeError::new(format!("{field}: expected a varint"))),
    }
}

/// int32 and int64 are sent as the two's complement of the 64-bit value.
pub(super) fn int64(v: Value<'_>, field: &str) -> Result<i64> {
    Ok(varint(v, field)? as i64)
}

pub(super) fn int32(v: Value<'_>, field: &str) -> Result<i32> {
    Ok(int64(v, field)? as i32)
}

pub(super) fn boolean(v: Value<'_>, field: &str) -> Result<bool> {
    Ok(varint(v, field)? != 0)
}

/// Go's `omitempty` for a string: empty is absent.
pub(super) fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// `omitempty` for a list: empty is absent. Otherwise `v` with its spare capacity freed: a decoded list is
/// kept as long as its object is cached, and pushing grows it to the next power of two.
pub(super) fn non_empty_vec<T>(mut v: Vec<T>) -> Option<Vec<T>> {
    v.shrink_to_fit();
    (!v.is_empty()).then_some(v)
}
