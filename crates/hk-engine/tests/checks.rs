//! Test binary `checks` of hk-engine: the repo's reading against the real
//! ansible-inventory and kustomize (inventory parity, the Flux tree), the parity and live
//! rules. One binary for these files (Cargo.toml: `autotests = false`).

mod check_flux;
mod check_gather;
mod check_parity;
mod check_sample;
mod inventory_parity;
mod live_rules;
mod vault_scan;
