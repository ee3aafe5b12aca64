//! PURE rules over the repo model. Owns: findings (rule, severity, env, file:line, message).
//! Must not: read files or talk to hosts; callers load the model and pass it in.
pub mod parity;
