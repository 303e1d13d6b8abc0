//! The shape of the pod schema table (`pod_schema`, generated): messages, their
//! fields and what each field holds.

/// One protobuf message: its fields sorted by JSON name.
pub struct Message {
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// One field of a message.
pub struct Field {
    /// The field's name in JSON (and in `generated.proto`).
    pub json: &'static str,
    pub number: u32,
    pub kind: Kind,
    pub repeated: bool,
    /// JSON writes this message's fields into the parent object.
    pub inline: bool,
}

/// What a field holds.
pub enum Kind {
    Str,
    Bool,
    /// `int32` or `int64`: both are varints of the two's complement 64-bit value.
    Int,
    Quantity,
    IntOrString,
    /// A message of the table (`pod_schema::MESSAGES`), by index.
    Message(usize),
    /// `map<string, V>`.
    Map(&'static Kind),
    /// A type the encoder does not write; a value of it makes the encoding fail.
    Unsupported,
}
