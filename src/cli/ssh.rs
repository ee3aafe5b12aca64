//! `ssh trust`: a host's key appended to known_hosts only after the operator types `yes`.

use std::path::Path;

use super::{load_repo, Cli, CmdResult, Failure, Status};

pub(super) fn ssh_trust(
    cli: &Cli,
    runtime: &tokio::runtime::Runtime,
    host: &str,
    target: Option<&Path>,
) -> CmdResult {
    use crate::exec::ssh::{trust_host, TrustOutcome};
    let repo = load_repo(cli)?;
    let settings = crate::context::connect_settings(&repo, host)?;
    let mut options = crate::context::ssh_options(&repo);
    let target = match target {
        Some(t) => {
            // The file being appended to is also one the verdict must consult.
            if !options.known_hosts.iter().any(|k| k == t) {
                options.known_hosts.push(t.to_path_buf());
            }
            t.to_path_buf()
        }
        None => options
            .known_hosts
            .first()
            .cloned()
            .ok_or_else(|| Failure::msg("no known_hosts file to append to"))?,
    };
    let where_ = format!(
        "{} ({}:{})",
        settings.host_alias, settings.address, settings.port
    );
    let outcome = runtime.block_on(trust_host(&settings, &options, &target, |scanned| {
        errln!("{where_} presents {}", scanned.fingerprint);
        eprint!("Type yes to append it to {}: ", target.display());
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer).is_ok() && answer.trim() == "yes"
    }))?;
    match outcome {
        TrustOutcome::AlreadyTrusted { fingerprint } => {
            outln!("{where_}: {fingerprint} is already trusted; nothing written");
            Ok(Status::Clean)
        }
        TrustOutcome::Appended { fingerprint, .. } => {
            outln!("{where_}: {fingerprint} appended to {}", target.display());
            Ok(Status::Clean)
        }
        TrustOutcome::Declined { fingerprint } => {
            outln!("{where_}: {fingerprint} NOT trusted (you did not type yes); nothing written");
            Ok(Status::Violations)
        }
        TrustOutcome::Changed { fingerprint, expected } => Err(Failure::msg(format!(
            "{where_}: HOST KEY CHANGED: it presents {fingerprint}, but {expected}\n  hint: if the host was rebuilt, remove the old entry by hand (ssh-keygen -R), then trust again"
        ))),
    }
}
