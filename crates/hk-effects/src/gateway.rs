//! What to look at on a VPN egress gateway: its tunnel's unit, interface and exit-IP URL,
//! from hk-console.yaml `names:` (the environment's, else the top level's), else the host's
//! rendered hostvars, else the seed repo's names. Shared by the VPN look (`observe::vpn`) and
//! the planner's `env.vpn_*` (`context`), so both resolve the same names one way.
//!
//! Must not: connect anywhere, or know any particular homelab.

use hk_engine::repo::config::NameKey;
use hk_engine::repo::Repo;

use crate::hostvar::{check_word, http_url, string_var, HostVarError};

/// The hostvar naming the tunnel's systemd unit.
pub const VAR_SERVICE: &str = "vpn_egress_gateway_service";
/// The hostvar naming the tunnel interface.
pub const VAR_INTERFACE: &str = "vpn_egress_gateway_interface";
/// The hostvar naming the URL that answers with the caller's public IP.
pub const VAR_EXIT_IP_URL: &str = "vpn_egress_gateway_exit_ip_url";
/// The seed repo's names, the defaults of hk-console.yaml `names.vpn_unit` /
/// `names.vpn_interface` / `names.vpn_exit_ip_url` (defined once, in the config; used
/// only where neither hk-console.yaml nor the gateway's hostvars name one).
pub use hk_engine::repo::config::{
    DEFAULT_VPN_EXIT_IP_URL as DEFAULT_EXIT_IP_URL, DEFAULT_VPN_INTERFACE as DEFAULT_INTERFACE,
    DEFAULT_VPN_UNIT as DEFAULT_SERVICE,
};

/// What to look at on one gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySpec {
    pub env: String,
    pub host: String,
    pub service: String,
    pub interface: String,
    pub exit_ip_url: String,
}

/// What to look at on `host` (a gateway of `env`): hk-console.yaml `names:` (the
/// environment's, else the top level's; checked when the file was read), else the host's
/// rendered hostvars, else the seed repo's names.
pub fn gateway_spec(repo: &Repo, env: &str, host: &str) -> Result<GatewaySpec, HostVarError> {
    let names = repo.environment(env).map(|e| &e.names);
    let named = |k: NameKey, var: &str, default: &str| match names.and_then(|n| n.get(k)) {
        Some(v) => Ok(v.to_string()),
        None => string_var(repo, host, var, default),
    };
    let service = named(NameKey::VpnUnit, VAR_SERVICE, DEFAULT_SERVICE)?;
    let interface = named(NameKey::VpnInterface, VAR_INTERFACE, DEFAULT_INTERFACE)?;
    let exit_ip_url = named(NameKey::VpnExitIpUrl, VAR_EXIT_IP_URL, DEFAULT_EXIT_IP_URL)?;
    check_word(host, VAR_SERVICE, &service)?;
    check_word(host, VAR_INTERFACE, &interface)?;
    check_word(host, VAR_EXIT_IP_URL, &exit_ip_url)?;
    let exit_ip_url = http_url(host, VAR_EXIT_IP_URL, exit_ip_url)?;
    Ok(GatewaySpec {
        env: env.to_string(),
        host: host.to_string(),
        service,
        interface,
        exit_ip_url,
    })
}
