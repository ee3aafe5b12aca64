//! The infra repo as data. Owns: reading `hk-console.yaml`, the Ansible inventory and its
//! vars files, Flux overlays and templates; resolving Jinja; deriving environments.
//! Must not: run ansible, talk to hosts, or decrypt vaulted files.
pub mod config;
pub mod env;
pub mod flux;
pub mod inventory;
pub mod listing;
pub mod resolve;
pub mod vars;
