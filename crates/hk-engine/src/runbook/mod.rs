//! PURE: runbooks as data, their validation, the planner and the run state machine.
//! Must not: do IO (files are read by the caller and passed in as text), spawn, or draw.
pub mod embedded;
pub mod gate;
pub mod machine;
pub mod plan;
pub mod schema;
pub mod validate;
