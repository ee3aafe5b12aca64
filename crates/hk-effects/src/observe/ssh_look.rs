//! The read-only SSH path the live looks over SSH share (the VPN egress look, the etcd look):
//! one executor to their hosts built as the console builds its own (hostvars, then
//! `~/.ssh/config`, the repo's vaulted values masked), the fallback when `~/.ssh/config`
//! cannot be read, and one read-only command run as a runbook `ssh` step with
//! `mutates: false` runs. Must not: run a mutating command (only `Executor<ReadOnly>`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::exec::settings::{SshConfig, SshDefaults};
use crate::exec::{
    self, AnsibleRunner, Classified, CommandOutput, Executor, ReadOnly, RunOptions, SshOptions,
    SshPool, StepOutcome,
};
use hk_engine::repo::Repo;
use hk_engine::runbook::plan::{Expect, PlannedStep, StepKind};

use crate::exec::ssh::shell_quote;

/// One argv as a command line for the remote shell: every word quoted, so nothing in a
/// hostvar is interpreted there.
pub fn remote_command(argv: &[String]) -> String {
    argv.iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A read-only executor over SSH to `hosts`, connecting as the console does (hostvars, then
/// `~/.ssh/config`), its output masked with the repo's vaulted values; and the hosts it
/// could not settle, each with why. The VPN look and the etcd look both poll this way.
pub(crate) fn read_only_ssh(
    repo: &Repo,
    ssh: SshOptions,
    hosts: Vec<String>,
    ssh_config: &SshConfig,
    defaults: &SshDefaults,
) -> (Executor<ReadOnly>, BTreeMap<String, String>) {
    let pool = Arc::new(SshPool::new(ssh));
    let mut unreachable = BTreeMap::new();
    for host in hosts {
        match crate::context::connect_settings_with(repo, &host, ssh_config, defaults) {
            Ok(s) => pool.add_host(s),
            Err(e) => {
                unreachable.insert(host, e.to_string());
            }
        }
    }
    let redactor = crate::vault_script::scan_repo(repo).redactor();
    let exec = Executor::read_only(pool, AnsibleRunner::from_env(), redactor);
    (exec, unreachable)
}

/// One read-only command of a look (the VPN look's, the etcd look's), run the path a runbook
/// `ssh` step with `mutates: false` takes: planned, classified, then `Executor::run`.
pub(crate) struct ReadOnlyLook {
    /// The step id and the title's prefix the look's steps carry.
    pub id: &'static str,
    pub title: &'static str,
    pub timeout: Duration,
}

impl ReadOnlyLook {
    pub(crate) async fn run(
        &self,
        exec: &Executor<ReadOnly>,
        host: &str,
        argv: &[String],
        cancel: &CancellationToken,
    ) -> Result<CommandOutput, String> {
        let step = PlannedStep {
            n: 0,
            id: self.id.into(),
            kind: StepKind::Ssh,
            host: Some(host.to_string()),
            mutates: false,
            gate: None,
            command: Some(vec!["ssh".into(), host.to_string(), remote_command(argv)]),
            expect: Some(Expect {
                timeout_s: Some(self.timeout.as_secs().max(1)),
                ..Expect::default()
            }),
            title: format!("{}: {}", self.title, argv.join(" ")),
            cwd: None,
            source: None,
            blast_radius: None,
            declared_read_only: None,
        };
        let Classified::ReadOnly(step) = exec::classify(&step).map_err(|e| e.to_string())? else {
            return Err(format!("{host}: `{}` is not read-only", argv.join(" ")));
        };
        let opts = RunOptions {
            cancel: cancel.clone(),
            ..RunOptions::default()
        };
        match exec.run(&step, &opts).await {
            Ok(StepOutcome::Ssh(out)) => Ok(out),
            Ok(StepOutcome::Ansible { .. }) => Err(format!("{host}: not an SSH outcome")),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Builds a look with the operator's `~/.ssh/config`; when that file cannot be read, builds it
/// without and marks every one of `hosts` unreachable with the reason, rather than dial an
/// address the operator did not mean. The VPN look and the etcd look both start this way.
pub(crate) fn with_ssh_config<T>(
    hosts: impl FnOnce() -> Vec<String>,
    build: impl FnOnce(&SshConfig, &SshDefaults) -> T,
    unreachable: impl FnOnce(&mut T) -> &mut BTreeMap<String, String>,
) -> T {
    let defaults = SshDefaults::from_env();
    match crate::context::load_ssh_config(&defaults) {
        Ok(config) => build(&config, &defaults),
        Err(e) => {
            let mut look = build(&SshConfig::empty(), &defaults);
            let marks = unreachable(&mut look);
            for host in hosts() {
                marks.insert(host.clone(), format!("{host}: {e}"));
            }
            look
        }
    }
}

/// The first line of stderr, bounded, for a message.
pub(super) fn stderr_line(out: &CommandOutput) -> String {
    let line = out
        .stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no error output");
    line.chars().take(200).collect()
}

/// Why a read-only command that ran did not give what was asked, naming the host and the
/// command (the etcd look's and the VPN look's wording).
pub(super) fn failed(host: &str, argv: &[String], out: &CommandOutput) -> String {
    let how = match (&out.exit_status, &out.exit_signal) {
        (_, Some(sig)) => format!("ended by signal {sig}"),
        (Some(code), None) => format!("exited {code}"),
        (None, None) => "reported no exit status".to_string(),
    };
    format!("{host}: `{}` {how}: {}", argv.join(" "), stderr_line(out))
}
