//! One feature gate's registry entry: name, default, stage, lock. The types of the generated
//! per-minor tables (`table/v1_<minor>.rs`).

/// Maturity of a feature gate; also the `stage` label of `kubernetes_feature_enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

impl Stage {
    /// The label value upstream uses (GA is the empty string).
    pub fn label(self) -> &'static str {
        match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "",
            Stage::Deprecated => "DEPRECATED",
        }
    }
}

/// One known gate: name, default at its minor, stage, and whether it is locked to its default.
#[derive(Clone, Copy, Debug)]
pub struct GateSpec {
    pub name: &'static str,
    pub default: bool,
    pub stage: Stage,
    pub locked: bool,
}

pub const fn gate(name: &'static str, default: bool, stage: Stage, locked: bool) -> GateSpec {
    GateSpec {
        name,
        default,
        stage,
        locked,
    }
}
